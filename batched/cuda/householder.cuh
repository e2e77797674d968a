// Householder building blocks shared by the fixed-size (geqrf.cu) and variable-size (vgeqrf.cu)
// batched QR kernels: one warp's norm, larfg and reflector application, and a thread block's
// factorization of a panel held in shared or global memory; and the entry through which vgeqrf
// hands geqrf.cu's one-pass small kernel a variable-size batch that fits it.
#pragma once

#include <cfloat>

#include "batched/cuda/kernels.hpp"
#include "batched/cuda/vbatched_kernels.hpp"

namespace starfact::batched::cuda::householder {

template <class T>
struct Safe;
template <>
struct Safe<double> {
    // LAPACK's larfg threshold: dlamch('S') / dlamch('E').
    static constexpr double min = DBL_MIN / (DBL_EPSILON / 2);
    // A plain sum of squares at least this large (and finite) lost nothing to underflow.
    static constexpr double ssq_low = DBL_MIN / (DBL_EPSILON * DBL_EPSILON);
    static constexpr double max = DBL_MAX;
};
template <>
struct Safe<float> {
    static constexpr float min = FLT_MIN / (FLT_EPSILON / 2);
    static constexpr float ssq_low = FLT_MIN / (FLT_EPSILON * FLT_EPSILON);
    static constexpr float max = FLT_MAX;
};

constexpr unsigned kFull = 0xffffffffu;

template <class T>
__device__ T warp_sum(T v) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(kFull, v, o);
    return v;
}

/// max that keeps a NaN once it has seen one (fmax would drop it, hiding the NaN from the norm).
template <class T>
__device__ T nan_max(T a, T b) {
    return (b > a || b != b) ? b : a;
}

template <class T>
__device__ T warp_nan_max(T v) {
    for (int o = 16; o > 0; o /= 2) v = nan_max(v, __shfl_xor_sync(kFull, v, o));
    return v;
}

/// ||col[from..to)||_2 by one warp: the plain sum of squares when it neither overflowed nor
/// came near underflow, else scaled by the largest entry; NaN when an entry is NaN.
template <class T>
__device__ T warp_norm(const T* col, int from, int to, int lane) {
    T s = 0;
    for (int i = from + lane; i < to; i += 32) s += col[i] * col[i];
    s = warp_sum(s);
    if (s >= Safe<T>::ssq_low && s <= Safe<T>::max) return sqrt(s);
    T scale = 0;
    for (int i = from + lane; i < to; i += 32) scale = nan_max(scale, fabs(col[i]));
    scale = warp_nan_max(scale);
    if (scale == 0) return 0;
    s = 0;
    for (int i = from + lane; i < to; i += 32) {
        const T t = col[i] / scale;
        s += t * t;
    }
    return scale * sqrt(warp_sum(s));
}

/// LAPACK's larfg on col[c..mp) by one warp: on return col[c] = beta, col[c+1..mp) = v (unit
/// first entry implied); returns tau (0, with the column untouched, when col[c+1..mp) is 0).
template <class T>
__device__ T warp_larfg(T* col, int c, int mp, int lane) {
    T xnorm = warp_norm(col, c + 1, mp, lane);
    if (xnorm == 0) return 0;
    T alpha = col[c];
    T beta = -copysign(hypot(alpha, xnorm), alpha);
    int knt = 0;
    if (fabs(beta) < Safe<T>::min) {
        // beta may be inaccurate: scale x up (at most 20 times, as LAPACK) and recompute.
        const T rsafmn = T(1) / Safe<T>::min;
        do {
            ++knt;
            for (int i = c + 1 + lane; i < mp; i += 32) col[i] *= rsafmn;
            beta *= rsafmn;
            alpha *= rsafmn;
        } while (fabs(beta) < Safe<T>::min && knt < 20);
        __syncwarp();
        xnorm = warp_norm(col, c + 1, mp, lane);
        beta = -copysign(hypot(alpha, xnorm), alpha);
    }
    const T tau = (beta - alpha) / beta;
    const T scal = T(1) / (alpha - beta);
    for (int i = c + 1 + lane; i < mp; i += 32) col[i] *= scal;
    for (int k = 0; k < knt; ++k) beta *= Safe<T>::min;
    __syncwarp();
    if (lane == 0) col[c] = beta;
    __syncwarp();
    return tau;
}

/// col <- (I - tau v v^T) col by one warp, v = [1; v[c+1..mp)], rows c..mp-1.
template <class T>
__device__ void warp_apply(const T* v, T tau, T* col, int c, int mp, int lane) {
    T s = 0;
    for (int i = c + 1 + lane; i < mp; i += 32) s += v[i] * col[i];
    s = tau * (warp_sum(s) + col[c]);
    __syncwarp();
    if (lane == 0) col[c] -= s;
    for (int i = c + 1 + lane; i < mp; i += 32) col[i] -= s * v[i];
    __syncwarp();
}

