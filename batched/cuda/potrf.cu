// Batched Cholesky (issue 5): potrf and potrs on arrays of device matrices, our own kernels.
//
// Orders up to kLeafMax: one kernel, one pass over memory. Each matrix gets a group of lanes
// inside one warp (one lane per row, the row in registers, sized by a compile-time bound), its
// triangle is staged through shared memory so that both triangles load and store coalesced, and
// the right-looking steps broadcast the current column through shared memory.
//
// Larger orders: the recursive formulation over the whole batch (each step one launch for all
// matrices), cut at kLeafMax columns:
//   potrf(A) = potrf(A11); A21 <- A21 L11^{-T}; A22 <- A22 - A21 A21^T; potrf(A22)
// The triangular solves recurse the same way down to 32-column leaves (our kernel: the leaf's
// triangle in shared memory, one row of the right-hand side per thread), with the off-diagonal
// updates as cuBLAS batched gemms; the symmetric update is the same recursion over its
// rectangles (batched gemms) plus our kernel for its 32 x 32 diagonal blocks, which writes only
// their named triangle. The upper case is the lower one read through transposed indices: every
// kernel and gemm takes a View that maps (i, j) of the lower factor L = U^T to memory.
//
// A matrix whose leading minor fails keeps its info from the leaf that saw it; the later leaves
// and solves skip it (the batched gemms still touch its trailing part, which LAPACK leaves
// undefined too). Its leading (info-1) x (info-1) factor is final.
#include <cuda_runtime.h>

#include <cstddef>
#include <iterator>

#include "batched/cuda/common.cuh"

namespace starfact::batched::cuda {
namespace {

// ---- Size thresholds (the one table a tuning sweep changes) ---------------------------------

/// Compile-time bounds of the register kernel: order n runs in the smallest bound >= n.
constexpr int kLeafBounds[] = {4, 8, 16, 32};
/// The largest order factored in registers; also the width of the recursion's leaves.
constexpr int kLeafMax = kLeafBounds[std::size(kLeafBounds) - 1];
/// Threads per block of the register kernel (several matrices per block when n <= 16).
constexpr int kLeafThreads = 128;
/// Rows of the right-hand side per block in the leaf triangular solve.
constexpr int kSolveRows = 64;
/// Threads per block of the diagonal-block symmetric update.
constexpr int kSyrkThreads = 256;

__host__ __device__ constexpr int pow2_at_least(int n) {
    int p = 1;
    while (p < n) p *= 2;
    return p;
}

// ---- Views --------------------------------------------------------------------------------

/// Element (i, j) of the lower factor's view of every matrix: ptr[b] + off + i * rs + j * cs.
/// trans means the matrix in memory is the transpose of the view (upper storage, or B^T).
struct View {
    long long off = 0;
    int rs = 1;
    int cs = 1;
    int ld = 1;
    bool trans = false;

