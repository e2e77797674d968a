// Variable-size batched Cholesky: vpotrf and vpotrs on arrays of device matrices of
// different orders, our own kernels, with the SSDE and DSSE schedules (vbatched_kernels.hpp).
//
// vpotrf, step s, for the matrices whose factorization is at column block c0 = kVBlock * j:
// - diagonal kernel, a warp per matrix: the Cholesky of A(c0:c0+w, c0:c0+w) in registers
//   (potrf_leaf.cuh, the register kernel's factorization: lane r holds row r). The block has
//   already been updated by the panel kernels of the steps before. A failing pivot sets info and
//   ends that matrix: the later kernels skip it.
// - panel kernel, one thread block per (matrix, kPanelRows rows below the diagonal block):
//   X = A(rows, c0:c0+32) - L(rows, 0:c0) P^T with P = L(c0:c0+32, 0:c0) (left-looking,
//   32-column chunks staged in shared memory, a 4 x 4 tile of the product per thread), then
//   X <- X L11^{-T} with the factored diagonal block (one row of X per thread, in registers),
//   then the diagonal blocks of its rows, right-looking: D -= X_h X_h^T for each 32-row half.
// Both kernels are launched for every matrix and every row block the largest matrix could
// need at that step; a block whose matrix is not at that step (not started, finished, failed)
// or has no rows there returns at once. The upper case reads the lower factor L = U^T through
// transposed indices; every load and store is staged so that consecutive threads touch
// consecutive addresses in either storage.
// Batches with nmax <= kVPotrfRegisterMax (32) skip the steps: one launch of potrf.cu's
// register kernel, instantiated for per-matrix orders (potrf_registers.hpp), factors them all.
//
// vpotrs: one thread block per (matrix, 16 right-hand sides), one launch: blocked forward and
// backward substitution over 32-row blocks, left-looking (the rows already solved are read
// back from B), each diagonal block solved in registers with shuffles (lane r holds row r).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "batched/cuda/common.cuh"
#include "batched/cuda/potrf_leaf.cuh"
#include "batched/cuda/potrf_registers.hpp"
#include "batched/cuda/vbatched_kernels.hpp"

