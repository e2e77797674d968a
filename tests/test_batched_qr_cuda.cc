// The batched Householder QR kernels (batched/cuda/kernels.hpp: geqrf, geqrs) against LAPACKE on
// the same matrices, float and double: QR residuals ||A - QR||_1 / (m ||A||_1 eps) and
// ||I - Q^T Q||_1 / (m eps) with Q formed on the CPU by LAPACK's orgqr from the kernels' V and
// tau (so the layout is LAPACK's), R's diagonal signs as LAPACK's, least-squares residuals,
// planted exactly singular R at count/4, count/2, count-1 with info equal to LAPACK's trtrs, and
// a NaN or Inf in one matrix leaving every other matrix's output bitwise as without it. Every
// test skips, visibly, without a CUDA device.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "batched/cuda/kernels.hpp"
#include "common/blas.hpp"
#include "common/scalar_traits.hpp"
#include "cuda_test_support.hpp"
#include "test_support.hpp"

namespace starfact::test {
namespace {

namespace bc = starfact::batched::cuda;

constexpr double kThreshold = 30.0;

// LAPACKE calls not in common/blas.hpp.
inline int lapack_geqrf(int m, int n, double* A, int lda, double* tau) {
    return LAPACKE_dgeqrf(LAPACK_COL_MAJOR, m, n, A, lda, tau);
}
inline int lapack_geqrf(int m, int n, float* A, int lda, float* tau) {
    return LAPACKE_sgeqrf(LAPACK_COL_MAJOR, m, n, A, lda, tau);
}
inline int lapack_orgqr(int m, int n, double* A, int lda, const double* tau) {
    return LAPACKE_dorgqr(LAPACK_COL_MAJOR, m, n, n, A, lda, tau);
}
inline int lapack_orgqr(int m, int n, float* A, int lda, const float* tau) {
    return LAPACKE_sorgqr(LAPACK_COL_MAJOR, m, n, n, A, lda, tau);
}
inline int lapack_trtrs(int n, int nrhs, const double* A, int lda, double* B, int ldb) {
    return LAPACKE_dtrtrs(LAPACK_COL_MAJOR, 'U', 'N', 'N', n, nrhs, A, lda, B, ldb);
}
inline int lapack_trtrs(int n, int nrhs, const float* A, int lda, float* B, int ldb) {
    return LAPACKE_strtrs(LAPACK_COL_MAJOR, 'U', 'N', 'N', n, nrhs, A, lda, B, ldb);
}

/// A batch of equally shaped matrices in one device allocation (each with its padding), and the
/// device array of pointers to them that the kernels take.
template <class T>
struct DeviceBatch {
    int m, n, ld, count;
    DeviceBuffer<T> data;
    DeviceBuffer<T*> ptrs;

