// Batched LU with partial pivoting: our kernels for many small square matrices.
//
// n <= 32: one register kernel factors the whole matrix in one pass over memory
// (lu_small.cuh, shared with vgetrf: a group of lanes per matrix, one or two rows per lane, row
// interchanges deferred).
//
// n > 32: right-looking LU blocked on two levels: outer blocks of 64 columns made of two panels
// of 32. Each panel (all rows below) is factored by a register kernel, one block per matrix, one
// row per thread, interchanges deferred as in lu_small.cuh (or, for panels taller than 512 rows,
// by a slower kernel working in global memory).
// A block's interchanges and U12 = L11^{-1} A12 are applied to the columns on its right by one
// parallel kernel, and the update A22 -= A21 U12 is cuBLAS's batched gemm: inside an outer
// block with k = 32, on the trailing matrix with k = 64 (half the memory traffic of 32). The
// interchanges of later outer blocks are applied to the columns of L in one pass at the end.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstddef>

#include "batched/cuda/common.cuh"
#include "batched/cuda/lu_small.cuh"
#include "common/cuda_blas.hpp"

namespace starfact::batched::cuda {
namespace {

// ---- Size thresholds --------------------------------------------------------------------
struct GetrfTuning {
    int whole_max_n;            // n <= this: one register kernel does the whole factorization
    int panel_width;            // blocked path: columns per panel (the register kernel's NC)
    int outer_width;            // ... columns per outer block (two panels; at most 64)
    int register_panel_rows;    // taller panels are factored in global memory
    int swap_columns_per_block; // interchanges + U12 kernel: columns per block
    int swap_warps;             // ... and warps per block
    int left_swap_warps;        // final interchanges on L: column buffers per block
};
constexpr GetrfTuning kTuning{32, 32, 64, 512, 64, 8, 8};
static_assert(kTuning.whole_max_n <= 32, "lu_small.cuh's instances end at 32");
static_assert(kTuning.outer_width == 2 * kTuning.panel_width && kTuning.panel_width == 32,
              "the interchange kernels hold at most 64 rows as two per lane");
constexpr int kSwapStride = 128;  // ints per matrix in the interchange workspace: src at 0, dst at 64

using lu_small::kFullMask;

__host__ __device__ constexpr std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }
using lu_small::kNoPos;

// ---- Pivot search (keys and multipliers: lu_small.cuh) ------------------------------------
using lu_small::multiplier;
using lu_small::pivot_key;

using lu_small::key_max;

// ---- Register kernel for one panel of the blocked path --------------------------------------

/// Where the panel of matrix b is, for lu_small::register_panel: rows j0 .. n-1 and columns
/// j0 .. j0+w-1 of every matrix. The interchanges go to `swaps`, per matrix: at [0, w) the source
/// row of each final position j0 + i and at [64, 64 + w) the final position of each row j0 + i;
/// info is only lowered from 0.
template <class T>
struct FixedPanel {
    T* const* A;
    int lda, n, j0, w;
    int* ipiv;
    int* info;
    int* swaps;
    int count;
    __device__ bool active(int b) const { return b < count; }
    __device__ T* origin(int b) const { return A[b] + j0 + static_cast<std::size_t>(j0) * lda; }
    __device__ int ld(int) const { return lda; }
    __device__ int rows(int) const { return n - j0; }
    __device__ int width(int) const { return w; }
    __device__ int first(int) const { return j0; }
    __device__ void pivot(int b, int row, int value) const { ipiv[static_cast<std::size_t>(b) * n + row] = value; }
    __device__ void fail(int b, int column) const {
        if (info[b] == 0) info[b] = column;
    }
    __device__ void placed(int b, int t, int pos, int m, int width, int first) const {
        int* sw = swaps + static_cast<std::size_t>(b) * kSwapStride;
        if (t < m && pos < width) sw[pos] = first + t;
        if (t < width) sw[64 + t] = first + pos;
    }
};

template <class T, int NC, int MAXT>
__global__ void __launch_bounds__(MAXT) lu_panel_kernel(FixedPanel<T> panel) {
    lu_small::register_panel<T, NC, MAXT>(panel);
}

/// The composed interchanges of pivots piv[0 .. w) (global, 1-based, rows j0 ..), w <= 64, in
/// the swaps format (see FixedPanel); run by one thread.
__device__ inline void panel_permutation(const int* piv, int j0, int w, int* sw) {
    int content[64], out_pos[64], out_content[64];
    int nout = 0;
    for (int i = 0; i < w; ++i) content[i] = j0 + i;
    for (int s = 0; s < w; ++s) {
        const int p = piv[s] - 1;
        if (p == j0 + s) continue;
        if (p < j0 + w) {
            const int x = content[s];
            content[s] = content[p - j0];
            content[p - j0] = x;
            continue;
        }
        int k = 0;
        while (k < nout && out_pos[k] != p) ++k;
        if (k == nout) {
            out_pos[k] = p;
            out_content[k] = p;
            ++nout;
        }
        const int x = content[s];
        content[s] = out_content[k];
        out_content[k] = x;
    }
    for (int i = 0; i < w; ++i) sw[64 + i] = j0 + i;  // rows that stay in the range
    for (int i = 0; i < w; ++i) sw[i] = content[i];
    for (int k = 0; k < nout; ++k) sw[64 + out_content[k] - j0] = out_pos[k];
}

// ---- Panels taller than the register kernel's rows: global memory, one block per matrix ----
constexpr int kGlobalPanelThreads = 512;

template <class T>
__global__ void __launch_bounds__(kGlobalPanelThreads)
    lu_global_panel_kernel(T* const* A, int lda, int n, int j0, int w, int* ipiv, int* info, int* swaps) {
    __shared__ unsigned long long skey[kGlobalPanelThreads / 32];
    __shared__ int srow[kGlobalPanelThreads / 32];
    const int b = blockIdx.x;
    const int t = threadIdx.x, lane = t & 31, warp = t / 32, nwarps = blockDim.x / 32;
    T* P = A[b] + j0 + static_cast<std::size_t>(j0) * lda;  // the panel: rows 0..m-1, columns 0..w-1
    const int m = n - j0;
    int* piv_out = ipiv + static_cast<std::size_t>(b) * n + j0;
    int linfo = 0;
    for (int j = 0; j < w; ++j) {
        T* col = P + static_cast<std::size_t>(j) * lda;
        unsigned long long bk = 0ull;
        int br = INT_MAX;
        for (int r = j + t; r < m; r += blockDim.x) {
            const unsigned long long k = pivot_key(col[r]);
            if (k > bk) {
                bk = k;
                br = r;
            }
        }
        const unsigned long long kmax = key_max(kFullMask, bk);
        const bool top = bk != 0ull && bk == kmax;
        const unsigned rmin = __reduce_min_sync(kFullMask, top ? static_cast<unsigned>(br) : kNoPos);
        if (lane == 0) {
            skey[warp] = kmax;
            srow[warp] = kmax == 0ull ? INT_MAX : static_cast<int>(rmin);
        }
        __syncthreads();
        unsigned long long best = skey[0];
        int p = srow[0];
        for (int s = 1; s < nwarps; ++s)
            if (skey[s] > best || (skey[s] == best && srow[s] < p)) {
                best = skey[s];
                p = srow[s];
            }
        if (t == 0) piv_out[j] = j0 + p + 1;
        if (p != j && t < w) {
            T* cj = P + static_cast<std::size_t>(t) * lda;
            const T x = cj[j];
            cj[j] = cj[p];
            cj[p] = x;
        }
        __syncthreads();
        const T piv = col[j];
        if (piv == T(0) && linfo == 0) linfo = j0 + j + 1;
        for (int r = j + 1 + t; r < m; r += blockDim.x) {
            const T l = multiplier(col[r], piv);
            col[r] = l;
            for (int c = j + 1; c < w; ++c) {
                T* cc = P + static_cast<std::size_t>(c) * lda;
                cc[r] -= l * cc[j];
            }
        }
        __syncthreads();
    }
    if (t != 0) return;
    if (linfo != 0 && info[b] == 0) info[b] = linfo;
    panel_permutation(piv_out, j0, w, swaps + static_cast<std::size_t>(b) * kSwapStride);
}

// ---- A block's interchanges and U12 = L11^{-1} A12 on other columns -----------------------
// Columns [c_first, c_last), one warp per column. The interchanges of one panel (rows j0 ..
// j0+w1-1, list sw1) and, when w2 > 0, then those of the next one (rows j0+32 .., list sw2):
// lane i reads the row that ends at position j0 + i (and j0 + 32 + i) and the value of the row
// of the range that leaves it, all reads of a panel before its writes. With `solve`, the
// w = 32 + w2 (or w1) rows are then multiplied by L11^{-1} (L11 unit lower, w x w at (j0, j0),
// in shared memory) by forward substitution with shuffles.
template <class T>
__global__ void __launch_bounds__(256)
    lu_swap_trsm_kernel(T* const* A, int lda, int j0, int w1, const int* swaps1, int w2, const int* swaps2,
                        int c_first, int c_last, int cols_per_block, bool solve) {
    __shared__ T ls[64 * 64];  // L11 by columns, stride 64, zero outside its strict lower w x w part
    const int b = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    const int w = w2 > 0 ? 32 + w2 : w1;
    T* Ab = A[b];
    if (solve) {
        for (int e = threadIdx.x; e < 64 * 64; e += blockDim.x) {
            const int i = e % 64, k = e / 64;
            ls[e] = (i < w && k < i) ? Ab[(j0 + i) + static_cast<std::size_t>(j0 + k) * lda] : T(0);
        }
        __syncthreads();
    }
    const int* sw1 = swaps1 + static_cast<std::size_t>(b) * kSwapStride;
    const bool in0 = lane < w1;
    const int src0 = in0 ? sw1[lane] : 0, dst0 = in0 ? sw1[64 + lane] : 0;
    const bool leaves0 = in0 && dst0 >= j0 + w1;
    const bool in1 = lane < w2;
    int src1 = 0, dst1 = 0;
    if (in1) {
        const int* sw2 = swaps2 + static_cast<std::size_t>(b) * kSwapStride;
        src1 = sw2[lane];
        dst1 = sw2[64 + lane];
    }
    const bool leaves1 = in1 && dst1 >= j0 + 32 + w2;
    const int c_begin = c_first + blockIdx.y * cols_per_block;
    const int c_end = min(c_last, c_begin + cols_per_block);
    for (int c = c_begin + warp; c < c_end; c += nwarps) {
        T* col = Ab + static_cast<std::size_t>(c) * lda;
        T v0 = in0 ? col[src0] : T(0);
        const T o0 = leaves0 ? col[j0 + lane] : T(0);
        __syncwarp();
        if (leaves0) col[dst0] = o0;
        T v1 = T(0);
        if (w2 > 0) {
            __syncwarp();
            v1 = in1 ? col[src1] : T(0);
            const T o1 = leaves1 ? col[j0 + 32 + lane] : T(0);
            __syncwarp();
            if (leaves1) col[dst1] = o1;
        }
        if (solve) {
            if (w > 32) {
#pragma unroll
                for (int k = 0; k < 32; ++k) {
                    const T xk = __shfl_sync(kFullMask, v0, k);
                    v0 -= ls[k * 64 + lane] * xk;
                    v1 -= ls[k * 64 + 32 + lane] * xk;
                }
#pragma unroll
                for (int k = 0; k < 32; ++k) {
                    const T xk = __shfl_sync(kFullMask, v1, k);
                    v1 -= ls[(32 + k) * 64 + 32 + lane] * xk;
                }
            } else {
#pragma unroll
                for (int k = 0; k < 32; ++k) {
                    const T xk = __shfl_sync(kFullMask, v0, k);
                    v0 -= ls[k * 64 + lane] * xk;
                }
            }
        }
        if (in0) col[j0 + lane] = v0;
        if (in1) col[j0 + 32 + lane] = v1;
    }
}

/// The update A(r0:, r0:) -= A(r0:, k0:r0) A(k0:r0, r0:) as pointer arrays for cuBLAS.
template <class T>
__global__ void lu_gemm_pointers_kernel(T* const* A, int lda, int k0, int r0, T** a21, T** u12, T** a22, int count) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= count) return;
    T* base = A[b];
    const std::size_t ld = static_cast<std::size_t>(lda);
    a21[b] = base + r0 + k0 * ld;
    u12[b] = base + k0 + r0 * ld;
    a22[b] = base + r0 + r0 * ld;
}

