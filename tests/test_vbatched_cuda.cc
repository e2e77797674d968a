// The variable-size batched CUDA Cholesky (batched::cuda::vpotrf, vpotrs) and LU
// (vgetrf, vgetrs: the same kinds of batches, zero pivots planted at columns 1, n/2+1, n,
// pivots and factors against LAPACKE's, a NaN in one matrix affecting only it) against
// LAPACKE on the same matrices: mixed orders (0 and 1 included; uniform in [0, NMAX] and the
// paper's skewed distribution), NMAX 32..512, both schedules, both triangles, float and double,
// lda[b] > n[b]. Every info exact (planted failures at count/4, count/2, count-1; a NaN in one
// matrix), every factor's residual below 30 and close to LAPACKE's, the other triangle and the
// padding still NaN afterwards; SSDE and DSSE bitwise equal; the solves' backward error below 30;
// the GPU API's argument checks. Every test skips, visibly, without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "batched/cuda/vbatched_kernels.hpp"
#include "batched/residuals.hpp"
#include "batched/vbatched.hpp"
#include "codelets/codelets.hpp"
#include "common/blas.hpp"
#include "common/error.hpp"
#include "cuda_test_support.hpp"
#include "test_support.hpp"
#include "vbatched_cuda_support.hpp"
#include "vbatched_lu_support.hpp"
#include "vbatched_test_support.hpp"

namespace starfact::test {
namespace {

namespace bc = starfact::batched::cuda;

bc::Uplo to_uplo(char uplo) { return uplo == 'L' ? bc::Uplo::lower : bc::Uplo::upper; }

template <class T>
class VBatchedCuda : public VBatchedCudaTest {
protected:
    VBatchedCuda() : VBatchedCudaTest("variable-size batched Cholesky") {}

    /// Factors c on the GPU with schedule s and checks every matrix; returns the factors.
    std::vector<HostMatrix<T>> factor_and_check(const SpdCase<T>& c, bc::Schedule s) {
        const int count = static_cast<int>(c.A.size());
        int nmax = 0;
        for (const auto& A : c.A) nmax = std::max(nmax, A.n);
        EXPECT_EQ(bc::vpotrf_workspace<T>(nmax, count), 0u);
        auto [F, got] = this->template run_vpotrf<T>(c, s, nmax);
        const double eps = ScalarTraits<T>::eps;
        BatchReport<T> report(cat(schedule_name(s), ", uplo ", c.uplo, ", nmax ", nmax, ", count ", count, ", "), c.A,
                              true);
        for (int b = 0; b < count; ++b) {
            const auto& A = c.A[b];
            const int n = A.n;
            const auto v = check_spd_matrix(c, F[b], got[b], b);
            if (report_all(v.failures, b, report)) break;
            if (!v.compare) continue;
            if (c.expected[b] != 0 && !c.nan[b]) {
                HostMatrix<T> L = A;
                const int linfo = blas::potrf(c.uplo, n, L.ptr(), L.ld);
                if (linfo != c.expected[b] && report(b, "LAPACKE's info differs from the planted minor")) break;
            }
            const int k = c.expected[b] == 0 ? n : c.expected[b] - 1;
            if (k == 0) continue;
            const double r = potrf_residual(c.uplo, leading(A, k), leading(F[b], k));
            if (!(checks::passes(r) && r >= 0)) {
                std::ostringstream m;
                m << "residual of the leading " << k << " x " << k << " factor " << r;
                if (report(b, m.str())) break;
            }
            if (c.expected[b] == 0) {
                HostMatrix<T> L = A;
                if (blas::potrf(c.uplo, n, L.ptr(), L.ld) != 0 && report(b, "LAPACKE refused a matrix we factored"))
                    break;
                const double diff = max_abs_diff(F[b], L, c.uplo);
                const double tol = 100.0 * n * eps * std::max(1.0, max_abs(L, c.uplo));
                if (!(diff <= tol)) {
                    std::ostringstream m;
                    m << "max |L - L_lapack| = " << diff << " > " << tol;
                    if (report(b, m.str())) break;
                }
            }
        }
        return F;
    }
};

TYPED_TEST_SUITE(VBatchedCuda, Precisions);

// The schedule arithmetic: DSSE ends every matrix at the last step, SSDE starts them all at 0.
TEST(VBatchedSchedule, StartsAndEnds) {
    for (int nmax : {0, 1, 31, 32, 33, 64, 100, 512})
        for (int n = 0; n <= nmax; ++n) {
            EXPECT_EQ(bc::vfirst_step(bc::Schedule::ssde, nmax, n), 0);
            if (n > 0) {
                EXPECT_EQ(bc::vfirst_step(bc::Schedule::dsse, nmax, n) + bc::vsteps(n), bc::vsteps(nmax))
                    << "nmax " << nmax << ", n " << n;
                EXPECT_GE(bc::vfirst_step(bc::Schedule::dsse, nmax, n), 0);
            }
        }
}

// Both distributions, NMAX 32..512, both schedules, both triangles, planted failures; the two
// schedules must give bitwise the same factors (the same operations on each matrix).
TYPED_TEST(VBatchedCuda, MixedSizesAgainstLapack) {
    using T = TypeParam;
    struct Shape {
        int nmax, count;
    };
    for (bool skewed : {false, true})
        for (Shape sh : {Shape{32, 300}, Shape{64, 200}, Shape{128, 100}, Shape{512, skewed ? 200 : 40}})
            for (char uplo : {'L', 'U'}) {
                SCOPED_TRACE(::testing::Message() << (skewed ? "skewed" : "uniform") << ", nmax " << sh.nmax
                                                  << ", count " << sh.count << ", uplo " << uplo);
                const std::uint64_t s = this->seed() + 1009ULL * sh.nmax + (skewed ? 7 : 0) + uplo;
                const auto c = make_spd_case<T>(uplo, draw_sizes(skewed, sh.nmax, sh.count, s), true, s);
                const auto F1 = this->factor_and_check(c, bc::Schedule::ssde);
                const auto F2 = this->factor_and_check(c, bc::Schedule::dsse);
                if (this->HasFailure()) return;
                for (int b = 0; b < sh.count; ++b) {
                    if (c.expected[b] != 0) continue;  // past a failure the factor is unspecified
                    ASSERT_EQ(std::memcmp(F1[b].ptr(), F2[b].ptr(), F1[b].data.size() * sizeof(T)), 0)
                        << "matrix " << b << " (n " << c.A[b].n << "): SSDE and DSSE factors differ";
                }
            }
}

// Every order 0..70 once (block edges 31/32/33, 63/64/65), a large one at 200; counts 1 and 7.
TYPED_TEST(VBatchedCuda, EveryOrderAndSmallCounts) {
    using T = TypeParam;
    std::vector<int> all;
    for (int n = 0; n <= 70; ++n) all.push_back(n);
    all.push_back(200);
    std::shuffle(all.begin(), all.end(), std::mt19937_64(this->seed()));
    for (auto s : {bc::Schedule::ssde, bc::Schedule::dsse})
        for (char uplo : {'L', 'U'}) {
            this->factor_and_check(make_spd_case<T>(uplo, all, true, this->seed() + uplo), s);
            this->factor_and_check(make_spd_case<T>(uplo, {37}, false, this->seed() + 1), s);
            this->factor_and_check(make_spd_case<T>(uplo, {45}, true, this->seed() + 2), s);  // the single one fails
            this->factor_and_check(make_spd_case<T>(uplo, {3, 0, 1, 64, 65, 2, 96}, true, this->seed() + 3), s);
            // 10000 matrices (NMAX 96, failures planted): many blocks per SM at every step.
            this->factor_and_check(
                make_spd_case<T>(uplo, draw_sizes(false, 96, 10000, this->seed() + 6), true, this->seed() + 6), s);
            if (this->HasFailure()) return;
        }
}

// All orders 0: info 0 everywhere; count 0: nothing, no arrays needed.
TYPED_TEST(VBatchedCuda, EmptyBatches) {
    using T = TypeParam;
    for (auto s : {bc::Schedule::ssde, bc::Schedule::dsse}) {
        this->factor_and_check(make_spd_case<T>('L', std::vector<int>(5, 0), false, this->seed()), s);
        bc::vpotrf<T>(this->launch(), bc::Uplo::upper, s, 8, nullptr, nullptr, nullptr, nullptr, 0);
    }
    bc::vpotrs<T>(this->launch(), bc::Uplo::upper, 8, nullptr, 3, nullptr, nullptr, nullptr, nullptr, 0);
    ASSERT_TRUE(this->sync());
    EXPECT_TRUE(cuda_ok(cudaGetLastError()));
}

// A NaN in one matrix: its info is LAPACK's (dpotf2's test), the others are unaffected.
TYPED_TEST(VBatchedCuda, NanInOneMatrix) {
    using T = TypeParam;
    std::mt19937_64 rng(this->seed());
    for (char uplo : {'L', 'U'})
        for (int nbad : {1, 8, 32, 33, 100, 256}) {
            SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", n " << nbad);
            auto sizes = draw_sizes(false, 256, 9, this->seed() + nbad);
            sizes[4] = nbad;
            auto c = make_spd_case<T>(uplo, sizes, false, this->seed() + 3ULL * nbad);
            const int i = static_cast<int>(rng() % nbad), j = static_cast<int>(rng() % (i + 1));
            plant_nan(c.A[4], uplo, i, j);
            c.expected[4] = reference_potrf_info(uplo, c.A[4]);
            c.nan[4] = true;
            ASSERT_GT(c.expected[4], 0);
            this->factor_and_check(c, bc::Schedule::dsse);
            this->factor_and_check(c, bc::Schedule::ssde);
            if (this->HasFailure()) return;
        }
}

// vpotrs from LAPACKE's factors on mixed orders: backward error below 30, X close to LAPACKE's,
// the factors and B's padding untouched.
TYPED_TEST(VBatchedCuda, SolvesAgainstLapack) {
    using T = TypeParam;
    const double eps = ScalarTraits<T>::eps;
    for (char uplo : {'L', 'U'})
        for (int nmax : {20, 64, 300})
            for (int nrhs : {1, 3, 7, 16, 37}) {
                SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", nmax " << nmax << ", nrhs " << nrhs);
                const std::uint64_t s = this->seed() + 100003ULL * nmax + nrhs;
                const auto n = draw_sizes(false, nmax, 30, s);
                std::vector<HostMatrix<T>> A, F, B, X;
                for (int b = 0; b < 30; ++b) {
                    A.push_back(random_spd<T>(n[b], n[b] + 1 + b % 2, s + b));
                    HostMatrix<T> f = A.back();
                    poison_strict_triangle(f, other(uplo));
                    ASSERT_EQ(blas::potrf(uplo, n[b], f.ptr(), f.ld), 0);
                    F.push_back(f);
                    HostMatrix<T> rhs = random_matrix<T>(n[b], nrhs, n[b] + 2 - b % 2, s + 5 * b + 1);
                    B.push_back(rhs);
                    if (n[b] > 0) {
                        ASSERT_EQ(blas::potrs(uplo, n[b], nrhs, f.ptr(), f.ld, rhs.ptr(), rhs.ld), 0);
                    }
                    X.push_back(rhs);
                }
                DeviceVBatch<T> dA(F), dB(B);
                EXPECT_EQ(bc::vpotrs_workspace<T>(nmax, nrhs, 30), 0u);
                bc::vpotrs<T>(this->launch(), to_uplo(uplo), nmax, dA.dn.get(), nrhs,
                              reinterpret_cast<const T* const*>(dA.ptrs.get()), dA.dld.get(), dB.ptrs.get(),
                              dB.dld.get(), 30);
                ASSERT_TRUE(this->sync());
                const auto Fafter = dA.download(F);
                const auto Xgpu = dB.download(B);
                for (int b = 0; b < 30; ++b) {
                    ASSERT_EQ(std::memcmp(Fafter[b].ptr(), F[b].ptr(), F[b].data.size() * sizeof(T)), 0)
                        << "matrix " << b << ": the factor's storage changed";
                    ASSERT_EQ(non_nan_in_padding(Xgpu[b]), 0) << "matrix " << b << ": B's padding was written";
                    if (n[b] == 0) continue;
                    ASSERT_PRED_FORMAT1(ResidualPasses, solve_residual(A[b], Xgpu[b], B[b])) << "matrix " << b;
                    const double diff = max_abs_diff(Xgpu[b], X[b]);
                    const double tol = 100.0 * n[b] * eps * std::max(1.0, max_abs(X[b]));
                    ASSERT_LE(diff, tol) << "matrix " << b << " (n " << n[b] << "): max |X - X_lapack|";
                }
            }
}

