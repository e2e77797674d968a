// Pure CPU tile kernels (cpu::potrf/trsm/syrk/gemm) against naive reference loops and
// LAPACK-style residuals, with NaN poison in padding and unreferenced triangles; also the
// residual checkers themselves. No Runtime: the kernels need no StarPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "codelets/cpu/tile_kernels.hpp"
#include "common/matgen.hpp"
#include "test_support.hpp"

namespace starfact::test {
namespace {

template <class T>
class CpuKernels : public SeededTest {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CpuKernels, Precisions);

constexpr int kSizes[] = {1, 2, 3, 7, 8, 13, 16, 33, 64};

bool is_notrans(char t) { return t == 'N'; }

/// Entry (i, j) of op(A) where A is triangular as (uplo, diag) describe: the other triangle
/// reads as zero and a unit diagonal as one, without touching the stored (poisoned) values.
template <class T>
long double tri_op(const HostMatrix<T>& A, char uplo, char trans, char diag, int i, int j) {
    if (!is_notrans(trans)) std::swap(i, j);
    if (i == j) return diag == 'U' ? 1.0L : static_cast<long double>(A(i, i));
    const bool stored = uplo == 'L' ? i > j : i < j;
    return stored ? static_cast<long double>(A(i, j)) : 0.0L;
}

/// A well-conditioned triangular matrix: diagonal in [2, 3), off-diagonal entries of size 1/n;
/// the other strict triangle is NaN, and with diag 'U' the diagonal is NaN too (a unit
/// triangular kernel must not read it).
template <class T>
HostMatrix<T> triangular(int n, char uplo, char diag, std::uint64_t seed) {
    HostMatrix<T> A = random_matrix<T>(n, n, n + 2, seed);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) {
            if (i == j)
                A(i, i) = diag == 'U' ? nan<T>() : static_cast<T>(2.5 + 0.5 * static_cast<double>(A(i, i)));
            else
                A(i, j) = static_cast<T>(static_cast<double>(A(i, j)) / n);
        }
    poison_strict_triangle(A, uplo == 'L' ? 'U' : 'L');
    return A;
}

// ---- potrf ---------------------------------------------------------------------------------

TYPED_TEST(CpuKernels, PotrfFactorsSpdWithPoisonedTriangleAndPadding) {
    using T = TypeParam;
    for (char uplo : {'L', 'U'})
        for (int n : kSizes) {
            SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", n " << n << ", lda " << n + 3);
            const HostMatrix<T> A = random_spd<T>(n, n + 3, this->seed() + n);
            HostMatrix<T> F = A;
            const char other = uplo == 'L' ? 'U' : 'L';
            poison_strict_triangle(F, other);
            EXPECT_EQ(cpu::potrf(uplo, F.view()), 0);
            EXPECT_PRED_FORMAT1(ResidualPasses, potrf_residual(uplo, A, F));
            EXPECT_EQ(non_finite(F, uplo), 0) << "NaN leaked from the unreferenced triangle or padding";
            EXPECT_EQ(non_nan_in_strict_triangle(F, other), 0) << "potrf wrote the other triangle";
            EXPECT_EQ(non_nan_in_padding(F), 0) << "potrf wrote the padding rows";
            if (n > 1) {
                EXPECT_GT(max_abs_diff(F, A, uplo), 0.0) << "the tile was not factored";
            }
        }
}

TYPED_TEST(CpuKernels, PotrfEmptyTileIsNoOp) {
    using T = TypeParam;
    EXPECT_EQ(cpu::potrf('L', TileView<T>{nullptr, 0, 0, 1}), 0);
    EXPECT_EQ(cpu::potrf('U', TileView<T>{nullptr, 0, 0, 1}), 0);
}

TYPED_TEST(CpuKernels, PotrfReportsExactInfoOfPlantedMinor) {
    using T = TypeParam;
    for (char uplo : {'L', 'U'})
        for (int n : {1, 2, 7, 16, 33}) {
            for (int k : {1, n / 2 + 1, n}) {
                SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", n " << n << ", failing minor k " << k);
                HostMatrix<T> F = spd_failing_at<T>(n, k, n + 1, this->seed() + k);
                ASSERT_EQ(reference_potrf_info(uplo, F), k) << "matgen::spd_failing_at did not plant minor k";
                const char other = uplo == 'L' ? 'U' : 'L';
                poison_strict_triangle(F, other);
                EXPECT_EQ(cpu::potrf(uplo, F.view()), k);
                EXPECT_EQ(non_nan_in_strict_triangle(F, other), 0);
                EXPECT_EQ(non_nan_in_padding(F), 0);
            }
        }
}

