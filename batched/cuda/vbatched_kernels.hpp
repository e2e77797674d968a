// The variable-size batched CUDA kernels: Cholesky, LU and QR factorizations and solves
// of many matrices of different orders at once. Same conventions as batched/cuda/kernels.hpp (device
// pointer arrays, Launch, LAPACK info), except that every matrix b has its own order n[b] and
// leading dimension lda[b], read from device arrays; the host passes the largest order nmax
// (launches are sized for it; the blocks of smaller matrices leave early) and trusts
// n[b] <= nmax, lda[b] >= max(1, n[b]) (the API in batched/vbatched.hpp checks them).
//
// The factorization goes by steps of kVBlock columns (batches of small matrices are factored in
// one pass instead, by the fixed-size register kernels: orders up to 32 for vpotrf and vgetrf,
// shapes up to 64 x 32 for vgeqrf). At step s a matrix factors its diagonal
// block (left-looking: the block minus the product of the rows already factored), then the
// rows below it (the same update, then a triangular solve with the new diagonal block); one
// launch of each kind per step serves the whole batch, ceil(nmax / kVBlock) steps in all.
// Matrix b needs vsteps(n[b]) of them; the Schedule says when it starts:
// - ssde (same start, different ends): every matrix at step 0, small ones finish early;
// - dsse (different starts, same end): matrix b at step vsteps(nmax) - vsteps(n[b]), so all
//   finish at the last step and the late, expensive steps of the large matrices share the GPU
//   with the many small ones.
#pragma once

#include "batched/cuda/kernels.hpp"

