// Batched Householder QR (issue 5): geqrf (LAPACK's V/tau layout) and the least-squares solve
// geqrs, on arrays of device matrices.
//
// geqrf is blocked twice. A panel of at most kQr.ib columns is factored by one thread block,
// in shared memory when it fits (else in place in global memory): one warp owns a column,
// computes its reflector (LAPACK's larfg: scaled norm, beta = -sign(alpha) ||(alpha, x)||,
// tau = 0 for x = 0, safmin rescaling) and the other warps apply it to the columns they own,
// one block barrier per column. The same kernel forms the panel's T (larft, forward,
// columnwise, from V^T V) and writes V (unit lower, explicit zeros) and Y = V T to the
// workspace. The columns of the outer block (kQr.nb wide) right of the panel are updated with
// two batched gemms (W = Y^T C, C -= V W); the panels' Y are merged into the outer block's
// (Y2 <- Y2 - Y1 (V1^T Y2), which is V [T1 T12; 0 T2] without forming T12), so the trailing
// matrix sees one block reflector of width nb: two large batched gemms per outer step.
//
// geqrs gives each (matrix, right-hand side) pair one warp: Q^T b by the reflectors in order,
// then back substitution with R, the column in shared memory when it fits.
#include <algorithm>
#include <cfloat>
#include <climits>

#include "batched/cuda/common.cuh"

