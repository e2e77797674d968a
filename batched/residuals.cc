// Normalized residuals of one matrix of a batch, in its precision, on the caller's BLAS.
#include "batched/residuals.hpp"

#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "common/blas.hpp"
#include "common/checks.hpp"
#include "common/scalar_traits.hpp"

namespace starfact::batched::residuals {
namespace {

inline int orgqr(int m, int n, double* Q, int ldq, const double* tau, double* work, int lwork) {
    return LAPACKE_dorgqr_work(LAPACK_COL_MAJOR, m, n, n, Q, ldq, tau, work, lwork);
}
inline int orgqr(int m, int n, float* Q, int ldq, const float* tau, float* work, int lwork) {
    return LAPACKE_sorgqr_work(LAPACK_COL_MAJOR, m, n, n, Q, ldq, tau, work, lwork);
}

template <class T>
T at(const T* A, int ld, int i, int j) {
    return A[static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * ld];
}

/// num / den with LAPACK's conventions for a zero denominator.
double ratio(double num, double den) {
    if (std::isnan(num) || std::isnan(den)) return NAN;
    if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
    return num / den;
}

}  // namespace

bool passes(double r) { return checks::passes(r); }

template <class T>
double getrf(int n, const T* A, int lda, const T* F, int ldf, const int* ipiv) {
    if (n == 0) return 0.0;
    const std::size_t nn = static_cast<std::size_t>(n);
    std::vector<T> R(nn * nn), W(nn * nn, T(0));
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < n; ++i) R[i + j * nn] = at(A, lda, i, j);
        for (int i = 0; i <= j; ++i) W[i + j * nn] = at(F, ldf, i, j);
    }
    const double anorm = blas::lange('1', n, n, R.data(), n);
    // R = P A: LAPACK's row interchanges in order.
    for (int i = 0; i < n; ++i) {
        const int p = ipiv[i] - 1;
        if (p < 0 || p >= n) return INFINITY;  // an out-of-range pivot fails the check
        if (p != i)
            for (int j = 0; j < n; ++j) std::swap(R[i + j * nn], R[p + j * nn]);
    }
    // W = L U (L unit lower from F), then R = P A - L U.
    blas::trmm('L', 'L', 'N', 'U', n, n, T(1), F, ldf, W.data(), n);
    for (std::size_t k = 0; k < nn * nn; ++k) R[k] -= W[k];
    return ratio(blas::lange('1', n, n, R.data(), n), n * anorm * ScalarTraits<T>::eps);
}

template <class T>
double potrf(Uplo uplo, int n, const T* A, int lda, const T* F, int ldf) {
    if (n == 0) return 0.0;
    const bool lower = uplo == Uplo::lower;
    const char u = lower ? 'L' : 'U';
    const std::size_t nn = static_cast<std::size_t>(n);
    std::vector<T> R(nn * nn, T(0)), W(nn * nn, T(0));
    for (int j = 0; j < n; ++j)
        for (int i = lower ? j : 0; i < (lower ? n : j + 1); ++i) {
            R[i + j * nn] = at(A, lda, i, j);
            W[i + j * nn] = at(F, ldf, i, j);
        }
    const double anorm = blas::lansy('1', u, n, R.data(), n);
    blas::syrk(u, lower ? 'N' : 'T', n, n, T(-1), W.data(), n, T(1), R.data(), n);
    return ratio(blas::lansy('1', u, n, R.data(), n), n * anorm * ScalarTraits<T>::eps);
}