    __host__ __device__ long long idx(int i, int j) const {
        return off + static_cast<long long>(i) * rs + static_cast<long long>(j) * cs;
    }
    View at(int i, int j) const {
        View v = *this;
        v.off = idx(i, j);
        return v;
    }
};

View make_view(int ld, bool trans) {
    View v;
    v.ld = ld;
    v.trans = trans;
    v.rs = trans ? ld : 1;
    v.cs = trans ? 1 : ld;
    return v;
}

// ---- The register kernel: whole factorization of orders <= NB ------------------------------

/// Factors the n x n block at view v of every matrix (n <= NB). info_base is the block's
/// offset on the diagonal; when after_first is set, a matrix whose info is already nonzero is
/// skipped (an earlier block failed), else info is written for every matrix.
template <class T, int NB>
__global__ void __launch_bounds__(kLeafThreads)
    potrf_leaf_kernel(T* const* A, View v, int n, int* info, int info_base, bool after_first, int count) {
    constexpr int P = pow2_at_least(NB);  // lanes per matrix, inside one warp
    constexpr int G = kLeafThreads / P;   // matrices per block
    constexpr int LDS = NB + 1;
    __shared__ T s_mat[G][NB * LDS];
    __shared__ T s_col[G][2 * P];

    const int g = threadIdx.x / P;
    const int r = threadIdx.x % P;
    const int b = blockIdx.x * G + g;
    bool active = b < count;
    if (active && after_first) active = info[b] == 0;
    const int nn = active ? n : 0;  // inactive groups compute on the identity and store nothing
    T* a = active ? A[b] + v.off : nullptr;
    T* s = s_mat[g];

    // Stored column o, rows r: the same addresses for both orientations (see View).
    for (int o = 0; o < nn; ++o) {
        const bool in = r < nn && (v.trans ? r <= o : r >= o);
        if (in) {
            const T x = a[r + static_cast<long long>(o) * v.ld];
            if (v.trans)
                s[o + r * LDS] = x;
            else
                s[r + o * LDS] = x;
        }
    }
    __syncwarp();

    T rA[NB];
#pragma unroll
    for (int j = 0; j < NB; ++j) rA[j] = (r < nn && j < nn && j <= r) ? s[r + j * LDS] : T(r == j ? 1 : 0);

    bool alive = true;
    int fail = 0;
    T* col = s_col[g];
#pragma unroll
    for (int j = 0; j < NB; ++j) {
        T* buf = col + (j & 1) * P;  // two buffers: step j+1 writes while no one reads step j's
        if (r >= j && r < NB) buf[r] = rA[j];
        __syncwarp();
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

#pragma unroll
    for (int j = 0; j < NB; ++j)
        if (r < nn && j <= r) s[r + j * LDS] = rA[j];
    __syncwarp();
    for (int o = 0; o < nn; ++o) {
        const bool in = r < nn && (v.trans ? r <= o : r >= o);
        if (in) a[r + static_cast<long long>(o) * v.ld] = v.trans ? s[o + r * LDS] : s[r + o * LDS];
    }
    if (r == 0 && b < count) {
        if (!after_first)
            info[b] = fail ? info_base + fail : 0;
        else if (active && fail)
            info[b] = info_base + fail;
    }
}

template <class T, std::size_t I = 0>
void launch_leaf(cudaStream_t stream, int n, T* const* A, View v, int* info, int info_base, bool after_first,
                 int count) {
    constexpr int NB = kLeafBounds[I];
    if constexpr (I + 1 < std::size(kLeafBounds)) {
        if (n > NB) return launch_leaf<T, I + 1>(stream, n, A, v, info, info_base, after_first, count);
    }
    constexpr int G = kLeafThreads / pow2_at_least(NB);
    potrf_leaf_kernel<T, NB>
        <<<detail::ceil_div(count, G), kLeafThreads, 0, stream>>>(A, v, n, info, info_base, after_first, count);
    detail::check_launch("potrf leaf kernel");
}

// ---- Leaf triangular solve from the right: X L^T = B (kTransL) or X L = B -------------------

/// X is m x k (view xv), L is k x k lower (view lv), k <= kLeafMax; X is overwritten. One
/// block per (matrix, kSolveRows rows of X); one row per thread, in registers. Matrices with a
/// nonzero info (when info is given) are skipped.
template <class T, bool kTransL>
__global__ void __launch_bounds__(kSolveRows)
    trsm_leaf_kernel(T* const* X, View xv, const T* const* L, View lv, int m, int k, const int* info, int count,
                     int row_blocks) {
    constexpr int K = kLeafMax;
    constexpr int LK = K + 1;
    constexpr int LX = kSolveRows + 1;
    __shared__ T sL[K * LK];
    __shared__ T sX[LX * K];

    const int b = blockIdx.x / row_blocks;
    const int row0 = (blockIdx.x % row_blocks) * kSolveRows;
    if (b >= count) return;
    if (info != nullptr && info[b] != 0) return;  // uniform over the block
    T* x = X[b];
    const T* l = L[b];
    const int tid = threadIdx.x;

    for (int e = tid; e < K * K; e += kSolveRows) {
        const int i = lv.trans ? e / K : e % K;
        const int j = lv.trans ? e % K : e / K;
        const bool in = i < k && j < k && i >= j;
        sL[i + j * LK] = in ? l[lv.idx(i, j)] : T(i == j ? 1 : 0);
    }
    for (int e = tid; e < kSolveRows * K; e += kSolveRows) {
        const int i = xv.trans ? e / K : e % kSolveRows;
        const int j = xv.trans ? e % K : e / kSolveRows;
        const bool in = row0 + i < m && j < k;
        sX[i + j * LX] = in ? x[xv.idx(row0 + i, j)] : T(0);
    }
    __syncthreads();

    T xr[K];
#pragma unroll
    for (int j = 0; j < K; ++j) xr[j] = sX[tid + j * LX];
    if constexpr (kTransL) {
#pragma unroll
        for (int j = 0; j < K; ++j) {
            xr[j] /= sL[j + j * LK];
#pragma unroll
            for (int q = j + 1; q < K; ++q) xr[q] -= xr[j] * sL[q + j * LK];
        }
    } else {
#pragma unroll
        for (int j = K - 1; j >= 0; --j) {
            xr[j] /= sL[j + j * LK];
#pragma unroll
            for (int q = 0; q < j; ++q) xr[q] -= xr[j] * sL[j + q * LK];
        }
    }
#pragma unroll
    for (int j = 0; j < K; ++j) sX[tid + j * LX] = xr[j];
    __syncthreads();

    for (int e = tid; e < kSolveRows * K; e += kSolveRows) {
        const int i = xv.trans ? e / K : e % kSolveRows;
        const int j = xv.trans ? e % K : e / kSolveRows;
        if (row0 + i < m && j < k) x[xv.idx(row0 + i, j)] = sX[i + j * LX];
    }
}

// ---- Symmetric update of the diagonal blocks: C_tt <- C_tt - A_t A_t^T (lower part) ---------

/// C is n x n (view cv, only its 32 x 32 diagonal blocks), A is n x k (view av); one block per
/// (matrix, diagonal block). Only the lower triangle of the view is read and written.
template <class T>
__global__ void __launch_bounds__(kSyrkThreads)
    syrk_diag_kernel(T* const* C, View cv, const T* const* A, View av, int n, int k, const int* info, int count,
                     int diag_blocks) {
    constexpr int K = kLeafMax;
    constexpr int LK = K + 1;
    constexpr int COLS = K * K / kSyrkThreads;  // entries per thread
    constexpr int STEP = kSyrkThreads / K;
    __shared__ T sA[K * LK];

    const int b = blockIdx.x / diag_blocks;
    const int t0 = (blockIdx.x % diag_blocks) * K;
    if (b >= count) return;
    if (info != nullptr && info[b] != 0) return;
    const T* a = A[b];
    const int tid = threadIdx.x;
    const int tx = tid % K;
    const int ty = tid / K;
    T acc[COLS];
#pragma unroll
    for (int q = 0; q < COLS; ++q) acc[q] = T(0);

    for (int l0 = 0; l0 < k; l0 += K) {
        for (int e = tid; e < K * K; e += kSyrkThreads) {
            const int i = av.trans ? e / K : e % K;
            const int l = av.trans ? e % K : e / K;
            const bool in = t0 + i < n && l0 + l < k;
            sA[i + l * LK] = in ? a[av.idx(t0 + i, l0 + l)] : T(0);
        }
        __syncthreads();
#pragma unroll 8
        for (int l = 0; l < K; ++l) {
            const T ai = sA[tx + l * LK];
#pragma unroll
            for (int q = 0; q < COLS; ++q) acc[q] += ai * sA[ty + q * STEP + l * LK];
        }
        __syncthreads();
    }
    T* c = C[b];
#pragma unroll
    for (int q = 0; q < COLS; ++q) {
        const int i = tx, j = ty + q * STEP;
        if (i >= j && t0 + i < n) c[cv.idx(t0 + i, t0 + j)] -= acc[q];
    }
}

// ---- Batched gemm through cuBLAS on sub-blocks ----------------------------------------------

template <class T>
__global__ void gemm_pointers_kernel(const T* const* A, long long oa, const T* const* B, long long ob, T* const* C,
                                     long long oc, const T** pa, const T** pb, T** pc, int count) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < count) {
        pa[b] = A[b] + oa;
        pb[b] = B[b] + ob;
        pc[b] = C[b] + oc;
    }
}

cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const double* alpha, const double* const* A, int lda, const double* const* B, int ldb,
                            const double* beta, double* const* C, int ldc, int count) {
    return cublasDgemmBatched(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, count);
}
cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const float* alpha, const float* const* A, int lda, const float* const* B, int ldb,
                            const float* beta, float* const* C, int ldc, int count) {
    return cublasSgemmBatched(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, count);
}

