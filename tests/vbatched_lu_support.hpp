// Helpers of the variable-size batched LU suites (test_vbatched, test_vbatched_cuda): the LU
// residual with pivots checked in range, and general matrices with a planted zero pivot.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/scalar_traits.hpp"
#include "test_support.hpp"

namespace starfact::test {

/// ||P A - L U||_1 / (n ||A||_1 eps) of a getrf output F (n x n) with 1-based pivots ipiv;
/// +Inf when a pivot is out of range [i+1, n], NaN when the residual is.
template <class T>
double lu_residual_ratio(const HostMatrix<T>& A, const HostMatrix<T>& F, const int* ipiv) {
    const int n = A.n;
    if (n == 0) return 0.0;
    for (int i = 0; i < n; ++i)
        if (ipiv[i] < i + 1 || ipiv[i] > n) return std::numeric_limits<double>::infinity();
    std::vector<double> R(static_cast<std::size_t>(n) * n);
    auto r = [&](int i, int j) -> double& { return R[i + static_cast<std::size_t>(j) * n]; };
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) r(i, j) = A(i, j);
    for (int i = 0; i < n; ++i)
        if (ipiv[i] - 1 != i)
            for (int j = 0; j < n; ++j) std::swap(r(i, j), r(ipiv[i] - 1, j));
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) {
            double lu = 0.0;
            const int top = std::min(i, j);
            for (int p = 0; p < top; ++p) lu += static_cast<double>(F(i, p)) * static_cast<double>(F(p, j));
            lu += i <= j ? static_cast<double>(F(i, j)) : static_cast<double>(F(i, j)) * static_cast<double>(F(j, j));
            r(i, j) -= lu;
        }
    double rnorm = 0.0, anorm = 0.0;
    for (int j = 0; j < n; ++j) {
        double rs = 0.0, as = 0.0;
        for (int i = 0; i < n; ++i) {
            rs += std::abs(r(i, j));
            as += std::abs(static_cast<double>(A(i, j)));
        }
        if (std::isnan(rs)) return rs;
        rnorm = std::max(rnorm, rs);
        anorm = std::max(anorm, as);
    }
    if (anorm == 0.0) return rnorm == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
    return rnorm / (n * anorm * static_cast<double>(ScalarTraits<T>::eps));
}

/// A uniform [-1, 1) n x n matrix (leading dimension ld) with column k-1 set to zero: LU with
/// partial pivoting meets an exactly zero pivot at column k first (the column stays zero under
/// the updates, the earlier ones are random), so LAPACK's info is k.
template <class T>
HostMatrix<T> lu_failing_at(int n, int k, int ld, std::uint64_t seed) {
    HostMatrix<T> A = random_matrix<T>(n, n, ld, seed);
    for (int i = 0; i < n; ++i) A(i, k - 1) = T(0);
    return A;
}

}  // namespace starfact::test
