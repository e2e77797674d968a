// The CUDA LU kernels (cuda::getrf/gessm/tstrf/ssssm) against their CPU twins, called directly
// on a stream of our own (no StarPU): same pivots, same NaN pattern over the whole storage
// (padding, U's strict lower triangle and L's unused entries stay poisoned), values within
// 30 K eps of the CPU's. Every test skips, visibly, on a machine without a CUDA device.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "codelets/cpu/lu_kernels.hpp"
#include "codelets/cuda/lu_kernels.hpp"
#include "cuda_test_support.hpp"
#include "test_support.hpp"

namespace starfact::test {
namespace {

constexpr int kSizes[] = {1, 7, 32, 33, 64, 100, 256};
constexpr int kInnerBlocks[] = {1, 8, 32};
constexpr double kThreshold = 30.0;

std::vector<int> inner_blocks(int K) {
    std::vector<int> ibs;
    for (int ib : kInnerBlocks)
        if (ib < K) ibs.push_back(ib);
    ibs.push_back(K);  // one block: the panel kernel does the whole factorization
    return ibs;
}


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

/// The whole storage of gpu and cpu (padding included): NaN at the same places, other entries
/// within tol.
template <class T>
::testing::AssertionResult same_storage(const HostMatrix<T>& gpu, const HostMatrix<T>& cpu, double tol) {
    if (gpu.data.size() != cpu.data.size()) return ::testing::AssertionFailure() << "storage sizes differ";
    double worst = 0.0;
    std::size_t worst_at = 0;
    for (std::size_t e = 0; e < gpu.data.size(); ++e) {
        const T g = gpu.data[e], c = cpu.data[e];
        if (g == c || (std::isnan(g) && std::isnan(c))) continue;
        if (std::isnan(g) || std::isnan(c))
            return ::testing::AssertionFailure() << "entry (" << e % gpu.ld << ", " << e / gpu.ld << "): gpu " << g
                                                 << ", cpu " << c << " (one NaN)";
        const double d = std::abs(static_cast<double>(g) - static_cast<double>(c));
        if (!(d <= worst)) {
            worst = d;
            worst_at = e;
        }
    }
    if (worst <= tol) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "max |gpu - cpu| = " << worst << " > " << tol << " at ("
                                         << worst_at % gpu.ld << ", " << worst_at / gpu.ld
                                         << "): gpu " << gpu.data[worst_at] << ", cpu " << cpu.data[worst_at];
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

/// max |P A - L U| / (max(m, n) eps max(|A|, |U|)) of getrf's output F (m x n) and pivots.
template <class T>
double getrf_backward_error(const HostMatrix<T>& A, const HostMatrix<T>& F, const std::vector<int>& ipiv) {
    const int m = A.m, n = A.n, k = std::min(m, n);
    std::vector<double> PA(static_cast<std::size_t>(m) * n);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) PA[i + static_cast<std::size_t>(j) * m] = A(i, j);
    for (int j = 0; j < k; ++j)
        for (int c = 0; c < n; ++c)
            std::swap(PA[j + static_cast<std::size_t>(c) * m], PA[(ipiv[j] - 1) + static_cast<std::size_t>(c) * m]);
    double err = 0.0, scale = 0.0;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            double lu = 0.0;
            for (int p = 0; p <= std::min({i, j, k - 1}); ++p)
                lu += (p == i ? 1.0 : static_cast<double>(F(i, p))) * static_cast<double>(F(p, j));
            err = std::max(err, std::abs(PA[i + static_cast<std::size_t>(j) * m] - lu));
            scale = std::max({scale, std::abs(static_cast<double>(A(i, j))),
                              i <= j ? std::abs(static_cast<double>(F(i, j))) : 0.0});
        }
    return err / (std::max({m, n, 1}) * static_cast<double>(ScalarTraits<T>::eps) * std::max(scale, 1.0));
}

/// TSTRF's backward error through the CPU SSSSM: applying TSTRF's own transformations (U's and
/// A's outputs, L, ipiv) to the input stack [triu(U_in); A_in] must give [triu(U_out); 0].
template <class T>
double tstrf_backward_error(const HostMatrix<T>& U_in, const HostMatrix<T>& A_in, const HostMatrix<T>& U_out,
                            const HostMatrix<T>& A_out, const HostMatrix<T>& L_out, const std::vector<int>& ipiv,
                            int ib) {
    const int K = A_in.n, m = A_in.m;
    HostMatrix<T> A1(K, K, K), A2 = A_in;
    for (int j = 0; j < K; ++j)
        for (int i = 0; i < K; ++i) A1(i, j) = i <= j ? U_in(i, j) : T(0);
    cpu::ssssm<T>(A1.view(), A2.view(), L_out.cview(), A_out.cview(), ipiv.data(), ib);
    double err = 0.0, scale = 1.0;
    for (int j = 0; j < K; ++j) {
        for (int i = 0; i < K; ++i) {
            const double expected = i <= j ? static_cast<double>(U_out(i, j)) : 0.0;
            err = std::max(err, std::abs(static_cast<double>(A1(i, j)) - expected));
            scale = std::max(scale, std::abs(expected));
            if (i <= j) scale = std::max(scale, std::abs(static_cast<double>(U_in(i, j))));
        }
        for (int i = 0; i < m; ++i) {
            err = std::max(err, std::abs(static_cast<double>(A2(i, j))));
            scale = std::max(scale, std::abs(static_cast<double>(A_in(i, j))));
        }
    }
    return err / (std::max(K, 1) * static_cast<double>(ScalarTraits<T>::eps) * scale);
}

/// U for TSTRF: (K + 2) x K, random upper triangle; its strict lower part (GETRF's L, never to
/// be touched) and the two extra rows are NaN.
template <class T>
HostMatrix<T> random_upper(int K, std::uint64_t seed) {
    HostMatrix<T> U = random_matrix<T>(K + 2, K, K + 4, seed);
    poison_strict_triangle(U, 'L');
    return U;
}

template <class T>
class LuCuda : public CudaHandlesTest {
protected:
    LuCuda() : CudaHandlesTest("LU") {}

public:
    /// A context whose workspace holds exactly lu_workspace_bytes(m, n, ib) bytes.
    cuda::LuContext context(int m, int n, int ib) {
        const std::size_t bytes = cuda::lu_workspace_bytes<T>(solver_, params_, m, n, ib);
        return {blas_, solver_, params_, stream_, workspace(bytes), bytes};
    }
};

using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LuCuda, Precisions);