    explicit DeviceBatch(const std::vector<HostMatrix<T>>& h, int rows, int cols, int lead)
        : m(rows), n(cols), ld(lead), count(static_cast<int>(h.size())), data(h.size() * stride()), ptrs(h.size()) {
        std::vector<T> all(h.size() * stride());
        std::vector<T*> p(h.size());
        for (std::size_t b = 0; b < h.size(); ++b) {
            std::copy(h[b].data.begin(), h[b].data.end(), all.begin() + static_cast<std::ptrdiff_t>(b * stride()));
            p[b] = data.get() + b * stride();
        }
        if (!all.empty()) {
            if (cudaMemcpy(data.get(), all.data(), all.size() * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess ||
                cudaMemcpy(ptrs.get(), p.data(), p.size() * sizeof(T*), cudaMemcpyHostToDevice) != cudaSuccess)
                throw std::runtime_error("cudaMemcpy to the device failed");
        }
    }
    std::size_t stride() const { return static_cast<std::size_t>(ld) * n; }
    std::vector<HostMatrix<T>> download() const {
        std::vector<T> all(static_cast<std::size_t>(count) * stride());
        if (!all.empty() &&
            cudaMemcpy(all.data(), data.get(), all.size() * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess)
            throw std::runtime_error("cudaMemcpy to the host failed");
        std::vector<HostMatrix<T>> h(static_cast<std::size_t>(count), HostMatrix<T>(m, n, ld));
        for (std::size_t b = 0; b < h.size(); ++b)
            std::copy(all.begin() + static_cast<std::ptrdiff_t>(b * stride()),
                      all.begin() + static_cast<std::ptrdiff_t>((b + 1) * stride()), h[b].data.begin());
        return h;
    }
};

template <class E>
std::vector<E> download(const DeviceBuffer<E>& d) {
    std::vector<E> h(d.size());
    if (!h.empty() && cudaMemcpy(h.data(), d.get(), h.size() * sizeof(E), cudaMemcpyDeviceToHost) != cudaSuccess)
        throw std::runtime_error("cudaMemcpy to the host failed");
    return h;
}

template <class E>
DeviceBuffer<E> upload(const std::vector<E>& h) {
    DeviceBuffer<E> d(h.size());
    if (!h.empty() && cudaMemcpy(d.get(), h.data(), h.size() * sizeof(E), cudaMemcpyHostToDevice) != cudaSuccess)
        throw std::runtime_error("cudaMemcpy to the device failed");
    return d;
}

template <class T>
std::vector<HostMatrix<T>> random_batch(int m, int n, int ld, int count, std::uint64_t seed, double scale = 1.0) {
    std::vector<HostMatrix<T>> h;
    h.reserve(static_cast<std::size_t>(count));
    for (int b = 0; b < count; ++b) {
        h.push_back(random_matrix<T>(m, n, ld, seed + 7919u * static_cast<std::uint64_t>(b)));
        if (scale != 1.0)
            for (int j = 0; j < n; ++j)
                for (int i = 0; i < m; ++i) h.back()(i, j) = static_cast<T>(h.back()(i, j) * scale);
    }
    return h;
}

struct QrRatios {
    double factor;  ///< ||A - Q R||_1 / (m ||A||_1 eps)
    double orth;    ///< ||I - Q^T Q||_1 / (m eps)
};

/// The residual ratios of one factored matrix F (with its tau) of A; Q from LAPACK's orgqr.
template <class T>
QrRatios qr_ratios(const HostMatrix<T>& A, const HostMatrix<T>& F, const T* tau) {
    const int m = A.m, n = A.n;
    if (n == 0) return {0.0, 0.0};
    const double eps = ScalarTraits<T>::eps;
    std::vector<T> Q(static_cast<std::size_t>(m) * n), R(static_cast<std::size_t>(n) * n, T(0));
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < m; ++i) Q[i + static_cast<std::size_t>(j) * m] = F(i, j);
        for (int i = 0; i <= j; ++i) R[i + static_cast<std::size_t>(j) * n] = F(i, j);
    }
    EXPECT_EQ(lapack_orgqr(m, n, Q.data(), m, tau), 0);
    std::vector<T> D(static_cast<std::size_t>(m) * n);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) D[i + static_cast<std::size_t>(j) * m] = A(i, j);
    blas::gemm('N', 'N', m, n, n, T(-1), Q.data(), m, R.data(), n, T(1), D.data(), m);
    std::vector<T> I(static_cast<std::size_t>(n) * n, T(0));
    for (int j = 0; j < n; ++j) I[j + static_cast<std::size_t>(j) * n] = T(1);
    blas::gemm('T', 'N', n, n, m, T(-1), Q.data(), m, Q.data(), m, T(1), I.data(), n);
    const double anorm = blas::lange('1', m, n, A.ptr(), A.ld);
    return {blas::lange('1', m, n, D.data(), m) / (m * anorm * eps), blas::lange('1', n, n, I.data(), n) / (m * eps)};
}

/// Number of j where R's diagonal sign differs from LAPACK's geqrf on the same A (only where
/// LAPACK's |R(j,j)| is clearly nonzero: beta = -sign(alpha) ||x|| is the convention checked).
/// The count stops at a difference that is a near tie (reflector_sign_near_tie): every later
/// column differs from there.
template <class T>
int diagonal_sign_mismatches(const HostMatrix<T>& A, const HostMatrix<T>& F) {
    HostMatrix<T> L = A;
    std::vector<T> tau(static_cast<std::size_t>(std::max(1, A.n)));
    EXPECT_EQ(lapack_geqrf(A.m, A.n, L.ptr(), L.ld, tau.data()), 0);
    const double small = std::sqrt(ScalarTraits<T>::eps) * blas::lange('F', A.m, A.n, A.ptr(), A.ld);
    const int k = std::min(A.m, A.n);
    int bad = 0;
    for (int j = 0; j < k; ++j) {
        if (std::abs(static_cast<double>(L(j, j))) <= small || (L(j, j) > 0) == (F(j, j) > 0)) continue;
        if (reflector_sign_near_tie(tau[j], A.m)) break;
        ++bad;
    }
    return bad;
}

template <class T>
class BatchedQrCuda : public CudaHandlesTest {
protected:
    BatchedQrCuda() : CudaHandlesTest("batched QR") {}

