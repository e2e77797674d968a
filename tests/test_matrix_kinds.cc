// The matrix kinds of docs/testing.md ("Matrix kinds and sizes, per factorization") that the
// per-algorithm suites do not cover, for tile Cholesky, tile LU (both variants) and tile QR:
// condition 1e6 and near 1/eps, scaling near
// underflow and overflow, planted failures in the shapes and variants left out elsewhere, NaN and
// Inf in one tile (what LU and QR report), and the sizes around nb for LU's trtri variant and tall
// LU. Each kind runs with the codelets forced to CPU workers, and again forced to CUDA workers
// (skipped, visibly, where there is none).
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
#include "common/blas.hpp"
#include "common/checks.hpp"
#include "common/scalar_traits.hpp"
#include "matrix_kinds.hpp"
#include "test_support.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

namespace starfact::test {
namespace {
using codelets::Impl;
using codelets::ScopedImpl;
using namespace kinds;

// ---- the fixture -----------------------------------------------------------------------------

template <class T>
class MatrixKinds : public RuntimeTest {
public:
    /// Runs `body` with the codelets forced to `impl`; Cuda skips without a CUDA worker.
    template <class F>
    void on(Impl impl, F body) {
        if (impl == Impl::Cuda) {
            STARFACT_REQUIRE_CUDA_WORKER(this->ncuda());
        }
        ScopedImpl forced(impl);
        body();
    }

    /// potrf of A (its uplo triangle; the other is poisoned with NaN) with tile size nb.
    static HostMatrix<T> potrf_of(char uplo, const HostMatrix<T>& A, int nb, int* info) {
        HostMatrix<T> P = A;
        poison_strict_triangle(P, uplo == 'L' ? 'U' : 'L');
        TileMatrix<T> tA(A.n, A.n, nb);
        tA.from_lapack(P.ptr(), P.ld);
        *info = potrf(uplo, tA);
        HostMatrix<T> F(A.n, A.n, A.ld);
        tA.to_lapack(F.ptr(), F.ld);
        return F;
    }

    /// posv: returns info and X (B's shape).
    static HostMatrix<T> posv_of(char uplo, const HostMatrix<T>& A, const HostMatrix<T>& B, int nb, int* info) {
        TileMatrix<T> tA(A.n, A.n, nb), tB(B.m, B.n, nb);
        tA.from_lapack(A.ptr(), A.ld);
        tB.from_lapack(B.ptr(), B.ld);
        *info = posv(uplo, tA, tB);
        HostMatrix<T> X(B.m, B.n, B.ld);
        tB.to_lapack(X.ptr(), X.ld);
        return X;
    }

    static HostMatrix<T> gesv_of(const HostMatrix<T>& A, const HostMatrix<T>& B, int nb, int ib, bool trtri,
                                 int* info) {
        TileMatrix<T> tA(A.m, A.n, nb), tB(B.m, B.n, nb);
        tA.from_lapack(A.ptr(), A.ld);
        tB.from_lapack(B.ptr(), B.ld);
        *info = gesv(tA, tB, ib, LuSchedule::Dynamic, trtri);
        HostMatrix<T> X(B.m, B.n, B.ld);
        tB.to_lapack(X.ptr(), X.ld);
        return X;
    }

    /// getrf of A (m >= n); F: the factor, G: the transformations applied to A again
    /// (lu_apply_forward), both with A's leading dimension. Returns info.
    static int getrf_of(const HostMatrix<T>& A, int nb, int ib, bool trtri, HostMatrix<T>* F, HostMatrix<T>* G,
                        int* bad_pivots = nullptr) {
        TileMatrix<T> tA(A.m, A.n, nb), tG(A.m, A.n, nb);
        tA.from_lapack(A.ptr(), A.ld);
        tG.from_lapack(A.ptr(), A.ld);
        LuFactors<T> LF(tA, ib, trtri);
        const int info = getrf(tA, LF);
        if (bad_pivots) *bad_pivots = pivots_out_of_range(tA, LF);
        lu_apply_forward(tA, LF, tG);
        *F = HostMatrix<T>(A.m, A.n, A.ld);
        *G = HostMatrix<T>(A.m, A.n, A.ld);
        tA.to_lapack(F->ptr(), F->ld);
        tG.to_lapack(G->ptr(), G->ld);
        return info;
    }

