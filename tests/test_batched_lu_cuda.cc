// The batched LU kernels (batched/cuda: getrf, getrs) against LAPACKE on the same matrices:
// info equal to LAPACK's, pivots in range and (double) equal to LAPACK's, ||P A - L U||_1 /
// (n ||A||_1 eps) < 30 for every matrix, padding (lda > n) left poisoned, planted failures and
// NaN confined to their own matrices, solves with a backward error < 30. Every test skips,
// visibly, without a CUDA device.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "batched/cuda/kernels.hpp"
#include "common/blas.hpp"
#include "cuda_test_support.hpp"
#include "test_support.hpp"

namespace starfact::test {
namespace {

namespace bc = starfact::batched::cuda;

/// count matrices of n x cols (leading dimension ld) in one device allocation, and the device
/// array of their pointers.
template <class T>
struct DeviceBatch {
    int rows, cols, ld, count;
    DeviceBuffer<T> data;
    DeviceBuffer<T*> ptrs;

    explicit DeviceBatch(const std::vector<HostMatrix<T>>& hs)
        : rows(hs.empty() ? 0 : hs[0].m), cols(hs.empty() ? 0 : hs[0].n), ld(hs.empty() ? 1 : hs[0].ld),
          count(static_cast<int>(hs.size())), data(stride() * hs.size()), ptrs(hs.size()) {
        std::vector<T> staging(stride() * hs.size());
        std::vector<T*> p(hs.size());
        for (std::size_t b = 0; b < hs.size(); ++b) {
            std::copy(hs[b].data.begin(), hs[b].data.end(), staging.begin() + b * stride());
            p[b] = data.get() + b * stride();
        }
        if (!staging.empty() && cudaMemcpy(data.get(), staging.data(), staging.size() * sizeof(T),
                                           cudaMemcpyHostToDevice) != cudaSuccess)
            throw std::runtime_error("cudaMemcpy to the device failed");
        if (!p.empty() && cudaMemcpy(ptrs.get(), p.data(), p.size() * sizeof(T*), cudaMemcpyHostToDevice) != cudaSuccess)
            throw std::runtime_error("cudaMemcpy to the device failed");
    }
    std::size_t stride() const { return static_cast<std::size_t>(ld) * cols; }
    std::vector<HostMatrix<T>> download() const {
        std::vector<T> staging(stride() * count);
        if (!staging.empty() &&
            cudaMemcpy(staging.data(), data.get(), staging.size() * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess)
            throw std::runtime_error("cudaMemcpy to the host failed");
        std::vector<HostMatrix<T>> hs(count, HostMatrix<T>(rows, cols, ld));
        for (int b = 0; b < count; ++b)
            std::copy(staging.begin() + b * stride(), staging.begin() + (b + 1) * stride(), hs[b].data.begin());
        return hs;
    }
};

std::vector<int> download_ints(const DeviceBuffer<int>& d) {
    std::vector<int> h(d.size());
    if (!h.empty() && cudaMemcpy(h.data(), d.get(), h.size() * sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess)
        throw std::runtime_error("cudaMemcpy to the host failed");
    return h;
}

DeviceBuffer<int> upload_ints(const std::vector<int>& h) {
    DeviceBuffer<int> d(h.size());
    if (!h.empty() && cudaMemcpy(d.get(), h.data(), h.size() * sizeof(int), cudaMemcpyHostToDevice) != cudaSuccess)
        throw std::runtime_error("cudaMemcpy to the device failed");
    return d;
}

/// ||P A - L U||_1 / (n ||A||_1 eps) of getrf's output F and 1-based pivots (checked in range
/// first: an out-of-range pivot gives +Inf, a failure).
template <class T>
double lu_residual(const HostMatrix<T>& A, const HostMatrix<T>& F, const int* ipiv) {
    const int n = A.n;
    if (n == 0) return 0.0;
    for (int i = 0; i < n; ++i)
        if (ipiv[i] < i + 1 || ipiv[i] > n) return std::numeric_limits<double>::infinity();
    std::vector<double> R(static_cast<std::size_t>(n) * n);
    auto r = [&](int i, int j) -> double& { return R[i + static_cast<std::size_t>(j) * n]; };
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) r(i, j) = A(i, j);
    for (int i = 0; i < n; ++i)
        if (ipiv[i] - 1 != i)
            for (int j = 0; j < n; ++j) std::swap(r(i, j), r(ipiv[i] - 1, j));
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) {
            double lu = 0.0;
            const int top = std::min(i, j);
            for (int p = 0; p < top; ++p) lu += static_cast<double>(F(i, p)) * static_cast<double>(F(p, j));
            lu += (i <= j) ? static_cast<double>(F(i, j)) : static_cast<double>(F(i, j)) * static_cast<double>(F(j, j));
            r(i, j) -= lu;
        }
    double rnorm = 0.0, anorm = 0.0;
    for (int j = 0; j < n; ++j) {
        double rs = 0.0, as = 0.0;
        for (int i = 0; i < n; ++i) {
            rs += std::abs(r(i, j));
            as += std::abs(static_cast<double>(A(i, j)));
        }
        if (std::isnan(rs)) return rs;
        rnorm = std::max(rnorm, rs);
        anorm = std::max(anorm, as);
    }
    if (anorm == 0.0) return rnorm == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();  // A = 0 (planted)
    return rnorm / (n * anorm * static_cast<double>(ScalarTraits<T>::eps));
}

/// What a getrf call on a batch returns, and LAPACK's answer on the same matrices.
template <class T>
struct LuRun {
    std::vector<HostMatrix<T>> inputs, factors, lapack;
    std::vector<int> ipiv, info, lapack_ipiv, lapack_info;
};

template <class T>
class BatchedLu : public CudaHandlesTest {
public:
    BatchedLu() : CudaHandlesTest("batched LU") {}
    using SeededTest::seed;

