// CUDA kernels of tile LU with incremental pivoting: cuSOLVER's GETRF, our row-swap kernels and
// TSTRF panel kernel, cuBLAS for the triangular solves and the updates. Semantics and storage:
// codelets/cpu/lu_kernels.hpp.
#include "codelets/cuda/lu_kernels.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdint>
#include <utility>
#include <vector>

#include "codelets/cpu/lu_kernels.hpp"
#include "codelets/cuda/tile_kernels.hpp"
#include "common/cuda_blas.hpp"

namespace starfact::cuda {
namespace {

constexpr int kSwapThreads = 128;
constexpr int kConvertThreads = 256;
constexpr int kPanelMaxThreads = 1024;
constexpr int kWarp = 32;
// cuSOLVER wants its buffer aligned like a cudaMalloc'd one; the int64 pivots in front of it
// are padded to keep that.
constexpr std::size_t kAlign = 256;
// Dynamic shared memory a kernel may use without cudaFuncSetAttribute.
constexpr std::size_t kDefaultSmem = 48 * 1024;
// Room left for the panel kernel's static shared memory (its reduction scratch).
constexpr std::size_t kStaticSmemReserve = 1024;

std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
// Ints of workspace the composed pair swaps of a b-row block need: xsrc, count, yrow, ysrc.
std::size_t pair_swap_ints(int b) { return 3 * static_cast<std::size_t>(b) + 1; }
// Ints the composed laswp of k pivots needs: count, row[2k], src[2k].
std::size_t laswp_ints(int k) { return 4 * static_cast<std::size_t>(k) + 1; }

using cublas::data_type;

template <class T>
TileView<const T> as_const(TileView<T> v) {
    return {v.data, v.m, v.n, v.ld};
}

cudaError_t from_blas(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown; }

int blocks_for(int n, int threads) { return (n + threads - 1) / threads; }

// LAPACK's sfmin: below it, 1 / pivot overflows, so the column is divided instead.
__device__ inline float safe_min(float) { return FLT_MIN; }
__device__ inline double safe_min(double) { return DBL_MIN; }

// The pivot search orders candidates by |v|; NaN ranks below every number (but above "no
// candidate"), so a NaN never wins over a number and an all-NaN column still picks a real row.
template <class T>
__device__ inline T pivot_key(T v) {
    if (v != v) return T(-1);
    return v < T(0) ? -v : v;
}

// Larger key first; equal keys: the lower index, as idamax takes the first maximum.
template <class T>
__device__ inline bool better(T key, int idx, T best_key, int best_idx) {
    return key > best_key || (key == best_key && idx < best_idx);
}

template <class T>
__device__ inline void warp_argmax(T& key, int& idx) {
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
        const T k = __shfl_down_sync(0xffffffffu, key, offset);
        const int i = __shfl_down_sync(0xffffffffu, idx, offset);
        if (better(k, i, key, idx)) {
            key = k;
            idx = i;
        }
    }
}

// cuSOLVER's int64 pivots to our int32 ones. A pivot outside [j + 1, m] cannot come from a
// sound factorization; it is clamped to "no swap" so that a later laswp never leaves the tile.
__global__ void pivots_to_int32_kernel(const std::int64_t* ipiv64, int k, int m, int* ipiv) {
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < k; j += gridDim.x * blockDim.x) {
        const std::int64_t p = ipiv64[j];
        ipiv[j] = (p < j + 1 || p > m) ? j + 1 : static_cast<int>(p);
    }
}

// *info = the first j (1-based) with U(j, j) exactly zero, else 0: LAPACK's convention, which
// the CPU kernels follow. It replaces cuSOLVER's getrf info, which can also count a NaN pivot.
template <class T>
__global__ void zero_pivot_info_kernel(TileView<const T> A, int k, int* info) {
    __shared__ int first;
    if (threadIdx.x == 0) first = k;
    __syncthreads();
    for (int j = threadIdx.x; j < k; j += blockDim.x)
        if (A(j, j) == T(0)) atomicMin(&first, j);
    __syncthreads();
    if (threadIdx.x == 0) *info = first < k ? first + 1 : 0;
}

// NaN - NaN and inf - inf are NaN; every finite v gives v - v == 0.
template <class T>
__device__ bool is_non_finite(T v) {
    return !(v - v == T(0));
}

// *flag = 1 when the m x n block A holds a NaN or an infinity (the flag is never cleared here).
template <class T>
__global__ void non_finite_kernel(TileView<const T> A, int* flag) {
    const long long total = static_cast<long long>(A.m) * A.n;
    int found = 0;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total && !found;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const T v = A(static_cast<int>(idx % A.m), static_cast<int>(idx / A.m));
        found = is_non_finite(v);
    }
    if (__syncthreads_or(found) && threadIdx.x == 0) *flag = 1;
}

// LAPACK's laswp with increment 1: the swaps j <-> ipiv[j] - 1, j = 0..k-1, in order. Each
// thread owns a column, so all the swaps of a tile take one launch and need no barrier.
template <class T>
__global__ void laswp_kernel(TileView<T> A, const int* ipiv, int k) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= A.n) return;
    for (int j = 0; j < k; ++j) {
        const int p = ipiv[j] - 1;
        if (p == j || p < 0 || p >= A.m) continue;
        const T t = A(j, c);
        A(j, c) = A(p, c);
        A(p, c) = t;
    }
}

// TSTRF's swaps of one inner block between the b rows X (rows J of the upper tile) and the
// rows of Y (the lower tile): ipiv[jj] == j0 + jj + 1 keeps row jj, K + r + 1 swaps it with
// Y's row r. Same one-thread-per-column layout as laswp_kernel.
template <class T>
__global__ void swap_pairs_kernel(TileView<T> X, TileView<T> Y, const int* ipiv, int j0, int b, int K) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= X.n) return;
    for (int jj = 0; jj < b; ++jj) {
        const int p = ipiv[jj];
        const int r = p - K - 1;
        if (p == j0 + jj + 1 || r < 0 || r >= Y.m) continue;
        const T t = X(jj, c);
        X(jj, c) = Y(r, c);
        Y(r, c) = t;
    }
}

