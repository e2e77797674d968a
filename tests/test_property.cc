// Property-based tests of the tile factorizations: a fixed number of random cases per precision,
// each drawing an operation (potrf, posv, getrf on m >= n, gesv with either LU variant, geqrf, gels),
// a shape, a tile size nb, an inner block ib, a leading dimension and a kind (well conditioned,
// condition up to 1e6, scaled by a power of two near underflow or overflow, a planted failure at a
// random column). Each case checks the residual and info properties of docs/testing.md
// (normalized residuals below 30, LAPACK's info). A failure names the case (operation, shape,
// nb, ib, kind, case seed); every case is a function of the test's seed, so
// STARFACT_TEST_SEED=<seed> replays the whole run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <string>

#include "codelets/codelets.hpp"
#include "common/checks.hpp"
#include "matrix_kinds.hpp"
#include "test_support.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

namespace starfact::test {
namespace {
using namespace kinds;

enum class Op { Potrf, Posv, Getrf, Gesv, Geqrf, Gels };
enum class Kind { Well, Conditioned, Scaled, Planted };

const char* op_name(Op op) {
    switch (op) {
        case Op::Potrf: return "potrf";
        case Op::Posv: return "posv";
        case Op::Getrf: return "getrf";
        case Op::Gesv: return "gesv";
        case Op::Geqrf: return "geqrf";
        case Op::Gels: return "gels";
    }
    return "?";
}
const char* kind_name(Kind k) {
    switch (k) {
        case Kind::Well: return "well conditioned";
        case Kind::Conditioned: return "conditioned";
        case Kind::Scaled: return "scaled";
        case Kind::Planted: return "planted failure";
    }
    return "?";
}

/// One random case.
struct Case {
    Op op;
    Kind kind;
    int m, n, nb, ib, lda, nrhs;
    bool trtri;     ///< LU's variant
    char uplo;      ///< Cholesky's triangle
    double cond;    ///< Kind::Conditioned
    int exponent;   ///< Kind::Scaled: the matrix (and B) times 2^exponent
    int planted;    ///< Kind::Planted: 1-based column (LU, QR) or leading minor (Cholesky)
    std::uint64_t seed;