namespace starfact::batched::cuda {

enum class Schedule { ssde, dsse };

/// Columns per step of the variable-size factorization.
constexpr int kVBlock = 32;

/// Steps a matrix of order n needs (0 for n <= 0).
__host__ __device__ constexpr int vsteps(int n) { return n <= 0 ? 0 : (n + kVBlock - 1) / kVBlock; }

/// The step at which a matrix of order n starts in a batch whose largest order is nmax.
__host__ __device__ constexpr int vfirst_step(Schedule s, int nmax, int n) {
    return s == Schedule::dsse ? vsteps(nmax) - vsteps(n) : 0;
}

/// Where a matrix of shape m x n stands at `step` of vgeqrf (k = min(m, n) columns by steps of
/// kVBlock, started as the schedule says in a batch whose largest k is kmax): the column block
/// c0 its panel starts at and the panel's width iw; false when it has nothing to do there.
__host__ __device__ constexpr bool vqr_panel_at(Schedule s, int kmax, int step, int m, int n, int& c0, int& iw) {
    const int k = m < n ? m : n;
    const int j = step - vfirst_step(s, kmax, k);
    if (j < 0 || j >= vsteps(k)) return false;
    c0 = j * kVBlock;
    iw = k - c0 < kVBlock ? k - c0 : kVBlock;
    return true;
}

/// Bytes of workspace vpotrf needs (0: it uses none; kept for the convention).
template <class T>
std::size_t vpotrf_workspace(int nmax, int count);

/// A[b] = L L^T (lower: reads and writes the lower triangle of the leading n[b] x n[b] block)
/// or U^T U (upper), for every b < count; the other triangle is neither read nor written.
/// info[b] (written for every b): 0, or k when the leading minor of order k is not positive
/// or is NaN (the factorization of that matrix stops there, its leading k-1 columns final).
/// n: count orders (device), lda: count leading dimensions (device), nmax >= every n[b].
template <class T>
void vpotrf(const Launch& launch, Uplo uplo, Schedule schedule, int nmax, const int* n, T* const* A, const int* lda,
            int* info, int count);

/// Bytes of workspace vpotrs needs (0: it uses none).
template <class T>
std::size_t vpotrs_workspace(int nmax, int nrhs, int count);

/// Solves A[b] X = B[b] from vpotrf's output (same uplo) for every b: B[b] is n[b] x nrhs with
/// leading dimension ldb[b] (device array, ldb[b] >= max(1, n[b])), overwritten by X. One
/// launch; each thread block solves up to 16 right-hand sides of one matrix.
template <class T>
void vpotrs(const Launch& launch, Uplo uplo, int nmax, const int* n, int nrhs, const T* const* A, const int* lda,
            T* const* B, const int* ldb, int count);

/// Bytes of workspace vgetrf needs: the interchange lists, 132 ints per matrix.
template <class T>
std::size_t vgetrf_workspace(int nmax, int count);

/// A[b] = P L U with partial pivoting (L unit lower, overwrites the leading n[b] x n[b] block of
/// A[b] as LAPACK's getrf), for every b < count: with nmax <= 32 in one pass by the fixed-size
/// register kernel (both schedules the same launch), else by steps of kVBlock columns (vgetrf.cu).
/// ipiv: count device pointers, ipiv[b] to n[b] ints (1-based, LAPACK's). info[b] (written for
/// every b): 0, or the first k with U(k,k) exactly zero; the factorization still completes.
/// A NaN is taken as a pivot only when nothing but zeros and NaNs is left in its column; it
/// spreads through its own matrix only, whose pivots stay in range.
template <class T>
void vgetrf(const Launch& launch, Schedule schedule, int nmax, const int* n, T* const* A, const int* lda,
            int* const* ipiv, int* info, int count);

/// Bytes of workspace vgetrs needs (0: it uses none).
template <class T>
std::size_t vgetrs_workspace(int nmax, int nrhs, int count);

/// Solves A[b] X = B[b] (no transpose) from vgetrf's output for every b: B[b] is n[b] x nrhs
/// with leading dimension ldb[b] (device array), overwritten by X. One launch.
template <class T>
void vgetrs(const Launch& launch, int nmax, const int* n, int nrhs, const T* const* A, const int* lda,
            const int* const* ipiv, T* const* B, const int* ldb, int count);

// ---- Householder QR of m[b] x n[b] matrices (vgeqrf.cu) -------------------------------------

/// What the host knows of a QR batch's shapes, for sizing launches: the largest m, n and
/// k = min(m, n), and the largest m - k and n - k (under dsse they bound the rows and columns a
/// matrix has left at a step).
struct VQrBounds {
    int mmax = 0, nmax = 0, kmax = 0, mexcess = 0, nexcess = 0;
};

/// The bounds of count host shapes (non-negative).
inline VQrBounds vqr_bounds(const int* m, const int* n, int count) {
    VQrBounds q;
    for (int b = 0; b < count; ++b) {
        const int k = m[b] < n[b] ? m[b] : n[b];
        q.mmax = m[b] > q.mmax ? m[b] : q.mmax;
        q.nmax = n[b] > q.nmax ? n[b] : q.nmax;
        q.kmax = k > q.kmax ? k : q.kmax;
        q.mexcess = m[b] - k > q.mexcess ? m[b] - k : q.mexcess;
        q.nexcess = n[b] - k > q.nexcess ? n[b] - k : q.nexcess;
    }
    return q;
}

/// Bytes of workspace vgeqrf needs: one kVBlock x kVBlock block reflector factor T per matrix.
template <class T>
std::size_t vgeqrf_workspace(int count);

/// A[b] = Q R (LAPACK's geqrf: R on and above the diagonal, the reflectors below it, tau[b] their
/// min(m[b], n[b]) scalars, LAPACK's larfg conventions) for every b < count. Batches of matrices
/// up to 64 x 32 go to the fixed-size one-pass small kernel (geqrf.cu); others by steps of kVBlock
/// columns with the schedule counted on k = min(m, n): a panel kernel per step (one thread
/// block per matrix: the panel's reflectors and its T), then an update kernel (one thread block
/// per matrix and 32 trailing columns: C -= V (T^T (V^T C))). m, n, lda: device arrays; the
/// bounds from the same sizes on the host (vqr_bounds).
template <class T>
void vgeqrf(const Launch& launch, Schedule schedule, const VQrBounds& bounds, const int* m, const int* n, T* const* A,
            const int* lda, T* const* tau, int count);

/// The least-squares solve after vgeqrf (m[b] >= n[b]) for every b: info[b] (written for every
/// b) the first k with R(k,k) exactly zero, else 0 and B[b] (m[b] x nrhs, ldb[b]) <- Q^T B, then
/// its first n[b] rows <- R^{-1} (those rows). A matrix with info != 0 or n[b] = 0 keeps its B.
/// One warp per (matrix, right-hand side).
template <class T>
void vgeqrs(const Launch& launch, const VQrBounds& bounds, const int* m, const int* n, int nrhs, const T* const* A,
            const int* lda, const T* const* tau, T* const* B, const int* ldb, int* info, int count);

// ---- slices of the variable-size codelet (vslice.cu) -------------------------------------------

/// One matrix of a packed slice (batched/vcodelet.hpp): its shape and where its A, B and pivots
/// or tau start in the slice's packed buffers (in elements); leading dimensions max(1, m).
struct VSliceEntry {
    int m, n;
    long long a, b, p;
};

/// From count entries (device), the device arrays the kernels take: m, n, lda (= ldb) and the
/// pointers into the packed buffers A (elements of a_elem bytes), B, P (p_elem bytes); an
/// output array may be null (not written), so may a base whose pointers are not wanted.
void vslice_arrays(const VSliceEntry* entries, int count, char* A, char* B, std::size_t a_elem, char* P,
                   std::size_t p_elem, int* m, int* n, int* ld, void** pa, void** pb, void** pp, cudaStream_t stream);

}  // namespace starfact::batched::cuda
