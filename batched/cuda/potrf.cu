// Batched Cholesky: potrf and potrs on arrays of device matrices, our own kernels.
//
// Orders up to kLeafMax (32): one kernel, one pass over memory. Each matrix gets a group of
// lanes in one warp (one lane per row, the row in registers, sized by a compile-time bound;
// several matrices per block), the lanes load and store its triangle column by column
// (coalesced; the upper triangle is transposed through shared memory), and each right-looking
// step broadcasts the current column through shared memory. potrs up to kCut (32) is the same
// idea with shuffles: lane r holds row r and column r of L, a few right-hand sides at a time.
//
// Larger orders: the recursive formulation over the whole batch (each step one launch for all
// matrices), cut at multiples of kCut:
//   potrf(A) = potrf(A11); A21 <- A21 L11^{-T}; A22 <- A22 - A21 A21^T; potrf(A22)
// The triangular solves recurse the same way down to kCut-column leaves (our kernel: the leaf's
// triangle in shared memory, one row of the right-hand side per thread), with the off-diagonal
// updates as cuBLAS batched gemms; the symmetric update is the same recursion over its
// rectangles (batched gemms, one per level and shape) plus our kernel for its diagonal blocks
// (64 x 64 in double in updates of order above 128, else kCut x kCut), which writes only
// their named triangle. The upper case is the lower one read through transposed indices:
// every kernel and gemm takes a View that maps (i, j) of the lower factor L = U^T to memory.
//
// potrf_strided (a batch in one array at a fixed stride) runs the same walk with the single
// gemms as cuBLAS strided batched gemms (no pointer arrays, slightly faster: docs/batched.md,
// "Fixed sizes against the vendor libraries").
//
// A matrix whose leading minor fails keeps its info from the leaf that saw it; the later leaves
// and solves skip it (the batched gemms still touch its trailing part, which LAPACK leaves
// undefined too). Its leading (info-1) x (info-1) factor is final.
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "batched/cuda/common.cuh"
#include "batched/cuda/potrf_leaf.cuh"
#include "batched/cuda/potrf_registers.hpp"
#include "batched/cuda/trsv_block.cuh"
#include "common/cuda_blas.hpp"

namespace starfact::batched::cuda {
namespace {

// ---- Size thresholds (the one table a tuning sweep changes) ---------------------------------

/// Compile-time bounds of the register factorization: order n runs in the smallest bound >= n.
/// (A bound of 64, one matrix per two-warp block, is much slower at order 64 than the cut at 32
/// with one step of the recursion above it.)
constexpr int kLeafBounds[] = {4, 8, 16, 32};
/// The largest order factored in registers: the potrf recursion stops there.
constexpr int kLeafMax = kLeafBounds[std::size(kLeafBounds) - 1];
static_assert(kVPotrfRegisterMax == kLeafMax, "vpotrf hands the register kernel what it can factor");
/// Width of the other leaves (triangular solves, diagonal blocks of the symmetric update) and
/// granularity of every cut; also the largest order of the register solve (one warp).
constexpr int kCut = 32;
/// Compile-time bounds of the register solve (potrs of orders <= kCut).
constexpr int kSolveBounds[] = {4, 8, 16, 32};
/// Right-hand sides solved together by the register solve (independent shuffle chains).
constexpr int kSolveChunk = 4;
/// Threads per block of the register kernels (several matrices per block when n <= 32).
constexpr int kLeafThreads = 128;
/// Rows of the right-hand side per block in the leaf triangular solve.
constexpr int kSolveRows = 64;
/// Threads per block of the diagonal-block symmetric update.
constexpr int kSyrkThreads = 64;
/// Diagonal blocks of the symmetric update (double, tensor cores) are kSyrkWide wide in updates
/// of order above kSyrkWideAbove, so their rectangles stop a level higher (no 32 x 32 cuBLAS
/// gemms, which read the whole panel once more). By kernel times (Nsight Compute) the wide
/// blocks beat a 32-wide block and the gemm it leaves in the 256-order update of a 512
/// factorization, and lose to them in updates of order 128 and 64; hence above 128 only.
constexpr int kSyrkWide = 64;
constexpr int kSyrkWideAbove = 128;
/// potrs of orders above kCut with at most kPotrsBlockMaxNrhs right-hand sides: the block
/// kernel (trsv_block.cuh: the factor read once, coalesced, in one launch) when its columns fit
/// in kPotrsBlockShared bytes of shared memory per block; else, and for more right-hand sides,
/// the batch-wide recursion (leaf solves and batched gemms), which the sweep of the solves
/// found 1.2-2.4x slower at 1, 2 and 4 right-hand sides and 2.0-2.2x faster at 16 (5 to 15 not
/// measured; docs/batched.md, "The solves").
/// STARFACT_BATCHED_POTRS=block|recursive (read once per process) or set_potrs_path (kernels.hpp)
/// forces one of them, for benchmarks and tests.
constexpr std::size_t kPotrsBlockShared = 200 * 1024;
constexpr int kPotrsBlockMaxNrhs = 4;

__host__ __device__ constexpr int pow2_at_least(int n) {
    int p = 1;
    while (p < n) p *= 2;
    return p;
}

// ---- Views --------------------------------------------------------------------------------

/// Element (i, j) of the lower factor's view of every matrix: ptr[b] + off + i * rs + j * cs.
/// trans means the matrix in memory is the transpose of the view (upper storage, or B^T).
struct View {
    long long off = 0;
    int rs = 1;
    int cs = 1;
    int ld = 1;
    bool trans = false;

