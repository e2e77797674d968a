// The whole-matrix register LU for matrices of order <= 32, shared by the fixed-size getrf
// (getrf.cu) and the variable-size vgetrf (vgetrf.cu) through a batch accessor (FixedBatch,
// VarBatch): one pass over memory, each matrix read once into registers and written once.
//
// Every matrix is held one row per lane: by a group of SUB lanes (4, 8 or 16) for orders up to
// 16 (lu_whole_kernel, several matrices per warp), by a whole warp for orders 17 to 32
// (lu_warp_kernel; in double, for batches larger than its grid, lu_half_kernel, which keeps
// half a row in registers at a time and the other half's L part in shared memory). Each group
// or warp goes through matrices b, b + stride, ... (the grid is the blocks that fit on the
// device at once); lu_whole_kernel copies the next matrix into shared memory (cp.async) while
// it factors the current one, the others load each straight into registers.
//
// Row interchanges are deferred: every row remembers its position in LAPACK's order (`pos`),
// the pivot of column j is the largest |a| among rows not yet chosen (ties to the smallest
// position, as idamax), and rows are written to their final places at the end. The pivot row
// reaches the other lanes through shared memory. Lane j keeps ipiv[j], written at the end with
// one store per lane.
#pragma once

#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cstddef>
#include <type_traits>

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

/// Stores a row held in registers, columns c0 .. last-1 (c0 rounded down to a 16-byte piece,
/// last a multiple of one), to dst[0 .. last) in shared memory: the pivot row's broadcast.
template <class T, int NC>
__device__ __forceinline__ void store_row(const T (&a)[NC], int c0, T* dst, int last = NC) {
    using V = typename Vec16<T>::type;
    constexpr int kV = static_cast<int>(sizeof(V) / sizeof(T));
#pragma unroll
    for (int c = c0 / kV * kV; c < NC; c += kV) {
        if (c >= last) break;
        V v;
        T* e = reinterpret_cast<T*>(&v);
#pragma unroll
        for (int q = 0; q < kV; ++q) e[q] = a[c + q];
        *reinterpret_cast<V*>(&dst[c]) = v;
    }
}

/// dst[0] = x, dst[1] = y (dst aligned to the pair) where p is set, as one predicated store.
__device__ __forceinline__ void store_pair_if(bool p, double x, double y, double* dst) {
    asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %0, 0;\n\t@q st.shared.v2.f64 [%1], {%2, %3};\n\t}\n" ::"r"(
                     p ? 1u : 0u),
                 "r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))), "d"(x), "d"(y)
                 : "memory");
}
__device__ __forceinline__ void store_pair_if(bool p, float x, float y, float* dst) {
    if (p) *reinterpret_cast<float2*>(dst) = make_float2(x, y);
}
/// store_row by the lanes whose p is set, as predicated stores in double (no branch, so that the
/// column step stays one basic block for the scheduler; ptxas merges pairs into 16-byte stores).
template <int NC>
__device__ __forceinline__ void store_row_if(bool p, const double (&a)[NC], int c0, double* dst, int last = NC) {
#pragma unroll
    for (int c = c0 / 2 * 2; c < NC; c += 2) {
        if (c >= last) break;
        store_pair_if(p, a[c], a[c + 1], dst + c);
    }
}
template <int NC>
__device__ __forceinline__ void store_row_if(bool p, const float (&a)[NC], int c0, float* dst, int last = NC) {
    if (p) store_row(a, c0, dst, last);
}

/// 1 / x in double without the slow path of the IEEE quotient: the hardware's approximation of
/// the high word (its low word set as CUDA's own reciprocal sets it) and the same three
/// corrections as CUDA's correctly rounded reciprocal, so the same bits wherever that one takes
/// its fast path, which covers the magnitudes [2^-960, 2^960] that pivot_reciprocal passes. In
/// float the IEEE quotient.
__device__ __forceinline__ double rcp_fast(double x) {
    double approx;
    asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(approx) : "d"(x));
    const double r0 = __hiloint2double(__double2hiint(approx), __double2hiint(x) + 0x300402);
    double e = fma(-x, r0, 1.0);
    e = fma(e, e, e);
    const double r1 = fma(r0, e, r0);
    return fma(r1, fma(-x, r1, 1.0), r1);
}
__device__ __forceinline__ float rcp_fast(float x) { return 1.0f / x; }

