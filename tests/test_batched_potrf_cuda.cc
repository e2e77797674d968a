// The batched CUDA Cholesky kernels (batched::cuda::potrf, potrs) against LAPACK on the same
// matrices: every info exact (planted failures at count/4, count/2 and count-1, a NaN in one
// matrix), every factor's residual ||A - L L^T||_1 / (n ||A||_1 eps) below 30 and close to
// LAPACKE's factor, the other triangle and the padding still NaN afterwards (never read into a
// result, never written), the solves' backward error below 30 and close to LAPACKE's potrs.
// Every test skips, visibly, on a machine without a CUDA device.
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

#include "batched/cuda/kernels.hpp"
#include "common/blas.hpp"
#include "cuda_test_support.hpp"
#include "test_support.hpp"

namespace starfact::test {
namespace {

namespace bc = starfact::batched::cuda;

/// count matrices of ld x cols each, back to back in one device buffer (so an access past one
/// matrix lands in its neighbour's poisoned padding), and the array of their pointers.
template <class T>
struct DeviceBatch {
    int m = 0, cols = 0, ld = 1, count = 0;
    DeviceBuffer<T> data;
    DeviceBuffer<T*> ptrs;

    explicit DeviceBatch(const std::vector<HostMatrix<T>>& h)
        : m(h.empty() ? 0 : h[0].m),
          cols(h.empty() ? 0 : h[0].n),
          ld(h.empty() ? 1 : h[0].ld),
          count(static_cast<int>(h.size())),
          data(stride() * h.size()),
          ptrs(h.size()) {
        std::vector<T*> p(h.size());
        for (std::size_t b = 0; b < h.size(); ++b) {
            p[b] = data.get() + b * stride();
            if (stride() > 0 &&
                cudaMemcpy(p[b], h[b].ptr(), stride() * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess)
                throw std::runtime_error("cudaMemcpy to the device failed");
        }
        if (!p.empty() &&
            cudaMemcpy(ptrs.get(), p.data(), p.size() * sizeof(T*), cudaMemcpyHostToDevice) != cudaSuccess)
            throw std::runtime_error("cudaMemcpy of the pointers failed");
    }
    std::size_t stride() const { return static_cast<std::size_t>(ld) * cols; }
    std::vector<HostMatrix<T>> download() const {
        std::vector<HostMatrix<T>> h(count, HostMatrix<T>(m, cols, ld));
        for (int b = 0; b < count; ++b)
            if (stride() > 0 && cudaMemcpy(h[b].ptr(), data.get() + b * stride(), stride() * sizeof(T),
                                           cudaMemcpyDeviceToHost) != cudaSuccess)
                throw std::runtime_error("cudaMemcpy to the host failed");
        return h;
    }
};

std::vector<int> download_ints(const DeviceBuffer<int>& d) {
    std::vector<int> h(d.size());
    if (!h.empty() && cudaMemcpy(h.data(), d.get(), h.size() * sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess)
        throw std::runtime_error("cudaMemcpy to the host failed");
    return h;
}

char other(char uplo) { return uplo == 'L' ? 'U' : 'L'; }
bc::Uplo to_uplo(char uplo) { return uplo == 'L' ? bc::Uplo::lower : bc::Uplo::upper; }

/// One batch to factor: the matrices (the uplo triangle stored, the other one NaN) and the
/// info LAPACK gives on each.
template <class T>
struct Case {
    char uplo = 'L';
    int n = 0;
    std::vector<HostMatrix<T>> A;
    std::vector<int> expected;
    std::vector<bool> nan_planted;
};

/// count SPD matrices of order n (ld = lda); failures at fail_at[i] with minor fail_k[i].
template <class T>
Case<T> make_case(char uplo, int n, int lda, int count, const std::vector<int>& fail_at, const std::vector<int>& fail_k,
                  std::uint64_t seed) {
    Case<T> c;
    c.uplo = uplo;
    c.n = n;
    c.A.reserve(count);
    c.expected.assign(count, 0);
    c.nan_planted.assign(count, false);
    for (int b = 0; b < count; ++b) c.A.push_back(random_spd<T>(n, lda, seed + 7919ULL * b));
    for (std::size_t f = 0; f < fail_at.size(); ++f) {
        const int b = fail_at[f];
        c.A[b] = spd_failing_at<T>(n, fail_k[f], lda, seed + 7919ULL * b);
        c.expected[b] = fail_k[f];
    }
    for (auto& A : c.A) poison_strict_triangle(A, other(uplo));
    return c;
}

/// Planted failures at count/4, count/2 and count-1 (distinct places only), minors 1, n/2+1, n.
void planted(int count, int n, std::vector<int>& at, std::vector<int>& k) {
    const int places[3] = {count / 4, count / 2, count - 1};
    const int minors[3] = {1, n / 2 + 1, n};
    std::set<int> seen;
    for (int i = 0; i < 3; ++i)
        if (count > 0 && n > 0 && seen.insert(places[i]).second) {
            at.push_back(places[i]);
            k.push_back(minors[i]);
        }
}

template <class T>
class BatchedPotrfCuda : public CudaHandlesTest {
protected:
    BatchedPotrfCuda() : CudaHandlesTest("batched Cholesky") {}

    bc::Launch launch(std::size_t bytes) {
        bc::Launch l;
        l.stream = stream_;
        l.cublas = blas_;
        l.workspace = workspace(bytes);
        l.workspace_bytes = bytes;
        return l;
    }

    /// Runs batched potrf on c and checks every matrix; stops after a few reported failures.
    /// strided: through potrf_strided (the batch is one array, matrix b at b * ld * n).
    void factor_and_check(const Case<T>& c, bool strided = false) {
        const int count = static_cast<int>(c.A.size());
        DeviceBatch<T> d(c.A);
        DeviceBuffer<int> info(count);
        if (count > 0) {
            ASSERT_TRUE(cuda_ok(cudaMemset(info.get(), 0x5a, count * sizeof(int))));  // poison
        }
        if (strided)
            bc::potrf_strided<T>(launch(bc::potrf_workspace<T>(c.n, count)), to_uplo(c.uplo), c.n, d.ptrs.get(),
                                 d.data.get(), static_cast<long long>(d.stride()), d.ld, info.get(), count);
        else
            bc::potrf<T>(launch(bc::potrf_workspace<T>(c.n, count)), to_uplo(c.uplo), c.n, d.ptrs.get(), d.ld,
                         info.get(), count);
        ASSERT_TRUE(this->sync());
        const auto F = d.download();
        const auto got = download_ints(info);
        const double eps = ScalarTraits<T>::eps;
        int reported = 0;
        auto report = [&](int b, const std::string& what) {
            ADD_FAILURE() << "uplo " << c.uplo << ", n " << c.n << ", lda " << d.ld << ", count " << count
                          << ", matrix " << b << ": " << what;
            return ++reported >= 5;
        };
        for (int b = 0; b < count; ++b) {
            const auto& A = c.A[b];
            if (got[b] != c.expected[b]) {
                std::ostringstream s;
                s << "info " << got[b] << ", LAPACK's " << c.expected[b];
                if (report(b, s.str())) return;
                continue;
            }
            if (non_nan_in_strict_triangle(F[b], other(c.uplo)) != 0 && report(b, "the other triangle was written"))
                return;
            if (non_nan_in_padding(F[b]) != 0 && report(b, "the padding was written")) return;
            if (c.expected[b] != 0 && !c.nan_planted[b]) {  // the planted minor is LAPACKE's info too
                HostMatrix<T> L = A;
                const int linfo = blas::potrf(c.uplo, c.n, L.ptr(), L.ld);
                if (linfo != c.expected[b]) {
                    std::ostringstream s;
                    s << "LAPACKE's info " << linfo << " differs from the planted minor " << c.expected[b];
                    if (report(b, s.str())) return;
                }
            }
            const int k = c.expected[b] == 0 ? c.n : c.expected[b] - 1;  // the final leading block
            if (k == 0) continue;
            const HostMatrix<T> Ak = leading(A, k), Fk = leading(F[b], k);
            const double r = potrf_residual(c.uplo, Ak, Fk);
            if (!(checks::passes(r) && r >= 0)) {
                std::ostringstream s;
                s << "residual of the leading " << k << " x " << k << " factor " << r;
                if (report(b, s.str())) return;
            }
            if (c.expected[b] == 0) {
                HostMatrix<T> L = A;
                const int linfo = blas::potrf(c.uplo, c.n, L.ptr(), L.ld);
                if (linfo != 0 && report(b, "LAPACKE refused a matrix we factored")) return;
                const double diff = max_abs_diff(F[b], L, c.uplo);
                const double tol = 100.0 * c.n * eps * std::max(1.0, max_abs(L, c.uplo));
                if (!(diff <= tol)) {
                    std::ostringstream s;
                    s << "max |L - L_lapack| = " << diff << " > " << tol;
                    if (report(b, s.str())) return;
                }
            }
        }
    }

    /// potrs on count systems of order n with nrhs right-hand sides (B's ld n + 2) from
    /// LAPACKE's factors: backward error on the original system below 30, X close to LAPACKE's
    /// potrs, the factor and B's padding untouched.
    void solve_and_check(char uplo, int n, int nrhs, int count, std::uint64_t s) {
        const double eps = ScalarTraits<T>::eps;
        SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", n " << n << ", nrhs " << nrhs << ", count "
                                          << count);
        std::vector<HostMatrix<T>> A, F, B, X;
        for (int b = 0; b < count; ++b) {
            A.push_back(random_spd<T>(n, n + 1, s + b));
            HostMatrix<T> f = A.back();
            poison_strict_triangle(f, other(uplo));
            ASSERT_EQ(blas::potrf(uplo, n, f.ptr(), f.ld), 0);
            F.push_back(f);
            HostMatrix<T> rhs = random_matrix<T>(n, nrhs, n + 2, s + 5 * b + 1);
            B.push_back(rhs);
            ASSERT_EQ(blas::potrs(uplo, n, nrhs, f.ptr(), f.ld, rhs.ptr(), rhs.ld), 0);
            X.push_back(rhs);
        }
        DeviceBatch<T> dA(F), dB(B);
        bc::potrs<T>(launch(bc::potrs_workspace<T>(n, nrhs, count)), to_uplo(uplo), n, nrhs,
                     reinterpret_cast<const T* const*>(dA.ptrs.get()), dA.ld, dB.ptrs.get(), dB.ld, count);
        ASSERT_TRUE(this->sync());
        const auto Fafter = dA.download();
        const auto Xgpu = dB.download();
        for (int b = 0; b < count; ++b) {
            ASSERT_EQ(std::memcmp(Fafter[b].ptr(), F[b].ptr(), F[b].data.size() * sizeof(T)), 0)
                << "matrix " << b << ": the factor's storage changed";
            ASSERT_EQ(non_nan_in_padding(Xgpu[b]), 0) << "matrix " << b << ": B's padding was written";
            ASSERT_PRED_FORMAT1(ResidualPasses, solve_residual(A[b], Xgpu[b], B[b])) << "matrix " << b;
            const double diff = max_abs_diff(Xgpu[b], X[b]);
            const double tol = 100.0 * n * eps * std::max(1.0, max_abs(X[b]));
            ASSERT_LE(diff, tol) << "matrix " << b << ": max |X - X_lapack|";
        }
    }
};

using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(BatchedPotrfCuda, Precisions);

constexpr int kSizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 512};

// Every size class (register kernel, one cut, several levels of recursion), both triangles,
// lda > n, seven matrices of which three fail at planted minors (1, n/2+1, n).
TYPED_TEST(BatchedPotrfCuda, SizesAgainstLapack) {
    using T = TypeParam;
    for (char uplo : {'L', 'U'})
        for (int n : kSizes) {
            SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", n " << n);
            std::vector<int> at, k;
            planted(7, n, at, k);
            const auto c = make_case<T>(uplo, n, n + 3, 7, at, k, this->seed() + 1000ULL * n + uplo);
            this->factor_and_check(c);
            if (this->HasFailure()) return;
        }
}

// The strided entry (cuBLAS's strided batched gemms in the recursion): several levels of
// recursion, both triangles, lda > n, planted failures, a NaN in one matrix, 300 matrices.
TYPED_TEST(BatchedPotrfCuda, StridedEntry) {
    using T = TypeParam;
    std::mt19937_64 rng(this->seed());
    for (char uplo : {'L', 'U'})
        for (int n : {33, 65, 129, 255, 512}) {
            SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", n " << n);
            std::vector<int> at, k;
            planted(7, n, at, k);
            auto c = make_case<T>(uplo, n, n + 3, 7, at, k, this->seed() + 500ULL * n + uplo);
            this->factor_and_check(c, true);
            auto d = make_case<T>(uplo, n, n + 1, 7, {}, {}, this->seed() + 7ULL * n + uplo);
            const int i = static_cast<int>(rng() % n), j = static_cast<int>(rng() % (i + 1));
            auto& A = d.A[2];
            if (uplo == 'L')
                A(i, j) = nan<T>();
            else
                A(j, i) = nan<T>();
            d.expected[2] = reference_potrf_info(uplo, A);
            d.nan_planted[2] = true;
            this->factor_and_check(d, true);
            if (n == 129) {
                std::vector<int> at3, k3;
                planted(300, n, at3, k3);
                this->factor_and_check(make_case<T>(uplo, n, n, 300, at3, k3, this->seed() + uplo), true);
            }
            if (this->HasFailure()) return;
        }
}