    __host__ __device__ long long idx(int i, int j) const {
        return off + static_cast<long long>(i) * rs + static_cast<long long>(j) * cs;
    }
    View at(int i, int j) const {
        View v = *this;
        v.off = idx(i, j);
        return v;
    }
};

View make_view(int ld, bool trans) {
    View v;
    v.ld = ld;
    v.trans = trans;
    v.rs = trans ? ld : 1;
    v.cs = trans ? 1 : ld;
    return v;
}

// ---- The register kernel: whole factorization of orders <= NB ------------------------------

/// Factors the n x n block at view v of every matrix (n <= NB). info_base is the block's
/// offset on the diagonal; when after_first is set, a matrix whose info is already nonzero is
/// skipped (an earlier block failed), else info is written for every matrix.
/// kVar (vpotrf, variable sizes): matrix b's order is vn[b] and its leading dimension vld[b]
/// (n, v.off and v.ld are unused, v.trans gives the triangle); each group of lanes stops after
/// its own matrix's last column or first failing pivot, so a small matrix costs few steps.
template <class T, int NB, bool kVar>
__global__ void __launch_bounds__(kLeafThreads)
    potrf_leaf_kernel(T* const* A, View v, int n, const int* vn, const int* vld, int* info, int info_base,
                      bool after_first, int count) {
    constexpr int P = pow2_at_least(NB);  // lanes per matrix, inside one warp
    constexpr int G = kLeafThreads / P;   // matrices per block
    constexpr int LDS = NB + 1;
    __shared__ T s_mat[G][NB * LDS];
    __shared__ T s_col[G][2 * P];

    const int g = threadIdx.x / P;
    const int r = threadIdx.x % P;
    const int b = blockIdx.x * G + g;
    // The group's lanes (groups leave the step loop at different steps when kVar).
    const unsigned group = P == 32 ? 0xffffffffu : ((1u << P) - 1u) << ((threadIdx.x % 32) / P * P);
    bool active = b < count;
    if (active && after_first) active = info[b] == 0;
    int nn = 0, ld = v.ld;  // inactive groups compute on the identity and store nothing
    T* a = nullptr;
    if (active) {
        if constexpr (kVar) {
            nn = vn[b];
            ld = vld[b];
            a = A[b];
        } else {
            nn = n;
            a = A[b] + v.off;
        }
    }
    const int fail = detail::leaf_factor<T, NB, P, kVar>(a, ld, v.trans, nn, r, group, s_mat[g], s_col[g]);
    if (r == 0 && b < count) {
        if (!after_first)
            info[b] = fail ? info_base + fail : 0;
        else if (active && fail)
            info[b] = info_base + fail;
    }
}

/// Launches the register kernel with the smallest bound >= n (kVar: n is the batch's largest order).
template <class T, bool kVar = false, std::size_t I = 0>
void launch_leaf(cudaStream_t stream, int n, T* const* A, View v, const int* vn, const int* vld, int* info,
                 int info_base, bool after_first, int count) {
    constexpr int NB = kLeafBounds[I];
    if constexpr (I + 1 < std::size(kLeafBounds)) {
        if (n > NB) return launch_leaf<T, kVar, I + 1>(stream, n, A, v, vn, vld, info, info_base, after_first, count);
    }
    constexpr int G = kLeafThreads / pow2_at_least(NB);
    potrf_leaf_kernel<T, NB, kVar><<<detail::ceil_div(count, G), kLeafThreads, 0, stream>>>(
        A, v, n, vn, vld, info, info_base, after_first, count);
    detail::check_launch("potrf leaf kernel");
}

// ---- The register solve: potrs of orders <= NB ----------------------------------------------

/// B <- A^{-1} B for every matrix from its factor (view lv, n <= NB): one group of lanes per
/// matrix, lane r holding row r and column r of L, CH right-hand sides at a time with their
/// entries spread over the lanes; each substitution step is one shuffle per right-hand side.
template <class T, int NB, int CH>
__global__ void __launch_bounds__(kLeafThreads)
    potrs_small_kernel(const T* const* A, View lv, int n, T* const* B, int ldb, int nrhs, int count) {
    constexpr int P = pow2_at_least(NB);
    constexpr int G = kLeafThreads / P;
    constexpr int LDS = NB + 1;
    __shared__ T s_mat[G][NB * LDS];

    const int g = threadIdx.x / P;
    const int r = threadIdx.x % P;
    const int b = blockIdx.x * G + g;
    const int nn = b < count ? n : 0;
    const T* a = nn > 0 ? A[b] + lv.off : nullptr;
    T* s = s_mat[g];
    T lrow[NB], lcol[NB];  // L(r, j) and L(i, r)
#pragma unroll
    for (int o = 0; o < NB; ++o) {
        const bool in = r < nn && o < nn && (lv.trans ? r <= o : r >= o);
        if (in) lrow[o] = a[r + o * lv.ld];
    }
#pragma unroll
    for (int o = 0; o < NB; ++o) {
        const bool in = r < nn && o < nn && (lv.trans ? r <= o : r >= o);
        if (in) {
            if (lv.trans)
                s[o + r * LDS] = lrow[o];
            else
                s[r + o * LDS] = lrow[o];
        }
    }
    __syncwarp();
#pragma unroll
    for (int j = 0; j < NB; ++j) {
        lrow[j] = (r < nn && j < nn && j <= r) ? s[r + j * LDS] : T(r == j ? 1 : 0);
        lcol[j] = (r < nn && j < nn && j >= r) ? s[j + r * LDS] : T(r == j ? 1 : 0);
    }

    // 1 / L(r, r): lane j scales step j by it (a division in the chain would serialize it).
    const T dinv = T(1) / (r < nn ? s[r + r * LDS] : T(1));
    T* x = nn > 0 ? B[b] : nullptr;
    const int lane_base = (threadIdx.x % 32) / P * P;  // the group's first lane in the warp
    for (int c0 = 0; c0 < nrhs; c0 += CH) {            // CH independent substitutions in flight
        T y[CH];
#pragma unroll
        for (int c = 0; c < CH; ++c)
            y[c] = (r < nn && c0 + c < nrhs) ? x[r + static_cast<long long>(c0 + c) * ldb] : T(0);
#pragma unroll
        for (int j = 0; j < NB; ++j) {  // L y = b
#pragma unroll
            for (int c = 0; c < CH; ++c) {
                if (r == j) y[c] *= dinv;
                const T yj = __shfl_sync(0xffffffffu, y[c], lane_base + j);
                if (r > j) y[c] -= lrow[j] * yj;
            }
        }
#pragma unroll
        for (int j = NB - 1; j >= 0; --j) {  // L^T x = y
#pragma unroll
            for (int c = 0; c < CH; ++c) {
                if (r == j) y[c] *= dinv;
                const T xj = __shfl_sync(0xffffffffu, y[c], lane_base + j);
                if (r < j) y[c] -= lcol[j] * xj;
            }
        }
#pragma unroll
        for (int c = 0; c < CH; ++c)
            if (r < nn && c0 + c < nrhs) x[r + static_cast<long long>(c0 + c) * ldb] = y[c];
    }
}

template <class T, std::size_t I = 0>
void launch_potrs_small(cudaStream_t stream, int n, const T* const* A, View lv, T* const* B, int ldb, int nrhs,
                        int count) {
    constexpr int NB = kSolveBounds[I];
    if constexpr (I + 1 < std::size(kSolveBounds)) {
        if (n > NB) return launch_potrs_small<T, I + 1>(stream, n, A, lv, B, ldb, nrhs, count);
    }
    constexpr int G = kLeafThreads / pow2_at_least(NB);
    const int blocks = detail::ceil_div(count, G);
    if (nrhs >= kSolveChunk)
        potrs_small_kernel<T, NB, kSolveChunk><<<blocks, kLeafThreads, 0, stream>>>(A, lv, n, B, ldb, nrhs, count);
    else
        potrs_small_kernel<T, NB, 1><<<blocks, kLeafThreads, 0, stream>>>(A, lv, n, B, ldb, nrhs, count);
    detail::check_launch("potrs register kernel");
}

// ---- Leaf triangular solve from the right: X L^T = B (kTransL) or X L = B -------------------

/// Position of L(i, j), i >= j, in a packed lower triangle of order kCut (column by column).
__host__ __device__ constexpr int packed_lower(int i, int j) { return j * kCut - j * (j - 1) / 2 + (i - j); }

/// X is m x k (view xv), L is k x k lower (view lv), k <= kCut; X is overwritten. The batch is
/// cut into tiles of kSolveRows rows of one matrix; a grid of the blocks that fit on the device
/// at once goes through them, each block copying its next tile's X and L (the packed lower
/// triangle) into shared memory by cp.async, double-buffered, while it solves the current one:
/// one row per thread, in registers, L read from shared memory. So memory stays busy while the
/// rows run their 32-step substitutions. Matrices with a nonzero info (when info is given) are
/// skipped. X transposed in memory (the upper factor's panels) is copied in and written back
/// along its rows, through the same shared tile, so that both stay coalesced. (A block per tile
/// that loads, solves and stores in turn is slower: with few resident blocks per SM, memory is
/// idle while they compute.)
template <class T, bool kTransL>
__global__ void __launch_bounds__(kSolveRows) trsm_leaf_kernel(T* const* X, View xv, const T* const* L, View lv, int m,
                                                               int k, const int* info, int count, int row_blocks) {
    constexpr int K = kCut;
    constexpr int R = kSolveRows;
    constexpr int LX = R + 1;  // column stride of a tile (odd: the row-wise copies of X^T spread over the banks)
    constexpr int P = K * (K + 1) / 2;
    __shared__ T sX[2][K * LX];  // X(row0 + i, j) at sX[buf][j * LX + i]
    __shared__ T sL[2][P];
    __shared__ T sD[K];  // 1 / L(j, j)

    const int tid = threadIdx.x;
    const long long tiles = static_cast<long long>(row_blocks) * count;
    auto fetch = [&](long long tile, int buf) {
        if (tile < tiles) {
            const int b = static_cast<int>(tile / row_blocks);
            const int row0 = static_cast<int>(tile % row_blocks) * R;
            if (info == nullptr || info[b] == 0) {
                const T* x = X[b];
                const T* l = L[b];
                if (xv.trans) {
                    for (int e = tid; e < R * K; e += R) {
                        const int i = e / K, j = e % K;
                        if (row0 + i < m && j < k) detail::cp_async(&sX[buf][j * LX + i], x + xv.idx(row0 + i, j));
                    }
                } else if (row0 + tid < m) {
                    for (int j = 0; j < k; ++j) detail::cp_async(&sX[buf][j * LX + tid], x + xv.idx(row0 + tid, j));
                }
                for (int e = tid; e < K * K; e += R) {
                    const int i = lv.trans ? e / K : e % K;
                    const int j = lv.trans ? e % K : e / K;
                    if (i < j) continue;
                    if (i < k)  // then j < k too
                        detail::cp_async(&sL[buf][packed_lower(i, j)], l + lv.idx(i, j));
                    else  // past the order: the identity
                        sL[buf][packed_lower(i, j)] = T(i == j ? 1 : 0);
                }
            }
        }
        detail::cp_async_commit();
    };

    int buf = 0;
    fetch(blockIdx.x, 0);
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x, buf ^= 1) {
        detail::cp_async_wait_all();
        __syncthreads();  // the tile is in; every thread is done with the other buffers
        fetch(tile + gridDim.x, buf ^ 1);
        const int b = static_cast<int>(tile / row_blocks);
        const int row0 = static_cast<int>(tile % row_blocks) * R;
        const bool skip = info != nullptr && info[b] != 0;  // uniform over the block
        if (!skip && tid < K) sD[tid] = T(1) / sL[buf][packed_lower(tid, tid)];
        __syncthreads();
        if (skip) continue;

        T xr[K];
#pragma unroll
        for (int j = 0; j < K; ++j) xr[j] = j < k ? sX[buf][j * LX + tid] : T(0);
        const T* sl = sL[buf];
        if constexpr (kTransL) {
#pragma unroll
            for (int j = 0; j < K; ++j) {
                xr[j] *= sD[j];
#pragma unroll
                for (int q = j + 1; q < K; ++q) xr[q] -= xr[j] * sl[packed_lower(q, j)];
            }
        } else {
#pragma unroll
            for (int j = K - 1; j >= 0; --j) {
                xr[j] *= sD[j];
#pragma unroll
                for (int q = 0; q < j; ++q) xr[q] -= xr[j] * sl[packed_lower(j, q)];
            }
        }
        T* x = X[b];
        if (xv.trans) {  // back through the tile (this buffer is not being refilled), along X^T's rows
#pragma unroll
            for (int j = 0; j < K; ++j) sX[buf][j * LX + tid] = xr[j];
            __syncthreads();
            for (int e = tid; e < R * K; e += R) {
                const int i = e / K, j = e % K;
                if (row0 + i < m && j < k) x[xv.idx(row0 + i, j)] = sX[buf][j * LX + i];
            }
        } else if (row0 + tid < m) {
#pragma unroll
            for (int j = 0; j < K; ++j)
                if (j < k) x[xv.idx(row0 + tid, j)] = xr[j];
        }
    }
}

template <class T, bool kTransL>
void launch_trsm_leaf(cudaStream_t stream, T* const* X, View xv, const T* const* L, View lv, int m, int k,
                      const int* info, int count) {
    const auto resident = static_cast<unsigned>(
        detail::resident_blocks(trsm_leaf_kernel<T, kTransL>, kSolveRows, "potrf trsm leaf (grid)"));
    const int row_blocks = detail::ceil_div(m, kSolveRows);
    const auto tiles = static_cast<unsigned>(static_cast<long long>(row_blocks) * count);
    trsm_leaf_kernel<T, kTransL>
        <<<std::min(tiles, resident), kSolveRows, 0, stream>>>(X, xv, L, lv, m, k, info, count, row_blocks);
    detail::check_launch("potrf trsm leaf kernel");
}

// ---- Symmetric update of the diagonal blocks: C_tt <- C_tt - A_t A_t^T (lower part) ---------

/// C is n x n (view cv, only its 32 x 32 diagonal blocks), A is n x k (view av); one block per
/// (matrix, diagonal block), each thread a 4 x 4 tile of the 32 x 32 product. Only the lower
/// triangle of the view is read and written.
template <class T>
__global__ void __launch_bounds__(kSyrkThreads)
    syrk_diag_kernel(T* const* C, View cv, const T* const* A, View av, int n, int k, const int* info, int count,
                     int diag_blocks) {
    constexpr int K = kCut;
    constexpr int LK = K + 1;
    constexpr int W = 4;      // tile width per thread
    constexpr int S = K / W;  // threads per dimension; thread rows tx + S p, columns ty + S q
    static_assert(S * S == kSyrkThreads, "one 4 x 4 tile per thread");
    __shared__ T sA[K * LK];

    const int b = blockIdx.x / diag_blocks;
    const int t0 = (blockIdx.x % diag_blocks) * K;
    if (b >= count) return;
    if (info != nullptr && info[b] != 0) return;
    const T* a = A[b];
    const int tid = threadIdx.x;
    const int tx = tid % S;
    const int ty = tid / S;
    T acc[W][W];
#pragma unroll
    for (int p = 0; p < W; ++p)
#pragma unroll
        for (int q = 0; q < W; ++q) acc[p][q] = T(0);

    for (int l0 = 0; l0 < k; l0 += K) {
#pragma unroll
        for (int e = tid; e < K * K; e += kSyrkThreads) {
            const int i = av.trans ? e / K : e % K;
            const int l = av.trans ? e % K : e / K;
            const bool in = t0 + i < n && l0 + l < k;
            sA[i + l * LK] = in ? a[av.idx(t0 + i, l0 + l)] : T(0);
        }
        __syncthreads();
#pragma unroll 4
        for (int l = 0; l < K; ++l) {
            T ai[W], aj[W];
#pragma unroll
            for (int p = 0; p < W; ++p) {
                ai[p] = sA[tx + S * p + l * LK];
                aj[p] = sA[ty + S * p + l * LK];
            }
#pragma unroll
            for (int p = 0; p < W; ++p)
#pragma unroll
                for (int q = 0; q < W; ++q) acc[p][q] += ai[p] * aj[q];
        }
        __syncthreads();
    }
    T* c = C[b];
#pragma unroll
    for (int p = 0; p < W; ++p)
#pragma unroll
        for (int q = 0; q < W; ++q) {
            const int i = tx + S * p, j = ty + S * q;
            if (i >= j && t0 + i < n) c[cv.idx(t0 + i, t0 + j)] -= acc[p][q];
        }
}

/// The same update in FP64 on the tensor cores (double only; float keeps the kernel above,
/// since float wmma would round through TF32), for KD x KD diagonal blocks (KD = 32 or 64):
/// KD / 16 warps, the KD / 8 * (KD / 8 + 1) / 2 tiles of 8 x 8 of the lower triangle shared
/// by pairs of tile rows (warp w: rows w and KD / 8 - 1 - w, the same count of tiles for every
/// warp), m8n8k4 products from the staged kCut-column chunks of A, the sum staged in shared
/// memory and subtracted from C's lower triangle only.
template <int KD>
__global__ void __launch_bounds__(2 * KD)
    syrk_diag_dmma_kernel(double* const* C, View cv, const double* const* A, View av, int n, int k, const int* info,
                          int count, int diag_blocks) {
    namespace wmma = nvcuda::wmma;
    constexpr int K = kCut;
    constexpr int NT = 2 * KD;
    constexpr int TR = KD / 8;  // tile rows
    constexpr int LA = KD + 4;  // a multiple of 4, as wmma wants; tiles start on 32-byte boundaries
    static_assert(K == 32 && (KD == 32 || KD == 64), "4 x 4 or 8 x 8 tiles of 8 x 8, 32-column chunks");
    // Two chunks of KD x K, copied by cp.async one ahead of the one being multiplied; at the end
    // the product (KD x KD) is staged in the same space.
    __shared__ __align__(32) double sbuf[2 * LA * K];
    static_assert(KD <= 2 * K, "the product fits in the two chunks");

    const int b = blockIdx.x / diag_blocks;
    const int t0 = (blockIdx.x % diag_blocks) * KD;
    if (b >= count) return;
    if (info != nullptr && info[b] != 0) return;
    const double* a = A[b];
    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int I0 = warp;  // this warp's two tile rows
    const int I1 = TR - 1 - warp;
    wmma::fragment<wmma::accumulator, 8, 8, 4, double> acc0[TR / 2], acc1[TR];
#pragma unroll
    for (int J = 0; J < TR; ++J) {
        if (J < TR / 2) wmma::fill_fragment(acc0[J], 0.0);
        wmma::fill_fragment(acc1[J], 0.0);
    }

    auto fetch = [&](int l0, double* dst) {
#pragma unroll
        for (int e = tid; e < KD * K; e += NT) {
            const int i = av.trans ? e / K : e % KD;
            const int l = av.trans ? e % K : e / KD;
            if (t0 + i < n && l0 + l < k)
                detail::cp_async(dst + i + l * LA, a + av.idx(t0 + i, l0 + l));
            else
                dst[i + l * LA] = 0.0;
        }
        detail::cp_async_commit();
    };
    fetch(0, sbuf);
    for (int l0 = 0, q = 0; l0 < k; l0 += K, ++q) {
        const double* sA = sbuf + (q & 1) * LA * K;
        if (l0 + K < k) {
            fetch(l0 + K, sbuf + ((q + 1) & 1) * LA * K);  // read last step, released by its closing barrier
            detail::cp_async_wait_but_one();
        } else {
            detail::cp_async_wait_all();
        }
        __syncthreads();
#pragma unroll
        for (int s = 0; s < K; s += 4) {
            wmma::fragment<wmma::matrix_a, 8, 8, 4, double, wmma::col_major> a0, a1;
            wmma::load_matrix_sync(a0, sA + 8 * I0 + s * LA, LA);
            wmma::load_matrix_sync(a1, sA + 8 * I1 + s * LA, LA);
#pragma unroll
            for (int J = 0; J < TR; ++J) {
                if (J <= I1) {  // (I1 >= I0)
                    // B = A^T: element (l, j) = A(8J + j, s + l), row-major with leading LA.
                    wmma::fragment<wmma::matrix_b, 8, 8, 4, double, wmma::row_major> bj;
                    wmma::load_matrix_sync(bj, sA + 8 * J + s * LA, LA);
                    if (J < TR / 2 && J <= I0) wmma::mma_sync(acc0[J], a0, bj, acc0[J]);
                    wmma::mma_sync(acc1[J], a1, bj, acc1[J]);
                }
            }
        }
        __syncthreads();
    }
    double* sA = sbuf;
#pragma unroll
    for (int J = 0; J < TR; ++J) {
        if (J < TR / 2 && J <= I0) wmma::store_matrix_sync(sA + 8 * I0 + 8 * J * LA, acc0[J], LA, wmma::mem_col_major);
        if (J <= I1) wmma::store_matrix_sync(sA + 8 * I1 + 8 * J * LA, acc1[J], LA, wmma::mem_col_major);
    }
    __syncthreads();
    double* c = C[b];
    for (int e = tid; e < KD * KD; e += NT) {
        const int i = cv.trans ? e / KD : e % KD;  // consecutive threads along memory
        const int j = cv.trans ? e % KD : e / KD;
        if (i >= j && t0 + i < n) c[cv.idx(t0 + i, t0 + j)] -= sA[i + j * LA];
    }
}

// ---- Batched gemm through cuBLAS on sub-blocks ----------------------------------------------

/// Up to kPtrJobs gemms' pointer arrays in one launch (the offsets of a whole recursion are
/// known before it runs): job g writes pa/pb/pc[g * count + b] = base[b] + offset.
constexpr int kPtrJobs = 64;
template <class T>
struct PtrJobs {
    const T* const* A[kPtrJobs];
    const T* const* B[kPtrJobs];
    T* const* C[kPtrJobs];
    long long oa[kPtrJobs];
    long long ob[kPtrJobs];
    long long oc[kPtrJobs];
};

template <class T>
__global__ void gemm_pointers_many_kernel(const PtrJobs<T> jobs, const T** pa, const T** pb, T** pc, int count) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    const int g = blockIdx.y;
    if (b < count) {
        const std::size_t o = static_cast<std::size_t>(g) * count + b;
        pa[o] = jobs.A[g][b] + jobs.oa[g];
        pb[o] = jobs.B[g][b] + jobs.ob[g];
        pc[o] = jobs.C[g][b] + jobs.oc[g];
    }
}

