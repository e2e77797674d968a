// CPU kernels of tile QR (GEQRT, UNMQR, TSQRT, TSMQR, TTQRT, TTMQR): the normalized QR residuals
// of TESTING.md, round trips, NaN poisoning of the diagonal tile's V, TTQRT/TTMQR against
// LAPACKE's dtpqrt/dtpmqrt with l = the triangle's rows, and a whole 3 x 3 tile QR.
// No Runtime needed.
#include <gtest/gtest.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "codelets/cpu/qr_kernels.hpp"
#include "common/scalar_traits.hpp"
#include "test_support.hpp"

namespace starfact::test {
namespace {

template <class T>
class QrKernels : public SeededTest {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(QrKernels, Precisions);

constexpr double kLimit = 30.0;

/// One norm of the m x n block (long double accumulation), NaN if any entry is NaN.
template <class T>
long double norm1(const HostMatrix<T>& A) {
    long double d = 0;
    for (int j = 0; j < A.n; ++j) {
        long double s = 0;
        for (int i = 0; i < A.m; ++i) s += std::abs(static_cast<long double>(A(i, j)));
        if (std::isnan(s)) return s;
        d = std::max(d, s);
    }
    return d;
}

/// ||X - Y||_1 over the m x n block.
template <class T>
long double diff_norm1(const HostMatrix<T>& X, const HostMatrix<T>& Y) {
    long double d = 0;
    for (int j = 0; j < X.n; ++j) {
        long double s = 0;
        for (int i = 0; i < X.m; ++i) s += std::abs(static_cast<long double>(X(i, j)) - Y(i, j));
        if (std::isnan(s)) return s;
        d = std::max(d, s);
    }
    return d;
}

template <class T>
HostMatrix<T> identity(int m, int n) {
    HostMatrix<T> I(m, n, m + 1);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) I(i, j) = i == j ? T(1) : T(0);
    return I;
}

/// The upper triangle/trapezoid of F, zeros below (its m x n block).
template <class T>
HostMatrix<T> upper(const HostMatrix<T>& F) {
    HostMatrix<T> R(F.m, F.n, F.m + 1);
    for (int j = 0; j < F.n; ++j)
        for (int i = 0; i < F.m; ++i) R(i, j) = i <= j ? F(i, j) : T(0);
    return R;
}

/// X^T Y or X Y in long double (k x n results, enough for the small tiles here).
template <class T>
HostMatrix<T> product(const HostMatrix<T>& X, bool transX, const HostMatrix<T>& Y) {
    const int m = transX ? X.n : X.m, k = transX ? X.m : X.n;
    HostMatrix<T> P(m, Y.n, m + 1);
    for (int j = 0; j < Y.n; ++j)
        for (int i = 0; i < m; ++i) {
            long double s = 0;
            for (int l = 0; l < k; ++l) s += static_cast<long double>(transX ? X(l, i) : X(i, l)) * Y(l, j);
            P(i, j) = static_cast<T>(s);
        }
    return P;
}

/// ||I - Q^T Q||_1 / (m eps) for an m x m Q.
template <class T>
double orthogonality(const HostMatrix<T>& Q) {
    const HostMatrix<T> QtQ = product(Q, true, Q);
    return static_cast<double>(diff_norm1(QtQ, identity<T>(Q.n, Q.n)) / (Q.m * ScalarTraits<T>::eps));
}

/// ||X - Y||_1 / (m ||A||_1 eps).
template <class T>
double normalized(const HostMatrix<T>& X, const HostMatrix<T>& Y, const HostMatrix<T>& A) {
    return static_cast<double>(diff_norm1(X, Y) / (A.m * std::max(norm1(A), 1.0L) * ScalarTraits<T>::eps));
}

/// A T-factor tile ib x k with NaN padding and NaN content (the kernels write what they use).
template <class T>
HostMatrix<T> t_tile(int ib, int k) {
    return HostMatrix<T>(std::max(ib, 1), std::max(k, 1), std::max(ib, 1) + 1);
}

/// Rows [r0, r0 + rows) of S (the stack), as its own matrix.
template <class T>
HostMatrix<T> rows_of(const HostMatrix<T>& S, int r0, int rows) {
    HostMatrix<T> X(rows, S.n, rows + 1);
    for (int j = 0; j < S.n; ++j)
        for (int i = 0; i < rows; ++i) X(i, j) = S(r0 + i, j);
    return X;
}

/// [X; Y] as one matrix.
template <class T>
HostMatrix<T> stack(const HostMatrix<T>& X, const HostMatrix<T>& Y) {
    HostMatrix<T> S(X.m + Y.m, X.n, X.m + Y.m + 1);
    for (int j = 0; j < X.n; ++j) {
        for (int i = 0; i < X.m; ++i) S(i, j) = X(i, j);
        for (int i = 0; i < Y.m; ++i) S(X.m + i, j) = Y(i, j);
    }
    return S;
}

TYPED_TEST(QrKernels, GeqrtResidualAndOrthogonality) {
    using T = TypeParam;
    std::uint64_t s = this->seed();
    for (int m : {1, 5, 32, 33, 64})
        for (int n : {1, (m + 1) / 2, m}) {
            if (n > m) continue;
            for (int ib : {1, 4, n}) {
                SCOPED_TRACE(::testing::Message() << "m = " << m << ", n = " << n << ", ib = " << ib);
                const HostMatrix<T> A = random_matrix<T>(m, n, m + 3, ++s);
                HostMatrix<T> F = A;
                HostMatrix<T> Tf = t_tile<T>(ib, n);
                cpu::geqrt<T>(ib, F.view(), Tf.view());
                EXPECT_EQ(non_nan_in_padding(F), 0);
                HostMatrix<T> Q = identity<T>(m, m);
                cpu::unmqr<T>('L', 'N', ib, F.cview(), Tf.cview(), Q.view());
                EXPECT_EQ(non_finite(Q), 0);
                EXPECT_EQ(non_nan_in_padding(Q), 0);
                const HostMatrix<T> QR = product(Q, false, upper(F));
                EXPECT_LT(normalized(A, QR, A), kLimit);
                EXPECT_LT(orthogonality(Q), kLimit);
            }
        }
}

TYPED_TEST(QrKernels, UnmqrRoundTrip) {
    using T = TypeParam;
    std::uint64_t s = this->seed();
    for (int m : {1, 5, 33, 64})
        for (int n : {1, (m + 1) / 2, m})
            for (int ib : {1, 4, n}) {
                SCOPED_TRACE(::testing::Message() << "m = " << m << ", n = " << n << ", ib = " << ib);
                HostMatrix<T> F = random_matrix<T>(m, n, m + 1, ++s);
                HostMatrix<T> Tf = t_tile<T>(ib, n);
                cpu::geqrt<T>(ib, F.view(), Tf.view());
                // The upper part of V's tile is R: UNMQR must not read it.
                poison_strict_triangle(F, 'U');
                const HostMatrix<T> C0 = random_matrix<T>(m, 7, m + 2, ++s);
                HostMatrix<T> C = C0;
                cpu::unmqr<T>('L', 'T', ib, F.cview(), Tf.cview(), C.view());
                cpu::unmqr<T>('L', 'N', ib, F.cview(), Tf.cview(), C.view());
                EXPECT_EQ(non_nan_in_padding(C), 0);
                EXPECT_LT(normalized(C, C0, C0), kLimit);
            }
}

/// A random n x n upper triangular tile (ld n + 2), its strict lower part set to `lower`.
template <class T>
HostMatrix<T> upper_tile(int n, std::uint64_t seed, T lower) {
    HostMatrix<T> R = random_matrix<T>(n, n, n + 2, seed);
    for (int j = 0; j < n; ++j)
        for (int i = j + 1; i < n; ++i) R(i, j) = lower;
    return R;
}

TYPED_TEST(QrKernels, TsqrtTsmqrAnnihilateAndOrthogonal) {
    using T = TypeParam;
    std::uint64_t s = this->seed();
    for (int n : {1, 5, 32, 33})
        for (int m : {1, 5, 32, 33})
            for (int ib : {1, 4, n}) {
                SCOPED_TRACE(::testing::Message() << "n = " << n << ", m = " << m << ", ib = " << ib);
                const HostMatrix<T> R0 = upper_tile<T>(n, ++s, T(0));
                const HostMatrix<T> A0 = random_matrix<T>(m, n, m + 1, ++s);
                HostMatrix<T> R = upper_tile<T>(n, 0, nan<T>());
                for (int j = 0; j < n; ++j)
                    for (int i = 0; i <= j; ++i) R(i, j) = R0(i, j);
                HostMatrix<T> V2 = A0;
                HostMatrix<T> Tf = t_tile<T>(ib, n);
                cpu::tsqrt<T>(ib, R.view(), V2.view(), Tf.view());
                // R's strict lower triangle (GEQRT's V) is neither written nor read.
                EXPECT_EQ(non_nan_in_strict_triangle(R, 'L'), 0);
                EXPECT_EQ(non_finite(R, 'U'), 0);
                EXPECT_EQ(non_finite(V2), 0);
                EXPECT_EQ(non_nan_in_padding(R), 0);
                EXPECT_EQ(non_nan_in_padding(V2), 0);

                // Q^T [R0; A0] = [R'; 0].
                HostMatrix<T> A1 = R0, A2 = A0;
                cpu::tsmqr<T>('T', ib, A1.view(), A2.view(), V2.cview(), Tf.cview());
                HostMatrix<T> Z(m, n, m + 1);
                for (int j = 0; j < n; ++j)
                    for (int i = 0; i < m; ++i) Z(i, j) = T(0);
                EXPECT_LT(normalized(stack(A1, A2), stack(upper(R), Z), stack(R0, A0)), kLimit);

                // Q from the identity stack, and Q^T Q = I.
                const HostMatrix<T> I = identity<T>(n + m, n + m);
                HostMatrix<T> Q1 = rows_of(I, 0, n), Q2 = rows_of(I, n, m);
                cpu::tsmqr<T>('N', ib, Q1.view(), Q2.view(), V2.cview(), Tf.cview());
                const HostMatrix<T> Q = stack(Q1, Q2);
                EXPECT_LT(orthogonality(Q), kLimit);
                // Q [R'; 0] = [R0; A0].
                EXPECT_LT(normalized(product(Q, false, stack(upper(R), Z)), stack(R0, A0), stack(R0, A0)), kLimit);
            }
}

int lapack_tpqrt(int m, int n, int l, int nb, double* a, int lda, double* b, int ldb, double* t, int ldt) {
    return LAPACKE_dtpqrt(LAPACK_COL_MAJOR, m, n, l, nb, a, lda, b, ldb, t, ldt);
}
int lapack_tpqrt(int m, int n, int l, int nb, float* a, int lda, float* b, int ldb, float* t, int ldt) {
    return LAPACKE_stpqrt(LAPACK_COL_MAJOR, m, n, l, nb, a, lda, b, ldb, t, ldt);
}
int lapack_tpmqrt(char trans, int m, int n, int k, int l, int nb, const double* v, int ldv, const double* t, int ldt,
                  double* a, int lda, double* b, int ldb) {
    return LAPACKE_dtpmqrt(LAPACK_COL_MAJOR, 'L', trans, m, n, k, l, nb, v, ldv, t, ldt, a, lda, b, ldb);
}
int lapack_tpmqrt(char trans, int m, int n, int k, int l, int nb, const float* v, int ldv, const float* t, int ldt,
                  float* a, int lda, float* b, int ldb) {
    return LAPACKE_stpmqrt(LAPACK_COL_MAJOR, 'L', trans, m, n, k, l, nb, v, ldv, t, ldt, a, lda, b, ldb);
}

/// A tile row head after its GEQRT, for TTQRT: m x n, random upper triangle/trapezoid (its R) and
/// random strict lower part and rows (its V, which TTQRT must keep).
template <class T>
HostMatrix<T> head_tile(int m, int n, std::uint64_t seed) {
    return random_matrix<T>(m, n, m + 1, seed);
}

/// The first mp rows of A's upper part, zeros below the diagonal (what TTQRT eliminates).
template <class T>
HostMatrix<T> upper_rows(const HostMatrix<T>& A, int mp) {
    HostMatrix<T> U(mp, A.n, mp + 1);
    for (int j = 0; j < A.n; ++j)
        for (int i = 0; i < mp; ++i) U(i, j) = i <= j ? A(i, j) : T(0);
    return U;
}

TYPED_TEST(QrKernels, TtqrtTtmqrMatchLapackAndAnnihilate) {
    using T = TypeParam;
    std::uint64_t s = this->seed();
    for (int n : {1, 5, 32, 33})
        for (int m : {n, n + 3, std::max(1, n - 2)})
            for (int ib : {1, 4, n}) {
                SCOPED_TRACE(::testing::Message() << "n = " << n << ", m = " << m << ", ib = " << ib);
                const int mp = std::min(m, n);
                const HostMatrix<T> R0 = upper_tile<T>(n, ++s, T(0));
                const HostMatrix<T> A0 = head_tile<T>(m, n, ++s);
                HostMatrix<T> R = upper_tile<T>(n, 0, nan<T>());
                for (int j = 0; j < n; ++j)
                    for (int i = 0; i <= j; ++i) R(i, j) = R0(i, j);
                HostMatrix<T> V2 = A0, Tf = t_tile<T>(ib, n);
                cpu::ttqrt<T>(ib, R.view(), V2.view(), Tf.view());
                EXPECT_EQ(non_nan_in_strict_triangle(R, 'L'), 0);
                EXPECT_EQ(non_finite(R, 'U'), 0);
                EXPECT_EQ(non_nan_in_padding(V2), 0);
                // GEQRT's V (strict lower part) and the rows below the triangle are kept exactly.
                for (int j = 0; j < n; ++j)
                    for (int i = 0; i < m; ++i) {
                        if (i > j || i >= mp) {
                            ASSERT_EQ(V2(i, j), A0(i, j)) << "i = " << i << ", j = " << j;
                        }
                    }

                // LAPACK's dtpqrt with l = mp on the triangle alone gives the same numbers.
                HostMatrix<T> Rl = R0, Bl = upper_rows(A0, mp), Tl(std::max(ib, 1), n, std::max(ib, 1));
                const int ibl = std::min(ib, n);  // LAPACK wants 1 <= nb <= n; the kernel clamps
                // LAPACKE's dtpmqrt scans T for NaN, entries dtpqrt leaves unset included.
                for (int j = 0; j < n; ++j)
                    for (int i = 0; i < Tl.m; ++i) Tl(i, j) = T(0);
                ASSERT_EQ(lapack_tpqrt(mp, n, mp, ibl, Rl.ptr(), Rl.ld, Bl.ptr(), Bl.ld, Tl.ptr(), Tl.ld), 0);
                for (int j = 0; j < n; ++j) {
                    for (int i = 0; i <= j; ++i) ASSERT_EQ(R(i, j), Rl(i, j)) << "R' " << i << "," << j;
                    for (int i = 0; i < mp && i <= j; ++i) ASSERT_EQ(V2(i, j), Bl(i, j)) << "V2 " << i << "," << j;
                }

                // Q^T [R0; U0] = [R'; 0] and Q [R'; 0] = [R0; U0], Q^T Q = I, through TTMQR with the
                // lower tile's strict lower part left in V2 (TTMQR must not read it) and rows of
                // A2 below mp that must not change.
                const HostMatrix<T> U0 = upper_rows(A0, mp);
                HostMatrix<T> A1 = R0, A2 = random_matrix<T>(m, n, m + 1, ++s);
                const HostMatrix<T> A2keep = A2;
                for (int j = 0; j < n; ++j)
                    for (int i = 0; i < mp; ++i) A2(i, j) = U0(i, j);
                cpu::ttmqr<T>('T', ib, A1.view(), A2.view(), V2.cview(), Tf.cview());
                HostMatrix<T> Z(mp, n, mp + 1);
                for (int j = 0; j < n; ++j)
                    for (int i = 0; i < mp; ++i) Z(i, j) = T(0);
                EXPECT_LT(normalized(stack(A1, rows_of(A2, 0, mp)), stack(upper(R), Z), stack(R0, U0)), kLimit);
                for (int j = 0; j < n; ++j)
                    for (int i = mp; i < m; ++i) ASSERT_EQ(A2(i, j), A2keep(i, j));

                const HostMatrix<T> I = identity<T>(n + mp, n + mp);
                HostMatrix<T> Q1 = rows_of(I, 0, n), Q2 = rows_of(I, n, mp);
                // V2 as m x n with only mp rows in play: give TTMQR an A2 of V2's rows (ld m + 1).
                HostMatrix<T> Q2m(m, n + mp, m + 1);
                for (int j = 0; j < n + mp; ++j)
                    for (int i = 0; i < m; ++i) Q2m(i, j) = i < mp ? Q2(i, j) : T(0);
                cpu::ttmqr<T>('N', ib, Q1.view(), Q2m.view(), V2.cview(), Tf.cview());
                const HostMatrix<T> Q = stack(Q1, rows_of(Q2m, 0, mp));
                EXPECT_LT(orthogonality(Q), kLimit);
                EXPECT_LT(normalized(product(Q, false, stack(upper(R), Z)), stack(R0, U0), stack(R0, U0)), kLimit);

                // TTMQR against LAPACK's dtpmqrt (l = mp) on random pairs, both directions.
                for (char trans : {'T', 'N'}) {
                    HostMatrix<T> B1 = random_matrix<T>(n, 7, n + 1, ++s), B2 = random_matrix<T>(m, 7, m + 1, ++s);
                    HostMatrix<T> L1 = B1, L2 = B2;
                    cpu::ttmqr<T>(trans, ib, B1.view(), B2.view(), V2.cview(), Tf.cview());
                    ASSERT_EQ(lapack_tpmqrt(trans, mp, 7, n, mp, ibl, Bl.ptr(), Bl.ld, Tl.ptr(), Tl.ld, L1.ptr(), L1.ld,
                                            L2.ptr(), L2.ld),
                              0);
                    for (int j = 0; j < 7; ++j) {
                        for (int i = 0; i < n; ++i) ASSERT_EQ(B1(i, j), L1(i, j));
                        for (int i = 0; i < m; ++i) ASSERT_EQ(B2(i, j), L2(i, j));
                    }
                }
            }
}

/// A matrix stored as mt x nt separate tiles (each with NaN padding).
template <class T>
struct Tiles {
    std::vector<int> rows, cols;
    std::vector<HostMatrix<T>> t;
    HostMatrix<T>& operator()(int i, int j) { return t[static_cast<std::size_t>(i) * cols.size() + j]; }
    const HostMatrix<T>& operator()(int i, int j) const { return t[static_cast<std::size_t>(i) * cols.size() + j]; }
    int mt() const { return static_cast<int>(rows.size()); }
    int nt() const { return static_cast<int>(cols.size()); }
    HostMatrix<T> assemble() const {
        int M = 0, N = 0;
        for (int r : rows) M += r;
        for (int c : cols) N += c;
        HostMatrix<T> X(M, N, M + 1);
        for (int I = 0, r0 = 0; I < mt(); r0 += rows[I], ++I)
            for (int J = 0, c0 = 0; J < nt(); c0 += cols[J], ++J)
                for (int j = 0; j < cols[J]; ++j)
                    for (int i = 0; i < rows[I]; ++i) X(r0 + i, c0 + j) = (*this)(I, J)(i, j);
        return X;
    }
};

TYPED_TEST(QrKernels, WholeTileQr) {
    using T = TypeParam;
    std::uint64_t s = this->seed();
    struct Case {
        std::vector<int> rows, cols;
    };
    const std::vector<Case> cases = {{{6, 6, 6}, {6, 6, 6}}, {{8, 8, 5}, {8, 8, 5}}, {{7, 7, 7}, {7, 7, 3}}};
    for (const Case& c : cases)
        for (int ib : {1, 3, 8}) {
            SCOPED_TRACE(::testing::Message()
                         << "nb = " << c.rows[0] << ", last = " << c.rows[2] << "x" << c.cols[2] << ", ib = " << ib);
            Tiles<T> A{c.rows, c.cols, {}};
            for (int i = 0; i < A.mt(); ++i)
                for (int j = 0; j < A.nt(); ++j)
                    A.t.push_back(random_matrix<T>(c.rows[i], c.cols[j], c.rows[i] + 1, ++s));
            const Tiles<T> A0 = A;
            const int mt = A.mt(), nt = A.nt(), kt = std::min(mt, nt);
            std::vector<HostMatrix<T>> Tg, Tt(static_cast<std::size_t>(mt * nt));
            for (int k = 0; k < kt; ++k) Tg.push_back(t_tile<T>(ib, std::min(c.rows[k], c.cols[k])));
            for (int i = 0; i < mt; ++i)
                for (int k = 0; k < nt; ++k) Tt[i * nt + k] = t_tile<T>(ib, c.cols[k]);

            for (int k = 0; k < kt; ++k) {
                cpu::geqrt<T>(ib, A(k, k).view(), Tg[k].view());
                for (int j = k + 1; j < nt; ++j)
                    cpu::unmqr<T>('L', 'T', ib, A(k, k).cview(), Tg[k].cview(), A(k, j).view());
                for (int i = k + 1; i < mt; ++i) {
                    cpu::tsqrt<T>(ib, A(k, k).view(), A(i, k).view(), Tt[i * nt + k].view());
                    for (int j = k + 1; j < nt; ++j)
                        cpu::tsmqr<T>('T', ib, A(k, j).view(), A(i, j).view(), A(i, k).cview(), Tt[i * nt + k].cview());
                }
            }

            // The same Q^T on the original matrix, every tile column.
            Tiles<T> B = A0;
            for (int k = 0; k < kt; ++k) {
                for (int j = 0; j < nt; ++j)
                    cpu::unmqr<T>('L', 'T', ib, A(k, k).cview(), Tg[k].cview(), B(k, j).view());
                for (int i = k + 1; i < mt; ++i)
                    for (int j = 0; j < nt; ++j)
                        cpu::tsmqr<T>('T', ib, B(k, j).view(), B(i, j).view(), A(i, k).cview(), Tt[i * nt + k].cview());
            }

            // [R; 0]: the upper triangle/trapezoid of the factored matrix.
            const HostMatrix<T> R = upper(A.assemble());
            const HostMatrix<T> QtA = B.assemble(), Aorig = A0.assemble();
            EXPECT_EQ(non_finite(R), 0);
            EXPECT_LT(normalized(QtA, R, Aorig), kLimit);
        }
}

}  // namespace
}  // namespace starfact::test