// ---- Interchanges of later outer blocks on the columns of L, one block per matrix ----------
// (nb = the outer width: the interchanges of a block's second panel were applied to its first
// panel's columns inside the block.)
// From the last block back, perm[r] (r >= J, J = the first row of block p + 1) is the row whose
// value ends at position r after the interchanges of rows J .. n-1; each column of panel p is
// then permuted through a shared-memory copy (coalesced reads and writes).
template <class T>
__global__ void lu_left_swaps_kernel(T* const* A, int lda, int n, const int* ipiv, int nb) {
    extern __shared__ unsigned char smem[];
    int* perm = reinterpret_cast<int*>(smem);
    int* step = perm + n;
    T* bufs = reinterpret_cast<T*>(smem + align256(2 * static_cast<std::size_t>(n) * sizeof(int)));
    const int b = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    T* Ab = A[b];
    const int* piv = ipiv + static_cast<std::size_t>(b) * n;
    T* buf = bufs + static_cast<std::size_t>(warp) * n;
    for (int r = threadIdx.x; r < n; r += blockDim.x) perm[r] = r;
    const int npanels = (n + nb - 1) / nb;
    for (int p = npanels - 2; p >= 0; --p) {
        const int J = (p + 1) * nb;
        const int Jend = min(n, J + nb);
        for (int r = J + threadIdx.x; r < n; r += blockDim.x) step[r] = r;
        __syncthreads();
        if (threadIdx.x == 0)
            for (int s = J; s < Jend; ++s) {
                const int q = piv[s] - 1;
                const int x = step[s];
                step[s] = step[q];
                step[q] = x;
            }
        __syncthreads();
        for (int r = J + threadIdx.x; r < n; r += blockDim.x) perm[r] = step[perm[r]];
        __syncthreads();
        for (int c = p * nb + warp; c < J; c += nwarps) {
            T* col = Ab + static_cast<std::size_t>(c) * lda;
            for (int r = J + lane; r < n; r += 32) buf[r - J] = col[r];
            __syncwarp();
            for (int r = J + lane; r < n; r += 32)
                if (perm[r] != r) col[r] = buf[perm[r] - J];
            __syncwarp();
        }
        __syncthreads();
    }
}

