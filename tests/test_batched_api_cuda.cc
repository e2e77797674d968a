// The batched API on the GPU: the Context path on the same matrices as the host path
// for every operation (strided and pointer batches, planted failures with exact infos, every
// failure listed), argument errors before any launch, a workspace that stops growing, and the
// StarPU path on CUDA workers. Skips without a GPU.
#include <cblas.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "batched/batched.hpp"
#include "batched/residuals.hpp"
#include "codelets/codelets.hpp"
#include "common/error.hpp"
#include "common/matgen.hpp"
#include "cuda_test_support.hpp"
#include "test_support.hpp"

namespace starfact::test {
namespace {
namespace bt = starfact::batched;

/// A host strided batch (no gaps: ld = rows + 1) and its device copy.
template <class T>
struct Batch {
    int rows, cols, ld, count;
    long long stride;
    std::vector<T> host;
    Batch(int r, int c, int cnt) : rows(r), cols(c), ld(std::max(1, r + 1)), count(cnt) {
        stride = static_cast<long long>(ld) * c;
        host.assign(static_cast<std::size_t>(std::max(1LL, stride * cnt)), nan<T>());
    }
    T* at(int b) { return host.data() + b * stride; }
    const T* at(int b) const { return host.data() + b * stride; }
    T& operator()(int b, int i, int j) { return at(b)[i + static_cast<std::size_t>(j) * ld]; }
    void uniform(std::uint64_t seed) {
        for (int b = 0; b < count; ++b) matgen::uniform(rows, cols, seed + 31ULL * b, at(b), ld);
    }
    void spd(std::uint64_t seed) {
        for (int b = 0; b < count; ++b) matgen::spd(cols, seed + 31ULL * b, at(b), ld);
    }
};

template <class E>
DeviceBuffer<E> upload(const std::vector<E>& h) {
    DeviceBuffer<E> d(h.size());
    if (!h.empty() && cudaMemcpy(d.get(), h.data(), h.size() * sizeof(E), cudaMemcpyHostToDevice) != cudaSuccess)
        throw std::runtime_error("cudaMemcpy to the device failed");
    return d;
}
template <class E>
std::vector<E> download(const DeviceBuffer<E>& d) {
    std::vector<E> h(d.size());
    if (!h.empty() && cudaMemcpy(h.data(), d.get(), h.size() * sizeof(E), cudaMemcpyDeviceToHost) != cudaSuccess)
        throw std::runtime_error("cudaMemcpy to the host failed");
    return h;
}

/// Device pointer arrays for a device strided batch, in reversed order (matrix b of the pointer
/// batch is matrix count-1-b of the storage).
template <class T>
DeviceBuffer<T*> reversed_pointers(T* base, long long stride, int count) {
    std::vector<T*> p;
    for (int b = 0; b < count; ++b) p.push_back(base + (count - 1 - b) * stride);
    return upload(p);
}

/// max |x - y| / max |y| over two batches' matrices.
template <class T>
double relative_diff(const std::vector<T>& x, const std::vector<T>& y) {
    double d = 0, s = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (std::isnan(y[i]) && std::isnan(x[i])) continue;  // padding
        d = std::max(d, std::abs(double(x[i]) - double(y[i])));
        s = std::max(s, std::abs(double(y[i])));
        if (std::isnan(x[i]) != std::isnan(y[i])) return INFINITY;
    }
    return s > 0 ? d / s : d;
}

template <class T>
double tolerance(int n) {
    return 1e3 * std::max(1, n) * ScalarTraits<T>::eps;
}

const std::vector<int> kSizes = {1, 2, 5, 8, 16, 17, 32, 33, 64};

template <class T>
class BatchedApiCuda : public CudaHandlesTest {
protected:
    BatchedApiCuda() : CudaHandlesTest("batched API") {}
    void SetUp() override {
        CudaHandlesTest::SetUp();
        openblas_set_num_threads(1);
    }
};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(BatchedApiCuda, Precisions);

TYPED_TEST(BatchedApiCuda, GetrfAndGetrsMatchTheHostPath) {
    using T = TypeParam;
    if (this->IsSkipped()) return;
    bt::Context ctx(this->stream_);
    for (int n : kSizes) {
        const int count = 37, nrhs = 3;
        SCOPED_TRACE(::testing::Message() << "n = " << n);
        Batch<T> A(n, n, count), B(n, nrhs, count);
        A.uniform(this->seed() + n);
        B.uniform(this->seed() + 100 + n);
        for (int i = 0; i < n; ++i) A(count / 4, i, 0) = A(count / 2, i, n / 2) = A(count - 1, i, n - 1) = T(0);
        const Batch<T> A0 = A, B0 = B;
        auto dA = upload(A.host), dB = upload(B.host);
        DeviceBuffer<int> dipiv(count * n), dinfo(count);
        bt::getrf(ctx, n, dA.get(), A.ld, A.stride, dipiv.get(), dinfo.get(), count);
        const auto fails = ctx.failures(dinfo.get(), count);
        // The host path on the same matrices.
        std::vector<int> ipiv(count * n), info(count);
        bt::getrf(n, A.at(0), A.ld, A.stride, ipiv.data(), info.data(), count);
        EXPECT_EQ(download(dinfo), info);
        ASSERT_EQ(fails.size(), 3u);
        EXPECT_EQ(fails[0].index, count / 4);
        EXPECT_EQ(fails[0].info, 1);
        EXPECT_EQ(fails[1].index, count / 2);
        EXPECT_EQ(fails[1].info, n / 2 + 1);
        EXPECT_EQ(fails[2].index, count - 1);
        EXPECT_EQ(fails[2].info, n);
        const auto gA = download(dA);
        const auto gipiv = download(dipiv);
        if (std::is_same<T, double>::value) {
            EXPECT_EQ(gipiv, ipiv);  // float may break near-ties differently
        }
        for (int b = 0; b < count; ++b)
            EXPECT_PRED_FORMAT1(ResidualPasses, bt::residuals::getrf(n, A0.at(b), A.ld, gA.data() + b * A.stride, A.ld,
                                                                     gipiv.data() + b * n))
                << "matrix " << b;
        // Solve with the nonsingular ones only: refactor a clean batch.
        Batch<T> C = A0;
        C.uniform(this->seed() + 200 + n);
        auto dC = upload(C.host);
        bt::getrf(ctx, n, dC.get(), C.ld, C.stride, dipiv.get(), dinfo.get(), count);
        EXPECT_TRUE(ctx.failures(dinfo.get(), count).empty());
        auto pC = reversed_pointers(dC.get(), C.stride, count);
        auto pB = reversed_pointers(dB.get(), B.stride, count);
        // The pivots go with the position in the batch: matrix b of the reversed batch is
        // matrix count-1-b of the factored one, so its pivots are reversed by blocks too.
        const std::vector<int> cipiv = download(dipiv);
        std::vector<int> ripiv(cipiv.size());
        for (int b = 0; b < count; ++b)
            std::copy(cipiv.begin() + static_cast<long>(count - 1 - b) * n,
                      cipiv.begin() + static_cast<long>(count - b) * n, ripiv.begin() + static_cast<long>(b) * n);
        auto rdipiv = upload(ripiv);
        bt::getrs<T>(ctx, n, nrhs, pC.get(), C.ld, rdipiv.get(), pB.get(), B.ld, count);
        const auto X = download(dB);
        for (int b = 0; b < count; ++b)
            EXPECT_PRED_FORMAT1(ResidualPasses, bt::residuals::solve(n, nrhs, C.at(b), C.ld, X.data() + b * B.stride,
                                                                     B.ld, B0.at(b), B.ld))
                << "matrix " << b;
        EXPECT_TRUE(this->sync());
    }
}

TYPED_TEST(BatchedApiCuda, PotrfAndPotrsMatchTheHostPath) {
    using T = TypeParam;
    if (this->IsSkipped()) return;
    bt::Context ctx(this->stream_);
    for (bt::Uplo uplo : {bt::Uplo::lower, bt::Uplo::upper}) {
        for (int n : kSizes) {
            const int count = 37, nrhs = 4;
            SCOPED_TRACE(::testing::Message() << "n = " << n << (uplo == bt::Uplo::lower ? " lower" : " upper"));
            Batch<T> A(n, n, count), B(n, nrhs, count);
            A.spd(this->seed() + n);
            B.uniform(this->seed() + 7 + n);
            for (int b : {count / 4, count / 2, count - 1})
                matgen::spd_failing_at(n,
                                       b == count / 4   ? 1
                                       : b == count / 2 ? n / 2 + 1
                                                        : n,
                                       this->seed() + b, A.at(b), A.ld);
            Batch<T> H = A, HB = B;
            auto dA = upload(A.host), dB = upload(B.host);
            DeviceBuffer<int> dinfo(count);
            bt::potrf(ctx, uplo, n, dA.get(), A.ld, A.stride, dinfo.get(), count);
            bt::potrs(ctx, uplo, n, nrhs, dA.get(), A.ld, A.stride, dB.get(), B.ld, B.stride, count);
            std::vector<int> info(count);
            EXPECT_EQ(bt::potrf(uplo, n, H.at(0), H.ld, H.stride, info.data(), count), 3);
            bt::potrs(uplo, n, nrhs, H.at(0), H.ld, H.stride, HB.at(0), HB.ld, HB.stride, count);
            EXPECT_EQ(download(dinfo), info);
            EXPECT_EQ(ctx.failures(dinfo.get(), count).size(), 3u);
            // Matrices that factored: the factors and solutions agree with the host's.
            const auto gA = download(dA), gB = download(dB);
            for (int b = 0; b < count; ++b) {
                if (info[b] != 0) continue;
                std::vector<T> g(gA.begin() + b * A.stride, gA.begin() + (b + 1) * A.stride),
                    h(H.host.begin() + b * A.stride, H.host.begin() + (b + 1) * A.stride);
                for (int j = 0; j < n; ++j)  // only the uplo triangle is the factor
                    for (int i = 0; i < n; ++i)
                        if ((uplo == bt::Uplo::lower && i < j) || (uplo == bt::Uplo::upper && i > j))
                            g[i + j * A.ld] = h[i + j * A.ld] = T(0);
                EXPECT_LE(relative_diff(g, h), tolerance<T>(n)) << "matrix " << b;
                std::vector<T> gx(gB.begin() + b * B.stride, gB.begin() + (b + 1) * B.stride),
                    hx(HB.host.begin() + b * B.stride, HB.host.begin() + (b + 1) * B.stride);
                EXPECT_LE(relative_diff(gx, hx), tolerance<T>(n)) << "matrix " << b;
            }
        }
    }
}

TYPED_TEST(BatchedApiCuda, GeqrfAndGelsMatchTheHostPath) {
    using T = TypeParam;
    if (this->IsSkipped()) return;
    bt::Context ctx(this->stream_);
    for (int n : kSizes) {
        const int m = 2 * n + 1, count = 21, nrhs = 2;
        SCOPED_TRACE(::testing::Message() << "m = " << m << ", n = " << n);
        Batch<T> A(m, n, count), B(m, nrhs, count);
        A.uniform(this->seed() + n);
        B.uniform(this->seed() + 3 + n);
        for (int i = 0; i < m; ++i) A(count / 2, i, n / 2) = T(0);  // rank deficient: gels info = n/2 + 1
        Batch<T> H = A, HB = B;
        const Batch<T> A0 = A;
        auto dA = upload(A.host), dB = upload(B.host);
        DeviceBuffer<T> dtau(count * n);
        DeviceBuffer<int> dinfo(count);
        auto pA = reversed_pointers(dA.get(), A.stride, count);
        // geqrf through pointers (reversed), then gels strided on a fresh copy.
        bt::geqrf<T>(ctx, m, n, pA.get(), A.ld, dtau.get(), count);
        std::vector<T> tau(count * n);
        bt::geqrf(m, n, H.at(0), H.ld, H.stride, tau.data(), count);
        const auto gA = download(dA), gtau = download(dtau);
        for (int b = 0; b < count; ++b) {
            const int s = count - 1 - b;  // storage slot of pointer-batch matrix b
            std::vector<T> g(gA.begin() + s * A.stride, gA.begin() + (s + 1) * A.stride),
                h(H.host.begin() + s * A.stride, H.host.begin() + (s + 1) * A.stride);
            EXPECT_LE(relative_diff(g, h), tolerance<T>(m)) << "matrix " << b;
            std::vector<T> gt(gtau.begin() + b * n, gtau.begin() + (b + 1) * n),
                ht(tau.begin() + s * n, tau.begin() + (s + 1) * n);
            EXPECT_LE(relative_diff(gt, ht), tolerance<T>(m)) << "tau of matrix " << b;
        }
        auto dG = upload(A0.host);
        bt::gels(ctx, m, n, nrhs, dG.get(), A.ld, A.stride, dtau.get(), dB.get(), B.ld, B.stride, dinfo.get(), count);
        Batch<T> G = A0;
        std::vector<int> info(count);
        EXPECT_EQ(
            bt::gels(m, n, nrhs, G.at(0), G.ld, G.stride, tau.data(), HB.at(0), HB.ld, HB.stride, info.data(), count),
            n >= 1 ? 1 : 0);
        EXPECT_EQ(download(dinfo), info);
        const auto fails = ctx.failures(dinfo.get(), count);
        ASSERT_EQ(fails.size(), 1u);
        EXPECT_EQ(fails[0].index, count / 2);
        EXPECT_EQ(fails[0].info, n / 2 + 1);
        const auto gB = download(dB);
        for (int b = 0; b < count; ++b) {
            std::vector<T> gx(gB.begin() + b * B.stride, gB.begin() + (b + 1) * B.stride),
                hx(HB.host.begin() + b * B.stride, HB.host.begin() + (b + 1) * B.stride);
            EXPECT_LE(relative_diff(gx, hx), tolerance<T>(m)) << "matrix " << b;  // the failing one: both untouched
        }
    }
}

TYPED_TEST(BatchedApiCuda, ArgumentErrorsLaunchNothingAndTheWorkspaceStopsGrowing) {
    using T = TypeParam;
    if (this->IsSkipped()) return;
    bt::Context ctx(this->stream_);
    const int n = 8, count = 10;
    Batch<T> A(n, n, count);
    A.uniform(this->seed());
    auto dA = upload(A.host);
    DeviceBuffer<int> dipiv(count * n), dinfo(count);
    ASSERT_TRUE(cuda_ok(cudaMemset(dinfo.get(), 0x7f, count * sizeof(int))));
    EXPECT_THROW(bt::getrf(ctx, n, dA.get(), n - 1, A.stride, dipiv.get(), dinfo.get(), count), ArgumentError);
    EXPECT_THROW(bt::getrf(ctx, n, dA.get(), A.ld, A.stride - 1, dipiv.get(), dinfo.get(), count), ArgumentError);
    EXPECT_THROW(bt::getrf<T>(ctx, n, dA.get(), A.ld, A.stride, nullptr, dinfo.get(), count), ArgumentError);
    EXPECT_THROW(bt::geqrf<T>(ctx, n - 1, n, dA.get(), A.ld, A.stride, nullptr, count), ArgumentError);
    EXPECT_THROW(bt::potrf(ctx, bt::Uplo::lower, -1, dA.get(), A.ld, A.stride, dinfo.get(), count), ArgumentError);
    EXPECT_TRUE(this->sync());
    // Bitwise (the padding is NaN, which == would never match).
    const auto after = download(dA);
    ASSERT_EQ(after.size(), A.host.size());
    EXPECT_EQ(std::memcmp(after.data(), A.host.data(), after.size() * sizeof(T)), 0) << "the data changed";
    EXPECT_EQ(download(dinfo), std::vector<int>(count, 0x7f7f7f7f));
    EXPECT_EQ(ctx.workspace_bytes(), 0u);
    // n 0 still writes every info.
    bt::getrf<T>(ctx, 0, dA.get(), 1, 0, dipiv.get(), dinfo.get(), count);
    EXPECT_TRUE(ctx.failures(dinfo.get(), count).empty());
    // Steady state: the same call twice does not grow the workspace again.
    bt::getrf(ctx, n, dA.get(), A.ld, A.stride, dipiv.get(), dinfo.get(), count);
    const std::size_t after_first = ctx.workspace_bytes();
    bt::getrf(ctx, n, dA.get(), A.ld, A.stride, dipiv.get(), dinfo.get(), count);
    EXPECT_EQ(ctx.workspace_bytes(), after_first);
    EXPECT_TRUE(this->sync());
    // Move-only: the moved-to context works, the moved-from refuses.
    bt::Context moved(std::move(ctx));
    EXPECT_NO_THROW(bt::getrf(moved, n, dA.get(), A.ld, A.stride, dipiv.get(), dinfo.get(), count));
    EXPECT_THROW(bt::getrf(ctx, n, dA.get(), A.ld, A.stride, dipiv.get(), dinfo.get(), count), RuntimeError);
    EXPECT_TRUE(this->sync());
}

// ---- the StarPU path on CUDA workers ------------------------------------------------------

template <class T>
class BatchedTasksCuda : public RuntimeTest {
protected:
    void SetUp() override {
        RuntimeTest::SetUp();
        openblas_set_num_threads(1);
    }
};
TYPED_TEST_SUITE(BatchedTasksCuda, Precisions);

TYPED_TEST(BatchedTasksCuda, CudaWorkersMatchTheHostPath) {
    using T = TypeParam;
    STARFACT_REQUIRE_CUDA_WORKER(this->ncuda());
    const int count = 200, n = 24, m = 40, nrhs = 2;
    const codelets::ScopedImpl gpu_only(codelets::Impl::Cuda);
    const bt::tasks::TaskOptions opt{5};
    // LU with a planted failure, then the solve.
    Batch<T> A(n, n, count), B(n, nrhs, count);
    A.uniform(this->seed());
    B.uniform(this->seed() + 1);
    for (int i = 0; i < n; ++i) A(count / 3, i, 6) = T(0);
    Batch<T> H = A;
    const Batch<T> A0 = A, B0 = B;
    std::vector<int> ipiv(count * n), info(count), hipiv(count * n), hinfo(count);
    EXPECT_EQ(bt::tasks::getrf(n, A.at(0), A.ld, A.stride, ipiv.data(), info.data(), count, opt), 1);
    bt::getrf(n, H.at(0), H.ld, H.stride, hipiv.data(), hinfo.data(), count);
    EXPECT_EQ(info, hinfo);
    EXPECT_EQ(info[count / 3], 7);
    for (int b = 0; b < count; ++b)
        EXPECT_PRED_FORMAT1(ResidualPasses, bt::residuals::getrf(n, A0.at(b), A.ld, A.at(b), A.ld, ipiv.data() + b * n))
            << "matrix " << b;
    // Cholesky lower and the solve.
    Batch<T> S(n, n, count), C(n, nrhs, count);
    S.spd(this->seed() + 2);
    C.uniform(this->seed() + 3);
    Batch<T> HS = S, HC = C;
    EXPECT_EQ(bt::tasks::potrf(bt::Uplo::lower, n, S.at(0), S.ld, S.stride, info.data(), count, opt), 0);
    bt::tasks::potrs(bt::Uplo::lower, n, nrhs, S.at(0), S.ld, S.stride, C.at(0), C.ld, C.stride, count, opt);
    bt::potrf(bt::Uplo::lower, n, HS.at(0), HS.ld, HS.stride, hinfo.data(), count);
    bt::potrs(bt::Uplo::lower, n, nrhs, HS.at(0), HS.ld, HS.stride, HC.at(0), HC.ld, HC.stride, count);
    EXPECT_LE(relative_diff(C.host, HC.host), tolerance<T>(n));
    // QR and least squares.
    Batch<T> G(m, n, count), D(m, nrhs, count);
    G.uniform(this->seed() + 4);
    D.uniform(this->seed() + 5);
    Batch<T> HG = G, HD = D;
    std::vector<T> tau(count * n), htau(count * n);
    EXPECT_EQ(bt::tasks::gels(m, n, nrhs, G.at(0), G.ld, G.stride, tau.data(), D.at(0), D.ld, D.stride, info.data(),
                              count, opt),
              0);
    bt::gels(m, n, nrhs, HG.at(0), HG.ld, HG.stride, htau.data(), HD.at(0), HD.ld, HD.stride, hinfo.data(), count);
    EXPECT_LE(relative_diff(G.host, HG.host), tolerance<T>(m));
    EXPECT_LE(relative_diff(D.host, HD.host), tolerance<T>(m));
    Batch<T> Q(m, n, count);
    Q.uniform(this->seed() + 6);
    Batch<T> HQ = Q;
    bt::tasks::geqrf(m, n, Q.at(0), Q.ld, Q.stride, tau.data(), count, opt);
    bt::geqrf(m, n, HQ.at(0), HQ.ld, HQ.stride, htau.data(), count);
    EXPECT_LE(relative_diff(Q.host, HQ.host), tolerance<T>(m));
    EXPECT_LE(relative_diff(tau, htau), tolerance<T>(m));
    // getrs on CUDA workers with the host's factors: the nonsingular ones solve their systems.
    bt::tasks::getrs(n, nrhs, H.at(0), H.ld, H.stride, hipiv.data(), B.at(0), B.ld, B.stride, count, opt);
    for (int b = 0; b < count; ++b) {
        if (b == count / 3) continue;
        EXPECT_PRED_FORMAT1(ResidualPasses,
                            bt::residuals::solve(n, nrhs, A0.at(b), A.ld, B.at(b), B.ld, B0.at(b), B.ld))
            << "matrix " << b;
    }
}

}  // namespace
}  // namespace starfact::test