// LAPACK's potrf (dpotrf2/dpotf2) stops at the first column j whose pivot
// a(j,j) - sum_k l(j,k)^2 is not positive *or is NaN* (DISNAN) and returns info = j. A NaN at
// (i, j), i > j, of the lower triangle reaches the pivot of column i first, so info = i + 1;
// a NaN on the diagonal at (d, d) gives info = d + 1. The expected value is computed by the
// reference dpotf2 in test_support (reference_potrf_info), not hard-coded.
TYPED_TEST(CpuKernels, PotrfReportsColumnOfNaN) {
    using T = TypeParam;
    const int n = 16;
    struct Plant {
        int i, j;
    };
    for (char uplo : {'L', 'U'})
        for (Plant p : {Plant{9, 4}, Plant{5, 5}, Plant{15, 0}}) {
            SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", NaN at (" << p.i << ", " << p.j << ")");
            HostMatrix<T> F = random_spd<T>(n, n, this->seed());
            F(p.i, p.j) = nan<T>();
            F(p.j, p.i) = nan<T>();
            const int expected = reference_potrf_info(uplo, F);
            ASSERT_EQ(expected, p.i + 1);
            EXPECT_EQ(cpu::potrf(uplo, F.view()), expected) << "a NaN pivot must be reported as LAPACK does";
        }
}

// ---- trsm ----------------------------------------------------------------------------------

TYPED_TEST(CpuKernels, TrsmSolvesEveryCombination) {
    using T = TypeParam;
    const double eps = ScalarTraits<T>::eps;
    const int m = 13, n = 6;
    const T alpha = T(1.5);
    for (char side : {'L', 'R'})
        for (char uplo : {'L', 'U'})
            for (char trans : {'N', 'T'})
                for (char diag : {'N', 'U'}) {
                    SCOPED_TRACE(::testing::Message()
                                 << "side " << side << " uplo " << uplo << " trans " << trans << " diag " << diag);
                    const int na = side == 'L' ? m : n;
                    const HostMatrix<T> A = triangular<T>(na, uplo, diag, this->seed());
                    const HostMatrix<T> B = random_matrix<T>(m, n, m + 4, this->seed() + 1);
                    HostMatrix<T> X = B;
                    cpu::trsm(side, uplo, trans, diag, alpha, A.cview(), X.view());
                    ASSERT_EQ(non_finite(X), 0) << "NaN from A's unreferenced triangle/diagonal leaked";
                    EXPECT_EQ(non_nan_in_padding(X), 0) << "trsm wrote B's padding";
                    // || op(A) X - alpha B ||_max / ((|op(A)| |X| + |alpha| |B|)_max na eps), in long double.
                    double worst = 0.0;
                    for (int j = 0; j < n; ++j)
                        for (int i = 0; i < m; ++i) {
                            long double r = -static_cast<long double>(alpha) * B(i, j), s = std::abs(alpha * B(i, j));
                            for (int l = 0; l < na; ++l) {
                                const long double p = side == 'L' ? tri_op(A, uplo, trans, diag, i, l) * X(l, j)
                                                                  : X(i, l) * tri_op(A, uplo, trans, diag, l, j);
                                r += p;
                                s += std::abs(p);
                            }
                            worst = std::max(worst, static_cast<double>(std::abs(r) / (s * na * eps)));
                        }
                    EXPECT_PRED_FORMAT1(ResidualPasses, worst);
                    EXPECT_GT(max_abs_diff(X, B), 0.1) << "B was not solved in place";
                }
}

// ---- syrk ----------------------------------------------------------------------------------

