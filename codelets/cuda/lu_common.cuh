// Internal to the CUDA LU kernels (lu_kernels.cu, lu_swaps.cu, lu_panel.cu, lu_inverse.cu): the
// helpers they share and the host-side steps one file runs for another. Not part of the public
// interface (codelets/cuda/lu_kernels.hpp).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cstddef>

#include "codelets/cuda/lu_kernels.hpp"
#include "common/cuda_blas.hpp"
#include "common/tile_view.hpp"

namespace starfact::cuda::lu_detail {

// cuSOLVER wants its buffer aligned like a cudaMalloc'd one; the int64 pivots in front of it
// are padded to keep that.
constexpr std::size_t kAlign = 256;
// Dynamic shared memory a kernel may use without cudaFuncSetAttribute.
constexpr std::size_t kDefaultSmem = 48 * 1024;

inline std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
// Ints of workspace the composed pair swaps of a b-row block need: xsrc, count, yrow, ysrc.
inline std::size_t pair_swap_ints(int b) { return 3 * static_cast<std::size_t>(b) + 1; }
// Ints the composed laswp of k pivots needs: count, row[2k], src[2k].
inline std::size_t laswp_ints(int k) { return 4 * static_cast<std::size_t>(k) + 1; }

using cublas::data_type;

template <class T>
TileView<const T> as_const(TileView<T> v) {
    return {v.data, v.m, v.n, v.ld};
}

inline cudaError_t from_blas(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown; }

inline int blocks_for(int n, int threads) { return (n + threads - 1) / threads; }

// NaN - NaN and inf - inf are NaN; every finite v gives v - v == 0.
template <class T>
__device__ bool is_non_finite(T v) {
    return !(v - v == T(0));
}

// Largest shared memory (static plus dynamic) a block may opt in to on the current device.
inline cudaError_t optin_smem(std::size_t* bytes) {
    int device = 0, optin = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (err != cudaSuccess) return err;
    *bytes = static_cast<std::size_t>(optin);
    return cudaSuccess;
}

inline cudaError_t getrf_buffer_bytes(cusolverDnHandle_t solver, cusolverDnParams_t params, cudaDataType type, int m,
                                      int n, std::size_t* device_bytes, std::size_t* host_bytes) {
    *device_bytes = 0;
    *host_bytes = 0;
    if (m == 0 || n == 0) return cudaSuccess;
    // The size depends on the shape only: cuSOLVER does not read A here.
    return cusolverDnXgetrf_bufferSize(solver, params, m, n, type, nullptr, std::max(m, 1), type, device_bytes,
                                       host_bytes) == CUSOLVER_STATUS_SUCCESS
               ? cudaSuccess
               : cudaErrorUnknown;
}

// Lets `kernel` launch with `bytes` of dynamic shared memory on top of its own static shared
// memory, opting in above the default 48 KiB; false when the device cannot give that much (the
// caller then takes a path without shared memory). The sum, not the dynamic part alone, is what
// a launch is checked against: a dynamic request of exactly 48 KiB fails with an invalid value.
// The opt-in is always the kernel's whole allowance, never the request: CUDA workers driven by
// their own threads (STARPU_CUDA_THREAD_PER_WORKER=1) may launch the same kernel at once, and a
// smaller request set in between would make a larger launch fail.
template <class Kernel>
bool allow_dynamic_smem(Kernel* kernel, std::size_t bytes) {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) return false;
    if (bytes + attr.sharedSizeBytes <= kDefaultSmem) return true;
    std::size_t limit = 0;
    if (optin_smem(&limit) != cudaSuccess || bytes + attr.sharedSizeBytes > limit) return false;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(limit - attr.sharedSizeBytes)) == cudaSuccess;
}

// TSTRF's wide blocks go to cuSOLVER: the stack [triu(U(J, J)); A(:, J)] is copied into a
// (b + m) x b panel, factored by Xgetrf (all of the GPU, not one thread block), and copied back.
// The rows of U below the current column are exact zeros in that column, so partial pivoting
// never picks them for finite data. Non-finite data is another matter: cuSOLVER's getrf does not
// carry NaN through (see getrf in lu_kernels.cu), and a NaN pivot can make it swap two rows of
// U, which TSTRF's pivots cannot express. A block whose stack holds a NaN or an infinity, or
// whose pivots swap rows of U, is therefore factored from its untouched input by our panel
// kernel instead, which follows the CPU kernel (see tstrf_solver_panel in lu_panel.cu).
constexpr int kSolverPanelMinWidth = 32;

// ---- host-side steps defined in one file, run by another -------------------------------------

// lu_swaps.cu. GETRF's K swaps on the rows of A (LAPACK's laswp), and TSTRF's b swaps of one
// inner block between X (b rows) and Y; the latter uses the first pair_swap_ints(b) ints of
// ctx.work.
template <class T>
cudaError_t laswp(const LuContext& ctx, TileView<T> A, const int* ipiv, int k);
template <class T>
cudaError_t swap_pairs(const LuContext& ctx, TileView<T> X, TileView<T> Y, const int* ipiv, int j0, int b, int K);

// lu_panel.cu. The dynamic shared memory the panel kernel may get on the current device, and
// one block of TSTRF: by our single-thread-block panel kernel (narrow blocks; with only_if, the
// kernel does nothing unless *only_if, a device flag, is nonzero) or through cuSOLVER (wide blocks).
cudaError_t panel_smem_budget(std::size_t* budget);
template <class T>
cudaError_t tstrf_shared_panel(TileView<T> Ujj, TileView<T> Aj, TileView<T> Lj, int* ipiv, int* dinfo, int j0, int K,
                               std::size_t smem_budget, cudaStream_t stream, const int* only_if = nullptr);
template <class T>
cudaError_t tstrf_solver_panel(const LuContext& ctx, TileView<T> Ujj, TileView<T> Aj, TileView<T> Lj, int* ipiv,
                               int* dinfo, int j0, int K, std::size_t smem_budget);

// lu_inverse.cu, the trtri + gemm variant. X = L^{-1} for the b x b unit lower L (tmp: b * b / 4
// elements at least), and B = Linv B through the b x n buffer W.
template <class T>
cudaError_t invert_unit_lower(cublasHandle_t blas, cudaStream_t stream, TileView<const T> L, TileView<T> X, T* tmp);
template <class T>
cudaError_t apply_inverse(const LuContext& ctx, TileView<const T> Linv, TileView<T> B, T* W);

}  // namespace starfact::cuda::lu_detail