/// Host pointer mode for alpha and beta while it lives; the caller's mode is restored.
class HostPointerMode {
public:
    explicit HostPointerMode(cublasHandle_t h) : h_(h) {
        detail::check(cublasGetPointerMode(h_, &saved_), "cublasGetPointerMode");
        if (saved_ != CUBLAS_POINTER_MODE_HOST)
            detail::check(cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
    }
    ~HostPointerMode() {
        if (saved_ != CUBLAS_POINTER_MODE_HOST) cublasSetPointerMode(h_, saved_);
    }
    HostPointerMode(const HostPointerMode&) = delete;
    HostPointerMode& operator=(const HostPointerMode&) = delete;

private:
    cublasHandle_t h_;
    cublasPointerMode_t saved_ = CUBLAS_POINTER_MODE_HOST;
};

/// Where the recursion cuts an order n > kCut: a multiple of kCut near n / 2.
int split(int n) {
    const int blocks = detail::ceil_div(n, kCut);
    return kCut * ((blocks + 1) / 2);
}

/// The batch-wide recursion: every call is one launch (or two) over all matrices.
///
/// The batched gemms' pointer arrays: the recursion is first walked without launching anything
/// (plan), its gemms' offsets recorded, and every pointer array written by one launch per
/// kPtrJobs gemms before the real walk, which takes gemm g's arrays from slot g. (A launch
/// writing each gemm's arrays just before it is slightly slower.)
template <class T>
class Batch {
    struct Job {
        const T* const* A;
        const T* const* B;
        T* const* C;
        long long oa, ob, oc;
    };

public:
    /// slots: gemm pointer-array slots to carve, at least the number of gemms of the walk (see
    /// gemms()); 0 only for planning.
    Batch(const Launch& launch, int count, int* info, int slots)
        : launch_(launch), count_(count), info_(info), slots_(slots) {
        if (slots > 0) {
            detail::WorkspaceCarver carver(launch);
            const std::size_t e = static_cast<std::size_t>(count_) * static_cast<std::size_t>(slots);
            pa_ = carver.take<const T*>(e);
            pb_ = carver.take<const T*>(e);
            pc_ = carver.take<T*>(e);
        }
    }