    /// geqrf + orgqr (thin Q) of A.
    static void geqrf_of(const HostMatrix<T>& A, int nb, int ib, HostMatrix<T>* F, HostMatrix<T>* Q) {
        TileMatrix<T> tA(A.m, A.n, nb), tQ(A.m, A.n, nb);
        tA.from_lapack(A.ptr(), A.ld);
        QrFactors<T> QF(tA, ib);
        geqrf(tA, QF);
        orgqr(tA, QF, tQ);
        *F = HostMatrix<T>(A.m, A.n, A.ld);
        *Q = HostMatrix<T>(A.m, A.n, A.ld);
        tA.to_lapack(F->ptr(), F->ld);
        tQ.to_lapack(Q->ptr(), Q->ld);
    }

    static HostMatrix<T> gels_of(const HostMatrix<T>& A, const HostMatrix<T>& B, int nb, int ib, int* info) {
        TileMatrix<T> tA(A.m, A.n, nb), tB(B.m, B.n, nb);
        tA.from_lapack(A.ptr(), A.ld);
        tB.from_lapack(B.ptr(), B.ld);
        *info = gels(tA, tB, ib);
        HostMatrix<T> X(B.m, B.n, B.ld);
        tB.to_lapack(X.ptr(), X.ld);
        return X;
    }

    void cholesky_conditioned();
    void cholesky_scaled();
    void lu_conditioned();
    void lu_scaled();
    void qr_conditioned();
    void qr_scaled();
    void lu_planted(bool trtri);
    void lu_non_finite(bool trtri);
    void qr_non_finite();
};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(MatrixKinds, Precisions);

// ---- Cholesky --------------------------------------------------------------------------------

// Where cond * n * eps is small the matrix is SPD in working precision and potrf must succeed.
// Beyond that the rounded matrix may be indefinite: potrf may then fail, but its info is in range
// and the factor of the leading info - 1 columns is still accurate (LAPACK's promise too).
template <class T>
void MatrixKinds<T>::cholesky_conditioned() {
    for (int nb : {7, 8})
        for (double cond : conditions<T>())
            for (char uplo : {'L', 'U'}) {
                const int n = 3 * nb + 7;
                SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", n " << n << ", nb " << nb << ", cond " << cond);
                const HostMatrix<T> A = spd_with_condition<T>(n, n + 2, cond, this->seed() + nb);
                const bool must_succeed = cond * n * eps<T>() < 1e-3;
                int info = -1;
                const HostMatrix<T> F = potrf_of(uplo, A, nb, &info);
                EXPECT_GE(info, 0);
                EXPECT_LE(info, n);
                if (must_succeed) {
                    EXPECT_EQ(info, 0);
                }
                const int done = info == 0 ? n : info - 1;
                if (done > 0) {
                    EXPECT_PRED_FORMAT1(ResidualPasses,
                                        checks::potrf_residual<T>(uplo, done, A.ptr(), A.ld, F.ptr(), F.ld));
                }
                const HostMatrix<T> B = random_matrix<T>(n, 3, n, this->seed() + 5);
                int sinfo = -1;
                const HostMatrix<T> X = posv_of(uplo, A, B, nb, &sinfo);
                EXPECT_EQ(sinfo, info) << "posv and potrf disagree on the same matrix";
                if (sinfo == 0) {
                    EXPECT_PRED_FORMAT1(ResidualPasses, solve_residual(A, X, B));
                }
            }
}

// A scaled by 2^e (both extremes): the factor of s A is sqrt(s) times the factor of A, so the
// factor divided by 2^(e/2) must pass the residual against A itself (no overflow, no loss to
// underflow); posv of (s A, s b) must give the solution of (A, b).
template <class T>
void MatrixKinds<T>::cholesky_scaled() {
    for (int nb : {7, 8})
        for (int e : scale_exponents<T>())
            for (char uplo : {'L', 'U'}) {
                const int n = 3 * nb + 7;
                SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", n " << n << ", nb " << nb << ", scale 2^" << e);
                HostMatrix<T> base = random_spd<T>(n, n + 1, this->seed() + nb), A = base;
                scale(A, e, &base);
                int info = -1;
                HostMatrix<T> F = potrf_of(uplo, A, nb, &info);
                ASSERT_EQ(info, 0);
                EXPECT_EQ(non_finite(F, uplo), 0) << "overflow in the factor";
                scale(F, -e / 2);
                EXPECT_PRED_FORMAT1(ResidualPasses, potrf_residual(uplo, base, F));
                HostMatrix<T> Bbase = random_matrix<T>(n, 2, n, this->seed() + 9), B = Bbase;
                scale(B, e, &Bbase);
                int sinfo = -1;
                const HostMatrix<T> X = posv_of(uplo, A, B, nb, &sinfo);
                ASSERT_EQ(sinfo, 0);
                EXPECT_EQ(non_finite(X), 0);
                EXPECT_PRED_FORMAT1(ResidualPasses, solve_residual(base, X, Bbase));
            }
}