    bc::Launch launch(std::size_t bytes) { return bc::Launch{stream_, blas_, workspace(bytes), bytes}; }

    std::vector<HostMatrix<T>> random_batch(int n, int ld, int count, std::uint64_t salt = 0) {
        std::vector<HostMatrix<T>> hs;
        hs.reserve(count);
        for (int b = 0; b < count; ++b)
            hs.push_back(random_matrix<T>(n, n, ld, seed() * 7919 + salt * 1000003 + static_cast<std::uint64_t>(b)));
        return hs;
    }

    /// Our getrf on `inputs` and LAPACK's on copies; ipiv and info poisoned before the call.
    LuRun<T> run_getrf(std::vector<HostMatrix<T>> inputs) {
        LuRun<T> run;
        const int count = static_cast<int>(inputs.size());
        const int n = count > 0 ? inputs[0].n : 0, ld = count > 0 ? inputs[0].ld : 1;
        DeviceBatch<T> dev(inputs);
        DeviceBuffer<int> ipiv = upload_ints(std::vector<int>(static_cast<std::size_t>(count) * n, -99));
        DeviceBuffer<int> info = upload_ints(std::vector<int>(count, -99));
        const std::size_t bytes = bc::getrf_workspace<T>(n, count);
        bc::getrf<T>(launch(bytes), n, dev.ptrs.get(), ld, ipiv.get(), info.get(), count);
        EXPECT_TRUE(sync());
        run.factors = dev.download();
        run.ipiv = download_ints(ipiv);
        run.info = download_ints(info);
        run.lapack = inputs;
        run.lapack_ipiv.assign(static_cast<std::size_t>(count) * n, 0);
        run.lapack_info.assign(count, 0);
        for (int b = 0; b < count; ++b)
            run.lapack_info[b] = n == 0 ? 0
                                        : blas::getrf(n, n, run.lapack[b].ptr(), ld,
                                                      run.lapack_ipiv.data() + static_cast<std::size_t>(b) * n);
        run.inputs = std::move(inputs);
        return run;
    }

