// CUDA row interchanges of tile LU: LAPACK's laswp for GETRF's pivots (GESSM) and TSTRF's swaps
// between the rows of an inner block and the lower tile (TSTRF, SSSSM). Each set of swaps is
// composed once in shared memory, then applied by one thread block per column; tiles too large
// for that take a one-thread-per-column walk.
#include <cuda_runtime.h>

#include <cstddef>

#include "codelets/cuda/lu_common.cuh"

namespace starfact::cuda::lu_detail {
namespace {

constexpr int kSwapThreads = 128;
constexpr int kComposeThreads = 256;
constexpr int kApplyThreads = 128;

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

}  // namespace

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

template cudaError_t laswp<float>(const LuContext&, TileView<float>, const int*, int);
template cudaError_t laswp<double>(const LuContext&, TileView<double>, const int*, int);
template cudaError_t swap_pairs<float>(const LuContext&, TileView<float>, TileView<float>, const int*, int, int, int);
template cudaError_t swap_pairs<double>(const LuContext&, TileView<double>, TileView<double>, const int*, int, int,
                                        int);

}  // namespace starfact::cuda::lu_detail