    static std::size_t workspace(int count, int slots) {
        const std::size_t e = static_cast<std::size_t>(count) * static_cast<std::size_t>(slots);
        return 2 * detail::WorkspaceCarver::round(sizeof(const T*) * e) +
               detail::WorkspaceCarver::round(sizeof(T*) * e);
    }

    /// Number of batched gemms that walk() issues (it is run in planning mode: nothing launched).
    template <class Walk>
    static int gemms(Walk&& walk) {
        const Launch none{};
        Batch b(none, 1, nullptr, 0);
        b.planning_ = true;
        walk(b);
        return static_cast<int>(b.plan_.size());
    }

    /// Runs walk(*this) (calls to potrf / trsm), every gemm pointer array written up front.
    template <class Walk>
    void run(Walk&& walk) {
        planning_ = true;
        plan_.clear();
        walk(*this);
        planning_ = false;
        if (static_cast<int>(plan_.size()) > slots_)
            throw std::logic_error("batched potrf: fewer gemm pointer slots than gemms");
        write_pointers();
        next_ = 0;
        walk(*this);
    }

    /// C (m x n) <- C - A op(B): op(B) = B^T (B is n x k) when b_trans, else B (k x n).
    void gemm_minus(T* const* Cp, View c, const T* const* Ap, View a, const T* const* Bp, View bv, bool b_trans, int m,
                    int n, int k) {
        if (m <= 0 || n <= 0 || k <= 0) return;
        const Job job{Ap, Bp, Cp, a.off, bv.off, c.off};
        gemm_jobs(&job, 1, c, a, bv, b_trans, m, n, k);
    }

