// The CUDA QR kernels (cuda::geqrt/unmqr/tsqrt/tsmqr/ttqrt/ttmqr) against their CPU twins, called directly
// on a stream of our own (no StarPU): the whole storage compared (NaN at the same places, so
// padding, R's strict lower triangle and the unused entries of the T factors stay poisoned,
// values within 30 K eps of the CPU's), plus the factorizations' own residuals through the CPU
// kernels. Every test skips, visibly, on a machine without a CUDA device; each prints the worst
// |gpu - cpu| / tolerance it met.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "codelets/cpu/qr_kernels.hpp"
#include "codelets/cuda/qr_kernels.hpp"
#include "common/cuda_blas.hpp"
#include "common/scalar_traits.hpp"
#include "cuda_test_support.hpp"
#include "test_support.hpp"

namespace starfact::test {
namespace {

constexpr int kSizes[] = {1, 7, 32, 33, 64, 100, 256};
// 80: wider than the CUDA kernels' one-thread-block T factors (64), so the solve path runs too.
constexpr int kInnerBlocks[] = {1, 8, 32, 80};
constexpr double kThreshold = 30.0;

std::vector<int> inner_blocks(int K) {
    std::vector<int> ibs;
    for (int ib : kInnerBlocks)
        if (ib < K) ibs.push_back(ib);
    ibs.push_back(std::max(K, 1));  // one block
    return ibs;
}

/// The worst |gpu - cpu| / tolerance (or residual / threshold) a test met, and where; printed
/// at the end of the test so that a passing run still shows its margins.
class Worst {
public:
    explicit Worst(std::string what) : what_(std::move(what)) {}
    void add(double ratio, const std::string& where) {
        if (!(ratio <= ratio_)) {
            ratio_ = ratio;
            where_ = where;
        }
    }
    ~Worst() {
        std::cout << "[   INFO   ] worst " << what_ << ": " << ratio_ << (where_.empty() ? "" : " at ") << where_
                  << std::endl;
    }
    Worst(const Worst&) = delete;
    Worst& operator=(const Worst&) = delete;

private:
    std::string what_;
    double ratio_ = 0.0;
    std::string where_;
};

/// The whole storage of gpu and cpu (padding included): NaN at the same places, other entries
/// within tol. The largest difference / tol goes to `worst` when given.
template <class T>
::testing::AssertionResult same_storage(const HostMatrix<T>& gpu, const HostMatrix<T>& cpu, double tol,
                                        Worst* worst = nullptr, const std::string& where = "") {
    if (gpu.data.size() != cpu.data.size()) return ::testing::AssertionFailure() << "storage sizes differ";
    double diff = 0.0;
    std::size_t at = 0;
    for (std::size_t e = 0; e < gpu.data.size(); ++e) {
        const T g = gpu.data[e], c = cpu.data[e];
        if (g == c || (std::isnan(g) && std::isnan(c))) continue;
        if (std::isnan(g) || std::isnan(c))
            return ::testing::AssertionFailure()
                   << "entry (" << e % gpu.ld << ", " << e / gpu.ld << "): gpu " << g << ", cpu " << c << " (one NaN)";
        const double d = std::abs(static_cast<double>(g) - static_cast<double>(c));
        if (!(d <= diff)) {
            diff = d;
            at = e;
        }
    }
    if (worst != nullptr) worst->add(diff / tol, where);
    if (diff <= tol) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "max |gpu - cpu| = " << diff << " > " << tol << " at (" << at % gpu.ld
                                         << ", " << at / gpu.ld << "): gpu " << gpu.data[at] << ", cpu "
                                         << cpu.data[at];
}

/// Largest finite |entry| over the whole storage (at least 1, so a tolerance never vanishes).
template <class T>
double finite_scale(const HostMatrix<T>& A) {
    double s = 1.0;
    for (T v : A.data)
        if (std::isfinite(v)) s = std::max(s, std::abs(static_cast<double>(v)));
    return s;
}

template <class T>
double tolerance(int K, double scale) {
    return kThreshold * std::max(K, 1) * static_cast<double>(ScalarTraits<T>::eps) * scale;
}

/// One norm of the m x n block in long double (NaN if an entry is NaN).
template <class T>
long double norm1(const HostMatrix<T>& A) {
    long double d = 0;
    for (int j = 0; j < A.n; ++j) {
        long double s = 0;
        for (int i = 0; i < A.m; ++i) s += std::abs(static_cast<long double>(A(i, j)));
        if (std::isnan(s)) return s;
        d = std::max(d, s);
    }
    return d;
}

/// ||X - Y||_1 / (rows ||X||_1 eps) over the m x n blocks.
template <class T>
double relative_residual(const HostMatrix<T>& X, const HostMatrix<T>& Y) {
    long double d = 0;
    for (int j = 0; j < X.n; ++j) {
        long double s = 0;
        for (int i = 0; i < X.m; ++i) s += std::abs(static_cast<long double>(X(i, j)) - Y(i, j));
        if (std::isnan(s)) return static_cast<double>(s);
        d = std::max(d, s);
    }
    return static_cast<double>(d / (std::max(X.m, 1) * std::max(norm1(X), 1.0L) * ScalarTraits<T>::eps));
}

/// ||A - Q R||_1 / (m ||A||_1 eps) of GEQRT's output F (R and V) and T factors Tf: Q applied to
/// R (zeros below) by the CPU UNMQR.
template <class T>
double geqrt_residual(const HostMatrix<T>& A, const HostMatrix<T>& F, const HostMatrix<T>& Tf, int ib) {
    HostMatrix<T> QR(A.m, A.n, A.m + 1);
    for (int j = 0; j < A.n; ++j)
        for (int i = 0; i < A.m; ++i) QR(i, j) = i <= j ? F(i, j) : T(0);
    cpu::unmqr<T>('L', 'N', ib, F.cview(), Tf.cview(), QR.view());
    return relative_residual(A, QR);
}

/// ||[R0; A0] - Q [R'; 0]||_1 / ((n + m) ||[R0; A0]||_1 eps) of TSQRT's output (R' in R's upper
/// triangle, V2, Tf): Q applied by the CPU TSMQR.
template <class T>
double tsqrt_residual(const HostMatrix<T>& R0, const HostMatrix<T>& A0, const HostMatrix<T>& R, const HostMatrix<T>& V2,
                      const HostMatrix<T>& Tf, int ib) {
    const int n = A0.n, m = A0.m;
    HostMatrix<T> X1(n, n, n), X2(m, n, m), S(n + m, n, n + m), QR(n + m, n, n + m);
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < n; ++i) X1(i, j) = i <= j ? R(i, j) : T(0);
        for (int i = 0; i < m; ++i) X2(i, j) = T(0);
    }
    cpu::tsmqr<T>('N', ib, X1.view(), X2.view(), V2.cview(), Tf.cview());
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < n; ++i) {
            S(i, j) = i <= j ? R0(i, j) : T(0);
            QR(i, j) = X1(i, j);
        }
        for (int i = 0; i < m; ++i) {
            S(n + i, j) = A0(i, j);
            QR(n + i, j) = X2(i, j);
        }
    }
    return relative_residual(S, QR);
}

