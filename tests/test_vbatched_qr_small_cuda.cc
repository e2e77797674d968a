// The variable-size batched QR (batched::cuda::vgeqrf) on batches that take the one-pass
// small kernel (every matrix at most 64 x 32: geqrf.cu's small_kernel reading each matrix's own
// shape), against LAPACKE's geqrf on the same matrices, float and double: every shape up to
// 64 x 32 (0 and 1, wide and tall) with 8, 16 and 32 lanes per matrix, lda[b] > m[b]; R and V
// and tau close to LAPACK's (so its larfg conventions: beta = -sign(alpha) ||(alpha, x)||, tau = 0
// and the column untouched when x = 0, the last reflector of a matrix with m <= n), tau's unused
// entries and the padding untouched, the residual below 30; both schedules bitwise equal; columns
// near underflow (larfg's rescaling) and overflow (the scaled norm); counts 1, 2, 7, 300; the
// bounds just past the small kernel (65 rows, 33 columns) take the stepped kernels and agree too;
// a NaN in one matrix (sharing a warp with others) leaves every other matrix bitwise as without
// it. Every test skips, visibly, without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "batched/cuda/vbatched_kernels.hpp"
#include "batched/residuals.hpp"
#include "common/blas.hpp"
#include "common/checks.hpp"
#include "common/scalar_traits.hpp"
#include "cuda_test_support.hpp"
#include "test_support.hpp"
#include "vbatched_cuda_support.hpp"
#include "vbatched_test_support.hpp"

namespace starfact::test {
namespace {

namespace bc = starfact::batched::cuda;

template <class T>
class VBatchedQrSmallCuda : public VBatchedCudaTest {
protected:
    VBatchedQrSmallCuda() : VBatchedCudaTest("variable-size batched QR (small)") {}

    /// Every matrix of (F, tau) = vgeqrf(A) against LAPACKE's geqrf on A: the QR residual of
    /// the leading m x min(m, n) block below 30; R and V within 200 max(m, n) eps max|F_lapack|
    /// and tau within 200 m eps (unless a reflector's sign is decided by rounding); the padding
    /// and (k = 0) A and tau untouched.
    void check(const std::vector<HostMatrix<T>>& A, const Factored<T>& r) {
        const auto& F = r.first;
        const auto& tau = r.second;
        const double eps = ScalarTraits<T>::eps;
        BatchReport<T> report("", A, false);
        for (std::size_t b = 0; b < A.size(); ++b) {
            const int m = A[b].m, n = A[b].n, k = std::min(m, n);
            const auto v = check_qr_matrix(A[b], F[b], tau[b]);
            if (report_all(v.failures, static_cast<int>(b), report)) break;
            if (!v.compare) continue;
            const auto& R = v.R;
            const auto& rtau = v.rtau;
            // The residual of the leading m x k block (all of A when m >= n).
            const double res = batched::residuals::geqrf(m, k, A[b].ptr(), A[b].ld, F[b].ptr(), F[b].ld, tau[b].data());
            if (!(checks::passes(res) && res >= 0)) {
                std::ostringstream msg;
                msg << "residual " << res;
                if (report(b, msg.str())) break;
            }
            // A later reflector whose alpha is zero to rounding (tau = 1 - alpha / beta within
            // 20 m eps of 1; the first one's alpha is A(0, 0) itself) has its sign, and so every
            // later entry, decided by rounding: such a matrix is checked by its residual alone.
            bool ambiguous = false;
            for (int i = 1; i < k; ++i)
                ambiguous = ambiguous || std::abs(1.0 - static_cast<double>(rtau[i])) < 20.0 * m * eps;
            if (ambiguous) continue;
            const double diff = max_abs_diff(F[b], R);
            const double tol = 200.0 * std::max(m, n) * eps * max_abs(R);
            if (!(diff <= tol)) {
                std::ostringstream msg;
                msg << "max |F - F_lapack| = " << diff << " > " << tol;
                if (report(b, msg.str())) break;
            }
            double tdiff = 0;
            for (int i = 0; i < k; ++i) {
                const double d = std::abs(static_cast<double>(tau[b][i]) - static_cast<double>(rtau[i]));
                tdiff = std::isnan(d) ? d : std::max(tdiff, d);
            }
            if (!(tdiff <= 200.0 * m * eps)) {
                std::ostringstream msg;
                msg << "max |tau - tau_lapack| = " << tdiff;
                if (report(b, msg.str())) break;
            }
        }
    }

