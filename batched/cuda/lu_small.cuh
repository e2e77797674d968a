// The whole-matrix register LU for matrices of order <= 32, shared by the fixed-size getrf
// (getrf.cu) and the variable-size vgetrf (vgetrf.cu) through a batch accessor (FixedBatch,
// VarBatch): one pass over memory, each matrix read once into registers and written once.
//
// A group of SUB lanes (4, 8, 16 or 32) holds one matrix, R rows per lane (lane t: rows t,
// t + SUB, ...; SUB * R >= the order); a block holds MAXT / SUB groups, and each group goes
// through matrices b, b + stride, ..., copying the next one into shared memory (cp.async) while
// it factors the current one. All the groups of a warp go round the same number of times (a
// group without a matrix idles), so the warp-wide shuffles and votes below always have the whole
// warp. Two rows per lane (order 32 on 16 lanes: two matrices per warp) halve the pivot searches,
// votes, shuffles and pivot-row loads per matrix and give each lane two independent updates.
//
// Row interchanges are deferred: every row remembers its position in LAPACK's order (`pos`),
// the pivot of column j is the largest |a| among rows not yet chosen (ties to the smallest
// position, as idamax), and rows are written to their final places at the end. The pivot
// search takes each lane's best row exactly, then reduces only the high 32 bits of the key over
// the group (one redux, or a shuffle butterfly for SUB < 32) and a ballot says whether one lane
// holds that maximum; only when two lanes share the high word somewhere in the warp (equal or
// nearly equal magnitudes) the exact search (low word, then the smallest position) runs. The pivot's value and position reach the group by
// shuffles from the winning lane; the rest of the pivot row goes through shared memory.
// Lane j keeps ipiv[j], written at the end with one store per lane.
#pragma once

#include <cuda_runtime.h>

#include <cfloat>
#include <cstddef>

#include "batched/cuda/common.cuh"

namespace starfact::batched::cuda::lu_small {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr unsigned kNoPos = 0xffffffffu;

// ---- Pivot search and multipliers (also used by getrf.cu's panel kernels) -------------------

/// A 64-bit key whose order is the order of |x| (bit patterns of non-negative floats are
/// monotonic), 0 reserved for "no candidate". A NaN gets the key of a zero, so it is chosen only
/// when nothing larger than zero is left and it comes first: the pivot always exists and is
/// in range, and the NaN spreads through its own matrix only.
__device__ inline unsigned long long pivot_key(double x) {
    if (isnan(x)) return 1ull;
    return static_cast<unsigned long long>(__double_as_longlong(fabs(x))) + 1ull;
}
__device__ inline unsigned long long pivot_key(float x) {  // in the high word: see lu_whole_kernel
    if (isnan(x)) return 1ull << 32;
    return (static_cast<unsigned long long>(__float_as_uint(fabsf(x))) + 1ull) << 32;
}

template <class T>
__device__ inline T safe_min();
template <>
__device__ inline double safe_min<double>() { return DBL_MIN; }
template <>
__device__ inline float safe_min<float>() { return FLT_MIN; }

/// The multiplier l = a / piv as LAPACK's getrf2 computes it (reciprocal unless piv is tiny);
/// a zero pivot leaves the column unscaled (its entries are zero anyway).
template <class T>
__device__ inline T multiplier(T a, T piv) {
    if (piv == T(0)) return a;
    return fabs(piv) >= safe_min<T>() ? a * (T(1) / piv) : a / piv;
}

/// 16-byte vectors for the pivot row's broadcast through shared memory.
template <class T>
struct Vec16;
template <>
struct Vec16<double> {
    using type = double2;
};
template <>
struct Vec16<float> {
    using type = float4;
};

__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ inline void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
template <class T>
__device__ inline void cp_async(T* smem, const T* gmem) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(sizeof(T)));
}

// ---- Batches --------------------------------------------------------------------------------

/// Every matrix of order n, leading dimension lda; pivots back to back (n per matrix).
template <class T>
struct FixedBatch {
    T* const* A;
    int n, lda;
    int* ipiv;
    int* info;
    static constexpr bool kUniform = true;  // one order for the whole batch
    __device__ int order(int) const { return n; }
    __device__ int ld(int) const { return lda; }
    __device__ int* pivots(int b) const { return ipiv + static_cast<std::size_t>(b) * n; }
};

/// Matrix b of order n[b] (<= the kernel's NC), leading dimension lda[b], pivots at ipiv[b].
template <class T>
struct VarBatch {
    T* const* A;
    const int* n;
    const int* lda;
    int* const* ipiv;
    int* info;
    static constexpr bool kUniform = false;
    __device__ int order(int b) const { return n[b]; }
    __device__ int ld(int b) const { return lda[b]; }
    __device__ int* pivots(int b) const { return ipiv[b]; }
};

