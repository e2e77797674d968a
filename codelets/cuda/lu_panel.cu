// CUDA panel factorization of TSTRF, one inner block at a time: narrow blocks by our kernel (the
// partial-pivoting LU of the stacked panel in one thread block), wide ones by cuSOLVER's Xgetrf
// on a stacked copy, which falls back on our kernel when cuSOLVER cannot be trusted with the data.
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cstddef>
#include <cstdint>

#include "codelets/cuda/lu_common.cuh"

namespace starfact::cuda::lu_detail {
namespace {

constexpr int kPanelMaxThreads = 1024;
constexpr int kWarp = 32;
// Room left for the panel kernel's static shared memory (its reduction scratch).
constexpr std::size_t kStaticSmemReserve = 1024;
// Threads of the kernels that copy the solver panel in and out.
constexpr int kCopyThreads = 256;

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
}  // namespace

// Dynamic shared memory the panel kernel may get on the current device.
cudaError_t panel_smem_budget(std::size_t* budget) {
    std::size_t limit = 0;
    const cudaError_t err = optin_smem(&limit);
    if (err != cudaSuccess) return err;
    *budget = limit > kStaticSmemReserve ? limit - kStaticSmemReserve : 0;
    return cudaSuccess;
}

// One block of TSTRF by our single-thread-block panel kernel (narrow blocks).
// With only_if, the kernel does nothing unless *only_if (a device flag) is nonzero.
template <class T>
cudaError_t tstrf_shared_panel(TileView<T> Ujj, TileView<T> Aj, TileView<T> Lj, int* ipiv, int* dinfo, int j0, int K,
                               std::size_t smem_budget, cudaStream_t stream, const int* only_if) {
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

template cudaError_t tstrf_shared_panel<float>(TileView<float>, TileView<float>, TileView<float>, int*, int*, int, int,
                                               std::size_t, cudaStream_t, const int*);
template cudaError_t tstrf_shared_panel<double>(TileView<double>, TileView<double>, TileView<double>, int*, int*, int,
                                                int, std::size_t, cudaStream_t, const int*);
template cudaError_t tstrf_solver_panel<float>(const LuContext&, TileView<float>, TileView<float>, TileView<float>,
                                               int*, int*, int, int, std::size_t);
template cudaError_t tstrf_solver_panel<double>(const LuContext&, TileView<double>, TileView<double>, TileView<double>,
                                                int*, int*, int, int, std::size_t);

}  // namespace starfact::cuda::lu_detail
