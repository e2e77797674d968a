// The whole-matrix register LU for matrices of order <= 32, shared by the fixed-size getrf
// (getrf.cu) and the variable-size vgetrf (vgetrf.cu) through a batch accessor (FixedBatch,
// VarBatch): one pass over memory, each matrix read once into registers and written once.
//
// A group of SUB lanes (4, 8, 16 or 32; SUB >= the order) holds one matrix, one row per lane;
// a block holds MAXT / SUB groups, and each group goes through matrices b, b + stride, ...,
// copying the next one into shared memory (cp.async) while it factors the current one. All the
// groups of a warp go round the same number of times (a group without a matrix idles), so the
// warp-wide shuffles and votes below always have the whole warp (no sub-warp masks).
//
// Row interchanges are deferred: every row remembers its position in LAPACK's order (`pos`),
// the pivot of column j is the largest |a| among rows not yet chosen (ties to the smallest
// position, as idamax), and rows are written to their final places at the end. The pivot
// search reduces only the high 32 bits of the key over the group (one redux, or a shuffle
// butterfly for SUB < 32) and a ballot says whether one row holds that maximum; only when two
// rows share the high word somewhere in the warp (equal or nearly equal magnitudes) the exact
// search (low word, then the smallest position) runs. The pivot's value and position reach the group by
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

/// Stores a row held in registers, columns c0 .. NC-1 (c0 rounded down to a 16-byte piece),
/// to dst[0 .. NC) in shared memory: the pivot row's broadcast.
template <class T, int NC>
__device__ __forceinline__ void store_row(const T (&a)[NC], int c0, T* dst) {
    using V = typename Vec16<T>::type;
    constexpr int kV = static_cast<int>(sizeof(V) / sizeof(T));
#pragma unroll
    for (int c = c0 / kV * kV; c < NC; c += kV) {
        V v;
        T* e = reinterpret_cast<T*>(&v);
#pragma unroll
        for (int q = 0; q < kV; ++q) e[q] = a[c + q];
        *reinterpret_cast<V*>(&dst[c]) = v;
    }
}

using detail::cp_async;
using detail::cp_async_commit;
using detail::cp_async_wait_all;

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

