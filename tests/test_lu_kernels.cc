// CPU kernels of tile LU with incremental pivoting against their definitions, LAPACK's getrf of
// the stacked pair, naive long double references and a whole tile solve. No Runtime needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "codelets/cpu/lu_kernels.hpp"
#include "common/blas.hpp"
#include "test_support.hpp"

namespace starfact::test {
namespace {

template <class T>
class LuKernels : public SeededTest {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LuKernels, Precisions);

/// A long double column-major matrix for the references.
struct Ref {
    int m = 0, n = 0;
    std::vector<long double> v;
    Ref(int rows, int cols) : m(rows), n(cols), v(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols)) {}
    long double& operator()(int i, int j) { return v[static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * m]; }
    long double operator()(int i, int j) const {
        return v[static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * m];
    }
    void swap_rows(int a, int b) {
        for (int j = 0; j < n; ++j) std::swap((*this)(a, j), (*this)(b, j));
    }
    long double max_abs() const {
        long double d = 0;
        for (long double x : v) d = std::max(d, std::abs(x));
        return d;
    }
};

/// max |X - R| over R's m x n block (X may have more rows), NaN if any entry is NaN.
template <class T>
double max_diff(const HostMatrix<T>& X, const Ref& R) {
    double d = 0;
    for (int j = 0; j < R.n; ++j)
        for (int i = 0; i < R.m; ++i) {
            const double e = static_cast<double>(std::abs(static_cast<long double>(X(i, j)) - R(i, j)));
            if (std::isnan(e)) return e;
            d = std::max(d, e);
        }
    return d;
}

/// Tolerance for an entry of a result of size `scale` made through `n` accumulated operations.
template <class T>
double tol(int n, double scale) {
    return 30.0 * n * ScalarTraits<T>::eps * std::max(1.0, scale);
}

template <class T>
Ref to_ref(const HostMatrix<T>& A) {
    Ref R(A.m, A.n);
    for (int j = 0; j < A.n; ++j)
        for (int i = 0; i < A.m; ++i) R(i, j) = A(i, j);
    return R;
}

/// The U factor of a random K x K matrix (what TSTRF meets in the algorithm; a random
/// triangular matrix would be ill-conditioned), in a K + 1 ld (NaN padding), its strict lower
/// part set to `lower` (NaN: TSTRF must neither read nor write it).
template <class T>
HostMatrix<T> upper_tile(int K, std::uint64_t seed, T lower) {
    HostMatrix<T> U = random_matrix<T>(K, K, K + 1, seed);
    std::vector<int> ipiv(K);
    blas::getrf(K, K, U.ptr(), U.ld, ipiv.data());
    for (int j = 0; j < K; ++j)
        for (int i = j + 1; i < K; ++i) U(i, j) = lower;
    return U;
}

/// An ib x K tile for TSTRF's L, all NaN: SSSSM must read only the strict lower part of each
/// b x b block that TSTRF wrote.
template <class T>
HostMatrix<T> l_tile(int ib, int K) {
    HostMatrix<T> L(std::max(ib, 1), K, std::max(ib, 1) + 1);
    return L;
}

/// ||P A - L U||_1 / (max(m, n) ||A||_1 eps) for GETRF's output F and pivots.
template <class T>
double getrf_residual(const HostMatrix<T>& A, const HostMatrix<T>& F, const std::vector<int>& ipiv) {
    const int m = A.m, n = A.n, k = std::min(m, n);
    Ref R = to_ref(A);
    for (int j = 0; j < k; ++j) R.swap_rows(j, ipiv[j] - 1);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            long double lu = 0;
            for (int l = 0; l <= std::min({i, j, k - 1}); ++l)
                lu += (l == i ? 1.0L : static_cast<long double>(F(i, l))) * F(l, j);
            R(i, j) -= lu;
        }
    long double rnorm = 0, anorm = 0;
    for (int j = 0; j < n; ++j) {
        long double rs = 0, as = 0;
        for (int i = 0; i < m; ++i) rs += std::abs(R(i, j)), as += std::abs(static_cast<long double>(A(i, j)));
        rnorm = std::max(rnorm, rs), anorm = std::max(anorm, as);
    }
    return static_cast<double>(rnorm / (std::max(m, n) * anorm * ScalarTraits<T>::eps));
}