/// Max of x over the aligned group of SUB lanes (the whole warp takes part).
template <int SUB>
__device__ __forceinline__ unsigned group_max(unsigned x) {
    if constexpr (SUB == 32) {
        return __reduce_max_sync(kFullMask, x);
    } else {
#pragma unroll
        for (int off = SUB / 2; off > 0; off /= 2) x = max(x, __shfl_xor_sync(kFullMask, x, off));
        return x;
    }
}
template <int SUB>
__device__ __forceinline__ unsigned group_min(unsigned x) {
    if constexpr (SUB == 32) {
        return __reduce_min_sync(kFullMask, x);
    } else {
#pragma unroll
        for (int off = SUB / 2; off > 0; off /= 2) x = min(x, __shfl_xor_sync(kFullMask, x, off));
        return x;
    }
}

// ---- The kernel -------------------------------------------------------------------------------

template <class T, int NC, int SUB, int R, int MAXT, int MINB, class Batch>
__global__ void __launch_bounds__(MAXT, MINB) lu_whole_kernel(Batch batch, int count) {
    static_assert(SUB >= 4 && SUB <= 32 && (SUB & (SUB - 1)) == 0 && NC <= SUB * R, "R rows per lane");
    using V = typename Vec16<T>::type;
    constexpr int kV = static_cast<int>(sizeof(V) / sizeof(T));
    static_assert(NC % kV == 0, "rows are broadcast in 16-byte pieces");
    constexpr int kGroups = MAXT / SUB;
    constexpr int kPerWarp = 32 / SUB;
    __shared__ __align__(16) T stage[kGroups * NC * NC];
    __shared__ __align__(16) T srow[2][kGroups][NC];

    const int lane = threadIdx.x & 31;
    const int group = threadIdx.x / SUB, t = threadIdx.x % SUB;  // lane t holds rows t, t + SUB, ...
    const unsigned gbits = SUB == 32 ? kFullMask : ((1u << SUB) - 1u) << (lane / SUB * SUB);
    T* st = stage + group * NC * NC;  // st[c * NC + r] = A(r, c)
    const int stride = gridDim.x * kGroups;
    auto fetch = [&](int bb) {
        if (bb < count) {
            const int nb = batch.order(bb), ld = batch.ld(bb);
            const T* src = batch.A[bb];
            for (int c = 0; c < nb; ++c)
#pragma unroll
                for (int k = 0; k < R; ++k) {
                    const int r = t + k * SUB;
                    if (r < nb) cp_async(st + c * NC + r, src + r + static_cast<std::size_t>(c) * ld);
                }
        }
        cp_async_commit();
    };
    int b = blockIdx.x * kGroups + group;
    const int warp_first = blockIdx.x * kGroups + static_cast<int>(threadIdx.x / 32) * kPerWarp;
    fetch(b);
    T a[R][NC];
    for (int wb = warp_first; wb < count; wb += stride, b += stride) {
        const bool active = b < count;
        const int n = active ? batch.order(b) : 0;
        cp_async_wait_all();
        __syncwarp();
#pragma unroll
        for (int k = 0; k < R; ++k)
#pragma unroll
            for (int c = 0; c < NC; ++c) a[k][c] = (t + k * SUB < n && c < n) ? st[c * NC + t + k * SUB] : T(0);
        __syncwarp();
        fetch(b + stride);

        // Columns to go through, the same for the whole warp (a group without a matrix too).
        int steps = n;
        if constexpr (Batch::kUniform)
            steps = batch.order(0);
        else if constexpr (SUB < 32)
            steps = static_cast<int>(__reduce_max_sync(kFullMask, n > 0 ? static_cast<unsigned>(n) : 0u));
        int pos[R];     // each row's position in LAPACK's order
        int my_piv[R];  // ipiv of the rows' own indices
        int linfo = 0;
#pragma unroll
        for (int k = 0; k < R; ++k) {
            pos[k] = t + k * SUB;
            my_piv[k] = 0;
        }
#pragma unroll
        for (int j = 0; j < NC; ++j) {
            if (j >= steps) break;
            const int par = j & 1;
            // This lane's best row (the exact order: key, then position) ...
            unsigned long long kbest = 0ull;
            unsigned pbest = kNoPos;
            int kb = 0;
#pragma unroll
            for (int k = 0; k < R; ++k) {
                const bool cand = t + k * SUB < n && pos[k] >= j;
                const unsigned long long key = cand ? pivot_key(a[k][j]) : 0ull;
                if (key > kbest || (key != 0ull && key == kbest && static_cast<unsigned>(pos[k]) < pbest)) {
                    kbest = key;
                    pbest = static_cast<unsigned>(pos[k]);
                    kb = k;
                }
            }
            // ... then the group's, by the high word and, if two lanes share it, exactly.
            const unsigned hi = static_cast<unsigned>(kbest >> 32);
            const unsigned hmax = group_max<SUB>(hi);
            const bool top_hi = kbest != 0ull && hi == hmax;
            unsigned win = __ballot_sync(kFullMask, top_hi) & gbits;
            if (__any_sync(kFullMask, (win & (win - 1)) != 0)) {
                const unsigned lmax = group_max<SUB>(top_hi ? static_cast<unsigned>(kbest) : 0u);
                const bool top = top_hi && static_cast<unsigned>(kbest) == lmax;
                const unsigned pmin = group_min<SUB>(top ? pbest : kNoPos);
                win = __ballot_sync(kFullMask, top && pbest == pmin) & gbits;
            }
            // win == 0: this group has no column j (no matrix, or a smaller one).
            const int wl = win != 0 ? __ffs(win) - 1 : lane;
            const bool winner = win != 0 && lane == wl;
            const int bp = static_cast<int>(__shfl_sync(kFullMask, pbest, wl));
            T mine = a[0][j];
#pragma unroll
            for (int k = 1; k < R; ++k)
                if (kb == k) mine = a[k][j];
            const T piv = __shfl_sync(kFullMask, mine, wl);
#pragma unroll
            for (int k = 0; k < R; ++k)
                if (winner && kb == k) {
#pragma unroll
                    for (int c = (j + 1) / kV * kV; c < NC; c += kV) {
                        V v;
                        T* e = reinterpret_cast<T*>(&v);
#pragma unroll
                        for (int q = 0; q < kV; ++q) e[q] = a[k][c + q];
                        *reinterpret_cast<V*>(&srow[par][group][c]) = v;
                    }
                }
            __syncwarp();
            if (win != 0) {
                bool upd[R];
                T l[R];
#pragma unroll
                for (int k = 0; k < R; ++k) {
                    if (winner && kb == k) {
                        pos[k] = j;
                    } else if (pos[k] == j) {
                        pos[k] = bp;
                    }
                    upd[k] = t + k * SUB < n && pos[k] > j;
                    l[k] = T(0);
                    if (upd[k]) {
                        l[k] = multiplier(a[k][j], piv);
                        a[k][j] = l[k];
                    }
                }
                if (t == j % SUB) my_piv[j / SUB] = bp + 1;
                if (piv == T(0) && linfo == 0) linfo = j + 1;
#pragma unroll
                for (int c = (j + 1) / kV * kV; c < NC; c += kV) {
                    const V v = *reinterpret_cast<const V*>(&srow[par][group][c]);
                    const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
                    for (int q = 0; q < kV; ++q)
#pragma unroll
                        for (int k = 0; k < R; ++k)
                            if (c + q > j && upd[k]) a[k][c + q] -= l[k] * e[q];
                }
            }
        }

        if (active) {
            T* Ab = batch.A[b];
            const int ld = batch.ld(b);
            int* piv_out = batch.pivots(b);
#pragma unroll
            for (int k = 0; k < R; ++k)
                if (t + k * SUB < n) {
#pragma unroll
                    for (int c = 0; c < NC; ++c)
                        if (c < n) Ab[pos[k] + static_cast<std::size_t>(c) * ld] = a[k][c];
                    piv_out[t + k * SUB] = my_piv[k];
                }
            if (t == 0) batch.info[b] = linfo;
        }
    }
}