/// Pivots equal the CPU's; in single precision a near tie may legitimately break the other
/// way, which is accepted when the GPU's factorization has a small backward error instead.
template <class T>
bool check_pivots(const std::vector<int>& gpu, const std::vector<int>& cpu, double backward_error) {
    if (gpu == cpu) return true;
    if constexpr (std::is_same_v<T, double>) {
        ADD_FAILURE() << "pivots differ from the CPU twin's";
    } else {
        std::cout << "[   NOTE   ] float pivots differ from the CPU twin's (a near tie); backward error "
                  << backward_error << std::endl;
    }
    EXPECT_LT(backward_error, kThreshold);
    return false;
}

TYPED_TEST(LuCuda, GetrfMatchesCpu) {
    using T = TypeParam;
    for (int K : kSizes)
        for (int m : {K, 2 * K + 3}) {
            SCOPED_TRACE("K = " + std::to_string(K) + ", m = " + std::to_string(m));
            const HostMatrix<T> A = random_matrix<T>(m, K, m + 3, this->seed() + 31 * K + m);
            HostMatrix<T> F = A;
            std::vector<int> cpu_piv(K);
            const int cpu_info = cpu::getrf<T>(F.view(), cpu_piv.data(), 8);

            DeviceMatrix<T> dA(A);
            DeviceBuffer<int> dpiv(K), dinfo(1);
            ASSERT_TRUE(cuda_ok(cuda::getrf<T>(this->context(m, K, 8), dA.view(), dpiv.get(), dinfo.get(), 8)));
            ASSERT_TRUE(this->sync());
            const HostMatrix<T> G = dA.download();
            const std::vector<int> gpu_piv = download_ints(dpiv);
            EXPECT_EQ(download_ints(dinfo)[0], cpu_info);
            if (!check_pivots<T>(gpu_piv, cpu_piv, getrf_backward_error(A, G, gpu_piv))) continue;
            EXPECT_TRUE(same_storage(G, F, tolerance<T>(K, finite_scale(F))));
        }
}

TYPED_TEST(LuCuda, GetrfZeroColumnsGiveExactInfo) {
    using T = TypeParam;
    for (int K : {7, 33, 100}) {
        SCOPED_TRACE("K = " + std::to_string(K));
        HostMatrix<T> A = random_matrix<T>(K, K, K + 1, this->seed() + K);
        const int first = K / 3, second = K - 1;
        for (int i = 0; i < K; ++i) A(i, first) = A(i, second) = T(0);
        HostMatrix<T> F = A;
        std::vector<int> cpu_piv(K);
        EXPECT_EQ(cpu::getrf<T>(F.view(), cpu_piv.data(), 8), first + 1);

        DeviceMatrix<T> dA(A);
        DeviceBuffer<int> dpiv(K), dinfo(1);
        ASSERT_TRUE(cuda_ok(cuda::getrf<T>(this->context(K, K, 8), dA.view(), dpiv.get(), dinfo.get(), 8)));
        ASSERT_TRUE(this->sync());
        EXPECT_EQ(download_ints(dinfo)[0], first + 1);
        const std::vector<int> piv = download_ints(dpiv);
        for (int j = 0; j < K; ++j) EXPECT_TRUE(piv[j] >= j + 1 && piv[j] <= K) << "ipiv[" << j << "] = " << piv[j];
    }
}