/// TSTRF's reference: LAPACK's getrf of the (K + m) x K stack [triu(U); A].
template <class T>
struct Stack {
    HostMatrix<T> S;
    std::vector<int> ipiv;
    int info = 0;
    Stack(const HostMatrix<T>& U, const HostMatrix<T>& A) : S(U.n + A.m, U.n, U.n + A.m), ipiv(U.n) {
        const int K = U.n;
        for (int j = 0; j < K; ++j) {
            for (int i = 0; i < K; ++i) S(i, j) = i <= j ? U(i, j) : T(0);
            for (int i = 0; i < A.m; ++i) S(K + i, j) = A(i, j);
        }
        info = blas::getrf(S.m, K, S.ptr(), S.ld, ipiv.data());
    }
    /// The stack's transformation L^{-1} P applied to the pair [B1(0:K, :); B2], in long double.
    Ref apply(const HostMatrix<T>& B1, const HostMatrix<T>& B2) const {
        const int K = S.n, n = B2.n;
        Ref Z(S.m, n);
        for (int j = 0; j < n; ++j) {
            for (int i = 0; i < K; ++i) Z(i, j) = B1(i, j);
            for (int i = 0; i < B2.m; ++i) Z(K + i, j) = B2(i, j);
        }
        for (int j = 0; j < K; ++j) Z.swap_rows(j, ipiv[j] - 1);
        for (int l = 0; l < K; ++l)
            for (int c = 0; c < n; ++c)
                for (int i = l + 1; i < S.m; ++i) Z(i, c) -= static_cast<long double>(S(i, l)) * Z(l, c);
        return Z;
    }
};

// ---- getrf -----------------------------------------------------------------------------------

TYPED_TEST(LuKernels, GetrfSatisfiesPALUForSquareTallAndWideTiles) {
    using T = TypeParam;
    struct Shape {
        int m, n;
    };
    for (Shape s : {Shape{1, 1}, Shape{2, 2}, Shape{7, 7}, Shape{13, 13}, Shape{33, 33}, Shape{20, 9}, Shape{40, 1},
                    Shape{9, 20}})
        for (int ib : {1, 3, s.n, s.n + 5}) {
            SCOPED_TRACE(::testing::Message() << "m " << s.m << ", n " << s.n << ", ib " << ib);
            const HostMatrix<T> A = random_matrix<T>(s.m, s.n, s.m + 3, this->seed() + s.m * 100 + s.n);
            HostMatrix<T> F = A;
            std::vector<int> ipiv(static_cast<std::size_t>(std::min(s.m, s.n)), -7);
            EXPECT_EQ(cpu::getrf(F.view(), ipiv.data(), ib), 0);
            for (int j = 0; j < std::min(s.m, s.n); ++j) {
                ASSERT_GE(ipiv[j], j + 1);
                ASSERT_LE(ipiv[j], s.m);
            }
            EXPECT_PRED_FORMAT1(ResidualPasses, getrf_residual(A, F, ipiv));
            EXPECT_EQ(non_nan_in_padding(F), 0);
            EXPECT_EQ(non_finite(F), 0);
        }
}

TYPED_TEST(LuKernels, GetrfEmptyTileIsNoOp) {
    using T = TypeParam;
    EXPECT_EQ(cpu::getrf(TileView<T>{nullptr, 0, 0, 1}, nullptr, 4), 0);
    HostMatrix<T> A(0, 3, 1);
    EXPECT_EQ(cpu::getrf(A.view(), nullptr, 4), 0);
}

TYPED_TEST(LuKernels, GetrfReportsFirstPlantedZeroColumn) {
    using T = TypeParam;
    for (int m : {9, 16})
        for (int j : {0, 4, 8}) {
            SCOPED_TRACE(::testing::Message() << "m " << m << ", zero column " << j);
            HostMatrix<T> A = random_matrix<T>(m, 9, m + 1, this->seed() + j);
            for (int i = 0; i < m; ++i) A(i, j) = T(0);
            std::vector<int> ipiv(9);
            EXPECT_EQ(cpu::getrf(A.view(), ipiv.data(), 3), j + 1);
            if (j < 8) {
                for (int i = 0; i < m; ++i) A(i, 8) = T(0);  // a later zero column: still the first
                HostMatrix<T> B = random_matrix<T>(m, 9, m + 1, this->seed() + j);
                for (int i = 0; i < m; ++i) B(i, j) = B(i, 8) = T(0);
                EXPECT_EQ(cpu::getrf(B.view(), ipiv.data(), 3), j + 1);
            }
        }
}

