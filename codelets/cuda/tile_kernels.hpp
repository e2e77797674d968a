// Pure CUDA tile kernels on cuBLAS/cuSOLVER: no StarPU; the caller passes handles bound to
// its stream and, for factorizations, a device workspace. All calls are asynchronous.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <cstddef>

#include "common/tile_view.hpp"

namespace starfact::cuda {

/// Device bytes potrf needs for an n x n tile.
template <class T>
std::size_t potrf_workspace(cusolverDnHandle_t h, cusolverDnParams_t p, char uplo, TileView<T> A);

/// Cholesky of a device tile (n >= 1); LAPACK's info is written to the device int *dinfo.
/// Returns the cuSOLVER status of the launch.
template <class T>
cusolverStatus_t potrf(cusolverDnHandle_t h, cusolverDnParams_t p, char uplo, TileView<T> A, int* dinfo,
                       void* work, std::size_t work_bytes);

/// After potrf: cuSOLVER, like OpenBLAS, does not test pivots for NaN; reference LAPACK
/// reports the first column whose pivot is NaN. Sets *dinfo = j + 1 for the first NaN
/// diagonal entry of the factor when *dinfo is 0. One small kernel on `stream`.
template <class T>
cudaError_t potrf_nan_info(TileView<const T> A, int* dinfo, cudaStream_t stream);

/// X = the unit lower triangle (or trapezoid) stored strictly below the diagonal of L, L and X of
/// the same shape, written out in full for GEMMs: L's entries below the diagonal, ones on it,
/// zeros above it. LU's L factors and QR's reflectors V are both stored this way. One kernel on
/// `stream`.
template <class T>
cudaError_t explicit_unit_lower(TileView<const T> L, TileView<T> X, cudaStream_t stream);

template <class T>
cublasStatus_t trsm(cublasHandle_t h, char side, char uplo, char transa, char diag, T alpha, TileView<const T> A,
                    TileView<T> B);

template <class T>
cublasStatus_t syrk(cublasHandle_t h, char uplo, char trans, T alpha, TileView<const T> A, T beta, TileView<T> C);

template <class T>
cublasStatus_t gemm(cublasHandle_t h, char transa, char transb, T alpha, TileView<const T> A, TileView<const T> B,
                    T beta, TileView<T> C);

}  // namespace starfact::cuda