// Counts 0, 1, 7 and 300 (a count that is not a multiple of the matrices per block).
TYPED_TEST(BatchedPotrfCuda, Counts) {
    using T = TypeParam;
    for (int n : {3, 16, 32, 40, 100})
        for (int count : {1, 7, 300})
            for (char uplo : {'L', 'U'}) {
                SCOPED_TRACE(::testing::Message() << "n " << n << ", count " << count << ", uplo " << uplo);
                std::vector<int> at, k;
                if (count > 1) planted(count, n, at, k);
                this->factor_and_check(make_case<T>(uplo, n, n + 1, count, at, k, this->seed() + 31ULL * n + count));
                if (count == 1) {  // the single matrix failing too
                    this->factor_and_check(
                        make_case<T>(uplo, n, n, 1, {0}, {n / 2 + 1}, this->seed() + 17ULL * n + count));
                }
                if (this->HasFailure()) return;
            }
}

// Ten thousand small matrices: every info and every factor.
TYPED_TEST(BatchedPotrfCuda, TenThousand) {
    using T = TypeParam;
    for (char uplo : {'L', 'U'}) {
        std::vector<int> at, k;
        planted(10000, 12, at, k);
        this->factor_and_check(make_case<T>(uplo, 12, 13, 10000, at, k, this->seed() + uplo));
    }
}