/// A T-factor tile ib x K, all NaN (ld ib + 1): the kernels write what they define.
template <class T>
HostMatrix<T> t_tile(int ib, int K) {
    return HostMatrix<T>(std::max(ib, 1), std::max(K, 1), std::max(ib, 1) + 1);
}

/// R for TSQRT: (n + 2) x n, random upper triangle; its strict lower part (GEQRT's V, never to
/// be touched) and the two extra rows are NaN.
template <class T>
HostMatrix<T> random_upper(int n, std::uint64_t seed) {
    HostMatrix<T> R = random_matrix<T>(n + 2, n, n + 4, seed);
    poison_strict_triangle(R, 'L');
    return R;
}

std::string where(int m, int n, int ib, char trans = ' ') {
    std::string s = "m = " + std::to_string(m) + ", n = " + std::to_string(n) + ", ib = " + std::to_string(ib);
    if (trans != ' ') s += std::string(", trans = ") + trans;
    return s;
}

template <class T>
class QrCuda : public CudaHandlesTest {
protected:
    QrCuda() : CudaHandlesTest("QR") {}

public:
    /// A context whose workspace holds exactly qr_workspace_bytes(m, n, ib) bytes.
    cuda::QrContext context(int m, int n, int ib) {
        const std::size_t bytes = cuda::qr_workspace_bytes<T>(solver_, params_, m, n, ib);
        return {blas_, solver_, params_, stream_, workspace(bytes), bytes};
    }

    /// A context like context(m, n, ib) over `spare`: twice the bytes, all NaN (to tell a
    /// result that depends on the workspace's size or contents).
    cuda::QrContext roomy_context(int m, int n, int ib, DeviceBuffer<unsigned char>& spare) {
        const std::size_t bytes = 2 * cuda::qr_workspace_bytes<T>(solver_, params_, m, n, ib);
        spare = DeviceBuffer<unsigned char>(bytes);
        if (cudaMemset(spare.get(), 0xff, bytes) != cudaSuccess) throw std::runtime_error("cudaMemset failed");
        return {blas_, solver_, params_, stream_, spare.get(), bytes};
    }

    /// cuSOLVER's geqrf of P alone (its own buffers): P's factored storage, tau in *tau.
    HostMatrix<T> cusolver_geqrf(const HostMatrix<T>& P, std::vector<T>* tau) {
        const cudaDataType type = cublas::data_type<T>();
        DeviceMatrix<T> dP(P);
        DeviceBuffer<T> dtau(static_cast<std::size_t>(std::min(P.m, P.n)));
        DeviceBuffer<int> info(1);
        std::size_t dev = 0, host = 0;
        if (cusolverDnXgeqrf_bufferSize(solver_, params_, P.m, P.n, type, dP.buf.get(), P.ld, type, dtau.get(), type,
                                        &dev, &host) != CUSOLVER_STATUS_SUCCESS)
            throw std::runtime_error("geqrf_bufferSize failed");
        DeviceBuffer<unsigned char> dwork(std::max<std::size_t>(dev, 1));
        std::vector<unsigned char> hwork(std::max<std::size_t>(host, 1));
        if (cusolverDnXgeqrf(solver_, params_, P.m, P.n, type, dP.buf.get(), P.ld, type, dtau.get(), type, dwork.get(),
                             dev, hwork.data(), host, info.get()) != CUSOLVER_STATUS_SUCCESS ||
            !sync())
            throw std::runtime_error("geqrf failed");
        tau->assign(dtau.size(), T(0));
        cudaMemcpy(tau->data(), dtau.get(), dtau.size() * sizeof(T), cudaMemcpyDeviceToHost);
        return dP.download();
    }
};

using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(QrCuda, Precisions);

/// GEQRT's shapes for a size s: square, tall, wide.
std::vector<std::pair<int, int>> shapes(int s) { return {{s, s}, {2 * s + 3, s}, {s, 2 * s + 3}}; }

TYPED_TEST(QrCuda, GeqrtMatchesCpu) {
    using T = TypeParam;
    Worst worst("|gpu - cpu| / tol"), worst_res("||A - QR|| / (m ||A|| eps) / 30");
    for (int s : kSizes)
        for (const auto& [m, n] : shapes(s))
            for (int ib : inner_blocks(std::min(m, n))) {
                const std::string at = where(m, n, ib);
                SCOPED_TRACE(at);
                const int K = std::min(m, n);
                const HostMatrix<T> A = random_matrix<T>(m, n, m + 3, this->seed() + 31 * m + n);
                HostMatrix<T> F = A, Tc = t_tile<T>(ib, K);
                cpu::geqrt<T>(ib, F.view(), Tc.view());

                DeviceMatrix<T> dA(A), dT(t_tile<T>(ib, K));
                ASSERT_TRUE(cuda_ok(cuda::geqrt<T>(this->context(m, n, ib), ib, dA.view(), dT.view())));
                ASSERT_TRUE(this->sync());
                const HostMatrix<T> G = dA.download(), Tg = dT.download();
                const double res = geqrt_residual(A, G, Tg, ib);
                worst_res.add(res / kThreshold, at);
                EXPECT_LT(res, kThreshold) << "the GPU's own factorization";
                EXPECT_TRUE(same_storage(G, F, tolerance<T>(K, finite_scale(F)), &worst, at)) << "A (R and V)";
                EXPECT_TRUE(same_storage(Tg, Tc, tolerance<T>(K, finite_scale(Tc)), &worst, at)) << "T";
            }
}

TYPED_TEST(QrCuda, GeqrtWideInnerBlocks) {
    // Inner blocks wider than 256 columns: the CUDA T factors come from per-block Gram matrices
    // that skip the zero rows above each block, and a triangular solve.
    using T = TypeParam;
    Worst worst("|gpu - cpu| / tol"), worst_res("||A - QR|| / (m ||A|| eps) / 30");
    for (int m : {600, 700})
        for (int ib : {300, 350, 600}) {
            const int n = 600;
            const std::string at = where(m, n, ib);
            SCOPED_TRACE(at);
            const HostMatrix<T> A = random_matrix<T>(m, n, m + 1, this->seed() + m + ib);
            HostMatrix<T> F = A, Tc = t_tile<T>(ib, n);
            cpu::geqrt<T>(ib, F.view(), Tc.view());
            DeviceMatrix<T> dA(A), dT(t_tile<T>(ib, n));
            ASSERT_TRUE(cuda_ok(cuda::geqrt<T>(this->context(m, n, ib), ib, dA.view(), dT.view())));
            ASSERT_TRUE(this->sync());
            const HostMatrix<T> G = dA.download(), Tg = dT.download();
            const double res = geqrt_residual(A, G, Tg, ib);
            worst_res.add(res / kThreshold, at);
            EXPECT_LT(res, kThreshold) << "the GPU's own factorization";
            EXPECT_TRUE(same_storage(G, F, tolerance<T>(n, finite_scale(F)), &worst, at)) << "A (R and V)";
            EXPECT_TRUE(same_storage(Tg, Tc, tolerance<T>(n, finite_scale(Tc)), &worst, at)) << "T";
        }
}

