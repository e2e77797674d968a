// The variable-size batched host path (batched::vpotrf, vpotrs, vgetrf, vgetrs on the host): mixed
// orders including 0 and 1 against LAPACKE on each matrix, exact infos (planted failures at
// count/4, count/2, count-1; a NaN in one matrix), residuals below 30; the argument checks
// (negative orders, lda < max(1, n), null arrays, null matrices), each before any data is read
// or written. Runs without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "batched/residuals.hpp"
#include "batched/vbatched.hpp"
#include "cli_runner.hpp"
#include "codelets/codelets.hpp"
#include "common/blas.hpp"
#include "common/error.hpp"
#include "common/host_pool.hpp"
#include "common/matgen.hpp"
#include "test_support.hpp"
#include "vbatched_lu_support.hpp"
#include "vbatched_test_support.hpp"

namespace starfact::test {
namespace {

/// memcmp == 0 that also takes empty ranges, whose data() may be null (memcmp itself may not be
/// given a null pointer, even for 0 bytes: UBSan reports it).
bool equal_bytes(const void* a, const void* b, std::size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

using batched::Uplo;

template <class T>
class VBatchedHost : public SeededTest {};

TYPED_TEST_SUITE(VBatchedHost, Precisions);

// Factor, then solve, on mixed orders with lda > n; failures planted at count/4, count/2, count-1
// (minors 1, n/2+1, n) and a NaN in one more matrix, every info exact.
TYPED_TEST(VBatchedHost, FactorAndSolveAgainstLapack) {
    using T = TypeParam;
    for (bool skewed : {false, true})
        for (char uplo : {'L', 'U'}) {
            const int count = 120, nrhs = 3;
            const std::uint64_t s = this->seed() + (skewed ? 11 : 0) + uplo;
            auto n = draw_sizes(skewed, 150, count, s, false);
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
                plant_nan(A[nan_at], uplo, i, j);
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
                    EXPECT_TRUE(equal_bytes(X[b].ptr(), B[b].ptr(), B[b].data.size() * sizeof(T))) << b;
                    continue;
                }
                ASSERT_PRED_FORMAT1(ResidualPasses, solve_residual(symmetric(A[b], uplo), X[b], B[b]))
                    << "matrix " << b;
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
        auto n = draw_sizes(skewed, 150, count, s, false);
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
                EXPECT_TRUE(equal_bytes(X[b].ptr(), B[b].ptr(), B[b].data.size() * sizeof(T))) << b;
                continue;
            }
            EXPECT_EQ(non_nan_in_padding(X[b]), 0) << "matrix " << b;
            ASSERT_PRED_FORMAT1(ResidualPasses, solve_residual(A[b], X[b], B[b])) << "matrix " << b;
        }
    }
}

