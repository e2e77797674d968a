// The batched CUDA kernels: LU, Cholesky and QR of many small matrices at once, and
// their solves. This is the layer below the public API (batched/batched.hpp): it takes device
// pointers and a Launch, trusts its arguments (the API checks them before any launch), and
// never allocates or synchronizes. Every matrix is column-major; matrix b of a batch is A[b]
// (an array of `count` device pointers, itself in device memory).
//
// Conventions, as LAPACK:
// - ipiv: count * n ints in device memory, matrix b's pivots at ipiv + b * n, 1-based.
// - tau: count * min(m, n) scalars, matrix b's at tau + b * min(m, n).
// - info: count ints in device memory, every entry written by the call: 0, or k > 0 when
//   U(k,k) is exactly zero (getrf: the factorization still completes), the leading minor of
//   order k is not positive (potrf: the factorization stops there, as LAPACK's), or R(k,k) is
//   exactly zero (geqrs: that matrix's right-hand sides are left as they were).
// - A NaN or Inf in one matrix affects that matrix only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "batched/uplo.hpp"

namespace starfact::batched::cuda {

/// What a launch needs. `cublas` is bound to `stream` by the caller. `workspace` points to
/// device memory of at least the bytes the routine's *_workspace function asks for, 256-byte
/// aligned; it may be null when that is 0.
struct Launch {
    cudaStream_t stream = nullptr;
    cublasHandle_t cublas = nullptr;
    void* workspace = nullptr;
    std::size_t workspace_bytes = 0;
};

/// The public API's Uplo (batched/uplo.hpp): both layers take the same type.
using batched::Uplo;

// ---- LU with partial pivoting (square) ----------------------------------------------------

template <class T>
std::size_t getrf_workspace(int n, int count);
/// A[b] = P L U, L unit lower, overwrites A[b] with L and U as LAPACK's getrf.
template <class T>
void getrf(const Launch& launch, int n, T* const* A, int lda, int* ipiv, int* info, int count);

template <class T>
std::size_t getrs_workspace(int n, int nrhs, int count);
/// Solves A[b] X = B[b] (no transpose) from getrf's output; B[b] is n x nrhs, overwritten by X.
template <class T>
void getrs(const Launch& launch, int n, int nrhs, const T* const* A, int lda, const int* ipiv, T* const* B,
           int ldb, int count);

// ---- Cholesky ------------------------------------------------------------------------------

template <class T>
std::size_t potrf_workspace(int n, int count);
/// A[b] = L L^T (lower: reads and writes the lower triangle) or U^T U (upper: the upper one).
/// The other triangle is neither read nor written.
template <class T>
void potrf(const Launch& launch, Uplo uplo, int n, T* const* A, int lda, int* info, int count);
/// potrf on a strided batch: the same, with the caller's promise that A[b] == base + b * stride
/// for every b, which lets the recursion's single gemms go to cuBLAS's strided batched gemm
/// (no pointer arrays, slightly faster: docs/batched.md, "Fixed sizes against the vendor
/// libraries").
/// Same workspace as potrf.
template <class T>
void potrf_strided(const Launch& launch, Uplo uplo, int n, T* const* A, T* base, long long stride, int lda, int* info,
                   int count);

template <class T>
std::size_t potrs_workspace(int n, int nrhs, int count);
/// Solves A[b] X = B[b] from potrf's output; B[b] is n x nrhs, overwritten by X.
template <class T>
void potrs(const Launch& launch, Uplo uplo, int n, int nrhs, const T* const* A, int lda, T* const* B, int ldb,
           int count);
/// potrs's kernel for orders above 32: automatic (block-wide solve up to 4 right-hand sides,
/// the recursion above), the block-wide solve wherever its columns fit in shared memory, or the
/// recursion. For tests and benchmarks: process-wide, it overrides STARFACT_BATCHED_POTRS until
/// set back to automatic.
enum class PotrsPath { automatic, block, recursive };
void set_potrs_path(PotrsPath path);

// ---- Householder QR (m >= n) ----------------------------------------------------------------

template <class T>
std::size_t geqrf_workspace(int m, int n, int count);
/// A[b] = Q R as LAPACK's geqrf: R in the upper triangle, the reflectors' vectors below the
/// diagonal (unit first entry implied), their scalars in tau. Requires m >= n.
template <class T>
void geqrf(const Launch& launch, int m, int n, T* const* A, int lda, T* tau, int count);

template <class T>
std::size_t geqrs_workspace(int m, int n, int nrhs, int count);
/// Least squares from geqrf's output: B[b] (m x nrhs) <- Q^T B[b], then rows 0..n-1 <- R^{-1}
/// of themselves, so they hold the minimizer of ||A[b] x - b||_2; rows n..m-1 hold the
/// residual's components. info[b] = k when R(k,k) is exactly zero (B[b] then untouched).
template <class T>
void geqrs(const Launch& launch, int m, int n, int nrhs, const T* const* A, int lda, const T* tau, T* const* B,
           int ldb, int* info, int count);

// ---- Helpers for callers with strided batches -----------------------------------------------

/// out[b] = base + b * stride for b < count (device array `out`), on `stream`.
template <class T>
void strided_pointers(T** out, T* base, long long stride, int count, cudaStream_t stream);

}  // namespace starfact::batched::cuda
