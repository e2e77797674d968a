// Variable-size batched LU with partial pivoting: vgetrf and vgetrs on arrays of
// device matrices of different orders, our own kernels, SSDE and DSSE schedules
// (vbatched_kernels.hpp).
//
// nmax <= 32: one pass, the fixed-size getrf's register kernel (lu_small.cuh) reading each
// matrix's own order, leading dimension and pivot array; every matrix is read once into
// registers, factored in column steps of its own order and written once. With a single step
// there is nothing to schedule: SSDE and DSSE are the same launch (and give the same bits).
//
// Larger nmax: vgetrf is right-looking by steps of kVBlock = 32 columns. At step s, for every matrix whose
// factorization is at column block c0 (w = min(32, n - c0) columns):
// - panel kernel, one thread block per matrix: the panel A(c0:n, c0:c0+w) is factored with
//   partial pivoting. When the step's tallest panel has at most 512 rows (always up to NMAX
//   512), by the fixed-size getrf's register panel (lu_small::register_panel, each matrix at
//   its own column block through VarPanel): a thread per row holding it in registers, the
//   interchanges deferred, the pivot searched per warp and then over the warps, one block
//   barrier per column. Taller panels: in global memory, column by column (block-wide pivot
//   search, the pivot row swapped across the panel's columns, scaling and rank-1 update of the
//   rest of the panel). Either way the panel's interchanges become one list of (source row,
//   destination row) pairs, at most 2w, written to the workspace.
// - stripe kernel, one thread block per (matrix, 64 columns right of the panel): the list is
//   applied to the block's columns, every moved row at once (read into registers, written back
//   after a barrier; the list read straight from the workspace); there U12 = L11^{-1} A12 (lane
//   r holds row r, shuffles), kept in shared memory; then A22 -= A21 U12 on the stripe by 64 x 64
//   tiles, A21's tile staged in shared memory: in double on the FP64 tensor cores (mma.m8n8k4,
//   the accumulators loaded from A22 and stored back), in float 4 x 4 FMAs per thread. One
//   block doing the three in turn reads the stripe from memory once per step: A12's rows are
//   read with the moved rows, before any write, and those that the interchanges replace are
//   taken from the moved values. L11 and A21's first row tile are copied (cp.async) while the
//   interchanges run, each next row tile while the current one is multiplied. (A swap kernel
//   per 32 columns, U12 included, followed by an update kernel per 64 x 64 tile would take two
//   passes over the stripe, the moved rows read from memory again.)
// - the columns left of the panel get the interchanges of every later step at the end, in one
//   pass per matrix (left swaps kernel; when its shared memory, 2 nmax ints and 8 columns of
//   nmax, does not fit, a small kernel applies them at every step instead): in column-major
//   storage a row interchange touches one element per column, a sector each, and applying them
//   step by step on the left cost about as much as on the right.
// Blocks of matrices that are not at this step, or have no rows or columns there, return at
// once. A zero pivot sets info (the first one: steps and columns go in order) and the
// factorization goes on, as LAPACK's.
//
// vgetrs: one thread block per (matrix, group of right-hand sides), one launch: before each
// 32-row block of the forward substitution its interchanges are applied to the group's
// columns (the interchanges of a block touch only its rows and rows below), then blocked
// forward (unit L) and backward (U) substitution, left-looking, each diagonal block solved in
// registers with shuffles.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <type_traits>

#include "batched/cuda/common.cuh"
#include "batched/cuda/lu_small.cuh"
#include "batched/cuda/vbatched_kernels.hpp"

