// The accuracy study's library (tile_algorithms/accuracy.hpp): with one tile, tile LU is LAPACK's
// partial pivoting (same pivots, same solution, residual ratio 1); the extended residual is exact
// where the working one is not; the generated kinds have their promised properties; refinement on
// the tile LU factors recovers the backward error that many tiles lose; singular input is reported.
#include <gtest/gtest.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "codelets/codelets.hpp"
#include "common/blas.hpp"
#include "common/error.hpp"
#include "test_support.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

namespace starfact::test {
namespace {

using accuracy::MatrixKind;
// Exact sums of products of 31-bit integers (a GCC/Clang extension, hence the marker).
__extension__ typedef __int128 Int128;

template <class T>
class Accuracy : public RuntimeTest {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Accuracy, Precisions);

template <class T>
std::vector<T> make(MatrixKind kind, int n, std::uint64_t seed) {
    std::vector<T> A(static_cast<std::size_t>(n) * n);
    accuracy::generate(kind, n, seed, A.data(), n);
    return A;
}

template <class T>
std::vector<T> rhs(int n, std::uint64_t seed) {
    const auto B = random_matrix<T>(n, 1, n, seed);
    return B.data;
}

// With t = 1 the factorization is one GETRF on a CPU worker: the pivots must be LAPACK's, and
// with the same arithmetic the solution and hence the residual are LAPACK's to the bit.
TYPED_TEST(Accuracy, OneTileIsLapackPartialPivoting) {
    using T = TypeParam;
    const codelets::ScopedImpl cpu(codelets::Impl::Cpu);
    for (int n : {1, 2, 37, 200}) {
        for (MatrixKind kind : {MatrixKind::Uniform, MatrixKind::Normal, MatrixKind::Antitriangular}) {
            SCOPED_TRACE(::testing::Message() << "n=" << n << " kind=" << accuracy::matrix_kind_name(kind));
            const auto A = make<T>(kind, n, this->seed() + n);
            const auto b = rhs<T>(n, this->seed() + 3 * n);
            const auto pp = accuracy::partial_pivoting_solve(n, A.data(), n, b.data());
            ASSERT_EQ(pp.info, 0);

            TileMatrix<T> LU(n, n, n);
            LU.from_lapack(A.data(), n);
            LuFactors<T> F(LU, std::min(n, 32));
            ASSERT_EQ(getrf(LU, F), 0);
            EXPECT_EQ(accuracy::read_pivots(F.diag_pivots(0)), pp.ipiv);
            EXPECT_EQ(accuracy::count_row_swaps(F), pp.swaps);

            const double anorm = blas::lange('I', n, n, A.data(), n);
            accuracy::PointOptions o;
            o.nb = n;
            o.ib = std::min(n, 32);
            o.refine_steps = 1;
            const auto p = accuracy::tile_lu_point(n, A.data(), n, b.data(), anorm, o);
            const auto q = accuracy::solve_quality(n, A.data(), n, pp.x.data(), b.data(), anorm);
            EXPECT_EQ(p.tiles, 1);
            EXPECT_EQ(p.info, 0);
            EXPECT_EQ(p.swaps, pp.swaps);
            EXPECT_EQ(p.growth, pp.growth);
            EXPECT_EQ(p.quality.residual, q.residual) << "the residual ratio at t = 1 must be exactly 1";
            EXPECT_EQ(p.quality.residual_exact, q.residual_exact);
            EXPECT_EQ(p.quality.backward_error, q.backward_error);
            EXPECT_TRUE(checks::passes(p.quality.backward_error)) << p.quality.backward_error;
        }
    }
}

// A(i, j) = (2^k + a_ij) 2^-k, x_j = (2^k + c_j) 2^-k with small integers: every product is an
// integer times 2^-2k, so the exact residual is an integer computation. b is A x rounded, so
// b - A x is the tiny rounding error that a working-precision evaluation cannot see.
TYPED_TEST(Accuracy, ExtendedResidualIsExact) {
    using T = TypeParam;
    const int k = sizeof(T) == 8 ? 30 : 12;
    const double unit = std::ldexp(1.0, -k);
    for (int n : {1, 5, 300, 700}) {
        SCOPED_TRACE(::testing::Message() << "n=" << n);
        const auto R = random_matrix<double>(n, n + 1, n, this->seed() + n);
        std::vector<std::int64_t> ai(static_cast<std::size_t>(n) * n), ci(static_cast<std::size_t>(n));
        std::vector<T> A(ai.size()), x(ci.size()), b(ci.size());
        for (std::size_t e = 0; e < ai.size(); ++e) {
            ai[e] = (std::int64_t{1} << k) + static_cast<std::int64_t>(std::floor(R.data[e] * 1000));
            A[e] = static_cast<T>(static_cast<double>(ai[e]) * unit);
        }
        for (int j = 0; j < n; ++j) {
            ci[j] = (std::int64_t{1} << k) + static_cast<std::int64_t>(std::floor(R(j, n) * 1000));
            x[j] = static_cast<T>(static_cast<double>(ci[j]) * unit);
        }
        std::vector<Int128> exact(static_cast<std::size_t>(n), 0);
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i)
                exact[i] += static_cast<Int128>(ai[i + static_cast<std::size_t>(j) * n]) * ci[j];
        for (int i = 0; i < n; ++i) b[i] = static_cast<T>(std::ldexp(static_cast<double>(exact[i]), -2 * k));
        std::vector<double> r(static_cast<std::size_t>(n)), w(static_cast<std::size_t>(n));
        accuracy::residual(accuracy::ResidualPrecision::Extended, n, A.data(), n, x.data(), b.data(), r.data());
        accuracy::residual(accuracy::ResidualPrecision::Working, n, A.data(), n, x.data(), b.data(), w.data());
        int working_wrong = 0;
        for (int i = 0; i < n; ++i) {
            // b_i is a multiple of 2^-2k (its ulp is larger), so b_i - sum is an exact integer
            // computation, and the difference is small enough to be exact in double.
            const auto b_scaled = static_cast<Int128>(std::ldexp(static_cast<double>(b[i]), 2 * k));
            const double want = std::ldexp(static_cast<double>(b_scaled - exact[i]), -2 * k);
            // Dot2's bound: eps |r| plus (n eps)^2 sum |a x|, far below the working precision's error.
            const double tol = sizeof(T) == 8 ? 1e-15 * std::abs(want) + 1e-20 : 0.0;
            EXPECT_LE(std::abs(r[i] - want), tol) << "row " << i;
            if (w[i] != want) ++working_wrong;
        }
        if (n >= 300) {
            EXPECT_GT(working_wrong, 0) << "the test would not tell the two precisions apart";
        }
    }
}

TYPED_TEST(Accuracy, GeneratedKindsHaveTheirProperties) {
    using T = TypeParam;
    const int n = 96;
    for (MatrixKind kind :
         {MatrixKind::Uniform, MatrixKind::Normal, MatrixKind::IllConditioned, MatrixKind::Antitriangular}) {
        SCOPED_TRACE(accuracy::matrix_kind_name(kind));
        const auto A = make<T>(kind, n, this->seed());
        EXPECT_EQ(A, make<T>(kind, n, this->seed())) << "a seed defines the matrix";
        EXPECT_NE(A, make<T>(kind, n, this->seed() + 1));
        EXPECT_EQ(accuracy::parse_matrix_kind(accuracy::matrix_kind_name(kind)), kind);
        for (T v : A) ASSERT_TRUE(std::isfinite(v));
    }
    EXPECT_THROW(accuracy::parse_matrix_kind("hilbert"), ArgumentError);

    // Normal: moments of n^2 samples (standard errors about 0.003 and 0.005).
    const int m = 300;
    const auto N = make<double>(MatrixKind::Normal, m, this->seed());
    double mean = 0, var = 0;
    for (double v : N) mean += v;
    mean /= N.size();
    for (double v : N) var += (v - mean) * (v - mean);
    var /= N.size();
    EXPECT_LT(std::abs(mean), 0.03);
    EXPECT_LT(std::abs(var - 1.0), 0.05);

    // Ill-conditioned: the singular values span the promised condition number.
    {
        auto S = make<T>(MatrixKind::IllConditioned, n, this->seed());
        std::vector<double> Sd(S.begin(), S.end()), sv(static_cast<std::size_t>(n)), dummy(1);
        std::vector<double> superb(static_cast<std::size_t>(n));
        ASSERT_EQ(LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'N', 'N', n, n, Sd.data(), n, sv.data(), dummy.data(), 1,
                                 dummy.data(), 1, superb.data()),
                  0);
        const double cond = sv.front() / sv.back();
        EXPECT_NEAR(sv.front(), 1.0, 1e-5);
        EXPECT_NEAR(std::log10(cond), std::log10(accuracy::ill_conditioned_cond<T>()), 0.05) << "cond " << cond;
    }