namespace starfact::batched::cuda {
namespace {

/// Size thresholds of the batched QR kernels.
struct QrTable {
    int ib;                          ///< panel width factored by one thread block (<= 32)
    int nb;                          ///< outer block width: the trailing update's rank (multiple of ib)
    std::size_t panel_smem_bytes;    ///< a panel up to this size is factored in shared memory
    std::size_t chunk_bytes;         ///< the batch runs in chunks whose V, Y, W fit in this
    int max_panel_warps;             ///< warps of a panel thread block
    int geqrs_warps;                 ///< warps (one right-hand side each) per geqrs thread block
    std::size_t geqrs_smem_bytes;    ///< geqrs keeps its columns in shared memory up to this
};
constexpr QrTable kQr{32, 128, 200 * 1024, std::size_t(2) << 30, 16, 4, 96 * 1024};
static_assert(kQr.ib <= 32 && kQr.nb % kQr.ib == 0, "one warp holds a column of the panel's T");

template <class T>
struct Safe;
template <>
struct Safe<double> {
    // LAPACK's larfg threshold: dlamch('S') / dlamch('E').
    static constexpr double min = DBL_MIN / (DBL_EPSILON / 2);
};
template <>
struct Safe<float> {
    static constexpr float min = FLT_MIN / (FLT_EPSILON / 2);
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

/// ||col[from..to)||_2 by one warp, scaled by the largest entry so it neither overflows nor
/// underflows; NaN when an entry is NaN.
template <class T>
__device__ T warp_norm(const T* col, int from, int to, int lane) {
    T scale = 0;
    for (int i = from + lane; i < to; i += 32) scale = nan_max(scale, fabs(col[i]));
    scale = warp_nan_max(scale);
    if (scale == 0) return 0;
    T s = 0;
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

/// col <- (I - tau v v^T) col by one warp, v = [1; col_v[c+1..mp)], rows c..mp-1.
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

/// Householder QR of the mp x iw panel P (leading dimension ldp) by the whole block; tau to
/// s_tau. Column c belongs to warp c % warps, which also computes its reflector: once a
/// reflector is published (the one barrier of a step), each warp applies it to its own
/// columns, and the owner of the next column can go on to that column's reflector at once.
template <class T>
__device__ void factor_panel(T* P, int ldp, int mp, int iw, T* s_tau) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int c = 0; c < iw; ++c) {
        if (warp == c % warps) {
            const T t = warp_larfg(P + static_cast<long long>(c) * ldp, c, mp, lane);
            if (lane == 0) s_tau[c] = t;
        }
        __syncthreads();
        const T t = s_tau[c];
        if (t == 0) continue;  // H = I, as LAPACK's larf
        const T* v = P + static_cast<long long>(c) * ldp;
        int first = c + 1 + ((warp - (c + 1)) % warps + warps) % warps;
        for (int cc = first; cc < iw; cc += warps) warp_apply(v, t, P + static_cast<long long>(cc) * ldp, c, mp, lane);
    }
    __syncthreads();
}

/// The panel's T (iw x iw upper, LAPACK's larft forward columnwise) into s_T (leading
/// dimension 32), then V (explicit unit lower trapezoid, zeros above) and Y = V T into the
/// workspace columns of this panel: rows 0..above-1 zero, rows above..above+mp-1 the panel's.
template <class T>
__device__ void write_v_and_y(const T* P, int ldp, int mp, int iw, const T* s_tau, T* s_T, T* V, T* Y, int ldv,
                              int above) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    // G(a, b) = v_a^T v_b for a < b, in the strict upper part of s_T.
    for (int p = warp; p < iw * iw; p += warps) {
        const int a = p % iw, b = p / iw;
        if (a >= b) continue;
        const T* va = P + static_cast<long long>(a) * ldp;
        const T* vb = P + static_cast<long long>(b) * ldp;
        T s = 0;
        for (int r = b + 1 + lane; r < mp; r += 32) s += va[r] * vb[r];
        s = warp_sum(s);
        if (lane == 0) s_T[a + 32 * b] = s + va[b];
    }
    __syncthreads();
    // T(0:c, c) = -tau_c T(0:c, 0:c) G(0:c, c), T(c, c) = tau_c, one column at a time.
    if (warp == 0) {
        for (int c = 0; c < iw; ++c) {
            T t = 0;
            if (lane < c)
                for (int l = lane; l < c; ++l) t += s_T[lane + 32 * l] * s_T[l + 32 * c];
            __syncwarp();
            if (lane < c) s_T[lane + 32 * c] = -s_tau[c] * t;
            if (lane == c) s_T[c + 32 * c] = s_tau[c];
            if (lane > c) s_T[lane + 32 * c] = 0;
            __syncwarp();
        }
    }
    __syncthreads();
    for (int r = threadIdx.x; r < above; r += blockDim.x)
        for (int c = 0; c < iw; ++c) {
            V[r + static_cast<long long>(c) * ldv] = 0;
            Y[r + static_cast<long long>(c) * ldv] = 0;
        }
    for (int r = threadIdx.x; r < mp; r += blockDim.x) {
        T v[32];
#pragma unroll
        for (int l = 0; l < 32; ++l) {
            v[l] = l < iw ? (r > l ? P[r + static_cast<long long>(l) * ldp] : (r == l ? T(1) : T(0))) : T(0);
        }
        T* vrow = V + above + r;
        T* yrow = Y + above + r;
        for (int c = 0; c < iw; ++c) {
            T y = 0;
#pragma unroll
            for (int l = 0; l < 32; ++l) y += v[l] * s_T[l + 32 * c];
            vrow[static_cast<long long>(c) * ldv] = r > c ? P[r + static_cast<long long>(c) * ldp] : (r == c ? T(1) : T(0));
            yrow[static_cast<long long>(c) * ldv] = y;
        }
    }
}

/// One panel of every matrix of the batch: columns row0..row0+iw-1, rows row0..m-1. When V is
/// not null, also V and Y (workspace, leading dimension ldv, matrix b at offset b * vstride,
/// this panel's columns at column `above`, its top row at row `above`).
template <class T>
__global__ void __launch_bounds__(512) panel_kernel(T* const* A, int lda, int m, int row0, int iw, T* tau, int ntau,
                                                   T* V, T* Y, int ldv, long long vstride, int above, bool in_smem) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ T s_T[32 * 32];
    __shared__ T s_tau[32];
    const int b = blockIdx.x;
    const int mp = m - row0;
    T* Ag = A[b] + row0 + static_cast<long long>(row0) * lda;
    T* P = Ag;
    int ldp = lda;
    if (in_smem) {
        P = reinterpret_cast<T*>(smem_raw);
        ldp = mp;
        for (int c = 0; c < iw; ++c)
            for (int r = threadIdx.x; r < mp; r += blockDim.x) P[r + c * mp] = Ag[r + static_cast<long long>(c) * lda];
        __syncthreads();
    }
    factor_panel(P, ldp, mp, iw, s_tau);
    if (static_cast<int>(threadIdx.x) < iw) tau[static_cast<long long>(b) * ntau + row0 + threadIdx.x] = s_tau[threadIdx.x];
    if (V != nullptr) {
        const long long off = b * vstride + static_cast<long long>(above) * ldv;
        write_v_and_y(P, ldp, mp, iw, s_tau, s_T, V + off, Y + off, ldv, above);
    }
    if (in_smem)
        for (int c = 0; c < iw; ++c)
            for (int r = threadIdx.x; r < mp; r += blockDim.x) Ag[r + static_cast<long long>(c) * lda] = P[r + c * mp];
}

