// Variable-size batched Householder QR: vgeqrf and the least-squares solve vgeqrs on
// arrays of device matrices of different shapes m[b] x n[b], with the SSDE and DSSE schedules
// (vbatched_kernels.hpp), counted on k = min(m, n) in steps of kVBlock = 32 columns.
//
// vgeqrf: a batch whose matrices all have at most 64 rows and 32 columns takes the fixed-size
// geqrf's one-pass small kernel (geqrf.cu, through vgeqrf_small: each matrix its own shape, in
// registers). Other batches, step s, for the matrices whose factorization is at column block
// c0 = 32 j:
// - panel: the Householder QR of A(c0:m, c0:c0+iw), iw = min(32, k - c0), with T (LAPACK's
//   larft, forward columnwise) to the workspace and tau[b]. Steps whose panels have at most 512
//   rows take geqrf.cu's register panel kernel, each matrix at its own column block
//   (vgeqrf_reg_panel, faster than the panel kernel here for uniform and skewed sizes up to NMAX
//   512); taller ones the panel kernel here,
//   one thread block (8 warps) per matrix, in shared memory when the step's rows fit (else in
//   place), column c's reflector computed by warp c % 8 while the other warps apply the
//   previous one to their own columns (householder.cuh's factor_panel), then G = V^T V and T.
// - update kernel, one thread block per (matrix, 32 trailing columns): C -= V (T^T (V^T C)) on
//   C = A(c0:m, cols), by chunks of V and C staged in shared memory (V^T C split over the rows
//   among four groups of threads; see vgeqrf_update_kernel).
// Blocks of matrices that are not at that step (not started, finished) return at once; the
// grids are sized by the step's bounds (VQrBounds): under ssde the largest shape less the
// columns done, under dsse 32 (steps left) plus the largest m - k (rows) or n - k (columns).
//
// vgeqrs: one warp per (matrix, right-hand side): info from R's diagonal, Q^T b by the
// reflectors in order, back substitution with R, in place in B.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstddef>

#include "batched/cuda/common.cuh"
#include "batched/cuda/householder.cuh"
#include "batched/cuda/vbatched_kernels.hpp"

