// Tile QR through StarPU (geqrf, qr_apply, orgqr, geqrs, gels): the QR residual and the
// orthogonality of Q on square, 2:1, 10:1 and m = n + 3 matrices around nb, with the flat chain and
// with reduction trees of several domain sizes (the flat one bitwise the former algorithm's result),
// Q and Q^T round trips,
// least-squares residuals next to LAPACK's gels, exact info for planted zero columns, NaN input,
// argument errors, and the codelets and the algorithm forced to CPU and to CUDA workers.
#include <gtest/gtest.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "codelets/codelets.hpp"
#include "codelets/cpu/qr_kernels.hpp"
#include "common/blas.hpp"
#include "common/error.hpp"
#include "common/kernel_error.hpp"
#include "common/scalar_traits.hpp"
#include "test_support.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

namespace starfact::test {
namespace {

template <class T>
class Qr : public RuntimeTest {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Qr, Precisions);

template <class T>
constexpr double eps() {
    return ScalarTraits<T>::eps;
}

/// ||A - Q(:, 0:n) R||_1 / (m ||A||_1 eps), R the upper triangle of F's top n rows.
template <class T>
double qr_residual(const HostMatrix<T>& A, const HostMatrix<T>& F, const HostMatrix<T>& Q) {
    const int m = A.m, n = A.n;
    if (m == 0 || n == 0) return 0.0;
    HostMatrix<T> W(m, n, m);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) W(i, j) = Q(i, j);
    blas::trmm('R', 'U', 'N', 'N', m, n, T(1), F.ptr(), F.ld, W.ptr(), W.ld);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) W(i, j) -= A(i, j);
    const double anorm = blas::lange('1', m, n, A.ptr(), A.ld);
    return blas::lange('1', m, n, W.ptr(), W.ld) / (m * anorm * eps<T>());
}

/// ||I - Q^T Q||_1 / (m eps) for an m x q Q.
template <class T>
double orthogonality(const HostMatrix<T>& Q) {
    const int m = Q.m, q = Q.n;
    if (m == 0 || q == 0) return 0.0;
    HostMatrix<T> G(q, q, q);
    for (int j = 0; j < q; ++j)
        for (int i = 0; i < q; ++i) G(i, j) = i == j ? T(1) : T(0);
    blas::syrk('U', 'T', q, m, T(-1), Q.ptr(), Q.ld, T(1), G.ptr(), G.ld);
    return blas::lansy('1', 'U', q, G.ptr(), G.ld) / (m * eps<T>());
}

/// ||X - Y||_1 / (m ||A||_1 eps) over the m x n blocks of X and Y (A: the scale, Y by default).
template <class T>
double normalized_difference(const HostMatrix<T>& X, const HostMatrix<T>& Y, const HostMatrix<T>* A = nullptr) {
    if (X.m == 0 || X.n == 0) return 0.0;
    if (A == nullptr) A = &Y;
    HostMatrix<T> D(X.m, X.n, X.m);
    for (int j = 0; j < X.n; ++j)
        for (int i = 0; i < X.m; ++i) D(i, j) = X(i, j) - Y(i, j);
    return blas::lange('1', X.m, X.n, D.ptr(), D.ld) / (X.m * blas::lange('1', A->m, A->n, A->ptr(), A->ld) * eps<T>());
}

/// The factor of geqrf and the first q columns of Q (orgqr), copied out with A's leading dimension.
template <class T>
struct Factored {
    HostMatrix<T> F, Q;
};

template <class T>
Factored<T> factor(const HostMatrix<T>& A, int nb, int ib, int q, QrOptions options = {}) {
    TileMatrix<T> tA(A.m, A.n, nb), tQ(A.m, q, nb);
    tA.from_lapack(A.ptr(), A.ld);
    QrFactors<T> F(tA, ib, options);
    geqrf(tA, F);
    orgqr(tA, F, tQ);
    Factored<T> out{HostMatrix<T>(A.m, A.n, A.ld), HostMatrix<T>(A.m, q, A.ld)};
    tA.to_lapack(out.F.ptr(), out.F.ld);
    tQ.to_lapack(out.Q.ptr(), out.Q.ld);
    return out;
}

/// Least-squares ratios of X (x in its first n rows) for A X ~ B, the largest over the columns:
/// robust = ||A^T r||_2 / (||A||_F (||A||_F ||x||_2 + ||b||_2) max(m, n) eps) (what the CLI checks),
/// testing = ||A^T r||_1 / (||A||_inf ||r||_1 n eps) (the normalized least-squares check of
/// docs/testing.md; meaningful when r is not small), residual = ||r||_2.
struct LsRatios {
    double robust = 0, testing = 0;
    std::vector<double> residual;
};