/// Reflector c (v = [1; P(c+1.., c)], tau) applied by one warp to the columns it owns,
/// first, first + step, ... < iw (at most kMaxOwned): their dot products and reductions run
/// side by side.
template <class T, int kMaxOwned>
__device__ void warp_apply_owned(const T* v, T tau, T* P, int ldp, int first, int step, int iw, int c, int mp,
                                 int lane) {
    T s[kMaxOwned];
#pragma unroll
    for (int q = 0; q < kMaxOwned; ++q) s[q] = 0;
    for (int i = c + 1 + lane; i < mp; i += 32) {
        const T vi = v[i];
#pragma unroll
        for (int q = 0; q < kMaxOwned; ++q)
            if (first + q * step < iw) s[q] += vi * P[i + static_cast<long long>(first + q * step) * ldp];
    }
    for (int o = 16; o > 0; o /= 2)
#pragma unroll
        for (int q = 0; q < kMaxOwned; ++q) s[q] += __shfl_xor_sync(kFull, s[q], o);
#pragma unroll
    for (int q = 0; q < kMaxOwned; ++q)
        if (first + q * step < iw) s[q] = tau * (s[q] + P[c + static_cast<long long>(first + q * step) * ldp]);
    __syncwarp();
    if (lane == 0)
#pragma unroll
        for (int q = 0; q < kMaxOwned; ++q)
            if (first + q * step < iw) P[c + static_cast<long long>(first + q * step) * ldp] -= s[q];
    for (int i = c + 1 + lane; i < mp; i += 32) {
        const T vi = v[i];
#pragma unroll
        for (int q = 0; q < kMaxOwned; ++q)
            if (first + q * step < iw) P[i + static_cast<long long>(first + q * step) * ldp] -= s[q] * vi;
    }
    __syncwarp();
}

/// Householder QR of the mp x iw panel P (leading dimension ldp) by the whole block; tau to
/// s_tau. Column c belongs to warp c % warps, which also computes its reflector: once a
/// reflector is published (the one barrier of a step), each warp applies it to its own
/// columns, and the owner of the next column can go on to that column's reflector at once.
/// Every warp owns at most kMaxOwned of the iw columns.
template <class T, int kMaxOwned>
__device__ void factor_panel(T* P, int ldp, int mp, int iw, T* s_tau) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    // x mod warps (non-negative) without an integer division per column when warps is a power
    // of two, as in every launch of this file's users (a uniform branch otherwise).
    const int wmask = warps - 1;
    const bool pow2 = (warps & wmask) == 0;
    const auto mod = [&](int x) { return pow2 ? (x & wmask) : ((x % warps) + warps) % warps; };
    for (int c = 0; c < iw; ++c) {
        if (warp == mod(c)) {
            const T t = warp_larfg(P + static_cast<long long>(c) * ldp, c, mp, lane);
            if (lane == 0) s_tau[c] = t;
        }
        __syncthreads();
        const T t = s_tau[c];
        if (t == 0) continue;  // H = I, as LAPACK's larf
        const int first = c + 1 + mod(warp - (c + 1));
        if (first < iw)
            warp_apply_owned<T, kMaxOwned>(P + static_cast<long long>(c) * ldp, t, P, ldp, first, warps, iw, c, mp,
                                           lane);
    }
    __syncthreads();
}

}  // namespace starfact::batched::cuda::householder

namespace starfact::batched::cuda {

/// vgeqrf of a batch whose matrices all have at most mmax <= 64 rows and nmax <= 32 columns
/// (any shape within), by geqrf.cu's one-pass small kernel reading each matrix's own m[b],
/// n[b], lda[b] (device arrays) and writing min(m[b], n[b]) tau to tau[b]; returns true. Other
/// batches: returns false and launches nothing. Needs no workspace.
template <class T>
bool vgeqrf_small(const Launch& launch, int mmax, int nmax, const int* m, const int* n, T* const* A, const int* lda,
                  T* const* tau, int count);

/// One step of vgeqrf's panels by geqrf.cu's register panel kernel, each matrix at its own
/// column block under the schedule (as vgeqrf's own panel kernel): the panel factored in place,
/// tau to tau[b], T (32 x 32, leading dimension 32) to Tws + 32 * 32 * b. rows bounds the step's
/// panel rows; returns false and launches nothing when it is over 512.
template <class T>
bool vgeqrf_reg_panel(const Launch& launch, int rows, const int* m, const int* n, const int* lda, T* const* A,
                      T* const* tau, T* Tws, Schedule s, int kmax, int step, int count);

}  // namespace starfact::batched::cuda