    /// Both schedules against LAPACKE and bitwise equal to each other.
    void factor_and_check(const std::vector<HostMatrix<T>>& A) {
        const auto ss = this->run_vgeqrf(A, bc::Schedule::ssde);
        const auto ds = this->run_vgeqrf(A, bc::Schedule::dsse);
        check(A, ds);
        for (std::size_t b = 0; b < A.size(); ++b) {
            ASSERT_EQ(std::memcmp(ss.first[b].ptr(), ds.first[b].ptr(), A[b].data.size() * sizeof(T)), 0)
                << "ssde and dsse differ, matrix " << b;
            ASSERT_EQ(std::memcmp(ss.second[b].data(), ds.second[b].data(), ss.second[b].size() * sizeof(T)), 0)
                << "tau, matrix " << b;
        }
    }
};

TYPED_TEST_SUITE(VBatchedQrSmallCuda, Precisions);

/// Every shape m x n with m <= mmax, n <= nmax once, in a shuffled order (so matrices of
/// different shapes share warps).
void every_shape(int mmax, int nmax, std::uint64_t seed, std::vector<int>& m, std::vector<int>& n) {
    m.clear(), n.clear();
    for (int i = 0; i <= mmax; ++i)
        for (int j = 0; j <= nmax; ++j) m.push_back(i), n.push_back(j);
    std::mt19937_64 rng(seed);
    for (std::size_t i = m.size(); i > 1; --i) {
        const std::size_t j = rng() % i;
        std::swap(m[i - 1], m[j]);
        std::swap(n[i - 1], n[j]);
    }
}

// Every shape up to 8 x 8, 16 x 16 (8 and 16 lanes per matrix), 32 x 32, and 64 x 32 (rows
// beyond the lanes' columns): R, V and tau as LAPACK's.
TYPED_TEST(VBatchedQrSmallCuda, EveryShapeAgainstLapack) {
    using T = TypeParam;
    openblas_set_num_threads(1);
    for (auto [mmax, nmax] : {std::pair{8, 8}, {16, 16}, {32, 32}, {64, 32}, {64, 8}, {12, 20}}) {
        SCOPED_TRACE(::testing::Message() << "shapes up to " << mmax << " x " << nmax);
        std::vector<int> m, n;
        every_shape(mmax, nmax, this->seed() + mmax * 100 + nmax, m, n);
        this->factor_and_check(random_batch<T>(m, n, this->seed() + mmax + nmax));
        if (this->HasFailure()) return;
    }
}

// Counts 1, 2, 7 and 300 with shapes uniform in [0, 32]^2 (and in [0, 64] x [0, 32]), and
// the first bounds past the small kernel (65 rows, 33 columns: the stepped kernels) on the
// same kind of batch.
TYPED_TEST(VBatchedQrSmallCuda, CountsAndTheBoundsPastIt) {
    using T = TypeParam;
    openblas_set_num_threads(1);
    for (int rows : {32, 64, 65})
        for (int cols : {32, 33})
            for (int count : {1, 2, 7, 300}) {
                SCOPED_TRACE(::testing::Message() << "rows <= " << rows << ", cols <= " << cols << ", count " << count);
                std::mt19937_64 rng(this->seed() + rows * 1000 + cols * 10 + count);
                std::vector<int> m(count), n(count);
                for (int b = 0; b < count; ++b) {
                    m[b] = static_cast<int>(rng() % (rows + 1));
                    n[b] = static_cast<int>(rng() % (cols + 1));
                }
                m[count - 1] = rows, n[count / 2] = cols;  // the bounds are reached
                this->factor_and_check(random_batch<T>(m, n, this->seed() + count));
                if (this->HasFailure()) return;
            }
    bc::Launch l;
    bc::vgeqrf<T>(l, bc::Schedule::dsse, bc::VQrBounds{}, nullptr, nullptr, nullptr, nullptr, nullptr, 0);
    EXPECT_TRUE(this->sync());
}

// larfg's corners: a first column zero below the diagonal (tau = 0, the column kept), a
// zero column, a zero matrix, a column with zero alpha, positive and negative alpha; whole
// matrices near underflow (the safmin rescaling) and near overflow (the scaled norm).
TYPED_TEST(VBatchedQrSmallCuda, LarfgCornersAndScaling) {
    using T = TypeParam;
    openblas_set_num_threads(1);
    const int count = 200;
    std::mt19937_64 rng(this->seed());
    std::vector<int> m(count), n(count);
    for (int b = 0; b < count; ++b) {
        m[b] = 1 + static_cast<int>(rng() % 40);
        n[b] = 1 + static_cast<int>(rng() % 32);
    }
    auto A = random_batch<T>(m, n, this->seed() + 5);
    for (int b = 0; b < count; ++b) {
        auto& M = A[b];
        const int k = std::min(m[b], n[b]);
        const int c = static_cast<int>(rng() % k);
        switch (b % 6) {
            case 0:  // column 0 zero below its diagonal, positive alpha
                for (int i = 1; i < m[b]; ++i) M(i, 0) = T(0);
                M(0, 0) = T(3);
                break;
            case 1:  // column 0 below its diagonal zero, negative alpha
                for (int i = 1; i < m[b]; ++i) M(i, 0) = T(0);
                M(0, 0) = T(-2);
                break;
            case 2:  // a zero column
                for (int i = 0; i < m[b]; ++i) M(i, c) = T(0);
                break;
            case 3:  // the zero matrix
                for (int j = 0; j < n[b]; ++j)
                    for (int i = 0; i < m[b]; ++i) M(i, j) = T(0);
                break;
            case 4:  // zero alpha in column 0
                M(0, 0) = T(0);
                break;
            default:
                break;
        }
    }
    this->factor_and_check(A);
    if (this->HasFailure()) return;
    const double scales[] = {std::is_same_v<T, double> ? 1e-300 : 1e-35, std::is_same_v<T, double> ? 1e300 : 1e35};
    for (double scale : scales) {
        SCOPED_TRACE(::testing::Message() << "scale " << scale);
        this->factor_and_check(random_batch<T>(m, n, this->seed() + 9, scale));
        if (this->HasFailure()) return;
    }
}

// A NaN (then an Inf) in one matrix: every other matrix, those that share its warp included
// (8 columns: 4 matrices a warp), bitwise as without it.
TYPED_TEST(VBatchedQrSmallCuda, NanAffectsOnlyItsMatrix) {
    using T = TypeParam;
    for (int nmax : {8, 32})
        for (T bad : {nan<T>(), std::numeric_limits<T>::infinity()}) {
            SCOPED_TRACE(::testing::Message() << "nmax " << nmax << ", planted " << bad);
            const int count = 300, victim = 121;
            std::mt19937_64 rng(this->seed() + nmax);
            std::vector<int> m(count), n(count);
            for (int b = 0; b < count; ++b) {
                m[b] = 1 + static_cast<int>(rng() % nmax);
                n[b] = 1 + static_cast<int>(rng() % nmax);
            }
            m[victim] = n[victim] = nmax;
            const auto A = random_batch<T>(m, n, this->seed() + 3);
            auto Abad = A;
            Abad[victim](nmax / 2, nmax / 2) = bad;
            Abad[victim](0, 0) = bad;
            const auto good = this->run_vgeqrf(A, bc::Schedule::dsse);
            const auto worse = this->run_vgeqrf(Abad, bc::Schedule::dsse);
            EXPECT_GT(non_finite(worse.first[victim]), 0) << "the planted value vanished";
            for (int b = 0; b < count; ++b) {
                if (b == victim) continue;
                ASSERT_EQ(std::memcmp(good.first[b].ptr(), worse.first[b].ptr(), A[b].data.size() * sizeof(T)), 0)
                    << "matrix " << b;
                ASSERT_EQ(std::memcmp(good.second[b].data(), worse.second[b].data(), good.second[b].size() * sizeof(T)),
                          0)
                    << "tau " << b;
            }
            this->check(A, good);
            if (this->HasFailure()) return;
        }
}

}  // namespace
}  // namespace starfact::test