/// One warp per (matrix, right-hand side): info from R's diagonal, then Q^T b and R^{-1}.
template <class T>
__global__ void geqrs_kernel(int m, int n, int nrhs, const T* const* A, int lda, const T* tau, T* const* B, int ldb,
                             int* info, int count, bool in_smem) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int ncols = max(nrhs, 1);
    const long long g = static_cast<long long>(blockIdx.x) * (blockDim.x >> 5) + warp;
    if (g >= static_cast<long long>(count) * ncols) return;  // whole warps only: no block barrier below
    const int b = static_cast<int>(g / ncols), col = static_cast<int>(g % ncols);
    const T* Ab = A[b];
    int first = INT_MAX;
    for (int j = lane; j < n; j += 32)
        if (Ab[j + static_cast<long long>(j) * lda] == T(0)) {
            first = j + 1;
            break;
        }
    for (int o = 16; o > 0; o /= 2) first = min(first, __shfl_xor_sync(kFull, first, o));
    if (col == 0 && lane == 0) info[b] = first == INT_MAX ? 0 : first;
    if (first != INT_MAX || col >= nrhs) return;
    T* Bg = B[b] + static_cast<long long>(col) * ldb;
    T* x = Bg;
    if (in_smem) {
        x = reinterpret_cast<T*>(smem_raw) + static_cast<long long>(warp) * m;
        for (int i = lane; i < m; i += 32) x[i] = Bg[i];
        __syncwarp();
    }
    const T* tb = tau + static_cast<long long>(b) * n;
    for (int j = 0; j < n; ++j) {
        const T t = tb[j];
        if (t == T(0)) continue;
        warp_apply(Ab + static_cast<long long>(j) * lda, t, x, j, m, lane);
    }
    for (int j = n - 1; j >= 0; --j) {
        const T* r = Ab + static_cast<long long>(j) * lda;
        const T xj = x[j] / r[j];
        __syncwarp();
        if (lane == 0) x[j] = xj;
        for (int i = lane; i < j; i += 32) x[i] -= xj * r[i];
        __syncwarp();
    }
    if (in_smem)
        for (int i = lane; i < m; i += 32) Bg[i] = x[i];
}

cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            double alpha, const double* const* A, int lda, const double* const* B, int ldb,
                            double beta, double* const* C, int ldc, int count) {
    return cublasDgemmBatched(h, ta, tb, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc, count);
}
cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            float alpha, const float* const* A, int lda, const float* const* B, int ldb, float beta,
                            float* const* C, int ldc, int count) {
    return cublasSgemmBatched(h, ta, tb, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc, count);
}

/// Host pointer mode for our alpha/beta while the call runs; the caller's mode afterwards.
class HostPointerMode {
public:
    explicit HostPointerMode(cublasHandle_t h) : h_(h) {
        detail::check(cublasGetPointerMode(h_, &saved_), "cublasGetPointerMode");
        detail::check(cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
    }
    ~HostPointerMode() { cublasSetPointerMode(h_, saved_); }
    HostPointerMode(const HostPointerMode&) = delete;
    HostPointerMode& operator=(const HostPointerMode&) = delete;

private:
    cublasHandle_t h_;
    cublasPointerMode_t saved_ = CUBLAS_POINTER_MODE_HOST;
};

/// How geqrf runs a given problem: the outer block, whether it needs the workspace, and how
/// many matrices go through it at once.
struct QrPlan {
    int w = 0;        ///< outer block width actually used (min(nb, n))
    bool blocked = false;
    int chunk = 0;
    std::size_t v_elems = 0, w_elems = 0;  ///< per matrix, V (= Y) and W

    template <class T>
    static QrPlan make(int m, int n, int count) {
        QrPlan p;
        p.w = std::min(kQr.nb, n);
        p.blocked = n > kQr.ib;
        p.chunk = count;
        if (!p.blocked || count <= 0) return p;
        p.v_elems = static_cast<std::size_t>(m) * p.w;
        p.w_elems = static_cast<std::size_t>(p.w) * n;
        const std::size_t per = (2 * p.v_elems + p.w_elems) * sizeof(T) + 3 * sizeof(T*);
        p.chunk = static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(count, kQr.chunk_bytes / per)));
        return p;
    }
    template <class T>
    std::size_t bytes() const {
        if (!blocked) return 0;
        const std::size_t c = static_cast<std::size_t>(chunk);
        return 2 * detail::WorkspaceCarver::round(c * v_elems * sizeof(T)) +
               detail::WorkspaceCarver::round(c * w_elems * sizeof(T)) + 3 * detail::WorkspaceCarver::round(c * sizeof(T*));
    }
};