TYPED_TEST(MatrixKinds, CholeskyConditionedCpu) {
    this->on(Impl::Cpu, [&] { this->cholesky_conditioned(); });
}
TYPED_TEST(MatrixKinds, CholeskyConditionedCuda) {
    this->on(Impl::Cuda, [&] { this->cholesky_conditioned(); });
}
TYPED_TEST(MatrixKinds, CholeskyScaledNearUnderflowAndOverflowCpu) {
    this->on(Impl::Cpu, [&] { this->cholesky_scaled(); });
}
TYPED_TEST(MatrixKinds, CholeskyScaledNearUnderflowAndOverflowCuda) {
    this->on(Impl::Cuda, [&] { this->cholesky_scaled(); });
}

// ---- LU --------------------------------------------------------------------------------------

// gesv's backward error (reported next to LAPACK's partial pivoting on the same system) on square
// matrices, and the transformation residual of getrf on tall ones, both variants.
template <class T>
void MatrixKinds<T>::lu_conditioned() {
    for (bool trtri : {false, true})
        for (int nb : {7, 8})
            for (double cond : conditions<T>()) {
                const int n = 3 * nb + 7, ib = 3;
                SCOPED_TRACE(::testing::Message() << "trtri " << trtri << ", n " << n << ", nb " << nb << ", cond " << cond);
                const HostMatrix<T> A = with_condition<T>(n, n, n + 1, cond, this->seed() + nb);
                const HostMatrix<T> B = random_matrix<T>(n, 3, n + 2, this->seed() + 3);
                int info = -1;
                const HostMatrix<T> X = gesv_of(A, B, nb, ib, trtri, &info);
                EXPECT_EQ(info, 0);
                const double mine = solve_residual(A, X, B);
                const auto lapack = checks::lapack_lu_reference<T>(n, B.n, A.ptr(), A.ld, B.ptr(), B.ld);
                EXPECT_PRED_FORMAT1(ResidualPasses, mine) << "LAPACK's backward error on the same system: "
                                                          << lapack.backward_error;
                // Tall: m = 2n + 3.
                const int m = 2 * n + 3;
                const HostMatrix<T> Tall = with_condition<T>(m, n, m, cond, this->seed() + 11);
                HostMatrix<T> F, G;
                EXPECT_EQ(getrf_of(Tall, nb, ib, trtri, &F, &G), 0);
                EXPECT_PRED_FORMAT1(ResidualPasses, checks::lu_transform_residual<T>(m, n, Tall.ptr(), Tall.ld, G.ptr(),
                                                                                      G.ld, F.ptr(), F.ld));
            }
}