// The public GPU API (Context) against the host path on the same matrices, factor then solve.
TYPED_TEST(VBatchedCuda, ApiAgainstHostPath) {
    using T = TypeParam;
    const int count = 60, nrhs = 5;
    for (auto sched : {batched::Schedule::ssde, batched::Schedule::dsse})
        for (auto uplo : {batched::Uplo::lower, batched::Uplo::upper}) {
            const char u = uplo == batched::Uplo::lower ? 'L' : 'U';
            const std::uint64_t s = this->seed() + (u == 'L' ? 0 : 99) + (sched == batched::Schedule::dsse ? 5 : 0);
            const auto c = make_spd_case<T>(u, draw_sizes(true, 300, count, s), true, s);
            std::vector<HostMatrix<T>> B;
            for (int b = 0; b < count; ++b) B.push_back(random_matrix<T>(c.A[b].n, nrhs, c.A[b].n + 1, s + 77 + b));
            DeviceVBatch<T> dA(c.A), dB(B);
            DeviceBuffer<int> dinfo(count);
            batched::Context ctx(this->stream_);
            batched::vpotrf<T>(ctx, uplo, sched, dA.sizes(), dA.ptrs.get(), dinfo.get(), count);
            batched::vpotrs<T>(ctx, uplo, dA.sizes(), nrhs, reinterpret_cast<const T* const*>(dA.ptrs.get()),
                               dB.sizes(), dB.ptrs.get(), count);
            ASSERT_TRUE(this->sync());
            const auto gpu_info = download_ints(dinfo);
            const auto Xg = dB.download(B);
            // The host path on the same matrices.
            auto HA = c.A;
            auto HB = B;
            std::vector<T*> pa, pb;
            std::vector<int> n, lda, ldb, info(count, -1);
            for (int b = 0; b < count; ++b) {
                pa.push_back(HA[b].ptr());
                pb.push_back(HB[b].ptr());
                n.push_back(HA[b].n);
                lda.push_back(HA[b].ld);
                ldb.push_back(HB[b].ld);
            }
            const int failed = batched::vpotrf<T>(uplo, n.data(), pa.data(), lda.data(), info.data(), count);
            EXPECT_EQ(failed, 3);
            EXPECT_EQ(gpu_info, info);
            EXPECT_EQ(info, c.expected);
            for (int b = 0; b < count; ++b) {
                if (info[b] != 0 || n[b] == 0) continue;
                HB[b] = B[b];
                ASSERT_EQ(blas::potrs(u, n[b], nrhs, HA[b].ptr(), HA[b].ld, HB[b].ptr(), HB[b].ld), 0);
                ASSERT_PRED_FORMAT1(ResidualPasses, solve_residual(symmetric(c.A[b], u), Xg[b], B[b]))
                    << "matrix " << b;
                const double tol = 100.0 * n[b] * ScalarTraits<T>::eps * std::max(1.0, max_abs(HB[b]));
                ASSERT_LE(max_abs_diff(Xg[b], HB[b]), tol) << "matrix " << b;
            }
        }
}