template <class T>
LsRatios ls_ratios(const HostMatrix<T>& A, const HostMatrix<T>& X, const HostMatrix<T>& B) {
    const int m = A.m, n = A.n;
    LsRatios out;
    const double afro = blas::lange('F', m, n, A.ptr(), A.ld), ainf = blas::lange('I', m, n, A.ptr(), A.ld);
    std::vector<T> r(static_cast<std::size_t>(m)), w(static_cast<std::size_t>(std::max(n, 1)));
    for (int c = 0; c < B.n; ++c) {
        const T* x = &X.data[static_cast<std::size_t>(c) * X.ld];
        const T* b = &B.data[static_cast<std::size_t>(c) * B.ld];
        std::copy(b, b + m, r.begin());
        if (n > 0) {
            blas::gemm('N', 'N', m, 1, n, T(-1), A.ptr(), A.ld, x, n, T(1), r.data(), m);
            blas::gemm('T', 'N', n, 1, m, T(1), A.ptr(), A.ld, r.data(), m, T(0), w.data(), n);
        }
        const double w2 = n > 0 ? blas::lange('F', n, 1, w.data(), n) : 0.0;
        const double w1 = n > 0 ? blas::lange('1', n, 1, w.data(), n) : 0.0;
        const double x2 = n > 0 ? blas::lange('F', n, 1, x, n) : 0.0;
        const double r1 = blas::lange('1', m, 1, r.data(), m), r2 = blas::lange('F', m, 1, r.data(), m);
        const double b2 = blas::lange('F', m, 1, b, m);
        out.robust = std::max(out.robust, w2 / (afro * (afro * x2 + b2) * std::max(m, n) * eps<T>()));
        out.testing = std::max(out.testing, w1 / (ainf * r1 * std::max(n, 1) * eps<T>()));
        out.residual.push_back(r2);
        if (std::isnan(w2) || std::isnan(r2)) out.robust = out.testing = w2 + r2;
    }
    return out;
}

int lapack_gels(int m, int n, int nrhs, double* A, int lda, double* B, int ldb) {
    return LAPACKE_dgels(LAPACK_COL_MAJOR, 'N', m, n, nrhs, A, lda, B, ldb);
}
int lapack_gels(int m, int n, int nrhs, float* A, int lda, float* B, int ldb) {
    return LAPACKE_sgels(LAPACK_COL_MAJOR, 'N', m, n, nrhs, A, lda, B, ldb);
}

/// gels through StarPU on copies of A and B; returns info and the solution (B's shape).
template <class T>
std::pair<int, HostMatrix<T>> tile_gels(const HostMatrix<T>& A, const HostMatrix<T>& B, int nb, int ib,
                                        QrOptions options = {}) {
    TileMatrix<T> tA(A.m, A.n, nb), tB(B.m, B.n, nb);
    tA.from_lapack(A.ptr(), A.ld);
    tB.from_lapack(B.ptr(), B.ld);
    const int info = gels(tA, tB, ib, options);
    HostMatrix<T> X(B.m, B.n, B.ld);
    tB.to_lapack(X.ptr(), X.ld);
    return {info, std::move(X)};
}

/// The shapes every size is tried in: square, 2:1, 10:1, and m = n + 3 (for small n a single tall
/// tile row, where the last diagonal tile is taller than wide).
std::vector<std::pair<int, int>> shapes(int n) { return {{n, n}, {2 * n, n}, {10 * n, n}, {n + 3, n}}; }

TYPED_TEST(Qr, GeqrfResidualAndOrthogonalityAroundNb) {
    using T = TypeParam;
    std::uint64_t s = this->seed();
    for (int nb : {7, 8})
        for (int ib : {1, 3, nb})
            for (int n : {0, 1, 2, 3, nb - 1, nb, nb + 1, 2 * nb + 1, 3 * nb + 7})
                for (auto [m, nn] : shapes(n)) {
                    SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << nn << " nb=" << nb << " ib=" << ib);
                    const auto A = random_matrix<T>(m, nn, m + 2, ++s);
                    const Factored<T> f = factor(A, nb, ib, nn);
                    EXPECT_PRED_FORMAT1(ResidualPasses, qr_residual(A, f.F, f.Q));
                    EXPECT_PRED_FORMAT1(ResidualPasses, orthogonality(f.Q));
                    EXPECT_EQ(non_finite(f.F), 0);
                    EXPECT_EQ(non_nan_in_padding(f.F), 0);
                    EXPECT_EQ(non_nan_in_padding(f.Q), 0);
                }
}

