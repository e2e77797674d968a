// Variable-size batches (issue 6): Cholesky and LU factorizations and solves of many matrices of
// different orders, on the host (LAPACKE per matrix over threads) and directly on a CUDA
// stream (our kernels, batched/cuda/vbatched_kernels.hpp, with the SSDE or DSSE schedule).
#pragma once

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
#endif

}  // namespace starfact::batched