TYPED_TEST(CpuKernels, SyrkMatchesNaiveUpdateOnItsTriangleOnly) {
    using T = TypeParam;
    const double eps = ScalarTraits<T>::eps;
    struct Scalars {
        T alpha, beta;
    };
    const int n = 11, k = 7;
    for (char uplo : {'L', 'U'})
        for (char trans : {'N', 'T'})
            for (Scalars ab : {Scalars{T(-1), T(1)}, Scalars{T(0.5), T(2)}, Scalars{T(1), T(0)}}) {
                SCOPED_TRACE(::testing::Message()
                             << "uplo " << uplo << " trans " << trans << " alpha " << ab.alpha << " beta " << ab.beta);
                const HostMatrix<T> A = is_notrans(trans) ? random_matrix<T>(n, k, n + 2, this->seed())
                                                          : random_matrix<T>(k, n, k + 3, this->seed());
                HostMatrix<T> C0 = random_matrix<T>(n, n, n + 5, this->seed() + 7);
                const char other = uplo == 'L' ? 'U' : 'L';
                poison_strict_triangle(C0, other);
                // BLAS: with beta = 0, C is not read, so even NaN in its triangle must vanish.
                if (ab.beta == T(0)) poison_strict_triangle(C0, uplo), C0(0, 0) = nan<T>();
                HostMatrix<T> C = C0;
                cpu::syrk(uplo, trans, ab.alpha, A.cview(), ab.beta, C.view());
                EXPECT_EQ(non_nan_in_strict_triangle(C, other), 0) << "syrk wrote the other triangle";
                EXPECT_EQ(non_nan_in_padding(C), 0);
                for (int j = 0; j < n; ++j)
                    for (int i = uplo == 'L' ? j : 0; i < (uplo == 'L' ? n : j + 1); ++i) {
                        long double ref = 0, mag = 0;
                        for (int l = 0; l < k; ++l) {
                            const long double a = is_notrans(trans) ? A(i, l) : A(l, i);
                            const long double b = is_notrans(trans) ? A(j, l) : A(l, j);
                            ref += a * b;
                            mag += std::abs(a * b);
                        }
                        ref *= ab.alpha;
                        mag *= std::abs(ab.alpha);
                        if (ab.beta != T(0)) {
                            ref += ab.beta * static_cast<long double>(C0(i, j));
                            mag += std::abs(ab.beta * static_cast<long double>(C0(i, j)));
                        }
                        ASSERT_LE(std::abs(static_cast<long double>(C(i, j)) - ref), 4 * (k + 2) * eps * mag)
                            << "C(" << i << ", " << j << ") = " << C(i, j) << ", reference "
                            << static_cast<double>(ref);
                    }
            }
}

// ---- gemm ----------------------------------------------------------------------------------

TYPED_TEST(CpuKernels, GemmMatchesNaiveProductForEveryTranspose) {
    using T = TypeParam;
    const double eps = ScalarTraits<T>::eps;
    const int m = 9, n = 5, k = 12;
    struct Scalars {
        T alpha, beta;
    };
    for (char ta : {'N', 'T'})
        for (char tb : {'N', 'T'})
            for (Scalars ab : {Scalars{T(-1), T(1)}, Scalars{T(0.75), T(-0.5)}, Scalars{T(2), T(0)}}) {
                SCOPED_TRACE(::testing::Message()
                             << "transa " << ta << " transb " << tb << " alpha " << ab.alpha << " beta " << ab.beta);
                const HostMatrix<T> A = is_notrans(ta) ? random_matrix<T>(m, k, m + 1, this->seed())
                                                       : random_matrix<T>(k, m, k + 2, this->seed());
                const HostMatrix<T> B = is_notrans(tb) ? random_matrix<T>(k, n, k + 3, this->seed() + 1)
                                                       : random_matrix<T>(n, k, n + 4, this->seed() + 1);
                HostMatrix<T> C0 = random_matrix<T>(m, n, m + 2, this->seed() + 2);
                if (ab.beta == T(0))  // C is not read when beta = 0
                    for (T& c : C0.data) c = nan<T>();
                HostMatrix<T> C = C0;
                cpu::gemm(ta, tb, ab.alpha, A.cview(), B.cview(), ab.beta, C.view());
                EXPECT_EQ(non_nan_in_padding(C), 0);
                for (int j = 0; j < n; ++j)
                    for (int i = 0; i < m; ++i) {
                        long double ref = 0, mag = 0;
                        for (int l = 0; l < k; ++l) {
                            const long double p = static_cast<long double>(is_notrans(ta) ? A(i, l) : A(l, i)) *
                                                  (is_notrans(tb) ? B(l, j) : B(j, l));
                            ref += p;
                            mag += std::abs(p);
                        }
                        ref *= ab.alpha;
                        mag *= std::abs(ab.alpha);
                        if (ab.beta != T(0)) {
                            ref += ab.beta * static_cast<long double>(C0(i, j));
                            mag += std::abs(ab.beta * static_cast<long double>(C0(i, j)));
                        }
                        ASSERT_LE(std::abs(static_cast<long double>(C(i, j)) - ref), 4 * (k + 2) * eps * mag)
                            << "C(" << i << ", " << j << ") = " << C(i, j) << ", reference "
                            << static_cast<double>(ref);
                    }
            }
}