// The full m x m Q and a Q with q columns, n < q < m; Q^T A = [R; 0]; B = Q (Q^T B).
TYPED_TEST(Qr, FullQAndApplicationsOfQAndQt) {
    using T = TypeParam;
    const int nb = 8, ib = 3;
    for (auto [m, n] : {std::pair{45, 20}, {31, 31}, {20, 17}, {70, 9}}) {
        SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n);
        const auto A = random_matrix<T>(m, n, m + 1, this->seed() + m * 100 + n);
        for (int q : {m, std::min(m, n + 5)}) {
            SCOPED_TRACE(::testing::Message() << "q=" << q);
            const Factored<T> f = factor(A, nb, ib, q);
            EXPECT_PRED_FORMAT1(ResidualPasses, qr_residual(A, f.F, f.Q));
            EXPECT_PRED_FORMAT1(ResidualPasses, orthogonality(f.Q));
        }
        TileMatrix<T> tA(m, n, nb), tG(m, n, nb);
        tA.from_lapack(A.ptr(), A.ld);
        tG.from_lapack(A.ptr(), A.ld);
        QrFactors<T> F(tA, ib);
        geqrf(tA, F);
        qr_apply('T', tA, F, tG);
        HostMatrix<T> Fa(m, n, m), G(m, n, m), R(m, n, m);
        tA.to_lapack(Fa.ptr(), Fa.ld);
        tG.to_lapack(G.ptr(), G.ld);
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) R(i, j) = i <= j ? Fa(i, j) : T(0);
        EXPECT_PRED_FORMAT1(ResidualPasses, normalized_difference(G, R, &A)) << "Q^T A is not [R; 0]";

        const auto B = random_matrix<T>(m, 2 * nb + 3, m + 2, this->seed() + 7);
        TileMatrix<T> tB(m, B.n, nb);
        tB.from_lapack(B.ptr(), B.ld);
        qr_apply('T', tA, F, tB);
        HostMatrix<T> QtB(m, B.n, m);
        tB.to_lapack(QtB.ptr(), QtB.ld);
        EXPECT_GT(normalized_difference(QtB, B), checks::kThreshold) << "Q^T B left B unchanged";
        qr_apply('N', tA, F, tB);
        HostMatrix<T> back(m, B.n, m + 2);
        tB.to_lapack(back.ptr(), back.ld);
        EXPECT_PRED_FORMAT1(ResidualPasses, normalized_difference(back, B)) << "Q (Q^T B) != B";
        EXPECT_EQ(non_nan_in_padding(back), 0);
    }
}

TYPED_TEST(Qr, GelsAroundNbNextToLapack) {
    using T = TypeParam;
    std::uint64_t s = this->seed();
    for (int nb : {7, 8})
        for (int n : {1, 2, 3, nb - 1, nb, nb + 1, 2 * nb + 1, 3 * nb + 7})
            for (auto [m, nn] : shapes(n))
                for (int nrhs : {1, 2 * nb + 1}) {
                    SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << nn << " nb=" << nb << " nrhs=" << nrhs);
                    const auto A = random_matrix<T>(m, nn, m + 1, ++s);
                    const auto B = random_matrix<T>(m, nrhs, m + 2, ++s);
                    auto [info, X] = tile_gels(A, B, nb, 3);
                    EXPECT_EQ(info, 0);
                    EXPECT_EQ(non_nan_in_padding(X), 0);
                    const LsRatios mine = ls_ratios(A, X, B);
                    EXPECT_PRED_FORMAT1(ResidualPasses, mine.robust);
                    if (m >= 2 * nn && m >= 8) {
                        EXPECT_PRED_FORMAT1(ResidualPasses, mine.testing);
                    }
                    // LAPACK on the same problem: its residual norm is the minimum, which the tile
                    // solution must reach up to rounding (independent of the conditioning).
                    HostMatrix<T> Fl = A, Xl = B;
                    ASSERT_EQ(lapack_gels(m, nn, nrhs, Fl.ptr(), Fl.ld, Xl.ptr(), Xl.ld), 0);
                    const LsRatios ref = ls_ratios(A, Xl, B);
                    const double scale =
                        blas::lange('F', m, nn, A.ptr(), A.ld) * blas::lange('F', nn, nrhs, Xl.ptr(), Xl.ld) +
                        blas::lange('F', m, nrhs, B.ptr(), B.ld);
                    for (int c = 0; c < nrhs; ++c)
                        EXPECT_LE(mine.residual[c], ref.residual[c] + 30.0 * std::max(m, nn) * eps<T>() * scale)
                            << "column " << c << ": not the least-squares residual";
                }
}

