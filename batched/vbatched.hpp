// Variable-size batches: Cholesky, LU and QR factorizations and solves of many
// matrices of different sizes, on the host (LAPACKE per matrix over threads), directly on a
// CUDA stream (our kernels, batched/cuda/vbatched_kernels.hpp, with the SSDE or DSSE schedule)
// and as StarPU tasks shared between CPU and GPU workers (namespace tasks).
#pragma once

#include <string>
#include <vector>

#include "batched/batched.hpp"

/// @file
/// Conventions, as batched/batched.hpp, with one order n[b] and one leading dimension lda[b]
/// (ldb[b]) per matrix: A[b] is n[b] x n[b], B[b] is n[b] x nrhs. Orders may be 0 (info 0,
/// nothing touched). Arguments are checked before anything runs; a bad one throws
/// starfact::ArgumentError naming it ("count", "n", "lda", "ldb", "nrhs", "A", "B", "info",
/// "device_n", ...) with the first offending index, and no data is read or written.
/// LU pivots: ipiv is an array of count pointers, ipiv[b] to n[b] ints (1-based, LAPACK's).

namespace starfact::batched {

/// The order in which a GPU call factors the matrices of a batch (cuda::Schedule):
/// ssde, same start different ends (all at the first step, small ones done early), or dsse,
/// different starts same end (matrix b starts late enough to finish at the last step).
enum class Schedule { ssde, dsse };

/// A[b] = L L^T (lower) or U^T U (upper) for every b, in that triangle (the other one neither
/// read nor written); host memory, one matrix per thread. info[b]: 0, or the order of the first
/// leading minor that is not positive or is NaN. Returns the number of failing matrices.
template <class T>
int vpotrf(Uplo uplo, const int* n, T* const* A, const int* lda, int* info, int count, const HostOptions& opt = {});

/// Solves A[b] X = B[b] from vpotrf's output (same uplo); B[b] is n[b] x nrhs, overwritten.
template <class T>
void vpotrs(Uplo uplo, const int* n, int nrhs, const T* const* A, const int* lda, T* const* B, const int* ldb,
            int count, const HostOptions& opt = {});

/// A[b] = P L U with partial pivoting (LAPACK's getrf) for every b; host memory, one matrix per
/// thread. info[b]: 0, or the first k with U(k,k) exactly zero (the factorization completes).
/// Returns the number of matrices with info != 0.
template <class T>
int vgetrf(const int* n, T* const* A, const int* lda, int* const* ipiv, int* info, int count,
           const HostOptions& opt = {});

/// Solves A[b] X = B[b] from vgetrf's output; B[b] is n[b] x nrhs (one nrhs for the batch, its
/// own ldb[b]), overwritten by X. The pivots are trusted (as LAPACK's getrs).
template <class T>
void vgetrs(const int* n, int nrhs, const T* const* A, const int* lda, const int* const* ipiv, T* const* B,
            const int* ldb, int count, const HostOptions& opt = {});

/// A[b] = Q[b] R[b] (Householder, LAPACK's geqrf: R on and above the diagonal, the reflectors'
/// v below it, tau[b] their min(m[b], n[b]) scalars) for every b; A[b] is m[b] x n[b] (any
/// shape, lda[b] >= max(1, m[b])); host memory, one matrix per thread. tau[b] may be null when
/// min(m[b], n[b]) is 0.
template <class T>
void vgeqrf(const int* m, const int* n, T* const* A, const int* lda, T* const* tau, int count,
            const HostOptions& opt = {});

/// Least squares min ||A[b] X - B[b]|| for every b (m[b] >= n[b], checked): vgeqrf, then, when
/// R[b] has no exact zero on its diagonal, B[b] (m[b] x nrhs, ldb[b] >= max(1, m[b])) <- Q^T B
/// and its first n[b] rows <- R^{-1} (that), X. info[b]: 0, or the first k with R(k,k) exactly
/// zero (B[b] left as it was, as LAPACK's gels). Returns the number of matrices with info != 0.
template <class T>
int vgels(const int* m, const int* n, int nrhs, T* const* A, const int* lda, T* const* tau, T* const* B, const int* ldb,
          int* info, int count, const HostOptions& opt = {});

#ifdef STARFACT_HAVE_CUDA
/// The sizes of a variable-size batch for a GPU call, twice: host arrays, which the call
/// checks and takes the largest order from (no device read, no synchronization), and device
/// arrays with the same contents, which the kernels read. `ld` is lda, or ldb for B.
struct VSizes {
    const int* n = nullptr;          ///< host, count orders
    const int* ld = nullptr;         ///< host, count leading dimensions
    const int* device_n = nullptr;   ///< device copy of n
    const int* device_ld = nullptr;  ///< device copy of ld
};

/// vpotrf on ctx's stream, asynchronous: A is a device array of device pointers, info a device
/// array (every entry written). Checks every host size first.
template <class T>
void vpotrf(Context& ctx, Uplo uplo, Schedule schedule, const VSizes& a_sizes, T* const* A, int* info, int count);

/// vpotrs on ctx's stream: b_sizes.n must equal a_sizes.n (checked), b_sizes.ld is ldb.
template <class T>
void vpotrs(Context& ctx, Uplo uplo, const VSizes& a_sizes, int nrhs, const T* const* A, const VSizes& b_sizes,
            T* const* B, int count);

/// vgetrf on ctx's stream, asynchronous (batched/cuda/vgetrf.cu): A and ipiv are device arrays
/// of device pointers, info a device array (every entry written). Checks every host size first.
template <class T>
void vgetrf(Context& ctx, Schedule schedule, const VSizes& a_sizes, T* const* A, int* const* ipiv, int* info,
            int count);

/// vgetrs on ctx's stream: b_sizes.n must equal a_sizes.n (checked), b_sizes.ld is ldb.
template <class T>
void vgetrs(Context& ctx, const VSizes& a_sizes, int nrhs, const T* const* A, const int* const* ipiv,
            const VSizes& b_sizes, T* const* B, int count);

/// The shapes of a variable-size batch of rectangular matrices for a GPU call, host and device
/// copies as VSizes: m[b] x n[b], leading dimension ld[b] >= max(1, m[b]).
struct VShapes {
    const int* m = nullptr;
    const int* n = nullptr;
    const int* ld = nullptr;
    const int* device_m = nullptr;
    const int* device_n = nullptr;
    const int* device_ld = nullptr;
};

/// vgeqrf on ctx's stream, asynchronous (batched/cuda/vgeqrf.cu): A and tau are device arrays
/// of device pointers (tau[b] to min(m[b], n[b]) entries). Checks every host size first.
template <class T>
void vgeqrf(Context& ctx, Schedule schedule, const VShapes& a_shapes, T* const* A, T* const* tau, int count);

/// vgels on ctx's stream (m[b] >= n[b], checked): vgeqrf, then the solve; b_sizes.n must equal
/// a_shapes.m (B[b] has m[b] rows), b_sizes.ld is ldb; info a device array (every entry written).
template <class T>
void vgels(Context& ctx, Schedule schedule, const VShapes& a_shapes, int nrhs, T* const* A, T* const* tau,
           const VSizes& b_sizes, T* const* B, int* info, int count);
#endif

// StarPU tasks (batched/vtasks.cc): a variable-size batch in host memory, cut into slices of
// consecutive matrices with about equal flops (not equal counts), each slice packed into one
// contiguous buffer per array (every matrix with leading dimension max(1, rows)), registered
// with StarPU and given to one task of the variable-size codelet; the scheduler runs a task on
// a CPU worker (LAPACKE per matrix) or a CUDA worker (the SSDE/DSSE kernels above), and the
// results are unpacked into the caller's matrices after the wait. Same arguments, checks and
// results as the host path; needs a started starfact::Runtime.
namespace tasks {

struct VTaskOptions {
    int slices = 0;                      ///< tasks per batch; 0: default_slices(count)
    Schedule schedule = Schedule::dsse;  ///< the kernels' schedule on a CUDA worker
};

/// Where the slices of a batch with these per-matrix flops begin and end: indices from 0 to
/// count, cut where the running sum of flops crosses s / slices of the total (equal counts when
/// every matrix has 0 flops). At most `slices` slices, none empty (so fewer may come back;
/// none, {0}, for an empty batch).
std::vector<int> vslice_bounds(const std::vector<double>& flops, int slices);

/// The performance-model symbols of the variable-size codelet ("starfact_vbatched_<op>_<s|d>").
std::vector<std::string> vperfmodel_symbols();

template <class T>
int vpotrf(Uplo uplo, const int* n, T* const* A, const int* lda, int* info, int count, const VTaskOptions& opt = {});
template <class T>
void vpotrs(Uplo uplo, const int* n, int nrhs, const T* const* A, const int* lda, T* const* B, const int* ldb,
            int count, const VTaskOptions& opt = {});
template <class T>
int vgetrf(const int* n, T* const* A, const int* lda, int* const* ipiv, int* info, int count,
           const VTaskOptions& opt = {});
template <class T>
void vgetrs(const int* n, int nrhs, const T* const* A, const int* lda, const int* const* ipiv, T* const* B,
            const int* ldb, int count, const VTaskOptions& opt = {});
template <class T>
void vgeqrf(const int* m, const int* n, T* const* A, const int* lda, T* const* tau, int count,
            const VTaskOptions& opt = {});
template <class T>
int vgels(const int* m, const int* n, int nrhs, T* const* A, const int* lda, T* const* tau, T* const* B, const int* ldb,
          int* info, int count, const VTaskOptions& opt = {});

}  // namespace tasks

}  // namespace starfact::batched
