// Variable-size batched Cholesky with a largest order of at most 32 (batched::cuda::vpotrf hands
// such batches to potrf.cu's register kernel, which then reads each matrix's own order and
// leading dimension) against LAPACKE on the same matrices. Every largest order 1..32
// (the kernel's bounds 4, 8, 16 and 32 put 32, 16, 8 or 4 lanes on a matrix, so several
// matrices share a warp below 32), orders drawn uniform in [0, NMAX] or skewed (1% NMAX, the
// rest in [1, NMAX/10]), lda[b] = n[b] + b % 3, counts 1, 7, 300 and 10000, both triangles, both
// schedules, float and double. Failures planted at count/4, count/2 and count-1 (minors 1,
// n/2+1, n), NaNs in single matrices whose warp neighbours must come out as if alone. Every info
// exact, every (leading) factor's residual below the threshold and within 100 n eps of LAPACKE's,
// the other triangle and the padding still NaN afterwards. Skips, visibly, without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "batched/cuda/vbatched_kernels.hpp"
#include "common/blas.hpp"
#include "common/checks.hpp"
#include "cuda_test_support.hpp"
#include "test_support.hpp"
#include "vbatched_cuda_support.hpp"
#include "vbatched_test_support.hpp"

namespace starfact::test {
namespace {

namespace bc = starfact::batched::cuda;

/// This suite's batches (make_spd_case): lda[b] = n[b] + b % 3, so 0 for an empty matrix at b % 3 == 0.
template <class T>
SpdCase<T> make(char uplo, std::vector<int> n, bool plant, std::uint64_t seed,
                const std::vector<std::array<int, 3>>& nans = {}) {
    return make_spd_case<T>(uplo, std::move(n), plant, seed, nans, 0);
}

template <class T>
class VBatchedPotrfSmallCuda : public VBatchedCudaTest {
protected:
    VBatchedPotrfSmallCuda() : VBatchedCudaTest("variable-size batched Cholesky (register kernel)") {}