namespace starfact::batched::cuda {
namespace {

constexpr int K = kVBlock;
constexpr int LK = K + 1;  // leading dimension of a K x K tile in shared memory
/// Threads of the diagonal kernel: a warp per matrix.
constexpr int kDiagThreads = 128;
/// Rows below the diagonal block per thread block of the panel kernel.
constexpr int kPanelRows = 64;
/// Threads of the panel kernel: 16 x 8 threads, a 4 x 4 tile of the 64 x 32 product each.
constexpr int kPanelThreads = 128;
/// Dynamic shared memory of the panel kernel: two buffers of a kPanelRows x K and a K x K tile.
template <class T>
constexpr std::size_t panel_smem_bytes() {
    return 2 * sizeof(T) * static_cast<std::size_t>(K) * (kPanelRows + 1 + LK);
}
/// Right-hand sides per warp and warps per block of the solve.
constexpr int kSolveCols = 4;

/// Memory index of element (i, j) of the lower factor: lower storage, or upper storage (trans)
/// holding L^T.
__device__ __forceinline__ long long at(bool trans, int ld, int i, int j) {
    return trans ? j + static_cast<long long>(i) * ld : i + static_cast<long long>(j) * ld;
}

/// Stages the ROWS x COLS tile of L at (row0, col0) into s (s[i + j * ls], or s[j + i * ls] when
/// store_t) with NT threads; consecutive threads read consecutive addresses. Entries outside
/// mr x mc are 0; with tri, so are those above the diagonal, and the diagonal outside is 1.
template <class T, int ROWS, int COLS, int NT>
__device__ __forceinline__ void load_tile(T* s, int ls, bool store_t, const T* a, int ld, bool trans, int row0,
                                          int col0, int mr, int mc, bool tri) {
    for (int e = threadIdx.x; e < ROWS * COLS; e += NT) {
        const int i = trans ? e / COLS : e % ROWS;
        const int j = trans ? e % COLS : e / ROWS;
        T v;
        if (tri)
            v = (i < mr && j < mc && i >= j) ? a[at(trans, ld, row0 + i, col0 + j)] : T(i == j ? 1 : 0);
        else
            v = (i < mr && j < mc) ? a[at(trans, ld, row0 + i, col0 + j)] : T(0);
        s[store_t ? j + i * ls : i + j * ls] = v;
    }
}

/// The inverse of load_tile (without store_t): writes the mr x mc part (lower part with tri).
template <class T, int ROWS, int COLS, int NT>
__device__ __forceinline__ void store_tile(const T* s, int ls, T* a, int ld, bool trans, int row0, int col0, int mr,
                                           int mc, bool tri) {
    for (int e = threadIdx.x; e < ROWS * COLS; e += NT) {
        const int i = trans ? e / COLS : e % ROWS;
        const int j = trans ? e % COLS : e / ROWS;
        if (i < mr && j < mc && (!tri || i >= j)) a[at(trans, ld, row0 + i, col0 + j)] = s[i + j * ls];
    }
}

/// load_tile by asynchronous copies (cp.async; entries outside mr x mc, or above the diagonal
/// with tri, are zero-filled: tri needs mr = mc = ROWS = COLS, no diagonal entry outside). The
/// caller commits and waits.
template <class T, int ROWS, int COLS, int NT>
__device__ __forceinline__ void async_tile(T* s, int ls, const T* a, int ld, bool trans, int row0, int col0, int mr,
                                           int mc, bool tri) {
    for (int e = threadIdx.x; e < ROWS * COLS; e += NT) {
        const int i = trans ? e / COLS : e % ROWS;
        const int j = trans ? e % COLS : e / ROWS;
        const bool ok = i < mr && j < mc && (!tri || i >= j);
        detail::cp_async_zfill(s + i + j * ls, ok ? a + at(trans, ld, row0 + i, col0 + j) : a, ok);
    }
}

/// Where matrix b stands at step `step`: its order and the column block c0 it works on; false
/// when it has nothing to do there (not started, finished, or failed earlier).
__device__ __forceinline__ bool locate(const int* n, const int* info, int b, Schedule s, int nmax, int step, int& nb,
                                       int& c0) {
    nb = n[b];
    const int j = step - vfirst_step(s, nmax, nb);
    if (j < 0 || j >= vsteps(nb)) return false;
    if (info[b] != 0) return false;
    c0 = j * K;
    return true;
}

// ---- The diagonal block: its factorization -------------------------------------------------

/// Factors each matrix's current diagonal block (already updated by the panel kernels of the
/// steps before: see there) in registers, a warp per matrix (potrf_leaf.cuh); a failing pivot
/// sets info and ends that matrix: the later kernels skip it.
template <class T>
__global__ void __launch_bounds__(kDiagThreads)
    vpotrf_diag_kernel(T* const* A, const int* n, const int* lda, bool trans, int* info, Schedule s, int nmax, int step,
                       int count) {
    constexpr int G = kDiagThreads / 32;
    __shared__ T s_mat[G][K * LK];
    __shared__ T s_col[G][2 * K];
    const int g = threadIdx.x / 32, r = threadIdx.x % 32;
    const int b = blockIdx.x * G + g;
    int nb = 0, c0 = 0;
    if (b >= count || !locate(n, info, b, s, nmax, step, nb, c0)) return;  // uniform over the warp
    const int ld = lda[b];
    const int fail = detail::leaf_factor<T, K, K, true>(A[b] + at(trans, ld, c0, c0), ld, trans, min(K, nb - c0), r,
                                                        0xffffffffu, s_mat[g], s_col[g]);
    if (r == 0 && fail != 0) info[b] = c0 + fail;
}

// ---- The rows below the diagonal block: left-looking update and triangular solve -----------

template <class T>
__global__ void __launch_bounds__(kPanelThreads)
    vpotrf_panel_kernel(T* const* A, const int* n, const int* lda, bool trans, const int* info, Schedule s, int nmax,
                        int step) {
    constexpr int R = kPanelRows;
    constexpr int LR = R + 1;
    const int b = blockIdx.x;
    int nb = 0, c0 = 0;
    if (!locate(n, info, b, s, nmax, step, nb, c0)) return;
    const int r0 = c0 + K + static_cast<int>(blockIdx.y) * R;
    if (r0 >= nb) return;  // also when this is the matrix's last step (w < K)
    const int m = min(R, nb - r0);
    const int ld = lda[b];
    T* a = A[b];
    // Two buffers of a chunk of L(rows, :) and of L(c0:c0+K, :): chunk t + 1 is copied in
    // (cp.async) while chunk t is multiplied; the last chunk (t = c0 / K) is A(rows, c0:c0+K),
    // then X, and L11.
    extern __shared__ __align__(16) unsigned char vpotrf_panel_smem[];
    T* const sRb = reinterpret_cast<T*>(vpotrf_panel_smem);
    T* const sDb = sRb + 2 * K * LR;
    __shared__ T sDinv[K];

    const int tid = threadIdx.x;
    const int tx = tid % 16, ty = tid / 16;  // rows tx + 16p, columns ty + 8q
    T acc[4][4];
#pragma unroll
    for (int p = 0; p < 4; ++p)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[p][q] = T(0);
    const int chunks = c0 / K;
    auto issue = [&](int t) {
        T* r = sRb + (t & 1) * K * LR;
        T* d = sDb + (t & 1) * K * LK;
        const int col = t < chunks ? t * K : c0;
        async_tile<T, R, K, kPanelThreads>(r, LR, a, ld, trans, r0, col, m, K, false);
        async_tile<T, K, K, kPanelThreads>(d, LK, a, ld, trans, c0, col, K, K, t == chunks);
        detail::cp_async_commit();
    };
    issue(0);
    for (int t = 0; t < chunks; ++t) {
        issue(t + 1);
        detail::cp_async_wait_but_one();
        __syncthreads();
        const T* sR = sRb + (t & 1) * K * LR;
        const T* sD = sDb + (t & 1) * K * LK;
#pragma unroll 8
        for (int l = 0; l < K; ++l) {
            T ai[4], bj[4];
#pragma unroll
            for (int p = 0; p < 4; ++p) {
                ai[p] = sR[tx + 16 * p + l * LR];
                bj[p] = sD[ty + 8 * p + l * LK];
            }
#pragma unroll
            for (int p = 0; p < 4; ++p)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[p][q] += ai[p] * bj[q];
        }
        __syncthreads();  // buffer t & 1 is refilled at t + 2
    }
    detail::cp_async_wait_all();
    T* const sR = sRb + (chunks & 1) * K * LR;
    const T* const sD = sDb + (chunks & 1) * K * LK;
    __syncthreads();
    if (tid < K) sDinv[tid] = T(1) / sD[tid + tid * LK];
#pragma unroll
    for (int p = 0; p < 4; ++p)
#pragma unroll
        for (int q = 0; q < 4; ++q) sR[tx + 16 * p + (ty + 8 * q) * LR] -= acc[p][q];
    __syncthreads();

    if (tid < R) {  // X L11^T = C, row tid
        T x[K];
#pragma unroll
        for (int j = 0; j < K; ++j) x[j] = sR[tid + j * LR];
#pragma unroll
        for (int j = 0; j < K; ++j) {
            x[j] *= sDinv[j];
#pragma unroll
            for (int q = j + 1; q < K; ++q) x[q] -= x[j] * sD[q + j * LK];
        }
#pragma unroll
        for (int j = 0; j < K; ++j) sR[tid + j * LR] = x[j];
    }
    __syncthreads();
    store_tile<T, R, K, kPanelThreads>(sR, LR, a, ld, trans, r0, c0, m, K, false);

    // The diagonal blocks of these rows, right-looking: D_h -= X_h X_h^T for the two 32-row
    // halves h of X (rows tx + 16p are in half p / 2), so that a later step's diagonal kernel
    // finds its block updated by every column block before it and only factors it.
#pragma unroll
    for (int p = 0; p < 4; ++p)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[p][q] = T(0);
#pragma unroll 8
    for (int l = 0; l < K; ++l) {
        T ai[4], b0[4], b1[4];
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            ai[p] = sR[tx + 16 * p + l * LR];
            b0[p] = sR[ty + 8 * p + l * LR];
            b1[p] = sR[K + ty + 8 * p + l * LR];
        }
#pragma unroll
        for (int p = 0; p < 4; ++p)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[p][q] += ai[p] * (p < 2 ? b0[q] : b1[q]);
    }
    __syncthreads();  // every thread has read X
#pragma unroll
    for (int p = 0; p < 4; ++p)
#pragma unroll
        for (int q = 0; q < 4; ++q) sR[tx + 16 * p + (ty + 8 * q) * LR] = acc[p][q];
    __syncthreads();
    for (int e = tid; e < R * K; e += kPanelThreads) {  // coalesced in either storage
        const int i = trans ? e / K : e % R;
        const int j = trans ? e % K : e / R;
        const int h = i / K;
        if (i < m && j <= i - h * K) a[at(trans, ld, r0 + i, r0 + h * K + j)] -= sR[i + j * LR];
    }
}

// ---- The solve -------------------------------------------------------------------------------

/// B <- A^{-1} B for matrix blockIdx.x, right-hand sides in groups of W * kSolveCols (group
/// blockIdx.y, then every gridDim.y-th). Warp v solves columns kSolveCols v .. of the group.
template <class T, int W>
__global__ void __launch_bounds__(32 * W)
    vpotrs_kernel(const T* const* A, const int* n, const int* lda, bool trans, T* const* B, const int* ldb, int nrhs) {
    constexpr int NT = 32 * W;
    constexpr int NC = W * kSolveCols;  // columns per group
    const int b = blockIdx.x;
    const int nb = n[b];
    if (nb <= 0) return;
    const T* a = A[b];
    T* x = B[b];
    const int ld = lda[b], ldx = ldb[b];
    __shared__ T sL[K * LK];
    __shared__ T sT[K * LK];
    __shared__ T sY[K * NC];
    const int r = threadIdx.x % 32, v = threadIdx.x / 32;
    const int groups = (nrhs + NC - 1) / NC;
    const int last = (nb - 1) / K * K;  // first row of the last block

    for (int g = blockIdx.y; g < groups; g += gridDim.y) {
        const int cg = g * NC;  // first column of the group
        const int nc = min(NC, nrhs - cg);
        auto col = [&](int c) { return static_cast<long long>(cg + c) * ldx; };
        // Stages rows l0 .. l0+rows-1 of the group's columns of B (solved already) into sY.
        auto load_rows = [&](int l0, int rows) {
            for (int e = threadIdx.x; e < K * NC; e += NT) {
                const int l = e % K, c = e / K;
                sY[l + c * K] = (l < rows && c < nc) ? x[l0 + l + col(c)] : T(0);
            }
        };
        T y[kSolveCols];

        for (int k0 = 0; k0 <= last; k0 += K) {  // L Y = B
            const int w = min(K, nb - k0);
#pragma unroll
            for (int c = 0; c < kSolveCols; ++c) {
                const int cc = v * kSolveCols + c;
                y[c] = (r < w && cc < nc) ? x[k0 + r + col(cc)] : T(0);
            }
            for (int l0 = 0; l0 < k0; l0 += K) {
                load_tile<T, K, K, NT>(sL, LK, false, a, ld, trans, k0, l0, w, K, false);
                load_rows(l0, K);
                __syncthreads();
#pragma unroll 8
                for (int l = 0; l < K; ++l) {
                    const T lrl = sL[r + l * LK];
#pragma unroll
                    for (int c = 0; c < kSolveCols; ++c) y[c] -= lrl * sY[l + (v * kSolveCols + c) * K];
                }
                __syncthreads();
            }
            load_tile<T, K, K, NT>(sT, LK, false, a, ld, trans, k0, k0, w, w, true);
            __syncthreads();
            const T dinv = T(1) / sT[r + r * LK];
#pragma unroll
            for (int j = 0; j < K; ++j) {
                const T lrj = sT[r + j * LK];
#pragma unroll
                for (int c = 0; c < kSolveCols; ++c) {
                    if (r == j) y[c] *= dinv;
                    const T yj = __shfl_sync(0xffffffffu, y[c], j);
                    if (r > j) y[c] -= lrj * yj;
                }
            }
#pragma unroll
            for (int c = 0; c < kSolveCols; ++c) {
                const int cc = v * kSolveCols + c;
                if (r < w && cc < nc) x[k0 + r + col(cc)] = y[c];
            }
            __syncthreads();  // sT and the rows of B written are read by the next block
        }

        for (int k0 = last; k0 >= 0; k0 -= K) {  // L^T X = Y
            const int w = min(K, nb - k0);
#pragma unroll
            for (int c = 0; c < kSolveCols; ++c) {
                const int cc = v * kSolveCols + c;
                y[c] = (r < w && cc < nc) ? x[k0 + r + col(cc)] : T(0);
            }
            for (int l0 = k0 + K; l0 < nb; l0 += K) {
                const int wl = min(K, nb - l0);
                // sL[i + l * LK] = L(l0 + l, k0 + i): the block of L^T
                load_tile<T, K, K, NT>(sL, LK, true, a, ld, trans, l0, k0, wl, w, false);
                load_rows(l0, wl);
                __syncthreads();
#pragma unroll 8
                for (int l = 0; l < K; ++l) {
                    const T lt = sL[r + l * LK];
#pragma unroll
                    for (int c = 0; c < kSolveCols; ++c) y[c] -= lt * sY[l + (v * kSolveCols + c) * K];
                }
                __syncthreads();
            }
            load_tile<T, K, K, NT>(sT, LK, false, a, ld, trans, k0, k0, w, w, true);
            __syncthreads();
            const T dinv = T(1) / sT[r + r * LK];
#pragma unroll
            for (int j = K - 1; j >= 0; --j) {
                const T ljr = sT[j + r * LK];
#pragma unroll
                for (int c = 0; c < kSolveCols; ++c) {
                    if (r == j) y[c] *= dinv;
                    const T xj = __shfl_sync(0xffffffffu, y[c], j);
                    if (r < j) y[c] -= ljr * xj;
                }
            }
#pragma unroll
            for (int c = 0; c < kSolveCols; ++c) {
                const int cc = v * kSolveCols + c;
                if (r < w && cc < nc) x[k0 + r + col(cc)] = y[c];
            }
            __syncthreads();
        }
    }
}

template <class T, int W>
void launch_vpotrs(cudaStream_t stream, const T* const* A, const int* n, const int* lda, bool trans, T* const* B,
                   const int* ldb, int nrhs, int count) {
    const int groups = detail::ceil_div(nrhs, W * kSolveCols);
    const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(std::min(groups, 65535)));
    vpotrs_kernel<T, W><<<grid, 32 * W, 0, stream>>>(A, n, lda, trans, B, ldb, nrhs);
    detail::check_launch("vpotrs kernel");
}

}  // namespace

