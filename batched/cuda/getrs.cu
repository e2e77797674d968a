// Batched LU solves: X = U^{-1} L^{-1} P B for many small systems, from getrf's factors and
// pivots. The kernel is chosen by order and right-hand sides (kTuning, from the H100 sweep in
// docs/batched.md, "The solves"):
// - small (n <= 32): a group of lanes per matrix, lane r holding row r of L and U in registers;
//   the interchanges composed into one gather of B's rows; substitutions by shuffles, a few
//   right-hand sides at a time.
// - warp (n > 32): one warp per group of up to R right-hand sides (R = 1, 4 or 8 by nrhs),
//   several per block: the columns are held in shared memory (in global memory when they do
//   not fit), the interchanges are applied in LAPACK's order, and the two triangular solves go
//   by blocks of 32 rows: the diagonal block by shuffles, the rows below (L) or above (U) by a
//   gemm-like update in which each loaded entry of A serves all R columns.
// - cuBLAS's getrsBatched where it is the fastest: n > 32 with nrhs >= 2 and n >= 512 or
//   n * nrhs > 2048 (it reads A once for all right-hand sides; the warp kernel reads it once
//   per R, and one warp per matrix is too few at n = 512).
// - block (only when forced): one thread block per (matrix, up to R right-hand sides), the
//   triangles read once per block by every warp (trsv_block.cuh); slower than the others on
//   every measured size (likely its row update: one shared-memory load per multiply-add).
// STARFACT_BATCHED_GETRS=small|block|warp|cublas (read once per process) forces one kernel
// where it applies, for benchmarks and tests.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "batched/cuda/common.cuh"
#include "batched/cuda/trsv_block.cuh"
#include "common/cuda_blas.hpp"