// The same for matrices too large for the shared-memory copy: LAPACK's laswp, one thread per
// column (slow, uncoalesced, but any n).
template <class T>
__global__ void lu_left_swaps_serial_kernel(T* const* A, int lda, int n, const int* ipiv, int nb) {
    const int b = blockIdx.x;
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    const int J = (c / nb + 1) * nb;
    if (J >= n) return;
    T* col = A[b] + static_cast<std::size_t>(c) * lda;
    const int* piv = ipiv + static_cast<std::size_t>(b) * n;
    for (int s = J; s < n; ++s) {
        const int q = piv[s] - 1;
        if (q != s) {
            const T x = col[s];
            col[s] = col[q];
            col[q] = x;
        }
    }
}

// ---- Dispatch -------------------------------------------------------------------------------

constexpr std::size_t kSharedLimit = 200 * 1024;

template <class T>
std::size_t left_swap_shared(int n, int warps) {
    return align256(2 * static_cast<std::size_t>(n) * sizeof(int)) +
           static_cast<std::size_t>(warps) * n * sizeof(T);
}

}  // namespace

template <class T>
std::size_t getrf_workspace(int n, int count) {
    if (n <= kTuning.whole_max_n || count <= 0) return 0;
    using detail::WorkspaceCarver;
    return 2 * WorkspaceCarver::round(static_cast<std::size_t>(count) * kSwapStride * sizeof(int)) +
           3 * WorkspaceCarver::round(static_cast<std::size_t>(count) * sizeof(T*));
}