template <class T>
std::size_t vpotrf_workspace(int, int) {
    return 0;
}

template <class T>
void vpotrf(const Launch& launch, Uplo uplo, Schedule schedule, int nmax, const int* n, T* const* A, const int* lda,
            int* info, int count) {
    if (count <= 0) return;
    if (nmax <= kVPotrfRegisterMax) {  // one pass, either schedule (there is a single step)
        vpotrf_registers<T>(launch, uplo, nmax, n, A, lda, info, count);
        return;
    }
    detail::check(cudaMemsetAsync(info, 0, sizeof(int) * static_cast<std::size_t>(count), launch.stream),
                  "vpotrf info reset");
    const bool trans = uplo == Uplo::upper;
    const int steps = vsteps(nmax);
    // On every call: the attribute belongs to the current device (StarPU's CUDA workers run
    // on several).
    if (panel_smem_bytes<T>() > 48 * 1024) detail::opt_in_shared(vpotrf_panel_kernel<T>, "vpotrf panel shared memory");
    for (int step = 0; step < steps; ++step) {
        vpotrf_diag_kernel<T><<<detail::ceil_div(count, kDiagThreads / 32), kDiagThreads, 0, launch.stream>>>(
            A, n, lda, trans, info, schedule, nmax, step, count);
        detail::check_launch("vpotrf diagonal kernel");
        // The most rows below the diagonal block any matrix has at this step: the largest
        // order under ssde; under dsse a matrix with s steps left has at most 32 (s - 1).
        const int rows = schedule == Schedule::ssde ? nmax - K * (step + 1) : K * (steps - step - 1);
        if (rows <= 0) continue;
        const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(detail::ceil_div(rows, kPanelRows)));
        vpotrf_panel_kernel<T><<<grid, kPanelThreads, panel_smem_bytes<T>(), launch.stream>>>(A, n, lda, trans, info,
                                                                                              schedule, nmax, step);
        detail::check_launch("vpotrf panel kernel");
    }
}