TYPED_TEST(Qr, GelsPlantedZeroColumnGivesExactInfoLikeLapack) {
    using T = TypeParam;
    const int nb = 8;
    for (int n : {8, 21, 33}) {
        for (int k : {1, n / 2 + 1, n}) {
            SCOPED_TRACE(::testing::Message() << "n=" << n << " zero column k=" << k);
            const int m = n + 5;
            auto A = random_matrix<T>(m, n, m, this->seed() + 31 * n + k);
            for (int i = 0; i < m; ++i) A(i, k - 1) = T(0);
            const auto B = random_matrix<T>(m, 2, m, this->seed() + 5);
            auto [info, X] = tile_gels(A, B, nb, 3);
            EXPECT_EQ(info, k);
            EXPECT_EQ(std::memcmp(X.ptr(), B.ptr(), sizeof(T) * B.data.size()), 0) << "B was modified";
            HostMatrix<T> Fl = A, Xl = B;
            EXPECT_EQ(lapack_gels(m, n, 2, Fl.ptr(), Fl.ld, Xl.ptr(), Xl.ld), k) << "LAPACK's gels disagrees";
        }
    }
}

// NaN in tile (2, 2): no crash, no hang; it spreads to the R columns from its tile column on and
// leaves the columns left of it finite (their panels never read it).
TYPED_TEST(Qr, NaNInOneTileSpreadsRightOnly) {
    using T = TypeParam;
    const int m = 40, n = 30, nb = 8;
    auto A = random_matrix<T>(m, n, m, this->seed());
    A(17, 20) = nan<T>();
    TileMatrix<T> tA(m, n, nb);
    tA.from_lapack(A.ptr(), A.ld);
    QrFactors<T> F(tA, 4);
    geqrf(tA, F);
    HostMatrix<T> Fa(m, n, m);
    tA.to_lapack(Fa.ptr(), Fa.ld);
    int left = 0, right = 0;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i <= j; ++i) (j < 2 * nb ? left : right) += std::isfinite(Fa(i, j)) ? 0 : 1;
    EXPECT_EQ(left, 0) << "NaN reached R left of its tile column";
    EXPECT_GT(right, 0) << "NaN vanished";
}

TYPED_TEST(Qr, ZeroSizesAreNoOps) {
    using T = TypeParam;
    TileMatrix<T> A(0, 0, 4), B(0, 2, 4);
    EXPECT_EQ(gels(A, B, 2), 0);
    const auto b = random_matrix<T>(5, 2, 5, this->seed());
    TileMatrix<T> tall(5, 0, 4), tb(5, 2, 4);
    tb.from_lapack(b.ptr(), b.ld);
    EXPECT_EQ(gels(tall, tb, 2), 0);
    HostMatrix<T> x(5, 2, 5);
    tb.to_lapack(x.ptr(), x.ld);
    EXPECT_EQ(std::memcmp(x.ptr(), b.ptr(), sizeof(T) * b.data.size()), 0) << "no column: Q = I, r = b";
}

TYPED_TEST(Qr, ArgumentErrorsComeBeforeAnyTask) {
    using T = TypeParam;
    TileMatrix<T> wide(8, 12, 4), sq(12, 12, 4), other_nb(12, 1, 6), short_b(8, 1, 4), big(16, 16, 4);
    auto expect_arg = [](const char* name, auto call) {
        try {
            call();
            ADD_FAILURE() << "no ArgumentError for " << name;
        } catch (const ArgumentError& e) {
            EXPECT_EQ(e.argument(), name) << e.what();
        }
        EXPECT_EQ(starpu_task_nsubmitted(), 0);
    };
    expect_arg("ib", [&] { QrFactors<T> F(sq, 0); });
    expect_arg("A", [&] { QrFactors<T> F(wide, 2); });
    expect_arg("A", [&] { gels(wide, short_b, 2); });
    expect_arg("B", [&] { gels(sq, other_nb, 2); });
    expect_arg("B", [&] { gels(sq, short_b, 2); });
    QrFactors<T> F(sq, 2);
    expect_arg("F", [&] { geqrf(big, F); });
    TileMatrix<T> wide_q(12, 13, 4), q_other_rows(16, 4, 4), b(12, 3, 4);
    expect_arg("Q", [&] { orgqr(sq, F, wide_q); });
    expect_arg("Q", [&] { orgqr(sq, F, q_other_rows); });
    expect_arg("trans", [&] { qr_apply('X', sq, F, b); });
    expect_arg("B", [&] { qr_apply('T', sq, F, short_b); });
    expect_arg("B", [&] { geqrs(sq, F, other_nb); });
}

// ---- reduction trees ----------------------------------------------------------------------------

