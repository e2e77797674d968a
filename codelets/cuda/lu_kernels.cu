// CUDA kernels of tile LU with incremental pivoting: cuSOLVER's GETRF, our row-swap kernels and
// TSTRF panel kernel, cuBLAS for the triangular solves and the updates. Semantics and storage:
// codelets/cpu/lu_kernels.hpp.
// The row swaps are in lu_swaps.cu, TSTRF's panel in lu_panel.cu, the trtri + gemm variant in
// lu_inverse.cu; the helpers they share in lu_common.cuh.
#include "codelets/cuda/lu_kernels.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "codelets/cpu/lu_kernels.hpp"
#include "codelets/cuda/lu_common.cuh"
#include "codelets/cuda/tile_kernels.hpp"

namespace starfact::cuda {
using namespace lu_detail;

namespace {

constexpr int kConvertThreads = 256;

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
    // cuSOLVER's getrf does not carry NaN through: a column of NaN can come out with an exact
    // zero pivot and finite factors, so a NaN input could give a finite solution. A tile holding
    // a NaN or an infinity is factored by the CPU kernel instead (LAPACK's semantics, the CPU
    // worker's result). The scan reads the tile once and costs one synchronization, small next
    // to the factorization of a large tile.
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