    // Antitriangular: zero below the antidiagonal, ones on it; partial pivoting moves the unit rows
    // up (n/2 swaps) and does no arithmetic: growth exactly 1.
    {
        const auto X = make<T>(MatrixKind::Antitriangular, n, this->seed());
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i) {
                const T v = X[i + static_cast<std::size_t>(j) * n];
                const double want_max = i + j == n - 1 ? 1.0 : i + j > n - 1 ? 0.0 : 1.0001 / std::sqrt(n);
                EXPECT_LE(std::abs(v), want_max) << i << ", " << j;
                if (i + j == n - 1) {
                    EXPECT_EQ(v, T(1));
                }
            }
        const auto b = rhs<T>(n, this->seed());
        const auto pp = accuracy::partial_pivoting_solve(n, X.data(), n, b.data());
        EXPECT_EQ(pp.growth, 1.0);
        EXPECT_EQ(pp.swaps, n / 2);
    }
}

// On the antitriangular kind, four tiles lose several digits of backward error against partial
// pivoting; refinement on the same tile LU factors gets them back in a step or two.
TYPED_TEST(Accuracy, RefinementRecoversTheBackwardError) {
    using T = TypeParam;
    const int n = 256;
    const auto A = make<T>(MatrixKind::Antitriangular, n, this->seed());
    const auto b = rhs<T>(n, this->seed() + 1);
    const double anorm = blas::lange('I', n, n, A.data(), n);
    accuracy::PointOptions o;
    o.nb = 64;
    o.ib = 16;
    o.refine_steps = 2;
    const auto p = accuracy::tile_lu_point(n, A.data(), n, b.data(), anorm, o);
    ASSERT_EQ(p.info, 0);
    EXPECT_EQ(p.tiles, 4);
    EXPECT_GT(p.growth, 1.0);
    const auto pp = accuracy::partial_pivoting_solve(n, A.data(), n, b.data());
    EXPECT_GT(p.swaps, pp.swaps) << "pairwise pivoting moves more rows";
    for (const accuracy::Refinement* r : {&p.refined, &p.refined_x}) {
        ASSERT_EQ(r->quality.size(), 3u);
        EXPECT_EQ(r->quality[0].residual_exact, p.quality.residual_exact) << "both start from the tile LU solution";
        // Exact residuals: after refinement the working-precision evaluation would show its own rounding.
        const double before = r->quality[0].backward_error_exact, after = r->quality[2].backward_error_exact;
        EXPECT_LT(after, before / 10) << "before " << before << ", after two steps " << after;
        EXPECT_LT(after, 1.0);
        EXPECT_GE(r->seconds, 0.0);
    }
}