/// The shapes the trees are tried on: 10:1, 2:1, square, a tall one with a short last tile row
/// and a narrow last tile column, and one column of tall tiles (nb x (nb - 3), n < nb: the
/// tall-skinny layout the GPU driver picks), its last tile row short.
std::vector<std::pair<int, int>> tree_shapes(int nb) {
    return {{10 * (2 * nb), 2 * nb},
            {2 * (2 * nb + 1), 2 * nb + 1},
            {3 * nb, 3 * nb},
            {13 * nb + 5, nb + 3},
            {12 * nb + 3, nb - 3}};
}

TYPED_TEST(Qr, TreeResidualsOrthogonalityAndGelsOverDomains) {
    using T = TypeParam;
    std::uint64_t s = this->seed();
    for (int nb : {7, 8})
        for (auto [m, n] : tree_shapes(nb))
            for (int domain : {1, 2, 3, 1000}) {
                const QrOptions o{QrTree::Binary, domain};
                SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " nb=" << nb << " domain=" << domain);
                const auto A = random_matrix<T>(m, n, m + 2, ++s);
                const Factored<T> f = factor(A, nb, 3, n, o);
                EXPECT_PRED_FORMAT1(ResidualPasses, qr_residual(A, f.F, f.Q));
                EXPECT_PRED_FORMAT1(ResidualPasses, orthogonality(f.Q));
                EXPECT_EQ(non_finite(f.F), 0);
                EXPECT_EQ(non_nan_in_padding(f.F), 0);
                const auto B = random_matrix<T>(m, 3, m + 1, ++s);
                auto [info, X] = tile_gels(A, B, nb, 3, o);
                EXPECT_EQ(info, 0);
                const LsRatios r = ls_ratios(A, X, B);
                EXPECT_PRED_FORMAT1(ResidualPasses, r.robust);
                if (m >= 2 * n) {  // the TESTING.md ratio needs a residual that is not small
                    EXPECT_PRED_FORMAT1(ResidualPasses, r.testing);
                }
            }
}

TYPED_TEST(Qr, TreeFullQAndApplications) {
    // The full m x m Q of a tree (orgqr), and Q^T then Q on a block of right-hand sides.
    using T = TypeParam;
    const int nb = 8, ib = 3, m = 75, n = 17;
    const auto A = random_matrix<T>(m, n, m, this->seed());
    for (int domain : {1, 2}) {
        const QrOptions o{QrTree::Binary, domain};
        SCOPED_TRACE(::testing::Message() << "domain=" << domain);
        const Factored<T> f = factor(A, nb, ib, m, o);
        EXPECT_PRED_FORMAT1(ResidualPasses, qr_residual(A, f.F, f.Q));
        EXPECT_PRED_FORMAT1(ResidualPasses, orthogonality(f.Q));
        TileMatrix<T> tA(m, n, nb), tB(m, 11, nb);
        tA.from_lapack(A.ptr(), A.ld);
        const auto B = random_matrix<T>(m, 11, m, this->seed() + 1);
        tB.from_lapack(B.ptr(), B.ld);
        QrFactors<T> F(tA, ib, o);
        geqrf(tA, F);
        qr_apply('T', tA, F, tB);
        qr_apply('N', tA, F, tB);
        HostMatrix<T> B2(m, 11, m);
        tB.to_lapack(B2.ptr(), B2.ld);
        EXPECT_PRED_FORMAT1(ResidualPasses, normalized_difference(B2, B));
    }
}