/// The multiplier of a row under the pivot x is (a * rp) * sc, rp and sc formed by every row
/// for its own entry while the pivot is searched for (off the column's critical path): rp is the
/// reciprocal of x scaled by sc = 2^64 (|x| < 2^-960) or 2^-64 (|x| > 2^960), 2^32 and 2^-32
/// beyond 2^-+100 in float, so that neither the reciprocal nor the quotient overflows or
/// flushes where a / x would not. A zero pivot scales nothing (rp = sc = 1: the column stays, as
/// in LAPACK), an infinite one gives 0 (sc = 0), a NaN NaN.
template <class T>
__device__ __forceinline__ void pivot_reciprocal(T x, T& rp, T& sc) {
    constexpr bool kDouble = sizeof(T) == 8;
    const T small = kDouble ? T(0x1p-960) : T(0x1p-100), large = kDouble ? T(0x1p960) : T(0x1p100);
    const T up = kDouble ? T(0x1p64) : T(0x1p32), down = kDouble ? T(0x1p-64) : T(0x1p-32);
    const T ax = fabs(x);
    const bool inf = isinf(x);
    sc = ax < small ? up : (ax > large ? down : T(1));
    rp = rcp_fast(inf ? T(1) : x * sc);  // computed whatever x is: no branch around it
    if (inf) sc = T(0);
    if (x == T(0)) rp = sc = T(1);
}

/// Two values side by side in shared memory (16 or 8 bytes): the pivot's rp and sc.
template <class T>
struct Pair2;
template <>
struct Pair2<double> {
    using type = double2;
};
template <>
struct Pair2<float> {
    using type = float2;
};

/// a[c] -= l * prow[c] for the columns c >= first of a row, the pivot row `prow` (16-byte
/// aligned, in shared memory) read in 16-byte pieces.
template <class T, int NC>
__device__ __forceinline__ void subtract_row(T (&a)[NC], int first, T l, const T* prow, int last = NC) {
    using V = typename Vec16<T>::type;
    constexpr int kV = static_cast<int>(sizeof(V) / sizeof(T));
    static_assert(NC % kV == 0, "rows are broadcast in 16-byte pieces");
#pragma unroll
    for (int c = first / kV * kV; c < NC; c += kV) {
        if (c >= last) break;
        const V v = *reinterpret_cast<const V*>(&prow[c]);
        const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
        for (int q = 0; q < kV; ++q)
            if (c + q >= first) a[c + q] = fma(-l, e[q], a[c + q]);
    }
}