namespace starfact::batched::cuda {
namespace {
using namespace householder;

constexpr int K = kVBlock;
constexpr int LK = K + 1;
constexpr int kPanelWarps = 8;  ///< 4 measured slower
constexpr int kUpdateThreads = 256;
/// Register bound of the update kernel: blocks per SM (80 registers at 3; at 4, 64 registers,
/// it spills and is slower).
constexpr int kUpdateBlocksPerSm = 3;
constexpr int kSolveWarps = 4;
/// A panel is staged in shared memory when the step's rows take at most this many bytes.
constexpr int kPanelSmemBytes = 96 * 1024;

/// Where matrix b stands at step `step`: its shape and the column block c0 it works on, the
/// panel's width iw; false when it has nothing to do there.
__device__ __forceinline__ bool locate(const int* m, const int* n, int b, Schedule s, int kmax, int step, int& mb,
                                       int& nb, int& c0, int& iw) {
    mb = m[b];
    nb = n[b];
    return vqr_panel_at(s, kmax, step, mb, nb, c0, iw);
}

template <class T, int W>
__global__ void __launch_bounds__(32 * W)
    vgeqrf_panel_kernel(T* const* A, const int* m, const int* n, const int* lda, T* const* tau, T* Tws, Schedule s,
                        int kmax, int step, int smem_rows) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ T s_tau[K];
    __shared__ T sG[K * LK];
    const int b = blockIdx.x;
    int mb, nb, c0, iw;
    if (!locate(m, n, b, s, kmax, step, mb, nb, c0, iw)) return;  // uniform over the block
    const int ld = lda[b];
    const int mp = mb - c0;
    T* a = A[b] + c0 + static_cast<long long>(c0) * ld;
    const bool staged = mp <= smem_rows;
    T* P = staged ? reinterpret_cast<T*>(smem_raw) : a;
    const int ldp = staged ? mp : ld;
    if (staged) {
        for (int e = threadIdx.x; e < mp * iw; e += blockDim.x) {
            const int i = e % mp, j = e / mp;
            P[i + j * mp] = a[i + static_cast<long long>(j) * ld];
        }
        __syncthreads();
    }
    factor_panel<T, K / W>(P, ldp, mp, iw, s_tau);  // ends with a barrier
    // G = V^T V, strict upper part: G(i, c) = V(c, i) + V(c+1:, i)^T V(c+1:, c), one warp a pair.
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int pairs = iw * (iw - 1) / 2;
    for (int q = warp; q < pairs; q += W) {
        int c = 1, base = 0;
        while (base + c <= q) {
            base += c;
            ++c;
        }
        const int i = q - base;  // i < c
        const T* vi = P + static_cast<long long>(i) * ldp;
        const T* vc = P + static_cast<long long>(c) * ldp;
        T d = 0;
        for (int r = c + 1 + lane; r < mp; r += 32) d += vi[r] * vc[r];
        d = warp_sum(d);
        if (lane == 0) sG[i + LK * c] = d + vi[c];
    }
    __syncthreads();
    if (warp == 0) {
        // LAPACK's larft in place in sG: T(0:c, c) = -tau_c T(0:c, 0:c) G(0:c, c), T(c, c) = tau_c.
        T* out = Tws + static_cast<long long>(b) * K * K;
        for (int c = 0; c < iw; ++c) {
            const T tc = s_tau[c];
            T t = 0;
            if (lane < c && tc != T(0))
                for (int l = lane; l < c; ++l) t += sG[lane + LK * l] * sG[l + LK * c];
            __syncwarp();
            sG[lane + LK * c] = lane < c ? (tc != T(0) ? -tc * t : T(0)) : (lane == c ? tc : T(0));
            __syncwarp();
        }
        for (int c = 0; c < iw; ++c) out[lane + K * c] = sG[lane + LK * c];
        if (lane < iw) tau[b][c0 + lane] = s_tau[lane];
    }
    if (staged) {
        for (int e = threadIdx.x; e < mp * iw; e += blockDim.x) {
            const int i = e % mp, j = e / mp;
            a[i + static_cast<long long>(j) * ld] = P[i + j * mp];
        }
    }
}

/// V(r, k) of the panel whose top-left is v (unit lower trapezoid, iw columns, mp rows).
template <class T>
__device__ __forceinline__ T vat(const T* v, int ld, int r, int k, int mp, int iw) {
    if (r >= mp || k >= iw || r < k) return T(0);
    return r == k ? T(1) : v[r + static_cast<long long>(k) * ld];
}

/// Leading dimension of W in the update's last pass: rows of 16-byte multiples.
constexpr int LW = K + 4;

/// w <- p[0..3] by 16-byte loads (p 16-byte aligned).
__device__ __forceinline__ void load4(const double* p, double (&w)[4]) {
    const double2 a = *reinterpret_cast<const double2*>(p), b = *reinterpret_cast<const double2*>(p + 2);
    w[0] = a.x;
    w[1] = a.y;
    w[2] = b.x;
    w[3] = b.y;
}
__device__ __forceinline__ void load4(const float* p, float (&w)[4]) {
    const float4 a = *reinterpret_cast<const float4*>(p);
    w[0] = a.x;
    w[1] = a.y;
    w[2] = a.z;
    w[3] = a.w;
}

/// kUpdateThreads threads per (matrix, 32 trailing columns): C -= V (T^T (V^T C)).
/// W = V^T C over 32-row chunks of V and C staged in shared memory, split over the rows: the
/// four groups of 64 threads take 8 rows of each chunk, each thread a 4 x 4 tile of W, and the
/// four partial W are summed at the end. Then W <- T^T W. Then C -= V W over 64-row chunks of V,
/// each thread 2 rows x 4 columns of C. Every pass reads its next chunk (and, in the last, the
/// thread's own C entries) into registers while the current one is multiplied.
template <class T>
__global__ void __launch_bounds__(kUpdateThreads, kUpdateBlocksPerSm)
    vgeqrf_update_kernel(T* const* A, const int* m, const int* n, const int* lda, const T* Tws, Schedule s, int kmax,
                         int step) {
    constexpr int NT = kUpdateThreads;
    constexpr int L2K = 2 * K + 1;  // leading dimension of a staged 64-row chunk of V
    __shared__ T sX[2 * K * LK];    // V and C chunks (32 rows), partial W, or a 64-row V chunk
    __shared__ T sW[K * LK];
    __shared__ __align__(16) T sT[K * LW];  // T, then T^T W by rows (16-byte aligned rows)
    T* const sV = sX;
    T* const sC = sX + K * LK;
    const int b = blockIdx.x;
    int mb, nb, c0, iw;
    if (!locate(m, n, b, s, kmax, step, mb, nb, c0, iw)) return;
    const int cc = c0 + iw + K * static_cast<int>(blockIdx.y);
    const int wc = min(K, nb - cc);
    if (wc <= 0) return;
    const int ld = lda[b];
    const int mp = mb - c0;
    T* v = A[b] + c0 + static_cast<long long>(c0) * ld;
    T* C = A[b] + c0 + static_cast<long long>(cc) * ld;
    const int tid = threadIdx.x;
    constexpr int E = K * K / NT;  // staged entries per thread and 32-row chunk
    // Staged entry e = tid + NT i of a chunk of `rows` rows: row e % rows, column e / rows.
    T rv[2 * E], rc[E];
    auto read_v = [&](int r0, int rows) {
#pragma unroll
        for (int i = 0; i < 2 * E; ++i)
            if (i < rows / K * E) {
                const int e = tid + NT * i;
                rv[i] = vat(v, ld, r0 + e % rows, e / rows, mp, iw);
            }
    };
    auto read_c = [&](int r0) {
#pragma unroll
        for (int i = 0; i < E; ++i) {
            const int e = tid + NT * i, r = r0 + e % K, j = e / K;
            rc[i] = (r < mp && j < wc) ? C[r + static_cast<long long>(j) * ld] : T(0);
        }
    };

    // W = V^T C: group gk = tid / 64 takes rows 8 gk .. 8 gk + 7 of each chunk; thread (kx, cx)
    // of the group a partial W(kx + 8p, cx + 8q).
    const int gk = tid / 64, kx = tid % 8, cx = tid % 64 / 8;
    T acc[4][4] = {};
    read_v(0, K);
    read_c(0);
    for (int r0 = 0; r0 < mp; r0 += K) {
#pragma unroll
        for (int i = 0; i < E; ++i) {
            const int e = tid + NT * i;
            sV[e % K + LK * (e / K)] = rv[i];
            sC[e % K + LK * (e / K)] = rc[i];
        }
        __syncthreads();
        if (r0 + K < mp) {
            read_v(r0 + K, K);
            read_c(r0 + K);
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int l = 8 * gk + i;
            T a[4], c[4];
#pragma unroll
            for (int p = 0; p < 4; ++p) {
                a[p] = sV[l + LK * (kx + 8 * p)];
                c[p] = sC[l + LK * (cx + 8 * p)];
            }
#pragma unroll
            for (int p = 0; p < 4; ++p)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[p][q] += a[p] * c[q];
        }
        __syncthreads();
    }
    // The four partial W summed: groups 2 and 3 hand theirs to 0 and 1, then 1 to 0.
    auto tile = [&](T* buf, int mode) {  // mode 0: store, 1: add from buf
#pragma unroll
        for (int p = 0; p < 4; ++p)
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                T& x = buf[kx + 8 * p + LK * (cx + 8 * q)];
                if (mode == 0)
                    x = acc[p][q];
                else
                    acc[p][q] += x;
            }
    };
    if (gk >= 2) tile(gk == 2 ? sV : sC, 0);
    __syncthreads();
    if (gk < 2) tile(gk == 0 ? sV : sC, 1);
    __syncthreads();
    if (gk == 1) tile(sV, 0);
    __syncthreads();
    if (gk == 0) {
        tile(sV, 1);
        tile(sW, 0);
    }
    const T* Tb = Tws + static_cast<long long>(b) * K * K;
    for (int e = tid; e < K * K; e += NT) {
        const int i = e % K, j = e / K;
        sT[i + LK * j] = (i < iw && j < iw && i <= j) ? Tb[i + K * j] : T(0);
    }
    __syncthreads();
    // W <- T^T W: W(k, c) = sum_{l <= k} T(l, k) W(l, c); thread (tx, ty) owns W(ty + 8q, tx).
    const int tx = tid & 31, ty = tid >> 5;
    T w2[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const int k = ty + 8 * q;
        T t = 0;
        for (int l = 0; l <= k; ++l) t += sT[l + LK * k] * sW[l + LK * tx];
        w2[q] = t;
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < 4; ++q) sT[(ty + 8 * q) * LW + tx] = w2[q];