// The same swaps, composed first: the b swaps of a block are a chain through a few rows, and
// walking it once per column (above) costs b dependent memory round trips per thread. Here one
// thread walks it once in shared memory, then every column is permuted by its own thread block
// in one gather and one scatter. Sources are encoded as X row s (s < b) or touched-Y slot s - b.
// Output in `perm`: xsrc[b], count, yrow[b], ysrc[b].
__global__ void compose_pair_swaps_kernel(const int* ipiv, int j0, int b, int K, int ym, int* perm) {
    extern __shared__ int smem[];
    int* xcont = smem;          // b: what X row j holds (encoded as above, Y rows as b + row)
    int* ycont = smem + b;      // ym: what Y row r holds
    int* piv = smem + b + ym;   // b: the pivots, staged so that the serial walk never waits on memory
    for (int j = threadIdx.x; j < b; j += blockDim.x) {
        xcont[j] = j;
        piv[j] = ipiv[j];
    }
    for (int r = threadIdx.x; r < ym; r += blockDim.x) ycont[r] = b + r;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int jj = 0; jj < b; ++jj) {
            const int p = piv[jj], r = p - K - 1;
            if (p == j0 + jj + 1 || r < 0 || r >= ym) continue;
            const int t = xcont[jj];
            xcont[jj] = ycont[r];
            ycont[r] = t;
        }
    }
    __syncthreads();
    int* xsrc = perm;
    int* count = perm + b;
    int* yrow = perm + b + 1;
    int* ysrc = perm + 2 * b + 1;
    // The touched Y rows get slots; the slot of row r is kept in ycont's sign-free spare space:
    // a second pass maps Y-row sources to slots.
    __shared__ int nslots;
    if (threadIdx.x == 0) nslots = 0;
    __syncthreads();
    for (int r = threadIdx.x; r < ym; r += blockDim.x)
        if (ycont[r] != b + r) {
            const int slot = atomicAdd(&nslots, 1);
            yrow[slot] = r;
            ysrc[slot] = ycont[r];
        }
    __syncthreads();
    // Row -> slot lookup for the sources (reusing ycont: its values are no longer needed).
    for (int r = threadIdx.x; r < ym; r += blockDim.x) ycont[r] = -1;
    __syncthreads();
    for (int t = threadIdx.x; t < nslots; t += blockDim.x) ycont[yrow[t]] = t;
    __syncthreads();
    for (int j = threadIdx.x; j < b; j += blockDim.x) {
        const int src = xcont[j];
        xsrc[j] = src < b ? src : b + ycont[src - b];
    }
    for (int t = threadIdx.x; t < nslots; t += blockDim.x) {
        const int src = ysrc[t];
        ysrc[t] = src < b ? src : b + ycont[src - b];
    }
    if (threadIdx.x == 0) *count = nslots;
}

// laswp composed the same way: one thread walks the k swaps of GETRF's pivots over the m rows in
// shared memory; the rows whose content changed (at most 2k) are listed with their source.
// Output in `perm`: count, row[2k], src_slot[2k].
__global__ void compose_laswp_kernel(const int* ipiv, int k, int m, int* perm) {
    extern __shared__ int cont[];  // m: which original row each row holds, then row -> slot
    int* piv = cont + m;           // k: the pivots, staged for the serial walk
    for (int r = threadIdx.x; r < m; r += blockDim.x) cont[r] = r;
    for (int j = threadIdx.x; j < k; j += blockDim.x) piv[j] = ipiv[j];
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int j = 0; j < k; ++j) {
            const int p = piv[j] - 1;
            if (p == j || p < 0 || p >= m) continue;
            const int t = cont[j];
            cont[j] = cont[p];
            cont[p] = t;
        }
    }
    __syncthreads();
    __shared__ int nslots;
    if (threadIdx.x == 0) nslots = 0;
    __syncthreads();
    int* count = perm;
    int* row = perm + 1;
    int* src = perm + 1 + 2 * k;
    for (int r = threadIdx.x; r < m; r += blockDim.x)
        if (cont[r] != r) {
            const int slot = atomicAdd(&nslots, 1);
            row[slot] = r;
            src[slot] = cont[r];  // an original row; mapped to its slot below
        }
    __syncthreads();
    for (int r = threadIdx.x; r < m; r += blockDim.x) cont[r] = -1;
    __syncthreads();
    for (int t = threadIdx.x; t < nslots; t += blockDim.x) cont[row[t]] = t;
    __syncthreads();
    // Every source row also changed content (a permutation moved it), so it has a slot.
    for (int t = threadIdx.x; t < nslots; t += blockDim.x) src[t] = cont[src[t]];
    if (threadIdx.x == 0) *count = nslots;
}

template <class T>
__global__ void apply_laswp_kernel(TileView<T> A, const int* perm, int k) {
    extern __shared__ unsigned char raw[];
    T* vals = reinterpret_cast<T*>(raw);
    const int c = blockIdx.x;
    const int count = perm[0];
    const int* row = perm + 1;
    const int* src = perm + 1 + 2 * k;
    for (int t = threadIdx.x; t < count; t += blockDim.x) vals[t] = A(row[t], c);
    __syncthreads();
    for (int t = threadIdx.x; t < count; t += blockDim.x) A(row[t], c) = vals[src[t]];
}

// One thread block per column: gather the b X rows and the touched Y rows, scatter them permuted.
template <class T>
__global__ void apply_pair_swaps_kernel(TileView<T> X, TileView<T> Y, const int* perm, int b) {
    extern __shared__ unsigned char raw[];
    T* vals = reinterpret_cast<T*>(raw);
    const int c = blockIdx.x;
    const int* xsrc = perm;
    const int count = perm[b];
    const int* yrow = perm + b + 1;
    const int* ysrc = perm + 2 * b + 1;
    for (int t = threadIdx.x; t < b; t += blockDim.x) vals[t] = X(t, c);
    for (int t = threadIdx.x; t < count; t += blockDim.x) vals[b + t] = Y(yrow[t], c);
    __syncthreads();
    for (int t = threadIdx.x; t < b; t += blockDim.x) X(t, c) = vals[xsrc[t]];
    for (int t = threadIdx.x; t < count; t += blockDim.x) Y(yrow[t], c) = vals[ysrc[t]];
}