    /// Matrix b of a run matches LAPACK: same info, padding still poisoned, residual < 30, and
    /// in double the same pivots. Pivots may legitimately differ under (near-)ties only: on
    /// uniform random data that has probability about n^2 eps per matrix, negligible in double;
    /// in float it happens, so float asserts the residual and the pivots' range only.
    void expect_matches_lapack(const LuRun<T>& run, int b) {
        const int n = run.inputs[b].n;
        SCOPED_TRACE("matrix " + std::to_string(b) + " of " + std::to_string(run.inputs.size()) + ", n = " +
                     std::to_string(n));
        EXPECT_EQ(run.info[b], run.lapack_info[b]);
        EXPECT_EQ(non_nan_in_padding(run.factors[b]), 0);
        const int* ipiv = run.ipiv.data() + static_cast<std::size_t>(b) * n;
        EXPECT_PRED_FORMAT1(ResidualPasses, lu_residual(run.inputs[b], run.factors[b], ipiv));
        if (std::is_same_v<T, double>) {
            const int* lap = run.lapack_ipiv.data() + static_cast<std::size_t>(b) * n;
            EXPECT_TRUE(std::equal(ipiv, ipiv + n, lap)) << "pivots differ from LAPACK's";
        }
    }

    void check_sizes(int n, int count) {
        SCOPED_TRACE("n = " + std::to_string(n) + ", count = " + std::to_string(count));
        const LuRun<T> run = run_getrf(random_batch(n, n + 3, count));
        for (int b = 0; b < count; ++b) {
            expect_matches_lapack(run, b);
            if (::testing::Test::HasFailure()) return;  // one matrix's report is enough
        }
    }
};

using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(BatchedLu, Precisions);

TYPED_TEST(BatchedLu, SmallSizesMatchLapack) {
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65}) this->check_sizes(n, 300);
}

// Every order served by the register kernel's widest instance (lu_small.cuh, one row per lane of
// a whole warp), with 97 matrices: the last block of the grid is partly idle.
TYPED_TEST(BatchedLu, EveryOrderFrom17To32MatchesLapack) {
    for (int n = 17; n <= 32; ++n) this->check_sizes(n, 97);
}

TYPED_TEST(BatchedLu, BlockedSizesMatchLapack) {
    for (int n : {127, 128, 129}) this->check_sizes(n, 40);
    this->check_sizes(255, 7);
    this->check_sizes(512, 7);
}

// Panels taller than 512 rows take the global-memory panel kernel.
TYPED_TEST(BatchedLu, LargerThan512MatchesLapack) { this->check_sizes(600, 2); }

TYPED_TEST(BatchedLu, Counts) {
    for (int n : {5, 32, 100})
        for (int count : {0, 1, 7, 300}) this->check_sizes(n, count);
}

// More matrices than the device holds at once: each group of the register kernel goes through
// several of them (prefetching the next).
TYPED_TEST(BatchedLu, TenThousandMatrices) {
    for (int n : {3, 16, 32}) this->check_sizes(n, 10000);
}