// Order 0 writes info = 0 everywhere; count 0 does nothing (and needs no arrays).
TYPED_TEST(BatchedPotrfCuda, EmptyBatches) {
    using T = TypeParam;
    DeviceBuffer<int> info(5);
    ASSERT_TRUE(cuda_ok(cudaMemset(info.get(), 0x5a, 5 * sizeof(int))));
    std::vector<HostMatrix<T>> none(5, HostMatrix<T>(0, 0, 1));
    DeviceBatch<T> d(none);
    EXPECT_EQ(bc::potrf_workspace<T>(0, 5), 0u);
    bc::potrf<T>(this->launch(0), bc::Uplo::lower, 0, d.ptrs.get(), 1, info.get(), 5);
    ASSERT_TRUE(this->sync());
    EXPECT_EQ(download_ints(info), std::vector<int>(5, 0));
    bc::potrf<T>(this->launch(0), bc::Uplo::upper, 8, nullptr, 8, nullptr, 0);
    bc::potrs<T>(this->launch(0), bc::Uplo::upper, 8, 3, nullptr, 8, nullptr, 8, 0);
    ASSERT_TRUE(this->sync());
    EXPECT_TRUE(cuda_ok(cudaGetLastError()));
}

// A NaN in one matrix: its info is LAPACK's (dpotf2's "not positive or NaN" test, computed by
// reference_potrf_info: OpenBLAS's own potf2 does not test for NaN), the others are unaffected.
TYPED_TEST(BatchedPotrfCuda, NanInOneMatrix) {
    using T = TypeParam;
    std::mt19937_64 rng(this->seed());
    for (char uplo : {'L', 'U'})
        for (int n : {1, 8, 32, 33, 100, 256}) {
            SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", n " << n);
            auto c = make_case<T>(uplo, n, n + 2, 7, {}, {}, this->seed() + 3ULL * n);
            const int i = static_cast<int>(rng() % n), j = static_cast<int>(rng() % (i + 1));  // i >= j
            auto& A = c.A[3];
            if (uplo == 'L')
                A(i, j) = nan<T>();
            else
                A(j, i) = nan<T>();
            c.expected[3] = reference_potrf_info(uplo, A);
            c.nan_planted[3] = true;
            ASSERT_GT(c.expected[3], 0);
            this->factor_and_check(c);
            if (this->HasFailure()) return;
        }
}