// Partial-pivoting LU of TSTRF's (b + m) x b panel [U(J, J); A(:, J)] in one thread block.
// U: the b x b block U(J, J), of which only the upper triangle is read or written (its strict
// lower part holds GETRF's L); its rows below the current column jj have zeros in column jj,
// so the only U candidate for pivot jj is U(jj, jj) and those rows never need an update.
// A: the m x b block A(:, J), rows spread over the threads; when `cached`, it is factored in
// dynamic shared memory (after the b entries of the pivot row) and written back at the end.
// L: the b x b block L(0:b, J), which gets L1's strict lower part. ipiv and info: from column
// j0 of the tile; *info is only set when still 0, so the first zero pivot of the tile wins.
template <class T>
__global__ void __launch_bounds__(kPanelMaxThreads)
    tstrf_panel_kernel(TileView<T> U, TileView<T> A, TileView<T> L, int* ipiv, int* info, int j0, int K,
                       bool cached, const int* only_if) {
    if (only_if != nullptr && *only_if == 0) return;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ T warp_key[kPanelMaxThreads / kWarp];
    __shared__ int warp_idx[kPanelMaxThreads / kWarp];
    __shared__ int s_piv;
    __shared__ T s_pval;

    const int b = A.n, m = A.m;
    const int tid = threadIdx.x, nthreads = blockDim.x;
    const int lane = tid % kWarp, warp = tid / kWarp, nwarps = nthreads / kWarp;
    T* const urow = reinterpret_cast<T*>(smem_raw);
    TileView<T> a = A;
    if (cached) {
        a = {urow + b, m, b, m > 0 ? m : 1};
        for (int e = tid; e < m * b; e += nthreads) a(e % m, e / m) = A(e % m, e / m);
        __syncthreads();
    }

    for (int jj = 0; jj < b; ++jj) {
        // Block-wide argmax of |a(:, jj)|; -2 ranks below every real key (NaN included).
        T key = T(-2);
        int idx = INT_MAX;
        for (int i = tid; i < m; i += nthreads) {
            const T k = pivot_key(a(i, jj));
            if (better(k, i, key, idx)) {
                key = k;
                idx = i;
            }
        }
        warp_argmax(key, idx);
        if (lane == 0) {
            warp_key[warp] = key;
            warp_idx[warp] = idx;
        }
        __syncthreads();
        if (warp == 0) {
            key = lane < nwarps ? warp_key[lane] : T(-2);
            idx = lane < nwarps ? warp_idx[lane] : INT_MAX;
            warp_argmax(key, idx);
            if (lane == 0) {
                // U's own row comes first in the panel, so it wins ties (index -1).
                const T uval = U(jj, jj);
                T pval = uval;
                int piv = -1;
                if (!better(pivot_key(uval), -1, key, idx)) {
                    piv = idx;
                    pval = a(idx, jj);
                }
                ipiv[jj] = piv < 0 ? j0 + jj + 1 : K + piv + 1;
                if (pval == T(0) && *info == 0) *info = j0 + jj + 1;
                s_piv = piv;
                s_pval = pval;
            }
        }
        __syncthreads();

        // Swap panel row jj (U's) with A's row piv. Left of jj, U's row is zero and A's row
        // holds the multipliers of the earlier columns: they move up and become L1's row jj.
        const int piv = s_piv;
        for (int c = tid; c < b; c += nthreads) {
            if (c < jj) {
                L(jj, c) = piv < 0 ? T(0) : a(piv, c);
                if (piv >= 0) a(piv, c) = T(0);
            } else {
                T u = U(jj, c);
                if (piv >= 0) {
                    const T t = a(piv, c);
                    a(piv, c) = u;
                    u = t;
                    U(jj, c) = u;
                }
                urow[c] = u;
            }
        }
        __syncthreads();

        // Multipliers and rank-1 update of A's rows; a zero pivot is skipped, not divided by,
        // as in LAPACK's getf2. The next column's search only reads each thread's own rows,
        // so no barrier is needed before it.
        const T pval = s_pval;
        const bool scale = pval != T(0);
        const bool reciprocal = pivot_key(pval) >= safe_min(pval);
        const T inv = T(1) / pval;
        for (int i = tid; i < m; i += nthreads) {
            T l = a(i, jj);
            if (scale) l = reciprocal ? l * inv : l / pval;
            a(i, jj) = l;
            for (int c = jj + 1; c < b; ++c) a(i, c) -= l * urow[c];
        }
    }

    if (cached) {
        __syncthreads();
        for (int e = tid; e < m * b; e += nthreads) A(e % m, e / m) = a(e % m, e / m);
    }
}

// TSTRF's wide blocks go to cuSOLVER: the stack [triu(U(J, J)); A(:, J)] is copied into a
// (b + m) x b panel, factored by Xgetrf (all of the GPU, not one thread block), and copied back.
// The rows of U below the current column are exact zeros in that column, so partial pivoting
// never picks them for finite data. Non-finite data is another matter: cuSOLVER's getrf does not
// carry NaN through (see getrf), and a NaN pivot can make it swap two rows of U, which TSTRF's
// pivots cannot express. A block whose stack holds a NaN or an infinity, or whose pivots swap
// rows of U, is therefore factored from its untouched input by our panel kernel instead, which
// follows the CPU kernel (see tstrf_solver_panel).
constexpr int kSolverPanelMinWidth = 32;
constexpr int kCopyThreads = 256;

// Also sets *non_finite when a value stacked is NaN or infinite (never clears it).
template <class T>
__global__ void stack_panel_kernel(TileView<const T> Ujj, TileView<const T> Aj, TileView<T> P, int* non_finite) {
    const int b = Ujj.n;
    const long long total = static_cast<long long>(P.m) * b;
    int found = 0;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const int r = static_cast<int>(idx % P.m), c = static_cast<int>(idx / P.m);
        const T v = r < b ? (r <= c ? Ujj(r, c) : T(0)) : Aj(r - b, c);
        found |= is_non_finite(v);
        P(r, c) = v;
    }
    if (__syncthreads_or(found) && threadIdx.x == 0) *non_finite = 1;
}

// Sets *redo when cuSOLVER swapped two rows of the U part of the panel (a pivot p with p <= b
// and p != c + 1 for column c), which only non-finite data can cause (never clears it).
__global__ void check_panel_pivots_kernel(const std::int64_t* ipiv64, int b, int* redo) {
    int bad = 0;
    for (int c = threadIdx.x; c < b; c += blockDim.x) {
        const std::int64_t p = ipiv64[c];
        if (p <= b && p != c + 1) bad = 1;
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) *redo = 1;
}

