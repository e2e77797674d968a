// LAPACK-style normalized residuals (host, column-major). Each returns a ratio that passes
// below 30 (../shared/TESTING.md); NaN or Inf in the data gives NaN or Inf, which fails.
#pragma once

namespace starfact::checks {

/// Threshold every normalized residual must stay below.
constexpr double kThreshold = 30.0;

/// ||A - L L^T||_1 / (n ||A||_1 eps) (uplo 'L', F holds L in its lower triangle), or
/// ||A - U^T U||_1 / (n ||A||_1 eps) (uplo 'U'). A is symmetric; only its uplo triangle is read.
template <class T>
double potrf_residual(char uplo, int n, const T* A, int lda, const T* F, int ldf);

/// Solve backward error ||B - A X||_inf / ((||A||_inf ||X||_inf + ||B||_inf) n eps), the
/// maximum over the columns of B (n x nrhs).
template <class T>
double solve_residual(int n, int nrhs, const T* A, int lda, const T* X, int ldx, const T* B, int ldb);

/// True when the ratio passes: finite and below kThreshold.
bool passes(double ratio);

}  // namespace starfact::checks

namespace starfact::checks {

/// An O(n^2) probe of the Cholesky residual for large n: with a random x,
/// ||A x - L (L^T x)||_inf / (||A||_inf ||x||_inf n eps) (uplo 'L'; U^T (U x) for 'U').
/// It cannot see every error the full residual sees, but any wrong factor shows in it
/// with probability one; A is symmetric with both triangles stored.
template <class T>
double potrf_probe_residual(char uplo, int n, const T* A, int lda, const T* F, int ldf, unsigned long long seed);

}  // namespace starfact::checks

namespace starfact::checks {

/// What LAPACK's partial pivoting does on the same system, for comparison with tile LU:
/// the backward error of getrf + getrs (as solve_residual) and the growth factor
/// max|U| / max|A|. A is n x n, B n x nrhs; neither is modified.
struct LapackLuReference {
    double backward_error;
    double growth;
    int info;
};
template <class T>
LapackLuReference lapack_lu_reference(int n, int nrhs, const T* A, int lda, const T* B, int ldb);

/// max |U(i, j)| over i <= j (the upper trapezoid of a factored m x n matrix F) divided by
/// max |A(i, j)|: the growth factor.
template <class T>
double growth_factor(int m, int n, const T* A, int lda, const T* F, int ldf);

/// For tile LU (L is not explicit): with G = the transformations applied to the original A
/// (m x n, as lu_apply_forward does), ||G - [U; 0]||_1 / (n ||A||_1 eps), U = the upper
/// trapezoid of the factor F.
template <class T>
double lu_transform_residual(int m, int n, const T* A, int lda, const T* G, int ldg, const T* F, int ldf);

}  // namespace starfact::checks