TYPED_TEST(LuCuda, GetrfNanInputKeepsPivotsInRange) {
    using T = TypeParam;
    for (int K : {7, 64, 100}) {
        SCOPED_TRACE("K = " + std::to_string(K));
        HostMatrix<T> A = random_matrix<T>(K, K, K, this->seed() + K);
        for (int i = 0; i < K; ++i) A(i, K / 2) = nan<T>();
        A(0, 0) = A(K - 1, K / 3) = nan<T>();
        DeviceMatrix<T> dA(A);
        DeviceBuffer<int> dpiv(K), dinfo(1);
        ASSERT_TRUE(cuda_ok(cuda::getrf<T>(this->context(K, K, 8), dA.view(), dpiv.get(), dinfo.get(), 8)));
        ASSERT_TRUE(this->sync());
        const std::vector<int> piv = download_ints(dpiv);
        for (int j = 0; j < K; ++j) EXPECT_TRUE(piv[j] >= j + 1 && piv[j] <= K) << "ipiv[" << j << "] = " << piv[j];
        // A tile with NaN or Inf is factored by the CPU kernel (cuSOLVER drops NaN): the same
        // factors, pivots and info (0: only exactly zero pivots count), and the NaN still in U.
        std::vector<int> cpu_piv(K);
        HostMatrix<T> F = A;
        EXPECT_EQ(download_ints(dinfo)[0], cpu::getrf<T>(F.view(), cpu_piv.data(), 8));
        EXPECT_EQ(download_ints(dinfo)[0], 0);
        EXPECT_EQ(piv, cpu_piv);
        const HostMatrix<T> G = dA.download();
        EXPECT_TRUE(same_storage(G, F, tolerance<T>(K, finite_scale(F)))) << "not the CPU kernel's factors";
        EXPECT_FALSE(std::isfinite(G(K / 2, K / 2))) << "the NaN column's pivot is finite";
    }
}

/// Runs the CPU and the CUDA GESSM on A with the factored diagonal tile D and its pivots and
/// compares the results; D must come back untouched.
template <class T>
void gessm_against_cpu(LuCuda<T>& t, const HostMatrix<T>& D, const std::vector<int>& piv, const HostMatrix<T>& A,
                       int ib) {
    HostMatrix<T> F = A;
    cpu::gessm<T>(piv.data(), D.cview(), F.view(), ib);
    const DeviceMatrix<T> dD(D);
    DeviceMatrix<T> dA(A);
    const DeviceBuffer<int> dpiv = upload_ints(piv);
    ASSERT_TRUE(cuda_ok(cuda::gessm<T>(t.context(A.m, A.n, ib), dpiv.get(), dD.cview(), dA.view(), ib)));
    ASSERT_TRUE(t.sync());
    const int K = std::min(A.m, D.n);
    EXPECT_TRUE(same_storage(dA.download(), F, tolerance<T>(K, std::max(finite_scale(F), finite_scale(D)))));
    EXPECT_TRUE(same_storage(dD.download(), D, 0.0)) << "D must be read only";
}

TYPED_TEST(LuCuda, GessmMatchesCpu) {
    using T = TypeParam;
    for (int K : kSizes)
        for (int n : {K, 2 * K + 3})
            for (int ib : {1, 8, K}) {
                SCOPED_TRACE("K = " + std::to_string(K) + ", n = " + std::to_string(n) + ", ib = " + std::to_string(ib));
                HostMatrix<T> D = random_matrix<T>(K, K, K + 2, this->seed() + K);
                std::vector<int> piv(K);
                cpu::getrf<T>(D.view(), piv.data(), ib);
                gessm_against_cpu(*this, D, piv, random_matrix<T>(K, n, K + 1, this->seed() + 7 * K + n), ib);
            }
}