// The GPU API's checks: each bad argument named, before anything is enqueued (data untouched).
TYPED_TEST(VBatchedCuda, ApiArgumentErrors) {
    using T = TypeParam;
    const auto c = make_spd_case<T>('L', {4, 0, 9}, false, this->seed());
    DeviceVBatch<T> d(c.A);
    DeviceBuffer<int> dinfo(3);
    ASSERT_TRUE(cuda_ok(cudaMemset(dinfo.get(), 0x5a, 3 * sizeof(int))));
    batched::Context ctx(this->stream_);
    auto vpotrf_named = [&](const batched::VSizes& s, T* const* A, int* info, int count, const std::string& arg) {
        expect_named(
            arg, [&] { batched::vpotrf<T>(ctx, batched::Uplo::lower, batched::Schedule::dsse, s, A, info, count); });
    };
    std::vector<int> n = d.n, lda = d.ld;
    batched::VSizes s{n.data(), lda.data(), d.dn.get(), d.dld.get()};
    vpotrf_named(s, d.ptrs.get(), dinfo.get(), -1, "count");
    n[2] = -1;
    vpotrf_named(s, d.ptrs.get(), dinfo.get(), 3, "n");
    n[2] = 9;
    lda[0] = 3;
    vpotrf_named(s, d.ptrs.get(), dinfo.get(), 3, "lda");
    lda[0] = 4;
    lda[1] = 0;  // n = 0 still needs lda >= 1
    vpotrf_named(s, d.ptrs.get(), dinfo.get(), 3, "lda");
    lda[1] = 1;
    vpotrf_named(s, nullptr, dinfo.get(), 3, "A");
    vpotrf_named(s, d.ptrs.get(), nullptr, 3, "info");
    vpotrf_named({nullptr, lda.data(), d.dn.get(), d.dld.get()}, d.ptrs.get(), dinfo.get(), 3, "n");
    vpotrf_named({n.data(), lda.data(), nullptr, d.dld.get()}, d.ptrs.get(), dinfo.get(), 3, "device_n");
    vpotrf_named({n.data(), lda.data(), d.dn.get(), nullptr}, d.ptrs.get(), dinfo.get(), 3, "device_lda");
    ASSERT_TRUE(this->sync());
    EXPECT_EQ(download_ints(dinfo), std::vector<int>(3, 0x5a5a5a5a)) << "info was written";
    const auto F = d.download(c.A);
    for (int b = 0; b < 3; ++b)
        EXPECT_EQ(std::memcmp(F[b].ptr(), c.A[b].ptr(), c.A[b].data.size() * sizeof(T)), 0) << "matrix " << b;
}

// ---- LU (vgetrf, vgetrs) ---------------------------------------------------------------------

template <class T>
class VBatchedLuCuda : public VBatchedCudaTest {
protected:
    VBatchedLuCuda() : VBatchedCudaTest("variable-size batched LU") {}

    /// Factors c on the GPU with schedule s; checks every matrix against LAPACKE on a copy:
    /// info exact, pivots in range and equal (or departing first at a near tie, rounded the other
    /// way: pivot_difference), then the factor close; residual below 30; padding untouched.
    LuResult<T> factor_and_check(const LuCase<T>& c, bc::Schedule s) {
        const int count = static_cast<int>(c.A.size());
        int nmax = 0;
        for (const auto& A : c.A) nmax = std::max(nmax, A.n);
        LuResult<T> r = this->run_vgetrf(c.A, s);
        if (count == 0) return r;
        const double eps = ScalarTraits<T>::eps;
        BatchReport<T> report(cat(schedule_name(s), ", nmax ", nmax, ", count ", count, ", "), c.A, true);
        for (int b = 0; b < count; ++b) {
            const int nb = c.A[b].n;
            const auto v = check_lu_matrix(c, r, b, false);
            if (report_all(v.failures, b, report)) break;
            if (!v.compare) continue;
            const auto& lpiv = v.lpiv;
            const auto& L = v.L;
            if (nb > 0 && !std::equal(lpiv.begin(), lpiv.begin() + nb, r.ipiv[b].begin())) {
                const std::string why = pivot_difference(L, lpiv, r.ipiv[b].data(), nb);
                if (!why.empty() && report(b, why)) break;
                continue;  // a near tie: the factors part ways from there on (the residual is checked)
            }
            const double diff = max_abs_diff(r.F[b], L);
            double tol = 100.0 * std::max(nb, 1) * eps * std::max(1.0, max_abs(L));
            if (!(diff <= tol)) {
                // LAPACK's recursive getrf2 rounds in another order than our kernels, and the
                // factors part by as much as A's conditioning allows (in float, 1.1 times
                // 100 n eps on one matrix of order 31 among 10000). Allowed up to kappa_1(A) / n
                // times the tolerance, at most 100 times.
                tol *= std::clamp(condition_1(c.A[b], L) / std::max(nb, 1), 1.0, 100.0);
            }
            if (!(diff <= tol)) {
                std::ostringstream m;
                m << "max |F - F_lapack| = " << diff << " > " << tol;
                if (report(b, m.str())) break;
            }
        }
        return r;
    }
};

TYPED_TEST_SUITE(VBatchedLuCuda, Precisions);

// Both distributions, NMAX 32..512, both schedules, planted zero pivots; the two schedules give
// bitwise the same factors and pivots (the same operations on each matrix).
TYPED_TEST(VBatchedLuCuda, MixedSizesAgainstLapack) {
    using T = TypeParam;
    struct Shape {
        int nmax, count;
    };
    for (bool skewed : {false, true})
        for (Shape sh : {Shape{32, 300}, Shape{64, 200}, Shape{128, 100}, Shape{512, skewed ? 200 : 40}}) {
            SCOPED_TRACE(::testing::Message()
                         << (skewed ? "skewed" : "uniform") << ", nmax " << sh.nmax << ", count " << sh.count);
            const std::uint64_t s = this->seed() + 1009ULL * sh.nmax + (skewed ? 7 : 0);
            const auto c = make_lu_case<T>(draw_sizes(skewed, sh.nmax, sh.count, s), true, s);
            const auto r1 = this->factor_and_check(c, bc::Schedule::ssde);
            const auto r2 = this->factor_and_check(c, bc::Schedule::dsse);
            if (this->HasFailure()) return;
            ASSERT_EQ(r1.info, r2.info);
            for (int b = 0; b < sh.count; ++b) {
                ASSERT_EQ(r1.ipiv[b], r2.ipiv[b]) << "matrix " << b << ": SSDE and DSSE pivots differ";
                ASSERT_EQ(std::memcmp(r1.F[b].ptr(), r2.F[b].ptr(), r1.F[b].data.size() * sizeof(T)), 0)
                    << "matrix " << b << " (n " << c.A[b].n << "): SSDE and DSSE factors differ";
            }
        }
}

// Every order 0..70 once (block edges 31/32/33, 63/64/65), a large one at 200; counts 1 and 7;
// all orders 0; count 0; orders past 512.
TYPED_TEST(VBatchedLuCuda, EveryOrderAndSmallCounts) {
    using T = TypeParam;
    std::vector<int> all;
    for (int n = 0; n <= 70; ++n) all.push_back(n);
    all.push_back(200);
    std::shuffle(all.begin(), all.end(), std::mt19937_64(this->seed()));
    for (auto s : {bc::Schedule::ssde, bc::Schedule::dsse}) {
        this->factor_and_check(make_lu_case<T>(all, true, this->seed()), s);
        this->factor_and_check(make_lu_case<T>({37}, false, this->seed() + 1), s);
        this->factor_and_check(make_lu_case<T>({45}, true, this->seed() + 2), s);  // the single one is singular
        this->factor_and_check(make_lu_case<T>({3, 0, 1, 64, 65, 2, 96}, true, this->seed() + 3), s);
        // Panels taller than the register panel's 512 rows: the global-memory panel kernel.
        this->factor_and_check(make_lu_case<T>({600, 40, 513, 0, 530}, true, this->seed() + 5), s);
        this->factor_and_check(make_lu_case<T>(std::vector<int>(5, 0), false, this->seed() + 4), s);
        // 10000 matrices (NMAX 96, singular ones planted): many blocks per SM at every step.
        this->factor_and_check(make_lu_case<T>(draw_sizes(false, 96, 10000, this->seed() + 6), true, this->seed() + 6),
                               s);
        bc::vgetrf<T>(this->launch(), s, 8, nullptr, nullptr, nullptr, nullptr, nullptr, 0);
        if (this->HasFailure()) return;
    }
    bc::vgetrs<T>(this->launch(), 8, nullptr, 3, nullptr, nullptr, nullptr, nullptr, nullptr, 0);
    ASSERT_TRUE(this->sync());
}