TYPED_TEST(QrCuda, UnmqrMatchesCpu) {
    using T = TypeParam;
    Worst worst("|gpu - cpu| / tol");
    for (int s : kSizes)
        for (const auto& [m, n] : shapes(s))
            for (int ib : inner_blocks(std::min(m, n))) {
                const int K = std::min(m, n);
                // GEQRT's factors, computed once on the CPU and given to both UNMQRs; R's part
                // of the tile (strict upper triangle) is poisoned: UNMQR must not read it.
                HostMatrix<T> V = random_matrix<T>(m, n, m + 1, this->seed() + 7 * m + n), Tf = t_tile<T>(ib, K);
                cpu::geqrt<T>(ib, V.view(), Tf.view());
                poison_strict_triangle(V, 'U');
                const DeviceMatrix<T> dV(V), dT(Tf);
                for (int nc : {5, s + 3})
                    for (char trans : {'T', 'N'}) {
                        const std::string at = where(m, n, ib, trans) + ", C.n = " + std::to_string(nc);
                        SCOPED_TRACE(at);
                        const HostMatrix<T> C = random_matrix<T>(m, nc, m + 2, this->seed() + 11 * m + nc + trans);
                        HostMatrix<T> Cc = C;
                        cpu::unmqr<T>('L', trans, ib, V.cview(), Tf.cview(), Cc.view());

                        DeviceMatrix<T> dC(C);
                        // The workspace the codelet asks for: C's shape (V may be wider).
                        ASSERT_TRUE(cuda_ok(cuda::unmqr<T>(this->context(m, nc, ib), 'L', trans, ib, dV.cview(),
                                                           dT.cview(), dC.view())));
                        ASSERT_TRUE(this->sync());
                        EXPECT_TRUE(same_storage(dC.download(), Cc, tolerance<T>(K, finite_scale(Cc)), &worst, at));
                    }
                EXPECT_TRUE(same_storage(dV.download(), V, 0.0)) << "V must be read only";
                EXPECT_TRUE(same_storage(dT.download(), Tf, 0.0)) << "T must be read only";
            }
}

TYPED_TEST(QrCuda, UnmqrRejectsRightSide) {
    using T = TypeParam;
    const int m = 8;
    HostMatrix<T> V = random_matrix<T>(m, m, m, this->seed()), Tf = t_tile<T>(4, m);
    cpu::geqrt<T>(4, V.view(), Tf.view());
    const HostMatrix<T> C = random_matrix<T>(m, m, m, this->seed() + 1);
    const DeviceMatrix<T> dV(V), dT(Tf);
    DeviceMatrix<T> dC(C);
    EXPECT_EQ(cuda::unmqr<T>(this->context(m, m, 4), 'R', 'T', 4, dV.cview(), dT.cview(), dC.view()),
              cudaErrorInvalidValue);
    ASSERT_TRUE(this->sync());
    EXPECT_TRUE(same_storage(dC.download(), C, 0.0)) << "C must be untouched";
}

/// Runs the CUDA TSQRT (tt false) or TTQRT (tt true) with ctx on copies of (R, A); their
/// outputs in *Rg, *Ag (V2) and *Tg.
template <class T>
cudaError_t run_pair_gpu(QrCuda<T>& t, bool tt, const cuda::QrContext& ctx, const HostMatrix<T>& R,
                         const HostMatrix<T>& A, int ib, HostMatrix<T>* Rg, HostMatrix<T>* Ag, HostMatrix<T>* Tg) {
    DeviceMatrix<T> dR(R), dA(A), dT(t_tile<T>(ib, A.n));
    const cudaError_t err = tt ? cuda::ttqrt<T>(ctx, ib, dR.view(), dA.view(), dT.view())
                               : cuda::tsqrt<T>(ctx, ib, dR.view(), dA.view(), dT.view());
    if (err != cudaSuccess) return err;
    if (!t.sync()) return cudaErrorUnknown;
    *Rg = dR.download();
    *Ag = dA.download();
    *Tg = dT.download();
    return cudaSuccess;
}

/// The order N = n + mp of TSQRT's (tt false) or TTQRT's Q for a lower tile of m rows.
int pair_order(bool tt, int m, int n) { return n + (tt ? std::min(m, n) : m); }

/// max |Q^T Q - I| / (N eps) of the Q = I - [I; V2] Tf [I; V2]^T of a TSQRT (tt false) or TTQRT
/// output (N its order): Q, then Q^T, applied to the identity by the CPU TSMQR/TTMQR.
template <class T>
double orthogonality(bool tt, const HostMatrix<T>& V2, const HostMatrix<T>& Tf, int n, int ib) {
    const int m = V2.m, N = pair_order(tt, m, n), mp = N - n;
    HostMatrix<T> X1(n, N, n), X2(m, N, std::max(m, 1));
    for (int j = 0; j < N; ++j) {
        for (int i = 0; i < n; ++i) X1(i, j) = i == j ? T(1) : T(0);
        for (int i = 0; i < m; ++i) X2(i, j) = i < mp && n + i == j ? T(1) : T(0);
    }
    for (char trans : {'N', 'T'}) {
        if (tt)
            cpu::ttmqr<T>(trans, ib, X1.view(), X2.view(), V2.cview(), Tf.cview());
        else
            cpu::tsmqr<T>(trans, ib, X1.view(), X2.view(), V2.cview(), Tf.cview());
    }
    long double worst = 0;
    for (int j = 0; j < N; ++j) {
        for (int i = 0; i < n; ++i) worst = std::max(worst, std::abs(X1(i, j) - (i == j ? 1.0L : 0.0L)));
        for (int i = 0; i < mp; ++i) worst = std::max(worst, std::abs(X2(i, j) - (n + i == j ? 1.0L : 0.0L)));
    }
    if (std::isnan(static_cast<double>(worst))) return static_cast<double>(worst);
    return static_cast<double>(worst / (N * static_cast<long double>(ScalarTraits<T>::eps)));
}

/// How many rows i < n have a diagonal entry of another sign in a than in b.
template <class T>
int sign_flips(const HostMatrix<T>& a, const HostMatrix<T>& b, int n) {
    int count = 0;
    for (int i = 0; i < n; ++i)
        if ((a(i, i) < 0) != (b(i, i) < 0)) ++count;
    return count;
}