// Scaled by 2^e: U scales by s and the multipliers do not, so G and U divided by s are the
// transformation and factor of A itself; gesv of (s A, s b) solves (A, b).
template <class T>
void MatrixKinds<T>::lu_scaled() {
    for (bool trtri : {false, true})
        for (int nb : {7, 8})
            for (int e : scale_exponents<T>()) {
                const int n = 3 * nb + 7, ib = 3;
                SCOPED_TRACE(::testing::Message() << "trtri " << trtri << ", n " << n << ", nb " << nb << ", scale 2^" << e);
                HostMatrix<T> base = random_matrix<T>(n, n, n, this->seed() + nb), A = base;
                scale(A, e, &base);
                HostMatrix<T> Bbase = random_matrix<T>(n, 2, n, this->seed() + 2), B = Bbase;
                scale(B, e, &Bbase);
                int info = -1;
                const HostMatrix<T> X = gesv_of(A, B, nb, ib, trtri, &info);
                ASSERT_EQ(info, 0);
                EXPECT_EQ(non_finite(X), 0);
                EXPECT_PRED_FORMAT1(ResidualPasses, solve_residual(base, X, Bbase));
                const int m = n + nb + 2;
                HostMatrix<T> tbase = random_matrix<T>(m, n, m + 1, this->seed() + 4), Tall = tbase;
                scale(Tall, e, &tbase);
                HostMatrix<T> F, G;
                ASSERT_EQ(getrf_of(Tall, nb, ib, trtri, &F, &G), 0);
                EXPECT_EQ(non_finite(F, 'U'), 0) << "overflow in U";
                scale(F, -e);  // only U (the upper trapezoid) is read by the check
                scale(G, -e);
                EXPECT_PRED_FORMAT1(ResidualPasses, checks::lu_transform_residual<T>(m, n, tbase.ptr(), tbase.ld,
                                                                                      G.ptr(), G.ld, F.ptr(), F.ld));
            }
}

TYPED_TEST(MatrixKinds, LuConditionedCpu) {
    this->on(Impl::Cpu, [&] { this->lu_conditioned(); });
}
TYPED_TEST(MatrixKinds, LuConditionedCuda) {
    this->on(Impl::Cuda, [&] { this->lu_conditioned(); });
}
TYPED_TEST(MatrixKinds, LuScaledNearUnderflowAndOverflowCpu) {
    this->on(Impl::Cpu, [&] { this->lu_scaled(); });
}
TYPED_TEST(MatrixKinds, LuScaledNearUnderflowAndOverflowCuda) {
    this->on(Impl::Cuda, [&] { this->lu_scaled(); });
}

// Zero column k = 1, n/2 + 1, n: info = k exactly, for the trtri variant, odd and even nb, tall
// matrices (m > n) and lda > m; gesv reports the same and leaves B untouched.
template <class T>
void MatrixKinds<T>::lu_planted(bool trtri) {
    for (int nb : {7, 8})
        for (int extra_rows : {0, nb + 3}) {
            const int n = 3 * nb + 7, m = n + extra_rows;
            for (int k : {1, n / 2 + 1, n}) {
                SCOPED_TRACE(::testing::Message() << "trtri " << trtri << ", m " << m << ", n " << n << ", nb " << nb
                                                  << ", zero column " << k);
                HostMatrix<T> A = random_matrix<T>(m, n, m + 2, this->seed() + 17 * k + m);
                for (int i = 0; i < m; ++i) A(i, k - 1) = T(0);
                HostMatrix<T> F, G;
                int bad = -1;
                EXPECT_EQ(getrf_of(A, nb, 3, trtri, &F, &G, &bad), k);
                EXPECT_EQ(bad, 0) << "pivots out of range";
                if (m != n) continue;
                const HostMatrix<T> B = random_matrix<T>(n, 2, n, this->seed() + 1);
                int info = -1;
                const HostMatrix<T> X = gesv_of(A, B, nb, 3, trtri, &info);
                EXPECT_EQ(info, k);
                EXPECT_EQ(std::memcmp(X.ptr(), B.ptr(), sizeof(T) * B.data.size()), 0) << "B changed";
            }
        }
}