/// Runs the CPU and the CUDA TSTRF on (U, A) and compares everything; returns the GPU's info.
template <class T>
void tstrf_against_cpu(LuCuda<T>& t, const HostMatrix<T>& U, const HostMatrix<T>& A, int ib, int* info,
                       bool inverse = false) {
    const int K = A.n, m = A.m, lrows = inverse ? 2 * ib : ib;
    HostMatrix<T> Uc = U, Ac = A, Lc(lrows, K, lrows + 1);
    std::vector<int> cpu_piv(K);
    const int cpu_info = cpu::tstrf<T>(Uc.view(), Ac.view(), Lc.view(), cpu_piv.data(), ib, inverse);

    DeviceMatrix<T> dU(U), dA(A), dL(HostMatrix<T>(lrows, K, lrows + 1));
    DeviceBuffer<int> dpiv(K), dinfo(1);
    ASSERT_TRUE(cuda_ok(cuda::tstrf<T>(t.context(m, K, ib), dU.view(), dA.view(), dL.view(), dpiv.get(), dinfo.get(),
                                       ib, inverse)));
    ASSERT_TRUE(t.sync());
    const HostMatrix<T> Ug = dU.download(), Ag = dA.download(), Lg = dL.download();
    const std::vector<int> gpu_piv = download_ints(dpiv);
    *info = download_ints(dinfo)[0];
    EXPECT_EQ(*info, cpu_info);
    // U's strict lower triangle and its extra rows: never written (still the NaN poison).
    EXPECT_EQ(non_nan_in_strict_triangle(Ug, 'L'), 0) << "TSTRF wrote U's strict lower triangle or extra rows";
    for (int j = 0; j < K; ++j)
        EXPECT_TRUE(gpu_piv[j] == j + 1 || (gpu_piv[j] > K && gpu_piv[j] <= K + m)) << "ipiv[" << j << "] = "
                                                                                    << gpu_piv[j];
    if (!check_pivots<T>(gpu_piv, cpu_piv, tstrf_backward_error(U, A, Ug, Ag, Lg, gpu_piv, ib))) return;
    const double tol = tolerance<T>(K, std::max(finite_scale(Uc), finite_scale(Ac)));
    EXPECT_TRUE(same_storage(Ug, Uc, tol)) << "U";
    EXPECT_TRUE(same_storage(Ag, Ac, tol)) << "A";
    // The inverses (variant) scale like L1^{-1}, not like the data.
    EXPECT_TRUE(same_storage(Lg, Lc, std::max(tol, tolerance<T>(K, finite_scale(Lc))))) << "L";
}

TYPED_TEST(LuCuda, TstrfMatchesCpu) {
    using T = TypeParam;
    for (int K : kSizes)
        for (int m : {K, 2 * K + 3})
            for (int ib : inner_blocks(K)) {
                SCOPED_TRACE("K = " + std::to_string(K) + ", m = " + std::to_string(m) + ", ib = " + std::to_string(ib));
                const HostMatrix<T> U = random_upper<T>(K, this->seed() + 3 * K);
                const HostMatrix<T> A = random_matrix<T>(m, K, m + 1, this->seed() + 5 * K + m);
                int info = -1;
                tstrf_against_cpu(*this, U, A, ib, &info);
                EXPECT_EQ(info, 0);
            }
}

TYPED_TEST(LuCuda, TstrfWithInversesMatchesCpu) {
    using T = TypeParam;
    for (int K : kSizes)
        for (int m : {K, 2 * K + 3})
            for (int ib : inner_blocks(K)) {
                SCOPED_TRACE("K = " + std::to_string(K) + ", m = " + std::to_string(m) + ", ib = " + std::to_string(ib));
                const HostMatrix<T> U = random_upper<T>(K, this->seed() + 7 * K);
                const HostMatrix<T> A = random_matrix<T>(m, K, m + 1, this->seed() + 9 * K + m);
                int info = -1;
                tstrf_against_cpu(*this, U, A, ib, &info, true);
                EXPECT_EQ(info, 0);
            }
}

// Inner blocks of 2048 columns (a tile-size sweep on the H100 once failed at nb = 8192 with
// ib = 2048): one full block and a narrow last one, both variants.
TYPED_TEST(LuCuda, TstrfWideInnerBlocksMatchCpu) {
    using T = TypeParam;
    const int ib = 2048, K = ib + 40, m = 48;
    for (bool inverse : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "inverse " << inverse);
        const HostMatrix<T> U = random_upper<T>(K, this->seed() + 11);
        const HostMatrix<T> A = random_matrix<T>(m, K, m + 1, this->seed() + 13);
        int info = -1;
        tstrf_against_cpu(*this, U, A, ib, &info, inverse);
        EXPECT_EQ(info, 0);
    }
}


