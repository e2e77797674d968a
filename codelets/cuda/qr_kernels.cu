// CUDA kernels of tile QR: cuSOLVER's geqrf for the Householder vectors, our kernels for the T
// factors and the panel copies, cuBLAS for the block-reflector applications. Semantics and
// storage: codelets/cpu/qr_kernels.hpp; what differs in the algorithm: codelets/cuda/qr_kernels.hpp.
#include "codelets/cuda/qr_kernels.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <utility>

#include "codelets/cuda/tile_kernels.hpp"
#include "common/cuda_blas.hpp"

namespace starfact::cuda {
namespace {

// cuSOLVER wants its buffer aligned like a cudaMalloc'd one; every piece of the workspace is.
constexpr std::size_t kAlign = 256;
constexpr int kCopyThreads = 256;
constexpr int kMaxCopyBlocks = 4096;
// T blocks up to this width are formed by one thread block each (the columnwise recurrence in
// shared memory); wider ones by a cuBLAS triangular solve. At K = 2048, 128-wide blocks are more
// than ten times faster this way than through cuBLAS (16 syrk and 16 trsm calls).
constexpr int kSmallT = 128;
// Up to this block width the Gram matrices V_J^T V_J of all blocks come from one batched GEMM
// over all rows (twice the flops of per-block SYRKs, but one call instead of K / ib).
constexpr int kBatchedGram = 256;
// Dynamic shared memory a kernel may use without cudaFuncSetAttribute.
constexpr std::size_t kDefaultSmem = 48 * 1024;
// TSQRT factors the stack [R; A] in panels of this many columns (rounded up to a multiple of
// ib): one cuSOLVER call per panel, the trailing columns updated block by block in between.
constexpr int kTsqrtPanel = 256;

std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

using cublas::data_type;

template <class T>
TileView<const T> as_const(TileView<T> v) {
    return {v.data, v.m, v.n, v.ld};
}

cudaError_t from_blas(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown; }
cudaError_t from_solver(cusolverStatus_t s) { return s == CUSOLVER_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown; }

bool transposed(char trans) { return trans == 'T' || trans == 't' || trans == 'C' || trans == 'c'; }

int clamp_ib(int ib, int k) { return std::max(1, std::min(ib, k)); }

int copy_blocks(long long count) {
    return static_cast<int>(
        std::max(1LL, std::min<long long>((count + kCopyThreads - 1) / kCopyThreads, kMaxCopyBlocks)));
}

// Carves aligned pieces out of a workspace in order; with a null base it only counts bytes, so
// the sizing function and the kernels share one layout.
class Carver {
public:
    explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
    template <class E>
    E* take(std::size_t count) {
        const std::size_t at = used_;
        used_ = align_up(used_ + count * sizeof(E));
        return base_ == nullptr ? nullptr : reinterpret_cast<E*>(base_ + at);
    }
    std::size_t used() const { return used_; }

private:
    char* base_;
    std::size_t used_ = 0;
};

// ---- cuBLAS calls the tile wrappers lack ---------------------------------------------------

// S_i = V_i^T V_i for the count b-column blocks V_i = V + i * stride_v (k rows each).
template <class T>
cublasStatus_t gram_batched_(cublasHandle_t h, int b, int k, const T* V, int ldv, long long stride_v, T* S, int lds,
                             long long stride_s, int count) {
    const T one = 1, zero = 0;
    return cublas::gemm_strided_batched(h, CUBLAS_OP_T, CUBLAS_OP_N, b, b, k, &one, V, ldv, stride_v, V, ldv, stride_v,
                                        &zero, S, lds, stride_s, count);
}

/// C = C - W (same shape), in place.
template <class T>
cudaError_t subtract(cublasHandle_t h, TileView<const T> W, TileView<T> C) {
    if (C.empty()) return cudaSuccess;
    const T one = 1, minus_one = -1;
    return from_blas(cublas::geam(h, CUBLAS_OP_N, CUBLAS_OP_N, C.m, C.n, &one, C.data, C.ld, &minus_one, W.data, W.ld,
                                  C.data, C.ld));
}

// ---- our kernels ---------------------------------------------------------------------------

// X = the upper triangle of Tt (b x b), zeros below: a T factor that a plain GEMM can apply
// (cuBLAS's TRMM runs at well under half its GEMM's speed at these sizes).
template <class T>
__global__ void explicit_upper_kernel(TileView<const T> Tt, TileView<T> X) {
    const long long total = static_cast<long long>(X.m) * X.n;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const int r = static_cast<int>(idx % X.m), c = static_cast<int>(idx / X.m);
        X(r, c) = r <= c ? Tt(r, c) : T(0);
    }
}

// P = [triu(R(0:w, 0:w)); A] ((w + m) x w). R's strict lower triangle is not read. With band >= 0
// (TTQRT: A is the upper part of a triangle whose column c starts band columns further right)
// only A(r, c) with r <= c + band is read, zeros stand for the rest.
template <class T>
__global__ void stack_kernel(TileView<const T> R, TileView<const T> A, TileView<T> P, int band) {
    const int w = P.n;
    const long long total = static_cast<long long>(P.m) * w;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const int r = static_cast<int>(idx % P.m), c = static_cast<int>(idx / P.m);
        if (r < w)
            P(r, c) = r <= c ? R(r, c) : T(0);
        else
            P(r, c) = band < 0 || r - w <= c + band ? A(r - w, c) : T(0);
    }
}

