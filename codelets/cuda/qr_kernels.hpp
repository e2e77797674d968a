// CUDA twins of codelets/cpu/qr_kernels.hpp: GEQRT, UNMQR, TSQRT, TSMQR, TTQRT, TTMQR with the same
// semantics and storage (V below the diagonal / in the lower tile, T factors ib x K, block J
// holding its b x b upper triangular T in rows 0..b-1 of columns J). cuSOLVER for the
// Householder panels, cuBLAS for the block-reflector applications, our own kernels for the
// T factors and the panel copies. Everything is asynchronous on ctx.stream; no host
// synchronisation, no allocation (the caller provides qr_workspace_bytes() of device memory).
//
// How they differ from the CPU kernels (the results agree to rounding; tests/test_qr_cuda.cc):
// - GEQRT factors the whole tile with one cuSOLVER geqrf (its own blocking; the reflectors are
//   those of LAPACK's ib-blocks in exact arithmetic), then forms each block's T from V and tau.
// - TSQRT factors [triu(R); A] in panels of 256 columns (a multiple of ib) with one geqrf on a
//   stacked copy each; R being upper triangular, the top part of every reflector is a unit
//   vector, so only R' and V2 are copied back. The trailing columns of the pair are updated
//   block by block.
// - TTQRT is TSQRT on the lower tile's upper trapezoid: each panel stacks only the rows of A
//   that the trapezoid reaches, masked; TTMQR is TSMQR with each block of V2 copied, masked to
//   its upper part, into the workspace (the tile's strict lower part holds another GEQRT's V).
// - UNMQR, TSMQR and TTMQR apply one ib-block at a time with GEMMs (T made explicit: cuBLAS's TRMM is
//   slower than a GEMM of twice the flops at these sizes).
// Entries of Tf written, as LAPACK writes them: the upper triangle of each block's T; TSQRT also
// zeros the strict lower part of each block's first column (as dtpqrt does). All other entries
// of Tf, padding, R's strict lower triangle and rows of R below n are neither read nor written.
// Empty tiles, and TSQRT/TSMQR with a lower tile of no rows, return at once without a workspace.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <cstddef>

#include "common/tile_view.hpp"

namespace starfact::cuda {

/// What a CUDA QR kernel needs from its worker: handles bound to `stream` (cuBLAS in its default
/// host pointer mode) and a device workspace of at least qr_workspace_bytes() bytes, aligned
/// like a cudaMalloc'd one.
struct QrContext {
    cublasHandle_t blas;
    cusolverDnHandle_t solver;
    cusolverDnParams_t params;
    cudaStream_t stream;
    void* work;
    std::size_t work_bytes;
};

/// Device workspace any of the six kernels needs for tiles of at most m x n and inner block ib
/// (0 when cuSOLVER cannot tell its buffer size: the kernels then report the workspace short).
/// What m x n bounds: GEQRT's A; UNMQR's C (V may be wider: it has at most m reflectors);
/// TSQRT's and TTQRT's A (R does not count: only its leading A.n x A.n triangle is used); TSMQR's
/// and TTMQR's A1 and A2, whatever the number of reflectors, for the ib given here (it is not
/// clamped).
template <class T>
std::size_t qr_workspace_bytes(cusolverDnHandle_t solver, cusolverDnParams_t params, int m, int n, int ib);

/// All return cudaSuccess or the first error met (a cuBLAS/cuSOLVER failure maps to
/// cudaErrorUnknown; a workspace too small, side other than 'L' or inconsistent shapes to
/// cudaErrorInvalidValue, before anything is launched). ib is clamped to [1, K] as on the CPU.
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

template <class T>
cudaError_t ttqrt(const QrContext& ctx, int ib, TileView<T> R, TileView<T> A, TileView<T> Tf);

template <class T>
cudaError_t ttmqr(const QrContext& ctx, char trans, int ib, TileView<T> A1, TileView<T> A2, TileView<const T> V2,
                  TileView<const T> Tf);

}  // namespace starfact::cuda