    // C -= V W over 64-row chunks: thread (tx, ty) updates rows r0 + tx and r0 + 32 + tx,
    // columns 4 ty .. 4 ty + 3 (their W entries read as one or two 16-byte loads).
    T cn[2][4];
    auto read_own = [&](int r0) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = r0 + K * h + tx;
#pragma unroll
            for (int q = 0; q < 4; ++q)
                cn[h][q] = (r < mp && 4 * ty + q < wc) ? C[r + static_cast<long long>(4 * ty + q) * ld] : T(0);
        }
    };
    read_v(0, 2 * K);
    read_own(0);
    for (int r0 = 0; r0 < mp; r0 += 2 * K) {
        __syncthreads();  // sX free (and, the first time, W complete)
#pragma unroll
        for (int i = 0; i < 2 * E; ++i) {
            const int e = tid + NT * i;
            sX[e % (2 * K) + L2K * (e / (2 * K))] = rv[i];
        }
        T u[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int q = 0; q < 4; ++q) u[h][q] = cn[h][q];
        __syncthreads();
        if (r0 + 2 * K < mp) {
            read_v(r0 + 2 * K, 2 * K);
            read_own(r0 + 2 * K);
        }
        for (int k = 0; k < iw; ++k) {
            const T v0 = sX[tx + L2K * k], v1 = sX[K + tx + L2K * k];
            T w[4];
            load4(sT + k * LW + 4 * ty, w);
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                u[0][q] -= v0 * w[q];
                u[1][q] -= v1 * w[q];
            }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = r0 + K * h + tx;
            if (r < mp)
#pragma unroll
                for (int q = 0; q < 4; ++q)
                    if (4 * ty + q < wc) C[r + static_cast<long long>(4 * ty + q) * ld] = u[h][q];
        }
    }
}