// The inverse of stack_kernel for the factored panel: R' into R's upper triangle, V2 into A.
// The top part's strict lower triangle (the identity part of the reflectors) is dropped. With
// band >= 0 only the entries stack_kernel read go back to A, and P's others are set to zero
// (rounding-free in exact arithmetic already; this makes P's bottom the masked V2 whatever
// cuSOLVER left there).
template <class T>
__global__ void unstack_kernel(TileView<T> P, TileView<T> R, TileView<T> A, int band) {
    const int w = P.n;
    const long long total = static_cast<long long>(P.m) * w;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const int r = static_cast<int>(idx % P.m), c = static_cast<int>(idx / P.m);
        if (r >= w) {
            if (band < 0 || r - w <= c + band)
                A(r - w, c) = P(r, c);
            else
                P(r, c) = T(0);
        } else if (r <= c) {
            R(r, c) = P(r, c);
        }
    }
}

// D = S with the entries below band (S(r, c) with r > c + band) replaced by zeros: TTMQR's V2
// block made explicit without the other reflectors that share its tile.
template <class T>
__global__ void upper_band_copy_kernel(TileView<const T> S, int band, TileView<T> D) {
    const long long total = static_cast<long long>(D.m) * D.n;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const int r = static_cast<int>(idx % D.m), c = static_cast<int>(idx / D.m);
        D(r, c) = r <= c + band ? S(r, c) : T(0);
    }
}

// One thread block (of at least ib threads) per T block J (columns [J ib, J ib + b) of the K
// reflectors): LAPACK's larft recurrence T(0:i, i) = -tau_i T(0:i, 0:i) S(0:i, i),
// T(i, i) = tau_i (a zero tau gives a zero column), with S = V_J^T V_J (ib x K, ld ib, block J
// at column J ib; only its strict upper triangle is read) and T in dynamic shared memory
// (ib x ib, then ib entries for the current column of S). Writes the upper triangle of
// Tf(0:b, J); when zero_first_column, also zeros in the strict lower part of the block's first
// column, as LAPACK's tpqrt does.
template <class T>
__global__ void __launch_bounds__(kSmallT)
    small_t_kernel(const T* S, const T* tau, int K, int ib, TileView<T> Tf, bool zero_first_column) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T* const t = reinterpret_cast<T*>(smem_raw);
    T* const s = t + static_cast<std::size_t>(ib) * ib;
    const int j0 = blockIdx.x * ib, b = min(ib, K - j0), r = threadIdx.x;
    const T* SJ = S + static_cast<std::size_t>(j0) * ib;
    for (int i = 0; i < b; ++i) {
        if (r < i) s[r] = SJ[r + static_cast<std::size_t>(i) * ib];
        __syncthreads();
        const T ti = tau[j0 + i];
        if (r < i) {
            T acc = 0;
            for (int c = r; c < i; ++c) acc += t[r + c * ib] * s[c];
            t[r + i * ib] = ti == T(0) ? T(0) : -ti * acc;
        } else if (r == i) {
            t[i + i * ib] = ti;
        }
        __syncthreads();
    }
    if (r >= b) return;
    for (int c = r; c < b; ++c) Tf(r, j0 + c) = t[r + c * ib];
    if (zero_first_column && r > 0) Tf(r, j0) = T(0);
}

std::size_t small_t_smem(std::size_t elem, int ib) { return elem * (static_cast<std::size_t>(ib) * ib + ib); }

// Whether small_t_kernel can run with ib x ib blocks on this device (it needs more than the
// default dynamic shared memory from 91 columns in double precision).
template <class T>
bool small_t_fits(int ib) {
    if (ib > kSmallT) return false;
    const std::size_t smem = small_t_smem(sizeof(T), ib);
    if (smem <= kDefaultSmem) return true;
    // Opt in to the kernel's whole allowance, not to this request: CUDA workers on their own
    // threads (STARPU_CUDA_THREAD_PER_WORKER=1) may set it at the same time for other widths.
    int device = 0, optin = 0;
    cudaFuncAttributes attr{};
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) == cudaSuccess &&
        cudaFuncGetAttributes(&attr, small_t_kernel<T>) == cudaSuccess &&
        smem + attr.sharedSizeBytes <= static_cast<std::size_t>(optin) &&
        cudaFuncSetAttribute(small_t_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             optin - static_cast<int>(attr.sharedSizeBytes)) == cudaSuccess)
        return true;
    (void)cudaGetLastError();  // not sticky: clear it, the solve path does the work instead
    return false;
}