// potrs from LAPACKE's factors: backward error on the original system below 30, X close to
// LAPACKE's potrs, the factor and B's padding untouched.
TYPED_TEST(BatchedPotrfCuda, SolvesAgainstLapack) {
    for (char uplo : {'L', 'U'})
        for (int n : {1, 2, 5, 16, 31, 32, 33, 64, 65, 128, 129, 255, 512})
            for (int nrhs : {1, 3, 16, 70}) {
                this->solve_and_check(uplo, n, nrhs, n == 33 ? 300 : 7, this->seed() + 100003ULL * n + nrhs);
                if (this->HasFatalFailure()) return;
            }
}

// The block-wide solve of orders above 32 at orders that are not multiples of 32 (a partial
// last block of 32 rows: compute-sanitizer memcheck found it reading past its shared memory at
// n = 33 on the H100 before its columns were padded to a multiple of 32 rows), every count of
// right-hand sides from 1 to 16 (column groups of 1, 4, 8 and 16, full and partial), both
// triangles: forced wherever it fits, then the automatic choice (the block solve up to 4
// right-hand sides, the recursion above).
TYPED_TEST(BatchedPotrfCuda, BlockSolveOrdersNotMultipleOf32) {
    struct Reset {
        ~Reset() { bc::set_potrs_path(bc::PotrsPath::automatic); }
    } reset;
    for (bc::PotrsPath path : {bc::PotrsPath::block, bc::PotrsPath::automatic}) {
        bc::set_potrs_path(path);
        for (char uplo : {'L', 'U'})
            for (int n : {33, 34, 35, 63, 65, 97, 129})
                for (int nrhs = 1; nrhs <= 16; ++nrhs) {
                    SCOPED_TRACE(::testing::Message() << (path == bc::PotrsPath::block ? "forced block" : "automatic"));
                    this->solve_and_check(uplo, n, nrhs, n == 33 ? 64 : 5, this->seed() + 7919ULL * n + 31ULL * nrhs);
                    if (this->HasFatalFailure()) return;
                }
    }
}

