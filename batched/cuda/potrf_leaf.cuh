// The register Cholesky of one small diagonal block by a group of lanes (not installed): the
// core of potrf.cu's register kernel (orders up to 32, whole matrices) and of vpotrf.cu's
// diagonal-block kernel (each matrix's current 32 x 32 block).
#pragma once

#include <cuda_runtime.h>

namespace starfact::batched::cuda::detail {

/// Factors the nn x nn lower block L L^T = A (nn <= NB) at a, element (i, j) of the lower view at
/// a[i + j * ld] (a[j + i * ld] when trans: upper storage holding L^T), in place, by the P lanes
/// of `group` (lane r holds row r in registers; s: NB * (NB + 1) elements of shared memory, col:
/// 2 * P, both the group's own). Only the lower triangle is read and written; nn = 0 reads and
/// writes nothing (a may be null). kVar: the lanes stop after column nn or the first failing
/// pivot (the whole group alike), else every group runs NB steps (on the identity outside nn).
/// Returns j + 1 for the first pivot j that is not positive (or NaN: LAPACK's test), else 0; the
/// columns before it are final.
template <class T, int NB, int P, bool kVar>
__device__ __forceinline__ int leaf_factor(T* a, int ld, bool trans, int nn, int r, unsigned group, T* s, T* col) {
    constexpr int LDS = NB + 1;
    // Lane r reads stored column o at row r: coalesced in both orientations. Every load of a
    // lane is issued before any is used (unrolled, into registers), so their latencies overlap.
    T rA[NB];
    if (!trans) {
#pragma unroll
        for (int j = 0; j < NB; ++j) rA[j] = (r < nn && j < nn && j <= r) ? a[r + j * ld] : T(r == j ? 1 : 0);
    } else {  // stored column o holds row o of the lower view: transpose through shared memory
#pragma unroll
        for (int o = 0; o < NB; ++o)
            if (r < nn && o < nn && r <= o) rA[o] = a[r + o * ld];
#pragma unroll
        for (int o = 0; o < NB; ++o)
            if (r < nn && o < nn && r <= o) s[o + r * LDS] = rA[o];
        __syncwarp(group);
#pragma unroll
        for (int j = 0; j < NB; ++j) rA[j] = (r < nn && j < nn && j <= r) ? s[r + j * LDS] : T(r == j ? 1 : 0);
    }

    bool alive = true;
    int fail = 0;
#pragma unroll
    for (int j = 0; j < NB; ++j) {
        if constexpr (kVar) {
            if (j >= nn || !alive) break;  // uniform over the group
        }
        T* buf = col + (j & 1) * P;  // two buffers: step j+1 writes while no one reads step j's
        if (r >= j && r < NB) buf[r] = rA[j];
        __syncwarp(group);
        const T d = buf[j];
        if (alive && !(d > T(0))) {  // not positive, or NaN: LAPACK's test
            alive = false;
            fail = j + 1;
        }
        if (alive && r >= j && r < nn) {
            const T rinv = T(1) / sqrt(d);
            const T t = rA[j] * rinv * rinv;
#pragma unroll
            for (int k = j + 1; k < NB; ++k)
                if (k <= r) rA[k] -= t * buf[k];
            rA[j] *= rinv;
        }
    }

    if (!trans) {
#pragma unroll
        for (int j = 0; j < NB; ++j)
            if (r < nn && j < nn && j <= r) a[r + j * ld] = rA[j];
    } else {
        __syncwarp(group);  // every lane has read s above
#pragma unroll
        for (int j = 0; j < NB; ++j)
            if (r < nn && j < nn && j <= r) s[r + j * LDS] = rA[j];
        __syncwarp(group);
#pragma unroll
        for (int o = 0; o < NB; ++o)
            if (r < nn && o < nn && r <= o) a[r + o * ld] = s[o + r * LDS];
    }
    return fail;
}

}  // namespace starfact::batched::cuda::detail