// Copies the factored panel back unless *redo. Info counts exactly zero pivots only (the CPU
// kernel's and LAPACK's convention), read from the diagonal of U: cuSOLVER's own info may also
// count NaN pivots.
template <class T>
__global__ void unstack_panel_kernel(TileView<const T> P, TileView<T> Ujj, TileView<T> Lj, TileView<T> Aj,
                                     const std::int64_t* ipiv64, const int* redo, int* ipiv, int* info, int j0,
                                     int K) {
    if (*redo) return;
    const int b = Ujj.n;
    const long long total = static_cast<long long>(P.m) * b;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const int r = static_cast<int>(idx % P.m), c = static_cast<int>(idx / P.m);
        if (r >= b)
            Aj(r - b, c) = P(r, c);
        else if (r <= c)
            Ujj(r, c) = P(r, c);
        else
            Lj(r, c) = P(r, c);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        int first_zero = 0;
        for (int c = 0; c < b; ++c) {
            const std::int64_t p = ipiv64[c];
            ipiv[c] = (p > b && p <= P.m) ? K + static_cast<int>(p - b) : j0 + c + 1;
            if (first_zero == 0 && P(c, c) == T(0)) first_zero = c + 1;
        }
        if (first_zero > 0 && *info == 0) *info = j0 + first_zero;
    }
}

int panel_threads(int m) {
    const int rounded = (std::max(m, 1) + kWarp - 1) / kWarp * kWarp;
    return std::min(rounded, kPanelMaxThreads);
}

// Largest shared memory (static plus dynamic) a block may opt in to on the current device.
cudaError_t optin_smem(std::size_t* bytes) {
    int device = 0, optin = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (err != cudaSuccess) return err;
    *bytes = static_cast<std::size_t>(optin);
    return cudaSuccess;
}

// Dynamic shared memory the panel kernel may get on the current device.
cudaError_t panel_smem_budget(std::size_t* budget) {
    std::size_t limit = 0;
    const cudaError_t err = optin_smem(&limit);
    if (err != cudaSuccess) return err;
    *budget = limit > kStaticSmemReserve ? limit - kStaticSmemReserve : 0;
    return cudaSuccess;
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

cudaError_t getrf_buffer_bytes(cusolverDnHandle_t solver, cusolverDnParams_t params, cudaDataType type, int m, int n,
                               std::size_t* device_bytes, std::size_t* host_bytes) {
    *device_bytes = 0;
    *host_bytes = 0;
    if (m == 0 || n == 0) return cudaSuccess;
    // The size depends on the shape only: cuSOLVER does not read A here.
    return cusolverDnXgetrf_bufferSize(solver, params, m, n, type, nullptr, std::max(m, 1), type, device_bytes,
                                       host_bytes) == CUSOLVER_STATUS_SUCCESS
               ? cudaSuccess
               : cudaErrorUnknown;
}

// The trtri + gemm variant (Agullo et al., LU Factorization for Accelerator-based Systems, 2011;
// docs/design.md, "References"): TSTRF stores the inverse of each block's unit lower L1 next to
// it, and the triangular solves with L1 become GEMMs, which run several times faster than
// cuBLAS's trsm on these shapes.
constexpr int kInvLeaf = 32;

// Inverts X's diagonal blocks of kInvLeaf (the last may be smaller) in place: one thread block
// per diagonal block, thread c solving for column c by forward substitution in shared memory.
template <class T>
__global__ void invert_leaf_kernel(TileView<T> X) {
    __shared__ T l[kInvLeaf][kInvLeaf + 1];
    __shared__ T x[kInvLeaf][kInvLeaf + 1];
    const int p = blockIdx.x * kInvLeaf;
    const int s = min(kInvLeaf, X.n - p);
    const int c = threadIdx.x;
    if (c < s)
        for (int i = 0; i < s; ++i) l[i][c] = X(p + i, p + c);
    __syncthreads();
    if (c >= s) return;
    for (int i = 0; i < s; ++i) x[i][c] = i == c ? T(1) : T(0);
    for (int i = c + 1; i < s; ++i) {
        T acc = T(0);
        for (int k = c; k < i; ++k) acc += l[i][k] * x[k][c];
        x[i][c] = -acc;
    }
    for (int i = c + 1; i < s; ++i) X(p + i, p + c) = x[i][c];
}

// All-N batched GEMM over matrices at fixed strides, alpha and beta by value.
template <class T>
cublasStatus_t gemm_strided(cublasHandle_t h, int m, int n, int k, T alpha, const T* A, int lda, long long sa,
                            const T* B, int ldb, long long sb, T beta, T* C, int ldc, long long sc, int count) {
    return cublas::gemm_strided_batched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A, lda, sa, B, ldb, sb, &beta, C,
                                        ldc, sc, count);
}

// X = L^{-1} for the b x b unit lower L (its strict lower part is read), X written in full.
// Leaves of kInvLeaf are inverted directly; then pairs of inverted diagonal blocks of size s
// are joined level by level: X21 = -X22 L21 X11, all pairs of a level in one batched GEMM.
// tmp: b * b / 4 elements at least.
template <class T>
cudaError_t invert_unit_lower(cublasHandle_t blas, cudaStream_t stream, TileView<const T> L, TileView<T> X, T* tmp) {
    const int b = L.n;
    if (b == 0) return cudaSuccess;
    cudaError_t err = explicit_unit_lower(L, X, stream);
    if (err != cudaSuccess) return err;
    invert_leaf_kernel<T><<<blocks_for(b, kInvLeaf), kInvLeaf, 0, stream>>>(X);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    for (int s = kInvLeaf; s < b; s *= 2) {
        const int full = b / (2 * s);
        if (full > 0) {
            const long long stride = 2LL * s * (X.ld + 1), tstride = static_cast<long long>(s) * s;
            err = from_blas(gemm_strided(blas, s, s, s, T(1), X.sub(s, 0, s, s).data, X.ld, stride, X.data, X.ld,
                                         stride, T(0), tmp, s, tstride, full));
            if (err != cudaSuccess) return err;
            err = from_blas(gemm_strided(blas, s, s, s, T(-1), X.sub(s, s, s, s).data, X.ld, stride, tmp, s, tstride,
                                         T(0), X.sub(s, 0, s, s).data, X.ld, stride, full));
            if (err != cudaSuccess) return err;
        }
        const int p = full * 2 * s, s2 = b - p - s;
        if (s2 > 0) {
            const TileView<T> T21{tmp, s2, s, s2};
            err = from_blas(gemm<T>(blas, 'N', 'N', T(1), as_const(X.sub(p + s, p, s2, s)), as_const(X.sub(p, p, s, s)),
                                    T(0), T21));
            if (err != cudaSuccess) return err;
            err = from_blas(gemm<T>(blas, 'N', 'N', T(-1), as_const(X.sub(p + s, p + s, s2, s2)), as_const(T21), T(0),
                                    X.sub(p + s, p, s2, s)));
            if (err != cudaSuccess) return err;
        }
    }
    return cudaSuccess;
}