    std::string describe() const {
        std::string s = std::string(op_name(op)) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                        " nb=" + std::to_string(nb) + " ib=" + std::to_string(ib) + " lda=" + std::to_string(lda) +
                        " nrhs=" + std::to_string(nrhs) + " kind=" + kind_name(kind);
        if (op == Op::Potrf || op == Op::Posv) s += std::string(" uplo=") + uplo;
        if (op == Op::Getrf || op == Op::Gesv) s += std::string(" trtri=") + (trtri ? "on" : "off");
        if (kind == Kind::Conditioned) s += " cond=" + std::to_string(cond);
        if (kind == Kind::Scaled) s += " scale=2^" + std::to_string(exponent);
        if (kind == Kind::Planted) s += " at=" + std::to_string(planted);
        return s + " case_seed=" + std::to_string(seed);
    }
};

template <class T>
Case draw(std::mt19937_64& rng) {
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    Case c{};
    c.op = static_cast<Op>(uniform(0, 5));
    c.kind = static_cast<Kind>(uniform(0, 3));
    c.n = uniform(1, 48);
    const bool tall_allowed = c.op == Op::Getrf || c.op == Op::Geqrf || c.op == Op::Gels;
    c.m = tall_allowed && uniform(0, 1) ? c.n + uniform(1, 40) : c.n;
    // At most about 10 tiles a side, so a case submits hundreds of tasks, not tens of thousands.
    const int min_nb = std::max(1, (std::max(c.m, c.n) + 9) / 10);
    c.nb = uniform(min_nb, std::max(min_nb, 20));
    c.ib = uniform(1, c.nb);
    c.lda = c.m + uniform(0, 3);
    c.nrhs = uniform(1, 5);
    c.trtri = uniform(0, 1) == 1;
    c.uplo = uniform(0, 1) ? 'L' : 'U';
    // Cholesky must succeed: cond n eps well below 1 (1e6 in double, 1e2 in single).
    const double max_cond = sizeof(T) == 8 ? 1e6 : 1e2;
    c.cond = std::pow(10.0, std::uniform_real_distribution<double>(1.0, std::log10(max_cond))(rng));
    const std::vector<int> e = scale_exponents<T>();
    c.exponent = uniform(0, 1) ? e[0] : e[1];
    c.planted = uniform(1, c.n);
    c.seed = rng();
    return c;
}

template <class T>
class Property : public RuntimeTest {
protected:
    void run_case(const Case& c);
};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Property, Precisions);

/// The matrix of a case (m x n, lda), before scaling; SPD for Cholesky.
template <class T>
HostMatrix<T> matrix_of(const Case& c) {
    const bool chol = c.op == Op::Potrf || c.op == Op::Posv;
    if (c.kind == Kind::Conditioned)
        return chol ? spd_with_condition<T>(c.n, c.lda, c.cond, c.seed) : with_condition<T>(c.m, c.n, c.lda, c.cond, c.seed);
    if (c.kind == Kind::Planted) {
        if (chol) return spd_failing_at<T>(c.n, c.planted, c.lda, c.seed);
        HostMatrix<T> A = random_matrix<T>(c.m, c.n, c.lda, c.seed);
        for (int i = 0; i < c.m; ++i) A(i, c.planted - 1) = T(0);
        return A;
    }
    return chol ? random_spd<T>(c.n, c.lda, c.seed) : random_matrix<T>(c.m, c.n, c.lda, c.seed);
}

template <class T>
void Property<T>::run_case(const Case& c) {
    SCOPED_TRACE(c.describe());
    HostMatrix<T> base = matrix_of<T>(c), A = base;
    HostMatrix<T> Bbase = random_matrix<T>(c.m, c.nrhs, c.m, c.seed + 1), B = Bbase;
    const int e = c.kind == Kind::Scaled ? c.exponent : 0;
    if (e != 0) {
        scale(A, e, &base);
        scale(B, e, &Bbase);
    }
    const bool planted = c.kind == Kind::Planted;
    TileMatrix<T> tA(c.m, c.n, c.nb), tB(c.m, c.nrhs, c.nb);
    tA.from_lapack(A.ptr(), A.ld);
    tB.from_lapack(B.ptr(), B.ld);
    HostMatrix<T> F(c.m, c.n, c.lda), X(c.m, c.nrhs, c.m);
    switch (c.op) {
        case Op::Potrf:
        case Op::Posv: {
            const int info = c.op == Op::Potrf ? potrf(c.uplo, tA) : posv(c.uplo, tA, tB);
            ASSERT_EQ(info, planted ? c.planted : 0);
            tA.to_lapack(F.ptr(), F.ld);
            tB.to_lapack(X.ptr(), X.ld);
            if (planted) {
                if (c.op == Op::Posv) {
                    EXPECT_EQ(std::memcmp(X.ptr(), B.ptr(), sizeof(T) * B.data.size()), 0) << "B changed";
                }
                return;
            }
            if (c.op == Op::Potrf) {
                scale(F, -e / 2);
                EXPECT_PRED_FORMAT1(ResidualPasses, potrf_residual(c.uplo, base, F));
            } else {
                EXPECT_PRED_FORMAT1(ResidualPasses, solve_residual(base, X, Bbase));
            }
            return;
        }
        case Op::Getrf: {
            TileMatrix<T> tG(c.m, c.n, c.nb);
            tG.from_lapack(A.ptr(), A.ld);
            LuFactors<T> LF(tA, c.ib, c.trtri);
            ASSERT_EQ(getrf(tA, LF), planted ? c.planted : 0);
            EXPECT_EQ(pivots_out_of_range(tA, LF), 0);
            lu_apply_forward(tA, LF, tG);
            HostMatrix<T> G(c.m, c.n, c.lda);
            tA.to_lapack(F.ptr(), F.ld);
            tG.to_lapack(G.ptr(), G.ld);
            scale(F, -e);
            scale(G, -e);
            // The transformations are exact even with a zero pivot (the column is skipped). The
            // ratio is normalized by ||A||: an all-zero A (one planted column) must give U = 0.
            if (max_abs(base) == 0.0) {
                EXPECT_EQ(max_abs(F, 'U'), 0.0);
            } else {
                EXPECT_PRED_FORMAT1(ResidualPasses, checks::lu_transform_residual<T>(c.m, c.n, base.ptr(), base.ld,
                                                                                      G.ptr(), G.ld, F.ptr(), F.ld));
            }
            return;
        }
        case Op::Gesv: {
            ASSERT_EQ(gesv(tA, tB, c.ib, LuSchedule::Dynamic, c.trtri), planted ? c.planted : 0);
            tB.to_lapack(X.ptr(), X.ld);
            if (planted) {
                EXPECT_EQ(std::memcmp(X.ptr(), B.ptr(), sizeof(T) * B.data.size()), 0) << "B changed";
            } else {
                EXPECT_PRED_FORMAT1(ResidualPasses, solve_residual(base, X, Bbase));
            }
            return;
        }
        case Op::Geqrf: {
            TileMatrix<T> tQ(c.m, c.n, c.nb);
            QrFactors<T> QF(tA, c.ib);
            geqrf(tA, QF);  // QR cannot fail: a zero column is only a zero R(k, k)
            orgqr(tA, QF, tQ);
            HostMatrix<T> Q(c.m, c.n, c.lda);
            tA.to_lapack(F.ptr(), F.ld);
            tQ.to_lapack(Q.ptr(), Q.ld);
            EXPECT_EQ(non_finite(F, 'U'), 0);
            scale(F, -e);
            EXPECT_PRED_FORMAT1(ResidualPasses, qr_residual(base, F, Q));
            EXPECT_PRED_FORMAT1(ResidualPasses, orthogonality(Q));
            return;
        }
        case Op::Gels: {
            ASSERT_EQ(gels(tA, tB, c.ib), planted ? c.planted : 0);
            tB.to_lapack(X.ptr(), X.ld);
            if (planted) {
                EXPECT_EQ(std::memcmp(X.ptr(), B.ptr(), sizeof(T) * B.data.size()), 0) << "B changed";
            } else {
                EXPECT_PRED_FORMAT1(ResidualPasses, ls_ratio(base, X, Bbase));
            }
            return;
        }
    }
}

// 250 cases per precision: about 8 s per precision on 2 (busy) cores in a Release build.
constexpr int kCases = 250;

TYPED_TEST(Property, RandomCasesKeepResidualAndInfoProperties) {
    std::mt19937_64 rng(this->seed());
    int failed = 0;
    std::map<std::string, int> tally;  // cases per operation and kind, printed: nothing is vacuous
    for (int i = 0; i < kCases; ++i) {
        const Case c = draw<TypeParam>(rng);
        ++tally[std::string(op_name(c.op)) + "/" + kind_name(c.kind)];
        const int before = ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
        this->run_case(c);
        if (::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count() > before) {
            ++failed;
            std::cout << "[ PROPERTY ] case " << i << " failed: " << c.describe() << std::endl;
        }
        if (failed >= 5) {
            ADD_FAILURE() << "stopping after 5 failed cases";
            break;
        }
    }
    std::cout << "[ PROPERTY ] " << kCases << " cases:";
    for (const auto& [name, count] : tally) std::cout << " " << name << " " << count << ";";
    std::cout << std::endl;
    EXPECT_EQ(tally.size(), 24u) << "some operation and kind was never drawn";
}

}  // namespace
}  // namespace starfact::test
