// CUDA twins of codelets/cpu/qr_kernels.hpp: GEQRT, UNMQR, TSQRT, TSMQR with the same
// semantics and storage (V below the diagonal / in the lower tile, T factors ib x K, block J
// holding its b x b upper triangular T in rows 0..b-1 of columns J). cuSOLVER for the
// Householder panels, cuBLAS for the block-reflector applications, our own kernels for the
// T factors and the panel copies. Everything is asynchronous on ctx.stream; no host
// synchronisation, no allocation (the caller provides qr_workspace_bytes() of device memory).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <cstddef>

#include "common/tile_view.hpp"

namespace starfact::cuda {

/// What a CUDA QR kernel needs from its worker: handles bound to `stream` and a device
/// workspace of at least qr_workspace_bytes() bytes.
struct QrContext {
    cublasHandle_t blas;
    cusolverDnHandle_t solver;
    cusolverDnParams_t params;
    cudaStream_t stream;
    void* work;
    std::size_t work_bytes;
};

/// Device workspace any of the four kernels needs for tiles of at most m x n and inner block ib
/// (0 when cuSOLVER cannot tell its buffer size: the kernels then report the workspace short).
template <class T>
std::size_t qr_workspace_bytes(cusolverDnHandle_t solver, cusolverDnParams_t params, int m, int n, int ib);

/// All return cudaSuccess or the first error met (a cuBLAS/cuSOLVER failure maps to
/// cudaErrorUnknown; a workspace too small to cudaErrorInvalidValue).
template <class T>
cudaError_t geqrt(const QrContext& ctx, int ib, TileView<T> A, TileView<T> Tf);

template <class T>
cudaError_t unmqr(const QrContext& ctx, char side, char trans, int ib, TileView<const T> V, TileView<const T> Tf,
                  TileView<T> C);

template <class T>
cudaError_t tsqrt(const QrContext& ctx, int ib, TileView<T> R, TileView<T> A, TileView<T> Tf);

template <class T>
cudaError_t tsmqr(const QrContext& ctx, char trans, int ib, TileView<T> A1, TileView<T> A2, TileView<const T> V2,
                  TileView<const T> Tf);

}  // namespace starfact::cuda
