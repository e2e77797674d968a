// Batched LU solves (issue 5): X = U^{-1} L^{-1} P B for many small systems, from getrf's
// factors and pivots. One warp per group of up to R right-hand sides (R = 1, 4 or 8 by nrhs):
// the columns are held in shared memory (in global memory when they do not fit), the
// interchanges are applied in LAPACK's order, and the two triangular solves go by blocks of 32
// rows: the diagonal block by shuffles, the rows below (L) or above (U) by a gemm-like update
// in which each loaded entry of A serves all R columns.
#include <cuda_runtime.h>

#include <cstddef>

#include "batched/cuda/common.cuh"

namespace starfact::batched::cuda {
namespace {

struct GetrsTuning {
    int warps;                 // warps per block (each R right-hand sides)
    std::size_t shared_limit;  // bytes of column buffers per block
};
constexpr GetrsTuning kTuning{8, 48 * 1024};

constexpr unsigned kFullMask = 0xffffffffu;

template <class T, int R>
__global__ void __launch_bounds__(256)
    getrs_kernel(int n, int nrhs, const T* const* A, int lda, const int* ipiv, T* const* B, int ldb, bool shared) {
    extern __shared__ unsigned char smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int b = blockIdx.x;
    const int c0 = (blockIdx.y * (blockDim.x / 32) + warp) * R;
    if (c0 >= nrhs) return;  // a whole warp; no block-wide synchronization below
    const int rc = nrhs - c0 < R ? nrhs - c0 : R;
    const T* Ab = A[b];
    const int* piv = ipiv + static_cast<std::size_t>(b) * n;
    T* col = B[b] + static_cast<std::size_t>(c0) * ldb;
    T* xs = reinterpret_cast<T*>(smem) + static_cast<std::size_t>(warp) * R * n;
    const std::size_t ldx = shared ? static_cast<std::size_t>(n) : static_cast<std::size_t>(ldb);
    T* x = shared ? xs : col;  // column j of this warp at x + j * ldx
    auto at = [&](int i, int j) { return Ab[i + static_cast<std::size_t>(j) * lda]; };

    if (shared) {
        for (int j = 0; j < rc; ++j)
            for (int r = lane; r < n; r += 32) x[r + j * ldx] = col[r + static_cast<std::size_t>(j) * ldb];
        __syncwarp();
    }
    // The interchanges are sequential within a column: lane j applies them to column j; the
    // pivots are loaded 32 at a time by the whole warp.
    for (int I = 0; I < n; I += 32) {
        const int mine = I + lane < n ? piv[I + lane] - 1 : I + lane;
        const int kb = n - I < 32 ? n - I : 32;
        for (int k = 0; k < kb; ++k) {
            const int p = __shfl_sync(kFullMask, mine, k);
            if (lane < rc && p != I + k) {
                T* xj = x + lane * ldx;
                const T v = xj[I + k];
                xj[I + k] = xj[p];
                xj[p] = v;
            }
        }
    }
    __syncwarp();

    // L y = P b, L unit lower.
    for (int I = 0; I < n; I += 32) {
        const int r = I + lane;
        const int kb = n - I < 32 ? n - I : 32;
        T xr[R];
#pragma unroll
        for (int j = 0; j < R; ++j) xr[j] = (r < n && j < rc) ? x[r + j * ldx] : T(0);
#pragma unroll
        for (int k = 0; k < 32; ++k) {
            if (k >= kb) break;
            const T lk = (k < lane && r < n) ? at(r, I + k) : T(0);
#pragma unroll
            for (int j = 0; j < R; ++j) xr[j] -= lk * __shfl_sync(kFullMask, xr[j], k);
        }
#pragma unroll
        for (int j = 0; j < R; ++j)
            if (r < n && j < rc) x[r + j * ldx] = xr[j];
        __syncwarp();
        for (int s = I + 32 + lane; s < n; s += 32) {
            T acc[R];
#pragma unroll
            for (int j = 0; j < R; ++j) acc[j] = j < rc ? x[s + j * ldx] : T(0);
            for (int k = 0; k < kb; ++k) {
                const T lsk = at(s, I + k);
#pragma unroll
                for (int j = 0; j < R; ++j) acc[j] -= lsk * (j < rc ? x[I + k + j * ldx] : T(0));
            }
#pragma unroll
            for (int j = 0; j < R; ++j)
                if (j < rc) x[s + j * ldx] = acc[j];
        }
        __syncwarp();
    }

    // U x = y, U upper with its diagonal, from the last block up.
    for (int I = (n - 1) / 32 * 32; I >= 0; I -= 32) {
        const int r = I + lane;
        const int kb = n - I < 32 ? n - I : 32;
        T xr[R];
#pragma unroll
        for (int j = 0; j < R; ++j) xr[j] = (r < n && j < rc) ? x[r + j * ldx] : T(0);
#pragma unroll
        for (int k = 31; k >= 0; --k) {
            if (k < kb) {
                const T uk = (k >= lane && r < n) ? at(r, I + k) : T(1);
#pragma unroll
                for (int j = 0; j < R; ++j) {
                    if (lane == k) xr[j] /= uk;
                    const T xk = __shfl_sync(kFullMask, xr[j], k);
                    if (lane < k) xr[j] -= uk * xk;
                }
            }
        }
#pragma unroll
        for (int j = 0; j < R; ++j)
            if (r < n && j < rc) x[r + j * ldx] = xr[j];
        __syncwarp();
        for (int s = lane; s < I; s += 32) {
            T acc[R];
#pragma unroll
            for (int j = 0; j < R; ++j) acc[j] = j < rc ? x[s + j * ldx] : T(0);
            for (int k = 0; k < kb; ++k) {
                const T usk = at(s, I + k);
#pragma unroll
                for (int j = 0; j < R; ++j) acc[j] -= usk * (j < rc ? x[I + k + j * ldx] : T(0));
            }
#pragma unroll
            for (int j = 0; j < R; ++j)
                if (j < rc) x[s + j * ldx] = acc[j];
        }
        __syncwarp();
    }

    if (shared)
        for (int j = 0; j < rc; ++j)
            for (int r = lane; r < n; r += 32) col[r + static_cast<std::size_t>(j) * ldb] = x[r + j * ldx];
}

/// One instance: R right-hand sides per warp, as many warps per block as the column buffers
/// allow (global memory when one warp's do not fit).
template <class T, int R>
void launch_getrs(const Launch& launch, int n, int nrhs, const T* const* A, int lda, const int* ipiv, T* const* B,
                  int ldb, int count) {
    const int groups = detail::ceil_div(nrhs, R);
    int warps = groups < kTuning.warps ? groups : kTuning.warps;
    const std::size_t per_warp = static_cast<std::size_t>(R) * n * sizeof(T);
    while (warps > 1 && warps * per_warp > kTuning.shared_limit) --warps;
    const bool shared = warps * per_warp <= kTuning.shared_limit;
    const dim3 grid(count, detail::ceil_div(groups, warps));
    getrs_kernel<T, R><<<grid, warps * 32, shared ? warps * per_warp : 0, launch.stream>>>(n, nrhs, A, lda, ipiv, B,
                                                                                         ldb, shared);
    detail::check_launch("getrs");
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
    // Right-hand sides per warp: each entry of A loaded from memory serves R of them.
    if (nrhs >= 8) return launch_getrs<T, 8>(launch, n, nrhs, A, lda, ipiv, B, ldb, count);
    if (nrhs >= 2) return launch_getrs<T, 4>(launch, n, nrhs, A, lda, ipiv, B, ldb, count);
    launch_getrs<T, 1>(launch, n, nrhs, A, lda, ipiv, B, ldb, count);
}

template std::size_t getrs_workspace<float>(int, int, int);
template std::size_t getrs_workspace<double>(int, int, int);
template void getrs<float>(const Launch&, int, int, const float* const*, int, const int*, float* const*, int, int);
template void getrs<double>(const Launch&, int, int, const double* const*, int, const int*, double* const*, int,
                            int);

}  // namespace starfact::batched::cuda