template <class T>
double geqrf(int m, int n, const T* A, int lda, const T* F, int ldf, const T* tau) {
    if (n == 0) return 0.0;
    const std::size_t mm = static_cast<std::size_t>(m), nn = static_cast<std::size_t>(n);
    std::vector<T> Q(mm * nn), QR(mm * nn), D(mm * nn);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            Q[i + j * mm] = at(F, ldf, i, j);
            D[i + j * mm] = at(A, lda, i, j);
        }
    std::vector<T> work(std::max<std::size_t>(1, nn * 64));
    if (orgqr(m, n, Q.data(), m, tau, work.data(), static_cast<int>(work.size())) != 0) return INFINITY;
    QR = Q;
    // QR = Q R with R = triu(F(0:n, 0:n)).
    blas::trmm('R', 'U', 'N', 'N', m, n, T(1), F, ldf, QR.data(), m);
    const double anorm = blas::lange('1', m, n, D.data(), m);
    for (std::size_t k = 0; k < mm * nn; ++k) D[k] -= QR[k];
    const double r1 = ratio(blas::lange('1', m, n, D.data(), m), m * anorm * ScalarTraits<T>::eps);
    // I - Q^T Q (upper triangle of a symmetric n x n).
    std::vector<T> E(nn * nn, T(0));
    for (int j = 0; j < n; ++j) E[j + j * nn] = T(1);
    blas::syrk('U', 'T', n, m, T(-1), Q.data(), m, T(1), E.data(), n);
    const double r2 = ratio(blas::lansy('1', 'U', n, E.data(), n), m * ScalarTraits<T>::eps);
    if (std::isnan(r1) || std::isnan(r2)) return NAN;
    return std::max(r1, r2);
}

template <class T>
double solve(int n, int nrhs, const T* A, int lda, const T* X, int ldx, const T* B, int ldb) {
    if (n == 0 || nrhs == 0) return 0.0;
    const double anorm = blas::lange('I', n, n, A, lda);
    double worst = 0.0;
    std::vector<T> r(static_cast<std::size_t>(n));
    for (int c = 0; c < nrhs; ++c) {
        const T* x = X + static_cast<std::size_t>(c) * ldx;
        const T* b = B + static_cast<std::size_t>(c) * ldb;
        std::copy(b, b + n, r.begin());
        blas::gemm('N', 'N', n, 1, n, T(-1), A, lda, x, n, T(1), r.data(), n);
        const double den =
            (anorm * blas::lange('I', n, 1, x, n) + blas::lange('I', n, 1, b, n)) * n * ScalarTraits<T>::eps;
        const double q = ratio(blas::lange('I', n, 1, r.data(), n), den);
        if (std::isnan(q)) return q;
        worst = std::max(worst, q);
    }
    return worst;
}

template <class T>
double least_squares(int m, int n, int nrhs, const T* A, int lda, const T* X, int ldx, const T* B, int ldb) {
    if (n == 0 || nrhs == 0) return 0.0;
    const std::size_t mm = static_cast<std::size_t>(m), nn = static_cast<std::size_t>(n);
    std::vector<T> r(mm * nrhs), g(nn * nrhs);
    for (int j = 0; j < nrhs; ++j)
        for (int i = 0; i < m; ++i) r[i + j * mm] = at(B, ldb, i, j);
    blas::gemm('N', 'N', m, nrhs, n, T(-1), A, lda, X, ldx, T(1), r.data(), m);
    blas::gemm('T', 'N', n, nrhs, m, T(1), A, lda, r.data(), m, T(0), g.data(), n);
    const double anorm = blas::lange('1', m, n, A, lda);
    const double den = m * anorm * (anorm * blas::lange('1', n, nrhs, X, ldx) + blas::lange('1', m, nrhs, B, ldb)) *
                       ScalarTraits<T>::eps;
    return ratio(blas::lange('1', n, nrhs, g.data(), n), den);
}

template double getrf<float>(int, const float*, int, const float*, int, const int*);
template double getrf<double>(int, const double*, int, const double*, int, const int*);
template double potrf<float>(Uplo, int, const float*, int, const float*, int);
template double potrf<double>(Uplo, int, const double*, int, const double*, int);
template double geqrf<float>(int, int, const float*, int, const float*, int, const float*);
template double geqrf<double>(int, int, const double*, int, const double*, int, const double*);
template double solve<float>(int, int, const float*, int, const float*, int, const float*, int);
template double solve<double>(int, int, const double*, int, const double*, int, const double*, int);
template double least_squares<float>(int, int, int, const float*, int, const float*, int, const float*, int);
template double least_squares<double>(int, int, int, const double*, int, const double*, int, const double*, int);

}  // namespace starfact::batched::residuals