// Factor and solve both on the GPU (posv), one workspace for both calls.
TYPED_TEST(BatchedPotrfCuda, FactorThenSolve) {
    using T = TypeParam;
    for (char uplo : {'L', 'U'})
        for (int n : {20, 100}) {
            const int count = 40, nrhs = 5;
            const std::uint64_t s = this->seed() + 11ULL * n + uplo;
            std::vector<HostMatrix<T>> A, B;
            for (int b = 0; b < count; ++b) {
                A.push_back(random_spd<T>(n, n, s + b));
                B.push_back(random_matrix<T>(n, nrhs, n, s + 1000 + b));
            }
            DeviceBatch<T> dA(A), dB(B);
            DeviceBuffer<int> info(count);
            const bc::Launch l =
                this->launch(std::max(bc::potrf_workspace<T>(n, count), bc::potrs_workspace<T>(n, nrhs, count)));
            bc::potrf<T>(l, to_uplo(uplo), n, dA.ptrs.get(), n, info.get(), count);
            bc::potrs<T>(l, to_uplo(uplo), n, nrhs, reinterpret_cast<const T* const*>(dA.ptrs.get()), n, dB.ptrs.get(),
                         n, count);
            ASSERT_TRUE(this->sync());
            EXPECT_EQ(download_ints(info), std::vector<int>(count, 0));
            const auto X = dB.download();
            for (int b = 0; b < count; ++b)
                ASSERT_PRED_FORMAT1(ResidualPasses, solve_residual(A[b], X[b], B[b]))
                    << "uplo " << uplo << ", n " << n << ", matrix " << b;
        }
}

}  // namespace
}  // namespace starfact::test