// A NaN must not produce a pivot outside [j + 1, m]: GESSM's swaps would then touch rows
// outside the tile. Where the NaN sits decides only the (garbage) factors.
TYPED_TEST(LuKernels, GetrfWithNaNKeepsPivotsInRange) {
    using T = TypeParam;
    struct Plant {
        int i, j;
    };
    for (int m : {8, 13})
        for (Plant p : {Plant{0, 0}, Plant{5, 2}, Plant{7, 7}, Plant{-1, 3}, Plant{-1, -1}}) {
            SCOPED_TRACE(::testing::Message() << "m " << m << ", NaN at (" << p.i << ", " << p.j << ") (-1: all)");
            HostMatrix<T> A = random_matrix<T>(m, 8, m + 2, this->seed());
            for (int j = 0; j < 8; ++j)
                for (int i = 0; i < m; ++i)
                    if ((p.i < 0 || p.i == i) && (p.j < 0 || p.j == j)) A(i, j) = nan<T>();
            std::vector<int> ipiv(8, -7);
            const int info = cpu::getrf(A.view(), ipiv.data(), 3);
            EXPECT_GE(info, 0);
            for (int j = 0; j < 8; ++j) {
                EXPECT_GE(ipiv[j], j + 1) << "j " << j;
                EXPECT_LE(ipiv[j], m) << "j " << j;
            }
            EXPECT_EQ(non_nan_in_padding(A), 0);
        }
}

// ---- gessm -----------------------------------------------------------------------------------

// D is K x K, or m x K tall (the last diagonal tile of a tall matrix): then L is m x K
// trapezoidal and GESSM also updates A's rows K.. by D's rows K...
TYPED_TEST(LuKernels, GessmMatchesNaiveLInversePA) {
    using T = TypeParam;
    for (int K : {1, 2, 7, 13, 32})
        for (int extra : {0, 1, 6})
            for (int n : {1, 5, 13}) {
                const int m = K + extra;
                HostMatrix<T> D = random_matrix<T>(m, K, m + 2, this->seed() + K);
                std::vector<int> ipiv(K);
                ASSERT_EQ(cpu::getrf(D.view(), ipiv.data(), K), 0);
                // GESSM reads only D's strict lower part (unit L): poison the rest.
                poison_strict_triangle(D, 'U');
                for (int i = 0; i < K; ++i) D(i, i) = nan<T>();
                const HostMatrix<T> A0 = random_matrix<T>(m, n, m + 1, this->seed() + 1000 + n);
                Ref R = to_ref(A0);
                for (int j = 0; j < K; ++j) R.swap_rows(j, ipiv[j] - 1);
                for (int l = 0; l < K; ++l)
                    for (int c = 0; c < n; ++c)
                        for (int i = l + 1; i < m; ++i) R(i, c) -= static_cast<long double>(D(i, l)) * R(l, c);
                for (int ib : {1, 2, 5, K, K + 3}) {
                    SCOPED_TRACE(::testing::Message() << "m " << m << ", K " << K << ", n " << n << ", ib " << ib);
                    HostMatrix<T> A = A0;
                    cpu::gessm(ipiv.data(), D.cview(), A.view(), ib);
                    EXPECT_LE(max_diff(A, R), tol<T>(m, static_cast<double>(R.max_abs())));
                    EXPECT_EQ(non_nan_in_padding(A), 0);
                }
            }
}

// ---- tstrf and ssssm -------------------------------------------------------------------------

struct PairShape {
    int K, m;
};
constexpr PairShape kPairs[] = {{1, 1}, {1, 4}, {5, 5}, {8, 8}, {8, 3}, {13, 13}, {13, 20}, {16, 1}};

