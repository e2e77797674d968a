// Residual checks with OpenBLAS; they use every core while the runtime is idle.
#include "common/checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <thread>
#include <vector>

#include "common/blas.hpp"
#include "common/matgen.hpp"
#include "common/scalar_traits.hpp"

namespace starfact::checks {
namespace {
// StarPU's CPU workers run single-threaded BLAS; a check runs between factorizations.
class AllThreads {
public:
    AllThreads() : previous_(openblas_get_num_threads()) {
        openblas_set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    }
    ~AllThreads() { openblas_set_num_threads(previous_); }
    AllThreads(const AllThreads&) = delete;
    AllThreads& operator=(const AllThreads&) = delete;

private:
    int previous_;
};
}  // namespace

bool passes(double ratio) { return std::isfinite(ratio) && ratio >= 0.0 && ratio < kThreshold; }

template <class T>
double potrf_residual(char uplo, int n, const T* A, int lda, const T* F, int ldf) {
    if (n == 0) return 0.0;
    AllThreads threads;
    const bool lower = uplo == 'L' || uplo == 'l';
    const std::size_t nn = static_cast<std::size_t>(n);
    // R = A (uplo triangle) ; W = the triangular factor with the other triangle zeroed.
    std::vector<T> R(nn * nn, T(0)), W(nn * nn, T(0));
    for (int j = 0; j < n; ++j)
        for (int i = lower ? j : 0; i < (lower ? n : j + 1); ++i) {
            R[i + j * nn] = A[i + static_cast<std::size_t>(j) * lda];
            W[i + j * nn] = F[i + static_cast<std::size_t>(j) * ldf];
        }
    const double anorm = blas::lansy('1', lower ? 'L' : 'U', n, R.data(), n);
    // Lower: R -= W W^T. Upper: R -= W^T W. Only the uplo triangle of R is formed.
    blas::syrk(lower ? 'L' : 'U', lower ? 'N' : 'T', n, n, T(-1), W.data(), n, T(1), R.data(), n);
    const double rnorm = blas::lansy('1', lower ? 'L' : 'U', n, R.data(), n);
    if (anorm == 0.0) return rnorm == 0.0 ? 0.0 : INFINITY;
    return rnorm / (n * anorm * ScalarTraits<T>::eps);
}

template <class T>
double solve_residual(int n, int nrhs, const T* A, int lda, const T* X, int ldx, const T* B, int ldb) {
    if (n == 0 || nrhs == 0) return 0.0;
    AllThreads threads;
    const double anorm = blas::lange('I', n, n, A, lda);
    double worst = 0.0;
    std::vector<T> R(static_cast<std::size_t>(n));
    for (int c = 0; c < nrhs; ++c) {
        const T* x = X + static_cast<std::size_t>(c) * ldx;
        const T* b = B + static_cast<std::size_t>(c) * ldb;
        std::copy(b, b + n, R.begin());
        blas::gemm('N', 'N', n, 1, n, T(-1), A, lda, x, n, T(1), R.data(), n);
        const double rnorm = blas::lange('I', n, 1, R.data(), n);
        const double xnorm = blas::lange('I', n, 1, x, n);
        const double bnorm = blas::lange('I', n, 1, b, n);
        const double denom = (anorm * xnorm + bnorm) * n * ScalarTraits<T>::eps;
        const double ratio = denom > 0 ? rnorm / denom : (rnorm == 0 ? 0.0 : INFINITY);
        if (std::isnan(ratio)) return ratio;
        worst = std::max(worst, ratio);
    }
    return worst;
}

template <class T>
double potrf_probe_residual(char uplo, int n, const T* A, int lda, const T* F, int ldf, unsigned long long seed) {
    if (n == 0) return 0.0;
    AllThreads threads;
    const bool lower = uplo == 'L' || uplo == 'l';
    std::vector<T> x(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n)), r(static_cast<std::size_t>(n));
    matgen::uniform(n, 1, seed, x.data(), n);
    // r = A x ; y = L^T x (or U x) ; y = L y (or U^T y) ; r -= y.
    blas::gemm('N', 'N', n, 1, n, T(1), A, lda, x.data(), n, T(0), r.data(), n);
    y = x;
    blas::trmm('L', lower ? 'L' : 'U', lower ? 'T' : 'N', 'N', n, 1, T(1), F, ldf, y.data(), n);
    blas::trmm('L', lower ? 'L' : 'U', lower ? 'N' : 'T', 'N', n, 1, T(1), F, ldf, y.data(), n);
    for (int i = 0; i < n; ++i) r[static_cast<std::size_t>(i)] -= y[static_cast<std::size_t>(i)];
    const double rnorm = blas::lange('I', n, 1, r.data(), n);
    const double anorm = blas::lange('I', n, n, A, lda);
    const double xnorm = blas::lange('I', n, 1, x.data(), n);
    const double denom = anorm * xnorm * n * ScalarTraits<T>::eps;
    return denom > 0 ? rnorm / denom : (rnorm == 0 ? 0.0 : INFINITY);
}