TYPED_TEST(Qr, TreePlansAndAutoRule) {
    using T = TypeParam;
    TileMatrix<T> tall(100, 16, 8), square(40, 40, 8);  // 13 x 2 and 5 x 5 tiles
    QrFactors<T> flat(tall, 3, {QrTree::Flat, 0}), wide_domain(tall, 3, {QrTree::Binary, 1000});
    QrFactors<T> binary(tall, 3, {QrTree::Binary, 1}), auto_tall(tall, 3), auto_square(square, 3);
    using K = QrStep::Kind;
    for (int k = 0; k < tall.nt(); ++k) {
        // A domain covering all rows is the flat chain: GEQRT of row k, then TS of each row into k.
        ASSERT_EQ(flat.steps(k).size(), static_cast<std::size_t>(tall.mt() - k));
        ASSERT_EQ(wide_domain.steps(k).size(), flat.steps(k).size());
        for (std::size_t s = 0; s < flat.steps(k).size(); ++s) {
            const QrStep& a = flat.steps(k)[s];
            const QrStep& b = wide_domain.steps(k)[s];
            EXPECT_EQ(a.kind, s == 0 ? K::Geqrt : K::Ts);
            EXPECT_EQ(a.row, k + static_cast<int>(s));
            EXPECT_EQ(a.kind == b.kind && a.pivot == b.pivot && a.row == b.row, true);
        }
        // Domain 1: a GEQRT per row and mt - k - 1 TTs, each row eliminated once, the root row k.
        int geqrt = 0, tt = 0;
        std::vector<int> eliminated(static_cast<std::size_t>(tall.mt()), 0);
        for (const QrStep& st : binary.steps(k)) {
            geqrt += st.kind == K::Geqrt;
            tt += st.kind == K::Tt;
            if (st.kind == K::Tt) {
                EXPECT_LT(st.pivot, st.row);
                EXPECT_EQ(eliminated[st.pivot], 0) << "a pivot already eliminated";
                ++eliminated[st.row];
                EXPECT_NE(binary.Tt(st.row, k), nullptr);
            }
        }
        EXPECT_EQ(geqrt, tall.mt() - k);
        EXPECT_EQ(tt, tall.mt() - k - 1);
        EXPECT_EQ(eliminated[k], 0);
        EXPECT_EQ(flat.Tt(tall.mt() - 1, k), nullptr) << "no second T factors without TT steps";
    }
    EXPECT_EQ(auto_tall.options().tree, QrTree::Binary);
    EXPECT_EQ(auto_square.options().tree, QrTree::Flat);
    try {
        QrFactors<T> F(tall, 3, {QrTree::Binary, -1});
        ADD_FAILURE() << "no ArgumentError for domain -1";
    } catch (const ArgumentError& e) {
        EXPECT_EQ(e.argument(), "domain");
    }
}

/// The flat tile QR as it was before the trees, in one thread on the CPU kernels: tile column k's
/// GEQRT and UNMQRs, then a TSQRT and its TSMQRs per tile row below, in order.
template <class T>
HostMatrix<T> former_flat_qr(const HostMatrix<T>& A, int nb, int ib) {
    HostMatrix<T> F = A;
    const int mt = (A.m + nb - 1) / nb, nt = (A.n + nb - 1) / nb;
    auto tile = [&](int i, int j) {
        return F.view().sub(i * nb, j * nb, std::min(nb, A.m - i * nb), std::min(nb, A.n - j * nb));
    };
    const int rows = std::min(ib, nb);
    for (int k = 0; k < nt; ++k) {
        HostMatrix<T> Tk(rows, nb, rows);
        cpu::geqrt<T>(ib, tile(k, k), Tk.view());
        for (int j = k + 1; j < nt; ++j) {
            const TileView<T> V = tile(k, k);
            cpu::unmqr<T>('L', 'T', ib, TileView<const T>{V.data, V.m, V.n, V.ld}, Tk.cview(), tile(k, j));
        }
        for (int i = k + 1; i < mt; ++i) {
            HostMatrix<T> Ti(rows, nb, rows);
            cpu::tsqrt<T>(ib, tile(k, k), tile(i, k), Ti.view());
            const TileView<T> V2 = tile(i, k);
            for (int j = k + 1; j < nt; ++j)
                cpu::tsmqr<T>('T', ib, tile(k, j), tile(i, j), TileView<const T>{V2.data, V2.m, V2.n, V2.ld},
                              Ti.cview());
        }
    }
    return F;
}

// The flat plan runs the kernels of the former algorithm in its order. Bitwise equality held on
// the development machine but not in float on the H100 host (OpenBLAS's level-2 kernels can
// round differently with another data alignment or CPU), so the check is entrywise within a few
// rounding errors: a changed plan or kernel order gives differences of the size of the data.
TYPED_TEST(Qr, FlatTreeIsTheFormerAlgorithm) {
    using T = TypeParam;
    codelets::ScopedImpl cpu_only(codelets::Impl::Cpu);
    for (auto [m, n, nb, ib] : {std::tuple{61, 23, 8, 3}, {40, 40, 8, 8}, {90, 9, 7, 2}}) {
        SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " nb=" << nb << " ib=" << ib);
        const auto A = random_matrix<T>(m, n, m, this->seed() + m + n);
        // One BLAS thread, as on the CPU workers: threaded level-2 kernels may round differently.
        const int threads = openblas_get_num_threads();
        openblas_set_num_threads(1);
        const HostMatrix<T> want = former_flat_qr(A, nb, ib);
        openblas_set_num_threads(threads);
        TileMatrix<T> tA(m, n, nb);
        tA.from_lapack(A.ptr(), A.ld);
        QrFactors<T> F(tA, ib, {QrTree::Flat, 0});
        geqrf(tA, F);
        HostMatrix<T> got(m, n, m);
        tA.to_lapack(got.ptr(), got.ld);
        double scale = 0;
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) scale = std::max(scale, std::abs(static_cast<double>(want(i, j))));
        const double tol = 16.0 * m * std::numeric_limits<T>::epsilon() * scale;
        int differ = 0;
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i)
                differ += !(std::abs(static_cast<double>(got(i, j)) - static_cast<double>(want(i, j))) <= tol);
        EXPECT_EQ(differ, 0) << "entries further than " << tol << " from the former flat algorithm's";
    }
}