// TSTRF is defined as getrf of the stack [triu(U); A] with the header's pivot encoding, which
// is LAPACK's row index of the stack as is: LAPACK never picks a row of U other than the
// diagonal one, because those rows are exact zeros in the current column (checked here).
TYPED_TEST(LuKernels, TstrfIsGetrfOfTheStackForEveryIb) {
    using T = TypeParam;
    for (PairShape s : kPairs) {
        const HostMatrix<T> U0 = upper_tile<T>(s.K, this->seed() + s.K, nan<T>());
        const HostMatrix<T> A0 = random_matrix<T>(s.m, s.K, s.m + 2, this->seed() + 7 * s.m);
        const Stack<T> ref(U0, A0);
        ASSERT_EQ(ref.info, 0);
        for (int j = 0; j < s.K; ++j) {
            const int p = ref.ipiv[j];
            ASSERT_TRUE(p == j + 1 || p > s.K) << "LAPACK picked U's row " << p << " for column " << j + 1;
        }
        for (int ib : {1, 2, 3, 5, s.K, s.K + 4}) {
            SCOPED_TRACE(::testing::Message() << "K " << s.K << ", m " << s.m << ", ib " << ib);
            HostMatrix<T> U = U0, A = A0, L = l_tile<T>(ib, s.K);
            std::vector<int> ipiv(static_cast<std::size_t>(s.K), -7);
            EXPECT_EQ(cpu::tstrf(U.view(), A.view(), L.view(), ipiv.data(), ib), 0);
            EXPECT_EQ(ipiv, ref.ipiv);
            const double scale = std::max(max_abs(ref.S), max_abs(U, 'U'));
            EXPECT_LE(max_abs_diff(U, ref.S, 'U'), tol<T>(s.K + s.m, scale)) << "U' differs";
            EXPECT_EQ(non_nan_in_strict_triangle(U, 'L'), 0) << "TSTRF wrote U's strict lower triangle";
            EXPECT_EQ(non_nan_in_padding(U), 0);
            EXPECT_EQ(non_nan_in_padding(A), 0);
            if (ib >= s.K) {  // one block: L and A hold exactly the stack's L
                double d = 0;
                for (int j = 0; j < s.K; ++j) {
                    for (int i = j + 1; i < s.K; ++i)
                        d = std::max(d, std::abs(static_cast<double>(L(i, j)) - ref.S(i, j)));
                    for (int i = 0; i < s.m; ++i)
                        d = std::max(d, std::abs(static_cast<double>(A(i, j)) - ref.S(s.K + i, j)));
                }
                EXPECT_LE(d, tol<T>(s.K + s.m, scale)) << "L1/L2 differ from the stack's L";
            }
            // Whatever the blocking stores, SSSSM with it must apply the stack's transformation.
            const HostMatrix<T> B1 = random_matrix<T>(s.K + 2, 6, s.K + 3, this->seed() + 11);
            const HostMatrix<T> B2 = random_matrix<T>(s.m, 6, s.m + 1, this->seed() + 12);
            const Ref Y = ref.apply(B1, B2);
            HostMatrix<T> X1 = B1, X2 = B2;
            cpu::ssssm(X1.view(), X2.view(), L.cview(), A.cview(), ipiv.data(), ib);
            Ref Y1(s.K, 6), Y2(s.m, 6);
            for (int j = 0; j < 6; ++j) {
                for (int i = 0; i < s.K; ++i) Y1(i, j) = Y(i, j);
                for (int i = 0; i < s.m; ++i) Y2(i, j) = Y(s.K + i, j);
            }
            const double yscale = static_cast<double>(Y.max_abs());
            EXPECT_LE(max_diff(X1, Y1), tol<T>(s.K + s.m, yscale)) << "SSSSM's A1 differs";
            EXPECT_LE(max_diff(X2, Y2), tol<T>(s.K + s.m, yscale)) << "SSSSM's A2 differs";
            for (int j = 0; j < 6; ++j)
                for (int i = s.K; i < s.K + 2; ++i) ASSERT_EQ(X1(i, j), B1(i, j)) << "SSSSM touched A1's rows >= K";
            EXPECT_EQ(non_nan_in_padding(X1), 0);
            EXPECT_EQ(non_nan_in_padding(X2), 0);
        }
    }
}

// SSSSM applied to the original columns of the pair must turn [triu(U); A] into [U'; 0]: the
// two kernels agree on pivots, L1 and L2 whatever ib.
TYPED_TEST(LuKernels, TstrfWithInversesKeepsTheFactorsAndInvertsL1) {
    using T = TypeParam;
    for (int K : {1, 5, 17, 40})
        for (int ib : {1, 4, 16, K}) {
            SCOPED_TRACE(::testing::Message() << "K=" << K << " ib=" << ib);
            const int m = K + 3;
            HostMatrix<T> U = random_matrix<T>(K, K, K, this->seed() + K);
            HostMatrix<T> A = random_matrix<T>(m, K, m, this->seed() + 2 * K);
            HostMatrix<T> U2 = U, A2 = A, L(ib, K, ib), L2(2 * ib, K, 2 * ib);
            std::vector<int> p(K), p2(K);
            ASSERT_EQ(cpu::tstrf<T>(U.view(), A.view(), L.view(), p.data(), ib), 0);
            ASSERT_EQ(cpu::tstrf<T>(U2.view(), A2.view(), L2.view(), p2.data(), ib, true), 0);
            // The variant changes nothing else: same pivots, bitwise the same factors and L1.
            EXPECT_EQ(p, p2);
            EXPECT_EQ(std::memcmp(U.ptr(), U2.ptr(), sizeof(T) * U.data.size()), 0);
            EXPECT_EQ(std::memcmp(A.ptr(), A2.ptr(), sizeof(T) * A.data.size()), 0);
            double worst = 0;
            for (int j0 = 0; j0 < K; j0 += ib) {
                const int b = std::min(ib, K - j0);
                for (int c = 0; c < b; ++c)
                    for (int i = c + 1; i < b; ++i) ASSERT_EQ(L(i, j0 + c), L2(i, j0 + c));
                // L1 * X = I, with X stored in full at rows ib..ib+b-1.
                for (int c = 0; c < b; ++c)
                    for (int i = 0; i < b; ++i) {
                        if (i <= c) {
                            ASSERT_EQ(L2(ib + i, j0 + c), i == c ? T(1) : T(0));
                        }
                        double acc = 0;
                        for (int k = 0; k <= i; ++k) {
                            const double l = k == i ? 1.0 : static_cast<double>(L2(i, j0 + k));
                            acc += l * static_cast<double>(L2(ib + k, j0 + c));
                        }
                        worst = std::max(worst, std::abs(acc - (i == c ? 1.0 : 0.0)));
                    }
            }
            EXPECT_LT(worst, 30.0 * K * std::numeric_limits<T>::epsilon()) << "||L1 X - I||_max";
        }
}