/// Host pointer mode for alpha and beta while it lives; the caller's mode is restored.
class HostPointerMode {
public:
    explicit HostPointerMode(cublasHandle_t h) : h_(h) {
        detail::check(cublasGetPointerMode(h_, &saved_), "cublasGetPointerMode");
        if (saved_ != CUBLAS_POINTER_MODE_HOST)
            detail::check(cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
    }
    ~HostPointerMode() {
        if (saved_ != CUBLAS_POINTER_MODE_HOST) cublasSetPointerMode(h_, saved_);
    }
    HostPointerMode(const HostPointerMode&) = delete;
    HostPointerMode& operator=(const HostPointerMode&) = delete;

private:
    cublasHandle_t h_;
    cublasPointerMode_t saved_ = CUBLAS_POINTER_MODE_HOST;
};

/// Where the recursion cuts an order n > kLeafMax: a multiple of kLeafMax near n / 2.
int split(int n) {
    const int blocks = detail::ceil_div(n, kLeafMax);
    return kLeafMax * ((blocks + 1) / 2);
}

/// The batch-wide recursion: every call is one launch (or two) over all matrices.
template <class T>
class Batch {
public:
    /// with_gemm: carve the pointer arrays of the batched gemms (orders above kLeafMax).
    Batch(const Launch& launch, int count, int* info, bool with_gemm)
        : launch_(launch), count_(count), info_(info) {
        if (with_gemm) {
            detail::WorkspaceCarver carver(launch);
            pa_ = carver.take<const T*>(static_cast<std::size_t>(count_));
            pb_ = carver.take<const T*>(static_cast<std::size_t>(count_));
            pc_ = carver.take<T*>(static_cast<std::size_t>(count_));
        }
    }