    /// Factors c with schedule s (nmax: the largest order, or larger) and checks every matrix.
    void factor_and_check(const SpdCase<T>& c, bc::Schedule s, int nmax = -1) {
        const int count = static_cast<int>(c.A.size());
        for (const auto& A : c.A) nmax = std::max(nmax, A.n);
        const auto [Fs, got] = this->template run_vpotrf<T>(c, s, nmax);
        const double eps = ScalarTraits<T>::eps;
        BatchReport<T> report(cat(schedule_name(s), ", uplo ", c.uplo, ", nmax ", nmax, ", count ", count, ", "), c.A,
                              true);
        for (int b = 0; b < count; ++b) {
            const auto& A = c.A[b];
            const auto& F = Fs[b];
            const int nb = A.n;
            const auto v = check_spd_matrix(c, F, got[b], b);
            if (report_all(v.failures, b, report)) break;
            if (!v.compare) continue;
            const int k = c.expected[b] == 0 ? nb : c.expected[b] - 1;
            if (c.nan[b]) {  // info checked against the reference; the factor before the NaN pivot below
                if (k > 0 && !checks::passes(potrf_residual(c.uplo, leading(A, k), leading(F, k))) &&
                    report(b, "residual of the factor before the NaN pivot"))
                    break;
                continue;
            }
            HostMatrix<T> L = A;
            const int linfo = nb > 0 ? blas::potrf(c.uplo, nb, L.ptr(), L.ld) : 0;
            if (linfo != c.expected[b] && report(b, "LAPACKE's info differs")) break;
            if (k == 0) continue;
            const double r = potrf_residual(c.uplo, leading(A, k), leading(F, k));
            if (!(checks::passes(r) && r >= 0)) {
                std::ostringstream m;
                m << "residual of the leading " << k << " x " << k << " factor " << r;
                if (report(b, m.str())) break;
            }
            const auto Lk = leading(L, k), Fk = leading(F, k);
            const double diff = max_abs_diff(Fk, Lk, c.uplo);
            const double tol = 100.0 * std::max(k, 1) * eps * std::max(1.0, max_abs(Lk, c.uplo));
            if (!(diff <= tol)) {
                std::ostringstream m;
                m << "max |L - L_lapack| over the leading " << k << " columns = " << diff << " > " << tol;
                if (report(b, m.str())) break;
            }
        }
    }
};

TYPED_TEST_SUITE(VBatchedPotrfSmallCuda, Precisions);

// Every largest order 1..32 (each of the kernel's bounds and its edges), both distributions,
// both triangles, planted failures; the schedules run the same kernel.
TYPED_TEST(VBatchedPotrfSmallCuda, EveryLargestOrderAgainstLapack) {
    using T = TypeParam;
    for (int nmax = 1; nmax <= 32; ++nmax)
        for (bool skewed : {false, true})
            for (char uplo : {'L', 'U'}) {
                SCOPED_TRACE(::testing::Message()
                             << (skewed ? "skewed" : "uniform") << ", nmax " << nmax << ", uplo " << uplo);
                const std::uint64_t s = this->seed() + 1009ULL * nmax + (skewed ? 7 : 0) + uplo;
                const auto c = make<T>(uplo, draw_sizes(skewed, nmax, 300, s), true, s);
                this->factor_and_check(c, bc::Schedule::dsse);
                this->factor_and_check(c, bc::Schedule::ssde);
                if (this->HasFailure()) return;
            }
}

// Counts 1, 7 and 10000 (many blocks), orders 0 and 1 among them; all orders 0; nmax larger
// than every order (the launch is sized for nmax, the matrices stop at their own).
TYPED_TEST(VBatchedPotrfSmallCuda, CountsAndEdgeOrders) {
    using T = TypeParam;
    for (char uplo : {'L', 'U'}) {
        SCOPED_TRACE(::testing::Message() << "uplo " << uplo);
        const std::uint64_t s = this->seed() + uplo;
        this->factor_and_check(make<T>(uplo, {0}, false, s), bc::Schedule::dsse);
        this->factor_and_check(make<T>(uplo, {1}, false, s), bc::Schedule::dsse);
        this->factor_and_check(make<T>(uplo, {1}, true, s), bc::Schedule::dsse);  // a 1 x 1 failing pivot
        this->factor_and_check(make<T>(uplo, {32}, true, s), bc::Schedule::ssde);
        this->factor_and_check(make<T>(uplo, {3, 0, 1, 32, 31, 2, 17}, true, s + 1), bc::Schedule::dsse);
        this->factor_and_check(make<T>(uplo, std::vector<int>(9, 0), false, s), bc::Schedule::dsse);
        this->factor_and_check(make<T>(uplo, {5, 0, 1, 8, 2}, true, s + 2), bc::Schedule::dsse, 32);
        this->factor_and_check(make<T>(uplo, draw_sizes(false, 32, 10000, s + 3), true, s + 3), bc::Schedule::dsse);
        this->factor_and_check(make<T>(uplo, draw_sizes(true, 32, 10000, s + 4), true, s + 4), bc::Schedule::ssde);
        if (this->HasFailure()) return;
    }
}

// NaNs in single matrices, with neighbours sharing their warp (largest orders 4, 8 and 16 put
// 8, 4 and 2 matrices on a warp) and failing neighbours: each info is LAPACK's (dpotf2's NaN
// test), every other matrix is factored as if alone.
TYPED_TEST(VBatchedPotrfSmallCuda, NanInOneMatrix) {
    using T = TypeParam;
    std::mt19937_64 rng(this->seed());
    for (int nmax : {2, 4, 7, 8, 16, 32})
        for (char uplo : {'L', 'U'}) {
            SCOPED_TRACE(::testing::Message() << "nmax " << nmax << ", uplo " << uplo);
            auto n = draw_sizes(false, nmax, 40, this->seed() + nmax);
            std::vector<std::array<int, 3>> nans;
            for (int b : {5, 13, 22}) {  // in different groups of the same warps as their neighbours
                n[b] = std::max(n[b], 1);
                const int i = static_cast<int>(rng() % n[b]), j = static_cast<int>(rng() % (i + 1));
                nans.push_back({b, i, j});
            }
            const auto c = make<T>(uplo, n, true, this->seed() + 3ULL * nmax, nans);
            for (int b : {5, 13, 22}) ASSERT_GT(c.expected[b], 0) << "matrix " << b;
            this->factor_and_check(c, bc::Schedule::dsse);
            if (this->HasFailure()) return;
        }
}

}  // namespace
}  // namespace starfact::test