// Orders 17 to 32 in more matrices than the warp kernel's grid holds (20 per SM; 2640 on an
// H100 or H200): in double, the half kernel (half a row in registers, the pivots applied four at
// a time), with zero pivots planted at count/4, count/2 and count-1 and a NaN in one matrix.
TYPED_TEST(BatchedLu, ManyMatricesOfOrders17To32) {
    const int count = 4000;
    for (int n = 17; n <= 32; ++n) {
        SCOPED_TRACE("n = " + std::to_string(n));
        auto hs = this->random_batch(n, n + 1 + n % 3, count, 11);
        const int where[3] = {count / 4, count / 2, count - 1};
        const int column[3] = {1, n / 2 + 1, n};  // both halves and the last column
        for (int f = 0; f < 3; ++f)
            for (int i = 0; i < n; ++i) hs[where[f]](i, column[f] - 1) = TypeParam(0);
        const int nan_at = count / 3;
        hs[nan_at](n / 2, n - 1) = nan<TypeParam>();
        const LuRun<TypeParam> run = this->run_getrf(std::move(hs));
        for (int f = 0; f < 3; ++f) EXPECT_EQ(run.info[where[f]], column[f]) << "matrix " << where[f];
        for (int b = 0; b < count; ++b) {
            if (b == nan_at) {
                const int* ipiv = run.ipiv.data() + static_cast<std::size_t>(b) * n;
                for (int i = 0; i < n; ++i) EXPECT_TRUE(ipiv[i] >= i + 1 && ipiv[i] <= n) << "pivot " << i;
                EXPECT_GT(non_finite(run.factors[b]), 0);
                EXPECT_EQ(non_nan_in_padding(run.factors[b]), 0);
            } else {
                this->expect_matches_lapack(run, b);
            }
        }
        if (::testing::Test::HasFailure()) return;
    }
}

// The half kernel (a batch larger than the warp kernel's grid: 4000 is, on devices of up to 200
// SMs) applies the pivots four at a time as w V, w = l L^-1 (in panels of 4 columns and to the
// right half), where the warp kernel (300 matrices: one grid on any device of 15 SMs or more)
// applies them one at a time:
// on the same matrices the same pivots and info, and factors within 100 n eps of each other,
// relative to the largest entry, at every order from 17 to 32.
class BatchedLuDouble : public BatchedLu<double> {};

TEST_F(BatchedLuDouble, HalfKernelAgreesWithWarpKernel) {
    const int count = 4000, few = 300;
    for (int n = 17; n <= 32; ++n) {
        SCOPED_TRACE("n = " + std::to_string(n));
        auto hs = random_batch(n, n, count, 23);
        std::vector<HostMatrix<double>> first(hs.begin(), hs.begin() + few);
        const LuRun<double> all = run_getrf(std::move(hs)), part = run_getrf(std::move(first));
        for (int b = 0; b < few; ++b) {
            SCOPED_TRACE("matrix " + std::to_string(b));
            const auto at = [&](const std::vector<int>& v) {
                return std::vector<int>(v.begin() + static_cast<std::ptrdiff_t>(b) * n,
                                        v.begin() + static_cast<std::ptrdiff_t>(b + 1) * n);
            };
            ASSERT_EQ(at(all.ipiv), at(part.ipiv));
            ASSERT_EQ(all.info[b], part.info[b]);
            const double scale = max_abs(part.factors[b]);
            ASSERT_GT(scale, 0.0);
            ASSERT_LE(max_abs_diff(all.factors[b], part.factors[b]),
                      100.0 * n * std::numeric_limits<double>::epsilon() * scale);
        }
    }
}

TYPED_TEST(BatchedLu, OrderZeroWritesInfoOnly) {
    for (int count : {1, 7}) {
        DeviceBuffer<int> info = upload_ints(std::vector<int>(count, -99));
        DeviceBuffer<int> ipiv(1);
        bc::getrf<TypeParam>(this->launch(bc::getrf_workspace<TypeParam>(0, count)), 0, nullptr, 1, ipiv.get(),
                             info.get(), count);
        ASSERT_TRUE(this->sync());
        EXPECT_EQ(download_ints(info), std::vector<int>(count, 0));
    }
    // count 0: nothing is touched (null arrays).
    bc::getrf<TypeParam>(this->launch(bc::getrf_workspace<TypeParam>(9, 0)), 9, nullptr, 9, nullptr, nullptr, 0);
    EXPECT_TRUE(this->sync());
}