template <class T>
LapackLuReference lapack_lu_reference(int n, int nrhs, const T* A, int lda, const T* B, int ldb) {
    if (n == 0) return {0.0, 1.0, 0};
    AllThreads threads;
    const std::size_t nn = static_cast<std::size_t>(n);
    std::vector<T> F(nn * nn), X(nn * static_cast<std::size_t>(nrhs));
    std::vector<int> ipiv(nn);
    for (int j = 0; j < n; ++j) std::copy(A + j * static_cast<std::size_t>(lda), A + j * static_cast<std::size_t>(lda) + n, F.begin() + j * nn);
    for (int c = 0; c < nrhs; ++c) std::copy(B + c * static_cast<std::size_t>(ldb), B + c * static_cast<std::size_t>(ldb) + n, X.begin() + c * nn);
    const int info = blas::getrf(n, n, F.data(), n, ipiv.data());
    const double growth = growth_factor(n, n, A, lda, F.data(), n);
    if (info != 0) return {INFINITY, growth, info};
    blas::getrs('N', n, nrhs, F.data(), n, ipiv.data(), X.data(), n);
    return {solve_residual(n, nrhs, A, lda, X.data(), n, B, ldb), growth, 0};
}

template <class T>
double growth_factor(int m, int n, const T* A, int lda, const T* F, int ldf) {
    double amax = 0.0, umax = 0.0;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            const double a = std::abs(static_cast<double>(A[i + static_cast<std::size_t>(j) * lda]));
            if (a > amax || std::isnan(a)) amax = a;
            if (i <= j) {
                const double u = std::abs(static_cast<double>(F[i + static_cast<std::size_t>(j) * ldf]));
                if (u > umax || std::isnan(u)) umax = u;
            }
        }
    return amax > 0 ? umax / amax : (umax == 0 ? 1.0 : INFINITY);
}

template <class T>
double lu_transform_residual(int m, int n, const T* A, int lda, const T* G, int ldg, const T* F, int ldf) {
    if (m == 0 || n == 0) return 0.0;
    std::vector<T> R(static_cast<std::size_t>(m) * n);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            const T u = i <= j ? F[i + static_cast<std::size_t>(j) * ldf] : T(0);
            R[i + static_cast<std::size_t>(j) * m] = G[i + static_cast<std::size_t>(j) * ldg] - u;
        }
    const double rnorm = blas::lange('1', m, n, R.data(), m);
    const double anorm = blas::lange('1', m, n, A, lda);
    if (anorm == 0.0) return rnorm == 0.0 ? 0.0 : INFINITY;
    return rnorm / (n * anorm * ScalarTraits<T>::eps);
}

template double potrf_residual<float>(char, int, const float*, int, const float*, int);
template double potrf_residual<double>(char, int, const double*, int, const double*, int);
template double solve_residual<float>(int, int, const float*, int, const float*, int, const float*, int);
template double potrf_probe_residual<float>(char, int, const float*, int, const float*, int, unsigned long long);
template double potrf_probe_residual<double>(char, int, const double*, int, const double*, int, unsigned long long);
template LapackLuReference lapack_lu_reference<float>(int, int, const float*, int, const float*, int);
template LapackLuReference lapack_lu_reference<double>(int, int, const double*, int, const double*, int);
template double growth_factor<float>(int, int, const float*, int, const float*, int);
template double growth_factor<double>(int, int, const double*, int, const double*, int);
template double lu_transform_residual<float>(int, int, const float*, int, const float*, int, const float*, int);
template double lu_transform_residual<double>(int, int, const double*, int, const double*, int, const double*, int);
template double solve_residual<double>(int, int, const double*, int, const double*, int, const double*, int);

}  // namespace starfact::checks
