// The CUDA counterpart of common/blas.hpp: overload sets over cuBLAS (float, double) so templates
// call one name, and the cudaDataType of each scalar for cuSOLVER's 64-bit API. Arguments are
// cuBLAS's own, in its order (handle first, enums, alpha and beta by pointer); only the precision
// letter is dropped. Host code: usable from .cc files built with the CUDA includes, which
// starfact_common passes on to its users when STARFACT_HAVE_CUDA is set.
#pragma once

#include <cublas_v2.h>
#include <library_types.h>

#include <type_traits>

namespace starfact::cublas {

/// The cudaDataType of T (CUDA_R_64F for double, CUDA_R_32F for float).
template <class T>
constexpr cudaDataType data_type() {
    static_assert(std::is_same_v<T, double> || std::is_same_v<T, float>, "cuBLAS overloads: float or double");
    return std::is_same_v<T, double> ? CUDA_R_64F : CUDA_R_32F;
}

// ---- BLAS 3 -----------------------------------------------------------------------------
inline cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const double* alpha, const double* A, int lda, const double* B, int ldb, const double* beta,
                           double* C, int ldc) {
    return cublasDgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc) {
    return cublasSgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline cublasStatus_t syrk(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t trans, int n, int k,
                           const double* alpha, const double* A, int lda, const double* beta, double* C, int ldc) {
    return cublasDsyrk(h, uplo, trans, n, k, alpha, A, lda, beta, C, ldc);
}
inline cublasStatus_t syrk(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t trans, int n, int k,
                           const float* alpha, const float* A, int lda, const float* beta, float* C, int ldc) {
    return cublasSsyrk(h, uplo, trans, n, k, alpha, A, lda, beta, C, ldc);
}
inline cublasStatus_t trsm(cublasHandle_t h, cublasSideMode_t side, cublasFillMode_t uplo, cublasOperation_t ta,
                           cublasDiagType_t diag, int m, int n, const double* alpha, const double* A, int lda,
                           double* B, int ldb) {
    return cublasDtrsm(h, side, uplo, ta, diag, m, n, alpha, A, lda, B, ldb);
}
inline cublasStatus_t trsm(cublasHandle_t h, cublasSideMode_t side, cublasFillMode_t uplo, cublasOperation_t ta,
                           cublasDiagType_t diag, int m, int n, const float* alpha, const float* A, int lda, float* B,
                           int ldb) {
    return cublasStrsm(h, side, uplo, ta, diag, m, n, alpha, A, lda, B, ldb);
}

// ---- Batched BLAS 3 ---------------------------------------------------------------------
/// One GEMM per entry of the pointer arrays (device arrays of count pointers each).
inline cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   const double* alpha, const double* const* A, int lda, const double* const* B,
                                   int ldb, const double* beta, double* const* C, int ldc, int count) {
    return cublasDgemmBatched(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, count);
}
inline cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   const float* alpha, const float* const* A, int lda, const float* const* B, int ldb,
                                   const float* beta, float* const* C, int ldc, int count) {
    return cublasSgemmBatched(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, count);
}
/// One GEMM per matrix i at A + i * sa, B + i * sb, C + i * sc.
inline cublasStatus_t gemm_strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                           int k, const double* alpha, const double* A, int lda, long long sa,
                                           const double* B, int ldb, long long sb, const double* beta, double* C,
                                           int ldc, long long sc, int count) {
    return cublasDgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, count);
}
inline cublasStatus_t gemm_strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                           int k, const float* alpha, const float* A, int lda, long long sa,
                                           const float* B, int ldb, long long sb, const float* beta, float* C, int ldc,
                                           long long sc, int count) {
    return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, count);
}

// ---- BLAS extensions and LAPACK-like ----------------------------------------------------
/// C = alpha op(A) + beta op(B).
inline cublasStatus_t geam(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                           const double* alpha, const double* A, int lda, const double* beta, const double* B, int ldb,
                           double* C, int ldc) {
    return cublasDgeam(h, ta, tb, m, n, alpha, A, lda, beta, B, ldb, C, ldc);
}
inline cublasStatus_t geam(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                           const float* alpha, const float* A, int lda, const float* beta, const float* B, int ldb,
                           float* C, int ldc) {
    return cublasSgeam(h, ta, tb, m, n, alpha, A, lda, beta, B, ldb, C, ldc);
}
/// Solves with the LU factors of cuBLAS's getrfBatched; info is a host pointer.
inline cublasStatus_t getrs_batched(cublasHandle_t h, cublasOperation_t trans, int n, int nrhs, const double* const* A,
                                    int lda, const int* ipiv, double* const* B, int ldb, int* info, int count) {
    return cublasDgetrsBatched(h, trans, n, nrhs, A, lda, ipiv, B, ldb, info, count);
}
inline cublasStatus_t getrs_batched(cublasHandle_t h, cublasOperation_t trans, int n, int nrhs, const float* const* A,
                                    int lda, const int* ipiv, float* const* B, int ldb, int* info, int count) {
    return cublasSgetrsBatched(h, trans, n, nrhs, A, lda, ipiv, B, ldb, info, count);
}

}  // namespace starfact::cublas