namespace starfact::batched::cuda {
namespace {

constexpr int K = kVBlock;
constexpr int LK = K + 1;  // leading dimension of a K x K tile in shared memory

struct VGetrfTuning {
    int register_panel_rows;  // panels up to this tall: the register panel (a thread per row)
    int panel_threads;        // threads of the global-memory panel kernel (taller panels)
    int tile;                 // columns of a stripe right of the panel, rows of its update tiles
    int update_threads;       // threads of the stripe kernel (tile/4 x tile/4 in the update)
    int left_step_threads;    // threads of the per-step interchanges left of the panel (huge nmax)
    int solve_cols;           // right-hand sides per warp of vgetrs
};
constexpr VGetrfTuning kTuning{512, 256, 64, 256, 128, 4};
static_assert(kTuning.register_panel_rows <= 512, "vgetrf_reg_panel_kernel's blocks hold 512 rows");
static_assert(kTuning.update_threads * 16 == kTuning.tile * kTuning.tile, "4 x 4 per thread");
static_assert(kTuning.tile % K == 0 && kTuning.tile % (kTuning.update_threads / 32) == 0,
              "a stripe is whole K-column halves and whole columns per warp in its solve");

constexpr int kPanelThreads = kTuning.panel_threads;
constexpr int kTile = kTuning.tile;
constexpr int kUpdateThreads = kTuning.update_threads;
constexpr int kStripeCols = kTile / (kUpdateThreads / 32);  // columns per warp of the stripe's solve
/// Stripe blocks per SM the registers are bounded for (the stripe kernel's second template
/// argument). Double (the tensor-core update): 3 (80 registers) when NMAX is at most
/// kStripeTallNmax, else 2 (120 registers), the faster of the two at each NMAX measured on the
/// H200 (2 at NMAX 256 and 512, 3 at 128; at 4 the accumulators' column offsets spill, slower
/// still). Float (4 x 4 FMAs per thread): 4 (64 registers; 3 is much slower there).
template <class T>
constexpr int stripe_blocks_per_sm(bool tall) {
    return std::is_same<T, double>::value ? (tall ? 2 : 3) : 4;
}
constexpr int kStripeTallNmax = 128;
constexpr int kLeftStepThreads = kTuning.left_step_threads;
constexpr int kSolveCols = kTuning.solve_cols;
constexpr int kLeftThreads = 256;  // threads of the final interchanges on L

/// Bytes of the final interchange kernel's index arrays (2 nmax ints, rounded up to 16).
__host__ __device__ constexpr std::size_t left_ints_bytes(int nmax) {
    return (2 * static_cast<std::size_t>(nmax) * sizeof(int) + 15) / 16 * 16;
}

/// Leading dimension of the stripe kernel's tiles in shared memory (A21's row tiles, stored by
/// columns, and U12, stored by rows): 4 modulo 16 doubles, so that the 16 lanes of a half warp
/// reading an mma fragment (8 rows or columns by 4 k) hit 16 different bank pairs.
constexpr int kStripeLd = kTile + 4;

/// Bytes of the stripe kernel's dynamic shared memory: two row tiles of A21 and U12.
template <class T>
constexpr std::size_t stripe_smem_bytes() {
    return 3 * sizeof(T) * static_cast<std::size_t>(K) * kStripeLd;
}

/// Per matrix in the workspace: the number of moved rows, then 2K sources, then 2K
/// destinations (rows relative to c0).
constexpr int kSwapStride = 1 + 4 * K + 3;

// ---- Pivot search ---------------------------------------------------------------------------

using lu_small::multiplier;
using lu_small::pivot_key;

/// (key, row) of the better candidate: the larger key, ties to the smaller row (as idamax).
__device__ inline void better(unsigned long long& key, int& row, unsigned long long k2, int r2) {
    if (k2 > key || (k2 == key && r2 < row)) {
        key = k2;
        row = r2;
    }
}

/// Where matrix b stands at step `step`: its order and the column block c0 it works on; false
/// when it has nothing to do there (not started, or finished). Failed matrices go on.
__device__ __forceinline__ bool locate(const int* n, int b, Schedule s, int nmax, int step, int& nb, int& c0) {
    nb = n[b];
    const int j = step - vfirst_step(s, nmax, nb);
    if (j < 0 || j >= vsteps(nb)) return false;
    c0 = j * K;
    return true;
}

__device__ __forceinline__ long long idx(int i, int j, int ld) { return i + static_cast<long long>(j) * ld; }

/// x <- L^{-1} x for a unit lower triangular K x K block L in shared memory (leading dimension
/// LK; only its strictly lower part is read), NC columns: lane r holds row r of each, row j is
/// broadcast by a shuffle.
template <class T, int NC>
__device__ __forceinline__ void unit_lower_solve(const T* L, T (&x)[NC], int r) {
#pragma unroll
    for (int j = 0; j < K; ++j) {
        const T lrj = L[r + j * LK];
#pragma unroll
        for (int c = 0; c < NC; ++c) {
            const T xj = __shfl_sync(0xffffffffu, x[c], j);
            if (r > j) x[c] -= lrj * xj;
        }
    }
}

// ---- The panel --------------------------------------------------------------------------

/// Factors the panel of matrix blockIdx.x at this step with NT threads, in global memory: the
/// panels taller than the register panel's 512 rows (vgetrf_reg_panel_kernel below).
template <class T, int NT>
__global__ void __launch_bounds__(NT) vgetrf_panel_kernel(T* const* A, const int* n, const int* lda, int* const* ipiv,
                                                          int* info, int* swaps, Schedule s, int nmax, int step) {
    const int b = blockIdx.x;
    int nb = 0, c0 = 0;
    if (!locate(n, b, s, nmax, step, nb, c0)) return;  // uniform over the block
    constexpr int kWarps = NT / 32;
    __shared__ unsigned long long sKey[kWarps];
    __shared__ int sRow[kWarps];
    __shared__ int sPiv[K];
    __shared__ int sCount;
    const int m = nb - c0, w = min(K, m);
    const int ld = lda[b];
    T* const p = A[b] + idx(c0, c0, ld);
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

    int linfo = 0;
    for (int j = 0; j < w; ++j) {
        unsigned long long key = 0;
        int row = INT_MAX;
        for (int i = j + tid; i < m; i += NT) better(key, row, pivot_key(p[idx(i, j, ld)]), i);
#pragma unroll
        for (int off = 16; off > 0; off /= 2) {
            const unsigned long long k2 = __shfl_down_sync(0xffffffffu, key, off);
            const int r2 = __shfl_down_sync(0xffffffffu, row, off);
            better(key, row, k2, r2);
        }
        if (lane == 0) {
            sKey[warp] = key;
            sRow[warp] = row;
        }
        __syncthreads();
        key = sKey[0];
        row = sRow[0];
#pragma unroll
        for (int v = 1; v < kWarps; ++v) better(key, row, sKey[v], sRow[v]);
        const int pr = row;  // j <= pr < m: row j itself is a candidate
        const T piv = p[idx(pr, j, ld)];
        if (piv == T(0) && linfo == 0) linfo = c0 + j + 1;
        __syncthreads();  // every thread has read the pivot before the rows move
        if (pr != j)
            for (int c = tid; c < w; c += NT) {
                const T t = p[idx(j, c, ld)];
                p[idx(j, c, ld)] = p[idx(pr, c, ld)];
                p[idx(pr, c, ld)] = t;
            }
        if (tid == 0) sPiv[j] = pr;
        __syncthreads();
        for (int i = j + 1 + tid; i < m; i += NT) {
            const T l = multiplier(p[idx(i, j, ld)], piv);
            p[idx(i, j, ld)] = l;
            for (int c = j + 1; c < w; ++c) p[idx(i, c, ld)] -= l * p[idx(j, c, ld)];
        }
        __syncthreads();
    }

    for (int t = tid; t < w; t += NT) ipiv[b][c0 + t] = c0 + sPiv[t] + 1;
    if (tid == 0) {
        if (linfo != 0 && info[b] == 0) info[b] = linfo;
        sCount = 0;
    }
    __syncthreads();
    // The rows the interchanges moved: positions 0..w-1 and every pivot row below them (once);
    // the source of a position is found by undoing the interchanges from the last one.
    for (int t = tid; t < 2 * w; t += NT) {
        int pos = -1;
        if (t < w) {
            pos = t;
        } else {
            const int j = t - w;
            pos = sPiv[j];
            if (pos < w) pos = -1;
            for (int q = 0; q < j && pos >= 0; ++q)
                if (sPiv[q] == pos) pos = -1;
        }
        if (pos >= 0) {
            int src = pos;
            for (int q = w - 1; q >= 0; --q) {
                if (src == q)
                    src = sPiv[q];
                else if (src == sPiv[q])
                    src = q;
            }
            if (src != pos) {
                int* list = swaps + static_cast<long long>(b) * kSwapStride;
                const int k = atomicAdd(&sCount, 1);
                list[1 + k] = src;
                list[1 + 2 * K + k] = pos;
            }
        }
    }
    __syncthreads();
    if (tid == 0) swaps[static_cast<long long>(b) * kSwapStride] = sCount;
}

/// Where matrix b's panel is at this step, for lu_small::register_panel (panels of at most 512
/// rows): rows c0 .. n[b]-1 and columns c0 .. c0+w-1 of the column block the matrix is at. The
/// rows the deferred interchanges moved go to the swap list as vgetrf_panel_kernel writes it (the
/// number of moved rows, then their sources and their destinations, relative to c0).
template <class T>
struct VarPanel {
    T* const* A;
    const int* n;
    const int* lda;
    int* const* ipiv;
    int* info;
    int* swaps;
    Schedule s;
    int nmax, step;
    __device__ int column(int b) const {  // c0, or -1 when matrix b is not at this step
        int nb = 0, c0 = 0;
        return locate(n, b, s, nmax, step, nb, c0) ? c0 : -1;
    }
    __device__ bool active(int b) const { return column(b) >= 0; }
    __device__ int first(int b) const { return column(b); }
    __device__ int ld(int b) const { return lda[b]; }
    __device__ T* origin(int b) const { return A[b] + idx(first(b), first(b), lda[b]); }
    __device__ int rows(int b) const { return n[b] - first(b); }
    __device__ int width(int b) const { return min(K, rows(b)); }
    __device__ void pivot(int b, int row, int value) const { ipiv[b][row] = value; }
    __device__ void fail(int b, int column) const {
        if (info[b] == 0) info[b] = column;
    }
    __device__ void placed(int b, int t, int pos, int m, int, int) const {
        __shared__ int count;
        if (t == 0) count = 0;
        __syncthreads();
        int* list = swaps + static_cast<long long>(b) * kSwapStride;
        if (t < m && pos != t) {
            const int k = atomicAdd(&count, 1);
            list[1 + k] = t;
            list[1 + 2 * K + k] = pos;
        }
        __syncthreads();
        if (t == 0) list[0] = count;
    }
};

/// The panel by registers, one row per thread (lu_small::register_panel: a block barrier per
/// column where vgetrf_panel_kernel has three, rows kept in registers and their interchanges
/// deferred), for steps whose tallest panel has at most 512 rows.
template <class T>
__global__ void __launch_bounds__(512) vgetrf_reg_panel_kernel(VarPanel<T> panel) {
    lu_small::register_panel<T, K, 512>(panel);
}

// ---- Interchanges of later steps on the columns of L, at the end ---------------------------

/// One block of kLeftThreads threads per matrix: from the second-to-last column block back,
/// perm[r] (r >= J, J the first row of the next block) becomes the row whose value ends at
/// position r after the interchanges of rows J .. n-1 (composed with those of the next block
/// one step at a time), and every column of the block is permuted through a per-warp copy in
/// shared memory (reads and writes along the column). Dynamic shared memory: 2 nmax ints, then
/// kLeftThreads / 32 columns of nmax elements.
template <class T>
__global__ void __launch_bounds__(kLeftThreads)
    vgetrf_left_swaps_kernel(T* const* A, const int* n, const int* lda, const int* const* ipiv, int nmax) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int b = blockIdx.x;
    const int nb = n[b];
    if (nb <= K) return;
    int* perm = reinterpret_cast<int*>(smem_raw);
    int* next = perm + nmax;
    T* buf = reinterpret_cast<T*>(smem_raw + left_ints_bytes(nmax)) + static_cast<long long>(threadIdx.x / 32) * nmax;
    const int ld = lda[b];
    const int* piv = ipiv[b];
    T* a = A[b];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    constexpr int kWarps = kLeftThreads / 32;
    for (int r = threadIdx.x; r < nb; r += kLeftThreads) perm[r] = r;
    for (int J = (nb - 1) / K * K; J > 0; J -= K) {  // J: first row of the block after columns J-K .. J-1
        for (int r = J + threadIdx.x; r < nb; r += kLeftThreads) next[r] = r;
        __syncthreads();
        if (threadIdx.x == 0)  // the interchanges of rows J .. J+K-1, in order
            for (int i = J; i < min(nb, J + K); ++i) {
                const int q = piv[i] - 1;
                const int t = next[i];
                next[i] = next[q];
                next[q] = t;
            }
        __syncthreads();
        for (int r = J + threadIdx.x; r < nb; r += kLeftThreads) perm[r] = next[perm[r]];
        __syncthreads();
        for (int c = J - K + warp; c < J; c += kWarps) {
            T* col = a + static_cast<long long>(c) * ld;
            for (int r = J + lane; r < nb; r += 32) buf[r - J] = col[r];
            __syncwarp();
            for (int r = J + lane; r < nb; r += 32)
                if (perm[r] != r) col[r] = buf[perm[r] - J];
            __syncwarp();
        }
        __syncthreads();
    }
}

/// The panel's moves of matrix b at this step (its list in the workspace: the count, then the
/// sources and destinations relative to c0) on columns col .. col+nc-1 of a (nc <= NC), by the
/// block's NT threads: thread t reads row src[k], k = t % 2K, on columns t / 2K + i NT / 2K into
/// registers (the list read straight from memory, the count with it), then, after a block
/// barrier (a row may be both a source and a destination; the caller's own reads issued before
/// the call are done too), hands each value to land(row, column offset, value), which writes
/// it somewhere else and returns true, or returns false for the plain write to dst[k].
template <class T, int NT, int NC, class Land>
__device__ void move_rows(T* a, int ld, const int* swaps, int b, int c0, int col, int nc, Land&& land) {
    constexpr int R = 2 * K;  // the most rows a panel's interchanges move
    static_assert(NT % R == 0 && NC % (NT / R) == 0, "whole columns per thread");
    constexpr int kStep = NT / R, kPer = NC / kStep;
    const int* list = swaps + static_cast<long long>(b) * kSwapStride;
    const int k = static_cast<int>(threadIdx.x) % R, cg = static_cast<int>(threadIdx.x) / R;
    const bool mine = k < list[0];
    const int src = c0 + list[1 + k], dst = c0 + list[1 + 2 * K + k];  // meaningful when mine
    T v[kPer];
    if (mine) {
#pragma unroll
        for (int i = 0; i < kPer; ++i)
            if (cg + i * kStep < nc) v[i] = a[idx(src, col + cg + i * kStep, ld)];
    }
    __syncthreads();
    if (mine) {
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
            const int j = cg + i * kStep;
            if (j < nc && !land(dst, j, v[i])) a[idx(dst, col + j, ld)] = v[i];
        }
    }
}