/// One warp per (matrix, right-hand side): info from R's diagonal, then Q^T b and R^{-1}.
template <class T>
__global__ void vgeqrs_kernel(const int* m, const int* n, int nrhs, const T* const* A, const int* lda,
                              const T* const* tau, T* const* B, const int* ldb, int* info, int count) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int ncols = max(nrhs, 1);
    const long long g = static_cast<long long>(blockIdx.x) * kSolveWarps + warp;
    if (g >= static_cast<long long>(count) * ncols) return;  // whole warps only
    const int b = static_cast<int>(g / ncols), col = static_cast<int>(g % ncols);
    const int mb = m[b], nb = n[b], ld = lda[b];
    const T* Ab = A[b];
    int first = INT_MAX;
    for (int j = lane; j < nb; j += 32)
        if (Ab[j + static_cast<long long>(j) * ld] == T(0)) {
            first = j + 1;
            break;
        }
    for (int o = 16; o > 0; o /= 2) first = min(first, __shfl_xor_sync(kFull, first, o));
    if (col == 0 && lane == 0) info[b] = first == INT_MAX ? 0 : first;
    if (first != INT_MAX || col >= nrhs || nb == 0) return;
    T* x = B[b] + static_cast<long long>(col) * ldb[b];
    const T* tb = tau[b];
    for (int j = 0; j < nb; ++j) {
        const T t = tb[j];
        if (t == T(0)) continue;
        warp_apply(Ab + static_cast<long long>(j) * ld, t, x, j, mb, lane);
    }
    for (int j = nb - 1; j >= 0; --j) {
        const T* r = Ab + static_cast<long long>(j) * ld;
        const T xj = x[j] / r[j];
        __syncwarp();
        if (lane == 0) x[j] = xj;
        for (int i = lane; i < j; i += 32) x[i] -= xj * r[i];
        __syncwarp();
    }
}

}  // namespace

template <class T>
std::size_t vgeqrf_workspace(int count) {
    return detail::WorkspaceCarver::round(sizeof(T) * K * K * static_cast<std::size_t>(std::max(count, 0)));
}

