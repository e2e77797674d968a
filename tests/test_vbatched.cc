// The variable-size batched host path (batched::vpotrf, vpotrs, vgetrf, vgetrs on the host;
// issue 6): mixed
// orders including 0 and 1 against LAPACKE on each matrix, exact infos (planted failures at
// count/4, count/2, count-1; a NaN in one matrix), residuals below 30; the argument checks
// (negative orders, lda < max(1, n), null arrays, null matrices), each before any data is read
// or written. Runs without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "batched/vbatched.hpp"
#include "common/blas.hpp"
#include "common/error.hpp"
#include "test_support.hpp"
#include "vbatched_lu_support.hpp"

namespace starfact::test {
namespace {

using batched::Uplo;

char other(char uplo) { return uplo == 'L' ? 'U' : 'L'; }

template <class T>
HostMatrix<T> leading(const HostMatrix<T>& A, int k) {
    HostMatrix<T> B(k, k, k);
    for (int j = 0; j < k; ++j)
        for (int i = 0; i < k; ++i) B(i, j) = A(i, j);
    return B;
}

/// Orders uniform in [0, nmax] or skewed (1% nmax, the rest in [1, nmax/10]).
std::vector<int> draw_sizes(bool skewed, int nmax, int count, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int> n(count);
    for (int b = 0; b < count; ++b)
        n[b] = skewed ? (rng() % 100 == 0 ? nmax : 1 + static_cast<int>(rng() % std::max(1, nmax / 10)))
                      : static_cast<int>(rng() % (nmax + 1));
    return n;
}

template <class T>
class VBatchedHost : public SeededTest {};

using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(VBatchedHost, Precisions);

// Factor, then solve, on mixed orders with lda > n; failures planted at count/4, count/2, count-1
// (minors 1, n/2+1, n) and a NaN in one more matrix, every info exact.
TYPED_TEST(VBatchedHost, FactorAndSolveAgainstLapack) {
    using T = TypeParam;
    for (bool skewed : {false, true})
        for (char uplo : {'L', 'U'}) {
            const int count = 120, nrhs = 3;
            const std::uint64_t s = this->seed() + (skewed ? 11 : 0) + uplo;
            auto n = draw_sizes(skewed, 150, count, s);
            const int at[3] = {count / 4, count / 2, count - 1};
            for (int b : at) n[b] = std::max(n[b], 2);
            const int nan_at = 7;
            n[nan_at] = std::max(n[nan_at], 5);
            std::vector<HostMatrix<T>> A, F, B;
            std::vector<int> expected(count, 0), lda(count), ldb(count);
            for (int b = 0; b < count; ++b) {
                lda[b] = std::max(1, n[b] + b % 3);
                ldb[b] = std::max(1, n[b] + (b + 1) % 2);
                A.push_back(random_spd<T>(n[b], lda[b], s + 31ULL * b));
            }
            for (int f = 0; f < 3; ++f) {
                const int b = at[f];
                expected[b] = f == 0 ? 1 : f == 1 ? n[b] / 2 + 1 : n[b];
                A[b] = spd_failing_at<T>(n[b], expected[b], lda[b], s + 31ULL * b);
            }
            for (auto& M : A) poison_strict_triangle(M, other(uplo));
            {
                std::mt19937_64 rng(s);
                const int i = static_cast<int>(rng() % n[nan_at]), j = static_cast<int>(rng() % (i + 1));
                if (uplo == 'L')
                    A[nan_at](i, j) = nan<T>();
                else
                    A[nan_at](j, i) = nan<T>();
                expected[nan_at] = reference_potrf_info(uplo, A[nan_at]);
                ASSERT_GT(expected[nan_at], 0);
            }
            F = A;
            std::vector<T*> pf;
            for (auto& M : F) pf.push_back(M.ptr());
            std::vector<int> info(count, -7);
            const int failed = batched::vpotrf<T>(uplo == 'L' ? Uplo::lower : Uplo::upper, n.data(), pf.data(),
                                                  lda.data(), info.data(), count);
            EXPECT_EQ(failed, 4);
            ASSERT_EQ(info, expected);
            for (int b = 0; b < count; ++b) {
                EXPECT_EQ(non_nan_in_strict_triangle(F[b], other(uplo)), 0) << "matrix " << b;
                EXPECT_EQ(non_nan_in_padding(F[b]), 0) << "matrix " << b;
                const int k = expected[b] == 0 ? n[b] : expected[b] - 1;
                if (k > 0) {
                    ASSERT_PRED_FORMAT1(ResidualPasses, potrf_residual(uplo, leading(A[b], k), leading(F[b], k)))
                        << "matrix " << b << " (n " << n[b] << ")";
                }
            }
            // Solve with the successful factors (failing ones get n = 0: nothing to do).
            std::vector<int> ns = n;
            std::vector<const T*> pa;
            std::vector<T*> pb;
            for (int b = 0; b < count; ++b) {
                if (expected[b] != 0) ns[b] = 0;
                B.push_back(random_matrix<T>(n[b], nrhs, ldb[b], s + 7ULL * b + 3));
                pa.push_back(F[b].ptr());
            }
            auto X = B;
            for (auto& M : X) pb.push_back(M.ptr());
            batched::vpotrs<T>(uplo == 'L' ? Uplo::lower : Uplo::upper, ns.data(), nrhs, pa.data(), lda.data(),
                               pb.data(), ldb.data(), count);
            for (int b = 0; b < count; ++b) {
                if (ns[b] == 0) {
                    EXPECT_EQ(std::memcmp(X[b].ptr(), B[b].ptr(), B[b].data.size() * sizeof(T)), 0) << b;
                    continue;
                }
                HostMatrix<T> S = A[b];  // both triangles for the residual
                for (int j = 0; j < n[b]; ++j)
                    for (int i = 0; i < j; ++i) {
                        if (uplo == 'L')
                            S(i, j) = S(j, i);
                        else
                            S(j, i) = S(i, j);
                    }
                ASSERT_PRED_FORMAT1(ResidualPasses, solve_residual(S, X[b], B[b])) << "matrix " << b;
            }
        }
}

// LU on mixed orders (0 and 1 included) with lda > n: zero pivots planted at count/4, count/2,
// count-1 (columns 1, n/2+1, n), a NaN in one more matrix; every info, pivot and factor as
// LAPACKE's on a copy (factors to rounding), residuals below 30 (singular ones too: the factorization completes), the
// padding untouched; then vgetrs on the regular matrices, backward error below 30.
TYPED_TEST(VBatchedHost, LuFactorAndSolveAgainstLapack) {
    using T = TypeParam;
    for (bool skewed : {false, true}) {
        const int count = 120, nrhs = 4;
        const std::uint64_t s = this->seed() + (skewed ? 17 : 3);
        auto n = draw_sizes(skewed, 150, count, s);
        n[3] = 0;
        n[5] = 1;
        const int at[3] = {count / 4, count / 2, count - 1};
        for (int b : at) n[b] = std::max(n[b], 2);
        const int nan_at = 7;
        n[nan_at] = std::max(n[nan_at], 5);
        std::vector<HostMatrix<T>> A, B;
        std::vector<int> expected(count, 0), lda(count), ldb(count);
        for (int b = 0; b < count; ++b) {
            lda[b] = std::max(1, n[b] + b % 3);
            ldb[b] = std::max(1, n[b] + (b + 1) % 2);
            A.push_back(random_matrix<T>(n[b], n[b], lda[b], s + 31ULL * b));
        }
        for (int f = 0; f < 3; ++f) {
            const int b = at[f];
            expected[b] = f == 0 ? 1 : f == 1 ? n[b] / 2 + 1 : n[b];
            A[b] = lu_failing_at<T>(n[b], expected[b], lda[b], s + 31ULL * b);
        }
        {
            std::mt19937_64 rng(s);
            A[nan_at](static_cast<int>(rng() % n[nan_at]), static_cast<int>(rng() % n[nan_at])) = nan<T>();
        }
        auto F = A;
        std::vector<T*> pf;
        std::vector<std::vector<int>> piv(count);
        std::vector<int*> pp;
        for (int b = 0; b < count; ++b) {
            pf.push_back(F[b].ptr());
            piv[b].assign(std::max(n[b], 1), -99);
            pp.push_back(piv[b].data());
        }
        std::vector<int> info(count, -7);
        const int failed = batched::vgetrf<T>(n.data(), pf.data(), lda.data(), pp.data(), info.data(), count);
        int lapack_failed = 0;
        for (int b = 0; b < count; ++b) {
            auto R = A[b];
            std::vector<int> rpiv(std::max(n[b], 1), -99);
            const int rinfo = n[b] == 0 ? 0 : blas::getrf(n[b], n[b], R.ptr(), R.ld, rpiv.data());
            if (rinfo != 0) ++lapack_failed;
            ASSERT_EQ(info[b], rinfo) << "matrix " << b << " (n " << n[b] << ")";
            if (b != nan_at) {
                ASSERT_EQ(info[b], expected[b]) << "matrix " << b << " (n " << n[b] << ")";
            }
            ASSERT_EQ(piv[b], rpiv) << "matrix " << b;
            EXPECT_EQ(non_nan_in_padding(F[b]), 0) << "matrix " << b;
            if (b != nan_at) {  // OpenBLAS threaded (here) and single-threaded (vgetrf) may round differently
                const double tol = 100.0 * n[b] * ScalarTraits<T>::eps * std::max(1.0, max_abs(R));
                ASSERT_LE(max_abs_diff(F[b], R), tol) << "matrix " << b;
            }
            if (b != nan_at) {
                ASSERT_PRED_FORMAT1(ResidualPasses, lu_residual_ratio(A[b], F[b], piv[b].data()))
                    << "matrix " << b << " (n " << n[b] << ")";
            }
        }
        EXPECT_EQ(failed, lapack_failed);
        // Solve with the regular factors (singular and NaN ones get n = 0: nothing to do).
        std::vector<int> ns = n;
        ns[nan_at] = 0;
        std::vector<const T*> pa;
        std::vector<const int*> cp;
        std::vector<T*> pb;
        for (int b = 0; b < count; ++b) {
            if (info[b] != 0) ns[b] = 0;
            B.push_back(random_matrix<T>(n[b], nrhs, ldb[b], s + 7ULL * b + 3));
            pa.push_back(F[b].ptr());
            cp.push_back(piv[b].data());
        }
        auto X = B;
        for (auto& M : X) pb.push_back(M.ptr());
        batched::vgetrs<T>(ns.data(), nrhs, pa.data(), lda.data(), cp.data(), pb.data(), ldb.data(), count);
        for (int b = 0; b < count; ++b) {
            if (ns[b] == 0) {
                EXPECT_EQ(std::memcmp(X[b].ptr(), B[b].ptr(), B[b].data.size() * sizeof(T)), 0) << b;
                continue;
            }
            EXPECT_EQ(non_nan_in_padding(X[b]), 0) << "matrix " << b;
            ASSERT_PRED_FORMAT1(ResidualPasses, solve_residual(A[b], X[b], B[b])) << "matrix " << b;
        }
    }
}

// vgetrf and vgetrs: every bad argument named, nothing read or written.
TEST(VBatchedHostArguments, LuCheckedBeforeAnyWork) {
    std::vector<int> n{3, 0, 2}, lda{3, 1, 2}, ldb{3, 1, 2};
    std::vector<double> a0(9, 1.0), a2(4, 1.0), b0(6, 2.0), b2(4, 2.0);
    std::vector<int> p0(3, -5), p2(2, -5);
    std::vector<double*> A{a0.data(), nullptr, a2.data()}, B{b0.data(), nullptr, b2.data()};
    std::vector<const double*> cA{a0.data(), nullptr, a2.data()};
    std::vector<int*> P{p0.data(), nullptr, p2.data()};
    std::vector<const int*> cP{p0.data(), nullptr, p2.data()};
    std::vector<int> info(3, -9);
    auto named = [&](const std::string& arg, auto&& call) {
        try {
            call();
            ADD_FAILURE() << "no ArgumentError for '" << arg << "'";
        } catch (const ArgumentError& e) {
            EXPECT_EQ(e.argument(), arg) << e.what();
        }
    };
    auto getrf = [&](int count) {
        return batched::vgetrf<double>(n.data(), A.data(), lda.data(), P.data(), info.data(), count);
    };
    auto getrs = [&](int nrhs) {
        batched::vgetrs<double>(n.data(), nrhs, cA.data(), lda.data(), cP.data(), B.data(), ldb.data(), 3);
    };
    named("count", [&] { getrf(-1); });
    named("ipiv", [&] { batched::vgetrf<double>(n.data(), A.data(), lda.data(), nullptr, info.data(), 3); });
    named("info", [&] { batched::vgetrf<double>(n.data(), A.data(), lda.data(), P.data(), nullptr, 3); });
    named("n", [&] { batched::vgetrf<double>(nullptr, A.data(), lda.data(), P.data(), info.data(), 3); });
    n[2] = -1;
    named("n", [&] { getrf(3); });
    n[2] = 2;
    lda[2] = 1;
    named("lda", [&] { getrf(3); });
    lda[2] = 2;
    P[2] = nullptr;
    named("ipiv", [&] { getrf(3); });
    P[2] = p2.data();
    A[0] = nullptr;
    named("A", [&] { getrf(3); });
    A[0] = a0.data();
    named("nrhs", [&] { getrs(-1); });
    cP[0] = nullptr;
    named("ipiv", [&] { getrs(2); });
    cP[0] = p0.data();
    ldb[0] = 2;
    named("ldb", [&] { getrs(2); });
    ldb[0] = 3;
    B[2] = nullptr;
    named("B", [&] { getrs(2); });
    EXPECT_EQ(info, std::vector<int>(3, -9));
    EXPECT_EQ(a0, std::vector<double>(9, 1.0));
    EXPECT_EQ(b0, std::vector<double>(6, 2.0));
    EXPECT_EQ(p0, std::vector<int>(3, -5));
    // count 0 needs no arrays; n = 1 and n = 0 factor (a 1 x 1 zero gives info 1).
    EXPECT_EQ(batched::vgetrf<double>(nullptr, nullptr, nullptr, nullptr, nullptr, 0), 0);
    std::vector<int> n2{1, 0, 1}, ld2{1, 1, 1};
    std::vector<double> x{4.0}, z{0.0};
    std::vector<double*> A2{x.data(), nullptr, z.data()};
    std::vector<int> q0{-1}, q2{-1};
    std::vector<int*> P2{q0.data(), nullptr, q2.data()};
    EXPECT_EQ(batched::vgetrf<double>(n2.data(), A2.data(), ld2.data(), P2.data(), info.data(), 3), 1);
    EXPECT_EQ(info, (std::vector<int>{0, 0, 1}));
    EXPECT_EQ(q0[0], 1);
    EXPECT_EQ(q2[0], 1);
}

// Every bad argument named, with nothing read or written (the matrices and infos unchanged).
TEST(VBatchedHostArguments, CheckedBeforeAnyWork) {
    std::vector<int> n{3, 0, 2}, lda{3, 1, 2}, ldb{3, 1, 2};
    std::vector<double> a0(9, 1.0), a2(4, 1.0), b0(6, 2.0), b2(4, 2.0);
    std::vector<double*> A{a0.data(), nullptr, a2.data()}, B{b0.data(), nullptr, b2.data()};
    std::vector<const double*> cA{a0.data(), nullptr, a2.data()};
    std::vector<int> info(3, -9);
    auto factor_named = [&](const std::string& arg, auto&& call) {
        try {
            call();
            ADD_FAILURE() << "no ArgumentError for '" << arg << "'";
        } catch (const ArgumentError& e) {
            EXPECT_EQ(e.argument(), arg) << e.what();
        }
    };
    auto vpotrf = [&](const int* pn, double* const* pA, const int* plda, int* pinfo, int count) {
        return batched::vpotrf<double>(Uplo::lower, pn, pA, plda, pinfo, count);
    };
    factor_named("count", [&] { vpotrf(n.data(), A.data(), lda.data(), info.data(), -1); });
    factor_named("n", [&] { vpotrf(nullptr, A.data(), lda.data(), info.data(), 3); });
    factor_named("lda", [&] { vpotrf(n.data(), A.data(), nullptr, info.data(), 3); });
    factor_named("A", [&] { vpotrf(n.data(), nullptr, lda.data(), info.data(), 3); });
    factor_named("info", [&] { vpotrf(n.data(), A.data(), lda.data(), nullptr, 3); });
    n[2] = -2;
    factor_named("n", [&] { vpotrf(n.data(), A.data(), lda.data(), info.data(), 3); });
    n[2] = 2;
    lda[0] = 2;
    factor_named("lda", [&] { vpotrf(n.data(), A.data(), lda.data(), info.data(), 3); });
    lda[0] = 3;
    lda[1] = 0;
    factor_named("lda", [&] { vpotrf(n.data(), A.data(), lda.data(), info.data(), 3); });
    lda[1] = 1;
    A[2] = nullptr;
    factor_named("A", [&] { vpotrf(n.data(), A.data(), lda.data(), info.data(), 3); });
    A[2] = a2.data();
    factor_named("nrhs", [&] {
        batched::vpotrs<double>(Uplo::upper, n.data(), -1, cA.data(), lda.data(), B.data(), ldb.data(), 3);
    });
    ldb[2] = 1;
    factor_named("ldb", [&] {
        batched::vpotrs<double>(Uplo::upper, n.data(), 2, cA.data(), lda.data(), B.data(), ldb.data(), 3);
    });
    ldb[2] = 2;
    B[0] = nullptr;
    factor_named("B", [&] {
        batched::vpotrs<double>(Uplo::upper, n.data(), 2, cA.data(), lda.data(), B.data(), ldb.data(), 3);
    });
    factor_named(
        "B", [&] { batched::vpotrs<double>(Uplo::upper, n.data(), 2, cA.data(), lda.data(), nullptr, ldb.data(), 3); });
    EXPECT_EQ(info, std::vector<int>(3, -9));
    EXPECT_EQ(a0, std::vector<double>(9, 1.0));
    EXPECT_EQ(b0, std::vector<double>(6, 2.0));
    // count 0 needs no arrays; all orders 0 sets every info to 0.
    EXPECT_EQ(vpotrf(nullptr, nullptr, nullptr, nullptr, 0), 0);
    std::vector<int> zeros(3, 0), ones(3, 1);
    EXPECT_EQ(vpotrf(zeros.data(), A.data(), ones.data(), info.data(), 3), 0);
    EXPECT_EQ(info, std::vector<int>(3, 0));
}

}  // namespace
}  // namespace starfact::test