    bc::Launch launch(std::size_t bytes) { return {stream_, blas_, workspace(bytes), bytes}; }

    /// geqrf on a device copy of `h`; returns the factored matrices (tau into `tau`).
    std::vector<HostMatrix<T>> factor(const std::vector<HostMatrix<T>>& h, int m, int n, int ld, std::vector<T>& tau) {
        const int count = static_cast<int>(h.size());
        DeviceBatch<T> d(h, m, n, ld);
        std::vector<T> poison(static_cast<std::size_t>(count) * n, nan<T>());
        DeviceBuffer<T> dtau = upload(poison);
        const std::size_t bytes = bc::geqrf_workspace<T>(m, n, count);
        bc::geqrf<T>(launch(bytes), m, n, d.ptrs.get(), ld, dtau.get(), count);
        EXPECT_TRUE(sync());
        tau = download(dtau);
        return d.download();
    }

    /// geqrs with the factors F (and tau) on B; returns the new B and info.
    std::vector<HostMatrix<T>> solve(const std::vector<HostMatrix<T>>& F, const std::vector<T>& tau,
                                     const std::vector<HostMatrix<T>>& B, int m, int n, int nrhs, int lda, int ldb,
                                     std::vector<int>& info) {
        const int count = static_cast<int>(F.size());
        DeviceBatch<T> dA(F, m, n, lda), dB(B, m, nrhs, ldb);
        DeviceBuffer<T> dtau = upload(tau);
        DeviceBuffer<int> dinfo = upload(std::vector<int>(static_cast<std::size_t>(count), -7));
        const std::size_t bytes = bc::geqrs_workspace<T>(m, n, nrhs, count);
        bc::geqrs<T>(launch(bytes), m, n, nrhs, const_cast<const T* const*>(dA.ptrs.get()), lda, dtau.get(),
                     dB.ptrs.get(), ldb, dinfo.get(), count);
        EXPECT_TRUE(sync());
        info = download(dinfo);
        return dB.download();
    }

    /// Residual checks of every matrix of a factored batch; returns the worst ratio.
    double check_factors(const std::vector<HostMatrix<T>>& A, const std::vector<HostMatrix<T>>& F,
                         const std::vector<T>& tau, bool signs) {
        double worst = 0.0;
        const int n = A.empty() ? 0 : A[0].n;
        for (std::size_t b = 0; b < A.size(); ++b) {
            const QrRatios r = qr_ratios(A[b], F[b], tau.data() + b * n);
            EXPECT_PRED_FORMAT1(ResidualPasses, r.factor) << "||A - QR|| of matrix " << b;
            EXPECT_PRED_FORMAT1(ResidualPasses, r.orth) << "||I - Q^T Q|| of matrix " << b;
            EXPECT_EQ(non_nan_in_padding(F[b]), 0) << "padding written, matrix " << b;
            if (signs) {
                EXPECT_EQ(diagonal_sign_mismatches(A[b], F[b]), 0) << "R(j,j) signs differ from LAPACK's, matrix " << b;
            }
            worst = std::max({worst, r.factor, r.orth});
            if (::testing::Test::HasFailure()) break;  // one matrix's report is enough
        }
        return worst;
    }
};

using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(BatchedQrCuda, Types);

struct Shape {
    int m, n, count;
};

/// Orders at and around the kernels' cuts (1-8, 16, 32, 64, 128, 256, 512), each square and
/// tall (n+1, 2n, 4n), with counts that keep the host checks short.
std::vector<Shape> factor_shapes() {
    std::vector<Shape> s;
    const int sizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 512};
    for (int n : sizes) {
        const int count = n <= 33 ? 300 : n <= 65 ? 30 : n <= 129 ? 7 : n <= 255 ? 3 : 2;
        for (int m : {n, n + 1, 2 * n, 4 * n}) {
            if (n == 512 && m == n + 1) continue;  // 512 x 513 adds nothing to 512 x 512
            s.push_back({m, n, m == n ? count : std::max(1, count / 3)});
        }
    }
    return s;
}