// A zero column k (1-based) makes U(k, k) exactly zero: LAPACK's info is k. Planted in three
// matrices with three different k; every info must equal LAPACK's, the others stay 0.
TYPED_TEST(BatchedLu, PlantedFailuresReportedPerMatrix) {
    for (int n : {1, 5, 16, 32, 33, 64, 100, 255}) {
        const int count = n > 64 ? 24 : 300;
        SCOPED_TRACE("n = " + std::to_string(n) + ", count = " + std::to_string(count));
        auto hs = this->random_batch(n, n + 2, count);
        const int where[3] = {count / 4, count / 2, count - 1};
        const int column[3] = {1, n / 2 + 1, n};
        for (int f = 0; f < 3; ++f)
            for (int i = 0; i < n; ++i) hs[where[f]](i, column[f] - 1) = TypeParam(0);
        const LuRun<TypeParam> run = this->run_getrf(std::move(hs));
        for (int f = 0; f < 3; ++f) {
            EXPECT_EQ(run.lapack_info[where[f]], column[f]) << "LAPACK's info on the planted matrix";
            EXPECT_EQ(run.info[where[f]], column[f]) << "matrix " << where[f];
        }
        for (int b = 0; b < count; ++b) this->expect_matches_lapack(run, b);
        if (::testing::Test::HasFailure()) return;
    }
}

// A NaN (and, in another matrix, an Inf and a whole NaN column) confined to its matrix: the
// others match LAPACK; the poisoned ones finish with pivots in range and non-finite factors.
// What info says for them is not specified (a NaN pivot is not an exact zero).
TYPED_TEST(BatchedLu, NonFiniteEntriesStayInTheirMatrix) {
    for (int n : {3, 16, 32, 33, 64, 100, 255}) {
        const int count = n > 64 ? 24 : 300;
        SCOPED_TRACE("n = " + std::to_string(n));
        auto hs = this->random_batch(n, n + 1, count);
        std::mt19937_64 gen(this->seed() + static_cast<std::uint64_t>(n));
        std::uniform_int_distribution<int> pick(0, n - 1);
        const int nan_at = count / 2, inf_at = count / 4, column_at = count - 1;
        hs[nan_at](pick(gen), pick(gen)) = nan<TypeParam>();
        hs[inf_at](pick(gen), pick(gen)) = std::numeric_limits<TypeParam>::infinity();
        const int c = pick(gen);
        for (int i = 0; i < n; ++i) hs[column_at](i, c) = nan<TypeParam>();
        const LuRun<TypeParam> run = this->run_getrf(std::move(hs));
        for (int b = 0; b < count; ++b) {
            const int* ipiv = run.ipiv.data() + static_cast<std::size_t>(b) * n;
            if (b == nan_at || b == inf_at || b == column_at) {
                for (int i = 0; i < n; ++i) {
                    EXPECT_GE(ipiv[i], i + 1) << "matrix " << b << ", pivot " << i;
                    EXPECT_LE(ipiv[i], n) << "matrix " << b << ", pivot " << i;
                }
                EXPECT_GE(run.info[b], 0);
                EXPECT_LE(run.info[b], n);
                EXPECT_GT(non_finite(run.factors[b]), 0) << "matrix " << b << ": the non-finite entry vanished";
                EXPECT_EQ(non_nan_in_padding(run.factors[b]), 0);
            } else {
                this->expect_matches_lapack(run, b);
            }
        }
        if (::testing::Test::HasFailure()) return;
    }
}

// ---- getrs ------------------------------------------------------------------------------------

template <class T>
class BatchedLuSolve : public BatchedLu<T> {};
TYPED_TEST_SUITE(BatchedLuSolve, Precisions);