/// max |a(i, j) - b(i, j)| over the upper triangle of the leading n x n blocks.
template <class T>
double upper_difference(const HostMatrix<T>& a, const HostMatrix<T>& b, int n) {
    double d = 0;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i <= j; ++i) d = std::max(d, std::abs(static_cast<double>(a(i, j)) - b(i, j)));
    return d;
}

/// Reflectors whose tau (the diagonal of their block's T) lies outside [1, 2], LAPACK's range:
/// dlarfg takes beta = -sign(alpha) ||x||, so tau = 1 - alpha / beta >= 1; the other sign gives
/// tau < 1.
template <class T>
int taus_outside_lapack_range(const HostMatrix<T>& Tf, int n, int ib) {
    int count = 0;
    for (int j = 0; j < n; ++j) {
        const double tau = Tf(j % ib, j);
        if (tau != 0 && !(tau >= 1 - 1e-3 && tau <= 2 + 1e-3)) ++count;
    }
    return count;
}

/// Printed when a TSQRT (tt false) or TTQRT result differs from the CPU's, to tell the causes
/// apart: reflectors of other signs (R's diagonal, tau outside LAPACK's range); a
/// result that depends on the workspace (the same call with twice the bytes, all NaN); cuSOLVER
/// itself (its geqrf of the stacked panel alone, tt: masked to the trapezoid, against the CPU's
/// R); an ill-conditioned problem (both factorizations backward stable, cpu_res being the CPU's
/// own residual, and still far apart).
template <class T>
void describe_difference(QrCuda<T>& t, bool tt, const HostMatrix<T>& R, const HostMatrix<T>& A, int ib,
                         const HostMatrix<T>& Rc, const HostMatrix<T>& Tc, const HostMatrix<T>& Rg,
                         const HostMatrix<T>& Tg, double cpu_res, const std::string& at) {
    const int n = A.n, m = A.m, N = pair_order(tt, m, n), mp = N - n;
    std::cout << "[   DIAG   ] " << (tt ? "TTQRT " : "TSQRT ") << at << ": max |R gpu - cpu| "
              << upper_difference(Rg, Rc, n) << ", " << sign_flips(Rg, Rc, n)
              << " diagonal signs differ; taus outside [1, 2]: gpu " << taus_outside_lapack_range(Tg, n, ib) << ", cpu "
              << taus_outside_lapack_range(Tc, n, ib) << "; the CPU's own residual / 30: " << cpu_res / kThreshold
              << std::endl;
    DeviceBuffer<unsigned char> spare;
    HostMatrix<T> R2, A2, T2;
    const cudaError_t err =
        run_pair_gpu(t, tt, t.roomy_context(std::max(R.m, m), n, ib, spare), R, A, ib, &R2, &A2, &T2);
    if (err == cudaSuccess)
        std::cout << "[   DIAG   ]   with a 2x NaN-filled workspace: max |R - R before| " << upper_difference(R2, Rg, n)
                  << std::endl;
    else
        std::cout << "[   DIAG   ]   with a 2x NaN-filled workspace: " << cudaGetErrorName(err) << std::endl;
    HostMatrix<T> P(N, n, N);
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < n; ++i) P(i, j) = i <= j ? R(i, j) : T(0);
        for (int i = 0; i < mp; ++i) P(n + i, j) = !tt || i <= j ? A(i, j) : T(0);
    }
    std::vector<T> tau;
    const HostMatrix<T> F = t.cusolver_geqrf(P, &tau);
    std::cout << "[   DIAG   ]   cuSOLVER geqrf of the " << N << " x " << n << " stack alone: max |R - R cpu| "
              << upper_difference(F, Rc, n) << ", " << sign_flips(F, Rc, n) << " diagonal signs differ" << std::endl;
}

/// The checks TSQRT (tt false) and TTQRT share once the CPU (Rc, Ac, Tc; cpu_res its residual)
/// and the GPU (Rg, Ag, Tg) have factored (R, A): the GPU's Q orthogonal, and R, V2 and T equal
/// to the CPU's to rounding (Householder QR with LAPACK's signs is unique). Equal to rounding
/// needs a well-conditioned [R; A]: the tests never stack two tiles drawn with the same seed.
template <class T>
void check_pair_factors(QrCuda<T>& t, bool tt, const HostMatrix<T>& R, const HostMatrix<T>& A, int ib,
                        const HostMatrix<T>& Rc, const HostMatrix<T>& Ac, const HostMatrix<T>& Tc,
                        const HostMatrix<T>& Rg, const HostMatrix<T>& Ag, const HostMatrix<T>& Tg, double cpu_res,
                        Worst& worst, Worst& worst_orth, const std::string& at) {
    const int n = A.n;
    const double orth = orthogonality(tt, Ag, Tg, n, ib);
    worst_orth.add(orth / kThreshold, at);
    EXPECT_LT(orth, kThreshold) << "||Q^T Q - I|| / (N eps) of the GPU's Q";
    const double tol = tolerance<T>(n, std::max(finite_scale(Rc), finite_scale(Ac)));
    const ::testing::AssertionResult r_ok = same_storage(Rg, Rc, tol, &worst, at),
                                     a_ok = same_storage(Ag, Ac, tol, &worst, at),
                                     t_ok = same_storage(Tg, Tc, tolerance<T>(n, finite_scale(Tc)), &worst, at);
    EXPECT_TRUE(r_ok) << "R";
    EXPECT_TRUE(a_ok) << (tt ? "A (V2 over GEQRT's V)" : "A (V2)");
    EXPECT_TRUE(t_ok) << "T";
    if (!(r_ok && a_ok && t_ok)) describe_difference(t, tt, R, A, ib, Rc, Tc, Rg, Tg, cpu_res, at);
}

/// Runs the CPU and the CUDA TSQRT on (R, A) and compares everything.
template <class T>
void tsqrt_against_cpu(QrCuda<T>& t, const HostMatrix<T>& R, const HostMatrix<T>& A, int ib, Worst& worst,
                       Worst& worst_res, Worst& worst_orth, const std::string& at) {
    const int n = A.n, m = A.m;
    HostMatrix<T> Rc = R, Ac = A, Tc = t_tile<T>(ib, n);
    cpu::tsqrt<T>(ib, Rc.view(), Ac.view(), Tc.view());

    HostMatrix<T> Rg, Ag, Tg;
    ASSERT_TRUE(cuda_ok(run_pair_gpu(t, false, t.context(std::max(R.m, m), n, ib), R, A, ib, &Rg, &Ag, &Tg)));
    // R's strict lower triangle and its extra rows: never written (still the NaN poison).
    EXPECT_EQ(non_nan_in_strict_triangle(Rg, 'L'), 0) << "TSQRT wrote R's strict lower triangle or extra rows";
    const double res = tsqrt_residual(R, A, Rg, Ag, Tg, ib);
    worst_res.add(res / kThreshold, at);
    EXPECT_LT(res, kThreshold) << "the GPU's own factorization";
    check_pair_factors(t, false, R, A, ib, Rc, Ac, Tc, Rg, Ag, Tg, tsqrt_residual(R, A, Rc, Ac, Tc, ib), worst,
                       worst_orth, at);
}