// B = Linv B for the b x n block B, through the b x n buffer W (GEMMs cannot work in place).
template <class T>
cudaError_t apply_inverse(const LuContext& ctx, TileView<const T> Linv, TileView<T> B, T* W) {
    if (B.n == 0 || B.m == 0) return cudaSuccess;
    const TileView<T> Wv{W, B.m, B.n, B.m};
    cudaError_t err = from_blas(gemm<T>(ctx.blas, 'N', 'N', T(1), Linv, as_const(B), T(0), Wv));
    if (err != cudaSuccess) return err;
    return cudaMemcpy2DAsync(B.data, sizeof(T) * B.ld, W, sizeof(T) * B.m, sizeof(T) * B.m, B.n,
                             cudaMemcpyDeviceToDevice, ctx.stream);
}

}  // namespace

namespace {
constexpr int kComposeThreads = 256;
constexpr int kApplyThreads = 128;

// GETRF's K swaps on the rows of A: composed once, applied per column (the per-column walk when
// the tile is too large for shared memory).
template <class T>
cudaError_t laswp(const LuContext& ctx, TileView<T> A, const int* ipiv, int k) {
    if (A.n == 0 || k == 0) return cudaSuccess;
    const std::size_t compose_smem = sizeof(int) * (static_cast<std::size_t>(A.m) + k);
    const std::size_t apply_smem = sizeof(T) * 2 * static_cast<std::size_t>(k);
    if (ctx.work == nullptr || ctx.work_bytes < sizeof(int) * laswp_ints(k) ||
        !allow_dynamic_smem(compose_laswp_kernel, compose_smem) ||
        !allow_dynamic_smem(apply_laswp_kernel<T>, apply_smem)) {
        laswp_kernel<T><<<blocks_for(A.n, kSwapThreads), kSwapThreads, 0, ctx.stream>>>(A, ipiv, k);
        return cudaGetLastError();
    }
    int* perm = static_cast<int*>(ctx.work);
    compose_laswp_kernel<<<1, kComposeThreads, compose_smem, ctx.stream>>>(ipiv, k, A.m, perm);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    apply_laswp_kernel<T><<<A.n, kApplyThreads, apply_smem, ctx.stream>>>(A, perm, k);
    return cudaGetLastError();
}

// The b swaps of one inner block between X (b rows) and Y: composed once, applied per column.
// Uses the first pair_swap_ints(b) ints of ctx.work.
template <class T>
cudaError_t swap_pairs(const LuContext& ctx, TileView<T> X, TileView<T> Y, const int* ipiv, int j0, int b, int K) {
    if (X.n == 0 || b == 0) return cudaSuccess;
    if (ctx.work == nullptr || ctx.work_bytes < sizeof(int) * pair_swap_ints(b)) return cudaErrorInvalidValue;
    int* perm = static_cast<int*>(ctx.work);
    const std::size_t compose_smem = sizeof(int) * (2 * static_cast<std::size_t>(b) + Y.m);
    const std::size_t apply_smem = sizeof(T) * 2 * static_cast<std::size_t>(b);
    if (!allow_dynamic_smem(compose_pair_swaps_kernel, compose_smem) ||
        !allow_dynamic_smem(apply_pair_swaps_kernel<T>, apply_smem)) {
        // Very large tiles: the one-thread-per-column walk needs no shared memory.
        swap_pairs_kernel<T><<<blocks_for(X.n, kSwapThreads), kSwapThreads, 0, ctx.stream>>>(X, Y, ipiv, j0, b, K);
        return cudaGetLastError();
    }
    compose_pair_swaps_kernel<<<1, kComposeThreads, compose_smem, ctx.stream>>>(ipiv, j0, b, K, Y.m, perm);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    apply_pair_swaps_kernel<T><<<X.n, kApplyThreads, apply_smem, ctx.stream>>>(X, Y, perm, b);
    return cudaGetLastError();
}
}  // namespace

namespace {
std::size_t swap_ints_bytes(int ib) { return align_up(sizeof(int) * pair_swap_ints(ib)); }

template <class T>
std::size_t inverse_buffer_bytes(int ib, int n) {
    return align_up(sizeof(T) * static_cast<std::size_t>(std::max(ib, 1)) * std::max({n, ib, 1}));
}

// Bytes of TSTRF's solver panel for a block of b columns over m rows: int64 pivots, cuSOLVER's
// info and our redo flag, the (b + m) x b panel, cuSOLVER's buffer.
template <class T>
cudaError_t solver_panel_bytes(cusolverDnHandle_t solver, cusolverDnParams_t params, int m, int b,
                               std::size_t* bytes) {
    std::size_t device_bytes = 0, host_bytes = 0;
    const cudaError_t err = getrf_buffer_bytes(solver, params, data_type<T>(), b + m, b, &device_bytes, &host_bytes);
    if (err != cudaSuccess) return err;
    *bytes = align_up(sizeof(std::int64_t) * b) + align_up(2 * sizeof(int)) +
             align_up(sizeof(T) * static_cast<std::size_t>(b + m) * b) + align_up(device_bytes);
    return cudaSuccess;
}

// Where TSTRF's GEMM buffer starts in the workspace: after the swap permutation and, for wide
// blocks, after the largest solver panel (the first block's or the narrower last one's).
template <class T>
cudaError_t tstrf_buffer_offset(cusolverDnHandle_t solver, cusolverDnParams_t params, int m, int K, int ib,
                                std::size_t* offset) {
    *offset = swap_ints_bytes(ib);
    const int b = std::min(ib, K);
    if (b < kSolverPanelMinWidth) return cudaSuccess;
    for (int w : {b, K % b == 0 ? b : K % b}) {
        std::size_t bytes = 0;
        const cudaError_t err = solver_panel_bytes<T>(solver, params, m, w, &bytes);
        if (err != cudaSuccess) return err;
        *offset = std::max(*offset, bytes);
    }
    return cudaSuccess;
}
}  // namespace