template <class T, int NC, int SUB, int MAXT, int MINB, class Batch>
__global__ void __launch_bounds__(MAXT, MINB) lu_whole_kernel(Batch batch, int count) {
    static_assert(SUB >= 4 && SUB <= 32 && (SUB & (SUB - 1)) == 0 && NC <= SUB, "a lane per row");
    using V = typename Vec16<T>::type;
    constexpr int kV = static_cast<int>(sizeof(V) / sizeof(T));
    static_assert(NC % kV == 0, "rows are broadcast in 16-byte pieces");
    constexpr int kGroups = MAXT / SUB;
    constexpr int kPerWarp = 32 / SUB;
    __shared__ __align__(16) T stage[MAXT * NC];
    __shared__ __align__(16) T srow[2][kGroups][NC];

    const int lane = threadIdx.x & 31;
    const int group = threadIdx.x / SUB, t = threadIdx.x % SUB;
    const unsigned gbits = SUB == 32 ? kFullMask : ((1u << SUB) - 1u) << (lane / SUB * SUB);
    T* st = stage + group * SUB * NC;  // st[c * SUB + t] = A(t, c)
    const int stride = gridDim.x * kGroups;
    // A matrix's pointer, order and leading dimension (order 0: no matrix), read from the batch
    // two matrices ahead so that their loads are not waited for (kAhead), or just before its
    // copy is started. Ahead: 16 x 10000 23.4 against 24.5 us, vgetrf uniform:32 (5000) 48.4
    // against 51.1 us; but order 32 fixed, whose 96 registers then spill more, 116 against 111
    // us (H100, FP64, 2026-11-23, bench/results/2026-11-23-h100-lu-ahead*).
    constexpr bool kAhead = !Batch::kUniform || NC < 32;
    struct Entry {
        T* ptr;
        int n, ld;
    };
    auto peek = [&](long long bb) {
        if (bb >= count) return Entry{nullptr, 0, 0};
        const int i = static_cast<int>(bb);
        return Entry{batch.A[i], batch.order(i), batch.ld(i)};
    };
    auto fetch = [&](const Entry& e) {
        if (t < e.n)
            for (int c = 0; c < e.n; ++c) cp_async(st + c * SUB + t, e.ptr + t + static_cast<std::size_t>(c) * e.ld);
        cp_async_commit();
    };
    int b = blockIdx.x * kGroups + group;
    const int warp_first = blockIdx.x * kGroups + static_cast<int>(threadIdx.x / 32) * kPerWarp;
    Entry cur = peek(b);
    fetch(cur);
    Entry next = kAhead ? peek(b + 1LL * stride) : Entry{nullptr, 0, 0};
    T a[NC];
    for (int wb = warp_first; wb < count; wb += stride, b += stride) {
        const bool active = b < count;
        const int n = cur.n;
        cp_async_wait_all();
        __syncwarp();
#pragma unroll
        for (int c = 0; c < NC; ++c) a[c] = (t < n && c < n) ? st[c * SUB + t] : T(0);
        __syncwarp();
        Entry after{nullptr, 0, 0};
        if constexpr (kAhead) {
            fetch(next);
            after = peek(b + 2LL * stride);
        } else {
            next = peek(b + 1LL * stride);
            fetch(next);
        }

        // Columns to go through, the same for the whole warp (a group without a matrix too).
        int steps = n;
        if constexpr (Batch::kUniform)
            steps = batch.order(0);
        else if constexpr (SUB < 32)
            steps = static_cast<int>(__reduce_max_sync(kFullMask, n > 0 ? static_cast<unsigned>(n) : 0u));
        int pos = t;     // this row's position in LAPACK's order
        int my_piv = 0;  // lane j: ipiv[j]
        int linfo = 0;
#pragma unroll
        for (int j = 0; j < NC; ++j) {
            if (j >= steps) break;
            const int par = j & 1;
            const bool cand = t < n && pos >= j;
            const unsigned long long key = cand ? pivot_key(a[j]) : 0ull;
            const unsigned hi = static_cast<unsigned>(key >> 32);
            bool has, winner;
            int bp;
            T piv;
            if constexpr (SUB == 32) {
                // The group is the warp: the exact search by three reductions, the pivot from
                // the shared row.
                const unsigned hmax = __reduce_max_sync(kFullMask, hi);
                const unsigned lmax = __reduce_max_sync(kFullMask, hi == hmax ? static_cast<unsigned>(key) : 0u);
                const bool top = cand && hi == hmax && static_cast<unsigned>(key) == lmax;
                const unsigned pmin = __reduce_min_sync(kFullMask, top ? static_cast<unsigned>(pos) : kNoPos);
                winner = top && static_cast<unsigned>(pos) == pmin;
                has = pmin != kNoPos;
                bp = static_cast<int>(pmin);
                if (winner) {
                    store_row(a, j, srow[par][group]);
                }
                __syncwarp();
                piv = has ? srow[par][group][j] : T(0);
            } else {
                const unsigned hmax = group_max<SUB>(hi);
                unsigned win = __ballot_sync(kFullMask, cand && hi == hmax) & gbits;
                if (__any_sync(kFullMask, (win & (win - 1)) != 0)) {
                    // Two rows share the high word in some group: the exact search there.
                    const unsigned lmax = group_max<SUB>(cand && hi == hmax ? static_cast<unsigned>(key) : 0u);
                    const bool top = cand && hi == hmax && static_cast<unsigned>(key) == lmax;
                    const unsigned pmin = group_min<SUB>(top ? static_cast<unsigned>(pos) : kNoPos);
                    win = __ballot_sync(kFullMask, top && static_cast<unsigned>(pos) == pmin) & gbits;
                }
                // win == 0: this group has no column j (no matrix, or a smaller one).
                has = win != 0;
                const int wl = has ? __ffs(win) - 1 : lane;
                winner = has && lane == wl;
                bp = __shfl_sync(kFullMask, pos, wl);
                piv = __shfl_sync(kFullMask, a[j], wl);
                if (winner) {
                    store_row(a, j + 1, srow[par][group]);
                }
                __syncwarp();
            }
            if (has) {
                if (winner) {
                    pos = j;
                } else if (pos == j) {
                    pos = bp;
                }
                if (t == j) my_piv = bp + 1;
                if (piv == T(0) && linfo == 0) linfo = j + 1;
                if (t < n && pos > j) {
                    const T l = multiplier(a[j], piv);
                    a[j] = l;
#pragma unroll
                    for (int c = (j + 1) / kV * kV; c < NC; c += kV) {
                        const V v = *reinterpret_cast<const V*>(&srow[par][group][c]);
                        const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
                        for (int q = 0; q < kV; ++q)
                            if (c + q > j) a[c + q] -= l * e[q];
                    }
                }
            }
        }

        if (active) {
            T* Ab = cur.ptr;
            const int ld = cur.ld;
            if (t < n) {
#pragma unroll
                for (int c = 0; c < NC; ++c)
                    if (c < n) Ab[pos + static_cast<std::size_t>(c) * ld] = a[c];
                batch.pivots(b)[t] = my_piv;
            }
            if (t == 0) batch.info[b] = linfo;
        }
        cur = next;
        next = after;
    }
}

/// One instance: a grid of the blocks that fit on the device at once (each group then goes
/// through several matrices). The device's size is read once per process and instance.
template <class T, int NC, int SUB, int MAXT, int MINB, class Batch>
void launch_whole(cudaStream_t stream, const Batch& batch, int count) {
    static const int resident =
        detail::resident_blocks(lu_whole_kernel<T, NC, SUB, MAXT, MINB, Batch>, MAXT, "getrf (register kernel grid)");
    const int needed = detail::ceil_div(count, MAXT / SUB);
    lu_whole_kernel<T, NC, SUB, MAXT, MINB, Batch><<<needed < resident ? needed : resident, MAXT, 0, stream>>>(batch, count);
    detail::check_launch("getrf (register kernel)");
}

/// The instance for matrices of order <= nmax (<= 32), smallest first: order, lanes per matrix,
/// threads per block, blocks per SM for the register budget. (Two rows per lane, two matrices
/// of order 32 per warp, measured 3.3x slower at 32 and 1.7x at 16: a larger code, more
/// instructions per matrix, instruction-cache stalls; bench/results/2026-11-23-h100-blu-*.)
template <class T, class Batch>
void launch(cudaStream_t stream, int nmax, const Batch& batch, int count) {
    if (nmax <= 4) return launch_whole<T, 4, 4, 128, 1>(stream, batch, count);
    if (nmax <= 8) return launch_whole<T, 8, 8, 128, 1>(stream, batch, count);
    if (nmax <= 16) return launch_whole<T, 16, 16, 128, 1>(stream, batch, count);
    return launch_whole<T, 32, 32, 128, 5>(stream, batch, count);
}

}  // namespace starfact::batched::cuda::lu_small