/// Column j of a row under the pivot piv: a[j] becomes the row's multiplier and the entries on
/// its right lose it times the pivot row `prow`.
template <class T, int NC>
__device__ __forceinline__ void eliminate(T (&a)[NC], int j, T piv, const T* prow) {
    const T l = multiplier(a[j], piv);
    a[j] = l;
    subtract_row(a, j + 1, l, prow);
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

/// Max and min of x over the aligned group of SUB (< 32) lanes (the whole warp takes part).
template <int SUB>
__device__ __forceinline__ unsigned group_max(unsigned x) {
#pragma unroll
    for (int off = SUB / 2; off > 0; off /= 2) x = max(x, __shfl_xor_sync(kFullMask, x, off));
    return x;
}
template <int SUB>
__device__ __forceinline__ unsigned group_min(unsigned x) {
#pragma unroll
    for (int off = SUB / 2; off > 0; off /= 2) x = min(x, __shfl_xor_sync(kFullMask, x, off));
    return x;
}

// ---- Orders up to 16: a group of lanes per matrix ------------------------------------------

template <class T, int NC, int SUB, int MAXT, int MINB, class Batch>
__global__ void __launch_bounds__(MAXT, MINB) lu_whole_kernel(Batch batch, int count) {
    static_assert(SUB >= 4 && SUB < 32 && (SUB & (SUB - 1)) == 0 && NC <= SUB, "a lane per row");
    constexpr int kGroups = MAXT / SUB;
    constexpr int kPerWarp = 32 / SUB;
    __shared__ __align__(16) T stage[MAXT * NC];
    __shared__ __align__(16) T srow[2][kGroups][NC];

    const int lane = threadIdx.x & 31;
    const int group = threadIdx.x / SUB, t = threadIdx.x % SUB;
    const unsigned gbits = ((1u << SUB) - 1u) << (lane / SUB * SUB);
    T* st = stage + group * SUB * NC;  // st[c * SUB + t] = A(t, c)
    const int stride = gridDim.x * kGroups;
    // A matrix's pointer, order and leading dimension (order 0: no matrix), read from the batch
    // two matrices ahead so that their loads are not waited for.
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
    Entry next = peek(b + 1LL * stride);
    T a[NC];
    for (int wb = warp_first; wb < count; wb += stride, b += stride) {
        const bool active = b < count;
        const int n = cur.n;
        cp_async_wait_all();
        __syncwarp();
#pragma unroll
        for (int c = 0; c < NC; ++c) a[c] = (t < n && c < n) ? st[c * SUB + t] : T(0);
        __syncwarp();
        fetch(next);
        const Entry after = peek(b + 2LL * stride);

        // Columns to go through, the same for the whole warp (a group without a matrix too).
        const int steps = Batch::kUniform
                              ? batch.order(0)
                              : static_cast<int>(__reduce_max_sync(kFullMask, n > 0 ? static_cast<unsigned>(n) : 0u));
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
            {
                // A reduction of the high words, a ballot for the rows holding the maximum.
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
                if (t < n && pos > j) eliminate(a, j, piv, srow[par][group]);
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
/// through several matrices).
template <class T, int NC, int SUB, int MAXT, int MINB, class Batch>
void launch_whole(cudaStream_t stream, const Batch& batch, int count) {
    const int resident =
        detail::resident_blocks(lu_whole_kernel<T, NC, SUB, MAXT, MINB, Batch>, MAXT, "getrf (register kernel grid)");
    const int needed = detail::ceil_div(count, MAXT / SUB);
    lu_whole_kernel<T, NC, SUB, MAXT, MINB, Batch><<<needed < resident ? needed : resident, MAXT, 0, stream>>>(batch, count);
    detail::check_launch("getrf (register kernel)");
}

// ---- Panels of the blocked paths (getrf.cu, vgetrf.cu) ----------------------------------------

/// Max of a 64-bit key over the lanes of `mask` (two reductions).
__device__ inline unsigned long long key_max(unsigned mask, unsigned long long key) {
    const unsigned hi = __reduce_max_sync(mask, static_cast<unsigned>(key >> 32));
    const unsigned lo =
        __reduce_max_sync(mask, static_cast<unsigned>(key >> 32) == hi ? static_cast<unsigned>(key) : 0u);
    return (static_cast<unsigned long long>(hi) << 32) | lo;
}

/// The register panel of the blocked LU, for one matrix per block of blockDim.x threads (a
/// multiple of 32, <= MAXT): thread t holds row t of the panel (its m rows and w <= NC columns,
/// from the panel's top-left corner p, leading dimension ld). The panel is factored with the
/// interchanges deferred (every row keeps its position in LAPACK's order, ties to the smallest),
/// the pivot searched per warp and then over the warps' candidates, one block barrier per column,
/// and written back with its rows in their final places. The Panel policy says whether matrix b
/// has a panel (`active`) and where it is (`origin`, `ld`, `rows`, `width`, `first`: its first
/// row and column in the matrix; a fixed-size policy answers from the kernel's parameters, so
/// that they take no registers), and takes the pivots (`pivot`, 1-based, global rows), the first
/// zero pivot's column (`fail`) and, from every thread, its row's final position (`placed`: the
/// interchanges the caller applies to the other columns).
template <class T, int NC, int MAXT, class Panel>
__device__ __forceinline__ void register_panel(const Panel& pn) {
    constexpr int kSlots = MAXT / 32;
    __shared__ __align__(16) T srow[2][kSlots][NC];
    __shared__ unsigned long long skey[2][kSlots];
    __shared__ int spos[2][kSlots];

    const int b = blockIdx.x;
    if (!pn.active(b)) return;  // uniform over the block
    T* const p = pn.origin(b);
    const int ld = pn.ld(b), m = pn.rows(b), w = pn.width(b), j0 = pn.first(b);
    const int t = threadIdx.x, lane = t & 31, slot = t / 32;
    T a[NC];
#pragma unroll
    for (int c = 0; c < NC; ++c) a[c] = (t < m && c < w) ? p[t + static_cast<std::size_t>(c) * ld] : T(0);
    int pos = t;
    int linfo = 0;
#pragma unroll
    for (int j = 0; j < NC; ++j) {
        if (j >= w) break;
        const int par = j & 1;
        const bool cand = t < m && pos >= j;
        const unsigned long long key = cand ? pivot_key(a[j]) : 0ull;
        const unsigned long long kmax = key_max(kFullMask, key);
        const bool top = cand && key == kmax;
        const unsigned ppos = __reduce_min_sync(kFullMask, top ? static_cast<unsigned>(pos) : kNoPos);
        const bool winner = top && static_cast<unsigned>(pos) == ppos;
        if (winner || (kmax == 0ull && lane == 0)) {  // a warp without candidates says so
            skey[par][slot] = kmax;
            spos[par][slot] = winner ? pos : INT_MAX;
        }
        if (winner) {
            store_row(a, j, srow[par][slot]);
        }
        __syncthreads();
        // Every warp reduces the warps' candidates at once, one per lane.
        const bool has = lane < static_cast<int>(blockDim.x / 32);
        const unsigned long long k = has ? skey[par][lane] : 0ull;
        const unsigned long long kbest = key_max(kFullMask, k);
        const bool best = has && k == kbest;
        const unsigned pbest = __reduce_min_sync(kFullMask, best ? static_cast<unsigned>(spos[par][lane]) : kNoPos);
        const int bs = __ffs(__ballot_sync(kFullMask, best && static_cast<unsigned>(spos[par][lane]) == pbest)) - 1;
        const int bp = static_cast<int>(pbest);  // the winning slot and the pivot's position
        const T piv = srow[par][bs][j];
        if (winner && bs == slot) {
            pos = j;
        } else if (pos == j) {
            pos = bp;
        }
        if (t == 0) pn.pivot(b, j0 + j, j0 + bp + 1);
        if (piv == T(0) && linfo == 0) linfo = j0 + j + 1;
        if (t < m && pos > j) eliminate(a, j, piv, srow[par][bs]);
    }

    if (t < m) {
#pragma unroll
        for (int c = 0; c < NC; ++c)
            if (c < w) p[pos + static_cast<std::size_t>(c) * ld] = a[c];
    }
    if (t == 0 && linfo != 0) pn.fail(b, linfo);
    pn.placed(b, t, pos, m, w, j0);
}

// ---- Orders 17 to 32: a warp per matrix --------------------------------------------------------

/// The pivot search of one column over a warp, exact: the largest high word of the key, then
/// the largest low word among the rows holding it, then the smallest position among the rows
/// holding both (ties as idamax). `between` is independent work the caller places where the
/// first reduction is waited for. Returns the winner's position (kNoPos if no row is a
/// candidate); winner says whether this lane holds it. (Folding 31 - pos into the low word's
/// five lowest bits would save the third reduction, slightly faster, but counts magnitudes 32
/// ulps apart as tied, so that rounded near-ties would pick other pivots than LAPACK's: the
/// exact search stays (the tie cases of tests/test_vbatched_lu_small_cuda.cc hold it bitwise).)
template <class Between>
__device__ __forceinline__ int warp_pivot(bool cand, unsigned long long key, int pos, bool& winner,
                                          Between&& between) {
    const unsigned hi = static_cast<unsigned>(key >> 32), lo = static_cast<unsigned>(key);
    const unsigned hmax = __reduce_max_sync(kFullMask, hi);
    between();
    const unsigned lmax = __reduce_max_sync(kFullMask, hi == hmax ? lo : 0u);
    const bool top = cand && hi == hmax && lo == lmax;
    const unsigned pmin = __reduce_min_sync(kFullMask, top ? static_cast<unsigned>(pos) : kNoPos);
    winner = top && static_cast<unsigned>(pos) == pmin;
    return static_cast<int>(pmin);
}

/// Column jg of a matrix held one row per lane in x, its W columns (W = 32: the whole row;
/// W = 16: a half, x[jj] being column jg), as one basic block (no branch for the scheduler to
/// stop at): every row forms its reciprocal (pivot_reciprocal) while the pivot is searched for
/// (warp_pivot); the winner stores its row from column jj and its (rp, sc) by predicated stores
/// to `row` (W + one 16-byte piece); every row then takes its multiplier as a product and
/// updates column jj + 1 first (the next search's input, whose key goes to `key`) and the rest
/// of its row with plain fused multiply-adds. Rows that are not updated (the pivot rows, rows
/// past n) take the multiplier 0, so their entries stay; they turn NaN where the pivot row holds
/// an infinity or a NaN, whose matrix's factors are not specified beyond its pivots and info.
/// With last < W (a panel of lu_half_kernel) only columns up to last - 1 are stored and updated.
template <class T, int W>
__device__ __forceinline__ void warp_column_step(T (&x)[W], int jj, int jg, int n, int t, int& pos, int& my_piv,
                                                 int& linfo, unsigned long long& key, T* row, int last = W) {
    using P = typename Pair2<T>::type;
    const bool cand = t < n && pos >= jg;
    bool winner;
    T rp, sc;
    const int bp = warp_pivot(cand, cand ? key : 0ull, pos, winner, [&] { pivot_reciprocal(x[jj], rp, sc); });
    store_row_if(winner, x, jj, row, last);
    store_pair_if(winner, rp, sc, row + W);
    __syncwarp();
    const P pr = *reinterpret_cast<const P*>(row + W);
    pos = winner ? jg : (pos == jg ? bp : pos);
    my_piv = t == jg ? bp + 1 : my_piv;
    linfo = row[jj] == T(0) && linfo == 0 ? jg + 1 : linfo;
    const bool upd = t < n && pos > jg;
    const T l = upd ? x[jj] * pr.x * pr.y : T(0);
    x[jj] = upd ? l : x[jj];
    if (jj + 1 < last) {
        x[jj + 1] = fma(-l, row[jj + 1], x[jj + 1]);
        key = pivot_key(x[jj + 1]);
    }
    subtract_row(x, jj + 2, l, row, last);
}

/// One warp per matrix, lane t holding row t, a column step at a time (warp_column_step). That
/// step is faster at orders 24 and 32 than lu_whole_kernel's (the reciprocal after the
/// broadcast, a branch around each row's update); docs/batched.md, "Fixed sizes against the
/// vendor libraries".
template <class T, int NC, int MAXT, int MINB, class Batch>
__global__ void __launch_bounds__(MAXT, MINB) lu_warp_kernel(Batch batch, int count) {
    static_assert(NC <= 32 && MAXT % 32 == 0, "a lane per row");
    constexpr int kV = static_cast<int>(sizeof(typename Vec16<T>::type) / sizeof(T));
    constexpr int kWarps = MAXT / 32;
    __shared__ __align__(16) T srow[2][kWarps][NC + kV];  // the pivot row, then its rp and sc

    const int t = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int stride = gridDim.x * kWarps;
    struct Entry {
        T* ptr;
        int n, ld;
    };
    auto peek = [&](long long bb) {
        if (bb >= count) return Entry{nullptr, 0, 0};
        const int i = static_cast<int>(bb);
        return Entry{batch.A[i], batch.order(i), batch.ld(i)};
    };
    int b = blockIdx.x * kWarps + warp;
    Entry cur = peek(b);
    T a[NC];
    for (; b < count; b += stride) {
        // The previous matrix's last pivot row may sit in the buffer this one's first column
        // writes (n odd): every lane is done reading it.
        __syncwarp();
        const int n = Batch::kUniform ? batch.order(0) : cur.n;
        // Straight from global memory into registers: the other warps cover the loads' latency
        // (a copy of the next matrix into shared memory by cp.async, as lu_whole_kernel does,
        // measured slower here, at orders 24 and 32).
#pragma unroll
        for (int c = 0; c < NC; ++c)
            a[c] = t < n && c < n ? cur.ptr[t + static_cast<std::size_t>(c) * cur.ld] : T(0);
        const Entry next = peek(b + 1LL * stride);

        int pos = t;     // this row's position in LAPACK's order
        int my_piv = 0;  // lane j: ipiv[j]
        int linfo = 0;
        unsigned long long key = pivot_key(a[0]);  // column j's, formed once a[j] is updated
#pragma unroll
        for (int j = 0; j < NC; ++j) {
            if (j >= n) break;
            warp_column_step(a, j, j, n, t, pos, my_piv, linfo, key, srow[j & 1][warp]);
        }

        if (t < n) {
#pragma unroll
            for (int c = 0; c < NC; ++c)
                if (c < n) cur.ptr[pos + static_cast<std::size_t>(c) * cur.ld] = a[c];
            batch.pivots(b)[t] = my_piv;
        }
        if (t == 0) batch.info[b] = linfo;
        cur = next;
    }
}

// ---- Orders 17 to 32 in double, many matrices: half a row in registers -----------------------

/// The rank-4 update of lu_half_kernel: columns e .. 15 of this lane's half row x lose the
/// contributions of the pivot rows at positions k .. k + 3. Those rows store their columns
/// e .. 15, as they are, and their multipliers of columns k .. k + 3 (la, lb) to `rows` (4 rows
/// of 20 doubles, the same store instructions for the four lanes); every row then subtracts
/// w V, V the stored rows and w = l L^-1: l its multipliers (0 where it is not updated: a
/// pivot row at or above k + j, a row past n), L the pivot rows' unit lower triangle. That is
/// the update by the four rows of U without forming them (forming them in every row, which
/// keeps lu_warp_kernel's bits, needs more than 64 registers).
constexpr int kRank4Row = 16 + 4;  ///< a pivot row in rank4_update: 16 entries, then 4 multipliers

__device__ __forceinline__ void rank4_update(double (&x)[16], int e, int k, int pos, bool live, double2 la, double2 lb,
                                             double* rows) {
    constexpr int H = 16, QS = kRank4Row;
    const int p = pos - k;  // where this row is pivot row k + p
    const bool piv = p >= 0 && p < 4;
    double* dst = rows + (piv ? p : 0) * QS;
    store_row_if(piv, x, e, dst);
    store_pair_if(piv, la.x, la.y, dst + H);
    store_pair_if(piv, lb.x, lb.y, dst + H + 2);
    __syncwarp();
    // L's entries below the diagonal: mrj = the multiplier of pivot row k + r in column k + j.
    const double m10 = rows[QS + H], m20 = rows[2 * QS + H], m21 = rows[2 * QS + H + 1];
    const double m30 = rows[3 * QS + H], m31 = rows[3 * QS + H + 1], m32 = rows[3 * QS + H + 2];
    const double l0 = live && pos > k ? la.x : 0.0, l1 = live && pos > k + 1 ? la.y : 0.0;
    const double l2 = live && pos > k + 2 ? lb.x : 0.0, l3 = live && pos > k + 3 ? lb.y : 0.0;
    const double w3 = l3, w2 = fma(-w3, m32, l2), w1 = fma(-w3, m31, fma(-w2, m21, l1));
    const double w0 = fma(-w3, m30, fma(-w2, m20, fma(-w1, m10, l0)));
#pragma unroll
    for (int c = e; c < H; c += 2) {
        const double2 v0 = *reinterpret_cast<const double2*>(rows + c);
        const double2 v1 = *reinterpret_cast<const double2*>(rows + QS + c);
        const double2 v2 = *reinterpret_cast<const double2*>(rows + 2 * QS + c);
        const double2 v3 = *reinterpret_cast<const double2*>(rows + 3 * QS + c);
        x[c] = fma(-w3, v3.x, fma(-w2, v2.x, fma(-w1, v1.x, fma(-w0, v0.x, x[c]))));
        x[c + 1] = fma(-w3, v3.y, fma(-w2, v2.y, fma(-w1, v1.y, fma(-w0, v0.y, x[c + 1]))));
    }
}

/// lu_warp_kernel for double with only half a row in registers at a time (64 registers: 8 warps
/// per scheduler against 5), for batches larger than the warp kernel holds at once:
/// - columns 0-15 factored in panels of 4: the column steps of a panel (warp_column_step)
///   update the panel's own columns only, so that each pivot row is broadcast at most 4 wide;
///   rank4_update then applies the panel's 4 pivots to the half's columns on its right;
/// - their L part to shared memory (each lane its row), columns 16-31 loaded, the 16 pivots
///   applied to them by rank4_update four at a time;
/// - columns 16-31 factored as columns 0-15; the L part written back from shared memory.
/// The rank-4 updates differ from lu_warp_kernel's column-by-column updates in rounding only: on
/// 10000 random matrices the same pivots and factors within 8e-14 of lu_warp_kernel's, relative
/// to the largest entry; exact ties that the warp kernel's arithmetic keeps exact may resolve
/// otherwise. In double at order 32 it is faster (docs/batched.md, "Fixed sizes against the
/// vendor libraries") than rank-4 updates of the right half only, than the pivots applied to it in pairs (the warp kernel's
/// bits, but its steps are then the main stall) and than lu_warp_kernel; slower than
/// lu_warp_kernel for less than one round of the grid, hence launch()'s threshold.
template <int MAXT, int MINB, class Batch>
__global__ void __launch_bounds__(MAXT, MINB) lu_half_kernel(Batch batch, int count) {
    constexpr int H = 16, LS = H + 2;  // a lane's row of the L part: 144 bytes, no bank conflicts
    constexpr int kWarps = MAXT / 32;
    __shared__ __align__(16) double srow[2][kWarps][H + 2];           // a pivot row, then its rp and sc
    __shared__ __align__(16) double squad[2][kWarps][4 * kRank4Row];  // rank4_update's four pivot rows
    __shared__ __align__(16) double sl[kWarps][32 * LS];              // the L part, a row per lane

    const int t = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int stride = gridDim.x * kWarps;
    double* const myl = sl[warp] + t * LS;
    for (int b = blockIdx.x * kWarps + warp; b < count; b += stride) {
        __syncwarp();  // the previous matrix's last pivot row is read (its buffer comes again)
        double* const A = batch.A[b];
        const int n = batch.order(b), ld = batch.ld(b);
        double x[H];
#pragma unroll
        for (int c = 0; c < H; ++c) x[c] = t < n && c < n ? A[t + static_cast<std::size_t>(c) * ld] : 0.0;
        int pos = t, my_piv = 0, linfo = 0;
        unsigned long long key = pivot_key(x[0]);
        // The two halves share the factorization's code (not unrolled: a smaller kernel, fewer
        // instruction-cache misses, measured faster than the loop unrolled).
#pragma unroll 1
        for (int h = 0; h < 2; ++h) {
            const int j0 = h * H;
#pragma unroll
            for (int j = 0; j < H; ++j) {
                if (j0 + j >= n) break;
                const int e = (j / 4 + 1) * 4;  // the panel of 4 columns ends at e
                warp_column_step(x, j, j0 + j, n, t, pos, my_piv, linfo, key, srow[j & 1][warp], e);
                if (j + 1 == e && e < H) {
                    if (j0 + e >= n) break;
                    const double2 la = make_double2(x[e - 4], x[e - 3]), lb = make_double2(x[e - 2], x[e - 1]);
                    rank4_update(x, e, j0 + e - 4, pos, t < n, la, lb, squad[(j / 4) & 1][warp]);
                    key = pivot_key(x[e]);
                }
            }
            if (h == 1 || n <= H) break;  // uniform over the warp
#pragma unroll
            for (int c = 0; c < H; c += 2) *reinterpret_cast<double2*>(myl + c) = make_double2(x[c], x[c + 1]);
#pragma unroll
            for (int c = 0; c < H; ++c) x[c] = t < n && H + c < n ? A[t + static_cast<std::size_t>(H + c) * ld] : 0.0;
#pragma unroll
            for (int k = 0; k < H; k += 4) {
                const double2 la = *reinterpret_cast<const double2*>(myl + k);  // this row's l_k .. l_k+3
                const double2 lb = *reinterpret_cast<const double2*>(myl + k + 2);
                rank4_update(x, 0, k, pos, t < n, la, lb, squad[(k / 4) & 1][warp]);
            }
            key = pivot_key(x[0]);
        }
        if (t < n) {
            if (n > H) {
#pragma unroll
                for (int c = 0; c < H; c += 2) {
                    const double2 v = *reinterpret_cast<const double2*>(myl + c);
                    A[pos + static_cast<std::size_t>(c) * ld] = v.x;
                    A[pos + static_cast<std::size_t>(c + 1) * ld] = v.y;
                }
#pragma unroll
                for (int c = 0; c < H; ++c)
                    if (H + c < n) A[pos + static_cast<std::size_t>(H + c) * ld] = x[c];
            } else {
#pragma unroll
                for (int c = 0; c < H; ++c)
                    if (c < n) A[pos + static_cast<std::size_t>(c) * ld] = x[c];
            }
        }
        if (t < n) batch.pivots(b)[t] = my_piv;
        if (t == 0) batch.info[b] = linfo;
    }
}

/// The warp kernel's grid: the blocks that fit on the device at once, or fewer for a small batch.
template <class T, int MAXT, int MINB, class Batch>
void launch_warp(cudaStream_t stream, const Batch& batch, int count) {
    const int resident =
        detail::resident_blocks(lu_warp_kernel<T, 32, MAXT, MINB, Batch>, MAXT, "getrf (warp kernel grid)");
    const int needed = detail::ceil_div(count, MAXT / 32);
    lu_warp_kernel<T, 32, MAXT, MINB, Batch><<<needed < resident ? needed : resident, MAXT, 0, stream>>>(batch, count);
    detail::check_launch("getrf (warp kernel)");
}

/// The half kernel's grid: the blocks that fit on the device at once, or fewer.
template <int MAXT, int MINB, class Batch>
void launch_half(cudaStream_t stream, const Batch& batch, int count) {
    const int resident =
        detail::resident_blocks(lu_half_kernel<MAXT, MINB, Batch>, MAXT, "getrf (half kernel grid)");
    const int needed = detail::ceil_div(count, MAXT / 32);
    lu_half_kernel<MAXT, MINB, Batch><<<needed < resident ? needed : resident, MAXT, 0, stream>>>(batch, count);
    detail::check_launch("getrf (half kernel)");
}

/// The instance for matrices of order <= nmax (<= 32), smallest first: order, lanes per matrix,
/// threads per block, blocks per SM for the register budget. (Two rows per lane, two matrices
/// of order 32 per warp, is several times slower at 32 and 16: a larger code, more instructions
/// per matrix, instruction-cache stalls. Two matrices per warp with a row of each per lane, 168
/// registers, is slower too, also with the warp kernel's branch-free steps; docs/batched.md,
/// "Decisions, and what was tried and dropped".)
template <class T, class Batch>
void launch(cudaStream_t stream, int nmax, const Batch& batch, int count) {
    if (nmax <= 4) return launch_whole<T, 4, 4, 128, 1>(stream, batch, count);
    if (nmax <= 8) return launch_whole<T, 8, 8, 128, 1>(stream, batch, count);
    if (nmax <= 16) return launch_whole<T, 16, 16, 128, 1>(stream, batch, count);
    if constexpr (std::is_same_v<T, double>) {
        // More matrices than the warp kernel's grid holds at once (one per warp): the half
        // kernel, whose 60% more warps per SM pay for its longer chain per matrix. (Below one
        // round the warp kernel is faster; at exactly one round the half kernel already is:
        // the crossover lies between, and was not measured finer.)
        const int warp_slots =
            detail::resident_blocks(lu_warp_kernel<T, 32, 128, 5, Batch>, 128, "getrf (warp kernel grid)") * 4;
        if (count > warp_slots) return launch_half<128, 8>(stream, batch, count);
    }
    return launch_warp<T, 128, 5>(stream, batch, count);
}

}  // namespace starfact::batched::cuda::lu_small