template <class T>
std::size_t lu_workspace_bytes(cusolverDnHandle_t solver, cusolverDnParams_t params, int m, int n, int ib) {
    // GETRF: its int64 pivots, then cuSOLVER's buffer ("at most m x n": the square k x k is
    // queried too, in case the size is not monotone in the shape). TSTRF with blocks of at
    // least kSolverPanelMinWidth columns: its solver panel (below). Narrower TSTRF blocks work in
    // place and in shared memory; GESSM and SSSSM only swap and call cuBLAS.
    const int k = std::min(m, n);
    std::size_t device_max = 0;
    for (const auto& [mm, nn] : {std::pair{m, n}, std::pair{k, k}}) {
        std::size_t device_bytes = 0, host_bytes = 0;
        // On failure, report 0: getrf then finds the workspace too small and says so.
        if (getrf_buffer_bytes(solver, params, data_type<T>(), mm, nn, &device_bytes, &host_bytes) != cudaSuccess)
            return 0;
        device_max = std::max(device_max, device_bytes);
    }
    const std::size_t getrf_bytes =
        std::max(align_up(static_cast<std::size_t>(std::max(k, 0)) * sizeof(std::int64_t)) + device_max,
                 // TSTRF's and SSSSM's swaps: blocks of up to ib rows of the panel, whatever n is
                 // (SSSSM on a narrow right-hand side still swaps ib rows at a time).
                 align_up(sizeof(int) * std::max(pair_swap_ints(ib), laswp_ints(std::max(m, n)))));
    // The trtri + gemm variant: SSSSM's and TSTRF's ib x n GEMM buffer (also the inversion's
    // scratch), after the swap permutation (SSSSM) or after TSTRF's solver panel.
    const std::size_t inverse_bytes = inverse_buffer_bytes<T>(ib, n);
    const std::size_t ssssm_bytes = swap_ints_bytes(ib) + inverse_bytes;
    std::size_t tstrf_offset = 0;
    if (tstrf_buffer_offset<T>(solver, params, m, n, ib, &tstrf_offset) != cudaSuccess) return 0;
    return std::max({getrf_bytes, ssssm_bytes, tstrf_offset + inverse_bytes});
}

namespace {
// GETRF of a tile by the CPU kernel: download, factor, upload (non-finite input only).
template <class T>
cudaError_t getrf_on_host(cudaStream_t stream, TileView<T> A, int* dipiv, int* dinfo, int ib) {
    const int k = std::min(A.m, A.n);
    std::vector<T> host(static_cast<std::size_t>(A.m) * A.n);
    std::vector<int> ipiv(static_cast<std::size_t>(k));
    const std::size_t row_bytes = sizeof(T) * A.m, ld_bytes = sizeof(T) * A.ld;
    cudaError_t err = cudaMemcpy2DAsync(host.data(), row_bytes, A.data, ld_bytes, row_bytes, A.n,
                                        cudaMemcpyDeviceToHost, stream);
    if (err != cudaSuccess || (err = cudaStreamSynchronize(stream)) != cudaSuccess) return err;
    int info = cpu::getrf<T>(TileView<T>{host.data(), A.m, A.n, std::max(A.m, 1)}, ipiv.data(), ib);
    if ((err = cudaMemcpy2DAsync(A.data, ld_bytes, host.data(), row_bytes, row_bytes, A.n, cudaMemcpyHostToDevice,
                                 stream)) != cudaSuccess ||
        (err = cudaMemcpyAsync(dipiv, ipiv.data(), sizeof(int) * k, cudaMemcpyHostToDevice, stream)) != cudaSuccess ||
        (err = cudaMemcpyAsync(dinfo, &info, sizeof(int), cudaMemcpyHostToDevice, stream)) != cudaSuccess)
        return err;
    return cudaStreamSynchronize(stream);  // the host buffers end here
}
}  // namespace

template <class T>
cudaError_t getrf(const LuContext& ctx, TileView<T> A, int* dipiv, int* dinfo, int ib) {
    // cuSOLVER picks its own blocking; any ib gives the same factorization up to rounding.
    if (ib < 1) return cudaErrorInvalidValue;
    if (A.empty()) return cudaMemsetAsync(dinfo, 0, sizeof(int), ctx.stream);
    const int k = std::min(A.m, A.n);
    std::size_t device_bytes = 0, host_bytes = 0;
    cudaError_t err = getrf_buffer_bytes(ctx.solver, ctx.params, data_type<T>(), A.m, A.n, &device_bytes, &host_bytes);
    if (err != cudaSuccess) return err;
    // The 64-bit getrf has needed no host workspace so far; we could not give it one without
    // allocating (and a host buffer would tie the call to the host), so refuse.
    if (host_bytes != 0) return cudaErrorNotSupported;
    const std::size_t pivot_bytes = align_up(static_cast<std::size_t>(k) * sizeof(std::int64_t));
    if (ctx.work == nullptr || pivot_bytes + device_bytes > ctx.work_bytes) return cudaErrorInvalidValue;
    // cuSOLVER's getrf does not carry NaN through: on the H100 (CUDA 13) a column of NaN came out
    // with an exact zero pivot and finite factors, so a NaN input could give a finite solution.
    // A tile holding a NaN or an infinity is factored by the CPU kernel instead (LAPACK's
    // semantics, the CPU worker's result). The scan reads the tile once and costs one
    // synchronization: under 1% of the factorization from nb = 1024 on.
    if ((err = cudaMemsetAsync(dinfo, 0, sizeof(int), ctx.stream)) != cudaSuccess) return err;
    const long long elements = static_cast<long long>(A.m) * A.n;
    const int scan_blocks = static_cast<int>(std::min<long long>((elements + kConvertThreads - 1) / kConvertThreads, 1024));
    non_finite_kernel<T><<<scan_blocks, kConvertThreads, 0, ctx.stream>>>(as_const(A), dinfo);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    int non_finite = 0;
    if ((err = cudaMemcpyAsync(&non_finite, dinfo, sizeof(int), cudaMemcpyDeviceToHost, ctx.stream)) != cudaSuccess ||
        (err = cudaStreamSynchronize(ctx.stream)) != cudaSuccess)
        return err;
    if (non_finite) return getrf_on_host(ctx.stream, A, dipiv, dinfo, ib);
    auto* ipiv64 = static_cast<std::int64_t*>(ctx.work);
    void* buffer = static_cast<char*>(ctx.work) + pivot_bytes;
    if (cusolverDnXgetrf(ctx.solver, ctx.params, A.m, A.n, data_type<T>(), A.data, A.ld, ipiv64, data_type<T>(),
                         buffer, device_bytes, nullptr, 0, dinfo) != CUSOLVER_STATUS_SUCCESS)
        return cudaErrorUnknown;
    const int blocks = std::min(blocks_for(k, kConvertThreads), 64);
    pivots_to_int32_kernel<<<blocks, kConvertThreads, 0, ctx.stream>>>(ipiv64, k, A.m, dipiv);
    zero_pivot_info_kernel<T><<<1, kConvertThreads, 0, ctx.stream>>>(as_const(A), k, dinfo);
    return cudaGetLastError();
}

