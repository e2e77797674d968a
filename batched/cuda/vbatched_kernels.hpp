// The variable-size batched CUDA kernels (issue 6): Cholesky and LU factorizations and solves
// of many matrices of different orders at once. Same conventions as batched/cuda/kernels.hpp (device
// pointer arrays, Launch, LAPACK info), except that every matrix b has its own order n[b] and
// leading dimension lda[b], read from device arrays; the host passes the largest order nmax
// (launches are sized for it; the blocks of smaller matrices leave early) and trusts
// n[b] <= nmax, lda[b] >= max(1, n[b]) (the API in batched/vbatched.hpp checks them).
//
// The factorization goes by steps of kVBlock columns. At step s a matrix factors its diagonal
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
/// A[b] as LAPACK's getrf), for every b < count, by steps of kVBlock columns (vgetrf.cu).
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

}  // namespace starfact::batched::cuda