// The composed swaps keep their bookkeeping in shared memory: 4 (2 ib + m) bytes for TSTRF's and
// SSSSM's pairs. m = 12224 with ib = 32 asks for exactly 48 KiB of dynamic shared memory, which
// with the kernel's own static shared memory is over the default limit (this failed as an invalid
// value before the kernels opted in); m = 20000 needs the opt-in.
TYPED_TEST(LuCuda, TstrfSwapsAtTheSharedMemoryLimitMatchCpu) {
    using T = TypeParam;
    const int ib = 32, K = 2 * ib;
    for (int m : {12224, 20000})
        for (bool inverse : {false, true}) {
            SCOPED_TRACE(::testing::Message() << "m " << m << ", inverse " << inverse);
            const HostMatrix<T> U = random_upper<T>(K, this->seed() + m);
            const HostMatrix<T> A = random_matrix<T>(m, K, m + 1, this->seed() + m + 1);
            int info = -1;
            tstrf_against_cpu(*this, U, A, ib, &info, inverse);
            EXPECT_EQ(info, 0);
        }
}

// GESSM's composed laswp: 4 (m + K) bytes to compose, 2 K values per column to apply. K = 6144
// gives exactly 48 KiB to compose; K = 8192 needs the opt-in for both. D is not a factored tile
// but any unit lower triangle with random pivots, kept well conditioned (entries of size 1/K),
// which is all GESSM reads.
TYPED_TEST(LuCuda, GessmSwapsAtTheSharedMemoryLimitMatchCpu) {
    using T = TypeParam;
    for (int K : {6144, 8192}) {
        SCOPED_TRACE("K = " + std::to_string(K));
        const int n = 24, ib = 512;
        HostMatrix<T> D = random_matrix<T>(K, K, K, this->seed() + K);
        for (int j = 0; j < K; ++j)
            for (int i = 0; i < K; ++i) D(i, j) /= T(K);
        std::mt19937 gen(static_cast<unsigned>(this->seed()));
        std::vector<int> piv(K);
        for (int j = 0; j < K; ++j) piv[j] = std::uniform_int_distribution<int>(j + 1, K)(gen);
        gessm_against_cpu(*this, D, piv, random_matrix<T>(K, n, K, this->seed() + 3 * K), ib);
    }
}
TYPED_TEST(LuCuda, TstrfZeroColumnsGiveExactInfo) {
    using T = TypeParam;
    for (int K : {7, 33, 100})
        for (int ib : {1, 8, K}) {
            SCOPED_TRACE("K = " + std::to_string(K) + ", ib = " + std::to_string(ib));
            HostMatrix<T> U = random_upper<T>(K, this->seed() + K);
            HostMatrix<T> A = random_matrix<T>(K + 3, K, K + 3, this->seed() + 2 * K);
            // A column that is zero in U's upper part and in A stays exactly zero through the
            // eliminations before it: its pivot is an exact zero.
            const int first = K / 2, second = K - 1;
            for (int j : {first, second}) {
                for (int i = 0; i <= j; ++i) U(i, j) = T(0);
                for (int i = 0; i < A.m; ++i) A(i, j) = T(0);
            }
            int info = -1;
            tstrf_against_cpu(*this, U, A, ib, &info);
            EXPECT_EQ(info, first + 1);
        }
}

TYPED_TEST(LuCuda, TstrfNanInputKeepsPivotsInRange) {
    using T = TypeParam;
    for (int K : {7, 64, 100})
        for (int ib : {8, K}) {
            SCOPED_TRACE("K = " + std::to_string(K) + ", ib = " + std::to_string(ib));
            const int m = K + 5;
            HostMatrix<T> U = random_upper<T>(K, this->seed() + K);
            HostMatrix<T> A = random_matrix<T>(m, K, m, this->seed() + 3 * K);
            for (int i = 0; i < m; ++i) A(i, K / 2) = nan<T>();
            A(m - 1, 0) = A(0, K - 1) = nan<T>();
            U(K / 3, K / 3) = nan<T>();
            DeviceMatrix<T> dU(U), dA(A), dL(HostMatrix<T>(ib, K, ib));
            DeviceBuffer<int> dpiv(K), dinfo(1);
            ASSERT_TRUE(cuda_ok(
                cuda::tstrf<T>(this->context(m, K, ib), dU.view(), dA.view(), dL.view(), dpiv.get(), dinfo.get(), ib)));
            ASSERT_TRUE(this->sync());
            const std::vector<int> piv = download_ints(dpiv);
            for (int j = 0; j < K; ++j)
                EXPECT_TRUE(piv[j] == j + 1 || (piv[j] > K && piv[j] <= K + m)) << "ipiv[" << j << "] = " << piv[j];
            // No pivot is exactly zero (NaN ones do not count, as on the CPU), whichever panel
            // path ran: cuSOLVER's, or our kernel redoing a block where cuSOLVER swapped rows of U.
            EXPECT_EQ(download_ints(dinfo)[0], 0);
            EXPECT_EQ(non_nan_in_strict_triangle(dU.download(), 'L'), 0);
        }
}