TYPED_TEST(QrCuda, TsqrtMatchesCpu) {
    using T = TypeParam;
    Worst worst("|gpu - cpu| / tol"), worst_res("||[R; A] - Q [R'; 0]|| / ((m + n) ||.|| eps) / 30"),
        worst_orth("||Q^T Q - I|| / ((m + n) eps) / 30");
    for (int n : kSizes)
        for (int m : {n, 2 * n + 3, std::max(1, n / 3)})
            for (int ib : inner_blocks(n)) {
                const std::string at = where(m, n, ib);
                SCOPED_TRACE(at);
                const HostMatrix<T> R = random_upper<T>(n, this->seed() + 3 * n);
                const HostMatrix<T> A = random_matrix<T>(m, n, m + 1, this->seed() + 5 * n + m);
                tsqrt_against_cpu(*this, R, A, ib, worst, worst_res, worst_orth, at);
            }
}

TYPED_TEST(QrCuda, TsqrtPanelsOfAWideTile) {
    // n = 600 with small ib: several of the CUDA TSQRT's 256-column panels (the last one
    // partial), each updating the columns on its right.
    using T = TypeParam;
    Worst worst("|gpu - cpu| / tol"), worst_res("||[R; A] - Q [R'; 0]|| / ((m + n) ||.|| eps) / 30"),
        worst_orth("||Q^T Q - I|| / ((m + n) eps) / 30");
    const int n = 600;
    for (int m : {40, 600})
        for (int ib : {32, 48, 100, 600}) {
            const std::string at = where(m, n, ib);
            SCOPED_TRACE(at);
            const HostMatrix<T> R = random_upper<T>(n, this->seed() + ib);
            const HostMatrix<T> A = random_matrix<T>(m, n, m + 1, this->seed() + 3 * ib + m);
            tsqrt_against_cpu(*this, R, A, ib, worst, worst_res, worst_orth, at);
        }
}

TYPED_TEST(QrCuda, TsmqrMatchesCpu) {
    using T = TypeParam;
    Worst worst("|gpu - cpu| / tol");
    for (int K : kSizes)
        for (int m : {K, 2 * K + 3, std::max(1, K / 3)})
            for (int ib : inner_blocks(K)) {
                // TSQRT's factors, computed once on the CPU and given to both TSMQRs.
                HostMatrix<T> R = random_upper<T>(K, this->seed() + K);
                HostMatrix<T> V2 = random_matrix<T>(m, K, m, this->seed() + 2 * K + m), Tf = t_tile<T>(ib, K);
                cpu::tsqrt<T>(ib, R.view(), V2.view(), Tf.view());
                const DeviceMatrix<T> dV2(V2), dT(Tf);
                for (int n : {5, K + 3})
                    for (char trans : {'T', 'N'}) {
                        const std::string at = where(m, K, ib, trans) + ", A.n = " + std::to_string(n);
                        SCOPED_TRACE(at);
                        // A1: only its first K rows are used; the two others are poisoned.
                        HostMatrix<T> A1 = random_matrix<T>(K + 2, n, K + 3, this->seed() + 11 * K + n + trans);
                        for (int j = 0; j < n; ++j) A1(K, j) = A1(K + 1, j) = nan<T>();
                        const HostMatrix<T> A2 = random_matrix<T>(m, n, m + 1, this->seed() + 13 * K + m + n);
                        HostMatrix<T> A1c = A1, A2c = A2;
                        cpu::tsmqr<T>(trans, ib, A1c.view(), A2c.view(), V2.cview(), Tf.cview());

                        DeviceMatrix<T> dA1(A1), dA2(A2);
                        // The workspace the codelet asks for: the trailing tiles' shape.
                        ASSERT_TRUE(cuda_ok(cuda::tsmqr<T>(this->context(std::max(A1.m, m), n, ib), trans, ib,
                                                           dA1.view(), dA2.view(), dV2.cview(), dT.cview())));
                        ASSERT_TRUE(this->sync());
                        const double tol = tolerance<T>(K, std::max(finite_scale(A1c), finite_scale(A2c)));
                        EXPECT_TRUE(same_storage(dA1.download(), A1c, tol, &worst, at)) << "A1";
                        EXPECT_TRUE(same_storage(dA2.download(), A2c, tol, &worst, at)) << "A2";
                    }
                EXPECT_TRUE(same_storage(dV2.download(), V2, 0.0)) << "V2 must be read only";
                EXPECT_TRUE(same_storage(dT.download(), Tf, 0.0)) << "T must be read only";
            }
}

/// A tile row head after its GEQRT, for TTQRT: m x n random (upper part: its R; the rest: its V,
/// which TTQRT must keep bit for bit).
template <class T>
HostMatrix<T> head_tile(int m, int n, std::uint64_t seed) {
    return random_matrix<T>(m, n, m + 1, seed);
}

/// ||[R0; U0] - Q [R'; 0]||_1 / ((n + mp) ||[R0; U0]||_1 eps) of TTQRT's output, U0 the upper
/// part of A0's first mp = min(m, n) rows; Q applied by the CPU TTMQR.
template <class T>
double ttqrt_residual(const HostMatrix<T>& R0, const HostMatrix<T>& A0, const HostMatrix<T>& R, const HostMatrix<T>& V2,
                      const HostMatrix<T>& Tf, int ib) {
    const int n = A0.n, m = A0.m, mp = std::min(m, n);
    HostMatrix<T> X1(n, n, n), X2(m, n, m), S(n + mp, n, n + mp), QR(n + mp, n, n + mp);
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < n; ++i) X1(i, j) = i <= j ? R(i, j) : T(0);
        for (int i = 0; i < m; ++i) X2(i, j) = T(0);
    }
    cpu::ttmqr<T>('N', ib, X1.view(), X2.view(), V2.cview(), Tf.cview());
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < n; ++i) {
            S(i, j) = i <= j ? R0(i, j) : T(0);
            QR(i, j) = X1(i, j);
        }
        for (int i = 0; i < mp; ++i) {
            S(n + i, j) = i <= j ? A0(i, j) : T(0);
            QR(n + i, j) = X2(i, j);
        }
    }
    return relative_residual(S, QR);
}