template <class T>
void launch_panel(const Launch& launch, T* const* A, int lda, int m, int row0, int iw, T* tau, int ntau, T* V, T* Y,
                  int ldv, long long vstride, int above, int count) {
    const int mp = m - row0;
    const std::size_t bytes = static_cast<std::size_t>(mp) * iw * sizeof(T);
    const bool in_smem = bytes <= kQr.panel_smem_bytes;
    const std::size_t smem = in_smem ? bytes : 0;
    if (smem > 48 * 1024)
        detail::check(cudaFuncSetAttribute(panel_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem)),
                      "geqrf panel shared memory");
    // Enough warps to own one or two columns each, but no more than the rows keep busy.
    const int warps = std::max(1, std::min({kQr.max_panel_warps, (iw + 1) / 2, 4 * detail::ceil_div(mp, 32)}));
    panel_kernel<T><<<count, 32 * warps, smem, launch.stream>>>(A, lda, m, row0, iw, tau, ntau, V, Y, ldv, vstride,
                                                              above, in_smem);
    detail::check_launch("geqrf panel");
}

/// Pointer arrays for one batched gemm: three device arrays of `count` pointers.
template <class T>
struct GemmPointers {
    T** a;
    T** b;
    T** c;
};

/// geqrf of `count` matrices with the workspace pieces of the plan.
template <class T>
void geqrf_chunk(const Launch& launch, const QrPlan& plan, int m, int n, T* const* A, int lda, T* tau, int count, T* V,
                 T* Y, T* W, GemmPointers<T> p) {
    cudaStream_t s = launch.stream;
    const int ib = kQr.ib, nbw = plan.w;
    const long long vs = static_cast<long long>(plan.v_elems), ws = static_cast<long long>(plan.w_elems);
    const cublasOperation_t N = CUBLAS_OP_N, Tr = CUBLAS_OP_T;
    strided_pointers(p.b, W, ws, count, s);  // W is the gemms' middle operand throughout
    for (int k = 0; k < n; k += nbw) {
        const int w = std::min(nbw, n - k), mp = m - k;
        const bool trailing = k + w < n;
        for (int j = 0; j < w; j += ib) {
            const int iw = std::min(ib, w - j);
            const bool right = k + j + iw < n;
            launch_panel<T>(launch, A, lda, m, k + j, iw, tau, n, right ? V : nullptr, Y, m, vs, j, count);
            const int nc = w - j - iw;
            if (nc > 0) {
                // Rest of the outer block: C -= V_j (Y_j^T C), Y_j = V_j T_j.
                detail::offset_pointers(p.c, A, (k + j) + static_cast<long long>(k + j + iw) * lda, count, s);
                strided_pointers(p.a, Y + j + static_cast<long long>(j) * m, vs, count, s);
                detail::check(gemm_batched(launch.cublas, Tr, N, iw, nc, mp - j, T(1), p.a, m, p.c, lda, T(0), p.b,
                                           ib, count),
                              "geqrf gemm W = Y^T C");
                strided_pointers(p.a, V + j + static_cast<long long>(j) * m, vs, count, s);
                detail::check(gemm_batched(launch.cublas, N, N, mp - j, nc, iw, T(-1), p.a, m, p.b, ib, T(1), p.c,
                                           lda, count),
                              "geqrf gemm C -= V W");
            }
            if (trailing && j > 0) {
                // Y(:, j:j+iw) -= Y(:, 0:j) (V(:, 0:j)^T Y(:, j:j+iw)): the block reflector of
                // columns 0..j+iw-1 of the outer block is I - V Y^T.
                strided_pointers(p.a, V + j, vs, count, s);
                strided_pointers(p.c, Y + j + static_cast<long long>(j) * m, vs, count, s);
                detail::check(gemm_batched(launch.cublas, Tr, N, j, iw, mp - j, T(1), p.a, m, p.c, m, T(0), p.b, nbw,
                                           count),
                              "geqrf gemm Z = V^T Y");
                strided_pointers(p.a, Y, vs, count, s);
                strided_pointers(p.c, Y + static_cast<long long>(j) * m, vs, count, s);
                detail::check(gemm_batched(launch.cublas, N, N, mp, iw, j, T(-1), p.a, m, p.b, nbw, T(1), p.c, m,
                                           count),
                              "geqrf gemm Y -= Y Z");
            }
        }
        if (trailing) {
            const int nc = n - k - w;
            detail::offset_pointers(p.c, A, k + static_cast<long long>(k + w) * lda, count, s);
            strided_pointers(p.a, Y, vs, count, s);
            detail::check(gemm_batched(launch.cublas, Tr, N, w, nc, mp, T(1), p.a, m, p.c, lda, T(0), p.b, nbw, count),
                          "geqrf trailing gemm W = Y^T C");
            strided_pointers(p.a, V, vs, count, s);
            detail::check(gemm_batched(launch.cublas, N, N, mp, nc, w, T(-1), p.a, m, p.b, nbw, T(1), p.c, lda, count),
                          "geqrf trailing gemm C -= V W");
        }
    }
}

}  // namespace