TYPED_TEST(LuCuda, SsssmMatchesCpu) {
    using T = TypeParam;
    for (int K : kSizes)
        for (int m : {K, 2 * K + 3})
            for (int ib : inner_blocks(K)) {
                SCOPED_TRACE("K = " + std::to_string(K) + ", m = " + std::to_string(m) + ", ib = " + std::to_string(ib));
                // TSTRF's factors, computed once on the CPU and given to both SSSSMs.
                HostMatrix<T> U = random_upper<T>(K, this->seed() + K);
                HostMatrix<T> AL = random_matrix<T>(m, K, m, this->seed() + 2 * K + m);
                HostMatrix<T> L(ib, K, ib);
                std::vector<int> piv(K);
                cpu::tstrf<T>(U.view(), AL.view(), L.view(), piv.data(), ib);
                const int n = K + 5;
                // A1: only its first K rows are used; the two others are poisoned.
                HostMatrix<T> A1 = random_matrix<T>(K + 2, n, K + 2, this->seed() + 11 * K);
                for (int j = 0; j < n; ++j) A1(K, j) = A1(K + 1, j) = nan<T>();
                const HostMatrix<T> A2 = random_matrix<T>(m, n, m + 1, this->seed() + 13 * K + m);
                HostMatrix<T> A1c = A1, A2c = A2;
                cpu::ssssm<T>(A1c.view(), A2c.view(), L.cview(), AL.cview(), piv.data(), ib);

                DeviceMatrix<T> dA1(A1), dA2(A2);
                const DeviceMatrix<T> dL(L), dAL(AL);
                const DeviceBuffer<int> dpiv = upload_ints(piv);
                ASSERT_TRUE(cuda_ok(cuda::ssssm<T>(this->context(m, n, ib), dA1.view(), dA2.view(), dL.cview(),
                                                   dAL.cview(), dpiv.get(), ib)));
                ASSERT_TRUE(this->sync());
                const double tol = tolerance<T>(K, std::max(finite_scale(A1c), finite_scale(A2c)));
                EXPECT_TRUE(same_storage(dA1.download(), A1c, tol)) << "A1";
                EXPECT_TRUE(same_storage(dA2.download(), A2c, tol)) << "A2";
            }
}

TYPED_TEST(LuCuda, SsssmWithInversesMatchesCpuSolve) {
    using T = TypeParam;
    for (int K : kSizes)
        for (int m : {K, 2 * K + 3})
            for (int ib : inner_blocks(K)) {
                SCOPED_TRACE("K = " + std::to_string(K) + ", m = " + std::to_string(m) + ", ib = " + std::to_string(ib));
                // TSTRF's factors with the inverses, from the CPU; the CPU SSSSM solves with L1,
                // the GPU one multiplies by the stored inverse.
                HostMatrix<T> U = random_upper<T>(K, this->seed() + K);
                HostMatrix<T> AL = random_matrix<T>(m, K, m, this->seed() + 2 * K + m);
                HostMatrix<T> L(2 * ib, K, 2 * ib);
                std::vector<int> piv(K);
                cpu::tstrf<T>(U.view(), AL.view(), L.view(), piv.data(), ib, true);
                const int n = K + 5;
                HostMatrix<T> A1 = random_matrix<T>(K + 2, n, K + 2, this->seed() + 11 * K);
                for (int j = 0; j < n; ++j) A1(K, j) = A1(K + 1, j) = nan<T>();
                const HostMatrix<T> A2 = random_matrix<T>(m, n, m + 1, this->seed() + 13 * K + m);
                HostMatrix<T> A1c = A1, A2c = A2;
                cpu::ssssm<T>(A1c.view(), A2c.view(), L.cview(), AL.cview(), piv.data(), ib);

                DeviceMatrix<T> dA1(A1), dA2(A2);
                const DeviceMatrix<T> dL(L), dAL(AL);
                const DeviceBuffer<int> dpiv = upload_ints(piv);
                ASSERT_TRUE(cuda_ok(cuda::ssssm<T>(this->context(m, n, ib), dA1.view(), dA2.view(), dL.cview(),
                                                   dAL.cview(), dpiv.get(), ib, true)));
                ASSERT_TRUE(this->sync());
                const double tol = tolerance<T>(K, std::max({finite_scale(A1c), finite_scale(A2c), finite_scale(L)}));
                EXPECT_TRUE(same_storage(dA1.download(), A1c, tol)) << "A1";
                EXPECT_TRUE(same_storage(dA2.download(), A2c, tol)) << "A2";
            }
}