namespace {

/// The blocked path's steps on one batch; the workspace pieces are carved once.
template <class T>
struct Blocked {
    const Launch& launch;
    int n;
    T* const* A;
    int lda;
    int* ipiv;
    int* info;
    int count;
    int* swaps[2];  // the interchanges of an outer block's first and second panel
    T** a21;
    T** u12;
    T** a22;

    /// Factors rows j0 .. n-1 of columns j0 .. j0+w-1 (w <= 32); its interchanges go to
    /// swaps[which].
    void panel(int j0, int w, int which) const {
        int* sw = swaps[which];
        const int m = n - j0;
        if (m <= kTuning.register_panel_rows) {
            const int threads = detail::ceil_div(m, 32) * 32;
            lu_panel_kernel<T, 32, 512>
                <<<count, threads, 0, launch.stream>>>(FixedPanel<T>{A, lda, n, j0, w, ipiv, info, sw, count});
        } else {
            lu_global_panel_kernel<T><<<count, kGlobalPanelThreads, 0, launch.stream>>>(A, lda, n, j0, w, ipiv,
                                                                                         info, sw);
        }
        detail::check_launch("getrf (panel)");
    }

    /// The interchanges of panel swaps[which] (rows j0 .. j0+w1-1) and, when w2 > 0, then of
    /// panel swaps[1] (rows j0+32 .. j0+32+w2-1) on columns [c0, c1), and with `solve`
    /// U12 = L11^{-1} U12 there.
    void swap_columns(int j0, int w1, int which, int w2, int c0, int c1, bool solve) const {
        if (c1 <= c0) return;
        const int per_block = kTuning.swap_columns_per_block;
        const dim3 grid(count, detail::ceil_div(c1 - c0, per_block));
        lu_swap_trsm_kernel<T><<<grid, kTuning.swap_warps * 32, 0, launch.stream>>>(
            A, lda, j0, w1, swaps[which], w2, swaps[1], c0, c1, per_block, solve);
        detail::check_launch("getrf (interchanges and U12)");
    }