/// ||P A x - L (U x)||_1 / (n ||A||_1 ||x||_1 eps) for x uniform in [-1, 1): a residual of the
/// factor F of A (pivots ipiv, 1-based) in O(n^2), no larger than the matrix residual
/// ||PA - LU||_1 / (n ||A||_1 eps).
template <class T>
double lu_vector_residual(const HostMatrix<T>& A, const HostMatrix<T>& F, const std::vector<int>& ipiv,
                          std::uint64_t seed) {
    const int n = A.n;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<double> x(n), ax(n, 0.0), ux(n, 0.0), lux(n, 0.0);
    for (double& v : x) v = u(rng);
    double anorm = 0.0, xnorm = 0.0;
    for (int j = 0; j < n; ++j) {
        double col = 0.0;
        for (int i = 0; i < n; ++i) {
            ax[i] += static_cast<double>(A(i, j)) * x[j];
            col += std::abs(static_cast<double>(A(i, j)));
            if (i <= j) ux[i] += static_cast<double>(F(i, j)) * x[j];
        }
        anorm = std::max(anorm, col);
        xnorm += std::abs(x[j]);
    }
    for (int j = 0; j < n; ++j) {
        lux[j] += ux[j];
        for (int i = j + 1; i < n; ++i) lux[i] += static_cast<double>(F(i, j)) * ux[j];
    }
    for (int i = 0; i < n; ++i) std::swap(ax[i], ax[ipiv[i] - 1]);
    double rnorm = 0.0;
    for (int i = 0; i < n; ++i) rnorm += std::abs(ax[i] - lux[i]);
    return rnorm / (n * anorm * xnorm * ScalarTraits<T>::eps);
}

// An order so large that the interchanges left of each panel cannot wait for the end (the final
// kernel's shared memory, 2 n ints and 8 columns of n, does not fit): they are applied at every
// step. The large matrix: info 0, pivots in range, the vector residual below 30; the small ones
// of the batch as everywhere; SSDE and DSSE bitwise equal.
TYPED_TEST(VBatchedLuCuda, HugeOrderInterchangesLeftStepByStep) {
    using T = TypeParam;
    int device = 0, optin = 0;
    ASSERT_TRUE(cuda_ok(cudaGetDevice(&device)));
    ASSERT_TRUE(cuda_ok(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device)));
    const int big = optin / static_cast<int>(8 * sizeof(T)) + 33;  // 8 columns of it alone pass the limit
    SCOPED_TRACE(::testing::Message() << "order " << big << " (shared memory per block up to " << optin << " bytes)");
    const std::vector<int> sizes{70, big, 33, 0, 1};
    const auto c = make_lu_case<T>(sizes, false, this->seed());
    const auto r1 = this->run_vgetrf(c.A, bc::Schedule::ssde);
    const auto r2 = this->run_vgetrf(c.A, bc::Schedule::dsse);
    for (const auto* r : {&r1, &r2}) {
        for (int b : {0, 2, 3, 4}) {  // the large one apart, below (check_lu_matrix's residual is O(n^3))
            const auto v = check_lu_matrix(c, *r, b, false);
            EXPECT_TRUE(v.failures.empty()) << "matrix " << b << ": " << (v.failures.empty() ? "" : v.failures[0]);
        }
        EXPECT_EQ(r->info[1], 0);
        bool in_range = true;
        for (int i = 0; i < big; ++i) in_range = in_range && r->ipiv[1][i] >= i + 1 && r->ipiv[1][i] <= big;
        ASSERT_TRUE(in_range) << "a pivot of the large matrix out of range";
        EXPECT_EQ(non_nan_in_padding(r->F[1]), 0) << "the large matrix's padding was written";
        EXPECT_PRED_FORMAT1(ResidualPasses, lu_vector_residual(c.A[1], r->F[1], r->ipiv[1], this->seed() + 1));
    }
    EXPECT_EQ(r1.ipiv, r2.ipiv);
    for (int b = 0; b < 5; ++b)
        EXPECT_EQ(std::memcmp(r1.F[b].ptr(), r2.F[b].ptr(), r1.F[b].data.size() * sizeof(T)), 0)
            << "matrix " << b << ": SSDE and DSSE factors differ";
}

// A NaN in one matrix: no hang, its pivots in range and its info in [0, n]; every other matrix
// exact (info, pivots, residual).
TYPED_TEST(VBatchedLuCuda, NanInOneMatrix) {
    using T = TypeParam;
    std::mt19937_64 rng(this->seed());
    for (int nbad : {1, 8, 32, 33, 100, 256}) {
        SCOPED_TRACE(::testing::Message() << "n " << nbad);
        auto sizes = draw_sizes(false, 256, 9, this->seed() + nbad);
        sizes[4] = nbad;
        auto c = make_lu_case<T>(sizes, false, this->seed() + 3ULL * nbad);
        c.A[4](static_cast<int>(rng() % nbad), static_cast<int>(rng() % nbad)) = nan<T>();
        c.nan_at = 4;
        this->factor_and_check(c, bc::Schedule::dsse);
        this->factor_and_check(c, bc::Schedule::ssde);
        if (this->HasFailure()) return;
    }
}

// vgetrs from LAPACKE's factors on mixed orders: backward error below 30, X close to LAPACKE's
// getrs, the factors, the pivots and B's padding untouched.
TYPED_TEST(VBatchedLuCuda, SolvesAgainstLapack) {
    using T = TypeParam;
    const double eps = ScalarTraits<T>::eps;
    for (int nmax : {20, 64, 300})
        for (int nrhs : {1, 3, 7, 16, 37}) {
            SCOPED_TRACE(::testing::Message() << "nmax " << nmax << ", nrhs " << nrhs);
            const std::uint64_t s = this->seed() + 100003ULL * nmax + nrhs;
            const auto n = draw_sizes(false, nmax, 30, s);
            std::vector<HostMatrix<T>> A, F, B, X;
            std::vector<std::vector<int>> piv;
            for (int b = 0; b < 30; ++b) {
                A.push_back(random_matrix<T>(n[b], n[b], n[b] + 1 + b % 2, s + b));
                HostMatrix<T> f = A.back();
                std::vector<int> p(std::max(n[b], 1), 0);
                ASSERT_EQ(n[b] == 0 ? 0 : blas::getrf(n[b], n[b], f.ptr(), f.ld, p.data()), 0);
                F.push_back(f);
                piv.push_back(p);
                HostMatrix<T> rhs = random_matrix<T>(n[b], nrhs, n[b] + 2 - b % 2, s + 5 * b + 1);
                B.push_back(rhs);
                if (n[b] > 0) {
                    ASSERT_EQ(blas::getrs('N', n[b], nrhs, f.ptr(), f.ld, p.data(), rhs.ptr(), rhs.ld), 0);
                }
                X.push_back(rhs);
            }
            DeviceVBatch<T> dA(F), dB(B);
            DevicePivots dp(n);
            for (int b = 0; b < 30; ++b)
                device_copy(dp.data.get() + dp.offset[b], piv[b].data(), piv[b].size() * sizeof(int),
                            cudaMemcpyHostToDevice);
            EXPECT_EQ(bc::vgetrs_workspace<T>(nmax, nrhs, 30), 0u);
            bc::vgetrs<T>(this->launch(), nmax, dA.dn.get(), nrhs, reinterpret_cast<const T* const*>(dA.ptrs.get()),
                          dA.dld.get(), reinterpret_cast<const int* const*>(dp.ptrs.get()), dB.ptrs.get(), dB.dld.get(),
                          30);
            ASSERT_TRUE(this->sync());
            const auto Fafter = dA.download(F);
            const auto Pafter = dp.download();
            const auto Xgpu = dB.download(B);
            for (int b = 0; b < 30; ++b) {
                ASSERT_EQ(std::memcmp(Fafter[b].ptr(), F[b].ptr(), F[b].data.size() * sizeof(T)), 0)
                    << "matrix " << b << ": the factor's storage changed";
                ASSERT_EQ(Pafter[b], piv[b]) << "matrix " << b << ": the pivots changed";
                ASSERT_EQ(non_nan_in_padding(Xgpu[b]), 0) << "matrix " << b << ": B's padding was written";
                if (n[b] == 0) continue;
                ASSERT_PRED_FORMAT1(ResidualPasses, solve_residual(A[b], Xgpu[b], B[b])) << "matrix " << b;
                const double diff = max_abs_diff(Xgpu[b], X[b]);
                const double tol = 1000.0 * n[b] * eps * std::max(1.0, max_abs(X[b]));
                ASSERT_LE(diff, tol) << "matrix " << b << " (n " << n[b] << "): max |X - X_lapack|";
            }
        }
}