// GESSM on the diagonal tiles of any shape, the tall last one of a tall matrix included (m > K:
// the rows below K are updated by D's rows below K after the solve).
TYPED_TEST(LuCuda, GessmOnTallDiagonalTilesMatchesCpu) {
    using T = TypeParam;
    for (auto [m, K] : {std::pair{1, 1}, {33, 33}, {100, 100}, {256, 256}, {300, 200}, {45, 31}}) {
        SCOPED_TRACE("m = " + std::to_string(m) + ", K = " + std::to_string(K));
        HostMatrix<T> D = random_matrix<T>(m, K, m + 1, this->seed() + m);
        std::vector<int> piv(std::min(m, K));
        ASSERT_EQ(cpu::getrf<T>(D.view(), piv.data(), 16), 0);
        gessm_against_cpu(*this, D, piv, random_matrix<T>(m, K + 9, m + 2, this->seed() + 3 * m), 32);
    }
}

TYPED_TEST(LuCuda, WorkspaceOfExactlyTheReportedSizeIsEnough) {
    using T = TypeParam;
    const int K = 96, m = 2 * K + 3, ib = 32;
    // One workspace of exactly lu_workspace_bytes(m, K, ib) bytes for every kernel, on the
    // largest tiles it was sized for: a tall GETRF and the others.
    cuda::LuContext ctx = this->context(m, K, ib);
    DeviceMatrix<T> tall(random_matrix<T>(m, K, m, this->seed()));
    DeviceMatrix<T> D(random_matrix<T>(K, K, K, this->seed() + 1));
    DeviceMatrix<T> A(random_matrix<T>(m, K, m, this->seed() + 2));
    DeviceMatrix<T> B(random_matrix<T>(K, K, K, this->seed() + 3));
    DeviceMatrix<T> L(HostMatrix<T>(ib, K, ib));
    DeviceBuffer<int> pd(K), pt(K), pk(K), dinfo(1);
    ASSERT_TRUE(cuda_ok(cuda::getrf<T>(ctx, tall.view(), pt.get(), dinfo.get(), ib)));
    ASSERT_TRUE(cuda_ok(cuda::getrf<T>(ctx, D.view(), pd.get(), dinfo.get(), ib)));
    ASSERT_TRUE(cuda_ok(cuda::gessm<T>(ctx, pd.get(), D.cview(), B.view(), ib)));
    ASSERT_TRUE(cuda_ok(cuda::tstrf<T>(ctx, D.view(), A.view(), L.view(), pk.get(), dinfo.get(), ib)));
    DeviceMatrix<T> A2(random_matrix<T>(m, K, m, this->seed() + 4));
    ASSERT_TRUE(cuda_ok(cuda::ssssm<T>(ctx, B.view(), A2.view(), L.cview(), A.cview(), pk.get(), ib)));
    ASSERT_TRUE(this->sync());
    EXPECT_EQ(download_ints(dinfo)[0], 0);
    // The trtri + gemm variant in the same workspace.
    {
        DeviceMatrix<T> D2(random_matrix<T>(K, K, K, this->seed() + 7)), A3(random_matrix<T>(m, K, m, this->seed() + 8));
        DeviceMatrix<T> L2(HostMatrix<T>(2 * ib, K, 2 * ib)), B3(random_matrix<T>(K, K, K, this->seed() + 9));
        DeviceMatrix<T> A4(random_matrix<T>(m, K, m, this->seed() + 10));
        ASSERT_TRUE(cuda_ok(cuda::getrf<T>(ctx, D2.view(), pd.get(), dinfo.get(), ib)));
        ASSERT_TRUE(cuda_ok(cuda::tstrf<T>(ctx, D2.view(), A3.view(), L2.view(), pk.get(), dinfo.get(), ib, true)));
        ASSERT_TRUE(cuda_ok(cuda::ssssm<T>(ctx, B3.view(), A4.view(), L2.cview(), A3.cview(), pk.get(), ib, true)));
        ASSERT_TRUE(this->sync());
        EXPECT_EQ(download_ints(dinfo)[0], 0);
        // An L without room for the inverses is refused, not overrun.
        EXPECT_EQ(cuda::ssssm<T>(ctx, B3.view(), A4.view(), L.cview(), A3.cview(), pk.get(), ib, true),
                  cudaErrorInvalidValue);
    }

    // SSSSM on a narrow right-hand side (as getrs does, n = 3 < ib) with the workspace the
    // codelet asks for on that tile: lu_workspace_bytes(m, 3, ib).
    {
        cuda::LuContext narrow = this->context(m, 3, ib);
        DeviceMatrix<T> B1(random_matrix<T>(K, 3, K, this->seed() + 5)), B2(random_matrix<T>(m, 3, m, this->seed() + 6));
        ASSERT_TRUE(cuda_ok(cuda::ssssm<T>(narrow, B1.view(), B2.view(), L.cview(), A.cview(), pk.get(), ib)));
        ASSERT_TRUE(this->sync());
    }

    // No workspace at all: GETRF says so instead of writing anywhere.
    cuda::LuContext none = ctx;
    none.work = nullptr;
    none.work_bytes = 0;
    EXPECT_EQ(cuda::getrf<T>(none, D.view(), pd.get(), dinfo.get(), ib), cudaErrorInvalidValue);
}