// ---- the generators and checkers the other suites rely on ----------------------------------

// matgen::spd promises a symmetric positive definite matrix for every n.
TYPED_TEST(CpuKernels, MatgenSpdIsPositiveDefiniteForEveryN) {
    using T = TypeParam;
    for (int n : {1, 2, 3, 4, 8, 50})
        for (std::uint64_t s = 0; s < 16; ++s) {
            HostMatrix<T> A(n, n, n);
            matgen::spd(n, this->seed() + s, A.ptr(), n);
            ASSERT_EQ(reference_potrf_info('L', A), 0)
                << "matgen::spd(n = " << n << ", seed = " << this->seed() + s << ") is not positive definite";
        }
}

// spd_failing_at plants exactly the failing minor k, for every k.
TYPED_TEST(CpuKernels, MatgenSpdFailingAtPlantsExactMinor) {
    using T = TypeParam;
    const int n = 40;
    for (int k = 1; k <= n; ++k) {
        const HostMatrix<T> A = spd_failing_at<T>(n, k, n, this->seed() + k);
        ASSERT_EQ(reference_potrf_info('L', A), k);
        ASSERT_EQ(reference_potrf_info('U', A), k);
    }
}

// ---- the checkers -------------------------------------------------

TYPED_TEST(CpuKernels, ResidualCheckersRejectWrongResults) {
    using T = TypeParam;
    const int n = 20;
    for (char uplo : {'L', 'U'}) {
        SCOPED_TRACE(::testing::Message() << "uplo " << uplo);
        const HostMatrix<T> A = random_spd<T>(n, n + 1, this->seed());
        HostMatrix<T> F = A;
        ASSERT_EQ(cpu::potrf(uplo, F.view()), 0);
        ASSERT_PRED_FORMAT1(ResidualPasses, potrf_residual(uplo, A, F));
        ASSERT_PRED_FORMAT1(ResidualPasses,
                            checks::potrf_probe_residual<T>(uplo, n, A.ptr(), A.ld, F.ptr(), F.ld, this->seed()));
        HostMatrix<T> G = F;
        G(12, 12) *= T(1.001);  // a relative error far above eps in one entry of the factor
        EXPECT_FALSE(checks::passes(potrf_residual(uplo, A, G)));
        // The probe sees an error through a random x: make it large enough that x's entries
        // would have to be tiny (probability ~1e-7) for the probe to miss it.
        G(12, 12) *= T(1.1);
        G(5, 5) *= T(1.1);
        EXPECT_FALSE(
            checks::passes(checks::potrf_probe_residual<T>(uplo, n, A.ptr(), A.ld, G.ptr(), G.ld, this->seed())));
        G(12, 12) = nan<T>();
        EXPECT_FALSE(checks::passes(potrf_residual(uplo, A, G)));
    }
    // Solve: x = A^{-1} b from the factor passes; a perturbed x does not.
    const HostMatrix<T> A = random_spd<T>(n, n, this->seed());
    const HostMatrix<T> B = random_matrix<T>(n, 2, n, this->seed() + 1);
    HostMatrix<T> F = A, X = B;
    ASSERT_EQ(cpu::potrf('L', F.view()), 0);
    ASSERT_EQ(blas::potrs('L', n, 2, F.ptr(), F.ld, X.ptr(), X.ld), 0);
    EXPECT_PRED_FORMAT1(ResidualPasses, solve_residual(A, X, B));
    X(3, 1) += T(1e-3);
    EXPECT_FALSE(checks::passes(solve_residual(A, X, B)));
    EXPECT_FALSE(checks::passes(std::nan("")));
    EXPECT_FALSE(checks::passes(INFINITY));
    EXPECT_TRUE(checks::passes(29.9));
    EXPECT_FALSE(checks::passes(30.0));
}

}  // namespace
}  // namespace starfact::test