/// One instance: a grid of the blocks that fit on the device at once (each group then goes
/// through several matrices). The device's size is read once per process and instance.
template <class T, int NC, int SUB, int R, int MAXT, int MINB, class Batch>
void launch_whole(cudaStream_t stream, const Batch& batch, int count) {
    static const int resident = [] {
        int device = 0, sms = 0, per_sm = 0;
        detail::check(cudaGetDevice(&device), "getrf (cudaGetDevice)");
        detail::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "getrf (SM count)");
        detail::check(cudaFuncSetAttribute(lu_whole_kernel<T, NC, SUB, R, MAXT, MINB, Batch>,
                                           cudaFuncAttributePreferredSharedMemoryCarveout,
                                           cudaSharedmemCarveoutMaxShared),
                      "getrf (shared memory carveout)");
        detail::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                          &per_sm, lu_whole_kernel<T, NC, SUB, R, MAXT, MINB, Batch>, MAXT, 0),
                      "getrf (occupancy)");
        return sms * per_sm > 0 ? sms * per_sm : 1;
    }();
    const int needed = detail::ceil_div(count, MAXT / SUB);
    lu_whole_kernel<T, NC, SUB, R, MAXT, MINB, Batch><<<needed < resident ? needed : resident, MAXT, 0, stream>>>(batch, count);
    detail::check_launch("getrf (register kernel)");
}

/// The instance for matrices of order <= nmax (<= 32), smallest first: order, lanes per matrix,
/// rows per lane, threads per block, blocks per SM for the register budget.
template <class T, class Batch>
void launch(cudaStream_t stream, int nmax, const Batch& batch, int count) {
    if (nmax <= 4) return launch_whole<T, 4, 4, 1, 128, 1>(stream, batch, count);
    if (nmax <= 8) return launch_whole<T, 8, 8, 1, 128, 1>(stream, batch, count);
    if (nmax <= 16) return launch_whole<T, 16, 8, 2, 128, 4>(stream, batch, count);
    return launch_whole<T, 32, 16, 2, 64, 6>(stream, batch, count);
}

}  // namespace starfact::batched::cuda::lu_small
