// Block-wide triangular solves for the batched solves (getrs, potrs; not installed): one thread
// block per (matrix, group of right-hand sides), the right-hand sides in shared memory, the
// triangle read from global memory once per block. Blocks of 32 rows: the diagonal block by
// one warp with shuffles, the rest by every warp of the block, in the form that reads the
// triangle coalesced:
// - row form (the triangle stored with rows contiguous, rs == 1): right-looking, one thread
//   per row of the right-hand side, each loaded entry serving all R columns;
// - column form (cs == 1): left-looking, one warp per row, lanes along the row, a warp sum.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace starfact::batched::cuda::detail {

/// Element (i, j) of a triangular matrix at a[i * rs + j * cs]; rs == 1 or cs == 1.
template <class T>
struct TriView {
    const T* a;
    long long rs;
    long long cs;
    __device__ T operator()(int i, int j) const { return a[i * rs + j * cs]; }
};

template <class T>
__device__ inline T warp_sum(T v) {
#pragma unroll
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/// x <- M^{-1} x for the n x rc block x (leading dimension ldx, shared memory, rc <= R; its
/// columns rc..R-1 are computed on and ignored; ldx = block_ldx(n) with zero padding rows, see
/// there), M lower (forward substitution) or upper
/// (backward), with a unit or a stored diagonal (multiplied by its reciprocal). Called by every
/// thread of the block (blockDim.x a multiple of 32); synchronizes the block.
template <class T, int R>
__device__ void block_trsv(TriView<T> M, bool lower, bool unit, int n, T* x, int ldx) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
    const bool row_form = M.rs == 1;
    const int nblk = (n + 31) / 32;
    for (int bi = 0; bi < nblk; ++bi) {
        const int I = lower ? bi * 32 : (nblk - 1 - bi) * 32;
        const int kb = n - I < 32 ? n - I : 32;
        if (!row_form) {  // subtract the solved part from rows I .. I+kb-1 first
            const int k0 = lower ? 0 : I + kb, k1 = lower ? I : n;
            if (k1 > k0) {
                for (int s = I + warp; s < I + kb; s += nwarps) {
                    T acc[R];
#pragma unroll
                    for (int j = 0; j < R; ++j) acc[j] = T(0);
                    for (int k = k0 + lane; k < k1; k += 32) {
                        const T m = M(s, k);
#pragma unroll
                        for (int j = 0; j < R; ++j) acc[j] += m * x[k + j * ldx];
                    }
#pragma unroll
                    for (int j = 0; j < R; ++j) acc[j] = warp_sum(acc[j]);
                    if (lane == 0) {
#pragma unroll
                        for (int j = 0; j < R; ++j) x[s + j * ldx] -= acc[j];
                    }
                }
                __syncthreads();
            }
        }
        if (warp == 0) {  // the diagonal block, lane r holding row I + r
            const int r = lane;
            T xr[R];
#pragma unroll
            for (int j = 0; j < R; ++j) xr[j] = r < kb ? x[I + r + j * ldx] : T(0);
            // The reciprocals of the diagonal, off the substitution's dependency chain.
            const T dinv = (!unit && r < kb) ? T(1) / M(I + r, I + r) : T(1);
#pragma unroll
            for (int q = 0; q < 32; ++q) {
                const int k = lower ? q : 31 - q;
                if (k < kb) {
                    const bool tri = r < kb && (lower ? r > k : r < k);
                    const T m = tri ? M(I + r, I + k) : T(0);
                    const T dk = __shfl_sync(0xffffffffu, dinv, k);
#pragma unroll
                    for (int j = 0; j < R; ++j) {
                        const T xk = __shfl_sync(0xffffffffu, xr[j], k) * dk;
                        if (r == k)
                            xr[j] = xk;
                        else if (tri)
                            xr[j] -= m * xk;
                    }
                }
            }
            if (r < kb) {
#pragma unroll
                for (int j = 0; j < R; ++j) x[I + r + j * ldx] = xr[j];
            }
        }
        __syncthreads();
        if (row_form) {  // subtract block I's solution from the rows still to solve
            const int s0 = lower ? I + kb : 0, s1 = lower ? n : I;
            for (int s = s0 + tid; s < s1; s += blockDim.x) {
                T acc[R];
#pragma unroll
                for (int j = 0; j < R; ++j) acc[j] = x[s + j * ldx];
                if (kb == 32) {
#pragma unroll 8
                    for (int k = 0; k < 32; ++k) {
                        const T m = M(s, I + k);
#pragma unroll
                        for (int j = 0; j < R; ++j) acc[j] -= m * x[I + k + j * ldx];
                    }
                } else {
                    for (int k = 0; k < kb; ++k) {
                        const T m = M(s, I + k);
#pragma unroll
                        for (int j = 0; j < R; ++j) acc[j] -= m * x[I + k + j * ldx];
                    }
                }
#pragma unroll
                for (int j = 0; j < R; ++j) x[s + j * ldx] = acc[j];
            }
            __syncthreads();
        }
    }
}

/// Leading dimension of the right-hand sides in shared memory for order n: n rounded up to a
/// multiple of 32, so that every 32-row block of every column lies inside the buffer. ptxas
/// merges the loads of consecutive rows of a block into 16-byte loads issued before the
/// remainder count is tested (block_trsv's row form, kb < 32): with the columns n apart, the
/// last block of the last column was read past the buffer (H100 memcheck: potrs at n = 33, one
/// LDS.128 at x[32] of a 33-element buffer). The padding rows are zero and never written.
__host__ __device__ inline int block_ldx(int n) { return (n + 31) / 32 * 32; }

/// Bytes of shared memory of the R columns of order n.
template <class T, int R>
inline std::size_t block_shared_bytes(int n) {
    return static_cast<std::size_t>(R) * static_cast<std::size_t>(block_ldx(n)) * sizeof(T);
}

/// Loads columns c0 .. c0+rc-1 of B (n rows, ldb) into x (block_ldx(n) x R, leading dimension
/// block_ldx(n)), zeros in the padding rows and in the columns beyond rc; every thread; ends
/// with a block synchronization.
template <class T, int R>
__device__ void block_load(const T* B, int ldb, int n, int rc, T* x) {
    const int ldx = block_ldx(n);
    for (int e = threadIdx.x; e < R * ldx; e += blockDim.x) {
        const int i = e % ldx, j = e / ldx;
        x[e] = (j < rc && i < n) ? B[i + static_cast<long long>(j) * ldb] : T(0);
    }
    __syncthreads();
}

/// The reverse of block_load for the first rc columns; every thread.
template <class T, int R>
__device__ void block_store(const T* x, int n, int rc, T* B, int ldb) {
    const int ldx = block_ldx(n);
    for (int e = threadIdx.x; e < rc * n; e += blockDim.x) {
        const int i = e % n, j = e / n;
        B[i + static_cast<long long>(j) * ldb] = x[i + j * ldx];
    }
}

/// Warps per block of the block solves for order n: enough rows per thread to keep the
/// triangle's loads in flight, several blocks per SM at small orders.
inline int block_trsv_warps(int n) { return n <= 64 ? 2 : n <= 128 ? 4 : 8; }

}  // namespace starfact::batched::cuda::detail
