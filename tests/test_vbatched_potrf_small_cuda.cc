// Variable-size batched Cholesky with a largest order of at most 32 (batched::cuda::vpotrf hands
// such batches to potrf.cu's register kernel, which then reads each matrix's own order and
// leading dimension; issue 6) against LAPACKE on the same matrices. Every largest order 1..32
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
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "batched/cuda/vbatched_kernels.hpp"
#include "common/blas.hpp"
#include "common/checks.hpp"
#include "cuda_test_support.hpp"
#include "test_support.hpp"

namespace starfact::test {
namespace {

namespace bc = starfact::batched::cuda;

char other(char uplo) { return uplo == 'L' ? 'U' : 'L'; }

/// A batch: the matrices (the uplo triangle stored, the other NaN) and LAPACK's info on each.
template <class T>
struct SmallCase {
    char uplo = 'L';
    std::vector<HostMatrix<T>> A;
    std::vector<int> expected;
    std::vector<bool> nan;  // a NaN planted (LAPACKE's potrf is then no reference: it may refuse NaN input)
};

/// Orders uniform in [0, nmax] or skewed; the largest order present once at count / 3.
std::vector<int> draw(bool skewed, int nmax, int count, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int> n(count);
    for (int& v : n)
        v = !skewed ? static_cast<int>(rng() % (nmax + 1))
                    : (rng() % 100 == 0 ? nmax : 1 + static_cast<int>(rng() % std::max(1, nmax / 10)));
    if (count > 0) n[count / 3] = nmax;
    return n;
}

/// SPD matrices of orders n, lda n + b % 3; with plant, failures at count/4, count/2, count-1
/// (order raised to 1 there) with minors 1, n/2+1, n; nans: (matrix, row, column) of planted NaNs
/// (in the stored triangle: the indices are those of the lower view).
template <class T>
SmallCase<T> make(char uplo, std::vector<int> n, bool plant, std::uint64_t seed,
                  const std::vector<std::array<int, 3>>& nans = {}) {
    const int count = static_cast<int>(n.size());
    SmallCase<T> c;
    c.uplo = uplo;
    c.expected.assign(count, 0);
    c.nan.assign(count, false);
    std::vector<int> at;
    if (plant && count > 0) at = {count / 4, count / 2, count - 1};
    for (int b : at) n[b] = std::max(n[b], 1);
    for (int b = 0; b < count; ++b) c.A.push_back(random_spd<T>(n[b], n[b] + b % 3, seed + 7919ULL * b));
    std::set<int> seen;
    for (std::size_t f = 0; f < at.size(); ++f) {
        const int b = at[f];
        if (!seen.insert(b).second) continue;
        const int k = f == 0 ? 1 : f == 1 ? n[b] / 2 + 1 : n[b];
        c.A[b] = spd_failing_at<T>(n[b], k, n[b] + b % 3, seed + 7919ULL * b);
        c.expected[b] = k;
    }
    for (const auto& [b, i, j] : nans) {
        c.nan[b] = true;
        if (uplo == 'L')
            c.A[b](i, j) = nan<T>();
        else
            c.A[b](j, i) = nan<T>();
    }
    for (int b = 0; b < count; ++b) {
        poison_strict_triangle(c.A[b], other(uplo));
        if (!nans.empty()) c.expected[b] = reference_potrf_info(uplo, c.A[b]);
    }
    return c;
}

template <class T>
HostMatrix<T> leading(const HostMatrix<T>& A, int k) {
    HostMatrix<T> B(k, k, k);
    for (int j = 0; j < k; ++j)
        for (int i = 0; i < k; ++i) B(i, j) = A(i, j);
    return B;
}

template <class T>
class VBatchedPotrfSmallCuda : public CudaHandlesTest {
protected:
    VBatchedPotrfSmallCuda() : CudaHandlesTest("variable-size batched Cholesky (register kernel)") {}

