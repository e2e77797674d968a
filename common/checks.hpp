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