template <class T>
cudaError_t gessm(const LuContext& ctx, const int* dipiv, TileView<const T> D, TileView<T> A, int ib) {
    // L^{-1} P A block by block equals all of P first, then one solve with the whole unit lower
    // L: GETRF's later swaps already moved the rows of L's earlier columns. So ib is not needed.
    if (ib < 1) return cudaErrorInvalidValue;
    if (A.empty()) return cudaSuccess;
    // K pivots; a tall diagonal tile (the last one of a tall matrix) has an m x K trapezoidal L:
    // its rows below K update the rows of A below K.
    const int K = std::min(A.m, D.n);
    cudaError_t err = laswp(ctx, A, dipiv, K);
    if (err != cudaSuccess) return err;
    TileView<T> top = A.sub(0, 0, K, A.n);
    err = from_blas(trsm<T>(ctx.blas, 'L', 'L', 'N', 'U', T(1), D.sub(0, 0, K, K), top));
    if (err != cudaSuccess || A.m == K) return err;
    return from_blas(gemm<T>(ctx.blas, 'N', 'N', T(-1), D.sub(K, 0, A.m - K, K), as_const(top), T(1),
                             A.sub(K, 0, A.m - K, A.n)));
}

namespace {
// One block of TSTRF by our single-thread-block panel kernel (narrow blocks).
template <class T>
// With only_if, the kernel does nothing unless *only_if (a device flag) is nonzero.
cudaError_t tstrf_shared_panel(TileView<T> Ujj, TileView<T> Aj, TileView<T> Lj, int* ipiv, int* dinfo, int j0, int K,
                               std::size_t smem_budget, cudaStream_t stream, const int* only_if = nullptr) {
    const int b = Ujj.n, m = Aj.m;
    const std::size_t row_bytes = static_cast<std::size_t>(b) * sizeof(T);
    const std::size_t cached_bytes = row_bytes + static_cast<std::size_t>(m) * row_bytes;
    const bool cached = cached_bytes <= smem_budget;
    const std::size_t smem = cached ? cached_bytes : row_bytes;
    if (!allow_dynamic_smem(tstrf_panel_kernel<T>, smem)) return cudaErrorInvalidValue;
    tstrf_panel_kernel<T><<<1, panel_threads(m), smem, stream>>>(Ujj, Aj, Lj, ipiv, dinfo, j0, K, cached, only_if);
    return cudaGetLastError();
}

// One block of TSTRF through cuSOLVER (wide blocks): stack, Xgetrf, unstack. When the stack
// holds a NaN or an infinity, or cuSOLVER swapped rows of U, the unstack is skipped and our panel
// kernel factors the block instead, all decided on the device (no synchronization with the host;
// on finite data the panel kernel's launch returns at once).
template <class T>
cudaError_t tstrf_solver_panel(const LuContext& ctx, TileView<T> Ujj, TileView<T> Aj, TileView<T> Lj, int* ipiv,
                               int* dinfo, int j0, int K, std::size_t smem_budget) {
    const int b = Ujj.n, rows = b + Aj.m;
    std::size_t device_bytes = 0, host_bytes = 0;
    cudaError_t err = getrf_buffer_bytes(ctx.solver, ctx.params, data_type<T>(), rows, b, &device_bytes, &host_bytes);
    if (err != cudaSuccess) return err;
    if (host_bytes != 0) return cudaErrorNotSupported;
    if (ctx.work == nullptr) return cudaErrorInvalidValue;
    char* w = static_cast<char*>(ctx.work);
    auto* ipiv64 = reinterpret_cast<std::int64_t*>(w);
    w += align_up(sizeof(std::int64_t) * b);
    auto* panel_info = reinterpret_cast<int*>(w);
    w += align_up(2 * sizeof(int));
    const TileView<T> P{reinterpret_cast<T*>(w), rows, b, rows};
    w += align_up(sizeof(T) * static_cast<std::size_t>(rows) * b);
    if (static_cast<std::size_t>(w - static_cast<char*>(ctx.work)) + device_bytes > ctx.work_bytes)
        return cudaErrorInvalidValue;
    int* redo = panel_info + 1;  // cuSOLVER's info is not used: unstack reads U's diagonal
    if ((err = cudaMemsetAsync(redo, 0, sizeof(int), ctx.stream)) != cudaSuccess) return err;
    const int grid = std::min(blocks_for(rows * b, kCopyThreads), 1024);
    stack_panel_kernel<T><<<grid, kCopyThreads, 0, ctx.stream>>>(as_const(Ujj), as_const(Aj), P, redo);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    if (cusolverDnXgetrf(ctx.solver, ctx.params, rows, b, data_type<T>(), P.data, P.ld, ipiv64, data_type<T>(), w,
                         device_bytes, nullptr, 0, panel_info) != CUSOLVER_STATUS_SUCCESS)
        return cudaErrorUnknown;
    check_panel_pivots_kernel<<<1, kCopyThreads, 0, ctx.stream>>>(ipiv64, b, redo);
    unstack_panel_kernel<T><<<grid, kCopyThreads, 0, ctx.stream>>>(as_const(P), Ujj, Lj, Aj, ipiv64, redo, ipiv, dinfo,
                                                                   j0, K);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    return tstrf_shared_panel(Ujj, Aj, Lj, ipiv, dinfo, j0, K, smem_budget, ctx.stream, redo);
}
}  // namespace

