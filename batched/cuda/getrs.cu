// Batched LU solves (issue 5): X = U^{-1} L^{-1} P B for many small systems, from getrf's
// factors and pivots. One warp per right-hand side: the column is held in shared memory (in
// global memory when it does not fit), the interchanges are applied in LAPACK's order, and the
// two triangular solves go by blocks of 32 rows: the diagonal block by shuffles with its rows
// in registers, the rows below (L) or above (U) by a gemv of independent loads.
#include <cuda_runtime.h>

#include <cstddef>

#include "batched/cuda/common.cuh"

namespace starfact::batched::cuda {
namespace {

struct GetrsTuning {
    int warps;                 // right-hand sides per block (one warp each)
    std::size_t shared_limit;  // bytes of column buffers per block
};
constexpr GetrsTuning kTuning{8, 48 * 1024};

constexpr unsigned kFullMask = 0xffffffffu;

template <class T>
__global__ void __launch_bounds__(256)
    getrs_kernel(int n, int nrhs, const T* const* A, int lda, const int* ipiv, T* const* B, int ldb, bool shared) {
    extern __shared__ unsigned char smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int b = blockIdx.x;
    const int c = blockIdx.y * (blockDim.x / 32) + warp;
    if (c >= nrhs) return;  // a whole warp; no block-wide synchronization below
    const T* Ab = A[b];
    const int* piv = ipiv + static_cast<std::size_t>(b) * n;
    T* col = B[b] + static_cast<std::size_t>(c) * ldb;
    T* x = shared ? reinterpret_cast<T*>(smem) + static_cast<std::size_t>(warp) * n : col;
    auto at = [&](int i, int j) { return Ab[i + static_cast<std::size_t>(j) * lda]; };

    if (shared) {
        for (int r = lane; r < n; r += 32) x[r] = col[r];
        __syncwarp();
    }
    // The interchanges are sequential; the pivots are loaded 32 at a time by the whole warp.
    for (int I = 0; I < n; I += 32) {
        const int mine = I + lane < n ? piv[I + lane] - 1 : I + lane;
        const int kb = n - I < 32 ? n - I : 32;
        for (int k = 0; k < kb; ++k) {
            const int p = __shfl_sync(kFullMask, mine, k);
            if (lane == 0 && p != I + k) {
                const T v = x[I + k];
                x[I + k] = x[p];
                x[p] = v;
            }
        }
    }
    __syncwarp();

    // L y = P b, L unit lower.
    for (int I = 0; I < n; I += 32) {
        const int r = I + lane;
        const int kb = n - I < 32 ? n - I : 32;
        T xr = r < n ? x[r] : T(0);
        T l[32];
#pragma unroll
        for (int k = 0; k < 32; ++k) l[k] = (k < lane && r < n) ? at(r, I + k) : T(0);
#pragma unroll
        for (int k = 0; k < 32; ++k) xr -= l[k] * __shfl_sync(kFullMask, xr, k);
        if (r < n) x[r] = xr;
        T xb[32];
#pragma unroll
        for (int k = 0; k < 32; ++k) xb[k] = __shfl_sync(kFullMask, xr, k);
        for (int s = I + 32 + lane; s < n; s += 32) {
            T acc = x[s];
#pragma unroll
            for (int k = 0; k < 32; ++k)
                if (k < kb) acc -= at(s, I + k) * xb[k];
            x[s] = acc;
        }
        __syncwarp();
    }

    // U x = y, U upper with its diagonal, from the last block up.
    for (int I = (n - 1) / 32 * 32; I >= 0; I -= 32) {
        const int r = I + lane;
        const int kb = n - I < 32 ? n - I : 32;
        T xr = r < n ? x[r] : T(0);
        T u[32];
#pragma unroll
        for (int k = 0; k < 32; ++k) u[k] = (k >= lane && k < kb) ? at(r, I + k) : T(0);
#pragma unroll
        for (int k = 31; k >= 0; --k) {
            if (k < kb) {
                if (lane == k) xr /= u[k];
                const T xk = __shfl_sync(kFullMask, xr, k);
                if (lane < k) xr -= u[k] * xk;
            }
        }
        if (r < n) x[r] = xr;
        T xb[32];
#pragma unroll
        for (int k = 0; k < 32; ++k) xb[k] = __shfl_sync(kFullMask, xr, k);
        for (int s = lane; s < I; s += 32) {
            T acc = x[s];
#pragma unroll
            for (int k = 0; k < 32; ++k)
                if (k < kb) acc -= at(s, I + k) * xb[k];
            x[s] = acc;
        }
        __syncwarp();
    }

    if (shared)
        for (int r = lane; r < n; r += 32) col[r] = x[r];
}

}  // namespace

template <class T>
std::size_t getrs_workspace(int, int, int) {
    return 0;
}

template <class T>
void getrs(const Launch& launch, int n, int nrhs, const T* const* A, int lda, const int* ipiv, T* const* B, int ldb,
           int count) {
    if (count <= 0 || n <= 0 || nrhs <= 0) return;
    int warps = nrhs < kTuning.warps ? nrhs : kTuning.warps;
    const std::size_t column = static_cast<std::size_t>(n) * sizeof(T);
    while (warps > 1 && warps * column > kTuning.shared_limit) --warps;
    const bool shared = warps * column <= kTuning.shared_limit;
    const dim3 grid(count, detail::ceil_div(nrhs, warps));
    getrs_kernel<T><<<grid, warps * 32, shared ? warps * column : 0, launch.stream>>>(n, nrhs, A, lda, ipiv, B, ldb,
                                                                                      shared);
    detail::check_launch("getrs");
}

template std::size_t getrs_workspace<float>(int, int, int);
template std::size_t getrs_workspace<double>(int, int, int);
template void getrs<float>(const Launch&, int, int, const float* const*, int, const int*, float* const*, int, int);
template void getrs<double>(const Launch&, int, int, const double* const*, int, const int*, double* const*, int,
                            int);

}  // namespace starfact::batched::cuda