// ---- Interchanges left of the panel, step by step (huge nmax only) ------------------------

/// The panel's interchanges on the columns left of it, block (b, y) on columns y*K .. y*K+K-1:
/// only when vgetrf_left_swaps_kernel's shared memory does not fit (nmax in the thousands), which
/// otherwise applies the interchanges of every step to those columns once, at the end.
template <class T>
__global__ void __launch_bounds__(kLeftStepThreads)
    vgetrf_left_step_kernel(T* const* A, const int* n, const int* lda, const int* swaps, Schedule s, int nmax,
                            int step) {
    const int b = blockIdx.x;
    int nb = 0, c0 = 0;
    if (!locate(n, b, s, nmax, step, nb, c0)) return;
    const int col0 = static_cast<int>(blockIdx.y) * K;
    if (col0 >= c0) return;  // the panel and the columns right of it: the other kernels
    move_rows<T, kLeftStepThreads, K>(A[b], lda[b], swaps, b, c0, col0, K, [](int, int, T) { return false; });
}

// ---- Right of the panel: interchanges, U12 and the trailing update, by column stripes -------

/// Block (b, y) owns the kTile columns j0 = c0 + K + y * kTile .. of matrix b's trailing matrix,
/// every row of them from c0 down, and does the step's three things to them in turn: the panel's
/// interchanges (thread t moves row k = t % 2K of the list on every fourth column: read into
/// registers, a barrier, written back); U12 = L11^{-1} A12 (warp v solves kStripeCols columns,
/// lane r holds row r, shuffles); then A22 -= A21 U12 by row tiles of kTile (A21's tile and U12
/// in shared memory; double: warp v owns a 16 x 32 part of the tile, 2 x 4 tensor-core products
/// of 8 x 8 accumulated on A22's own values, U12 stored negated; float: 4 x 4 per thread).
/// Nothing of the stripe leaves the block between the three: the moved rows' sectors are read
/// again from cache by the update, U12 is not read back from memory, and A12 is read with the
/// moved rows in one trip to memory (its rows that the interchanges replace then taken from
/// shared memory). The copies that do not depend on the interchanges go ahead of them, by
/// cp.async: L11 (into the U12 buffer, which holds it until the solve is done) and A21's first
/// row tile at the start, each next row tile while the current one is multiplied.
/// Dynamic shared memory: stripe_smem_bytes<T>() (two A21 tiles and U12). MINB: blocks per SM
/// the registers are bounded for (stripe_blocks_per_sm).
template <class T, int MINB>
__global__ void __launch_bounds__(kUpdateThreads, MINB)
    vgetrf_stripe_kernel(T* const* A, const int* n, const int* lda, const int* swaps, Schedule s, int nmax, int step) {
    const int b = blockIdx.x;
    const int ld = lda[b];  // read with n[b] (one trip to memory, not two)
    T* const a = A[b];
    int nb = 0, c0 = 0;
    if (!locate(n, b, s, nmax, step, nb, c0)) return;
    const int t0 = c0 + K;  // the trailing matrix starts there
    const int j0 = t0 + static_cast<int>(blockIdx.y) * kTile;
    if (j0 >= nb) return;  // also every block of a matrix at its last (or only partial) panel
    // From here nb > c0 + K: the panel has all K columns and U12 all K rows.
    const int nc = min(kTile, nb - j0);
    constexpr int LT = kStripeLd;
    extern __shared__ __align__(16) unsigned char stripe_smem[];
    // Two A21 tiles (buffer q at sP + q * K * LT), then sB: L11 (leading dimension LK) until the
    // solve is done, then U12 (sB[j + l * LT] = U12(l, j0 + j)).
    T* const sP = reinterpret_cast<T*>(stripe_smem);
    T* const sB = sP + 2 * K * LT;
    __shared__ int sMoved[K];  // whether row c0 + i is a destination of the panel's interchanges
    static_assert(K * LK <= K * LT, "the U12 buffer holds L11");
    const int tid = threadIdx.x;
    if (tid < K) sMoved[tid] = 0;

    // A21's row tile starting at row i0 into buffer buf (rows past the matrix zero).
    auto fetch_tile = [&](int i0, int buf) {
        const int mr = min(kTile, nb - i0);
        T* dst = sP + buf * K * LT;
        for (int e = tid; e < kTile * K; e += kUpdateThreads) {
            const int i = e % kTile, l = e / kTile;
            if (i < mr)
                detail::cp_async(dst + i + l * LT, a + idx(i0 + i, c0 + l, ld));
            else
                dst[i + l * LT] = T(0);
        }
    };
    for (int e = tid; e < K * K; e += kUpdateThreads)  // L11 (only its strictly lower part is read)
        detail::cp_async(sB + e % K + e / K * LK, a + idx(c0 + e % K, c0 + e / K, ld));
    fetch_tile(t0, 0);
    detail::cp_async_commit();

    // The panel's interchanges on the stripe (move_rows). A12 (the rows U12 replaces, lane r
    // holding row r of the warp's kStripeCols columns) is read before them, in the same trip to
    // memory as the moved rows; its rows that are destinations take the moved values, through
    // shared memory, instead of a second read after the moves.
    const int r = tid % 32, v = tid / 32;
    T x[kStripeCols];
#pragma unroll
    for (int c = 0; c < kStripeCols; ++c) {
        const int cc = v * kStripeCols + c;
        x[c] = cc < nc ? a[idx(c0 + r, j0 + cc, ld)] : T(0);
    }
    T* const sX = sP + K * LT;  // moved values landing in A12 (sX[j + i LT]): the second tile buffer
    move_rows<T, kUpdateThreads, kTile>(a, ld, swaps, b, c0, j0, nc, [&](int row, int j, T value) {
        if (row >= c0 + K) return false;
        sX[j + (row - c0) * LT] = value;   // U12 takes the row's place in memory below
        if (j == 0) sMoved[row - c0] = 1;  // j = 0 is moved whenever the row is
        return true;
    });

    // U12 = L11^{-1} A12 on the stripe.
    {
        detail::cp_async_wait_all();
        __syncthreads();  // the moves are done (A12's moved rows in sX); L11 and A21's first tile are in
        if (sMoved[r]) {
#pragma unroll
            for (int c = 0; c < kStripeCols; ++c) {
                const int cc = v * kStripeCols + c;
                if (cc < nc) x[c] = sX[cc + r * LT];
            }
        }
        unit_lower_solve(sB, x, r);
        __syncthreads();  // every warp is done with L11
#pragma unroll
        for (int c = 0; c < kStripeCols; ++c) {
            const int cc = v * kStripeCols + c;
            // Zero past the stripe's columns; negated for the tensor-core update (D = A21 (-U12) + A22).
            sB[cc + r * LT] = std::is_same<T, double>::value ? -x[c] : x[c];
            if (cc < nc) a[idx(c0 + r, j0 + cc, ld)] = x[c];
        }
    }

    // A22 -= A21 U12, row tile by row tile, the next tile's copy in flight during each.
    if constexpr (std::is_same<T, double>::value) {
        // FP64 tensor cores: warp v owns rows 16 (v % 4) .. +15 and columns 32 (v / 4) .. +31 of
        // the tile, 2 x 4 products of 8 x 8, their accumulators loaded from A22 (the products
        // add A21 (-U12) to them) and stored back.
        const int g = r / 4, q = r % 4;  // r: the lane
        const int r0 = 16 * (v % 4), cb = 32 * (v / 4);
        bool col_in[4][2];
#pragma unroll
        for (int C = 0; C < 4; ++C)
#pragma unroll
            for (int e = 0; e < 2; ++e) col_in[C][e] = cb + 8 * C + 2 * q + e < nc;
        double* const base = a + idx(0, j0 + cb + 2 * q, ld);  // column j0 + cb + 2q, row 0
        // The accumulators of the row tile at i0: A22's values (zero outside the matrix).
        auto load_tile = [&](double(&c)[2][4][2], int i0) {
            const int mr = min(kTile, nb - i0);
#pragma unroll
            for (int R = 0; R < 2; ++R) {
                const int i = r0 + 8 * R + g;
#pragma unroll
                for (int C = 0; C < 4; ++C)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        c[R][C][e] = (i < mr && col_in[C][e]) ? base[idx(i0 + i, 8 * C + e, ld)] : 0.0;
            }
        };
        // acc += A21's row tile in buffer buf times -U12, on the tensor cores.
        auto multiply = [&](double(&c)[2][4][2], int buf) {
            const double* tA = sP + buf * K * LT;
#pragma unroll
            for (int l = 0; l < K; l += 4) {
                double af[2], bf[4];
#pragma unroll
                for (int R = 0; R < 2; ++R) af[R] = tA[r0 + 8 * R + g + (l + q) * LT];
#pragma unroll
                for (int C = 0; C < 4; ++C) bf[C] = sB[cb + 8 * C + g + (l + q) * LT];
#pragma unroll
                for (int R = 0; R < 2; ++R)
#pragma unroll
                    for (int C = 0; C < 4; ++C) detail::dmma_8x8x4(c[R][C], af[R], bf[C]);
            }
        };
        auto store_tile = [&](const double(&c)[2][4][2], int i0) {
            const int mr = min(kTile, nb - i0);
#pragma unroll
            for (int R = 0; R < 2; ++R) {
                const int i = r0 + 8 * R + g;
                if (i >= mr) continue;
#pragma unroll
                for (int C = 0; C < 4; ++C)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        if (col_in[C][e]) base[idx(i0 + i, 8 * C + e, ld)] = c[R][C][e];
            }
        };
        int buf = 0;
        if constexpr (MINB <= 2) {
            // The registers hold the next tile's A22 too, read while this one is multiplied.
            double acc[2][4][2], next[2][4][2];
            load_tile(acc, t0);
            for (int i0 = t0; i0 < nb; i0 += kTile, buf ^= 1) {
                const bool more = i0 + kTile < nb;
                __syncthreads();  // U12 (first tile) and this tile are visible; the other buffer is free
                if (more) fetch_tile(i0 + kTile, buf ^ 1);
                detail::cp_async_commit();
                if (more) load_tile(next, i0 + kTile);
                multiply(acc, buf);
                store_tile(acc, i0);
                if (more) {
#pragma unroll
                    for (int R = 0; R < 2; ++R)
#pragma unroll
                        for (int C = 0; C < 4; ++C)
#pragma unroll
                            for (int e = 0; e < 2; ++e) acc[R][C][e] = next[R][C][e];
                }
                detail::cp_async_wait_all();  // the next tile (made visible by the next iteration's barrier)
            }
        } else {
            for (int i0 = t0; i0 < nb; i0 += kTile, buf ^= 1) {
                double acc[2][4][2];
                load_tile(acc, i0);
                __syncthreads();  // U12 (first tile) and this tile are visible; the other buffer is free
                if (i0 + kTile < nb) fetch_tile(i0 + kTile, buf ^ 1);
                detail::cp_async_commit();
                multiply(acc, buf);
                store_tile(acc, i0);
                detail::cp_async_wait_all();  // the next tile (made visible by the next iteration's barrier)
            }
        }
    } else {
        constexpr int S = kTile / 4;  // threads per dimension
        const int tx = tid % S, ty = tid / S;
        int buf = 0;
        for (int i0 = t0; i0 < nb; i0 += kTile, buf ^= 1) {
            const int mr = min(kTile, nb - i0);
            __syncthreads();  // U12 (first tile) and this tile are visible; the other buffer is free
            if (i0 + kTile < nb) fetch_tile(i0 + kTile, buf ^ 1);
            detail::cp_async_commit();
            T acc[4][4];
#pragma unroll
            for (int p = 0; p < 4; ++p)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[p][q] = T(0);
            const T* tA = sP + buf * K * LT;
#pragma unroll 8
            for (int l = 0; l < K; ++l) {
                T ai[4], bj[4];
#pragma unroll
                for (int p = 0; p < 4; ++p) {
                    ai[p] = tA[tx + S * p + l * LT];
                    bj[p] = sB[ty + S * p + l * LT];
                }
#pragma unroll
                for (int p = 0; p < 4; ++p)
#pragma unroll
                    for (int q = 0; q < 4; ++q) acc[p][q] += ai[p] * bj[q];
            }
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int j = ty + S * q;
                if (j >= nc) continue;
#pragma unroll
                for (int p = 0; p < 4; ++p) {
                    const int i = tx + S * p;
                    if (i < mr) a[idx(i0 + i, j0 + j, ld)] -= acc[p][q];
                }
            }
            detail::cp_async_wait_all();  // the next tile (made visible by the next iteration's barrier)
        }
    }
}