    /// A(r0:, r0:) -= A(r0:, k0:r0) A(k0:r0, r0:) up to column c1.
    void update(int k0, int r0, int c1) const {
        const int rows = n - r0, cols = c1 - r0, k = r0 - k0;
        if (rows <= 0 || cols <= 0) return;
        lu_gemm_pointers_kernel<T><<<detail::ceil_div(count, 256), 256, 0, launch.stream>>>(A, lda, k0, r0, a21, u12,
                                                                                            a22, count);
        detail::check_launch("getrf (gemm pointers)");
        const T minus_one = T(-1), one = T(1);
        detail::check(cublas::gemm_batched(launch.cublas, CUBLAS_OP_N, CUBLAS_OP_N, rows, cols, k, &minus_one, a21, lda,
                                           u12, lda, &one, a22, lda, count),
                      "getrf (gemm)");
    }
};

}  // namespace

template <class T>
void getrf(const Launch& launch, int n, T* const* A, int lda, int* ipiv, int* info, int count) {
    if (count <= 0) return;
    if (n <= 0) {
        detail::check(cudaMemsetAsync(info, 0, static_cast<std::size_t>(count) * sizeof(int), launch.stream),
                      "getrf (info)");
        return;
    }
    if (n <= kTuning.whole_max_n)
        return lu_small::launch<T>(launch.stream, n, lu_small::FixedBatch<T>{A, n, lda, ipiv, info}, count);

    detail::WorkspaceCarver carver(launch);
    int* swaps0 = carver.take<int>(static_cast<std::size_t>(count) * kSwapStride);
    int* swaps1 = carver.take<int>(static_cast<std::size_t>(count) * kSwapStride);
    T** a21 = carver.take<T*>(count);
    T** u12 = carver.take<T*>(count);
    T** a22 = carver.take<T*>(count);
    const Blocked<T> blk{launch, n, A, lda, ipiv, info, count, {swaps0, swaps1}, a21, u12, a22};
    detail::check(cudaMemsetAsync(info, 0, static_cast<std::size_t>(count) * sizeof(int), launch.stream),
                  "getrf (info)");

    cublasPointerMode_t mode;
    detail::check(cublasGetPointerMode(launch.cublas, &mode), "getrf (cublasGetPointerMode)");
    detail::check(cublasSetPointerMode(launch.cublas, CUBLAS_POINTER_MODE_HOST), "getrf (cublasSetPointerMode)");
    const int nb = kTuning.panel_width, NB = kTuning.outer_width;
    for (int J = 0; J < n; J += NB) {
        const int W = n - J < NB ? n - J : NB;
        const int w1 = W < nb ? W : nb;
        blk.panel(J, w1, 0);
        if (W > nb) {
            // The second panel of the block: first the first panel's interchanges and U12 on it,
            // its update (k = 32), then after its factorization its interchanges on the first
            // panel's columns (so that L11 below is the final one).
            blk.swap_columns(J, w1, 0, 0, J + w1, J + W, true);
            blk.update(J, J + w1, J + W);
            blk.panel(J + w1, W - w1, 1);
            blk.swap_columns(J + w1, W - w1, 1, 0, J, J + w1, false);
        }
        if (J + W >= n) break;
        blk.swap_columns(J, w1, 0, W - w1, J + W, n, true);
        blk.update(J, J + W, n);
    }
    detail::check(cublasSetPointerMode(launch.cublas, mode), "getrf (cublasSetPointerMode)");

    int warps = kTuning.left_swap_warps;
    while (warps > 1 && left_swap_shared<T>(n, warps) > kSharedLimit) --warps;
    const std::size_t shared = left_swap_shared<T>(n, warps);
    if (shared <= kSharedLimit) {
        if (shared > 48 * 1024) detail::opt_in_shared(lu_left_swaps_kernel<T>, "getrf (shared memory)");
        lu_left_swaps_kernel<T><<<count, warps * 32, shared, launch.stream>>>(A, lda, n, ipiv, NB);
    } else {
        const dim3 grid(count, detail::ceil_div(n, 128));
        lu_left_swaps_serial_kernel<T><<<grid, 128, 0, launch.stream>>>(A, lda, n, ipiv, NB);
    }
    detail::check_launch("getrf (interchanges on L)");
}

template std::size_t getrf_workspace<float>(int, int);
template std::size_t getrf_workspace<double>(int, int);
template void getrf<float>(const Launch&, int, float* const*, int, int*, int*, int);
template void getrf<double>(const Launch&, int, double* const*, int, int*, int*, int);

}  // namespace starfact::batched::cuda