    /// gemm_minus for `jobs` gemms of the same shape and views but for their offsets (independent:
    /// none reads what another writes), in one batched gemm over jobs * count problems.
    /// cuBLAS's: an FP64 tensor-core batched gemm of our own (mma m8n8k4, 64 x 64 or 64 x 32
    /// tiles of C, 16-deep chunks double-buffered by cp.async) is slower on the recursion's
    /// tall-skinny shapes, in the solves and in the update alike (docs/batched.md, "Decisions,
    /// and what was tried and dropped").
    void gemm_jobs(const Job* job, int jobs, View c, View a, View bv, bool b_trans, int m, int n, int k) {
        if (planning_) {
            plan_.insert(plan_.end(), job, job + jobs);
            return;
        }
        // The operand wanted is V (tr false) or V^T; memory holds V or V^T (trans).
        auto op = [](const View& v, bool tr) { return v.trans != tr ? CUBLAS_OP_T : CUBLAS_OP_N; };
        const T minus_one = T(-1), one = T(1);
        if (sbase_ != nullptr && jobs == 1) {
            // Every matrix of the walk is sbase_ + b * sstride_: cuBLAS's strided batched gemm.
            // (A group of gemms stays one pointer-array call: one strided call per gemm of the
            // group is no faster.)
            ++next_;
            const T* a0 = sbase_ + job->oa;
            const T* b0 = sbase_ + job->ob;
            T* c0 = sbase_ + job->oc;
            if (!c.trans)
                detail::check(
                    cublas::gemm_strided_batched(launch_.cublas, op(a, false), op(bv, b_trans), m, n, k, &minus_one, a0,
                                                 a.ld, sstride_, b0, bv.ld, sstride_, &one, c0, c.ld, sstride_, count_),
                    "cublas gemmStridedBatched");
            else
                detail::check(
                    cublas::gemm_strided_batched(launch_.cublas, op(bv, !b_trans), op(a, true), n, m, k, &minus_one, b0,
                                                 bv.ld, sstride_, a0, a.ld, sstride_, &one, c0, c.ld, sstride_, count_),
                    "cublas gemmStridedBatched");
            return;
        }
        const std::size_t o = static_cast<std::size_t>(next_) * count_;
        next_ += jobs;
        const int problems = jobs * count_;
        const T** pa = pa_ + o;
        const T** pb = pb_ + o;
        T** pc = pc_ + o;
        if (!c.trans)
            detail::check(cublas::gemm_batched(launch_.cublas, op(a, false), op(bv, b_trans), m, n, k, &minus_one, pa,
                                               a.ld, pb, bv.ld, &one, pc, c.ld, problems),
                          "cublas gemmBatched");
        else  // memory holds C^T: C^T <- C^T - op(B)^T A^T
            detail::check(cublas::gemm_batched(launch_.cublas, op(bv, !b_trans), op(a, true), n, m, k, &minus_one, pb,
                                               bv.ld, pa, a.ld, &one, pc, c.ld, problems),
                          "cublas gemmBatched");
    }