// The public GPU API (Context) against the host path on the same matrices: factor, then solve
// with our own factors.
TYPED_TEST(VBatchedLuCuda, ApiAgainstHostPath) {
    using T = TypeParam;
    const int count = 60, nrhs = 5;
    for (auto sched : {batched::Schedule::ssde, batched::Schedule::dsse}) {
        const std::uint64_t s = this->seed() + (sched == batched::Schedule::dsse ? 5 : 0);
        const auto c = make_lu_case<T>(draw_sizes(true, 300, count, s), true, s);
        std::vector<int> n;
        std::vector<HostMatrix<T>> B;
        for (int b = 0; b < count; ++b) {
            n.push_back(c.A[b].n);
            B.push_back(random_matrix<T>(c.A[b].n, nrhs, c.A[b].n + 1, s + 77 + b));
        }
        DeviceVBatch<T> dA(c.A), dB(B);
        DevicePivots dp(n);
        DeviceBuffer<int> dinfo(count);
        batched::Context ctx(this->stream_);
        batched::vgetrf<T>(ctx, sched, dA.sizes(), dA.ptrs.get(), dp.ptrs.get(), dinfo.get(), count);
        batched::vgetrs<T>(ctx, dA.sizes(), nrhs, reinterpret_cast<const T* const*>(dA.ptrs.get()),
                           reinterpret_cast<const int* const*>(dp.ptrs.get()), dB.sizes(), dB.ptrs.get(), count);
        ASSERT_TRUE(this->sync());
        const auto gpu_info = download_ints(dinfo);
        const auto gpu_piv = dp.download();
        const auto Xg = dB.download(B);
        auto HA = c.A;
        std::vector<std::vector<int>> hpiv(count);
        std::vector<T*> pa;
        std::vector<int*> pp;
        std::vector<int> lda, info(count, -1);
        for (int b = 0; b < count; ++b) {
            hpiv[b].assign(std::max(n[b], 1), -99);
            pa.push_back(HA[b].ptr());
            pp.push_back(hpiv[b].data());
            lda.push_back(HA[b].ld);
        }
        EXPECT_EQ(batched::vgetrf<T>(n.data(), pa.data(), lda.data(), pp.data(), info.data(), count), 3);
        EXPECT_EQ(gpu_info, info);
        EXPECT_EQ(info, c.expected);
        for (int b = 0; b < count; ++b) {
            if (info[b] != 0 || n[b] == 0) continue;
            EXPECT_EQ(non_nan_in_padding(Xg[b]), 0) << "matrix " << b;
            ASSERT_PRED_FORMAT1(ResidualPasses, solve_residual(c.A[b], Xg[b], B[b]))
                << "matrix " << b << " (pivots as the host path's: " << (gpu_piv[b] == hpiv[b]) << ")";
        }
    }
}

// The GPU API's checks: each bad argument named, before anything is enqueued (data untouched).
TYPED_TEST(VBatchedLuCuda, ApiArgumentErrors) {
    using T = TypeParam;
    const auto c = make_lu_case<T>({4, 0, 9}, false, this->seed());
    DeviceVBatch<T> d(c.A);
    DevicePivots dp({4, 0, 9});
    DeviceBuffer<int> dinfo(3);
    ASSERT_TRUE(cuda_ok(cudaMemset(dinfo.get(), 0x5a, 3 * sizeof(int))));
    batched::Context ctx(this->stream_);
    auto vgetrf_named = [&](const batched::VSizes& s, T* const* A, int* const* ipiv, int* info, int count,
                            const std::string& arg) {
        expect_named(arg, [&] { batched::vgetrf<T>(ctx, batched::Schedule::dsse, s, A, ipiv, info, count); });
    };
    std::vector<int> n = d.n, lda = d.ld;
    batched::VSizes s{n.data(), lda.data(), d.dn.get(), d.dld.get()};
    vgetrf_named(s, d.ptrs.get(), dp.ptrs.get(), dinfo.get(), -1, "count");
    n[2] = -1;
    vgetrf_named(s, d.ptrs.get(), dp.ptrs.get(), dinfo.get(), 3, "n");
    n[2] = 9;
    lda[0] = 3;
    vgetrf_named(s, d.ptrs.get(), dp.ptrs.get(), dinfo.get(), 3, "lda");
    lda[0] = 4;
    vgetrf_named(s, nullptr, dp.ptrs.get(), dinfo.get(), 3, "A");
    vgetrf_named(s, d.ptrs.get(), nullptr, dinfo.get(), 3, "ipiv");
    vgetrf_named(s, d.ptrs.get(), dp.ptrs.get(), nullptr, 3, "info");
    vgetrf_named({n.data(), lda.data(), nullptr, d.dld.get()}, d.ptrs.get(), dp.ptrs.get(), dinfo.get(), 3, "device_n");
    expect_named("nrhs", [&] {
        batched::vgetrs<T>(ctx, s, -2, reinterpret_cast<const T* const*>(d.ptrs.get()),
                           reinterpret_cast<const int* const*>(dp.ptrs.get()), s, d.ptrs.get(), 3);
    });
    ASSERT_TRUE(this->sync());
    EXPECT_EQ(download_ints(dinfo), std::vector<int>(3, 0x5a5a5a5a)) << "info was written";
    const auto F = d.download(c.A);
    for (int b = 0; b < 3; ++b)
        EXPECT_EQ(std::memcmp(F[b].ptr(), c.A[b].ptr(), c.A[b].data.size() * sizeof(T)), 0) << "matrix " << b;
    const auto P = dp.download();
    EXPECT_EQ(P[0], std::vector<int>(4, -99));
}

// ---- QR (vgeqrf, vgeqrs) ----------------------------------------------------------------------

/// Shapes m[b] x n[b]: uniform in [0, nmax]^2 (wide ones included) or, tall, n uniform and
/// m = n + [0, nmax/2]; skewed: 1% of the largest, the rest within a tenth. One matrix has
/// the largest shape; 0 x 0, 5 x 0, 0 x 4 (tall: 1 x 0) and 1 x 1 are there.
void draw_shapes(bool skewed, bool tall, int nmax, int count, std::uint64_t seed, std::vector<int>& m,
                 std::vector<int>& n) {
    std::mt19937_64 rng(seed);
    m.assign(count, 0);
    n.assign(count, 0);
    for (int b = 0; b < count; ++b) {
        const int hi = skewed && rng() % 100 != 0 ? std::max(1, nmax / 10) : nmax;
        n[b] = static_cast<int>(rng() % (hi + 1));
        m[b] = tall ? n[b] + static_cast<int>(rng() % (hi / 2 + 1)) : static_cast<int>(rng() % (hi + 1));
    }
    if (count > 6) {
        m[count / 3] = tall ? nmax + nmax / 2 : nmax;
        n[count / 3] = nmax;
        m[1] = n[1] = 0;
        m[2] = 5, n[2] = 0;
        m[3] = tall ? 1 : 0, n[3] = tall ? 0 : 4;
        m[4] = n[4] = 1;
    }
}