TYPED_TEST(LuCuda, IncrementalLuOnA3x3GridMatchesCpu) {
    using T = TypeParam;
    const int nt = 3, nb = 40, ib = 16;  // nb not a multiple of ib: a short last inner block
    std::vector<HostMatrix<T>> A, L;
    for (int t = 0; t < nt * nt; ++t) {
        A.push_back(random_matrix<T>(nb, nb, nb + 1, this->seed() + t));
        L.push_back(HostMatrix<T>(ib, nb, ib));
    }
    std::vector<std::vector<int>> piv(nt * nt, std::vector<int>(nb));
    auto at = [&](int i, int j) { return i * nt + j; };

    // CPU.
    std::vector<HostMatrix<T>> Ac = A, Lc = L;
    std::vector<std::vector<int>> pc = piv;
    std::vector<int> cpu_info(nt * nt, 0);
    for (int k = 0; k < nt; ++k) {
        cpu_info[at(k, k)] = cpu::getrf<T>(Ac[at(k, k)].view(), pc[at(k, k)].data(), ib);
        for (int j = k + 1; j < nt; ++j) cpu::gessm<T>(pc[at(k, k)].data(), Ac[at(k, k)].cview(), Ac[at(k, j)].view(), ib);
        for (int i = k + 1; i < nt; ++i) {
            cpu_info[at(i, k)] =
                cpu::tstrf<T>(Ac[at(k, k)].view(), Ac[at(i, k)].view(), Lc[at(i, k)].view(), pc[at(i, k)].data(), ib);
            for (int j = k + 1; j < nt; ++j)
                cpu::ssssm<T>(Ac[at(k, j)].view(), Ac[at(i, j)].view(), Lc[at(i, k)].cview(), Ac[at(i, k)].cview(),
                              pc[at(i, k)].data(), ib);
        }
    }

    // CUDA, same order on one stream.
    std::vector<DeviceMatrix<T>> dA, dL;
    std::vector<DeviceBuffer<int>> dp, dinfo;
    for (int t = 0; t < nt * nt; ++t) {
        dA.emplace_back(A[t]);
        dL.emplace_back(L[t]);
        dp.emplace_back(nb);
        dinfo.emplace_back(1);
    }
    const cuda::LuContext ctx = this->context(nb, nb, ib);
    for (int k = 0; k < nt; ++k) {
        const int kk = at(k, k);
        ASSERT_TRUE(cuda_ok(cuda::getrf<T>(ctx, dA[kk].view(), dp[kk].get(), dinfo[kk].get(), ib)));
        for (int j = k + 1; j < nt; ++j)
            ASSERT_TRUE(cuda_ok(cuda::gessm<T>(ctx, dp[kk].get(), dA[kk].cview(), dA[at(k, j)].view(), ib)));
        for (int i = k + 1; i < nt; ++i) {
            const int ik = at(i, k);
            ASSERT_TRUE(cuda_ok(
                cuda::tstrf<T>(ctx, dA[kk].view(), dA[ik].view(), dL[ik].view(), dp[ik].get(), dinfo[ik].get(), ib)));
            for (int j = k + 1; j < nt; ++j)
                ASSERT_TRUE(cuda_ok(cuda::ssssm<T>(ctx, dA[at(k, j)].view(), dA[at(i, j)].view(), dL[ik].cview(),
                                                   dA[ik].cview(), dp[ik].get(), ib)));
        }
    }
    ASSERT_TRUE(this->sync());

    double scale = 1.0;
    for (const HostMatrix<T>& t : Ac) scale = std::max(scale, finite_scale(t));
    const double tol = tolerance<T>(nt * nb, scale);
    for (int i = 0; i < nt; ++i)
        for (int j = 0; j < nt; ++j) {
            SCOPED_TRACE("tile (" + std::to_string(i) + ", " + std::to_string(j) + ")");
            const int t = at(i, j);
            if (i >= j) {
                EXPECT_EQ(download_ints(dinfo[t])[0], cpu_info[t]);
                // A near tie in single precision would change everything after it; it is too
                // unlikely at this size to be worth a fallback, so pivots must match.
                ASSERT_EQ(download_ints(dp[t]), pc[t]);
            }
            EXPECT_TRUE(same_storage(dA[t].download(), Ac[t], tol)) << "A";
            if (i > j) {
                EXPECT_TRUE(same_storage(dL[t].download(), Lc[t], tol)) << "L";
            }
        }
}

}  // namespace
}  // namespace starfact::test