    /// X (m x k) <- X L^{-T} (trans_l) or X L^{-1}; L k x k lower.
    void trsm(bool trans_l, T* const* Xp, View x, const T* const* Lp, View l, int m, int k, const int* info) {
        if (m <= 0 || k <= 0) return;
        if (k <= kCut) {
            if (planning_) return;
            if (trans_l)
                launch_trsm_leaf<T, true>(launch_.stream, Xp, x, Lp, l, m, k, info, count_);
            else
                launch_trsm_leaf<T, false>(launch_.stream, Xp, x, Lp, l, m, k, info, count_);
            return;
        }
        const int k1 = split(k), k2 = k - k1;
        if (trans_l) {
            trsm(true, Xp, x, Lp, l, m, k1, info);
            gemm_minus(Xp, x.at(0, k1), Xp, x, Lp, l.at(k1, 0), true, m, k2, k1);
            trsm(true, Xp, x.at(0, k1), Lp, l.at(k1, k1), m, k2, info);
        } else {
            trsm(false, Xp, x.at(0, k1), Lp, l.at(k1, k1), m, k2, info);
            gemm_minus(Xp, x, Xp, x.at(0, k1), Lp, l.at(k1, 0), false, m, k1, k2);
            trsm(false, Xp, x, Lp, l, m, k1, info);
        }
    }

    /// C (n x n, lower) <- C - A A^T, A n x k; both views of the same matrices Cp.
    void syrk(T* const* Cp, View c, View a, int n, int k) {
        if (n <= 0 || k <= 0) return;
        const int kd = syrk_diag_width(n);
        rectangles(Cp, c, a, n, k, kd);
        if (planning_) return;
        const int diag_blocks = detail::ceil_div(n, kd);
        const auto blocks = static_cast<unsigned>(static_cast<long long>(diag_blocks) * count_);
        if constexpr (std::is_same_v<T, double>) {
            if (kd == kSyrkWide)
                syrk_diag_dmma_kernel<kSyrkWide>
                    <<<blocks, 2 * kSyrkWide, 0, launch_.stream>>>(Cp, c, Cp, a, n, k, info_, count_, diag_blocks);
            else
                syrk_diag_dmma_kernel<kCut>
                    <<<blocks, 2 * kCut, 0, launch_.stream>>>(Cp, c, Cp, a, n, k, info_, count_, diag_blocks);
        } else {
            syrk_diag_kernel<T>
                <<<blocks, kSyrkThreads, 0, launch_.stream>>>(Cp, c, Cp, a, n, k, info_, count_, diag_blocks);
        }
        detail::check_launch("potrf syrk diagonal kernel");
    }

    void potrf(T* const* Ap, View v, int off, int n) {
        if (n <= kLeafMax) {
            if (planning_) return;
            launch_leaf<T>(launch_.stream, n, Ap, v.at(off, off), nullptr, nullptr, info_, off, off > 0, count_);
            return;
        }
        const int n1 = split(n), n2 = n - n1;
        potrf(Ap, v, off, n1);
        trsm(true, Ap, v.at(off + n1, off), Ap, v.at(off, off), n2, n1, info_);
        syrk(Ap, v.at(off + n1, off + n1), v.at(off + n1, off), n2, n1);
        potrf(Ap, v, off + n1, n2);
    }

private:
    /// Width of the symmetric update's diagonal blocks (our kernel; the rectangles between them
    /// go to cuBLAS): kSyrkWide in double for updates of order above kSyrkWideAbove, else kCut.
    static int syrk_diag_width(int n) { return std::is_same_v<T, double> && n > kSyrkWideAbove ? kSyrkWide : kCut; }