template <class T>
std::size_t geqrf_workspace(int m, int n, int count) {
    if (count <= 0 || n <= 0) return 0;
    return QrPlan::make<T>(m, n, count).template bytes<T>();
}

template <class T>
void geqrf(const Launch& launch, int m, int n, T* const* A, int lda, T* tau, int count) {
    if (count <= 0 || n <= 0) return;
    const QrPlan plan = QrPlan::make<T>(m, n, count);
    if (!plan.blocked) {
        launch_panel<T>(launch, A, lda, m, 0, n, tau, n, nullptr, nullptr, m, 0, 0, count);
        return;
    }
    detail::WorkspaceCarver carve(launch);
    const std::size_t c = static_cast<std::size_t>(plan.chunk);
    T* V = carve.take<T>(c * plan.v_elems);
    T* Y = carve.take<T>(c * plan.v_elems);
    T* W = carve.take<T>(c * plan.w_elems);
    GemmPointers<T> p{carve.take<T*>(c), carve.take<T*>(c), carve.take<T*>(c)};
    HostPointerMode mode(launch.cublas);
    for (int first = 0; first < count; first += plan.chunk) {
        const int cnt = std::min(plan.chunk, count - first);
        geqrf_chunk<T>(launch, plan, m, n, A + first, lda, tau + static_cast<long long>(first) * n, cnt, V, Y, W, p);
    }
}

template <class T>
std::size_t geqrs_workspace(int, int, int, int) {
    return 0;
}

template <class T>
void geqrs(const Launch& launch, int m, int n, int nrhs, const T* const* A, int lda, const T* tau, T* const* B,
           int ldb, int* info, int count) {
    if (count <= 0) return;
    const int warps = kQr.geqrs_warps;
    const std::size_t bytes = static_cast<std::size_t>(warps) * m * sizeof(T);
    const bool in_smem = bytes <= kQr.geqrs_smem_bytes;
    const std::size_t smem = in_smem ? bytes : 0;
    if (smem > 48 * 1024)
        detail::check(
            cudaFuncSetAttribute(geqrs_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
            "geqrs shared memory");
    const long long pairs = static_cast<long long>(count) * std::max(nrhs, 1);
    const long long blocks = (pairs + warps - 1) / warps;
    geqrs_kernel<T><<<static_cast<unsigned>(blocks), 32 * warps, smem, launch.stream>>>(m, n, nrhs, A, lda, tau, B, ldb,
                                                                                      info, count, in_smem);
    detail::check_launch("geqrs");
}

template std::size_t geqrf_workspace<float>(int, int, int);
template std::size_t geqrf_workspace<double>(int, int, int);
template void geqrf<float>(const Launch&, int, int, float* const*, int, float*, int);
template void geqrf<double>(const Launch&, int, int, double* const*, int, double*, int);
template std::size_t geqrs_workspace<float>(int, int, int, int);
template std::size_t geqrs_workspace<double>(int, int, int, int);
template void geqrs<float>(const Launch&, int, int, int, const float* const*, int, const float*, float* const*, int,
                           int*, int);
template void geqrs<double>(const Launch&, int, int, int, const double* const*, int, const double*, double* const*,
                            int, int*, int);

}  // namespace starfact::batched::cuda