// Before the triangular solves of wide T blocks: T_J solves T_J U_J = D_J with
// U_J = I + striu(S_J) D_J, D_J = diag(tau_J) (the larft recurrence as one solve). U_J
// overwrites S_J's strict upper triangle (the solve reads no more, its diagonal being unit),
// D_J goes to the same block of X (ib x K, ld ib).
template <class T>
__global__ void wide_t_setup_kernel(T* S, const T* tau, int K, int ib, T* X) {
    const long long total = static_cast<long long>(ib) * K;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const int r = static_cast<int>(idx % ib), col = static_cast<int>(idx / ib);
        const int j0 = col / ib * ib, c = col - j0, b = min(ib, K - j0);
        if (r >= b) continue;
        if (r < c) S[idx] *= tau[col];
        X[idx] = r == c ? tau[col] : T(0);
    }
}

// Copies the upper triangles of the solved blocks X into Tf (and the first columns' zeros, as
// small_t_kernel does).
template <class T>
__global__ void wide_t_store_kernel(const T* X, int K, int ib, TileView<T> Tf, bool zero_first_column) {
    const long long total = static_cast<long long>(ib) * K;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const int r = static_cast<int>(idx % ib), col = static_cast<int>(idx / ib);
        const int j0 = col / ib * ib, c = col - j0, b = min(ib, K - j0);
        if (r >= b) continue;
        if (r <= c)
            Tf(r, col) = X[idx];
        else if (zero_first_column && c == 0)
            Tf(r, col) = T(0);
    }
}

// ---- shared steps ----------------------------------------------------------------------------

/// Workspace of block_t_factors for K reflectors in blocks of ib.
template <class T>
struct TBuffers {
    T* S;  ///< ib x K, ld ib
    T* X;  ///< ib x K, ld ib (the solve path only)
};

template <class T>
TBuffers<T> take_t_buffers(Carver& w, int K, int ib) {
    const std::size_t count = static_cast<std::size_t>(ib) * K;
    // X (the solve path's) is carved whatever the path, so that the size does not depend on
    // the device.
    T* S = w.take<T>(count);
    T* X = w.take<T>(count);
    return {S, X};
}

/// The T factor of every ib-block of the K reflectors with scalars tau, into Tf(0:b, J) (upper
/// triangles; see small_t_kernel). V: the reflectors' vectors, explicit, rows x K. With
/// `trapezoid`, column c is zero above row c (GEQRT's V made explicit) and block J's Gram matrix
/// skips those rows; otherwise V is TSQRT's V2 (the identity on top adds nothing to the strict
/// upper part of S, the only part used).
template <class T>
cudaError_t block_t_factors(const QrContext& ctx, TileView<const T> V, bool trapezoid, const T* tau, int ib,
                            const TBuffers<T>& buf, TileView<T> Tf, bool zero_first_column) {
    const int K = V.n, rows = V.m, nblocks = (K + ib - 1) / ib;
    const auto S_block = [&](int j0, int b) {
        return TileView<T>{buf.S + static_cast<std::size_t>(j0) * ib, b, b, ib};
    };
    cudaError_t err = cudaSuccess;
    if (ib <= kBatchedGram) {
        // One batched product for the full blocks (over all rows: the zeros above a
        // trapezoid's block cost little at this width), one for the last.
        const int full = K / ib, rest = K - full * ib;
        if (full > 0)
            err = from_blas(gram_batched_(ctx.blas, ib, rows, V.data, V.ld, static_cast<long long>(ib) * V.ld, buf.S,
                                          ib, static_cast<long long>(ib) * ib, full));
        if (err == cudaSuccess && rest > 0) {
            const TileView<const T> Vr = V.sub(0, full * ib, rows, rest);
            err = from_blas(gemm<T>(ctx.blas, 'T', 'N', T(1), Vr, Vr, T(0), S_block(full * ib, rest)));
        }
    } else {
        // Upper Gram matrices block by block, without the rows above a trapezoid's block.
        for (int j0 = 0; j0 < K && err == cudaSuccess; j0 += ib) {
            const int b = std::min(ib, K - j0), r0 = trapezoid ? j0 : 0;
            err = from_blas(syrk<T>(ctx.blas, 'U', 'T', T(1), V.sub(r0, j0, rows - r0, b), T(0), S_block(j0, b)));
        }
    }
    if (err != cudaSuccess) return err;
    if (small_t_fits<T>(ib)) {
        const int threads = (ib + 31) / 32 * 32;
        small_t_kernel<T>
            <<<nblocks, threads, small_t_smem(sizeof(T), ib), ctx.stream>>>(buf.S, tau, K, ib, Tf, zero_first_column);
        return cudaGetLastError();
    }
    // Wide blocks: T_J = D_J U_J^{-1} by a triangular solve each.
    const long long count = static_cast<long long>(ib) * K;
    wide_t_setup_kernel<T><<<copy_blocks(count), kCopyThreads, 0, ctx.stream>>>(buf.S, tau, K, ib, buf.X);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    for (int j0 = 0; j0 < K && err == cudaSuccess; j0 += ib) {
        const int b = std::min(ib, K - j0);
        const TileView<T> X{buf.X + static_cast<std::size_t>(j0) * ib, b, b, ib};
        err = from_blas(trsm<T>(ctx.blas, 'R', 'U', 'N', 'U', T(1), as_const(S_block(j0, b)), X));
    }
    if (err != cudaSuccess) return err;
    wide_t_store_kernel<T><<<copy_blocks(count), kCopyThreads, 0, ctx.stream>>>(buf.X, K, ib, Tf, zero_first_column);
    return cudaGetLastError();
}