// ---- The solve ------------------------------------------------------------------------------

/// B <- A^{-1} B for matrix blockIdx.x from its LU factors, right-hand sides in groups of
/// W * kSolveCols (group blockIdx.y, then every gridDim.y-th); warp v solves kSolveCols columns.
template <class T, int W>
__global__ void __launch_bounds__(32 * W) vgetrs_kernel(const T* const* A, const int* n, const int* lda,
                                                        const int* const* ipiv, T* const* B, const int* ldb, int nrhs) {
    constexpr int NT = 32 * W;
    constexpr int NC = W * kSolveCols;
    const int b = blockIdx.x;
    const int nb = n[b];
    if (nb <= 0) return;
    const T* a = A[b];
    const int* piv = ipiv[b];
    T* x = B[b];
    const int ld = lda[b], ldx = ldb[b];
    __shared__ T sL[K * LK];
    __shared__ T sT[K * LK];
    __shared__ T sY[K * NC];
    const int r = threadIdx.x % 32, v = threadIdx.x / 32;
    const int groups = (nrhs + NC - 1) / NC;
    const int last = (nb - 1) / K * K;

    for (int g = blockIdx.y; g < groups; g += gridDim.y) {
        const int cg = g * NC;
        const int nc = min(NC, nrhs - cg);
        auto at = [&](int i, int c) { return i + static_cast<long long>(cg + c) * ldx; };
        auto load_tile = [&](T* s, int row0, int col0, int mr, int mc) {
            for (int e = threadIdx.x; e < K * K; e += NT) {
                const int i = e % K, j = e / K;
                s[i + j * LK] = (i < mr && j < mc) ? a[idx(row0 + i, col0 + j, ld)] : T(0);
            }
        };
        auto load_rows = [&](int l0, int rows) {
            for (int e = threadIdx.x; e < K * NC; e += NT) {
                const int l = e % K, c = e / K;
                sY[l + c * K] = (l < rows && c < nc) ? x[at(l0 + l, c)] : T(0);
            }
        };
        T y[kSolveCols];

        for (int k0 = 0; k0 <= last; k0 += K) {  // L Y = P B
            const int w = min(K, nb - k0);
            if (threadIdx.x < nc) {  // this block's interchanges, in order, on column threadIdx.x
                const int c = threadIdx.x;
                for (int i = k0; i < k0 + w; ++i) {
                    const int pr = piv[i] - 1;
                    if (pr != i) {
                        const T t = x[at(i, c)];
                        x[at(i, c)] = x[at(pr, c)];
                        x[at(pr, c)] = t;
                    }
                }
            }
            __syncthreads();
#pragma unroll
            for (int c = 0; c < kSolveCols; ++c) {
                const int cc = v * kSolveCols + c;
                y[c] = (r < w && cc < nc) ? x[at(k0 + r, cc)] : T(0);
            }
            for (int l0 = 0; l0 < k0; l0 += K) {
                load_tile(sL, k0, l0, w, K);
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
            load_tile(sT, k0, k0, w, w);
            __syncthreads();
            unit_lower_solve(sT, y, r);
#pragma unroll
            for (int c = 0; c < kSolveCols; ++c) {
                const int cc = v * kSolveCols + c;
                if (r < w && cc < nc) x[at(k0 + r, cc)] = y[c];
            }
            __syncthreads();
        }

        for (int k0 = last; k0 >= 0; k0 -= K) {  // U X = Y
            const int w = min(K, nb - k0);
#pragma unroll
            for (int c = 0; c < kSolveCols; ++c) {
                const int cc = v * kSolveCols + c;
                y[c] = (r < w && cc < nc) ? x[at(k0 + r, cc)] : T(0);
            }
            for (int l0 = k0 + K; l0 < nb; l0 += K) {
                const int wl = min(K, nb - l0);
                load_tile(sL, k0, l0, w, wl);
                load_rows(l0, wl);
                __syncthreads();
#pragma unroll 8
                for (int l = 0; l < K; ++l) {
                    const T url = sL[r + l * LK];
#pragma unroll
                    for (int c = 0; c < kSolveCols; ++c) y[c] -= url * sY[l + (v * kSolveCols + c) * K];
                }
                __syncthreads();
            }
            load_tile(sT, k0, k0, w, w);
            __syncthreads();
            const T d = r < w ? sT[r + r * LK] : T(1);
#pragma unroll
            for (int j = K - 1; j >= 0; --j) {
                const T urj = sT[r + j * LK];
#pragma unroll
                for (int c = 0; c < kSolveCols; ++c) {
                    if (r == j) y[c] /= d;
                    const T xj = __shfl_sync(0xffffffffu, y[c], j);
                    if (r < j) y[c] -= urj * xj;
                }
            }
#pragma unroll
            for (int c = 0; c < kSolveCols; ++c) {
                const int cc = v * kSolveCols + c;
                if (r < w && cc < nc) x[at(k0 + r, cc)] = y[c];
            }
            __syncthreads();
        }
    }
}

template <class T, int W>
void launch_vgetrs(cudaStream_t stream, const T* const* A, const int* n, const int* lda, const int* const* ipiv,
                   T* const* B, const int* ldb, int nrhs, int count) {
    const int groups = detail::ceil_div(nrhs, W * kSolveCols);
    const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(std::min(groups, 65535)));
    vgetrs_kernel<T, W><<<grid, 32 * W, 0, stream>>>(A, n, lda, ipiv, B, ldb, nrhs);
    detail::check_launch("vgetrs kernel");
}