TYPED_TEST(BatchedQrCuda, FactorsLikeLapack) {
    using T = TypeParam;
    double worst = 0.0;
    for (const Shape& s : factor_shapes()) {
        SCOPED_TRACE("m = " + std::to_string(s.m) + ", n = " + std::to_string(s.n) +
                     ", count = " + std::to_string(s.count));
        const int ld = s.m + (s.n % 3);  // lda = m and lda > m
        const auto A = random_batch<T>(s.m, s.n, ld, s.count, this->seed() + s.m * 1000u + s.n);
        std::vector<T> tau;
        const auto F = this->factor(A, s.m, s.n, ld, tau);
        worst = std::max(worst, this->check_factors(A, F, tau, true));
        if (this->HasFailure()) return;
    }
    std::cout << "[   INFO   ] worst QR residual ratio: " << worst << std::endl;
}

TYPED_TEST(BatchedQrCuda, Counts) {
    using T = TypeParam;
    // count 0: nothing touched, null arrays accepted.
    bc::geqrf<T>(this->launch(bc::geqrf_workspace<T>(9, 5, 0)), 9, 5, nullptr, 9, nullptr, 0);
    bc::geqrs<T>(this->launch(bc::geqrs_workspace<T>(9, 5, 1, 0)), 9, 5, 1, nullptr, 9, nullptr, nullptr, 9, nullptr,
                 0);
    ASSERT_TRUE(this->sync());
    for (const Shape& s : {Shape{9, 5, 1}, Shape{9, 5, 7}, Shape{40, 36, 7}, Shape{9, 5, 300}, Shape{6, 4, 10000}}) {
        SCOPED_TRACE("m = " + std::to_string(s.m) + ", n = " + std::to_string(s.n) +
                     ", count = " + std::to_string(s.count));
        const auto A = random_batch<T>(s.m, s.n, s.m + 1, s.count, this->seed() + s.count);
        std::vector<T> tau;
        const auto F = this->factor(A, s.m, s.n, s.m + 1, tau);
        this->check_factors(A, F, tau, s.count <= 300);
        if (this->HasFailure()) return;
    }
}

TYPED_TEST(BatchedQrCuda, ScaledNearUnderflowAndOverflow) {
    using T = TypeParam;
    // Near underflow the columns' norms fall below larfg's safmin, so its rescaling runs.
    const double scales[] = {std::is_same_v<T, double> ? 1e-300 : 1e-35, std::is_same_v<T, double> ? 1e300 : 1e35};
    for (double scale : scales)
        for (int n : {8, 40, 100}) {
            const int m = 2 * n;
            SCOPED_TRACE("scale = " + std::to_string(scale) + ", n = " + std::to_string(n));
            const auto A = random_batch<T>(m, n, m, 7, this->seed() + n, scale);
            std::vector<T> tau;
            const auto F = this->factor(A, m, n, m, tau);
            this->check_factors(A, F, tau, true);
            if (this->HasFailure()) return;
        }
}

/// ||A^T r||_2 / (||A||_F (||A||_F ||x||_2 + ||b||_2) max(m, n) eps) for one column, and the
/// difference between ||r||_2 and the norm of rows n..m-1 of the solve's output, normalized
/// the same way.
template <class T>
std::pair<double, double> least_squares_ratios(const HostMatrix<T>& A, const HostMatrix<T>& B, const HostMatrix<T>& X,
                                               int col) {
    const int m = A.m, n = A.n;
    std::vector<long double> r(static_cast<std::size_t>(m));
    long double bnorm = 0, xnorm = 0, rnorm = 0, tail = 0;
    for (int i = 0; i < m; ++i) {
        long double s = B(i, col);
        bnorm += s * s;
        for (int j = 0; j < n; ++j) s -= static_cast<long double>(A(i, j)) * X(j, col);
        r[i] = s;
        rnorm += s * s;
        if (i >= n) tail += static_cast<long double>(X(i, col)) * X(i, col);
    }
    for (int j = 0; j < n; ++j) xnorm += static_cast<long double>(X(j, col)) * X(j, col);
    long double g = 0;
    for (int j = 0; j < n; ++j) {
        long double s = 0;
        for (int i = 0; i < m; ++i) s += static_cast<long double>(A(i, j)) * r[i];
        g += s * s;
    }
    const double anorm = blas::lange('F', m, n, A.ptr(), A.ld);
    const double denom = anorm *
                         (anorm * std::sqrt(static_cast<double>(xnorm)) + std::sqrt(static_cast<double>(bnorm))) *
                         std::max(m, n) * ScalarTraits<T>::eps;
    return {std::sqrt(static_cast<double>(g)) / denom,
            std::abs(std::sqrt(static_cast<double>(rnorm)) - std::sqrt(static_cast<double>(tail))) / denom};
}