/// Runs the CPU and the CUDA TTQRT on (R, A) and compares everything.
template <class T>
void ttqrt_against_cpu(QrCuda<T>& t, const HostMatrix<T>& R, const HostMatrix<T>& A, int ib, Worst& worst,
                       Worst& worst_res, Worst& worst_orth, const std::string& at) {
    const int n = A.n, m = A.m, mp = std::min(m, n);
    HostMatrix<T> Rc = R, Ac = A, Tc = t_tile<T>(ib, n);
    cpu::ttqrt<T>(ib, Rc.view(), Ac.view(), Tc.view());

    HostMatrix<T> Rg, Ag, Tg;
    ASSERT_TRUE(cuda_ok(run_pair_gpu(t, true, t.context(std::max(R.m, m), n, ib), R, A, ib, &Rg, &Ag, &Tg)));
    EXPECT_EQ(non_nan_in_strict_triangle(Rg, 'L'), 0) << "TTQRT wrote R's strict lower triangle or extra rows";
    int changed = 0;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i)
            if ((i > j || i >= mp) && !(Ag(i, j) == A(i, j))) ++changed;
    EXPECT_EQ(changed, 0) << "TTQRT changed A's strict lower part (another GEQRT's V) or its rows below n";
    const double res = ttqrt_residual(R, A, Rg, Ag, Tg, ib);
    worst_res.add(res / kThreshold, at);
    EXPECT_LT(res, kThreshold) << "the GPU's own factorization";
    check_pair_factors(t, true, R, A, ib, Rc, Ac, Tc, Rg, Ag, Tg, ttqrt_residual(R, A, Rc, Ac, Tc, ib), worst,
                       worst_orth, at);
}

TYPED_TEST(QrCuda, TtqrtMatchesCpu) {
    using T = TypeParam;
    Worst worst("|gpu - cpu| / tol"), worst_res("||[R; U] - Q [R'; 0]|| / ((mp + n) ||.|| eps) / 30"),
        worst_orth("||Q^T Q - I|| / ((mp + n) eps) / 30");
    for (int n : kSizes)
        for (int m : {n, n + 5, std::max(1, n / 3)})
            for (int ib : inner_blocks(n)) {
                const std::string at = where(m, n, ib);
                SCOPED_TRACE(at);
                const HostMatrix<T> R = random_upper<T>(n, this->seed() + 3 * n);
                const HostMatrix<T> A = head_tile<T>(m, n, this->seed() + 5 * n + m);
                ttqrt_against_cpu(*this, R, A, ib, worst, worst_res, worst_orth, at);
            }
    // Several of the 256-column panels, the last one partial. R and the head come from seeds
    // that never meet (even, odd): with one seed (m = ib), matgen being a function of (seed, i,
    // j), [R; U] would be [U; U], as ill-conditioned as a random triangle (cond 2e18 at n = 600).
    // Its R, V2 and T are then not fixed to rounding by the data: a sound factorization (residual
    // and ||Q^T Q - I|| at rounding level) can still be O(1) from the CPU's, as LAPACK's dgeqrf of
    // the stack with one or two BLAS threads differs.
    for (int m : {40, 600})
        for (int ib : {32, 100, 600}) {
            const std::string at = where(m, 600, ib);
            SCOPED_TRACE(at);
            ttqrt_against_cpu(*this, random_upper<T>(600, this->seed() + 2 * ib),
                              head_tile<T>(m, 600, this->seed() + 2 * m + 1), ib, worst, worst_res, worst_orth, at);
        }
}

TYPED_TEST(QrCuda, TtmqrMatchesCpu) {
    using T = TypeParam;
    Worst worst("|gpu - cpu| / tol");
    for (int K : {1, 7, 33, 100, 256, 300})
        for (int m : {K, K + 5, std::max(1, K / 3)})
            for (int ib : inner_blocks(K)) {
                // TTQRT's factors from the CPU; V2's strict lower part keeps the head's V (random).
                HostMatrix<T> R = random_upper<T>(K, this->seed() + K);
                HostMatrix<T> V2 = head_tile<T>(m, K, this->seed() + 2 * K + m), Tf = t_tile<T>(ib, K);
                cpu::ttqrt<T>(ib, R.view(), V2.view(), Tf.view());
                const DeviceMatrix<T> dV2(V2), dT(Tf);
                for (int n : {5, K + 3})
                    for (char trans : {'T', 'N'}) {
                        const std::string at = where(m, K, ib, trans) + ", A.n = " + std::to_string(n);
                        SCOPED_TRACE(at);
                        HostMatrix<T> A1 = random_matrix<T>(K + 2, n, K + 3, this->seed() + 11 * K + n + trans);
                        for (int j = 0; j < n; ++j) A1(K, j) = A1(K + 1, j) = nan<T>();
                        const HostMatrix<T> A2 = random_matrix<T>(m, n, m + 1, this->seed() + 13 * K + m + n);
                        HostMatrix<T> A1c = A1, A2c = A2;
                        cpu::ttmqr<T>(trans, ib, A1c.view(), A2c.view(), V2.cview(), Tf.cview());

                        DeviceMatrix<T> dA1(A1), dA2(A2);
                        ASSERT_TRUE(cuda_ok(cuda::ttmqr<T>(this->context(std::max(A1.m, m), n, ib), trans, ib,
                                                           dA1.view(), dA2.view(), dV2.cview(), dT.cview())));
                        ASSERT_TRUE(this->sync());
                        const double tol = tolerance<T>(K, std::max(finite_scale(A1c), finite_scale(A2c)));
                        EXPECT_TRUE(same_storage(dA1.download(), A1c, tol, &worst, at)) << "A1";
                        EXPECT_TRUE(same_storage(dA2.download(), A2c, tol, &worst, at)) << "A2";
                    }
                EXPECT_TRUE(same_storage(dV2.download(), V2, 0.0)) << "V2 must be read only";
                EXPECT_TRUE(same_storage(dT.download(), Tf, 0.0)) << "T must be read only";
            }
}