TYPED_TEST(MatrixKinds, LuPlantedZeroColumnExactInfoCpu) {
    this->on(Impl::Cpu, [&] { this->lu_planted(false); });
}
TYPED_TEST(MatrixKinds, LuTrtriPlantedZeroColumnExactInfoCpu) {
    this->on(Impl::Cpu, [&] { this->lu_planted(true); });
}
TYPED_TEST(MatrixKinds, LuPlantedZeroColumnExactInfoCuda) {
    this->on(Impl::Cuda, [&] { this->lu_planted(false); });
}
TYPED_TEST(MatrixKinds, LuTrtriPlantedZeroColumnExactInfoCuda) {
    this->on(Impl::Cuda, [&] { this->lu_planted(true); });
}

// NaN or Inf in one tile (diagonal, below it, right of it). What tile LU reports, documented in
// docs/testing.md: info counts exactly zero pivots only (LAPACK's convention), so it stays 0 on a
// matrix that is otherwise random; every pivot index is in range; the factorization and the solve
// finish; the non-finite value shows in U from its own tile column on, and the columns of U left of
// that tile column stay finite (no step reads a tile column right of its panel); with a NaN, gesv's
// X is not finite (an infinite pivot only gives x_k = 0, as in LAPACK's gesv).
template <class T>
void MatrixKinds<T>::lu_non_finite(bool trtri) {
    const int nb = 7, n = 3 * nb + 7;
    struct Plant {
        int i, j;
        T value;
    };
    const T inf = std::numeric_limits<T>::infinity();
    for (Plant p : {Plant{9, 10, nan<T>()}, Plant{20, 3, nan<T>()}, Plant{2, 23, nan<T>()}, Plant{9, 10, inf},
                    Plant{20, 3, -inf}, Plant{2, 23, inf}}) {
        SCOPED_TRACE(::testing::Message() << "trtri " << trtri << ", " << p.value << " at (" << p.i << ", " << p.j << ")");
        HostMatrix<T> A = random_matrix<T>(n, n, n, this->seed());
        A(p.i, p.j) = p.value;
        HostMatrix<T> F, G;
        int bad = -1;
        // Only an exactly zero pivot counts (LAPACK's convention, kept by the CUDA kernels too:
        // they read info from U's diagonal, not from cuSOLVER), so info is 0; it completes,
        // pivots stay in range, U is finite left of the planted tile column and not right of it,
        // and gesv agrees with getrf.
        const int factor_info = getrf_of(A, nb, 3, trtri, &F, &G, &bad);
        EXPECT_EQ(factor_info, 0);
        EXPECT_EQ(bad, 0) << "pivots out of range";
        const int first = (p.j / nb) * nb;
        int left = 0, right = 0;
        for (int j = 0; j < n; ++j)
            for (int i = 0; i <= j; ++i) (j < first ? left : right) += std::isfinite(F(i, j)) ? 0 : 1;
        EXPECT_EQ(left, 0) << "non-finite values in U left of the planted tile column";
        EXPECT_GT(right, 0) << "the non-finite value vanished from U";
        const HostMatrix<T> B = random_matrix<T>(n, 2, n, this->seed() + 1);
        int info = -1;
        const HostMatrix<T> X = gesv_of(A, B, nb, 3, trtri, &info);
        EXPECT_EQ(info, factor_info);
        if (std::isnan(p.value)) {
            // An infinite pivot gives x_k = 0 (as in LAPACK's gesv), so only NaN must reach X.
            EXPECT_GT(non_finite(X), 0) << "a NaN input gave a finite solution";
        }
    }
}

