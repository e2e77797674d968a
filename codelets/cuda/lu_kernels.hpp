// CUDA twins of codelets/cpu/lu_kernels.hpp (same semantics, same storage, pivots and info
// as int32 in device memory). cuBLAS for the triangular solves and GEMMs, cuSOLVER for
// GETRF, our own kernels for the row swaps (all swaps of a block applied by one kernel,
// parallel over columns) and for TSTRF's panel (one launch per inner block, on the GPU).
// Everything is asynchronous on ctx.stream; no host synchronisation, no allocation.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <cstddef>

#include "common/tile_view.hpp"

namespace starfact::cuda {

/// What a CUDA LU kernel needs from its worker: handles bound to `stream` and a device
/// workspace of at least lu_workspace_bytes() bytes.
struct LuContext {
    cublasHandle_t blas;
    cusolverDnHandle_t solver;
    cusolverDnParams_t params;
    cudaStream_t stream;
    void* work;
    std::size_t work_bytes;
};

/// Device workspace any of the four kernels needs for tiles of at most m x n and inner block ib.
template <class T>
std::size_t lu_workspace_bytes(cusolverDnHandle_t solver, cusolverDnParams_t params, int m, int n, int ib);

/// Returns cudaSuccess or the first error met (a cuBLAS/cuSOLVER failure maps to
/// cudaErrorUnknown). dinfo: one device int.
template <class T>
cudaError_t getrf(const LuContext& ctx, TileView<T> A, int* dipiv, int* dinfo, int ib);

template <class T>
cudaError_t gessm(const LuContext& ctx, const int* dipiv, TileView<const T> D, TileView<T> A, int ib);

/// inverse: the trtri + gemm variant (see codelets/cpu/lu_kernels.hpp): L has 2 ib rows (at
/// least ib + min(ib, K), else cudaErrorInvalidValue) and TSTRF also writes each block's L1^{-1}
/// at L(ib.., J), which SSSSM (and TSTRF's own update) then applies by GEMM instead of a
/// triangular solve. Same factorization up to rounding.
template <class T>
cudaError_t tstrf(const LuContext& ctx, TileView<T> U, TileView<T> A, TileView<T> L, int* dipiv, int* dinfo, int ib,
                  bool inverse = false);

template <class T>
cudaError_t ssssm(const LuContext& ctx, TileView<T> A1, TileView<T> A2, TileView<const T> L, TileView<const T> AL,
                  const int* dipiv, int ib, bool inverse = false);

}  // namespace starfact::cuda