TYPED_TEST(Qr, TreeOnCudaWorkersMatchesChecks) {
    using T = TypeParam;
    STARFACT_REQUIRE_CUDA_WORKER(this->ncuda());
    codelets::ScopedImpl forced(codelets::Impl::Cuda);
    // The last two: one column of tall tiles (256 x 40 and 512 x 100, the last tile row short).
    for (auto [m, n, nb, ib, domain] : {std::tuple{640, 64, 32, 8, 1},
                                        {1000, 130, 64, 32, 2},
                                        {300, 300, 64, 16, 1},
                                        {2000, 40, 256, 16, 1},
                                        {1500, 100, 512, 32, 2}}) {
        SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " nb=" << nb << " domain=" << domain);
        const QrOptions o{QrTree::Binary, domain};
        const auto A = random_matrix<T>(m, n, m, this->seed() + n);
        const Factored<T> f = factor(A, nb, ib, n, o);
        EXPECT_PRED_FORMAT1(ResidualPasses, qr_residual(A, f.F, f.Q));
        EXPECT_PRED_FORMAT1(ResidualPasses, orthogonality(f.Q));
        const auto B = random_matrix<T>(m, 2, m, this->seed() + 2 * n);
        auto [info, X] = tile_gels(A, B, nb, ib, o);
        EXPECT_EQ(info, 0);
        EXPECT_PRED_FORMAT1(ResidualPasses, ls_ratios(A, X, B).robust);
    }
}

// ---- the codelets forced to one kind of worker, against the pure CPU kernels --------------------

/// A host matrix registered as a StarPU tile for the lifetime of the object.
template <class T>
class Registered {
public:
    explicit Registered(HostMatrix<T>& M) {
        starpu_matrix_data_register(&h_, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(M.ptr()), M.ld, M.m, M.n,
                                    sizeof(T));
    }
    ~Registered() { starpu_data_unregister(h_); }
    Registered(const Registered&) = delete;
    Registered& operator=(const Registered&) = delete;
    operator starpu_data_handle_t() const { return h_; }

private:
    starpu_data_handle_t h_ = nullptr;
};

/// max |X - Y| / max |Y| over the m x n blocks.
template <class T>
double max_relative(const HostMatrix<T>& X, const HostMatrix<T>& Y) {
    return max_abs_diff(X, Y) / std::max(max_abs(Y), 1e-30);
}