TYPED_TEST(QrCuda, NanInputGoesThroughWithoutCrashing) {
    using T = TypeParam;
    for (int K : {7, 64, 100})
        for (int ib : {8, K}) {
            SCOPED_TRACE(where(K, K, ib));
            const int m = K + 5;
            // GEQRT: a NaN column and a stray NaN.
            HostMatrix<T> A = random_matrix<T>(m, K, m + 2, this->seed() + K);
            for (int i = 0; i < m; ++i) A(i, K / 2) = nan<T>();
            A(m - 1, 0) = nan<T>();
            DeviceMatrix<T> dA(A), dT(t_tile<T>(ib, K));
            ASSERT_TRUE(cuda_ok(cuda::geqrt<T>(this->context(m, K, ib), ib, dA.view(), dT.view())));
            // UNMQR with those factors on a clean C.
            DeviceMatrix<T> dC(random_matrix<T>(m, 9, m, this->seed() + 2 * K));
            ASSERT_TRUE(
                cuda_ok(cuda::unmqr<T>(this->context(m, 9, ib), 'L', 'T', ib, dA.cview(), dT.cview(), dC.view())));
            // TSQRT: NaN in R's diagonal and in A; then TSMQR with its factors.
            HostMatrix<T> R = random_upper<T>(K, this->seed() + 3 * K);
            R(K / 3, K / 3) = nan<T>();
            HostMatrix<T> B = random_matrix<T>(m, K, m, this->seed() + 4 * K);
            B(0, K - 1) = nan<T>();
            DeviceMatrix<T> dR(R), dB(B), dT2(t_tile<T>(ib, K));
            ASSERT_TRUE(cuda_ok(cuda::tsqrt<T>(this->context(m, K, ib), ib, dR.view(), dB.view(), dT2.view())));
            DeviceMatrix<T> dA1(random_matrix<T>(K, 6, K, this->seed() + 5 * K));
            DeviceMatrix<T> dA2(random_matrix<T>(m, 6, m, this->seed() + 6 * K));
            ASSERT_TRUE(cuda_ok(
                cuda::tsmqr<T>(this->context(m, 6, ib), 'T', ib, dA1.view(), dA2.view(), dB.cview(), dT2.cview())));
            ASSERT_TRUE(this->sync());
            // The structure still holds: padding and R's strict lower triangle untouched.
            EXPECT_EQ(non_nan_in_padding(dA.download()), 0);
            EXPECT_EQ(non_nan_in_strict_triangle(dR.download(), 'L'), 0);
            EXPECT_EQ(non_nan_in_padding(dB.download()), 0);
        }
}

TYPED_TEST(QrCuda, EmptyTilesAreNoOps) {
    using T = TypeParam;
    // No workspace at all: an empty tile must not need one, nor touch anything.
    const cuda::QrContext none{this->blas_, this->solver_, this->params_, this->stream_, nullptr, 0};
    const HostMatrix<T> Tf = t_tile<T>(4, 4), R = random_upper<T>(4, this->seed());
    DeviceMatrix<T> dT(Tf), dR(R);
    for (const auto& [m, n] : {std::pair{0, 5}, std::pair{5, 0}, std::pair{0, 0}}) {
        SCOPED_TRACE(where(m, n, 4));
        const HostMatrix<T> A(m, n, std::max(m, 1));
        DeviceMatrix<T> dA(A);
        EXPECT_TRUE(cuda_ok(cuda::geqrt<T>(none, 4, dA.view(), dT.view())));
        EXPECT_TRUE(cuda_ok(cuda::unmqr<T>(none, 'L', 'T', 4, dA.cview(), dT.cview(), dA.view())));
        EXPECT_TRUE(cuda_ok(cuda::tsqrt<T>(none, 4, dR.view(), dA.view(), dT.view())));
        EXPECT_TRUE(cuda_ok(cuda::tsmqr<T>(none, 'N', 4, dR.view(), dA.view(), dA.cview(), dT.cview())));
    }
    // TSQRT and TSMQR with a lower tile of no rows (LAPACK's tpqrt/tpmqrt return at once).
    {
        DeviceMatrix<T> dA(HostMatrix<T>(0, 4, 1)), dC(random_matrix<T>(4, 3, 4, this->seed() + 1));
        const HostMatrix<T> C0 = dC.download();
        DeviceMatrix<T> dC2(HostMatrix<T>(0, 3, 1));
        EXPECT_TRUE(cuda_ok(cuda::tsqrt<T>(none, 4, dR.view(), dA.view(), dT.view())));
        EXPECT_TRUE(cuda_ok(cuda::tsmqr<T>(none, 'T', 4, dC.view(), dC2.view(), dA.cview(), dT.cview())));
        ASSERT_TRUE(this->sync());
        EXPECT_TRUE(same_storage(dC.download(), C0, 0.0)) << "A1";
    }
    ASSERT_TRUE(this->sync());
    EXPECT_TRUE(same_storage(dT.download(), Tf, 0.0)) << "T";
    EXPECT_TRUE(same_storage(dR.download(), R, 0.0)) << "R";
    // A non-empty tile without a workspace: reported, nothing written.
    const HostMatrix<T> A = random_matrix<T>(6, 4, 6, this->seed() + 2);
    DeviceMatrix<T> dA(A);
    EXPECT_EQ(cuda::geqrt<T>(none, 4, dA.view(), dT.view()), cudaErrorInvalidValue);
    EXPECT_EQ(cuda::tsqrt<T>(none, 4, dR.view(), dA.view(), dT.view()), cudaErrorInvalidValue);
    ASSERT_TRUE(this->sync());
    EXPECT_TRUE(same_storage(dA.download(), A, 0.0)) << "A";
    EXPECT_TRUE(same_storage(dT.download(), Tf, 0.0)) << "T";
}

TYPED_TEST(QrCuda, WorkspaceOfExactlyTheReportedSizeIsEnough) {
    using T = TypeParam;
    const int nb = 96, ib = 32;
    // Each kernel with exactly the workspace its codelet asks for, on the largest tiles of that
    // shape, and on narrow edge tiles beside full-width factors (UNMQR's C and TSMQR's A1/A2 of
    // 3 columns with K = 96 reflectors).
    DeviceMatrix<T> D(random_matrix<T>(nb, nb, nb, this->seed()));
    DeviceMatrix<T> Tg(t_tile<T>(ib, nb)), Tt(t_tile<T>(ib, nb));
    ASSERT_TRUE(cuda_ok(cuda::geqrt<T>(this->context(nb, nb, ib), ib, D.view(), Tg.view())));
    DeviceMatrix<T> C(random_matrix<T>(nb, nb, nb, this->seed() + 1));
    ASSERT_TRUE(cuda_ok(cuda::unmqr<T>(this->context(nb, nb, ib), 'L', 'T', ib, D.cview(), Tg.cview(), C.view())));
    DeviceMatrix<T> Cn(random_matrix<T>(nb, 3, nb, this->seed() + 2));
    ASSERT_TRUE(cuda_ok(cuda::unmqr<T>(this->context(nb, 3, ib), 'L', 'N', ib, D.cview(), Tg.cview(), Cn.view())));
    DeviceMatrix<T> A(random_matrix<T>(nb, nb, nb, this->seed() + 3));
    ASSERT_TRUE(cuda_ok(cuda::tsqrt<T>(this->context(nb, nb, ib), ib, D.view(), A.view(), Tt.view())));
    DeviceMatrix<T> A2(random_matrix<T>(nb, nb, nb, this->seed() + 4));
    ASSERT_TRUE(
        cuda_ok(cuda::tsmqr<T>(this->context(nb, nb, ib), 'T', ib, C.view(), A2.view(), A.cview(), Tt.cview())));
    DeviceMatrix<T> B1(random_matrix<T>(nb, 3, nb, this->seed() + 5)), B2(random_matrix<T>(7, 3, 7, this->seed() + 6));
    DeviceMatrix<T> V2(random_matrix<T>(7, nb, 7, this->seed() + 7)), T2(t_tile<T>(ib, nb));
    DeviceMatrix<T> R2(random_upper<T>(nb, this->seed() + 8));
    ASSERT_TRUE(cuda_ok(cuda::tsqrt<T>(this->context(R2.m, nb, ib), ib, R2.view(), V2.view(), T2.view())));
    ASSERT_TRUE(
        cuda_ok(cuda::tsmqr<T>(this->context(nb, 3, ib), 'N', ib, B1.view(), B2.view(), V2.cview(), T2.cview())));
    // TTQRT of a full head and of a 7-row edge head into D's R, then their TTMQRs.
    DeviceMatrix<T> H(random_matrix<T>(nb, nb, nb, this->seed() + 9)), Th(t_tile<T>(ib, nb));
    ASSERT_TRUE(cuda_ok(cuda::ttqrt<T>(this->context(nb, nb, ib), ib, D.view(), H.view(), Th.view())));
    ASSERT_TRUE(
        cuda_ok(cuda::ttmqr<T>(this->context(nb, nb, ib), 'T', ib, C.view(), A2.view(), H.cview(), Th.cview())));
    DeviceMatrix<T> He(random_matrix<T>(7, nb, 7, this->seed() + 10)), The(t_tile<T>(ib, nb));
    ASSERT_TRUE(cuda_ok(cuda::ttqrt<T>(this->context(R2.m, nb, ib), ib, R2.view(), He.view(), The.view())));
    DeviceMatrix<T> E2(random_matrix<T>(7, 3, 7, this->seed() + 11));
    ASSERT_TRUE(
        cuda_ok(cuda::ttmqr<T>(this->context(nb, 3, ib), 'N', ib, B1.view(), E2.view(), He.cview(), The.cview())));
    ASSERT_TRUE(this->sync());
    EXPECT_EQ(non_finite(E2.download()), 0);
    EXPECT_EQ(non_finite(C.download()), 0);
    EXPECT_EQ(non_finite(Cn.download()), 0);
    EXPECT_EQ(non_finite(A2.download()), 0);
    EXPECT_EQ(non_finite(B1.download()), 0);
}