// The GPU LU tests' pivot check (pivot_difference): agreeing pivots and a departure at an exact
// tie pass; a departure to a row that is not a tie is named, with its column.
TEST(VBatchedLuPivotCheck, AcceptsTiesOnly) {
    const int n = 40;
    const std::uint64_t seed = fresh_seed();
    HostMatrix<double> A = random_matrix<double>(n, n, n, seed);
    for (int i = 0; i < n; ++i) A(i, 0) = 0.25 * (A(i, 0) > 0 ? 1 : -1) * (1 + i % 3) / 8.0;
    A(5, 0) = -1.0;  // an exact tie in column 0: rows 5 and 17 (LAPACKE takes the first)
    A(17, 0) = 1.0;
    HostMatrix<double> L = A;
    std::vector<int> lpiv(n);
    ASSERT_EQ(blas::getrf(n, n, L.ptr(), L.ld, lpiv.data()), 0) << "seed " << seed;
    ASSERT_EQ(lpiv[0], 6);
    EXPECT_EQ(pivot_difference(L, lpiv, lpiv.data(), n), "");
    std::vector<int> gpu = lpiv;
    gpu[0] = 18;  // the other side of the tie, then anything
    for (int i = 1; i < n; ++i) gpu[i] = i + 1;
    EXPECT_EQ(pivot_difference(L, lpiv, gpu.data(), n), "") << "seed " << seed;
    // Later: at column 1 the GPU takes the row that ends where LAPACKE's smallest candidate is.
    gpu = lpiv;
    int k = 1, smallest = -1;
    for (int i = k + 1; i < n; ++i)
        if (smallest < 0 || std::abs(L(i, k)) < std::abs(L(smallest, k))) smallest = i;
    ASSERT_LT(std::abs(L(smallest, k)), 0.5) << "seed " << seed;
    // The row at position `smallest` after LAPACKE's interchanges was, before interchange k, at:
    int pos = smallest;
    for (int j = n - 1; j >= k; --j) {
        const int q = lpiv[j] - 1;
        if (pos == j)
            pos = q;
        else if (pos == q)
            pos = j;
    }
    gpu[k] = pos + 1;
    const std::string why = pivot_difference(L, lpiv, gpu.data(), n);
    EXPECT_NE(why.find("pivot of column 1:"), std::string::npos) << why << " (seed " << seed << ")";
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
    auto getrf = [&](int count) {
        return batched::vgetrf<double>(n.data(), A.data(), lda.data(), P.data(), info.data(), count);
    };
    auto getrs = [&](int nrhs) {
        batched::vgetrs<double>(n.data(), nrhs, cA.data(), lda.data(), cP.data(), B.data(), ldb.data(), 3);
    };
    expect_named("count", [&] { getrf(-1); });
    expect_named("ipiv", [&] { batched::vgetrf<double>(n.data(), A.data(), lda.data(), nullptr, info.data(), 3); });
    expect_named("info", [&] { batched::vgetrf<double>(n.data(), A.data(), lda.data(), P.data(), nullptr, 3); });
    expect_named("n", [&] { batched::vgetrf<double>(nullptr, A.data(), lda.data(), P.data(), info.data(), 3); });
    n[2] = -1;
    expect_named("n", [&] { getrf(3); });
    n[2] = 2;
    lda[2] = 1;
    expect_named("lda", [&] { getrf(3); });
    lda[2] = 2;
    P[2] = nullptr;
    expect_named("ipiv", [&] { getrf(3); });
    P[2] = p2.data();
    A[0] = nullptr;
    expect_named("A", [&] { getrf(3); });
    A[0] = a0.data();
    expect_named("nrhs", [&] { getrs(-1); });
    cP[0] = nullptr;
    expect_named("ipiv", [&] { getrs(2); });
    cP[0] = p0.data();
    ldb[0] = 2;
    expect_named("ldb", [&] { getrs(2); });
    ldb[0] = 3;
    B[2] = nullptr;
    expect_named("B", [&] { getrs(2); });
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
    auto vpotrf = [&](const int* pn, double* const* pA, const int* plda, int* pinfo, int count) {
        return batched::vpotrf<double>(Uplo::lower, pn, pA, plda, pinfo, count);
    };
    expect_named("count", [&] { vpotrf(n.data(), A.data(), lda.data(), info.data(), -1); });
    expect_named("n", [&] { vpotrf(nullptr, A.data(), lda.data(), info.data(), 3); });
    expect_named("lda", [&] { vpotrf(n.data(), A.data(), nullptr, info.data(), 3); });
    expect_named("A", [&] { vpotrf(n.data(), nullptr, lda.data(), info.data(), 3); });
    expect_named("info", [&] { vpotrf(n.data(), A.data(), lda.data(), nullptr, 3); });
    n[2] = -2;
    expect_named("n", [&] { vpotrf(n.data(), A.data(), lda.data(), info.data(), 3); });
    n[2] = 2;
    lda[0] = 2;
    expect_named("lda", [&] { vpotrf(n.data(), A.data(), lda.data(), info.data(), 3); });
    lda[0] = 3;
    lda[1] = 0;
    expect_named("lda", [&] { vpotrf(n.data(), A.data(), lda.data(), info.data(), 3); });
    lda[1] = 1;
    A[2] = nullptr;
    expect_named("A", [&] { vpotrf(n.data(), A.data(), lda.data(), info.data(), 3); });
    A[2] = a2.data();
    expect_named("nrhs", [&] {
        batched::vpotrs<double>(Uplo::upper, n.data(), -1, cA.data(), lda.data(), B.data(), ldb.data(), 3);
    });
    ldb[2] = 1;
    expect_named("ldb", [&] {
        batched::vpotrs<double>(Uplo::upper, n.data(), 2, cA.data(), lda.data(), B.data(), ldb.data(), 3);
    });
    ldb[2] = 2;
    B[0] = nullptr;
    expect_named("B", [&] {
        batched::vpotrs<double>(Uplo::upper, n.data(), 2, cA.data(), lda.data(), B.data(), ldb.data(), 3);
    });
    expect_named(
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

// ---- QR on the host path: vgeqrf against LAPACKE, vgels's residuals and infos ---------------

/// Shapes of a QR batch: m, n in [0, nmax] (wide ones included unless tall), 0 and 1 present.
void draw_shapes(int nmax, int count, bool tall, std::uint64_t seed, std::vector<int>& m, std::vector<int>& n) {
    std::mt19937_64 rng(seed);
    m.assign(count, 0);
    n.assign(count, 0);
    for (int b = 0; b < count; ++b) {
        n[b] = static_cast<int>(rng() % (nmax + 1));
        m[b] = tall ? n[b] + static_cast<int>(rng() % (nmax / 2 + 1)) : static_cast<int>(rng() % (nmax + 1));
    }
    if (count > 6) {
        m[1] = n[1] = 0;
        m[2] = 5, n[2] = 0;
        m[3] = tall ? 1 : 0, n[3] = tall ? 0 : 4;
        m[4] = n[4] = 1;
        m[5] = 1, n[5] = tall ? 1 : 7;
    }
}

TYPED_TEST(VBatchedHost, QrAgainstLapack) {
    using T = TypeParam;
    const int count = 90;
    std::vector<int> m, n;
    draw_shapes(70, count, false, this->seed(), m, n);
    std::vector<int> lda(count);
    std::vector<HostMatrix<T>> A;
    std::vector<std::vector<T>> tau(count);
    for (int b = 0; b < count; ++b) {
        lda[b] = std::max(1, m[b] + b % 3);
        A.push_back(random_matrix<T>(m[b], n[b], lda[b], this->seed() + 13ULL * b));
        tau[b].assign(std::max(1, std::min(m[b], n[b])), nan<T>());
    }
    auto F = A;
    std::vector<T*> pf, pt;
    for (int b = 0; b < count; ++b) {
        pf.push_back(F[b].ptr());
        pt.push_back(tau[b].data());
    }
    batched::vgeqrf<T>(m.data(), n.data(), pf.data(), lda.data(), pt.data(), count);
    openblas_set_num_threads(1);  // the reference rounds as the path's one-thread LAPACKE
    for (int b = 0; b < count; ++b) {
        auto R = A[b];
        std::vector<T> rtau(std::max(1, std::min(m[b], n[b])), nan<T>());
        if (m[b] > 0 && n[b] > 0) {
            ASSERT_EQ(lapacke_geqrf(m[b], n[b], R.ptr(), R.ld, rtau.data()), 0);
        }
        EXPECT_TRUE(equal_bytes(R.ptr(), F[b].ptr(), R.data.size() * sizeof(T))) << "matrix " << b;
        EXPECT_TRUE(equal_bytes(rtau.data(), tau[b].data(), rtau.size() * sizeof(T))) << "matrix " << b;
        if (m[b] >= n[b] && n[b] > 0) {
            ASSERT_PRED_FORMAT1(ResidualPasses, batched::residuals::geqrf(m[b], n[b], A[b].ptr(), A[b].ld, F[b].ptr(),
                                                                          F[b].ld, tau[b].data()))
                << "matrix " << b << " (" << m[b] << " x " << n[b] << ")";
        }
    }
}

// vgels on tall shapes (m >= n, 0 and 1 included): zero columns planted (R(k,k) = 0 exactly:
// info k, B untouched), every other matrix's least-squares residual below 30.
TYPED_TEST(VBatchedHost, LeastSquaresWithPlantedFailures) {
    using T = TypeParam;
    const int count = 80, nrhs = 3;
    std::vector<int> m, n;
    draw_shapes(60, count, true, this->seed(), m, n);
    std::vector<int> lda(count), ldb(count), expected(count, 0);
    std::vector<HostMatrix<T>> A, B;
    std::vector<std::vector<T>> tau(count);
    for (int b = 0; b < count; ++b) {
        if (b % 9 == 8) n[b] = std::max(n[b], 3), m[b] = std::max(m[b], n[b]);
        lda[b] = std::max(1, m[b] + b % 2);
        ldb[b] = std::max(1, m[b] + (b + 1) % 3);
        A.push_back(random_matrix<T>(m[b], n[b], lda[b], this->seed() + 17ULL * b));
        B.push_back(random_matrix<T>(m[b], nrhs, ldb[b], this->seed() + 19ULL * b + 1));
        tau[b].assign(std::max(1, n[b]), nan<T>());
        if (b % 9 == 8) {  // column k-1 zero: R(k-1, k-1) is exactly zero (the reflectors before it keep it zero)
            const int k = 1 + b % n[b];
            for (int i = 0; i < m[b]; ++i) A[b](i, k - 1) = T(0);
            expected[b] = k;
        }
    }
    auto F = A;
    auto X = B;
    std::vector<T*> pf, pt, px;
    for (int b = 0; b < count; ++b) {
        pf.push_back(F[b].ptr());
        pt.push_back(tau[b].data());
        px.push_back(X[b].ptr());
    }
    std::vector<int> info(count, -7);
    const int failed = batched::vgels<T>(m.data(), n.data(), nrhs, pf.data(), lda.data(), pt.data(), px.data(),
                                         ldb.data(), info.data(), count);
    EXPECT_EQ(failed, static_cast<int>(std::count_if(expected.begin(), expected.end(), [](int i) { return i != 0; })));
    EXPECT_EQ(info, expected);
    for (int b = 0; b < count; ++b) {
        EXPECT_EQ(non_nan_in_padding(X[b]), 0) << "matrix " << b;
        if (expected[b] != 0 || n[b] == 0) {
            EXPECT_TRUE(equal_bytes(X[b].ptr(), B[b].ptr(), B[b].data.size() * sizeof(T))) << "matrix " << b;
            continue;
        }
        ASSERT_PRED_FORMAT1(ResidualPasses, batched::residuals::least_squares(m[b], n[b], nrhs, A[b].ptr(), A[b].ld,
                                                                              X[b].ptr(), X[b].ld, B[b].ptr(), B[b].ld))
            << "matrix " << b << " (" << m[b] << " x " << n[b] << ")";
    }
}

TEST(VBatchedHostArguments, QrCheckedBeforeAnyWork) {
    std::vector<int> m{4, 0, 3}, n{3, 2, 3}, lda{4, 1, 3}, ldb{4, 1, 3};
    std::vector<double> a0(12, 1.0), a2(9, 1.0), b0(4, 2.0), b2(3, 2.0), t0(3, 5.0), t2(3, 5.0);
    std::vector<double*> A{a0.data(), nullptr, a2.data()}, B{b0.data(), nullptr, b2.data()},
        tau{t0.data(), nullptr, t2.data()};
    std::vector<int> info(3, -9);
    auto geqrf = [&] { batched::vgeqrf<double>(m.data(), n.data(), A.data(), lda.data(), tau.data(), 3); };
    auto gels = [&](int nrhs) {
        return batched::vgels<double>(m.data(), n.data(), nrhs, A.data(), lda.data(), tau.data(), B.data(), ldb.data(),
                                      info.data(), 3);
    };
    expect_named("count", [&] { batched::vgeqrf<double>(m.data(), n.data(), A.data(), lda.data(), tau.data(), -1); });
    expect_named("m", [&] { batched::vgeqrf<double>(nullptr, n.data(), A.data(), lda.data(), tau.data(), 3); });
    expect_named("tau", [&] { batched::vgeqrf<double>(m.data(), n.data(), A.data(), lda.data(), nullptr, 3); });
    expect_named("info", [&] {
        batched::vgels<double>(m.data(), n.data(), 1, A.data(), lda.data(), tau.data(), B.data(), ldb.data(), nullptr,
                               3);
    });
    expect_named("nrhs", [&] { gels(-1); });
    m[2] = -1;
    expect_named("m", geqrf);
    m[2] = 3;
    n[0] = -2;
    expect_named("n", geqrf);
    n[0] = 3;
    lda[2] = 2;
    expect_named("lda", geqrf);
    lda[2] = 3;
    tau[2] = nullptr;
    expect_named("tau", geqrf);
    tau[2] = t2.data();
    A[0] = nullptr;
    expect_named("A", geqrf);
    A[0] = a0.data();
    n[1] = 0;  // 0 x 2 is fine for geqrf, not for least squares
    m[0] = 2;  // 2 x 3: fine for geqrf (lda 4 >= 2), not for least squares
    expect_named("m", [&] { gels(1); });
    m[0] = 4;
    ldb[0] = 3;
    expect_named("ldb", [&] { gels(1); });
    ldb[0] = 4;
    B[2] = nullptr;
    expect_named("B", [&] { gels(1); });
    EXPECT_EQ(info, std::vector<int>(3, -9));
    EXPECT_EQ(a0, std::vector<double>(12, 1.0));
    EXPECT_EQ(b0, std::vector<double>(4, 2.0));
    EXPECT_EQ(t0, std::vector<double>(3, 5.0));
    // count 0 needs no arrays.
    batched::vgeqrf<double>(nullptr, nullptr, nullptr, nullptr, nullptr, 0);
}

// ---- slices of a variable-size batch: cut by flops -------------------------------------------

TEST(VSliceBounds, CutByFlopsNotCount) {
    std::mt19937_64 rng(fresh_seed());
    for (int round = 0; round < 200; ++round) {
        const int count = static_cast<int>(rng() % 300);
        const int slices = 1 + static_cast<int>(rng() % 40);
        std::vector<double> f(count);
        for (double& x : f) x = rng() % 7 == 0 ? 0.0 : std::pow(static_cast<double>(1 + rng() % 200), 3);
        const std::vector<int> bounds = batched::tasks::vslice_bounds(f, slices);
        if (count == 0) {
            EXPECT_EQ(bounds, std::vector<int>{0});  // no slice
            continue;
        }
        ASSERT_GE(bounds.size(), 2u);
        EXPECT_EQ(bounds.front(), 0);
        EXPECT_EQ(bounds.back(), count);
        EXPECT_LE(static_cast<int>(bounds.size()) - 1, std::min(slices, count));
        double total = 0, biggest = 0;
        for (double x : f) total += x, biggest = std::max(biggest, x);
        for (std::size_t s = 1; s < bounds.size(); ++s) {
            ASSERT_LT(bounds[s - 1], bounds[s]) << "empty slice " << s;
            double sum = 0;
            for (int b = bounds[s - 1]; b < bounds[s]; ++b) sum += f[b];
            // No slice exceeds its share by more than one matrix.
            if (total > 0) {
                EXPECT_LE(sum, total / std::min(slices, count) + biggest + 1e-6 * total);
            }
        }
    }
    // A skewed batch: one large matrix first gets a slice of its own, the small ones share the rest.
    std::vector<double> f(100, 1.0);
    f[0] = 1000.0;
    const auto b = batched::tasks::vslice_bounds(f, 4);
    ASSERT_GE(b.size(), 3u);
    EXPECT_EQ(b[1], 1);
}

// ---- the StarPU path on CPU workers: the host path's bits -------------------------------------

template <class T>
class VBatchedTasks : public RuntimeTest {
protected:
    void SetUp() override {
        RuntimeTest::SetUp();
        openblas_set_num_threads(1);
    }
};
TYPED_TEST_SUITE(VBatchedTasks, Precisions);

template <class T>
bool same_bytes(const std::vector<HostMatrix<T>>& a, const std::vector<HostMatrix<T>>& b) {
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].data.size() != b[i].data.size() ||
            !equal_bytes(a[i].data.data(), b[i].data.data(), a[i].data.size() * sizeof(T)))
            return false;
    return true;
}

