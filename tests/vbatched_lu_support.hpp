// Helpers of the variable-size batched LU suites (test_vbatched, test_vbatched_cuda,
// test_vbatched_lu_small_cuda): the LU residual with pivots checked in range, general matrices
// with a planted zero pivot, LU batches, and the checks every vgetrf result gets.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "common/blas.hpp"
#include "common/checks.hpp"
#include "common/scalar_traits.hpp"
#include "test_support.hpp"
#include "vbatched_test_support.hpp"

namespace starfact::test {

/// kappa_1(A) as LAPACK's gecon estimates it from LAPACK's LU factors F of A (infinite for a
/// singular A).
inline double condition_1(const HostMatrix<double>& A, const HostMatrix<double>& F) {
    double rcond = 0;
    const double anorm = blas::lange('1', A.n, A.n, A.ptr(), A.ld);
    LAPACKE_dgecon(LAPACK_COL_MAJOR, '1', A.n, F.ptr(), F.ld, anorm, &rcond);
    return rcond > 0 ? 1.0 / rcond : HUGE_VAL;
}
inline double condition_1(const HostMatrix<float>& A, const HostMatrix<float>& F) {
    float rcond = 0;
    const float anorm = blas::lange('1', A.n, A.n, A.ptr(), A.ld);
    LAPACKE_sgecon(LAPACK_COL_MAJOR, '1', A.n, F.ptr(), F.ld, anorm, &rcond);
    return rcond > 0 ? 1.0 / rcond : HUGE_VAL;
}

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

/// A general batch to factor: uniform [-1, 1) matrices (lda[b] = max(1, n[b] + b % 3)), zero
/// pivots planted as in plant_failures (columns 1, n/2+1, n), and LAPACK's info on each.
template <class T>
struct LuCase {
    std::vector<HostMatrix<T>> A;
    std::vector<int> expected;  ///< planted info (0: none)
    int nan_at = -1;            ///< the matrix holding a NaN, if any (its info and pivots are only range-checked)
};

template <class T>
LuCase<T> make_lu_case(std::vector<int> n, bool plant, std::uint64_t seed) {
    const PlantedOrders p = plant_failures(std::move(n), plant);
    LuCase<T> c;
    c.expected = p.expected;
    for (std::size_t b = 0; b < p.n.size(); ++b) {
        const int nb = p.n[b], ld = std::max(1, nb + static_cast<int>(b % 3));
        const std::uint64_t s = seed + 7919ULL * b;
        c.A.push_back(p.expected[b] != 0 ? lu_failing_at<T>(nb, p.expected[b], ld, s)
                                         : random_matrix<T>(nb, nb, ld, s));
    }
    return c;
}

/// What one vgetrf call returned.
template <class T>
struct LuResult {
    std::vector<HostMatrix<T>> F;
    std::vector<std::vector<int>> ipiv;  ///< max(1, n) entries per matrix (poison -99 past n)
    std::vector<int> info;
};

/// The checks of matrix b of r = vgetrf(c) before its factor is compared, in order: the padding
/// untouched; the pivots in range (empty_pivot: an empty matrix's pivot slot still -99); the NaN
/// matrix's info in [0, n]; else info the planted one and LAPACKE's (on a copy), then the residual
/// below the threshold. failures: what failed; compare: whether to go on to the pivots and factor.
template <class T>
struct LuMatrixCheck {
    std::vector<std::string> failures;
    bool compare = false;
    HostMatrix<T> L;        ///< LAPACKE's factor
    std::vector<int> lpiv;  ///< LAPACKE's pivots
};

template <class T>
LuMatrixCheck<T> check_lu_matrix(const LuCase<T>& c, const LuResult<T>& r, int b, bool empty_pivot) {
    const auto& A = c.A[b];
    const int nb = A.n;
    LuMatrixCheck<T> v{{}, false, A, std::vector<int>(std::max(nb, 1), -99)};
    const int linfo = nb == 0 ? 0 : blas::getrf(nb, nb, v.L.ptr(), v.L.ld, v.lpiv.data());
    if (non_nan_in_padding(r.F[b]) != 0) v.failures.push_back("the padding was written");
    bool in_range = true;
    for (int i = 0; i < nb; ++i) in_range = in_range && r.ipiv[b][i] >= i + 1 && r.ipiv[b][i] <= nb;
    if (!in_range) v.failures.push_back("a pivot out of range");
    if (empty_pivot && nb == 0 && r.ipiv[b][0] != -99) v.failures.push_back("a pivot written for an empty matrix");
    if (b == c.nan_at) {
        if (r.info[b] < 0 || r.info[b] > nb) v.failures.push_back("info out of range");
        return v;
    }
    if (r.info[b] != c.expected[b] || linfo != c.expected[b]) {
        std::ostringstream m;
        m << "info " << r.info[b] << ", planted " << c.expected[b] << ", LAPACKE's " << linfo;
        v.failures.push_back(m.str());
        return v;
    }
    const double res = lu_residual_ratio(A, r.F[b], r.ipiv[b].data());
    if (!(checks::passes(res) && res >= 0)) {
        std::ostringstream m;
        m << "residual " << res;
        v.failures.push_back(m.str());
    }
    v.compare = true;
    return v;
}

/// Where a GPU factor's pivots first depart from LAPACKE's, whether that is a near tie: the
/// row the GPU chose at that column k ends, after LAPACKE's interchanges from k on, at some row
/// p > k of LAPACKE's factor L, and |L(p, k)| (its value over LAPACKE's pivot) must be at least
/// 1 - 100 n eps. Two orders of the same operations round the column differently, so candidates
/// equal to rounding may be chosen either way (LAPACKE's recursive getrf2 and our kernels do
/// not add in the same order); any other difference is a wrong pivot. Empty when the pivots
/// agree or the difference is such a tie; otherwise what is wrong.
template <class T>
std::string pivot_difference(const HostMatrix<T>& L, const std::vector<int>& lpiv, const int* gpu, int n) {
    int k = 0;
    while (k < n && lpiv[k] == gpu[k]) ++k;
    if (k == n) return {};
    int p = gpu[k] - 1;  // the GPU's pivot row, at its position before LAPACKE's interchange k
    for (int j = k; j < n; ++j) {
        const int q = lpiv[j] - 1;
        if (p == j)
            p = q;
        else if (p == q)
            p = j;
    }
    const double ratio = std::abs(static_cast<double>(L(p, k)));
    const double tol = 100.0 * n * ScalarTraits<T>::eps;
    if (p > k && ratio >= 1.0 - tol) return {};
    std::ostringstream m;
    m << "pivot of column " << k << ": row " << gpu[k] << " where LAPACKE chose row " << lpiv[k]
      << ", not a near tie (|L(" << p << ", " << k << ")| = " << ratio << " < 1 - " << tol << ")";
    return m.str();
}

}  // namespace starfact::test