/// Solves from LAPACK's factors with our getrs (and, `ours`, from our getrf's): the backward
/// error against the original A is below 30, the padding of B stays poisoned, and X agrees
/// with LAPACK's getrs on the same factors up to the conditioning of A.
template <class T>
void check_solve(BatchedLu<T>& test, int n, int nrhs, int count, bool ours) {
    SCOPED_TRACE("n = " + std::to_string(n) + ", nrhs = " + std::to_string(nrhs) + ", count = " +
                 std::to_string(count) + (ours ? ", our factors" : ", LAPACK's factors"));
    LuRun<T> run = test.run_getrf(test.random_batch(n, n + 3, count));
    std::vector<HostMatrix<T>> rhs;
    for (int b = 0; b < count; ++b)
        rhs.push_back(random_matrix<T>(n, nrhs, n + 2, test.seed() * 31 + 17 + static_cast<std::uint64_t>(b)));
    DeviceBatch<T> factors(ours ? run.factors : run.lapack);
    DeviceBuffer<int> ipiv = upload_ints(ours ? run.ipiv : run.lapack_ipiv);
    DeviceBatch<T> dev_b(rhs);
    const std::size_t bytes = bc::getrs_workspace<T>(n, nrhs, count);
    bc::getrs<T>(test.launch(bytes), n, nrhs, factors.ptrs.get(), n + 3, ipiv.get(),
                 dev_b.ptrs.get(), n + 2, count);
    ASSERT_TRUE(test.sync());
    const auto x = dev_b.download();
    for (int b = 0; b < count; ++b) {
        SCOPED_TRACE("matrix " + std::to_string(b));
        EXPECT_PRED_FORMAT1(ResidualPasses, solve_residual(run.inputs[b], x[b], rhs[b]));
        EXPECT_EQ(non_nan_in_padding(x[b]), 0);
        if (!ours) {
            HostMatrix<T> ref = rhs[b];
            blas::getrs('N', n, nrhs, run.lapack[b].ptr(), n + 3,
                        run.lapack_ipiv.data() + static_cast<std::size_t>(b) * n, ref.ptr(), ref.ld);
            // Same factors and the same order of operations up to summation order: the
            // difference is a rounding error amplified by cond(A) (moderate for random A).
            const double tol = 1e4 * n * static_cast<double>(ScalarTraits<T>::eps) * std::max(1.0, max_abs(ref));
            EXPECT_LE(max_abs_diff(x[b], ref), tol);
        }
        if (::testing::Test::HasFailure()) return;
    }
}

TYPED_TEST(BatchedLuSolve, SizesAndRightHandSides) {
    for (int n : {1, 2, 5, 8, 16, 17, 31, 32, 33, 64, 65, 100})
        for (int nrhs : {1, 3, 16, 33}) check_solve<TypeParam>(*this, n, nrhs, n > 64 ? 20 : 100, false);
    // The block kernel's orders and right-hand sides: one group, a full and a partial one.
    for (int n : {128, 255, 256, 512})
        for (int nrhs : {1, 16, 17}) check_solve<TypeParam>(*this, n, nrhs, 4, false);
    // Eight columns of 800 do not fit in shared memory: the kernel works in B itself.
    check_solve<TypeParam>(*this, 800, 9, 2, false);
}

TYPED_TEST(BatchedLuSolve, AfterOurFactorization) {
    for (int n : {7, 32, 64, 129, 512}) check_solve<TypeParam>(*this, n, 5, n > 64 ? 6 : 300, true);
}

TYPED_TEST(BatchedLuSolve, EmptyCallsDoNothing) {
    // count 0, n 0 and nrhs 0 return before touching any array.
    bc::getrs<TypeParam>(this->launch(0), 5, 2, nullptr, 5, nullptr, nullptr, 5, 0);
    bc::getrs<TypeParam>(this->launch(0), 0, 2, nullptr, 1, nullptr, nullptr, 1, 3);
    bc::getrs<TypeParam>(this->launch(0), 5, 0, nullptr, 5, nullptr, nullptr, 5, 3);
    EXPECT_TRUE(this->sync());
}

}  // namespace
}  // namespace starfact::test