// A zero column: getrf's info is reported, nothing is solved, the numbers say so (NaN).
TYPED_TEST(Accuracy, SingularMatrixIsReported) {
    using T = TypeParam;
    const int n = 40;
    auto A = make<T>(MatrixKind::Uniform, n, this->seed());
    for (int i = 0; i < n; ++i) A[i + static_cast<std::size_t>(17) * n] = T(0);
    const auto b = rhs<T>(n, this->seed() + 1);
    accuracy::PointOptions o;
    o.nb = 16;
    o.ib = 4;
    o.refine_steps = 2;
    const auto p = accuracy::tile_lu_point(n, A.data(), n, b.data(), 1.0, o);
    EXPECT_EQ(p.info, 18);
    EXPECT_TRUE(std::isnan(p.quality.backward_error));
    EXPECT_TRUE(std::isnan(p.quality.backward_error_exact));
    EXPECT_EQ(p.refined.quality.size(), 3u);
    EXPECT_EQ(accuracy::partial_pivoting_solve(n, A.data(), n, b.data()).info, 18);
}

TEST(AccuracySwaps, CountsPivotsThatMoveARow) {
    const std::vector<int> ipiv = {1, 3, 3, 7, 5};
    EXPECT_EQ(accuracy::count_row_swaps(ipiv.data(), 5), 2);
    EXPECT_EQ(accuracy::count_row_swaps(ipiv.data(), 0), 0);
}

}  // namespace
}  // namespace starfact::test