// GEQRT, UNMQR (Q^T), TSQRT, TSMQR (Q^T), then TSMQR and UNMQR (Q) on a second pair, as codelets on
// `impl` workers and as pure CPU kernels on the same data. The diagonal tile is taller than wide
// and ib does not divide the width, as on an edge of the tile matrix.
template <class T>
void codelets_match_cpu_kernels(codelets::Impl impl, std::uint64_t seed) {
    const int nb = 37, k = 29, m2 = 20, nc = 13, ib = 8;
    const auto A1 = random_matrix<T>(nb, k, nb, seed), A2 = random_matrix<T>(m2, k, m2, seed + 1);
    const auto C1 = random_matrix<T>(nb, nc, nb, seed + 2), C2 = random_matrix<T>(m2, nc, m2, seed + 3);
    // Reference: the kernels called directly.
    HostMatrix<T> rA1 = A1, rA2 = A2, rC1 = C1, rC2 = C2, rD1 = C1, rD2 = C2;
    HostMatrix<T> rT1(ib, k, ib), rT2(ib, k, ib);
    cpu::geqrt<T>(ib, rA1.view(), rT1.view());
    cpu::unmqr<T>('L', 'T', ib, rA1.cview(), rT1.cview(), rC1.view());
    cpu::tsqrt<T>(ib, rA1.view(), rA2.view(), rT2.view());
    cpu::tsmqr<T>('T', ib, rC1.view(), rC2.view(), rA2.cview(), rT2.cview());
    cpu::tsmqr<T>('N', ib, rD1.view(), rD2.view(), rA2.cview(), rT2.cview());
    cpu::unmqr<T>('L', 'N', ib, rA1.cview(), rT1.cview(), rD1.view());
    // The codelets.
    HostMatrix<T> a1 = A1, a2 = A2, c1 = C1, c2 = C2, d1 = C1, d2 = C2;
    HostMatrix<T> t1(ib, k, ib), t2(ib, k, ib);
    {
        codelets::ScopedImpl forced(impl);
        Registered<T> hA1(a1), hA2(a2), hC1(c1), hC2(c2), hD1(d1), hD2(d2), hT1(t1), hT2(t2);
        codelets::submit_geqrt<T>(ib, hA1, hT1, 0);
        codelets::submit_unmqr<T>('T', ib, hA1, hT1, hC1, 0);
        codelets::submit_tsqrt<T>(ib, hA1, hA2, hT2, 0);
        codelets::submit_tsmqr<T>('T', ib, hC1, hC2, hA2, hT2, 0);
        codelets::submit_tsmqr<T>('N', ib, hD1, hD2, hA2, hT2, 0);
        codelets::submit_unmqr<T>('N', ib, hA1, hT1, hD1, 0);
        starpu_task_wait_for_all();
    }
    EXPECT_EQ(take_kernel_error(), "") << "a kernel recorded an error";
    const double tol = (impl == codelets::Impl::Cpu ? 4.0 : 30.0 * nb) * eps<T>();
    for (auto [name, got, want] : {std::tuple{"A1", &a1, &rA1},
                                   {"A2", &a2, &rA2},
                                   {"C1", &c1, &rC1},
                                   {"C2", &c2, &rC2},
                                   {"D1", &d1, &rD1},
                                   {"D2", &d2, &rD2}}) {
        EXPECT_EQ(non_finite(*got), 0) << name;
        EXPECT_LE(max_relative(*got, *want), tol) << name;
    }
}

TYPED_TEST(Qr, CodeletsForcedToCpuMatchCpuKernels) {
    codelets_match_cpu_kernels<TypeParam>(codelets::Impl::Cpu, this->seed());
}

TYPED_TEST(Qr, CodeletsForcedToCudaMatchCpuKernels) {
    STARFACT_REQUIRE_CUDA_WORKER(this->ncuda());
    codelets_match_cpu_kernels<TypeParam>(codelets::Impl::Cuda, this->seed());
}

// The whole algorithm on CPU workers only, CUDA workers only, and both: every run passes the
// checks, and on 3:1 matrices (condition ~4) the CUDA R and least-squares solution agree with
// the CPU ones (|R|: a reflector may flip the sign of a row of R).
TYPED_TEST(Qr, CudaForcedMatchesCpu) {
    using T = TypeParam;
    STARFACT_REQUIRE_CUDA_WORKER(this->ncuda());
    for (auto [n, nb, ib] : {std::tuple{64, 16, 4}, {100, 32, 8}, {257, 64, 32}, {300, 128, 128}}) {
        const int m = 3 * n;
        SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " nb=" << nb << " ib=" << ib);
        const auto A = random_matrix<T>(m, n, m, this->seed() + n);
        const auto B = random_matrix<T>(m, 4, m, this->seed() + 2 * n);
        std::vector<Factored<T>> f;
        std::vector<HostMatrix<T>> x;
        for (codelets::Impl impl : {codelets::Impl::Cpu, codelets::Impl::Cuda, codelets::Impl::Any}) {
            codelets::ScopedImpl forced(impl);
            f.push_back(factor(A, nb, ib, n));
            EXPECT_PRED_FORMAT1(ResidualPasses, qr_residual(A, f.back().F, f.back().Q));
            EXPECT_PRED_FORMAT1(ResidualPasses, orthogonality(f.back().Q));
            auto [info, X] = tile_gels(A, B, nb, ib);
            EXPECT_EQ(info, 0);
            EXPECT_PRED_FORMAT1(ResidualPasses, ls_ratios(A, X, B).robust);
            x.push_back(std::move(X));
        }
        HostMatrix<T> Rc(n, n, n), Rg(n, n, n), xc(n, 4, n), xg(n, 4, n);
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i) {
                Rc(i, j) = i <= j ? std::abs(f[0].F(i, j)) : T(0);
                Rg(i, j) = i <= j ? std::abs(f[1].F(i, j)) : T(0);
            }
        for (int j = 0; j < 4; ++j)
            for (int i = 0; i < n; ++i) xc(i, j) = x[0](i, j), xg(i, j) = x[1](i, j);
        EXPECT_LE(max_relative(Rg, Rc), 30.0 * m * eps<T>());
        EXPECT_LE(max_relative(xg, xc), 300.0 * m * eps<T>());
    }
}

}  // namespace
}  // namespace starfact::test