TYPED_TEST(MatrixKinds, LuNaNOrInfInOneTileCpu) {
    this->on(Impl::Cpu, [&] { this->lu_non_finite(false); });
}
TYPED_TEST(MatrixKinds, LuTrtriNaNOrInfInOneTileCpu) {
    this->on(Impl::Cpu, [&] { this->lu_non_finite(true); });
}
TYPED_TEST(MatrixKinds, LuNaNOrInfInOneTileCuda) {
    this->on(Impl::Cuda, [&] { this->lu_non_finite(false); });
}
TYPED_TEST(MatrixKinds, LuTrtriNaNOrInfInOneTileCuda) {
    this->on(Impl::Cuda, [&] { this->lu_non_finite(true); });
}

// The sizes of TESTING.md for the trtri variant (gesv backward error) and for tall getrf
// (m = n + 3 and 2n: transformation residual), with lda > m, nb odd and even.
TYPED_TEST(MatrixKinds, LuTrtriAndTallEverySizeAroundNbCpu) {
    using T = TypeParam;
    ScopedImpl cpu(Impl::Cpu);
    for (int nb : {7, 8})
        for (int n : {0, 1, 2, 3, nb - 1, nb, nb + 1, 2 * nb + 1, 3 * nb + 7}) {
            SCOPED_TRACE(::testing::Message() << "n " << n << ", nb " << nb);
            const HostMatrix<T> A = random_matrix<T>(n, n, n + 3, this->seed() + n);
            const HostMatrix<T> B = random_matrix<T>(n, 2, n + 1, this->seed() + 2 * n + 1);
            int info = -1;
            const HostMatrix<T> X = TestFixture::gesv_of(A, B, nb, 3, true, &info);
            EXPECT_EQ(info, 0);
            if (n > 0) {
                EXPECT_PRED_FORMAT1(ResidualPasses, solve_residual(A, X, B));
            }
            EXPECT_EQ(non_nan_in_padding(X), 0);
            for (int m : {n + 3, 2 * n})
                for (bool trtri : {false, true}) {
                    if (m < n) continue;
                    SCOPED_TRACE(::testing::Message() << "m " << m << ", trtri " << trtri);
                    const HostMatrix<T> Tall = random_matrix<T>(m, n, m + 2, this->seed() + m);
                    HostMatrix<T> F, G;
                    int bad = -1;
                    EXPECT_EQ(TestFixture::getrf_of(Tall, nb, 3, trtri, &F, &G, &bad), 0);
                    EXPECT_EQ(bad, 0);
                    EXPECT_PRED_FORMAT1(ResidualPasses, checks::lu_transform_residual<T>(m, n, Tall.ptr(), Tall.ld,
                                                                                          G.ptr(), G.ld, F.ptr(), F.ld));
                    EXPECT_EQ(non_nan_in_padding(F), 0);
                }
        }
}

// ---- QR --------------------------------------------------------------------------------------

template <class T>
void MatrixKinds<T>::qr_conditioned() {
    for (int nb : {7, 8})
        for (double cond : conditions<T>())
            for (int m_extra : {0, 3 * nb + 10}) {
                const int n = 3 * nb + 7, m = n + m_extra;
                SCOPED_TRACE(::testing::Message() << "m " << m << ", n " << n << ", nb " << nb << ", cond " << cond);
                const HostMatrix<T> A = with_condition<T>(m, n, m + 1, cond, this->seed() + nb + m);
                HostMatrix<T> F, Q;
                this->geqrf_of(A, nb, 3, &F, &Q);
                EXPECT_PRED_FORMAT1(ResidualPasses, qr_residual(A, F, Q));
                EXPECT_PRED_FORMAT1(ResidualPasses, orthogonality(Q));
                const HostMatrix<T> B = random_matrix<T>(m, 2, m, this->seed() + 7);
                int info = -1;
                const HostMatrix<T> X = gels_of(A, B, nb, 3, &info);
                EXPECT_EQ(info, 0);
                EXPECT_PRED_FORMAT1(ResidualPasses, ls_ratio(A, X, B));
            }
}