TYPED_TEST(BatchedQrCuda, LeastSquares) {
    using T = TypeParam;
    double worst = 0.0;
    // (m, n, count); 4000 x 20 keeps geqrs's columns (and geqrf's panels) in global memory.
    const Shape shapes[] = {{1, 1, 7},     {5, 5, 300},   {9, 5, 300},    {16, 16, 30},  {33, 33, 30},
                            {66, 33, 30},  {64, 64, 7},   {65, 64, 7},    {130, 130, 7}, {300, 129, 7},
                            {255, 255, 3}, {512, 512, 2}, {1024, 512, 2}, {4000, 20, 3}};
    for (const Shape& s : shapes)
        for (int nrhs : {1, 3}) {
            SCOPED_TRACE("m = " + std::to_string(s.m) + ", n = " + std::to_string(s.n) +
                         ", nrhs = " + std::to_string(nrhs));
            const int lda = s.m + 1, ldb = s.m + 2;
            const auto A = random_batch<T>(s.m, s.n, lda, s.count, this->seed() + s.m + 31u * s.n);
            const auto B = random_batch<T>(s.m, nrhs, ldb, s.count, this->seed() + 5u + s.m);
            std::vector<T> tau;
            const auto F = this->factor(A, s.m, s.n, lda, tau);
            std::vector<int> info;
            const auto X = this->solve(F, tau, B, s.m, s.n, nrhs, lda, ldb, info);
            for (int b = 0; b < s.count; ++b) {
                ASSERT_EQ(info[b], 0) << "matrix " << b;
                ASSERT_EQ(non_nan_in_padding(X[b]), 0) << "padding of B written, matrix " << b;
                if (s.m == s.n) {
                    HostMatrix<T> Xn(s.n, nrhs, ldb);
                    Xn.data = X[b].data;
                    const double r = solve_residual(A[b], Xn, B[b]);
                    ASSERT_PRED_FORMAT1(ResidualPasses, r) << "square solve, matrix " << b;
                    worst = std::max(worst, r);
                } else {
                    for (int c = 0; c < nrhs; ++c) {
                        const auto [normal, tail] = least_squares_ratios(A[b], B[b], X[b], c);
                        ASSERT_PRED_FORMAT1(ResidualPasses, normal) << "||A^T r||, matrix " << b << ", column " << c;
                        ASSERT_PRED_FORMAT1(ResidualPasses, tail) << "||r|| vs rows n..m-1, matrix " << b;
                        worst = std::max({worst, normal, tail});
                    }
                }
            }
        }
    std::cout << "[   INFO   ] worst least-squares ratio: " << worst << std::endl;
}