template <class T>
cudaError_t tstrf(const LuContext& ctx, TileView<T> U, TileView<T> A, TileView<T> L, int* dipiv, int* dinfo, int ib,
                  bool inverse) {
    if (ib < 1 || (inverse && L.m < ib + std::min(ib, A.n))) return cudaErrorInvalidValue;
    cudaError_t err = cudaMemsetAsync(dinfo, 0, sizeof(int), ctx.stream);
    if (err != cudaSuccess) return err;
    const int K = A.n, m = A.m;
    if (K == 0) return cudaSuccess;
    std::size_t smem_budget = 0;
    err = panel_smem_budget(&smem_budget);
    if (err != cudaSuccess) return err;
    // Wide blocks: cuSOLVER on the whole GPU; narrow ones: one thread block, no cuSOLVER call overhead.
    const bool solver_panel = std::min(ib, K) >= kSolverPanelMinWidth;
    T* W = nullptr;  // the variant's GEMM buffer
    if (inverse) {
        std::size_t offset = 0;
        if ((err = tstrf_buffer_offset<T>(ctx.solver, ctx.params, m, K, ib, &offset)) != cudaSuccess) return err;
        if (ctx.work == nullptr || offset + inverse_buffer_bytes<T>(ib, K) > ctx.work_bytes)
            return cudaErrorInvalidValue;
        W = reinterpret_cast<T*>(static_cast<char*>(ctx.work) + offset);
    }

    for (int j0 = 0; j0 < K; j0 += ib) {
        const int b = std::min(ib, K - j0);
        const TileView<T> Ujj = U.sub(j0, j0, b, b), Aj = A.sub(0, j0, m, b), Lj = L.sub(0, j0, b, b);
        err = solver_panel ? tstrf_solver_panel(ctx, Ujj, Aj, Lj, dipiv + j0, dinfo, j0, K, smem_budget)
                           : tstrf_shared_panel(Ujj, Aj, Lj, dipiv + j0, dinfo, j0, K, smem_budget, ctx.stream);
        if (err != cudaSuccess) return err;
        const TileView<T> Linv = L.sub(ib, j0, b, b);
        if (inverse && (err = invert_unit_lower(ctx.blas, ctx.stream, as_const(Lj), Linv, W)) != cudaSuccess)
            return err;

        const int right = K - j0 - b;
        if (right == 0) continue;
        const TileView<T> U12 = U.sub(j0, j0 + b, b, right);
        const TileView<T> A12 = A.sub(0, j0 + b, m, right);
        err = swap_pairs(ctx, U12, A12, dipiv + j0, j0, b, K);
        if (err != cudaSuccess) return err;
        err = inverse ? apply_inverse(ctx, as_const(Linv), U12, W)
                      : from_blas(trsm<T>(ctx.blas, 'L', 'L', 'N', 'U', T(1), as_const(L.sub(0, j0, b, b)), U12));
        if (err != cudaSuccess) return err;
        err = from_blas(gemm<T>(ctx.blas, 'N', 'N', T(-1), as_const(A.sub(0, j0, m, b)), as_const(U12), T(1), A12));
        if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
}

template <class T>
cudaError_t ssssm(const LuContext& ctx, TileView<T> A1, TileView<T> A2, TileView<const T> L, TileView<const T> AL,
                  const int* dipiv, int ib, bool inverse) {
    if (ib < 1 || (inverse && L.m < ib + std::min(ib, AL.n))) return cudaErrorInvalidValue;
    const int K = AL.n, m = A2.m, n = A2.n;
    if (n == 0) return cudaSuccess;
    T* W = nullptr;
    if (inverse) {
        if (ctx.work == nullptr || swap_ints_bytes(ib) + inverse_buffer_bytes<T>(ib, n) > ctx.work_bytes)
            return cudaErrorInvalidValue;
        W = reinterpret_cast<T*>(static_cast<char*>(ctx.work) + swap_ints_bytes(ib));
    }
    for (int j0 = 0; j0 < K; j0 += ib) {
        const int b = std::min(ib, K - j0);
        const TileView<T> A1J = A1.sub(j0, 0, b, n);
        cudaError_t err = swap_pairs(ctx, A1J, A2, dipiv + j0, j0, b, K);
        if (err != cudaSuccess) return err;
        err = inverse ? apply_inverse(ctx, L.sub(ib, j0, b, b), A1J, W)
                      : from_blas(trsm<T>(ctx.blas, 'L', 'L', 'N', 'U', T(1), L.sub(0, j0, b, b), A1J));
        if (err != cudaSuccess) return err;
        err = from_blas(gemm<T>(ctx.blas, 'N', 'N', T(-1), AL.sub(0, j0, m, b), as_const(A1J), T(1), A2));
        if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
}

template std::size_t lu_workspace_bytes<float>(cusolverDnHandle_t, cusolverDnParams_t, int, int, int);
template cudaError_t getrf<float>(const LuContext&, TileView<float>, int*, int*, int);
template cudaError_t gessm<float>(const LuContext&, const int*, TileView<const float>, TileView<float>, int);
template cudaError_t tstrf<float>(const LuContext&, TileView<float>, TileView<float>, TileView<float>, int*, int*,
                                  int, bool);
template cudaError_t ssssm<float>(const LuContext&, TileView<float>, TileView<float>, TileView<const float>,
                                  TileView<const float>, const int*, int, bool);
template std::size_t lu_workspace_bytes<double>(cusolverDnHandle_t, cusolverDnParams_t, int, int, int);
template cudaError_t getrf<double>(const LuContext&, TileView<double>, int*, int*, int);
template cudaError_t gessm<double>(const LuContext&, const int*, TileView<const double>, TileView<double>, int);
template cudaError_t tstrf<double>(const LuContext&, TileView<double>, TileView<double>, TileView<double>, int*,
                                   int*, int, bool);
template cudaError_t ssssm<double>(const LuContext&, TileView<double>, TileView<double>, TileView<const double>,
                                   TileView<const double>, const int*, int, bool);

}  // namespace starfact::cuda