template <class T>
class VBatchedQrCuda : public VBatchedCudaTest {
protected:
    VBatchedQrCuda() : VBatchedCudaTest("variable-size batched QR") {}

    /// vgeqrf on the GPU with schedule s; every matrix against LAPACKE on a copy (one BLAS
    /// thread): factor (R and V) and tau close (up to a reflector whose sign is a checked near
    /// tie), the residual below 30 (m >= n), padding and tau's unused entries untouched.
    /// Returns the factors and tau.
    std::pair<std::vector<HostMatrix<T>>, std::vector<std::vector<T>>> factor_and_check(
        const std::vector<HostMatrix<T>>& A, bc::Schedule s) {
        const int count = static_cast<int>(A.size());
        auto [F, tau] = this->run_vgeqrf(A, s);
        const double eps = ScalarTraits<T>::eps;
        BatchReport<T> report(cat(schedule_name(s), ", count ", count, ", "), A, false);
        for (int b = 0; b < count; ++b) {
            const int m = A[b].m, n = A[b].n, k = std::min(m, n);
            const auto v = check_qr_matrix(A[b], F[b], tau[b]);
            if (report_all(v.failures, b, report)) break;
            if (!v.compare) continue;
            const auto& R = v.R;
            const auto& rtau = v.rtau;
            const double tol = 200.0 * std::max(m, n) * eps * std::max(1.0, max_abs(R));
            // The factors are compared up to the first diagonal whose sign differs from
            // LAPACKE's, once it is checked to be a near tie (reflector_sign_near_tie; the
            // residual covers the rest).
            int upto = n;
            for (int j = 0; j < k; ++j) {
                const T fj = F[b](j, j), rj = R(j, j);
                if (fj == T(0) || rj == T(0) || (fj < 0) == (rj < 0)) continue;
                if (!reflector_sign_near_tie(rtau[j], m)) {
                    std::ostringstream msg;
                    msg << "R(" << j << ", " << j << ") " << fj << " against LAPACKE's " << rj
                        << ", not a near tie (|alpha / beta| = " << std::abs(1.0 - static_cast<double>(rtau[j])) << ")";
                    if (report(b, msg.str())) return {F, tau};
                }
                upto = j;
                break;
            }
            double diff = 0;
            int first = -1;  // the first column past the tolerance
            for (int j = 0; j < upto; ++j) {
                double cdiff = 0;
                for (int i = 0; i < m; ++i)
                    cdiff = std::max(cdiff, std::abs(static_cast<double>(F[b](i, j)) - R(i, j)));
                if (cdiff > tol && first < 0) first = j;
                diff = std::max(diff, cdiff);
            }
            if (!(diff <= tol)) {
                std::ostringstream msg;
                msg << "max |F - F_lapack| = " << diff << " > " << tol << ", from column " << first;
                if (first < k)
                    msg << " (R there " << F[b](first, first) << " against " << R(first, first) << ", tau "
                        << tau[b][first] << " against " << rtau[first] << ")";
                if (report(b, msg.str())) break;
            }
            double tdiff = 0;
            for (int i = 0; i < std::min(k, upto); ++i)
                tdiff = std::max(tdiff, std::abs(static_cast<double>(tau[b][i] - rtau[i])));
            if (!(tdiff <= 200.0 * m * eps)) {
                std::ostringstream msg;
                msg << "max |tau - tau_lapack| = " << tdiff;
                if (report(b, msg.str())) break;
            }
            if (m >= n) {
                const double r =
                    batched::residuals::geqrf(m, n, A[b].ptr(), A[b].ld, F[b].ptr(), F[b].ld, tau[b].data());
                if (!(checks::passes(r) && r >= 0)) {
                    std::ostringstream msg;
                    msg << "residual " << r;
                    if (report(b, msg.str())) break;
                }
            }
        }
        return {F, tau};
    }
};
TYPED_TEST_SUITE(VBatchedQrCuda, Precisions);

// Mixed shapes (wide, tall, empty), NMAX 32..300, uniform and skewed: both schedules against
// LAPACKE, and bitwise equal to each other.
TYPED_TEST(VBatchedQrCuda, MixedShapesAgainstLapack) {
    using T = TypeParam;
    openblas_set_num_threads(1);
    for (int nmax : {32, 70, 300})
        for (bool skewed : {false, true}) {
            SCOPED_TRACE(::testing::Message() << "nmax " << nmax << (skewed ? " skewed" : " uniform"));
            const int count = nmax >= 300 ? 120 : 300;
            std::vector<int> m, n;
            const std::uint64_t s = this->seed() + nmax + (skewed ? 1 : 0);
            draw_shapes(skewed, false, nmax, count, s, m, n);
            const auto A = random_batch<T>(m, n, s);
            const auto ss = this->factor_and_check(A, bc::Schedule::ssde);
            const auto ds = this->factor_and_check(A, bc::Schedule::dsse);
            for (int b = 0; b < count; ++b) {
                ASSERT_EQ(std::memcmp(ss.first[b].ptr(), ds.first[b].ptr(), A[b].data.size() * sizeof(T)), 0)
                    << "ssde and dsse differ, matrix " << b;
                ASSERT_EQ(std::memcmp(ss.second[b].data(), ds.second[b].data(), ss.second[b].size() * sizeof(T)), 0)
                    << "tau, matrix " << b;
            }
        }
}

// Every shape up to 70 x 70 once, and tiny counts: the grids' bounds at every step.
TYPED_TEST(VBatchedQrCuda, EveryShapeAndSmallCounts) {
    using T = TypeParam;
    openblas_set_num_threads(1);
    std::vector<int> m, n;
    for (int i = 0; i <= 70; i += 3)
        for (int j = 0; j <= 70; j += 5) m.push_back(i), n.push_back(j);
    const auto A = random_batch<T>(m, n, this->seed());
    for (auto s : {bc::Schedule::ssde, bc::Schedule::dsse}) this->factor_and_check(A, s);
    for (int count : {1, 2}) {
        std::vector<int> mm(m.end() - count, m.end()), nn(n.end() - count, n.end());
        const auto B = random_batch<T>(mm, nn, this->seed() + 1);
        for (auto s : {bc::Schedule::ssde, bc::Schedule::dsse}) this->factor_and_check(B, s);
    }
    {  // 10000 square matrices, NMAX 96: many blocks per SM at every step
        const auto sizes = draw_sizes(false, 96, 10000, this->seed() + 2);
        const auto C = random_batch<T>(sizes, sizes, this->seed() + 2);
        for (auto s : {bc::Schedule::ssde, bc::Schedule::dsse}) this->factor_and_check(C, s);
    }
    // An empty batch launches nothing.
    bc::vgeqrf<T>(this->launch(), bc::Schedule::dsse, bc::VQrBounds{}, nullptr, nullptr, nullptr, nullptr, nullptr, 0);
    EXPECT_TRUE(this->sync());
}