/// Scratch of one block-reflector application: b x b for T made explicit, two b x nc.
template <class T>
struct ApplyBuffers {
    T* Tx;
    T* W;
    T* Y;
};

template <class T>
ApplyBuffers<T> take_apply_buffers(Carver& w, int ib, int n) {
    ApplyBuffers<T> a{};
    a.Tx = w.take<T>(static_cast<std::size_t>(ib) * ib);
    a.W = w.take<T>(static_cast<std::size_t>(ib) * n);
    a.Y = w.take<T>(static_cast<std::size_t>(ib) * n);
    return a;
}

/// Y = op(Tt) W through a GEMM on Tt's upper triangle made explicit in buf.Tx (b x b).
template <class T>
cudaError_t apply_t(const QrContext& ctx, bool trans, TileView<const T> Tt, const ApplyBuffers<T>& buf,
                    TileView<const T> W, TileView<T> Y) {
    const int b = Tt.n;
    const TileView<T> Tx{buf.Tx, b, b, b};
    explicit_upper_kernel<T><<<copy_blocks(static_cast<long long>(b) * b), kCopyThreads, 0, ctx.stream>>>(Tt, Tx);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    return from_blas(gemm<T>(ctx.blas, trans ? 'T' : 'N', 'N', T(1), as_const(Tx), W, T(0), Y));
}

/// C = op(H) C for the block reflector H = I - V Tt V^T: V explicit (rows x b), Tt b x b upper
/// (only its upper triangle is read), C rows x nc.
template <class T>
cudaError_t apply_block(const QrContext& ctx, bool trans, TileView<const T> V, TileView<const T> Tt, TileView<T> C,
                        const ApplyBuffers<T>& buf) {
    const int b = V.n, nc = C.n;
    const TileView<T> W{buf.W, b, nc, b}, Y{buf.Y, b, nc, b};
    // W = V^T C; Y = op(Tt) W; C -= V Y.
    cudaError_t err = from_blas(gemm<T>(ctx.blas, 'T', 'N', T(1), V, as_const(C), T(0), W));
    if (err == cudaSuccess) err = apply_t(ctx, trans, Tt, buf, as_const(W), Y);
    if (err == cudaSuccess) err = from_blas(gemm<T>(ctx.blas, 'N', 'N', T(-1), V, as_const(Y), T(1), C));
    return err;
}

/// [X1; X2] = op(H) [X1; X2] for H = I - [I; V2] Tt [I; V2]^T: X1 b x nc (the rows of the
/// identity part), X2 rows x nc, V2 rows x b.
template <class T>
cudaError_t apply_pair_block(const QrContext& ctx, bool trans, TileView<const T> V2, TileView<const T> Tt,
                             TileView<T> X1, TileView<T> X2, const ApplyBuffers<T>& buf) {
    const int b = V2.n, nc = X1.n;
    const TileView<T> W{buf.W, b, nc, b}, Y{buf.Y, b, nc, b};
    // W = X1 + V2^T X2; Y = op(Tt) W; X1 -= Y; X2 -= V2 Y.
    cudaError_t err = cudaMemcpy2DAsync(W.data, sizeof(T) * W.ld, X1.data, sizeof(T) * X1.ld, sizeof(T) * X1.m, X1.n,
                                        cudaMemcpyDeviceToDevice, ctx.stream);
    if (err == cudaSuccess) err = from_blas(gemm<T>(ctx.blas, 'T', 'N', T(1), V2, as_const(X2), T(1), W));
    if (err == cudaSuccess) err = apply_t(ctx, trans, Tt, buf, as_const(W), Y);
    if (err == cudaSuccess) err = subtract(ctx.blas, as_const(Y), X1);
    if (err == cudaSuccess) err = from_blas(gemm<T>(ctx.blas, 'N', 'N', T(-1), V2, as_const(Y), T(1), X2));
    return err;
}

