// The trtri + gemm variant of CUDA tile LU (see codelets/cpu/lu_kernels.hpp): the inversion of
// each inner block's unit lower L1 after TSTRF, and its application by GEMM in TSTRF and SSSSM.
#include <cuda_runtime.h>

#include "codelets/cuda/lu_common.cuh"
#include "codelets/cuda/tile_kernels.hpp"

namespace starfact::cuda::lu_detail {
namespace {

// The trtri + gemm variant (Agullo et al., LU Factorization for Accelerator-based Systems, 2011;
// docs/design.md, "References"): TSTRF stores the inverse of each block's unit lower L1 next to
// it, and the triangular solves with L1 become GEMMs, which run several times faster than
// cuBLAS's trsm on these shapes.
constexpr int kInvLeaf = 32;

// Inverts X's diagonal blocks of kInvLeaf (the last may be smaller) in place: one thread block
// per diagonal block, thread c solving for column c by forward substitution in shared memory.
template <class T>
__global__ void invert_leaf_kernel(TileView<T> X) {
    __shared__ T l[kInvLeaf][kInvLeaf + 1];
    __shared__ T x[kInvLeaf][kInvLeaf + 1];
    const int p = blockIdx.x * kInvLeaf;
    const int s = min(kInvLeaf, X.n - p);
    const int c = threadIdx.x;
    if (c < s)
        for (int i = 0; i < s; ++i) l[i][c] = X(p + i, p + c);
    __syncthreads();
    if (c >= s) return;
    for (int i = 0; i < s; ++i) x[i][c] = i == c ? T(1) : T(0);
    for (int i = c + 1; i < s; ++i) {
        T acc = T(0);
        for (int k = c; k < i; ++k) acc += l[i][k] * x[k][c];
        x[i][c] = -acc;
    }
    for (int i = c + 1; i < s; ++i) X(p + i, p + c) = x[i][c];
}

// All-N batched GEMM over matrices at fixed strides, alpha and beta by value.
template <class T>
cublasStatus_t gemm_strided(cublasHandle_t h, int m, int n, int k, T alpha, const T* A, int lda, long long sa,
                            const T* B, int ldb, long long sb, T beta, T* C, int ldc, long long sc, int count) {
    return cublas::gemm_strided_batched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A, lda, sa, B, ldb, sb, &beta, C,
                                        ldc, sc, count);
}

}  // namespace

// X = L^{-1} for the b x b unit lower L (its strict lower part is read), X written in full.
// Leaves of kInvLeaf are inverted directly; then pairs of inverted diagonal blocks of size s
// are joined level by level: X21 = -X22 L21 X11, all pairs of a level in one batched GEMM.
// tmp: b * b / 4 elements at least.
template <class T>
cudaError_t invert_unit_lower(cublasHandle_t blas, cudaStream_t stream, TileView<const T> L, TileView<T> X, T* tmp) {
    const int b = L.n;
    if (b == 0) return cudaSuccess;
    cudaError_t err = explicit_unit_lower(L, X, stream);
    if (err != cudaSuccess) return err;
    invert_leaf_kernel<T><<<blocks_for(b, kInvLeaf), kInvLeaf, 0, stream>>>(X);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    for (int s = kInvLeaf; s < b; s *= 2) {
        const int full = b / (2 * s);
        if (full > 0) {
            const long long stride = 2LL * s * (X.ld + 1), tstride = static_cast<long long>(s) * s;
            err = from_blas(gemm_strided(blas, s, s, s, T(1), X.sub(s, 0, s, s).data, X.ld, stride, X.data, X.ld,
                                         stride, T(0), tmp, s, tstride, full));
            if (err != cudaSuccess) return err;
            err = from_blas(gemm_strided(blas, s, s, s, T(-1), X.sub(s, s, s, s).data, X.ld, stride, tmp, s, tstride,
                                         T(0), X.sub(s, 0, s, s).data, X.ld, stride, full));
            if (err != cudaSuccess) return err;
        }
        const int p = full * 2 * s, s2 = b - p - s;
        if (s2 > 0) {
            const TileView<T> T21{tmp, s2, s, s2};
            err = from_blas(gemm<T>(blas, 'N', 'N', T(1), as_const(X.sub(p + s, p, s2, s)), as_const(X.sub(p, p, s, s)),
                                    T(0), T21));
            if (err != cudaSuccess) return err;
            err = from_blas(gemm<T>(blas, 'N', 'N', T(-1), as_const(X.sub(p + s, p + s, s2, s2)), as_const(T21), T(0),
                                    X.sub(p + s, p, s2, s)));
            if (err != cudaSuccess) return err;
        }
    }
    return cudaSuccess;
}

// B = Linv B for the b x n block B, through the b x n buffer W (GEMMs cannot work in place).
template <class T>
cudaError_t apply_inverse(const LuContext& ctx, TileView<const T> Linv, TileView<T> B, T* W) {
    if (B.n == 0 || B.m == 0) return cudaSuccess;
    const TileView<T> Wv{W, B.m, B.n, B.m};
    cudaError_t err = from_blas(gemm<T>(ctx.blas, 'N', 'N', T(1), Linv, as_const(B), T(0), Wv));
    if (err != cudaSuccess) return err;
    return cudaMemcpy2DAsync(B.data, sizeof(T) * B.ld, W, sizeof(T) * B.m, sizeof(T) * B.m, B.n,
                             cudaMemcpyDeviceToDevice, ctx.stream);
}

template cudaError_t invert_unit_lower<float>(cublasHandle_t, cudaStream_t, TileView<const float>, TileView<float>,
                                              float*);
template cudaError_t invert_unit_lower<double>(cublasHandle_t, cudaStream_t, TileView<const double>, TileView<double>,
                                               double*);
template cudaError_t apply_inverse<float>(const LuContext&, TileView<const float>, TileView<float>, float*);
template cudaError_t apply_inverse<double>(const LuContext&, TileView<const double>, TileView<double>, double*);

}  // namespace starfact::cuda::lu_detail