TYPED_TEST(LuKernels, SsssmOnOriginalPairReproducesTstrf) {
    using T = TypeParam;
    for (PairShape s : kPairs)
        for (int ib : {1, 2, 3, s.K, s.K + 1}) {
            SCOPED_TRACE(::testing::Message() << "K " << s.K << ", m " << s.m << ", ib " << ib);
            const HostMatrix<T> U0 = upper_tile<T>(s.K, this->seed() + s.K + 1, nan<T>());
            const HostMatrix<T> A0 = random_matrix<T>(s.m, s.K, s.m + 2, this->seed() + 5 * s.m);
            HostMatrix<T> U = U0, A = A0, L = l_tile<T>(ib, s.K);
            std::vector<int> ipiv(static_cast<std::size_t>(s.K));
            ASSERT_EQ(cpu::tstrf(U.view(), A.view(), L.view(), ipiv.data(), ib), 0);
            HostMatrix<T> X1 = U0, X2 = A0;
            for (int j = 0; j < s.K; ++j)
                for (int i = j + 1; i < s.K; ++i) X1(i, j) = T(0);
            cpu::ssssm(X1.view(), X2.view(), L.cview(), A.cview(), ipiv.data(), ib);
            Ref Up(s.K, s.K), Z(s.m, s.K);
            for (int j = 0; j < s.K; ++j)
                for (int i = 0; i <= j; ++i) Up(i, j) = U(i, j);
            const double scale = std::max(max_abs(U0, 'U'), max_abs(U, 'U'));
            EXPECT_LE(max_diff(X1, Up), tol<T>(s.K + s.m, scale)) << "A1 is not U' (upper) and 0 (below)";
            EXPECT_LE(max_diff(X2, Z), tol<T>(s.K + s.m, scale)) << "A2 was not eliminated";
        }
}

TYPED_TEST(LuKernels, TstrfWithNoRowsBelowKeepsU) {
    using T = TypeParam;
    HostMatrix<T> U = upper_tile<T>(6, this->seed(), nan<T>());
    const HostMatrix<T> U0 = U;
    HostMatrix<T> A(0, 6, 1), L = l_tile<T>(4, 6);
    std::vector<int> ipiv(6);
    EXPECT_EQ(cpu::tstrf(U.view(), A.view(), L.view(), ipiv.data(), 4), 0);
    for (int j = 0; j < 6; ++j) EXPECT_EQ(ipiv[j], j + 1);
    EXPECT_EQ(max_abs_diff(U, U0, 'U'), 0.0);
}

// A column of the stack that is exactly zero stays zero under the elimination (its entries in
// the pivot rows are zero), so its pivot is exactly zero: info is that column, for every ib.
TYPED_TEST(LuKernels, TstrfReportsFirstZeroColumnOfTheStack) {
    using T = TypeParam;
    const int K = 13, m = 9;
    for (int j : {0, 6, 12})
        for (int ib : {1, 3, 4, K}) {
            SCOPED_TRACE(::testing::Message() << "zero column " << j << ", ib " << ib);
            HostMatrix<T> U = upper_tile<T>(K, this->seed() + j, nan<T>());
            HostMatrix<T> A = random_matrix<T>(m, K, m, this->seed() + 3);
            for (int i = 0; i <= j; ++i) U(i, j) = T(0);
            for (int i = 0; i < m; ++i) A(i, j) = T(0);
            if (j < K - 1) {  // a later zero column must not win
                for (int i = 0; i < K; ++i) U(i, K - 1) = T(0);
                for (int i = 0; i < m; ++i) A(i, K - 1) = T(0);
            }
            HostMatrix<T> L = l_tile<T>(ib, K);
            std::vector<int> ipiv(K);
            EXPECT_EQ(cpu::tstrf(U.view(), A.view(), L.view(), ipiv.data(), ib), j + 1);
            for (int c = 0; c < K; ++c) {
                const int p = ipiv[c];
                EXPECT_TRUE(p == c + 1 || (p > K && p <= K + m)) << "column " << c << " pivot " << p;
            }
            EXPECT_EQ(U(j, j), T(0));
            EXPECT_EQ(non_nan_in_strict_triangle(U, 'L'), 0);
        }
}