cudaError_t geqrf_bytes(const QrContext& ctx, cudaDataType type, int m, int n, std::size_t* device_bytes) {
    std::size_t host_bytes = 0;
    *device_bytes = 0;
    if (cusolverDnXgeqrf_bufferSize(ctx.solver, ctx.params, m, n, type, nullptr, std::max(m, 1), type, nullptr, type,
                                    device_bytes, &host_bytes) != CUSOLVER_STATUS_SUCCESS)
        return cudaErrorUnknown;
    // The 64-bit geqrf has needed no host workspace so far; giving it one would tie the call to
    // the host, so refuse.
    return host_bytes == 0 ? cudaSuccess : cudaErrorNotSupported;
}

template <class T>
cudaError_t geqrf(const QrContext& ctx, TileView<T> A, T* tau, void* buffer, std::size_t bytes, int* info) {
    return from_solver(cusolverDnXgeqrf(ctx.solver, ctx.params, A.m, A.n, data_type<T>(), A.data, A.ld, data_type<T>(),
                                        tau, data_type<T>(), buffer, bytes, nullptr, 0, info));
}

// ---- layouts (shared by the kernels and qr_workspace_bytes) ----------------------------------

template <class T>
struct GeqrtWork {
    int* info;
    T* tau;
    T* V;  ///< m x K: the reflectors made explicit
    TBuffers<T> t;
    void* solver;
};

template <class T>
GeqrtWork<T> geqrt_layout(Carver& w, int m, int n, int ib, std::size_t solver_bytes) {
    const int K = std::min(m, n);
    GeqrtWork<T> g{};
    g.info = w.take<int>(1);
    g.tau = w.take<T>(K);
    g.V = w.take<T>(static_cast<std::size_t>(m) * K);
    g.t = take_t_buffers<T>(w, K, ib);
    g.solver = w.take<char>(solver_bytes);
    return g;
}

template <class T>
struct UnmqrWork {
    T* V;  ///< rows x b: one block's reflectors made explicit
    ApplyBuffers<T> apply;
};

template <class T>
UnmqrWork<T> unmqr_layout(Carver& w, int m, int n, int ib) {
    UnmqrWork<T> u{};
    u.V = w.take<T>(static_cast<std::size_t>(m) * ib);
    u.apply = take_apply_buffers<T>(w, ib, n);
    return u;
}

// TSQRT's panel width for n columns: a multiple of ib.
int tsqrt_panel(int n, int ib) { return std::min(n, std::max(ib, kTsqrtPanel / ib * ib)); }

template <class T>
struct TsqrtWork {
    int* info;
    T* tau;  ///< panel width
    T* P;    ///< (panel + m) x panel
    TBuffers<T> t;
    ApplyBuffers<T> apply;  ///< ib x n
    void* solver;
};

template <class T>
TsqrtWork<T> tsqrt_layout(Carver& w, int m, int n, int ib, std::size_t solver_bytes) {
    const int p = tsqrt_panel(n, ib);
    TsqrtWork<T> t{};
    t.info = w.take<int>(1);
    t.tau = w.take<T>(p);
    t.P = w.take<T>(static_cast<std::size_t>(p + m) * p);
    t.t = take_t_buffers<T>(w, p, ib);
    t.apply = take_apply_buffers<T>(w, ib, n);
    t.solver = w.take<char>(solver_bytes);
    return t;
}

// cuSOLVER's buffer for TSQRT's panels of m + w rows and w columns (the full ones and the last).
cudaError_t tsqrt_solver_bytes(const QrContext& ctx, cudaDataType type, int m, int n, int ib, std::size_t* bytes) {
    const int p = tsqrt_panel(n, ib), last = n - (n - 1) / p * p;
    *bytes = 0;
    for (int w : {p, last}) {
        std::size_t b = 0;
        const cudaError_t err = geqrf_bytes(ctx, type, m + w, w, &b);
        if (err != cudaSuccess) return err;
        *bytes = std::max(*bytes, b);
    }
    return cudaSuccess;
}

// cuSOLVER's buffer for TTQRT's panels: panel J = [p0, p0 + w) stacks w + min(m, p0 + w) rows.
cudaError_t ttqrt_solver_bytes(const QrContext& ctx, cudaDataType type, int m, int n, int ib, std::size_t* bytes) {
    const int p = tsqrt_panel(n, ib);
    *bytes = 0;
    for (int p0 = 0; p0 < n; p0 += p) {
        const int w = std::min(p, n - p0);
        std::size_t b = 0;
        const cudaError_t err = geqrf_bytes(ctx, type, w + std::min(m, p0 + w), w, &b);
        if (err != cudaSuccess) return err;
        *bytes = std::max(*bytes, b);
    }
    return cudaSuccess;
}

template <class T>
struct TtmqrWork {
    T* V;  ///< m x ib: one block of V2, masked to its upper part
    ApplyBuffers<T> apply;
};

