// Overload sets over CBLAS and LAPACKE (float, double) so templates call one name.
// Arguments follow LAPACK: column-major, characters 'L'/'U', 'N'/'T', 'L'/'R', 'N'/'U'.
#pragma once

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cstddef>
#include <vector>

// cblas.h (OpenBLAS) also declares openblas_set_num_threads: CPU workers run single-threaded
// BLAS; host-side checks may use every core.

namespace starfact::blas {

namespace detail {
inline CBLAS_UPLO uplo(char c) { return (c == 'U' || c == 'u') ? CblasUpper : CblasLower; }
inline CBLAS_TRANSPOSE trans(char c) { return (c == 'T' || c == 't' || c == 'C' || c == 'c') ? CblasTrans : CblasNoTrans; }
inline CBLAS_SIDE side(char c) { return (c == 'R' || c == 'r') ? CblasRight : CblasLeft; }
inline CBLAS_DIAG diag(char c) { return (c == 'U' || c == 'u') ? CblasUnit : CblasNonUnit; }
}  // namespace detail

// ---- BLAS 3 -----------------------------------------------------------------------------
inline void gemm(char ta, char tb, int m, int n, int k, double alpha, const double* A, int lda,
                 const double* B, int ldb, double beta, double* C, int ldc) {
    cblas_dgemm(CblasColMajor, detail::trans(ta), detail::trans(tb), m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void gemm(char ta, char tb, int m, int n, int k, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* C, int ldc) {
    cblas_sgemm(CblasColMajor, detail::trans(ta), detail::trans(tb), m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void syrk(char uplo, char trans, int n, int k, double alpha, const double* A, int lda, double beta,
                 double* C, int ldc) {
    cblas_dsyrk(CblasColMajor, detail::uplo(uplo), detail::trans(trans), n, k, alpha, A, lda, beta, C, ldc);
}
inline void syrk(char uplo, char trans, int n, int k, float alpha, const float* A, int lda, float beta,
                 float* C, int ldc) {
    cblas_ssyrk(CblasColMajor, detail::uplo(uplo), detail::trans(trans), n, k, alpha, A, lda, beta, C, ldc);
}
inline void trsm(char side, char uplo, char ta, char diag, int m, int n, double alpha, const double* A, int lda,
                 double* B, int ldb) {
    cblas_dtrsm(CblasColMajor, detail::side(side), detail::uplo(uplo), detail::trans(ta), detail::diag(diag), m, n,
                alpha, A, lda, B, ldb);
}
inline void trsm(char side, char uplo, char ta, char diag, int m, int n, float alpha, const float* A, int lda,
                 float* B, int ldb) {
    cblas_strsm(CblasColMajor, detail::side(side), detail::uplo(uplo), detail::trans(ta), detail::diag(diag), m, n,
                alpha, A, lda, B, ldb);
}
inline void trmm(char side, char uplo, char ta, char diag, int m, int n, double alpha, const double* A, int lda,
                 double* B, int ldb) {
    cblas_dtrmm(CblasColMajor, detail::side(side), detail::uplo(uplo), detail::trans(ta), detail::diag(diag), m, n,
                alpha, A, lda, B, ldb);
}
inline void trmm(char side, char uplo, char ta, char diag, int m, int n, float alpha, const float* A, int lda,
                 float* B, int ldb) {
    cblas_strmm(CblasColMajor, detail::side(side), detail::uplo(uplo), detail::trans(ta), detail::diag(diag), m, n,
                alpha, A, lda, B, ldb);
}

// ---- LAPACK -----------------------------------------------------------------------------
/// Cholesky of a tile; returns LAPACK's info (k > 0: leading minor k not positive definite).
inline int potrf(char uplo, int n, double* A, int lda) { return LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, uplo, n, A, lda); }
inline int potrf(char uplo, int n, float* A, int lda) { return LAPACKE_spotrf_work(LAPACK_COL_MAJOR, uplo, n, A, lda); }
inline int potrs(char uplo, int n, int nrhs, const double* A, int lda, double* B, int ldb) {
    return LAPACKE_dpotrs_work(LAPACK_COL_MAJOR, uplo, n, nrhs, A, lda, B, ldb);
}
inline int potrs(char uplo, int n, int nrhs, const float* A, int lda, float* B, int ldb) {
    return LAPACKE_spotrs_work(LAPACK_COL_MAJOR, uplo, n, nrhs, A, lda, B, ldb);
}
inline int trtri(char uplo, char diag, int n, double* A, int lda) {
    return LAPACKE_dtrtri_work(LAPACK_COL_MAJOR, uplo, diag, n, A, lda);
}
inline int trtri(char uplo, char diag, int n, float* A, int lda) {
    return LAPACKE_strtri_work(LAPACK_COL_MAJOR, uplo, diag, n, A, lda);
}
inline int getrf(int m, int n, double* A, int lda, int* ipiv) {
    return LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, m, n, A, lda, ipiv);
}
inline int getrf(int m, int n, float* A, int lda, int* ipiv) {
    return LAPACKE_sgetrf_work(LAPACK_COL_MAJOR, m, n, A, lda, ipiv);
}
inline int getrs(char trans, int n, int nrhs, const double* A, int lda, const int* ipiv, double* B, int ldb) {
    return LAPACKE_dgetrs_work(LAPACK_COL_MAJOR, trans, n, nrhs, A, lda, ipiv, B, ldb);
}
inline int getrs(char trans, int n, int nrhs, const float* A, int lda, const int* ipiv, float* B, int ldb) {
    return LAPACKE_sgetrs_work(LAPACK_COL_MAJOR, trans, n, nrhs, A, lda, ipiv, B, ldb);
}
/// Norms as LAPACK's lange: 'M' max abs, 'O'/'1' one norm, 'I' infinity norm, 'F' Frobenius.
/// The _work entry points are used because the plain LAPACKE ones return -5 (not NaN) when
/// the input holds a NaN, which would let a NaN residual pass a check.
inline double lange(char norm, int m, int n, const double* A, int lda) {
    std::vector<double> work(static_cast<std::size_t>(std::max(1, m)));
    return LAPACKE_dlange_work(LAPACK_COL_MAJOR, norm, m, n, A, lda, work.data());
}
inline float lange(char norm, int m, int n, const float* A, int lda) {
    std::vector<float> work(static_cast<std::size_t>(std::max(1, m)));
    return LAPACKE_slange_work(LAPACK_COL_MAJOR, norm, m, n, A, lda, work.data());
}
inline double lansy(char norm, char uplo, int n, const double* A, int lda) {
    std::vector<double> work(static_cast<std::size_t>(std::max(1, n)));
    return LAPACKE_dlansy_work(LAPACK_COL_MAJOR, norm, uplo, n, A, lda, work.data());
}
inline float lansy(char norm, char uplo, int n, const float* A, int lda) {
    std::vector<float> work(static_cast<std::size_t>(std::max(1, n)));
    return LAPACKE_slansy_work(LAPACK_COL_MAJOR, norm, uplo, n, A, lda, work.data());
}

}  // namespace starfact::blas