// A zero on U's diagonal is not a zero pivot of the stack: TSTRF takes the pivot from A.
TYPED_TEST(LuKernels, TstrfPivotsAroundZeroDiagonalOfU) {
    using T = TypeParam;
    const int K = 8, m = 8;
    for (int j : {0, 3, 7}) {
        HostMatrix<T> U = upper_tile<T>(K, this->seed(), nan<T>());
        for (int i = 0; i <= j; ++i) U(i, j) = T(0);
        HostMatrix<T> A = random_matrix<T>(m, K, m, this->seed() + 1);
        HostMatrix<T> L = l_tile<T>(3, K);
        std::vector<int> ipiv(K);
        EXPECT_EQ(cpu::tstrf(U.view(), A.view(), L.view(), ipiv.data(), 3), 0) << "j " << j;
        EXPECT_GT(ipiv[j], K) << "j " << j;
        EXPECT_NE(U(j, j), T(0));
    }
}

// NaN anywhere: no crash, every pivot j + 1 or a row of A, U's strict lower part untouched.
TYPED_TEST(LuKernels, TstrfWithNaNKeepsPivotsInRange) {
    using T = TypeParam;
    const int K = 9, m = 7;
    struct Plant {
        char tile;  // 'U' or 'A'
        int i, j;   // -1: every row / column
    };
    for (Plant p : {Plant{'U', 0, 0}, Plant{'U', 2, 5}, Plant{'U', 8, 8}, Plant{'A', 3, 0}, Plant{'A', 6, 4},
                    Plant{'A', -1, 2}, Plant{'A', -1, -1}, Plant{'U', -1, -1}})
        for (int ib : {1, 4, K}) {
            SCOPED_TRACE(::testing::Message()
                         << "NaN in " << p.tile << " at (" << p.i << ", " << p.j << "), ib " << ib);
            HostMatrix<T> U = upper_tile<T>(K, this->seed(), nan<T>());
            HostMatrix<T> A = random_matrix<T>(m, K, m + 1, this->seed() + 1);
            HostMatrix<T>& X = p.tile == 'U' ? U : A;
            for (int j = 0; j < K; ++j)
                for (int i = 0; i < X.m; ++i)
                    if ((p.i < 0 || p.i == i) && (p.j < 0 || p.j == j) && (p.tile == 'A' || i <= j)) X(i, j) = nan<T>();
            HostMatrix<T> L = l_tile<T>(ib, K);
            std::vector<int> ipiv(K, -7);
            EXPECT_GE(cpu::tstrf(U.view(), A.view(), L.view(), ipiv.data(), ib), 0);
            for (int c = 0; c < K; ++c) {
                const int piv = ipiv[c];
                EXPECT_TRUE(piv == c + 1 || (piv > K && piv <= K + m)) << "column " << c << " pivot " << piv;
            }
            HostMatrix<T> B1 = random_matrix<T>(K, 3, K, this->seed() + 2), B2 = random_matrix<T>(m, 3, m, 5);
            cpu::ssssm(B1.view(), B2.view(), L.cview(), A.cview(), ipiv.data(), ib);
            EXPECT_EQ(non_nan_in_strict_triangle(U, 'L'), 0);
            EXPECT_EQ(non_nan_in_padding(U), 0);
            EXPECT_EQ(non_nan_in_padding(A), 0);
        }
}

// ---- the incremental scheme on a tile grid, solved -------------------------------------------

/// A square matrix of order N cut into nb tiles (edge tile last), each with NaN padding, and
/// the factors the right-looking incremental LU leaves next to it.
template <class T>
struct TileLu {
    int N, nb, nt, ib;
    std::vector<HostMatrix<T>> tiles, Ls;
    std::vector<std::vector<int>> dpiv, piv;
    std::vector<int> getrf_info, tstrf_info;