template <class T>
TtmqrWork<T> ttmqr_layout(Carver& w, int m, int n, int ib) {
    TtmqrWork<T> t{};
    t.V = w.take<T>(static_cast<std::size_t>(m) * ib);
    t.apply = take_apply_buffers<T>(w, ib, n);
    return t;
}
// TSQRT (triangle false) and TTQRT (triangle true): [triu(R); A] = Q [R'; 0] panel by panel.
// Each panel J = [p0, p0 + wp) stacks triu(R(J, J)) on the rows of A(:, J) that the lower block
// reaches (all of them for TSQRT; for TTQRT the rows 0..p0+wp-1 of A's upper trapezoid, masked)
// and factors the stack with cuSOLVER. R being upper triangular, the top part of every reflector
// comes out as a unit vector, so only R' and V2 are copied back. Then the T factors of the
// panel's ib-blocks, and its blocks applied to the columns on its right. For TTQRT every
// reflector's lower part stays in the trapezoid (zeros times anything), and P's bottom comes back
// as the masked V2 that the T factors and the trailing update use.
template <class T>
cudaError_t pair_qrt(const QrContext& ctx, int ib, TileView<T> R, TileView<T> A, TileView<T> Tf, bool triangle) {
    const int n = A.n, m = triangle ? std::min(A.m, n) : A.m;
    // LAPACK's tpqrt returns at once when the lower tile has no rows (T is not written either).
    if (n == 0 || m == 0) return cudaSuccess;
    if (R.m < n || R.n < n) return cudaErrorInvalidValue;
    ib = clamp_ib(ib, n);
    std::size_t solver_bytes = 0;
    cudaError_t err = triangle ? ttqrt_solver_bytes(ctx, data_type<T>(), m, n, ib, &solver_bytes)
                               : tsqrt_solver_bytes(ctx, data_type<T>(), m, n, ib, &solver_bytes);
    if (err != cudaSuccess) return err;
    Carver w(ctx.work);
    const TsqrtWork<T> t = tsqrt_layout<T>(w, m, n, ib, solver_bytes);
    if (ctx.work == nullptr || w.used() > ctx.work_bytes) return cudaErrorInvalidValue;

    const int p = tsqrt_panel(n, ib);
    for (int p0 = 0; p0 < n; p0 += p) {
        const int wp = std::min(p, n - p0), rows = triangle ? std::min(m, p0 + wp) : m, band = triangle ? p0 : -1;
        const TileView<T> P{t.P, wp + rows, wp, wp + rows};
        const TileView<T> Rp = R.sub(p0, p0, wp, wp), Ap = A.sub(0, p0, rows, wp);
        const int grid = copy_blocks(static_cast<long long>(P.m) * wp);
        stack_kernel<T><<<grid, kCopyThreads, 0, ctx.stream>>>(as_const(Rp), as_const(Ap), P, band);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
        if ((err = geqrf(ctx, P, t.tau, t.solver, solver_bytes, t.info)) != cudaSuccess) return err;
        unstack_kernel<T><<<grid, kCopyThreads, 0, ctx.stream>>>(P, Rp, Ap, band);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
        const TileView<T> V2 = P.sub(wp, 0, rows, wp);
        err = block_t_factors<T>(ctx, as_const(V2), false, t.tau, ib, t.t, Tf.sub(0, p0, Tf.m, wp), true);
        if (err != cudaSuccess) return err;
        const int right = n - p0 - wp;
        for (int j0 = p0; j0 < p0 + wp && right > 0; j0 += ib) {
            // TTQRT: block J's reflectors reach rows 0..j0+b-1 of A, all above the diagonal of
            // the columns on the panel's right.
            const int b = std::min(ib, p0 + wp - j0), rj = triangle ? std::min(m, j0 + b) : m;
            err = apply_pair_block<T>(ctx, true, as_const(V2.sub(0, j0 - p0, rj, b)), as_const(Tf.sub(0, j0, b, b)),
                                      R.sub(j0, p0 + wp, b, right), A.sub(0, p0 + wp, rj, right), t.apply);
            if (err != cudaSuccess) return err;
        }
    }
    return cudaSuccess;
}

}  // namespace