    // The off-diagonal rectangles of the symmetric update, cut at multiples of kd (the diagonal
    // blocks left are kd-aligned and at most kd wide, as the diagonal kernel takes them).
    void rectangles(T* const* Cp, View c, View a, int n, int k, int kd) {
        // Level by level (the rectangles are independent): those of one level with the same
        // shape go to one batched gemm over (rectangles x count) problems, 3 launches instead of
        // 7 for n = 256: slightly faster than one gemm per rectangle, lower and upper.
        struct Node {
            View c, a;
            int n;
        };
        std::vector<Node> level{{c, a, n}}, next;
        std::vector<Job> jobs;
        while (!level.empty()) {
            next.clear();
            std::size_t i = 0;
            while (i < level.size()) {
                if (level[i].n <= kd) {
                    ++i;
                    continue;
                }
                const int n1 = kd * ((detail::ceil_div(level[i].n, kd) + 1) / 2), n2 = level[i].n - n1;
                jobs.clear();
                std::size_t j = i;
                for (; j < level.size() && level[j].n == level[i].n; ++j) {
                    const Node& r = level[j];
                    jobs.push_back(Job{Cp, Cp, Cp, r.a.at(n1, 0).off, r.a.off, r.c.at(n1, 0).off});
                    next.push_back({r.c, r.a, n1});
                    next.push_back({r.c.at(n1, n1), r.a.at(n1, 0), n2});
                }
                gemm_jobs(jobs.data(), static_cast<int>(jobs.size()), c, a, a, true, n2, n1, k);
                i = j;
            }
            level.swap(next);
        }
    }

    void write_pointers() {
        for (std::size_t g0 = 0; g0 < plan_.size(); g0 += kPtrJobs) {
            const int jobs = static_cast<int>(std::min<std::size_t>(kPtrJobs, plan_.size() - g0));
            PtrJobs<T> p{};
            for (int g = 0; g < jobs; ++g) {
                const Job& j = plan_[g0 + g];
                p.A[g] = j.A;
                p.B[g] = j.B;
                p.C[g] = j.C;
                p.oa[g] = j.oa;
                p.ob[g] = j.ob;
                p.oc[g] = j.oc;
            }
            const std::size_t o = g0 * static_cast<std::size_t>(count_);
            const dim3 grid(detail::ceil_div(count_, 256), jobs);
            gemm_pointers_many_kernel<T><<<grid, 256, 0, launch_.stream>>>(p, pa_ + o, pb_ + o, pc_ + o, count_);
            detail::check_launch("potrf gemm pointers");
        }
    }

public:
    /// The walk's matrices are base + b * stride (potrf_strided): single gemms go strided.
    void set_strided(T* base, long long stride) {
        sbase_ = base;
        sstride_ = stride;
    }

private:
    T* sbase_ = nullptr;
    long long sstride_ = 0;
    const Launch& launch_;
    int count_;
    int* info_;
    int slots_ = 0;
    const T** pa_ = nullptr;
    const T** pb_ = nullptr;
    T** pc_ = nullptr;
    bool planning_ = false;
    int next_ = 0;
    std::vector<Job> plan_;
};

/// The walks of potrf (order n > kLeafMax) and of potrs's recursion (order n > kCut).
template <class T>
struct PotrfWalk {
    T* const* A;
    View v;
    int n;
    void operator()(Batch<T>& b) const { b.potrf(A, v, 0, n); }
};
template <class T>
struct PotrsWalk {
    T* const* B;
    View x;
    const T* const* A;
    View l;
    int n, nrhs;
    void operator()(Batch<T>& b) const {
        b.trsm(true, B, x, A, l, nrhs, n, nullptr);
        b.trsm(false, B, x, A, l, nrhs, n, nullptr);
    }
};

/// Pointer-array slots of potrf / potrs's recursion at order n: one per gemm of the walk.
template <class T>
int potrf_slots(int n) {
    // The walk's gemms do not depend on the triangle today; the larger of both, to stay safe.
    return std::max({1, Batch<T>::gemms(PotrfWalk<T>{nullptr, make_view(n, false), n}),
                     Batch<T>::gemms(PotrfWalk<T>{nullptr, make_view(n, true), n})});
}
template <class T>
int potrs_slots(int n, int nrhs) {
    return std::max(1,
                    Batch<T>::gemms(PotrsWalk<T>{nullptr, make_view(n, true), nullptr, make_view(n, false), n, nrhs}));
}

// ---- Block solve for orders above kCut --------------------------------------------------------

/// B <- A^{-1} B, one block per (matrix, R right-hand sides): L y = b, then L^T x = y, L from
/// the lower (trans false) or upper (trans true: L(i, j) at a[j + i * lda]) storage.
template <class T, int R>
__global__ void __launch_bounds__(256)
    potrs_block_kernel(const T* const* A, int lda, bool trans, int n, T* const* B, int ldb, int nrhs) {
    extern __shared__ unsigned char smem[];
    T* x = reinterpret_cast<T*>(smem);
    const int b = blockIdx.x, c0 = blockIdx.y * R;
    const int rc = nrhs - c0 < R ? nrhs - c0 : R;
    T* col = B[b] + static_cast<std::size_t>(c0) * ldb;
    detail::block_load<T, R>(col, ldb, n, rc, x);
    const long long ld = lda;
    const detail::TriView<T> l{A[b], trans ? ld : 1, trans ? 1 : ld};   // L(i, j)
    const detail::TriView<T> lt{A[b], trans ? 1 : ld, trans ? ld : 1};  // L^T(i, j) = L(j, i)
    detail::block_trsv<T, R>(l, true, false, n, x, detail::block_ldx(n));
    detail::block_trsv<T, R>(lt, false, false, n, x, detail::block_ldx(n));
    detail::block_store<T, R>(x, n, rc, col, ldb);
}

template <class T, int R>
bool launch_potrs_block(cudaStream_t stream, int n, int nrhs, const T* const* A, int lda, bool trans, T* const* B,
                        int ldb, int count) {
    const std::size_t shared = detail::block_shared_bytes<T, R>(n);
    if (shared > kPotrsBlockShared) return false;
    if (shared > 48 * 1024) detail::opt_in_shared(potrs_block_kernel<T, R>, "potrs (shared memory)");
    const dim3 grid(count, detail::ceil_div(nrhs, R));
    potrs_block_kernel<T, R>
        <<<grid, detail::block_trsv_warps(n) * 32, shared, stream>>>(A, lda, trans, n, B, ldb, nrhs);
    detail::check_launch("potrs (block kernel)");
    return true;
}

template <class T>
bool try_potrs_block(cudaStream_t stream, int n, int nrhs, const T* const* A, int lda, bool trans, T* const* B, int ldb,
                     int count) {
    if (nrhs >= 16)
        return launch_potrs_block<T, 16>(stream, n, nrhs, A, lda, trans, B, ldb, count) ||
               launch_potrs_block<T, 8>(stream, n, nrhs, A, lda, trans, B, ldb, count);
    if (nrhs >= 8) return launch_potrs_block<T, 8>(stream, n, nrhs, A, lda, trans, B, ldb, count);
    if (nrhs >= 2) return launch_potrs_block<T, 4>(stream, n, nrhs, A, lda, trans, B, ldb, count);
    return launch_potrs_block<T, 1>(stream, n, nrhs, A, lda, trans, B, ldb, count);
}

/// The path set by set_potrs_path (-1: none, then the environment's).
std::atomic<int> g_potrs_path{-1};

PotrsPath env_potrs_path() {
    static const PotrsPath path = [] {
        const char* s = std::getenv("STARFACT_BATCHED_POTRS");
        if (s != nullptr && std::strcmp(s, "block") == 0) return PotrsPath::block;
        if (s != nullptr && std::strcmp(s, "recursive") == 0) return PotrsPath::recursive;
        return PotrsPath::automatic;
    }();
    return path;
}

PotrsPath forced_potrs_path() {
    const int set = g_potrs_path.load(std::memory_order_relaxed);
    return set >= 0 ? static_cast<PotrsPath>(set) : env_potrs_path();
}

}  // namespace