    TileLu(const HostMatrix<T>& A, int tile, int inner)
        : N(A.n), nb(tile), nt((A.n + tile - 1) / tile), ib(inner), tiles(static_cast<std::size_t>(nt * nt)),
          Ls(static_cast<std::size_t>(nt * nt)), dpiv(static_cast<std::size_t>(nt)),
          piv(static_cast<std::size_t>(nt * nt)), getrf_info(static_cast<std::size_t>(nt)),
          tstrf_info(static_cast<std::size_t>(nt * nt)) {
        for (int j = 0; j < nt; ++j)
            for (int i = 0; i < nt; ++i) {
                HostMatrix<T>& X = at(i, j);
                X = HostMatrix<T>(size(i), size(j), size(i) + 1);
                for (int c = 0; c < X.n; ++c)
                    for (int r = 0; r < X.m; ++r) X(r, c) = A(i * nb + r, j * nb + c);
            }
    }
    int size(int k) const { return std::min(nb, N - k * nb); }
    HostMatrix<T>& at(int i, int j) { return tiles[i + j * nt]; }
    HostMatrix<T>& L(int i, int k) { return Ls[i + k * nt]; }
    std::vector<int>& ipiv(int i, int k) { return piv[i + k * nt]; }

    void factor() {
        for (int k = 0; k < nt; ++k) {
            dpiv[k].assign(static_cast<std::size_t>(size(k)), 0);
            getrf_info[k] = cpu::getrf(at(k, k).view(), dpiv[k].data(), ib);
            for (int j = k + 1; j < nt; ++j)
                cpu::gessm(dpiv[k].data(), at(k, k).cview(), at(k, j).view(), ib);
            for (int i = k + 1; i < nt; ++i) {
                L(i, k) = l_tile<T>(ib, size(k));
                ipiv(i, k).assign(static_cast<std::size_t>(size(k)), 0);
                tstrf_info[i + k * nt] =
                    cpu::tstrf(at(k, k).view(), at(i, k).view(), L(i, k).view(), ipiv(i, k).data(), ib);
                for (int j = k + 1; j < nt; ++j)
                    cpu::ssssm(at(k, j).view(), at(i, j).view(), L(i, k).cview(), at(i, k).cview(),
                               ipiv(i, k).data(), ib);
            }
        }
    }

    /// The global info: the first zero on the final U's diagonal, which the last kernel that
    /// wrote each diagonal tile's U reports (GETRF's or an earlier TSTRF's zero pivot may be
    /// repaired by a pivot from a tile further down).
    int info() const {
        for (int k = 0; k < nt; ++k) {
            const int last = k == nt - 1 ? getrf_info[k]
                                         : tstrf_info[nt - 1 + k * nt];
            if (last != 0) return k * nb + last;
        }
        return 0;
    }

    /// x = A^{-1} b by the same transformations, in naive long double loops.
    std::vector<long double> solve(const std::vector<long double>& b) {
        std::vector<std::vector<long double>> y(static_cast<std::size_t>(nt));
        for (int k = 0; k < nt; ++k) y[k].assign(b.begin() + k * nb, b.begin() + k * nb + size(k));
        for (int k = 0; k < nt; ++k) {
            std::vector<long double>& yk = y[k];
            const int K = size(k);
            const HostMatrix<T>& D = at(k, k);
            for (int j = 0; j < K; ++j) std::swap(yk[j], yk[dpiv[k][j] - 1]);
            for (int j = 0; j < K; ++j)
                for (int i = j + 1; i < K; ++i) yk[i] -= D(i, j) * yk[j];
            for (int i = k + 1; i < nt; ++i) {
                std::vector<long double>& yi = y[i];
                const HostMatrix<T>& AL = at(i, k);
                const HostMatrix<T>& Lk = L(i, k);
                const std::vector<int>& p = ipiv(i, k);
                for (int j0 = 0; j0 < K; j0 += ib) {
                    const int bs = std::min(ib, K - j0);
                    for (int j = j0; j < j0 + bs; ++j)
                        if (p[j] > K)
                            std::swap(yk[j], yi[p[j] - K - 1]);
                    for (int j = 0; j < bs; ++j)
                        for (int r = j + 1; r < bs; ++r)
                            yk[j0 + r] -= Lk(r, j0 + j) * yk[j0 + j];
                    for (int r = 0; r < AL.m; ++r)
                        for (int j = j0; j < j0 + bs; ++j)
                            yi[r] -= AL(r, j) * yk[j];
                }
            }
        }
        for (int k = nt - 1; k >= 0; --k) {
            std::vector<long double>& yk = y[k];
            for (int j = k + 1; j < nt; ++j)
                for (int c = 0; c < size(j); ++c)
                    for (int r = 0; r < size(k); ++r)
                        yk[r] -= at(k, j)(r, c) * y[j][c];
            const HostMatrix<T>& D = at(k, k);
            for (int r = size(k) - 1; r >= 0; --r) {
                for (int c = r + 1; c < size(k); ++c) yk[r] -= D(r, c) * yk[c];
                yk[r] /= D(r, r);
            }
        }
        std::vector<long double> x;
        for (const auto& yk : y) x.insert(x.end(), yk.begin(), yk.end());
        return x;
    }
};