// Scaled by 2^e: R scales by s, Q does not; gels of (s A, s b) solves (A, b).
template <class T>
void MatrixKinds<T>::qr_scaled() {
    for (int nb : {7, 8})
        for (int e : scale_exponents<T>())
            for (int m_extra : {0, 2 * nb + 1}) {
                const int n = 3 * nb + 7, m = n + m_extra;
                SCOPED_TRACE(::testing::Message() << "m " << m << ", n " << n << ", nb " << nb << ", scale 2^" << e);
                HostMatrix<T> base = random_matrix<T>(m, n, m, this->seed() + nb + m), A = base;
                scale(A, e, &base);
                HostMatrix<T> F, Q;
                this->geqrf_of(A, nb, 3, &F, &Q);
                EXPECT_EQ(non_finite(F, 'U'), 0) << "overflow in R";
                scale(F, -e);
                EXPECT_PRED_FORMAT1(ResidualPasses, qr_residual(base, F, Q));
                EXPECT_PRED_FORMAT1(ResidualPasses, orthogonality(Q));
                HostMatrix<T> Bbase = random_matrix<T>(m, 2, m, this->seed() + 3), B = Bbase;
                scale(B, e, &Bbase);
                int info = -1;
                const HostMatrix<T> X = gels_of(A, B, nb, 3, &info);
                EXPECT_EQ(info, 0);
                EXPECT_PRED_FORMAT1(ResidualPasses, ls_ratio(base, X, Bbase));
            }
}

// NaN or Inf in one tile: geqrf and gels finish; R left of the planted tile column stays finite and
// the value shows from it on; gels reports info 0 (only an exactly zero R(k, k) counts, as LAPACK's
// gels) and a non-finite X.
template <class T>
void MatrixKinds<T>::qr_non_finite() {
    const int nb = 8, n = 30, m = 45;
    const T inf = std::numeric_limits<T>::infinity();
    for (auto [i, j, v] : {std::tuple{40, 20, inf}, std::tuple{3, 3, -inf}, std::tuple{12, 27, nan<T>()}}) {
        SCOPED_TRACE(::testing::Message() << v << " at (" << i << ", " << j << ")");
        HostMatrix<T> A = random_matrix<T>(m, n, m, this->seed());
        A(i, j) = v;
        HostMatrix<T> F, Q;
        this->geqrf_of(A, nb, 3, &F, &Q);
        const int first = (j / nb) * nb;
        int left = 0, right = 0;
        for (int c = 0; c < n; ++c)
            for (int r = 0; r <= c; ++r) (c < first ? left : right) += std::isfinite(F(r, c)) ? 0 : 1;
        EXPECT_EQ(left, 0) << "non-finite R left of the planted tile column";
        EXPECT_GT(right, 0) << "the non-finite value vanished from R";
        const HostMatrix<T> B = random_matrix<T>(m, 2, m, this->seed() + 1);
        int info = -1;
        const HostMatrix<T> X = gels_of(A, B, nb, 3, &info);
        EXPECT_EQ(info, 0);
        EXPECT_GT(non_finite(X), 0);
    }
}

// Zero column k = 1, n/2 + 1, n with odd nb and square matrices (test_qr covers nb 8, m = n + 5):
// gels's info is k, as LAPACK's gels on the same matrix, and B is untouched.
template <class T>
void gels_planted(std::uint64_t seed) {
    const int nb = 7;
    for (int m_extra : {0, 9}) {
        const int n = 3 * nb + 7, m = n + m_extra;
        for (int k : {1, n / 2 + 1, n}) {
            SCOPED_TRACE(::testing::Message() << "m " << m << ", n " << n << ", zero column " << k);
            HostMatrix<T> A = random_matrix<T>(m, n, m + 1, seed + k);
            for (int i = 0; i < m; ++i) A(i, k - 1) = T(0);
            const HostMatrix<T> B = random_matrix<T>(m, 2, m, seed + 100);
            int info = -1;
            const HostMatrix<T> X = MatrixKinds<T>::gels_of(A, B, nb, 3, &info);
            EXPECT_EQ(info, k);
            EXPECT_EQ(std::memcmp(X.ptr(), B.ptr(), sizeof(T) * B.data.size()), 0) << "B changed";
        }
    }
}