template <class T>
std::size_t vpotrs_workspace(int, int, int) {
    return 0;
}

template <class T>
void vpotrs(const Launch& launch, Uplo uplo, int nmax, const int* n, int nrhs, const T* const* A, const int* lda,
            T* const* B, const int* ldb, int count) {
    if (count <= 0 || nmax <= 0 || nrhs <= 0) return;
    const bool trans = uplo == Uplo::upper;
    if (nrhs <= kSolveCols)
        launch_vpotrs<T, 1>(launch.stream, A, n, lda, trans, B, ldb, nrhs, count);
    else if (nrhs <= 2 * kSolveCols)
        launch_vpotrs<T, 2>(launch.stream, A, n, lda, trans, B, ldb, nrhs, count);
    else
        launch_vpotrs<T, 4>(launch.stream, A, n, lda, trans, B, ldb, nrhs, count);
}

template std::size_t vpotrf_workspace<float>(int, int);
template std::size_t vpotrf_workspace<double>(int, int);
template void vpotrf<float>(const Launch&, Uplo, Schedule, int, const int*, float* const*, const int*, int*, int);
template void vpotrf<double>(const Launch&, Uplo, Schedule, int, const int*, double* const*, const int*, int*, int);
template std::size_t vpotrs_workspace<float>(int, int, int);
template std::size_t vpotrs_workspace<double>(int, int, int);
template void vpotrs<float>(const Launch&, Uplo, int, const int*, int, const float* const*, const int*, float* const*,
                            const int*, int);
template void vpotrs<double>(const Launch&, Uplo, int, const int*, int, const double* const*, const int*,
                             double* const*, const int*, int);

}  // namespace starfact::batched::cuda