template <class T>
double tile_solve_residual(const HostMatrix<T>& A, TileLu<T>& lu, std::uint64_t seed) {
    const HostMatrix<T> B = random_matrix<T>(A.n, 1, A.n, seed);
    std::vector<long double> b(static_cast<std::size_t>(A.n));
    for (int i = 0; i < A.n; ++i) b[i] = B(i, 0);
    const std::vector<long double> x = lu.solve(b);
    HostMatrix<T> X(A.n, 1, A.n);
    for (int i = 0; i < A.n; ++i) X(i, 0) = static_cast<T>(x[i]);
    return solve_residual(A, X, B);
}

struct Grid {
    int N, nb;
};
constexpr Grid kGrids[] = {{24, 8}, {33, 13}, {19, 9}, {30, 10}, {11, 5}, {7, 8}};

TYPED_TEST(LuKernels, TileLuSolvesWithSmallBackwardError) {
    using T = TypeParam;
    for (Grid g : kGrids)
        for (int ib : {1, 2, 3, g.nb, g.nb + 2})
            for (bool weak_diagonal : {false, true}) {
                SCOPED_TRACE(::testing::Message() << "N " << g.N << ", nb " << g.nb << ", ib " << ib
                                                  << (weak_diagonal ? ", small diagonal tiles" : ""));
                HostMatrix<T> A = random_matrix<T>(g.N, g.N, g.N, this->seed() + g.N);
                // Small diagonal tiles make TSTRF pull most pivots up from the tiles below.
                if (weak_diagonal)
                    for (int j = 0; j < g.N; ++j)
                        for (int i = 0; i < g.N; ++i)
                            if (i / g.nb == j / g.nb) A(i, j) *= T(1e-3);
                TileLu<T> lu(A, g.nb, ib);
                lu.factor();
                EXPECT_EQ(lu.info(), 0);
                for (int i = 0; i < lu.nt; ++i)
                    for (int j = 0; j < lu.nt; ++j) {
                        EXPECT_EQ(non_nan_in_padding(lu.at(i, j)), 0) << "tile " << i << ", " << j;
                        EXPECT_EQ(non_finite(lu.at(i, j)), 0) << "tile " << i << ", " << j;
                    }
                EXPECT_PRED_FORMAT1(ResidualPasses, tile_solve_residual(A, lu, this->seed() + 99));
            }
}

// A zero column c of A stays exactly zero through GESSM and SSSSM, so GETRF (last tile) or the
// last TSTRF of its panel reports it: the global info is c + 1.
TYPED_TEST(LuKernels, TileLuReportsPlantedZeroColumn) {
    using T = TypeParam;
    const Grid g{33, 13};
    for (int c : {0, 5, 13, 20, 26, 32})
        for (int ib : {1, 4, g.nb}) {
            SCOPED_TRACE(::testing::Message() << "zero column " << c << ", ib " << ib);
            HostMatrix<T> A = random_matrix<T>(g.N, g.N, g.N, this->seed() + c);
            for (int i = 0; i < g.N; ++i) A(i, c) = T(0);
            TileLu<T> lu(A, g.nb, ib);
            lu.factor();
            EXPECT_EQ(lu.info(), c + 1);
        }
}

// A zero column inside the diagonal tile only: GETRF reports it, yet the matrix is regular and
// TSTRF pivots it away; the scheme must go on and solve accurately.
TYPED_TEST(LuKernels, TileLuRecoversFromSingularDiagonalTile) {
    using T = TypeParam;
    const Grid g{24, 8};
    for (int j : {0, 3, 7}) {
        SCOPED_TRACE(::testing::Message() << "zero column " << j << " of the first diagonal tile");
        HostMatrix<T> A = random_matrix<T>(g.N, g.N, g.N, this->seed() + j);
        for (int i = 0; i < g.nb; ++i) A(i, j) = T(0);
        TileLu<T> lu(A, g.nb, 3);
        lu.factor();
        EXPECT_EQ(lu.getrf_info[0], j + 1);
        EXPECT_EQ(lu.info(), 0);
        EXPECT_PRED_FORMAT1(ResidualPasses, tile_solve_residual(A, lu, this->seed() + 1));
    }
}

}  // namespace
}  // namespace starfact::test