    /// Factors c with schedule s (nmax: the largest order, or larger) and checks every matrix.
    void factor_and_check(const SmallCase<T>& c, bc::Schedule s, int nmax = -1) {
        const int count = static_cast<int>(c.A.size());
        for (const auto& A : c.A) nmax = std::max(nmax, A.n);
        // The matrices back to back (an access past one lands in its neighbour's poison).
        std::vector<std::size_t> off(count + 1, 0);
        std::vector<int> n(count), ld(count);
        for (int b = 0; b < count; ++b) {
            n[b] = c.A[b].n;
            ld[b] = c.A[b].ld;
            off[b + 1] = off[b] + c.A[b].data.size();
        }
        DeviceBuffer<T> data(std::max<std::size_t>(off[count], 1));
        DeviceBuffer<T*> ptrs(std::max(count, 1));
        DeviceBuffer<int> dn(std::max(count, 1)), dld(std::max(count, 1)), info(std::max(count, 1));
        std::vector<T> flat(off[count]);
        std::vector<T*> p(count);
        for (int b = 0; b < count; ++b) {
            std::copy(c.A[b].data.begin(), c.A[b].data.end(), flat.begin() + off[b]);
            p[b] = data.get() + off[b];
        }
        auto up = [](void* to, const void* from, std::size_t bytes) {
            if (bytes > 0) {
                EXPECT_TRUE(cuda_ok(cudaMemcpy(to, from, bytes, cudaMemcpyHostToDevice)));
            }
        };
        up(data.get(), flat.data(), flat.size() * sizeof(T));
        up(ptrs.get(), p.data(), p.size() * sizeof(T*));
        up(dn.get(), n.data(), n.size() * sizeof(int));
        up(dld.get(), ld.data(), ld.size() * sizeof(int));
        ASSERT_TRUE(cuda_ok(cudaMemset(info.get(), 0x5a, info.size() * sizeof(int))));  // poison
        bc::Launch l;
        l.stream = stream_;
        l.cublas = blas_;
        bc::vpotrf<T>(l, c.uplo == 'L' ? bc::Uplo::lower : bc::Uplo::upper, s, nmax, dn.get(), ptrs.get(), dld.get(),
                      info.get(), count);
        ASSERT_TRUE(this->sync());
        std::vector<int> got(count);
        if (count > 0) {
            ASSERT_TRUE(cuda_ok(cudaMemcpy(flat.data(), data.get(), flat.size() * sizeof(T), cudaMemcpyDeviceToHost)));
            ASSERT_TRUE(cuda_ok(cudaMemcpy(got.data(), info.get(), count * sizeof(int), cudaMemcpyDeviceToHost)));
        }
        const double eps = ScalarTraits<T>::eps;
        int reported = 0;
        auto report = [&](int b, const std::string& what) {
            ADD_FAILURE() << (s == bc::Schedule::ssde ? "ssde" : "dsse") << ", uplo " << c.uplo << ", nmax " << nmax
                          << ", count " << count << ", matrix " << b << " (n " << n[b] << ", lda " << ld[b]
                          << "): " << what;
            return ++reported >= 5;
        };
        for (int b = 0; b < count; ++b) {
            const auto& A = c.A[b];
            HostMatrix<T> F(A.m, A.n, A.ld);
            std::copy(flat.begin() + off[b], flat.begin() + off[b + 1], F.data.begin());
            if (got[b] != c.expected[b]) {
                std::ostringstream m;
                m << "info " << got[b] << ", LAPACK's " << c.expected[b];
                if (report(b, m.str())) break;
                continue;
            }
            if (non_nan_in_strict_triangle(F, other(c.uplo)) != 0 && report(b, "the other triangle was written")) break;
            if (non_nan_in_padding(F) != 0 && report(b, "the padding was written")) break;
            const int k = c.expected[b] == 0 ? n[b] : c.expected[b] - 1;
            if (c.nan[b]) {  // info checked against the reference; the factor before the NaN pivot below
                if (k > 0 && !checks::passes(potrf_residual(c.uplo, leading(A, k), leading(F, k))) &&
                    report(b, "residual of the factor before the NaN pivot"))
                    break;
                continue;
            }
            HostMatrix<T> L = A;
            const int linfo = n[b] > 0 ? blas::potrf(c.uplo, n[b], L.ptr(), L.ld) : 0;
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

using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(VBatchedPotrfSmallCuda, Precisions);

// Every largest order 1..32 (each of the kernel's bounds and its edges), both distributions,
// both triangles, planted failures; the schedules run the same kernel.
TYPED_TEST(VBatchedPotrfSmallCuda, EveryLargestOrderAgainstLapack) {
    using T = TypeParam;
    for (int nmax = 1; nmax <= 32; ++nmax)
        for (bool skewed : {false, true})
            for (char uplo : {'L', 'U'}) {
                SCOPED_TRACE(::testing::Message() << (skewed ? "skewed" : "uniform") << ", nmax " << nmax << ", uplo "
                                                  << uplo);
                const std::uint64_t s = this->seed() + 1009ULL * nmax + (skewed ? 7 : 0) + uplo;
                const auto c = make<T>(uplo, draw(skewed, nmax, 300, s), true, s);
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
        this->factor_and_check(make<T>(uplo, draw(false, 32, 10000, s + 3), true, s + 3), bc::Schedule::dsse);
        this->factor_and_check(make<T>(uplo, draw(true, 32, 10000, s + 4), true, s + 4), bc::Schedule::ssde);
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
            auto n = draw(false, nmax, 40, this->seed() + nmax);
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