// vgeqrf + vgeqrs on tall shapes: zero columns planted (info k exactly, B untouched), the other
// matrices' least-squares residual below 30 and X close to LAPACKE's gels.
TYPED_TEST(VBatchedQrCuda, LeastSquaresAgainstLapack) {
    using T = TypeParam;
    openblas_set_num_threads(1);
    for (int nrhs : {1, 5}) {
        const int count = 160;
        std::vector<int> m, n;
        draw_shapes(true, true, 200, count, this->seed() + nrhs, m, n);
        auto A = random_batch<T>(m, n, this->seed() + 3 * nrhs);
        std::vector<int> expected(count, 0);
        for (int b = 8; b < count; b += 9) {
            if (n[b] == 0) continue;
            const int k = 1 + (b * 7) % n[b];
            for (int i = 0; i < m[b]; ++i) A[b](i, k - 1) = T(0);
            expected[b] = k;
        }
        std::vector<HostMatrix<T>> B;
        for (int b = 0; b < count; ++b)
            B.push_back(random_matrix<T>(m[b], nrhs, std::max(1, m[b] + b % 2), this->seed() + 11ULL * b));
        DeviceQr<T> d(A);
        DeviceVBatch<T> dB(B);
        DeviceBuffer<int> info(count);
        ASSERT_TRUE(cuda_ok(cudaMemset(info.get(), 0x5a, count * sizeof(int))));
        const bc::VQrBounds bounds = bc::vqr_bounds(d.m.data(), d.n.data(), count);
        const auto l = this->launch_with_workspace(bc::vgeqrf_workspace<T>(count));
        bc::vgeqrf<T>(l, bc::Schedule::dsse, bounds, d.a.dn.get(), d.dcols.get(), d.a.ptrs.get(), d.a.dld.get(),
                      d.tptrs.get(), count);
        bc::vgeqrs<T>(l, bounds, d.a.dn.get(), d.dcols.get(), nrhs, d.a.ptrs.get(), d.a.dld.get(), d.tptrs.get(),
                      dB.ptrs.get(), dB.dld.get(), info.get(), count);
        ASSERT_TRUE(this->sync());
        EXPECT_EQ(download_ints(info), expected);
        const auto X = dB.download(B);
        for (int b = 0; b < count; ++b) {
            EXPECT_EQ(non_nan_in_padding(X[b]), 0) << "matrix " << b;
            if (expected[b] != 0 || n[b] == 0) {
                ASSERT_EQ(std::memcmp(X[b].ptr(), B[b].ptr(), B[b].data.size() * sizeof(T)), 0) << "matrix " << b;
                continue;
            }
            ASSERT_PRED_FORMAT1(ResidualPasses,
                                batched::residuals::least_squares(m[b], n[b], nrhs, A[b].ptr(), A[b].ld, X[b].ptr(),
                                                                  X[b].ld, B[b].ptr(), B[b].ld))
                << "matrix " << b << " (" << m[b] << " x " << n[b] << ")";
        }
    }
}

// The Context API (vgeqrf, vgels) against the host path, and its argument checks.
TYPED_TEST(VBatchedQrCuda, ApiAgainstHostPath) {
    using T = TypeParam;
    openblas_set_num_threads(1);
    const int count = 90, nrhs = 3;
    std::vector<int> m, n;
    draw_shapes(true, true, 150, count, this->seed(), m, n);
    n[20] = std::max(n[20], 2);
    m[20] = std::max(m[20], n[20]);
    auto A = random_batch<T>(m, n, this->seed() + 1);
    for (int i = 0; i < m[20]; ++i) A[20](i, 0) = T(0);  // info 1
    std::vector<HostMatrix<T>> B;
    for (int b = 0; b < count; ++b) B.push_back(random_matrix<T>(m[b], nrhs, m[b] + 1, this->seed() + 5ULL * b));
    DeviceQr<T> d(A);
    DeviceVBatch<T> dB(B);
    DeviceBuffer<int> info(count);
    batched::Context ctx(this->stream_);
    batched::vgels<T>(ctx, batched::Schedule::dsse, d.shapes(), nrhs, d.a.ptrs.get(), d.tptrs.get(), dB.sizes(),
                      dB.ptrs.get(), info.get(), count);
    ASSERT_TRUE(this->sync());
    const auto gpu_info = download_ints(info);
    const auto F = d.a.download(A);
    const auto X = dB.download(B);
    auto HA = A, HB = B;
    std::vector<T*> pa, pb, pt;
    std::vector<std::vector<T>> htau(count);
    std::vector<int> lda, ldb, hinfo(count, -1);
    for (int b = 0; b < count; ++b) {
        htau[b].assign(std::max(1, n[b]), T(0));
        pa.push_back(HA[b].ptr());
        pb.push_back(HB[b].ptr());
        pt.push_back(htau[b].data());
        lda.push_back(HA[b].ld);
        ldb.push_back(HB[b].ld);
    }
    EXPECT_EQ(batched::vgels<T>(m.data(), n.data(), nrhs, pa.data(), lda.data(), pt.data(), pb.data(), ldb.data(),
                                hinfo.data(), count),
              1);
    EXPECT_EQ(gpu_info, hinfo);
    EXPECT_EQ(hinfo[20], 1);
    for (int b = 0; b < count; ++b) {
        const double tol = 200.0 * std::max(1, m[b]) * ScalarTraits<T>::eps * std::max(1.0, max_abs(HA[b]));
        ASSERT_LE(max_abs_diff(F[b], HA[b]), tol) << "matrix " << b;
        if (hinfo[b] != 0 || n[b] == 0) continue;
        // X is as well conditioned as A is: checked through the residual.
        ASSERT_PRED_FORMAT1(ResidualPasses, batched::residuals::least_squares(m[b], n[b], nrhs, A[b].ptr(), A[b].ld,
                                                                              X[b].ptr(), X[b].ld, B[b].ptr(), B[b].ld))
            << "matrix " << b;
    }
    // Argument checks: named, nothing launched.
    batched::VShapes sh = d.shapes();
    std::vector<int> mm = m;
    sh.m = mm.data();
    mm[5] = n[5] - 1;  // wide: fine for geqrf, not for gels
    expect_named("m", [&] {
        batched::vgels<T>(ctx, batched::Schedule::ssde, sh, nrhs, d.a.ptrs.get(), d.tptrs.get(), dB.sizes(),
                          dB.ptrs.get(), info.get(), count);
    });
    mm[5] = m[5];
    sh.device_n = nullptr;
    expect_named("device_n",
                 [&] { batched::vgeqrf<T>(ctx, batched::Schedule::ssde, sh, d.a.ptrs.get(), d.tptrs.get(), count); });
    sh = d.shapes();
    batched::VSizes bs = dB.sizes();
    std::vector<int> rows = dB.n;
    rows[7] += 1;
    bs.n = rows.data();
    expect_named("n", [&] {
        batched::vgels<T>(ctx, batched::Schedule::ssde, sh, nrhs, d.a.ptrs.get(), d.tptrs.get(), bs, dB.ptrs.get(),
                          info.get(), count);
    });
    expect_named("tau", [&] { batched::vgeqrf<T>(ctx, batched::Schedule::ssde, sh, d.a.ptrs.get(), nullptr, count); });
    ASSERT_TRUE(this->sync());
    const auto F2 = d.a.download(A);
    for (int b = 0; b < count; ++b)
        ASSERT_EQ(std::memcmp(F2[b].ptr(), F[b].ptr(), F[b].data.size() * sizeof(T)), 0) << "matrix " << b;
}

// ---- the StarPU path on CUDA workers (batched::tasks::v*) ------------------------------------

template <class T>
class VBatchedTasksCuda : public RuntimeTest {
protected:
    void SetUp() override {
        RuntimeTest::SetUp();
        openblas_set_num_threads(1);
    }
};
TYPED_TEST_SUITE(VBatchedTasksCuda, Precisions);