TYPED_TEST(VBatchedTasks, SlicesGiveTheHostPathsResults) {
    using T = TypeParam;
    const codelets::ScopedImpl cpu_only(codelets::Impl::Cpu);  // CUDA workers: test_vbatched_cuda
    const int count = 61, nrhs = 2;
    auto n = draw_sizes(true, 90, count, this->seed(), false);
    n[0] = 0, n[1] = 1, n[2] = 90;
    std::vector<int> m, qn;
    draw_shapes(50, count, false, this->seed() + 5, m, qn);
    std::vector<int> tm = m, tn = qn;  // tall shapes for gels
    for (int b = 0; b < count; ++b) tm[b] = std::max(tm[b], tn[b]);
    std::vector<int> lda(count), ldq(count), ldt(count);
    for (int b = 0; b < count; ++b) {
        lda[b] = std::max(1, n[b] + b % 2);
        ldq[b] = std::max(1, m[b] + b % 3);
        ldt[b] = std::max(1, tm[b] + b % 2);
    }
    for (int slices : {0, 1, 3, count}) {
        for (auto schedule : {batched::Schedule::ssde, batched::Schedule::dsse}) {
            SCOPED_TRACE(::testing::Message() << "slices = " << slices);
            const batched::tasks::VTaskOptions opt{slices, schedule};
            // Cholesky (upper, failures planted) and its solve.
            std::vector<HostMatrix<T>> S, B;
            for (int b = 0; b < count; ++b) {
                S.push_back(b % 10 == 9 && n[b] > 1 ? spd_failing_at<T>(n[b], n[b] / 2 + 1, lda[b], this->seed() + b)
                                                    : random_spd<T>(n[b], lda[b], this->seed() + b));
                poison_strict_triangle(S[b], 'L');
                B.push_back(random_matrix<T>(n[b], nrhs, lda[b], this->seed() + 3ULL * b));
            }
            auto hS = S, hB = B;
            std::vector<int> info(count, -7), hinfo(count, -7);
            auto ps = pointers_of(S), phs = pointers_of(hS), pb = pointers_of(B), phb = pointers_of(hB);
            const int failed =
                batched::tasks::vpotrf<T>(Uplo::upper, n.data(), ps.data(), lda.data(), info.data(), count, opt);
            EXPECT_EQ(failed, batched::vpotrf<T>(Uplo::upper, n.data(), phs.data(), lda.data(), hinfo.data(), count));
            EXPECT_GT(failed, 0);
            EXPECT_EQ(info, hinfo);
            EXPECT_TRUE(same_bytes(S, hS));  // the lower triangle and the padding still NaN
            std::vector<int> ns = n;
            for (int b = 0; b < count; ++b)
                if (info[b] != 0) ns[b] = 0;
            std::vector<const T*> cs(ps.begin(), ps.end()), chs(phs.begin(), phs.end());
            batched::tasks::vpotrs<T>(Uplo::upper, ns.data(), nrhs, cs.data(), lda.data(), pb.data(), lda.data(), count,
                                      opt);
            batched::vpotrs<T>(Uplo::upper, ns.data(), nrhs, chs.data(), lda.data(), phb.data(), lda.data(), count);
            EXPECT_TRUE(same_bytes(B, hB));
            // LU with zero pivots planted, and its solve.
            std::vector<HostMatrix<T>> L, C;
            std::vector<std::vector<int>> piv(count), hpiv(count);
            std::vector<int*> pp, php;
            for (int b = 0; b < count; ++b) {
                L.push_back(b % 7 == 3 && n[b] > 0 ? lu_failing_at<T>(n[b], 1 + b % n[b], lda[b], this->seed() + b)
                                                   : random_matrix<T>(n[b], n[b], lda[b], this->seed() + b));
                C.push_back(random_matrix<T>(n[b], nrhs, lda[b], this->seed() + 5ULL * b));
                piv[b].assign(std::max(1, n[b]), -5);
                hpiv[b].assign(std::max(1, n[b]), -5);
                pp.push_back(piv[b].data());
                php.push_back(hpiv[b].data());
            }
            auto hL = L, hC = C;
            auto pl = pointers_of(L), phl = pointers_of(hL), pc = pointers_of(C), phc = pointers_of(hC);
            EXPECT_EQ(batched::tasks::vgetrf<T>(n.data(), pl.data(), lda.data(), pp.data(), info.data(), count, opt),
                      batched::vgetrf<T>(n.data(), phl.data(), lda.data(), php.data(), hinfo.data(), count));
            EXPECT_EQ(info, hinfo);
            EXPECT_EQ(piv, hpiv);
            EXPECT_TRUE(same_bytes(L, hL));
            std::vector<const T*> cl(pl.begin(), pl.end()), chl(phl.begin(), phl.end());
            std::vector<const int*> cp(pp.begin(), pp.end()), chp(php.begin(), php.end());
            batched::tasks::vgetrs<T>(n.data(), nrhs, cl.data(), lda.data(), cp.data(), pc.data(), lda.data(), count,
                                      opt);
            batched::vgetrs<T>(n.data(), nrhs, chl.data(), lda.data(), chp.data(), phc.data(), lda.data(), count);
            EXPECT_TRUE(same_bytes(C, hC));
            // QR of any shape, then least squares on tall ones with a zero column planted.
            std::vector<HostMatrix<T>> Q, G, D;
            std::vector<std::vector<T>> tau(count), htau(count), gtau(count), hgtau(count);
            std::vector<T*> pt, pht, pgt, phgt;
            for (int b = 0; b < count; ++b) {
                Q.push_back(random_matrix<T>(m[b], qn[b], ldq[b], this->seed() + 7ULL * b));
                G.push_back(random_matrix<T>(tm[b], tn[b], ldt[b], this->seed() + 11ULL * b));
                if (b % 5 == 2 && tn[b] > 0)
                    for (int i = 0; i < tm[b]; ++i) G[b](i, tn[b] - 1) = T(0);
                D.push_back(random_matrix<T>(tm[b], nrhs, ldt[b], this->seed() + 13ULL * b));
                tau[b].assign(std::max(1, std::min(m[b], qn[b])), nan<T>());
                htau[b] = tau[b];
                gtau[b].assign(std::max(1, tn[b]), nan<T>());
                hgtau[b] = gtau[b];
                pt.push_back(tau[b].data());
                pht.push_back(htau[b].data());
                pgt.push_back(gtau[b].data());
                phgt.push_back(hgtau[b].data());
            }
            auto hQ = Q, hG = G, hD = D;
            auto pq = pointers_of(Q), phq = pointers_of(hQ), pg = pointers_of(G), phg = pointers_of(hG),
                 pd = pointers_of(D), phd = pointers_of(hD);
            // QR: within a few rounding errors, not bitwise: OpenBLAS's level-2 kernels round
            // differently with the packed slices' alignment on some CPUs (the H100 host's).
            const double eps = ScalarTraits<T>::eps;
            batched::tasks::vgeqrf<T>(m.data(), qn.data(), pq.data(), ldq.data(), pt.data(), count, opt);
            batched::vgeqrf<T>(m.data(), qn.data(), phq.data(), ldq.data(), pht.data(), count);
            for (int b = 0; b < count; ++b) {
                const double tol = 50.0 * std::max(1, std::max(m[b], qn[b])) * eps * std::max(1.0, max_abs(hQ[b]));
                EXPECT_LE(max_abs_diff(Q[b], hQ[b]), tol) << "matrix " << b;
                EXPECT_EQ(non_nan_in_padding(Q[b]), 0) << "matrix " << b;
                for (std::size_t i = 0; i < tau[b].size(); ++i) {
                    if (i < static_cast<std::size_t>(std::min(m[b], qn[b]))) {
                        EXPECT_LE(std::abs(static_cast<double>(tau[b][i] - htau[b][i])), tol) << "matrix " << b;
                    } else {
                        EXPECT_TRUE(std::isnan(tau[b][i])) << "matrix " << b << ": tau past min(m, n) written";
                    }
                }
            }
            const int gf = batched::tasks::vgels<T>(tm.data(), tn.data(), nrhs, pg.data(), ldt.data(), pgt.data(),
                                                    pd.data(), ldt.data(), info.data(), count, opt);
            EXPECT_EQ(gf, batched::vgels<T>(tm.data(), tn.data(), nrhs, phg.data(), ldt.data(), phgt.data(), phd.data(),
                                            ldt.data(), hinfo.data(), count));
            EXPECT_GT(gf, 0);
            EXPECT_EQ(info, hinfo);
            for (int b = 0; b < count; ++b) {
                const double tol = 50.0 * std::max(1, tm[b]) * eps * std::max(1.0, max_abs(hG[b]));
                EXPECT_LE(max_abs_diff(G[b], hG[b]), tol) << "matrix " << b;
                if (info[b] != 0 || tn[b] == 0) {
                    EXPECT_TRUE(same_bytes(std::vector<HostMatrix<T>>{D[b]}, std::vector<HostMatrix<T>>{hD[b]}))
                        << "matrix " << b << ": B changed";
                    continue;
                }
                auto A0 = random_matrix<T>(tm[b], tn[b], ldt[b], this->seed() + 11ULL * b);
                auto B0 = random_matrix<T>(tm[b], nrhs, ldt[b], this->seed() + 13ULL * b);
                EXPECT_PRED_FORMAT1(ResidualPasses,
                                    batched::residuals::least_squares(tm[b], tn[b], nrhs, A0.ptr(), A0.ld, D[b].ptr(),
                                                                      D[b].ld, B0.ptr(), B0.ld))
                    << "matrix " << b;
            }
        }
    }
    // Arguments are checked before anything runs, as on the host path.
    std::vector<int> info(count, -7);
    std::vector<int> bad = n;
    bad[4] = -1;
    expect_named("A",
                 [&] { batched::tasks::vpotrf<T>(Uplo::lower, bad.data(), nullptr, lda.data(), info.data(), count); });
    EXPECT_EQ(info, std::vector<int>(count, -7));
}