template <class T>
std::size_t qr_workspace_bytes(cusolverDnHandle_t solver, cusolverDnParams_t params, int m, int n, int ib) {
    if (m <= 0 || n <= 0) return 0;
    const QrContext probe{nullptr, solver, params, nullptr, nullptr, 0};
    const int k = std::min(m, n);
    // GEQRT on tiles up to m x n (cuSOLVER's buffer also for the square k x k, in case its size
    // is not monotone in the shape); UNMQR on C up to m x n, whatever V's width (K <= m); TSQRT
    // with A up to m x n; TSMQR's W (ib x n, ib not clamped: V2's width is not known here).
    std::size_t geqrf_max = 0;
    for (const auto& [mm, nn] : {std::pair{m, n}, std::pair{k, k}}) {
        std::size_t b = 0;
        if (geqrf_bytes(probe, data_type<T>(), mm, nn, &b) != cudaSuccess) return 0;
        geqrf_max = std::max(geqrf_max, b);
    }
    // TTQRT shares TSQRT's layout (its panels stack at most as many rows) with its own solver
    // buffer; TTMQR's masked V2 block is m x ib.
    std::size_t tsqrt_solver = 0, ttqrt_solver = 0;
    if (tsqrt_solver_bytes(probe, data_type<T>(), m, n, clamp_ib(ib, n), &tsqrt_solver) != cudaSuccess) return 0;
    if (ttqrt_solver_bytes(probe, data_type<T>(), std::min(m, n), n, clamp_ib(ib, n), &ttqrt_solver) != cudaSuccess)
        return 0;

    Carver g(nullptr), u(nullptr), t(nullptr), s(nullptr), tt(nullptr);
    geqrt_layout<T>(g, m, n, clamp_ib(ib, k), geqrf_max);
    unmqr_layout<T>(u, m, n, clamp_ib(ib, m));
    tsqrt_layout<T>(t, m, n, clamp_ib(ib, n), std::max(tsqrt_solver, ttqrt_solver));
    take_apply_buffers<T>(s, std::max(ib, 1), n);
    ttmqr_layout<T>(tt, m, n, std::max(ib, 1));
    return std::max({g.used(), u.used(), t.used(), s.used(), tt.used()});
}

template <class T>
cudaError_t geqrt(const QrContext& ctx, int ib, TileView<T> A, TileView<T> Tf) {
    const int m = A.m, n = A.n, K = std::min(m, n);
    if (K == 0) return cudaSuccess;
    ib = clamp_ib(ib, K);
    std::size_t solver_bytes = 0;
    cudaError_t err = geqrf_bytes(ctx, data_type<T>(), m, n, &solver_bytes);
    if (err != cudaSuccess) return err;
    Carver w(ctx.work);
    const GeqrtWork<T> g = geqrt_layout<T>(w, m, n, ib, solver_bytes);
    if (ctx.work == nullptr || w.used() > ctx.work_bytes) return cudaErrorInvalidValue;

    // cuSOLVER's blocked QR of the whole tile gives the same reflectors as dgeqrt's ib-blocks
    // (in exact arithmetic); the T factors of the ib-blocks are then formed from V and tau.
    if ((err = geqrf(ctx, A, g.tau, g.solver, solver_bytes, g.info)) != cudaSuccess) return err;
    const TileView<T> V{g.V, m, K, m};
    // The reflectors made explicit: V's entries below the diagonal, ones on it, zeros above (R).
    if ((err = explicit_unit_lower(as_const(A.sub(0, 0, m, K)), V, ctx.stream)) != cudaSuccess) return err;
    return block_t_factors<T>(ctx, as_const(V), true, g.tau, ib, g.t, Tf, false);
}