    static std::size_t workspace(int count) {
        return 2 * detail::WorkspaceCarver::round(sizeof(const T*) * count) +
               detail::WorkspaceCarver::round(sizeof(T*) * count);
    }

    /// C (m x n) <- C - A op(B): op(B) = B^T (B is n x k) when b_trans, else B (k x n).
    void gemm_minus(T* const* Cp, View c, const T* const* Ap, View a, const T* const* Bp, View bv, bool b_trans,
                    int m, int n, int k) {
        if (m <= 0 || n <= 0 || k <= 0) return;
        gemm_pointers_kernel<<<detail::ceil_div(count_, 256), 256, 0, launch_.stream>>>(Ap, a.off, Bp, bv.off, Cp,
                                                                                       c.off, pa_, pb_, pc_, count_);
        detail::check_launch("potrf gemm pointers");
        // The operand wanted is V (tr false) or V^T; memory holds V or V^T (trans).
        auto op = [](const View& v, bool tr) { return v.trans != tr ? CUBLAS_OP_T : CUBLAS_OP_N; };
        const T minus_one = T(-1), one = T(1);
        if (!c.trans)
            detail::check(gemm_batched(launch_.cublas, op(a, false), op(bv, b_trans), m, n, k, &minus_one, pa_, a.ld,
                                       pb_, bv.ld, &one, pc_, c.ld, count_),
                          "cublas gemmBatched");
        else  // memory holds C^T: C^T <- C^T - op(B)^T A^T
            detail::check(gemm_batched(launch_.cublas, op(bv, !b_trans), op(a, true), n, m, k, &minus_one, pb_,
                                       bv.ld, pa_, a.ld, &one, pc_, c.ld, count_),
                          "cublas gemmBatched");
    }

    /// X (m x k) <- X L^{-T} (trans_l) or X L^{-1}; L k x k lower.
    void trsm(bool trans_l, T* const* Xp, View x, const T* const* Lp, View l, int m, int k, const int* info) {
        if (m <= 0 || k <= 0) return;
        if (k <= kLeafMax) {
            const int row_blocks = detail::ceil_div(m, kSolveRows);
            const long long blocks = static_cast<long long>(row_blocks) * count_;
            if (trans_l)
                trsm_leaf_kernel<T, true><<<static_cast<unsigned>(blocks), kSolveRows, 0, launch_.stream>>>(
                    Xp, x, Lp, l, m, k, info, count_, row_blocks);
            else
                trsm_leaf_kernel<T, false><<<static_cast<unsigned>(blocks), kSolveRows, 0, launch_.stream>>>(
                    Xp, x, Lp, l, m, k, info, count_, row_blocks);
            detail::check_launch("potrf trsm leaf kernel");
            return;
        }
        const int k1 = split(k), k2 = k - k1;
        if (trans_l) {
            trsm(true, Xp, x, Lp, l, m, k1, info);
            gemm_minus(Xp, x.at(0, k1), Xp, x, Lp, l.at(k1, 0), true, m, k2, k1);
            trsm(true, Xp, x.at(0, k1), Lp, l.at(k1, k1), m, k2, info);
        } else {
            trsm(false, Xp, x.at(0, k1), Lp, l.at(k1, k1), m, k2, info);
            gemm_minus(Xp, x, Xp, x.at(0, k1), Lp, l.at(k1, 0), false, m, k1, k2);
            trsm(false, Xp, x, Lp, l, m, k1, info);
        }
    }