template <class T>
void vgeqrf(const Launch& launch, Schedule schedule, const VQrBounds& bd, const int* m, const int* n, T* const* A,
            const int* lda, T* const* tau, int count) {
    if (count <= 0 || bd.kmax <= 0) return;
    // Matrices that all fit geqrf.cu's one-pass kernel (registers, one warp's lanes per matrix)
    // go there whatever the schedule: one launch instead of a panel kernel with a block
    // barrier per column.
    if (vgeqrf_small<T>(launch, bd.mmax, bd.nmax, m, n, A, lda, tau, count)) return;
    detail::WorkspaceCarver carve(launch);
    T* Tws = carve.take<T>(static_cast<std::size_t>(K) * K * count);
    const int steps = vsteps(bd.kmax);
    const int smem_limit_rows = kPanelSmemBytes / static_cast<int>(sizeof(T) * K);
    detail::check(cudaFuncSetAttribute(vgeqrf_panel_kernel<T, kPanelWarps>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       kPanelSmemBytes),
                  "vgeqrf panel shared memory");
    for (int step = 0; step < steps; ++step) {
        // The most rows (columns) any matrix has from its panel's top (left) at this step.
        const int rows =
            schedule == Schedule::ssde ? bd.mmax - K * step : std::min(bd.mmax, bd.mexcess + K * (steps - step));
        const int cols =
            schedule == Schedule::ssde ? bd.nmax - K * step : std::min(bd.nmax, bd.nexcess + K * (steps - step));
        if (rows <= 0) continue;
        // Panels of at most 512 rows: geqrf.cu's register panel kernel, each matrix at its own
        // column block; taller ones: the panel kernel here.
        if (!vgeqrf_reg_panel<T>(launch, rows, m, n, lda, A, tau, Tws, schedule, bd.kmax, step, count)) {
            const int smem_rows = rows <= smem_limit_rows ? rows : 0;
            const std::size_t dyn = sizeof(T) * static_cast<std::size_t>(smem_rows) * K;
            vgeqrf_panel_kernel<T, kPanelWarps><<<static_cast<unsigned>(count), 32 * kPanelWarps, dyn, launch.stream>>>(
                A, m, n, lda, tau, Tws, schedule, bd.kmax, step, smem_rows);
            detail::check_launch("vgeqrf panel kernel");
        }
        const int tiles = detail::ceil_div(cols - 1, K);
        if (tiles <= 0) continue;
        const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(tiles));
        vgeqrf_update_kernel<T><<<grid, kUpdateThreads, 0, launch.stream>>>(A, m, n, lda, Tws, schedule, bd.kmax, step);
        detail::check_launch("vgeqrf update kernel");
    }
}

template <class T>
void vgeqrs(const Launch& launch, const VQrBounds&, const int* m, const int* n, int nrhs, const T* const* A,
            const int* lda, const T* const* tau, T* const* B, const int* ldb, int* info, int count) {
    if (count <= 0) return;
    const long long pairs = static_cast<long long>(count) * std::max(nrhs, 1);
    const long long blocks = (pairs + kSolveWarps - 1) / kSolveWarps;
    vgeqrs_kernel<T><<<static_cast<unsigned>(blocks), 32 * kSolveWarps, 0, launch.stream>>>(m, n, nrhs, A, lda, tau, B,
                                                                                            ldb, info, count);
    detail::check_launch("vgeqrs");
}

template std::size_t vgeqrf_workspace<float>(int);
template std::size_t vgeqrf_workspace<double>(int);
template void vgeqrf<float>(const Launch&, Schedule, const VQrBounds&, const int*, const int*, float* const*,
                            const int*, float* const*, int);
template void vgeqrf<double>(const Launch&, Schedule, const VQrBounds&, const int*, const int*, double* const*,
                             const int*, double* const*, int);
template void vgeqrs<float>(const Launch&, const VQrBounds&, const int*, const int*, int, const float* const*,
                            const int*, const float* const*, float* const*, const int*, int*, int);
template void vgeqrs<double>(const Launch&, const VQrBounds&, const int*, const int*, int, const double* const*,
                             const int*, const double* const*, double* const*, const int*, int*, int);

}  // namespace starfact::batched::cuda
