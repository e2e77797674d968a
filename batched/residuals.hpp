// Normalized residuals of one matrix of a batch (LAPACK's ratios, docs/testing.md: pass below
// 30; NaN or Inf fails), for the command line's --check and the tests. Each runs in the
// matrix's precision on the calling thread's BLAS, so a batch can be checked one matrix per
// thread.
#pragma once

#include "batched/batched.hpp"

namespace starfact::batched::residuals {

/// ||P A - L U||_1 / (n ||A||_1 eps): A the original n x n matrix, F and ipiv getrf's output.
template <class T>
double getrf(int n, const T* A, int lda, const T* F, int ldf, const int* ipiv);

/// ||A - L L^T||_1 / (n ||A||_1 eps) (lower) or ||A - U^T U||_1 / (n ||A||_1 eps) (upper); only
/// the uplo triangles of A and F are read.
template <class T>
double potrf(Uplo uplo, int n, const T* A, int lda, const T* F, int ldf);

/// The larger of ||A - Q R||_1 / (m ||A||_1 eps) and ||I - Q^T Q||_1 / (m eps), Q (m x n) and R
/// from geqrf's output F and tau.
template <class T>
double geqrf(int m, int n, const T* A, int lda, const T* F, int ldf, const T* tau);

/// Solve backward error max_j ||B_j - A X_j||_inf / ((||A||_inf ||X_j||_inf + ||B_j||_inf) n eps);
/// A is n x n with both triangles stored.
template <class T>
double solve(int n, int nrhs, const T* A, int lda, const T* X, int ldx, const T* B, int ldb);

/// Least squares: ||A^T (B - A X)||_1 / (m ||A||_1 (||A||_1 ||X||_1 + ||B||_1) eps), A m x n,
/// X n x nrhs (the first n rows of gels's output), B the original m x nrhs right-hand sides.
/// A^T r vanishes at the minimizer; the denominator bounds its rounding without involving the
/// size of the residual r itself, which may be zero for a consistent system.
template <class T>
double least_squares(int m, int n, int nrhs, const T* A, int lda, const T* X, int ldx, const T* B, int ldb);

/// True when the ratio passes: finite, not negative, below 30.
bool passes(double ratio);

}  // namespace starfact::batched::residuals