    /// C (n x n, lower) <- C - A A^T, A n x k; both views of the same matrices Cp.
    void syrk(T* const* Cp, View c, View a, int n, int k) {
        if (n <= 0 || k <= 0) return;
        rectangles(Cp, c, a, n, k);
        const int diag_blocks = detail::ceil_div(n, kLeafMax);
        const long long blocks = static_cast<long long>(diag_blocks) * count_;
        syrk_diag_kernel<T><<<static_cast<unsigned>(blocks), kSyrkThreads, 0, launch_.stream>>>(
            Cp, c, Cp, a, n, k, info_, count_, diag_blocks);
        detail::check_launch("potrf syrk diagonal kernel");
    }

    void potrf(T* const* Ap, View v, int off, int n) {
        if (n <= kLeafMax) {
            launch_leaf<T>(launch_.stream, n, Ap, v.at(off, off), info_, off, off > 0, count_);
            return;
        }
        const int n1 = split(n), n2 = n - n1;
        potrf(Ap, v, off, n1);
        trsm(true, Ap, v.at(off + n1, off), Ap, v.at(off, off), n2, n1, info_);
        syrk(Ap, v.at(off + n1, off + n1), v.at(off + n1, off), n2, n1);
        potrf(Ap, v, off + n1, n2);
    }

private:
    // The off-diagonal rectangles of the symmetric update, by the same cuts as the leaves.
    void rectangles(T* const* Cp, View c, View a, int n, int k) {
        if (n <= kLeafMax) return;
        const int n1 = split(n), n2 = n - n1;
        gemm_minus(Cp, c.at(n1, 0), Cp, a.at(n1, 0), Cp, a, true, n2, n1, k);
        rectangles(Cp, c, a, n1, k);
        rectangles(Cp, c.at(n1, n1), a.at(n1, 0), n2, k);
    }

    const Launch& launch_;
    int count_;
    int* info_;
    const T** pa_ = nullptr;
    const T** pb_ = nullptr;
    T** pc_ = nullptr;
};

}  // namespace

template <class T>
std::size_t potrf_workspace(int n, int count) {
    if (n <= kLeafMax || count <= 0) return 0;
    return Batch<T>::workspace(count);
}

template <class T>
void potrf(const Launch& launch, Uplo uplo, int n, T* const* A, int lda, int* info, int count) {
    if (count <= 0) return;
    if (n <= 0) {
        detail::check(cudaMemsetAsync(info, 0, sizeof(int) * static_cast<std::size_t>(count), launch.stream),
                      "potrf info reset");
        return;
    }
    const View v = make_view(lda, uplo == Uplo::upper);
    if (n <= kLeafMax) {
        launch_leaf<T>(launch.stream, n, A, v, info, 0, false, count);
        return;
    }
    HostPointerMode mode(launch.cublas);
    Batch<T> batch(launch, count, info, true);
    batch.potrf(A, v, 0, n);
}

template <class T>
std::size_t potrs_workspace(int n, int nrhs, int count) {
    if (n <= kLeafMax || nrhs <= 0 || count <= 0) return 0;
    return Batch<T>::workspace(count);
}

template <class T>
void potrs(const Launch& launch, Uplo uplo, int n, int nrhs, const T* const* A, int lda, T* const* B, int ldb,
           int count) {
    if (count <= 0 || n <= 0 || nrhs <= 0) return;
    // A X = B with A = L L^T: Y L^T = B^T, then X^T L = Y^T, on the view X = B^T (nrhs x n).
    const View l = make_view(lda, uplo == Uplo::upper);
    const View x = make_view(ldb, true);
    Batch<T> batch(launch, count, nullptr, n > kLeafMax);
    if (n <= kLeafMax) {  // leaves only: no gemm, no cuBLAS
        batch.trsm(true, B, x, A, l, nrhs, n, nullptr);
        batch.trsm(false, B, x, A, l, nrhs, n, nullptr);
        return;
    }
    HostPointerMode mode(launch.cublas);
    batch.trsm(true, B, x, A, l, nrhs, n, nullptr);
    batch.trsm(false, B, x, A, l, nrhs, n, nullptr);
}

template std::size_t potrf_workspace<float>(int, int);
template std::size_t potrf_workspace<double>(int, int);
template void potrf<float>(const Launch&, Uplo, int, float* const*, int, int*, int);
template void potrf<double>(const Launch&, Uplo, int, double* const*, int, int*, int);
template std::size_t potrs_workspace<float>(int, int, int);
template std::size_t potrs_workspace<double>(int, int, int);
template void potrs<float>(const Launch&, Uplo, int, int, const float* const*, int, float* const*, int, int);
template void potrs<double>(const Launch&, Uplo, int, int, const double* const*, int, double* const*, int, int);

}  // namespace starfact::batched::cuda