// The pinned buffers the tasks API packs into are kept for the next call and freed when the
// Runtime stops.
class HostPool : public RuntimeTest {};

TEST_F(HostPool, KeepsBuffersForTheNextCallAndEmptiesAtShutdown) {
    host_pool::clear();
    ASSERT_EQ(host_pool::kept_bytes(), 0u);
    const std::size_t mib = std::size_t{1} << 20;
    void* a = host_pool::acquire(3 * mib);
    ASSERT_NE(a, nullptr);
    std::memset(a, 0x5a, 3 * mib);  // the whole request is usable
    host_pool::release(a);
    EXPECT_GE(host_pool::kept_bytes(), 3 * mib);
    // A request it covers, without being more than twice too large, gets the kept buffer back.
    void* b = host_pool::acquire(2 * mib + 1);
    EXPECT_EQ(b, a);
    EXPECT_EQ(host_pool::kept_bytes(), 0u);
    host_pool::release(b);
    // A larger request gets a new buffer and the kept one stays; a small one (sizes are rounded
    // up to 2 MiB) takes the kept 4 MiB buffer, so calls with tiny placeholder buffers do not
    // pile up new ones.
    void* c = host_pool::acquire(16 * mib);
    EXPECT_NE(c, a);
    EXPECT_GE(host_pool::kept_bytes(), 3 * mib);
    void* d = host_pool::acquire(1);
    EXPECT_EQ(d, a);
    void* e = host_pool::acquire(1);  // nothing kept is left that fits: a new 2 MiB buffer
    EXPECT_NE(e, a);
    EXPECT_NE(e, c);
    host_pool::release(c);
    host_pool::release(d);
    host_pool::release(e);
    host_pool::release(nullptr);  // nothing
    const std::size_t kept = host_pool::kept_bytes();
    EXPECT_GE(kept, 21 * mib);
    // A tiny request takes the 2 MiB buffer, not the 4 or 16 MiB ones.
    void* f = host_pool::acquire(100);
    EXPECT_EQ(f, e);
    host_pool::release(f);
    EXPECT_EQ(host_pool::kept_bytes(), kept);
    // A tasks call packs into kept buffers and gives them back.
    const std::vector<int> n = {5, 0, 9, 1};
    std::vector<std::vector<double>> A;
    std::vector<double*> pA;
    std::vector<int> info(n.size(), -1);
    for (int i = 0; i < 4; ++i) {
        A.emplace_back(static_cast<std::size_t>(std::max(1, n[i] * n[i])));
        matgen::spd(n[i], 40 + i, A.back().data(), std::max(1, n[i]));
    }
    for (auto& v : A) pA.push_back(v.data());
    const std::vector<int> lda = {5, 1, 9, 1};
    EXPECT_EQ(batched::tasks::vpotrf<double>(batched::Uplo::lower, n.data(), pA.data(), lda.data(), info.data(), 4), 0);
    EXPECT_EQ(info, std::vector<int>(4, 0));
    // Its five small buffers: the 2 and 4 MiB kept ones, three new 2 MiB ones; all given back.
    EXPECT_EQ(host_pool::kept_bytes(), kept + 3 * 2 * mib);
    shutdown_runtime();
    EXPECT_EQ(host_pool::kept_bytes(), 0u);
}