namespace starfact::batched::cuda {
namespace {

struct GetrsTuning {
    int warps;                       // warp kernel: warps per block (each R right-hand sides)
    std::size_t shared_limit;        // warp kernel: bytes of column buffers per block
    int small_max_n;                 // n <= this: the register kernel
    int cublas_min_n;                // n > small_max_n, nrhs >= 2 and n >= this ...
    int cublas_max_work;             // ... or n * nrhs > this: cuBLAS
    std::size_t block_shared_limit;  // block kernel: bytes of columns per block (else warp kernel)
};
constexpr GetrsTuning kTuning{8, 48 * 1024, 32, 512, 2048, 200 * 1024};

enum class GetrsPath { automatic, small, block, warp, cublas };

GetrsPath forced_path() {
    static const GetrsPath path = [] {
        const char* s = std::getenv("STARFACT_BATCHED_GETRS");
        if (s == nullptr) return GetrsPath::automatic;
        if (std::strcmp(s, "small") == 0) return GetrsPath::small;
        if (std::strcmp(s, "block") == 0) return GetrsPath::block;
        if (std::strcmp(s, "warp") == 0) return GetrsPath::warp;
        if (std::strcmp(s, "cublas") == 0) return GetrsPath::cublas;
        return GetrsPath::automatic;
    }();
    return path;
}

__host__ __device__ constexpr int pow2_at_least(int n) {
    int p = 1;
    while (p < n) p *= 2;
    return p;
}

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
        const T dinv = r < n ? T(1) / at(r, r) : T(1);  // off the substitution's chain
#pragma unroll
        for (int k = 31; k >= 0; --k) {
            if (k < kb) {
                const T uk = (k > lane && r < n) ? at(r, I + k) : T(0);
                const T dk = __shfl_sync(kFullMask, dinv, k);
#pragma unroll
                for (int j = 0; j < R; ++j) {
                    const T xk = __shfl_sync(kFullMask, xr[j], k) * dk;
                    if (lane == k)
                        xr[j] = xk;
                    else if (lane < k)
                        xr[j] -= uk * xk;
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

// ---- Register kernel, n <= NB <= 32 --------------------------------------------------------
constexpr int kSmallThreads = 128;

/// P lanes per matrix (P = NB rounded up to a power of two), kSmallThreads / P matrices per
/// block. Lane r holds row r of the factors; the final position r of B's rows after LAPACK's
/// interchanges holds row src(r) of B, found by undoing the interchanges from the last.
template <class T, int NB, int CH>
__global__ void __launch_bounds__(kSmallThreads)
    getrs_small_kernel(int n, int nrhs, const T* const* A, int lda, const int* ipiv, T* const* B, int ldb, int count) {
    constexpr int P = pow2_at_least(NB);
    const int g = threadIdx.x / P, r = threadIdx.x % P;
    const int b = blockIdx.x * (kSmallThreads / P) + g;
    const int nn = b < count ? n : 0;
    const int base = (threadIdx.x & 31) / P * P;
    const T* a = nn > 0 ? A[b] : nullptr;
    T row[NB];
#pragma unroll
    for (int j = 0; j < NB; ++j) row[j] = (r < nn && j < nn) ? a[r + static_cast<std::size_t>(j) * lda] : T(r == j ? 1 : 0);
    const int mine = r < nn ? ipiv[static_cast<std::size_t>(b) * n + r] - 1 : r;
    int src = r;
#pragma unroll
    for (int k = NB - 1; k >= 0; --k) {
        const int q = __shfl_sync(kFullMask, mine, base + k);
        if (k < nn) src = src == k ? q : (src == q ? k : src);
    }
    T dinv = T(1);  // 1 / U(r, r): a product, not a division, on the substitution's chain
#pragma unroll
    for (int j = 0; j < NB; ++j)
        if (j == r) dinv = T(1) / row[j];
    T* x = nn > 0 ? B[b] : nullptr;
    for (int c0 = 0; c0 < nrhs; c0 += CH) {
        T y[CH];
#pragma unroll
        for (int c = 0; c < CH; ++c)
            y[c] = (r < nn && c0 + c < nrhs) ? x[src + static_cast<std::size_t>(c0 + c) * ldb] : T(0);
#pragma unroll
        for (int j = 0; j < NB; ++j) {  // L y = P b, unit diagonal
#pragma unroll
            for (int c = 0; c < CH; ++c) {
                const T yj = __shfl_sync(kFullMask, y[c], base + j);
                if (r > j) y[c] -= row[j] * yj;
            }
        }
#pragma unroll
        for (int j = NB - 1; j >= 0; --j) {  // U x = y
#pragma unroll
            for (int c = 0; c < CH; ++c) {
                if (r == j) y[c] *= dinv;
                const T xj = __shfl_sync(kFullMask, y[c], base + j);
                if (r < j) y[c] -= row[j] * xj;
            }
        }
        __syncwarp();  // every lane's gather of this chunk is done before any row is rewritten
#pragma unroll
        for (int c = 0; c < CH; ++c)
            if (r < nn && c0 + c < nrhs) x[r + static_cast<std::size_t>(c0 + c) * ldb] = y[c];
    }
}

template <class T, int NB>
void launch_small(const Launch& launch, int n, int nrhs, const T* const* A, int lda, const int* ipiv, T* const* B,
                  int ldb, int count) {
    constexpr int G = kSmallThreads / pow2_at_least(NB);
    const int blocks = detail::ceil_div(count, G);
    if (nrhs >= 8)
        getrs_small_kernel<T, NB, 8><<<blocks, kSmallThreads, 0, launch.stream>>>(n, nrhs, A, lda, ipiv, B, ldb, count);
    else if (nrhs >= 4)
        getrs_small_kernel<T, NB, 4><<<blocks, kSmallThreads, 0, launch.stream>>>(n, nrhs, A, lda, ipiv, B, ldb, count);
    else
        getrs_small_kernel<T, NB, 1><<<blocks, kSmallThreads, 0, launch.stream>>>(n, nrhs, A, lda, ipiv, B, ldb, count);
    detail::check_launch("getrs (register kernel)");
}

// ---- Block kernel ---------------------------------------------------------------------------

template <class T, int R>
__global__ void __launch_bounds__(256)
    getrs_block_kernel(int n, int nrhs, const T* const* A, int lda, const int* ipiv, T* const* B, int ldb) {
    extern __shared__ unsigned char smem[];
    T* x = reinterpret_cast<T*>(smem);
    const int b = blockIdx.x, c0 = blockIdx.y * R;
    const int rc = nrhs - c0 < R ? nrhs - c0 : R;
    const int lane = threadIdx.x & 31;
    T* col = B[b] + static_cast<std::size_t>(c0) * ldb;
    detail::block_load<T, R>(col, ldb, n, rc, x);
    if (threadIdx.x < 32) {  // lane j applies the interchanges to column j, in LAPACK's order
        const int* piv = ipiv + static_cast<std::size_t>(b) * n;
        for (int I = 0; I < n; I += 32) {
            const int p_lane = I + lane < n ? piv[I + lane] - 1 : I + lane;
            const int kb = n - I < 32 ? n - I : 32;
            for (int k = 0; k < kb; ++k) {
                const int p = __shfl_sync(kFullMask, p_lane, k);
                if (lane < rc && p != I + k) {
                    T* xj = x + static_cast<std::size_t>(lane) * detail::block_ldx(n);
                    const T v = xj[I + k];
                    xj[I + k] = xj[p];
                    xj[p] = v;
                }
            }
        }
    }
    __syncthreads();
    const detail::TriView<T> f{A[b], 1, lda};
    detail::block_trsv<T, R>(f, true, true, n, x, detail::block_ldx(n));
    detail::block_trsv<T, R>(f, false, false, n, x, detail::block_ldx(n));
    detail::block_store<T, R>(x, n, rc, col, ldb);
}

template <class T, int R>
bool launch_block(const Launch& launch, int n, int nrhs, const T* const* A, int lda, const int* ipiv, T* const* B,
                  int ldb, int count) {
    const std::size_t shared = detail::block_shared_bytes<T, R>(n);
    if (shared > kTuning.block_shared_limit) return false;
    if (shared > 48 * 1024)
        detail::opt_in_shared(getrs_block_kernel<T, R>, "getrs (shared memory)");
    const dim3 grid(count, detail::ceil_div(nrhs, R));
    getrs_block_kernel<T, R><<<grid, detail::block_trsv_warps(n) * 32, shared, launch.stream>>>(n, nrhs, A, lda, ipiv,
                                                                                                 B, ldb);
    detail::check_launch("getrs (block kernel)");
    return true;
}

template <class T>
bool try_block(const Launch& launch, int n, int nrhs, const T* const* A, int lda, const int* ipiv, T* const* B, int ldb,
               int count) {
    if (nrhs >= 16) return launch_block<T, 16>(launch, n, nrhs, A, lda, ipiv, B, ldb, count) ||
                           launch_block<T, 8>(launch, n, nrhs, A, lda, ipiv, B, ldb, count);
    if (nrhs >= 8) return launch_block<T, 8>(launch, n, nrhs, A, lda, ipiv, B, ldb, count);
    if (nrhs >= 2) return launch_block<T, 4>(launch, n, nrhs, A, lda, ipiv, B, ldb, count);
    return launch_block<T, 1>(launch, n, nrhs, A, lda, ipiv, B, ldb, count);
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
    const GetrsPath forced = forced_path();
    const bool large = n > kTuning.small_max_n;
    const bool use_cublas = forced == GetrsPath::cublas ||
                            (forced == GetrsPath::automatic && large && nrhs >= 2 &&
                             (n >= kTuning.cublas_min_n ||
                              static_cast<long long>(n) * nrhs > kTuning.cublas_max_work));
    if (use_cublas) {
        int host_info = 0;  // argument errors only; ours are checked by the caller
        detail::check(
            cublas::getrs_batched(launch.cublas, CUBLAS_OP_N, n, nrhs, A, lda, ipiv, B, ldb, &host_info, count),
            "getrs (cublas getrsBatched)");
        return;
    }
    if (!large && (forced == GetrsPath::automatic || forced == GetrsPath::small)) {
        if (n <= 8) return launch_small<T, 8>(launch, n, nrhs, A, lda, ipiv, B, ldb, count);
        if (n <= 16) return launch_small<T, 16>(launch, n, nrhs, A, lda, ipiv, B, ldb, count);
        return launch_small<T, 32>(launch, n, nrhs, A, lda, ipiv, B, ldb, count);
    }
    if (forced == GetrsPath::block && try_block<T>(launch, n, nrhs, A, lda, ipiv, B, ldb, count)) return;
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