/// The most rows a panel has at `step`: the largest order under ssde; under dsse a matrix
/// with `left` steps to go has at most 32 * left rows from its current column block on.
int panel_rows(Schedule s, int nmax, int step) {
    return s == Schedule::ssde ? nmax - K * step : K * (vsteps(nmax) - step);
}

}  // namespace

template <class T>
std::size_t vgetrf_workspace(int, int count) {
    return detail::WorkspaceCarver::round(sizeof(int) * kSwapStride * static_cast<std::size_t>(std::max(count, 0)));
}

template <class T>
void vgetrf(const Launch& launch, Schedule schedule, int nmax, const int* n, T* const* A, const int* lda,
            int* const* ipiv, int* info, int count) {
    if (count <= 0) return;
    if (nmax > 0 && nmax <= K)  // every info written by the kernel
        return lu_small::launch<T>(launch.stream, nmax, lu_small::VarBatch<T>{A, n, lda, ipiv, info}, count);
    detail::check(cudaMemsetAsync(info, 0, sizeof(int) * static_cast<std::size_t>(count), launch.stream),
                  "vgetrf info reset");
    if (nmax <= 0) return;
    detail::WorkspaceCarver carve(launch);
    int* swaps = carve.take<int>(static_cast<std::size_t>(kSwapStride) * count);
    const int steps = vsteps(nmax);
    int device = 0, optin = 0;
    detail::check(cudaGetDevice(&device), "vgetrf device");
    detail::check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                  "vgetrf shared memory limit");
    // The interchanges on the columns left of each step's panel are applied once at the end when
    // the final kernel's shared memory fits (else at every step).
    const std::size_t left_bytes =
        left_ints_bytes(nmax) + sizeof(T) * static_cast<std::size_t>(nmax) * (kLeftThreads / 32);
    const bool defer_left = left_bytes <= static_cast<std::size_t>(optin - 1024);
    const std::size_t stripe_bytes = stripe_smem_bytes<T>();
    constexpr int kShortMinb = stripe_blocks_per_sm<T>(false), kTallMinb = stripe_blocks_per_sm<T>(true);
    const bool tall = nmax > kStripeTallNmax;
    if (stripe_bytes > 48 * 1024) {
        detail::opt_in_shared(vgetrf_stripe_kernel<T, kShortMinb>, "vgetrf stripe kernel shared memory");
        detail::opt_in_shared(vgetrf_stripe_kernel<T, kTallMinb>, "vgetrf stripe kernel shared memory");
    }
    for (int step = 0; step < steps; ++step) {
        const int rows = panel_rows(schedule, nmax, step);
        if (rows <= kTuning.register_panel_rows) {
            vgetrf_reg_panel_kernel<T>
                <<<static_cast<unsigned>(count), detail::ceil_div(rows, 32) * 32, 0, launch.stream>>>(
                    VarPanel<T>{A, n, lda, ipiv, info, swaps, schedule, nmax, step});
            detail::check_launch("vgetrf register panel kernel");
        } else {
            vgetrf_panel_kernel<T, kPanelThreads><<<static_cast<unsigned>(count), kPanelThreads, 0, launch.stream>>>(
                A, n, lda, ipiv, info, swaps, schedule, nmax, step);
            detail::check_launch("vgetrf panel kernel");
        }
        // Left of the panel (a matrix at this step has at most `step` column blocks there), only
        // when they are not deferred to the end.
        if (!defer_left && step > 0) {
            const dim3 lgrid(static_cast<unsigned>(count), static_cast<unsigned>(step));
            vgetrf_left_step_kernel<T>
                <<<lgrid, kLeftStepThreads, 0, launch.stream>>>(A, n, lda, swaps, schedule, nmax, step);
            detail::check_launch("vgetrf left interchanges step kernel");
        }
        // Right of it: interchanges, U12 and the update, by stripes of the tallest trailing matrix.
        const int trailing = rows - K;
        if (trailing <= 0) continue;
        const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(detail::ceil_div(trailing, kTile)));
        if (tall)
            vgetrf_stripe_kernel<T, kTallMinb>
                <<<grid, kUpdateThreads, stripe_bytes, launch.stream>>>(A, n, lda, swaps, schedule, nmax, step);
        else
            vgetrf_stripe_kernel<T, kShortMinb>
                <<<grid, kUpdateThreads, stripe_bytes, launch.stream>>>(A, n, lda, swaps, schedule, nmax, step);
        detail::check_launch("vgetrf stripe kernel");
    }
    if (defer_left && steps > 1) {
        if (left_bytes > 48 * 1024)
            detail::check(cudaFuncSetAttribute(vgetrf_left_swaps_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(left_bytes)),
                          "vgetrf left interchanges shared memory");
        vgetrf_left_swaps_kernel<T>
            <<<static_cast<unsigned>(count), kLeftThreads, left_bytes, launch.stream>>>(A, n, lda, ipiv, nmax);
        detail::check_launch("vgetrf left interchanges kernel");
    }
}