template <class T>
cudaError_t unmqr(const QrContext& ctx, char side, char trans, int ib, TileView<const T> V, TileView<const T> Tf,
                  TileView<T> C) {
    if (side != 'L' && side != 'l') return cudaErrorInvalidValue;
    const int K = std::min(V.m, V.n), m = C.m;
    if (K == 0 || C.empty()) return cudaSuccess;
    if (V.m != m) return cudaErrorInvalidValue;
    ib = clamp_ib(ib, K);
    Carver w(ctx.work);
    const UnmqrWork<T> u = unmqr_layout<T>(w, m, C.n, ib);
    if (ctx.work == nullptr || w.used() > ctx.work_bytes) return cudaErrorInvalidValue;

    // Q^T = H(last)^T ... H(0)^T applies the blocks first to last; Q the other way round.
    const bool tr = transposed(trans);
    const int nblocks = (K + ib - 1) / ib;
    for (int step = 0; step < nblocks; ++step) {
        const int j0 = (tr ? step : nblocks - 1 - step) * ib, b = std::min(ib, K - j0), rows = m - j0;
        const TileView<T> Vj{u.V, rows, b, rows};
        cudaError_t err = explicit_unit_lower(V.sub(j0, j0, rows, b), Vj, ctx.stream);
        if (err == cudaSuccess)
            err = apply_block<T>(ctx, tr, as_const(Vj), Tf.sub(0, j0, b, b), C.sub(j0, 0, rows, C.n), u.apply);
        if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
}

template <class T>
cudaError_t tsqrt(const QrContext& ctx, int ib, TileView<T> R, TileView<T> A, TileView<T> Tf) {
    return pair_qrt(ctx, ib, R, A, Tf, false);
}

template <class T>
cudaError_t tsmqr(const QrContext& ctx, char trans, int ib, TileView<T> A1, TileView<T> A2, TileView<const T> V2,
                  TileView<const T> Tf) {
    const int K = V2.n, n = A1.n, m = A2.m;
    // As LAPACK's tpmqrt: nothing to do without reflectors, columns or rows in the lower tile.
    if (K == 0 || n == 0 || m == 0) return cudaSuccess;
    if (A1.m < K || A2.n != n || V2.m != m) return cudaErrorInvalidValue;
    ib = clamp_ib(ib, K);
    Carver w(ctx.work);
    const ApplyBuffers<T> buf = take_apply_buffers<T>(w, ib, n);
    if (ctx.work == nullptr || w.used() > ctx.work_bytes) return cudaErrorInvalidValue;

    const bool tr = transposed(trans);
    const int nblocks = (K + ib - 1) / ib;
    for (int step = 0; step < nblocks; ++step) {
        const int j0 = (tr ? step : nblocks - 1 - step) * ib, b = std::min(ib, K - j0);
        const cudaError_t err =
            apply_pair_block<T>(ctx, tr, V2.sub(0, j0, m, b), Tf.sub(0, j0, b, b), A1.sub(j0, 0, b, n), A2, buf);
        if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
}

template <class T>
cudaError_t ttqrt(const QrContext& ctx, int ib, TileView<T> R, TileView<T> A, TileView<T> Tf) {
    return pair_qrt(ctx, ib, R, A, Tf, true);
}

template <class T>
cudaError_t ttmqr(const QrContext& ctx, char trans, int ib, TileView<T> A1, TileView<T> A2, TileView<const T> V2,
                  TileView<const T> Tf) {
    const int K = V2.n, n = A1.n, m = std::min(V2.m, K);
    if (K == 0 || n == 0 || m == 0) return cudaSuccess;
    if (A1.m < K || A2.n != n || V2.m != A2.m) return cudaErrorInvalidValue;
    ib = clamp_ib(ib, K);
    Carver w(ctx.work);
    const TtmqrWork<T> t = ttmqr_layout<T>(w, m, n, ib);
    if (ctx.work == nullptr || w.used() > ctx.work_bytes) return cudaErrorInvalidValue;

    // Block J touches rows 0..j0+b-1 of A2 only; its V2 is copied with the rest of the tile's
    // lower part (another GEQRT's reflectors) replaced by zeros.
    const bool tr = transposed(trans);
    const int nblocks = (K + ib - 1) / ib;
    for (int step = 0; step < nblocks; ++step) {
        const int j0 = (tr ? step : nblocks - 1 - step) * ib, b = std::min(ib, K - j0), rj = std::min(m, j0 + b);
        const TileView<T> Vj{t.V, rj, b, rj};
        upper_band_copy_kernel<T><<<copy_blocks(static_cast<long long>(rj) * b), kCopyThreads, 0, ctx.stream>>>(
            V2.sub(0, j0, rj, b), j0, Vj);
        cudaError_t err = cudaGetLastError();
        if (err == cudaSuccess)
            err = apply_pair_block<T>(ctx, tr, as_const(Vj), Tf.sub(0, j0, b, b), A1.sub(j0, 0, b, n),
                                      A2.sub(0, 0, rj, n), t.apply);
        if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
}

template std::size_t qr_workspace_bytes<float>(cusolverDnHandle_t, cusolverDnParams_t, int, int, int);
template cudaError_t geqrt<float>(const QrContext&, int, TileView<float>, TileView<float>);
template cudaError_t unmqr<float>(const QrContext&, char, char, int, TileView<const float>, TileView<const float>,
                                  TileView<float>);
template cudaError_t tsqrt<float>(const QrContext&, int, TileView<float>, TileView<float>, TileView<float>);
template cudaError_t tsmqr<float>(const QrContext&, char, int, TileView<float>, TileView<float>, TileView<const float>,
                                  TileView<const float>);
template std::size_t qr_workspace_bytes<double>(cusolverDnHandle_t, cusolverDnParams_t, int, int, int);
template cudaError_t geqrt<double>(const QrContext&, int, TileView<double>, TileView<double>);
template cudaError_t unmqr<double>(const QrContext&, char, char, int, TileView<const double>, TileView<const double>,
                                   TileView<double>);
template cudaError_t tsqrt<double>(const QrContext&, int, TileView<double>, TileView<double>, TileView<double>);
template cudaError_t tsmqr<double>(const QrContext&, char, int, TileView<double>, TileView<double>,
                                   TileView<const double>, TileView<const double>);

template cudaError_t ttqrt<float>(const QrContext&, int, TileView<float>, TileView<float>, TileView<float>);
template cudaError_t ttmqr<float>(const QrContext&, char, int, TileView<float>, TileView<float>, TileView<const float>,
                                  TileView<const float>);
template cudaError_t ttqrt<double>(const QrContext&, int, TileView<double>, TileView<double>, TileView<double>);
template cudaError_t ttmqr<double>(const QrContext&, char, int, TileView<double>, TileView<double>,
                                   TileView<const double>, TileView<const double>);

}  // namespace starfact::cuda