// Every operation's slices on CUDA workers only (the SSDE/DSSE kernels on packed slices): infos
// as the host path's, factors close to them, residuals below 30.
TYPED_TEST(VBatchedTasksCuda, CudaWorkersMatchTheHostPath) {
    using T = TypeParam;
    STARFACT_REQUIRE_CUDA_WORKER(this->ncuda());
    const codelets::ScopedImpl gpu_only(codelets::Impl::Cuda);
    const double eps = ScalarTraits<T>::eps;
    const int count = 240, nrhs = 2;
    for (auto schedule : {batched::Schedule::ssde, batched::Schedule::dsse}) {
        const batched::tasks::VTaskOptions opt{3, schedule};
        const std::uint64_t s = this->seed() + (schedule == batched::Schedule::dsse ? 100 : 0);
        auto n = draw_sizes(true, 200, count, s);
        n[1] = 0, n[2] = 1;
        std::vector<int> ld(count);
        for (int b = 0; b < count; ++b) ld[b] = std::max(1, n[b] + b % 2);
        // Cholesky (lower), failures planted, and its solve.
        const auto c = make_spd_case<T>('L', n, true, s);
        auto S = c.A, HS = c.A;
        std::vector<int> sld(count);
        for (int b = 0; b < count; ++b) sld[b] = S[b].ld;
        auto ps = pointers_of(S), phs = pointers_of(HS);
        std::vector<int> info(count, -7), hinfo(count, -7), sn(count);
        for (int b = 0; b < count; ++b) sn[b] = S[b].n;
        EXPECT_EQ(
            batched::tasks::vpotrf<T>(batched::Uplo::lower, sn.data(), ps.data(), sld.data(), info.data(), count, opt),
            3);
        batched::vpotrf<T>(batched::Uplo::lower, sn.data(), phs.data(), sld.data(), hinfo.data(), count);
        EXPECT_EQ(info, hinfo);
        EXPECT_EQ(info, c.expected);
        for (int b = 0; b < count; ++b) {
            EXPECT_EQ(non_nan_in_strict_triangle(S[b], 'U'), 0) << "matrix " << b;
            if (info[b] != 0) continue;
            ASSERT_LE(max_abs_diff(S[b], HS[b], 'L'), 100.0 * sn[b] * eps * std::max(1.0, max_abs(HS[b], 'L')))
                << "matrix " << b;
        }
        std::vector<int> ns = sn;
        std::vector<HostMatrix<T>> B;
        for (int b = 0; b < count; ++b) {
            if (info[b] != 0) ns[b] = 0;
            B.push_back(random_matrix<T>(sn[b], nrhs, sld[b], s + 3ULL * b));
        }
        auto X = B;
        auto px = pointers_of(X);
        std::vector<const T*> cs(ps.begin(), ps.end());
        batched::tasks::vpotrs<T>(batched::Uplo::lower, ns.data(), nrhs, cs.data(), sld.data(), px.data(), sld.data(),
                                  count, opt);
        for (int b = 0; b < count; ++b) {
            if (ns[b] == 0) continue;
            ASSERT_PRED_FORMAT1(ResidualPasses, solve_residual(symmetric(c.A[b], 'L'), X[b], B[b])) << "matrix " << b;
        }
        // LU, zero pivots planted, and its solve.
        const auto lc = make_lu_case<T>(n, true, s + 1);
        auto L = lc.A, HL = lc.A;
        std::vector<int> lld(count), ln(count);
        for (int b = 0; b < count; ++b) lld[b] = L[b].ld, ln[b] = L[b].n;
        std::vector<std::vector<int>> piv(count), hpiv(count);
        std::vector<int*> pp, php;
        for (int b = 0; b < count; ++b) {
            piv[b].assign(std::max(1, ln[b]), -5);
            hpiv[b].assign(std::max(1, ln[b]), -5);
            pp.push_back(piv[b].data());
            php.push_back(hpiv[b].data());
        }
        auto pl = pointers_of(L), phl = pointers_of(HL);
        EXPECT_EQ(batched::tasks::vgetrf<T>(ln.data(), pl.data(), lld.data(), pp.data(), info.data(), count, opt),
                  batched::vgetrf<T>(ln.data(), phl.data(), lld.data(), php.data(), hinfo.data(), count));
        EXPECT_EQ(info, hinfo);
        for (int b = 0; b < count; ++b)
            ASSERT_PRED_FORMAT1(ResidualPasses, lu_residual_ratio(lc.A[b], L[b], piv[b].data())) << "matrix " << b;
        std::vector<HostMatrix<T>> C;
        for (int b = 0; b < count; ++b) {
            ns[b] = info[b] != 0 ? 0 : ln[b];
            C.push_back(random_matrix<T>(ln[b], nrhs, lld[b], s + 5ULL * b));
        }
        auto Y = C;
        auto py = pointers_of(Y);
        std::vector<const T*> cl(pl.begin(), pl.end());
        std::vector<const int*> cp(pp.begin(), pp.end());
        batched::tasks::vgetrs<T>(ns.data(), nrhs, cl.data(), lld.data(), cp.data(), py.data(), lld.data(), count, opt);
        for (int b = 0; b < count; ++b) {
            if (ns[b] == 0) continue;
            ASSERT_PRED_FORMAT1(ResidualPasses, solve_residual(lc.A[b], Y[b], C[b])) << "matrix " << b;
        }
        // QR of any shape, then least squares on tall ones with a zero column planted.
        std::vector<int> m, qn, tm, tn;
        draw_shapes(true, false, 200, count, s + 2, m, qn);
        draw_shapes(true, true, 150, count, s + 3, tm, tn);
        const auto Q0 = random_batch<T>(m, qn, s + 4);
        auto G0 = random_batch<T>(tm, tn, s + 5);
        std::vector<int> expected(count, 0);
        for (int b = 10; b < count; b += 11)
            if (tn[b] > 0) {
                for (int i = 0; i < tm[b]; ++i) G0[b](i, tn[b] - 1) = T(0);
                expected[b] = tn[b];
            }
        auto Q = Q0, HQ = Q0, G = G0;
        std::vector<int> qld(count), gld(count);
        std::vector<std::vector<T>> tau(count), htau(count), gtau(count);
        std::vector<T*> pt, pht, pgt;
        for (int b = 0; b < count; ++b) {
            qld[b] = Q[b].ld;
            gld[b] = G[b].ld;
            tau[b].assign(std::max(1, std::min(m[b], qn[b])), nan<T>());
            htau[b] = tau[b];
            gtau[b].assign(std::max(1, tn[b]), nan<T>());
            pt.push_back(tau[b].data());
            pht.push_back(htau[b].data());
            pgt.push_back(gtau[b].data());
        }
        auto pq = pointers_of(Q), phq = pointers_of(HQ), pg = pointers_of(G);
        batched::tasks::vgeqrf<T>(m.data(), qn.data(), pq.data(), qld.data(), pt.data(), count, opt);
        batched::vgeqrf<T>(m.data(), qn.data(), phq.data(), qld.data(), pht.data(), count);
        for (int b = 0; b < count; ++b) {
            const double tol = 200.0 * std::max(m[b], qn[b]) * eps * std::max(1.0, max_abs(HQ[b]));
            ASSERT_LE(max_abs_diff(Q[b], HQ[b]), tol) << "matrix " << b;
            EXPECT_EQ(non_nan_in_padding(Q[b]), 0) << "matrix " << b;
        }
        std::vector<HostMatrix<T>> D;
        for (int b = 0; b < count; ++b) D.push_back(random_matrix<T>(tm[b], nrhs, gld[b], s + 7ULL * b));
        auto Z = D;
        auto pz = pointers_of(Z);
        const int gf = batched::tasks::vgels<T>(tm.data(), tn.data(), nrhs, pg.data(), gld.data(), pgt.data(),
                                                pz.data(), gld.data(), info.data(), count, opt);
        EXPECT_EQ(gf, static_cast<int>(std::count_if(expected.begin(), expected.end(), [](int i) { return i != 0; })));
        EXPECT_EQ(info, expected);
        for (int b = 0; b < count; ++b) {
            if (expected[b] != 0 || tn[b] == 0) {
                ASSERT_EQ(std::memcmp(Z[b].ptr(), D[b].ptr(), D[b].data.size() * sizeof(T)), 0) << "matrix " << b;
                continue;
            }
            ASSERT_PRED_FORMAT1(ResidualPasses,
                                batched::residuals::least_squares(tm[b], tn[b], nrhs, G0[b].ptr(), G0[b].ld, Z[b].ptr(),
                                                                  Z[b].ld, D[b].ptr(), D[b].ld))
                << "matrix " << b;
        }
    }
}

}  // namespace
}  // namespace starfact::test