TYPED_TEST(QrCuda, TileQrOnA3x3GridMatchesCpu) {
    using T = TypeParam;
    const int ib = 16;
    // nb not a multiple of ib (a short last inner block); the last tile row and column are
    // narrower, so the last diagonal tile is not square.
    const std::vector<int> rows = {40, 40, 25}, cols = {40, 40, 30};
    const int nt = 3;
    auto at = [&](int i, int j) { return i * nt + j; };
    std::vector<HostMatrix<T>> A, Tg, Tt;
    for (int i = 0; i < nt; ++i)
        for (int j = 0; j < nt; ++j) {
            A.push_back(random_matrix<T>(rows[i], cols[j], rows[i] + 1, this->seed() + at(i, j)));
            Tt.push_back(t_tile<T>(ib, cols[j]));
        }
    for (int k = 0; k < nt; ++k) Tg.push_back(t_tile<T>(ib, std::min(rows[k], cols[k])));

    // CPU.
    std::vector<HostMatrix<T>> Ac = A, Tgc = Tg, Ttc = Tt;
    for (int k = 0; k < nt; ++k) {
        cpu::geqrt<T>(ib, Ac[at(k, k)].view(), Tgc[k].view());
        for (int j = k + 1; j < nt; ++j)
            cpu::unmqr<T>('L', 'T', ib, Ac[at(k, k)].cview(), Tgc[k].cview(), Ac[at(k, j)].view());
        for (int i = k + 1; i < nt; ++i) {
            cpu::tsqrt<T>(ib, Ac[at(k, k)].view(), Ac[at(i, k)].view(), Ttc[at(i, k)].view());
            for (int j = k + 1; j < nt; ++j)
                cpu::tsmqr<T>('T', ib, Ac[at(k, j)].view(), Ac[at(i, j)].view(), Ac[at(i, k)].cview(),
                              Ttc[at(i, k)].cview());
        }
    }

    // CUDA, same order on one stream, one workspace for the largest tile.
    std::vector<DeviceMatrix<T>> dA, dTg, dTt;
    for (int t = 0; t < nt * nt; ++t) {
        dA.emplace_back(A[t]);
        dTt.emplace_back(Tt[t]);
    }
    for (int k = 0; k < nt; ++k) dTg.emplace_back(Tg[k]);
    const cuda::QrContext ctx = this->context(40, 40, ib);
    for (int k = 0; k < nt; ++k) {
        const int kk = at(k, k);
        ASSERT_TRUE(cuda_ok(cuda::geqrt<T>(ctx, ib, dA[kk].view(), dTg[k].view())));
        for (int j = k + 1; j < nt; ++j)
            ASSERT_TRUE(
                cuda_ok(cuda::unmqr<T>(ctx, 'L', 'T', ib, dA[kk].cview(), dTg[k].cview(), dA[at(k, j)].view())));
        for (int i = k + 1; i < nt; ++i) {
            const int ik = at(i, k);
            ASSERT_TRUE(cuda_ok(cuda::tsqrt<T>(ctx, ib, dA[kk].view(), dA[ik].view(), dTt[ik].view())));
            for (int j = k + 1; j < nt; ++j)
                ASSERT_TRUE(cuda_ok(cuda::tsmqr<T>(ctx, 'T', ib, dA[at(k, j)].view(), dA[at(i, j)].view(),
                                                   dA[ik].cview(), dTt[ik].cview())));
        }
    }
    ASSERT_TRUE(this->sync());

    Worst worst("|gpu - cpu| / tol");
    double scale = 1.0;
    for (const HostMatrix<T>& t : Ac) scale = std::max(scale, finite_scale(t));
    const double tol = tolerance<T>(105, scale), ttol = tolerance<T>(105, 2.0);
    for (int i = 0; i < nt; ++i)
        for (int j = 0; j < nt; ++j) {
            const std::string tile = "tile (" + std::to_string(i) + ", " + std::to_string(j) + ")";
            SCOPED_TRACE(tile);
            const int t = at(i, j);
            EXPECT_TRUE(same_storage(dA[t].download(), Ac[t], tol, &worst, tile)) << "A";
            if (i > j) {
                const double t_tol = std::max(ttol, tolerance<T>(105, finite_scale(Ttc[t])));
                EXPECT_TRUE(same_storage(dTt[t].download(), Ttc[t], t_tol, &worst, tile)) << "TSQRT's T";
            }
            if (i == j) {
                const double t_tol = std::max(ttol, tolerance<T>(105, finite_scale(Tgc[i])));
                EXPECT_TRUE(same_storage(dTg[i].download(), Tgc[i], t_tol, &worst, tile)) << "GEQRT's T";
            }
        }
}

}  // namespace
}  // namespace starfact::test