TYPED_TEST(MatrixKinds, QrConditionedCpu) {
    this->on(Impl::Cpu, [&] { this->qr_conditioned(); });
}
TYPED_TEST(MatrixKinds, QrConditionedCuda) {
    this->on(Impl::Cuda, [&] { this->qr_conditioned(); });
}
TYPED_TEST(MatrixKinds, QrScaledNearUnderflowAndOverflowCpu) {
    this->on(Impl::Cpu, [&] { this->qr_scaled(); });
}
TYPED_TEST(MatrixKinds, QrScaledNearUnderflowAndOverflowCuda) {
    this->on(Impl::Cuda, [&] { this->qr_scaled(); });
}
TYPED_TEST(MatrixKinds, QrNaNOrInfInOneTileCpu) {
    this->on(Impl::Cpu, [&] { this->qr_non_finite(); });
}
TYPED_TEST(MatrixKinds, QrNaNOrInfInOneTileCuda) {
    this->on(Impl::Cuda, [&] { this->qr_non_finite(); });
}
TYPED_TEST(MatrixKinds, GelsPlantedZeroColumnOddNbCpu) {
    this->on(Impl::Cpu, [&] { gels_planted<TypeParam>(this->seed()); });
}
TYPED_TEST(MatrixKinds, GelsPlantedZeroColumnOddNbCuda) {
    this->on(Impl::Cuda, [&] { gels_planted<TypeParam>(this->seed()); });
}

// The generators make what the tests above claim: the 2-norm condition number (from LAPACK's
// singular values, in double) is the one asked for, the SPD matrix is symmetric with that condition,
// and the scaling puts the largest entry at 2^e times the original one.
class MatrixKindGenerators : public SeededTest {};

TEST_F(MatrixKindGenerators, ConditionAndScaleAreWhatTheyClaim) {
    for (double cond : {1e6, 1e14}) {
        SCOPED_TRACE(::testing::Message() << "cond " << cond);
        const int m = 45, n = 31;
        for (bool spd : {false, true}) {
            const int rows = spd ? n : m;
            HostMatrix<double> A = spd ? spd_with_condition<double>(n, n, cond, seed())
                                       : with_condition<double>(m, n, m, cond, seed());
            if (spd) {
                for (int j = 0; j < n; ++j)
                    for (int i = 0; i < j; ++i) ASSERT_EQ(A(i, j), A(j, i));
            }
            std::vector<double> s(static_cast<std::size_t>(n)), superb(static_cast<std::size_t>(n));
            HostMatrix<double> W = A;
            ASSERT_EQ(LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'N', 'N', rows, n, W.ptr(), W.ld, s.data(), nullptr, 1, nullptr,
                                     1, superb.data()),
                      0);
            EXPECT_NEAR(s[0], 1.0, 1e-12);
            // The smallest singular value carries the rounding of the product (about n eps ||A||):
            // relative 1e-6 at cond 1e6, within a factor 1.5 at 1e14.
            EXPECT_NEAR(s[0] / s[n - 1], cond, cond * std::max(1e-6, 0.5 * cond * 1e-14)) << "spd " << spd;
        }
    }
    for (int e : scale_exponents<double>()) {
        HostMatrix<double> A = random_matrix<double>(20, 20, 20, seed()), base = A;
        const double before = max_abs(A);
        scale(A, e, &base);
        EXPECT_EQ(max_abs(A), std::ldexp(before, e));
        EXPECT_EQ(non_finite(A), 0);
        EXPECT_EQ(max_abs(base), before) << "the base is the scaled matrix divided back exactly";
    }
}

}  // namespace
}  // namespace starfact::test