template <class T>
std::size_t potrf_workspace(int n, int count) {
    if (n <= kLeafMax || count <= 0) return 0;
    return Batch<T>::workspace(count, potrf_slots<T>(n));
}

template <class T>
void potrf(const Launch& launch, Uplo uplo, int n, T* const* A, int lda, int* info, int count) {
    if (count <= 0) return;
    if (n <= 0) {
        detail::check(cudaMemsetAsync(info, 0, sizeof(int) * static_cast<std::size_t>(count), launch.stream),
                      "potrf info reset");
        return;
    }
    const View v = make_view(lda, uplo == Uplo::upper);
    if (n <= kLeafMax) {
        launch_leaf<T>(launch.stream, n, A, v, nullptr, nullptr, info, 0, false, count);
        return;
    }
    HostPointerMode mode(launch.cublas);
    Batch<T> batch(launch, count, info, potrf_slots<T>(n));
    batch.run(PotrfWalk<T>{A, v, n});
}

template <class T>
void potrf_strided(const Launch& launch, Uplo uplo, int n, T* const* A, T* base, long long stride, int lda, int* info,
                   int count) {
    if (count <= 0) return;
    if (n <= kLeafMax) return potrf<T>(launch, uplo, n, A, lda, info, count);
    const View v = make_view(lda, uplo == Uplo::upper);
    HostPointerMode mode(launch.cublas);
    Batch<T> batch(launch, count, info, potrf_slots<T>(n));
    batch.set_strided(base, stride);
    batch.run(PotrfWalk<T>{A, v, n});
}

template <class T>
void vpotrf_registers(const Launch& launch, Uplo uplo, int nmax, const int* n, T* const* A, const int* lda, int* info,
                      int count) {
    if (count <= 0) return;
    launch_leaf<T, true>(launch.stream, std::max(nmax, 1), A, make_view(1, uplo == Uplo::upper), n, lda, info, 0, false,
                         count);
}

template <class T>
std::size_t potrs_workspace(int n, int nrhs, int count) {
    if (n <= kCut || nrhs <= 0 || count <= 0) return 0;
    return Batch<T>::workspace(count, potrs_slots<T>(n, nrhs));  // the recursion's; the block kernel needs none
}

template <class T>
void potrs(const Launch& launch, Uplo uplo, int n, int nrhs, const T* const* A, int lda, T* const* B, int ldb,
           int count) {
    if (count <= 0 || n <= 0 || nrhs <= 0) return;
    // A X = B with A = L L^T: Y L^T = B^T, then X^T L = Y^T, on the view X = B^T (nrhs x n).
    const View l = make_view(lda, uplo == Uplo::upper);
    const View x = make_view(ldb, true);
    if (n <= kCut) {
        launch_potrs_small<T>(launch.stream, n, A, l, B, ldb, nrhs, count);
        return;
    }
    const PotrsPath path = forced_potrs_path();
    if (path != PotrsPath::recursive && (path == PotrsPath::block || nrhs <= kPotrsBlockMaxNrhs) &&
        try_potrs_block<T>(launch.stream, n, nrhs, A, lda, l.trans, B, ldb, count))
        return;
    Batch<T> batch(launch, count, nullptr, potrs_slots<T>(n, nrhs));
    HostPointerMode mode(launch.cublas);
    batch.run(PotrsWalk<T>{B, x, A, l, n, nrhs});
}

void set_potrs_path(PotrsPath path) {
    g_potrs_path.store(path == PotrsPath::automatic ? -1 : static_cast<int>(path), std::memory_order_relaxed);
}

template std::size_t potrf_workspace<float>(int, int);
template std::size_t potrf_workspace<double>(int, int);
template void potrf<float>(const Launch&, Uplo, int, float* const*, int, int*, int);
template void potrf<double>(const Launch&, Uplo, int, double* const*, int, int*, int);
template void potrf_strided<float>(const Launch&, Uplo, int, float* const*, float*, long long, int, int*, int);
template void potrf_strided<double>(const Launch&, Uplo, int, double* const*, double*, long long, int, int*, int);
template void vpotrf_registers<float>(const Launch&, Uplo, int, const int*, float* const*, const int*, int*, int);
template void vpotrf_registers<double>(const Launch&, Uplo, int, const int*, double* const*, const int*, int*, int);
template std::size_t potrs_workspace<float>(int, int, int);
template std::size_t potrs_workspace<double>(int, int, int);
template void potrs<float>(const Launch&, Uplo, int, int, const float* const*, int, float* const*, int, int);
template void potrs<double>(const Launch&, Uplo, int, int, const double* const*, int, double* const*, int, int);

}  // namespace starfact::batched::cuda