TYPED_TEST(BatchedQrCuda, SingularRIsReportedAndLeavesBUntouched) {
    using T = TypeParam;
    for (const Shape& s :
         {Shape{5, 5, 300}, Shape{10, 5, 7}, Shape{33, 33, 300}, Shape{200, 100, 7}, Shape{64, 64, 1}}) {
        SCOPED_TRACE("m = " + std::to_string(s.m) + ", n = " + std::to_string(s.n) +
                     ", count = " + std::to_string(s.count));
        const int lda = s.m + 1, ldb = s.m;
        auto A = random_batch<T>(s.m, s.n, lda, s.count, this->seed() + 11u * s.n);
        const auto B = random_batch<T>(s.m, 2, ldb, s.count, this->seed() + 3u);
        // A zero column k-1 (k = 1, n/2+1, n) stays zero under the earlier reflectors: R(k-1,k-1) = 0.
        std::vector<int> expected(static_cast<std::size_t>(s.count), 0);
        const int at[] = {s.count / 4, s.count / 2, s.count - 1};
        const int ks[] = {1, s.n / 2 + 1, s.n};
        for (int p = 0; p < 3; ++p) {
            // With count 1 all three land on one matrix: the first zero column decides.
            expected[at[p]] = expected[at[p]] == 0 ? ks[p] : std::min(expected[at[p]], ks[p]);
            for (int i = 0; i < s.m; ++i) A[at[p]](i, ks[p] - 1) = T(0);
        }
        std::vector<T> tau;
        const auto F = this->factor(A, s.m, s.n, lda, tau);
        std::vector<int> info;
        const auto X = this->solve(F, tau, B, s.m, s.n, 2, lda, ldb, info);
        for (int b = 0; b < s.count; ++b) {
            // LAPACK's answer on the same matrix: geqrf, then trtrs's info.
            if (expected[b] != 0) {
                HostMatrix<T> L = A[b];
                std::vector<T> ltau(static_cast<std::size_t>(s.n));
                ASSERT_EQ(lapack_geqrf(s.m, s.n, L.ptr(), L.ld, ltau.data()), 0);
                HostMatrix<T> LB = B[b];
                ASSERT_EQ(lapack_trtrs(s.n, 2, L.ptr(), L.ld, LB.ptr(), LB.ld), expected[b]) << "LAPACK, matrix " << b;
            }
            ASSERT_EQ(info[b], expected[b]) << "matrix " << b;
            if (expected[b] != 0) {
                ASSERT_EQ(std::memcmp(X[b].ptr(), B[b].ptr(), B[b].data.size() * sizeof(T)), 0)
                    << "B changed for singular matrix " << b;
            } else if (s.m == s.n) {
                HostMatrix<T> Xn(s.n, 2, ldb);
                Xn.data = X[b].data;
                ASSERT_PRED_FORMAT1(ResidualPasses, solve_residual(A[b], Xn, B[b])) << "matrix " << b;
            } else {
                ASSERT_PRED_FORMAT1(ResidualPasses, least_squares_ratios(A[b], B[b], X[b], 0).first) << "matrix " << b;
            }
        }
        // The singular matrices' factors are still Q R (tau = 0 for the zero column).
        this->check_factors(A, F, tau, false);
        if (this->HasFailure()) return;
    }
}

TYPED_TEST(BatchedQrCuda, NanOrInfAffectsOnlyItsMatrix) {
    using T = TypeParam;
    const T bad_values[] = {nan<T>(), std::numeric_limits<T>::infinity()};
    for (T bad : bad_values)
        for (int n : {8, 40, 129}) {
            const int m = 2 * n, count = 300, victim = 123, ld = m;
            SCOPED_TRACE("n = " + std::to_string(n) + ", planted " + std::to_string(static_cast<double>(bad)));
            const auto A = random_batch<T>(m, n, ld, count, this->seed() + n);
            auto Abad = A;
            Abad[victim](m / 2, n / 2) = bad;
            Abad[victim](0, 0) = bad;
            std::vector<T> tau, tau_bad;
            const auto F = this->factor(A, m, n, ld, tau);
            const auto Fbad = this->factor(Abad, m, n, ld, tau_bad);
            const auto B = random_batch<T>(m, 1, m, count, this->seed() + 1u);
            std::vector<int> info, info_bad;
            const auto X = this->solve(F, tau, B, m, n, 1, ld, m, info);
            const auto Xbad = this->solve(Fbad, tau_bad, B, m, n, 1, ld, m, info_bad);
            EXPECT_GT(non_finite(Fbad[victim]), 0) << "the planted value vanished";
            EXPECT_GE(info_bad[victim], 0);
            EXPECT_LE(info_bad[victim], n);
            for (int b = 0; b < count; ++b) {
                if (b == victim) continue;
                ASSERT_EQ(std::memcmp(F[b].ptr(), Fbad[b].ptr(), F[b].data.size() * sizeof(T)), 0) << "matrix " << b;
                ASSERT_EQ(std::memcmp(tau.data() + b * n, tau_bad.data() + b * n, n * sizeof(T)), 0) << "tau " << b;
                ASSERT_EQ(info_bad[b], info[b]) << "matrix " << b;
                ASSERT_EQ(std::memcmp(X[b].ptr(), Xbad[b].ptr(), X[b].data.size() * sizeof(T)), 0) << "B " << b;
            }
            std::vector<HostMatrix<T>> A1(A.begin(), A.begin() + 20), F1(F.begin(), F.begin() + 20);
            this->check_factors(A1, F1, tau, false);
            if (this->HasFailure()) return;
        }
}

}  // namespace
}  // namespace starfact::test