TEST(VBatchedTasksNoRuntime, RefusesWithoutARuntime) {
    std::vector<int> n{2}, ld{2}, info{-1};
    std::vector<double> a{4, 1, 1, 3};
    std::vector<double*> A{a.data()};
    EXPECT_THROW(batched::tasks::vpotrf<double>(Uplo::lower, n.data(), A.data(), ld.data(), info.data(), 1),
                 RuntimeError);
    EXPECT_EQ(info[0], -1);
}

// ---- the command line: --sizes through the StarPU path ---------------------------------------

TEST(VBatchedCli, EveryOperationBothSchedules) {
    for (const std::string op : {"potrf", "potrs", "getrf", "getrs", "geqrf", "gels"})
        for (const std::string schedule : {"ssde", "dsse"}) {
            std::vector<std::string> args = {"batched",    "--op",   op,         "--sizes", "skewed:130", "--count",
                                             "120",        "--nrhs", "2",        "--check", "--format",   "json",
                                             "--schedule", schedule, "--slices", "3"};
            if (op == "gels" || op == "geqrf") args.insert(args.end(), {"--aspect", "1.5"});
            const auto r = cli::run(args, {"STARPU_NCPU=2", "STARPU_NCUDA=0"});
            ASSERT_EQ(r.code, 0) << cli::command_line(args) << "\n" << r.describe();
            int rows = 0;
            std::istringstream lines(r.out);
            for (std::string line; std::getline(lines, line);) {
                const auto j = nlohmann::json::parse(line);
                if (j.value("record", "") == "config") {
                    EXPECT_EQ(j.at("schedule"), schedule);
                }
                if (j.value("record", "") != "result") continue;
                ++rows;
                EXPECT_EQ(j.at("count"), 120);
                EXPECT_EQ(j.at("failed"), 0);
                EXPECT_EQ(j.at("slices"), 3);
                EXPECT_LT(j.at("residual").get<double>(), 30.0);
                EXPECT_EQ(j.at("nmax"), 130);
            }
            EXPECT_EQ(rows, 1) << r.out;
        }
    // Usage errors: exit 2 naming the option, StarPU never started.
    const std::vector<std::vector<std::string>> bad = {
        {"--op", "potrf", "--sizes", "uniform:10", "--schedule", "fast"},
        {"--op", "potrf", "--count", "5", "-n", "4", "--schedule", "ssde"},
        {"--op", "gels", "--sizes", "uniform:10", "--aspect", "0.5"},
        {"--op", "geqrf", "--count", "5", "-n", "4", "--aspect", "2"},
    };
    for (const auto& extra : bad) {
        std::vector<std::string> args = {"batched"};
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = cli::run(args);
        EXPECT_EQ(r.code, 2) << cli::command_line(args) << "\n" << r.describe();
        EXPECT_TRUE(r.err.find("--schedule") != std::string::npos || r.err.find("--aspect") != std::string::npos)
            << cli::command_line(args) << "\n"
            << r.err;
        EXPECT_TRUE(r.home_untouched);
    }
}

}  // namespace
}  // namespace starfact::test