template <class T>
std::size_t vgetrs_workspace(int, int, int) {
    return 0;
}

template <class T>
void vgetrs(const Launch& launch, int nmax, const int* n, int nrhs, const T* const* A, const int* lda,
            const int* const* ipiv, T* const* B, const int* ldb, int count) {
    if (count <= 0 || nmax <= 0 || nrhs <= 0) return;
    if (nrhs <= kSolveCols)
        launch_vgetrs<T, 1>(launch.stream, A, n, lda, ipiv, B, ldb, nrhs, count);
    else if (nrhs <= 2 * kSolveCols)
        launch_vgetrs<T, 2>(launch.stream, A, n, lda, ipiv, B, ldb, nrhs, count);
    else
        launch_vgetrs<T, 4>(launch.stream, A, n, lda, ipiv, B, ldb, nrhs, count);
}

template std::size_t vgetrf_workspace<float>(int, int);
template std::size_t vgetrf_workspace<double>(int, int);
template void vgetrf<float>(const Launch&, Schedule, int, const int*, float* const*, const int*, int* const*, int*,
                            int);
template void vgetrf<double>(const Launch&, Schedule, int, const int*, double* const*, const int*, int* const*, int*,
                             int);
template std::size_t vgetrs_workspace<float>(int, int, int);
template std::size_t vgetrs_workspace<double>(int, int, int);
template void vgetrs<float>(const Launch&, int, const int*, int, const float* const*, const int*, const int* const*,
                            float* const*, const int*, int);
template void vgetrs<double>(const Launch&, int, const int*, int, const double* const*, const int*, const int* const*,
                             double* const*, const int*, int);

}  // namespace starfact::batched::cuda
