// Codelets: one task per codelet on registered tiles (lda > m, NaN padding and poisoned
// triangles), forced onto the CPU and compared with the pure CPU kernel, forced onto CUDA and
// compared with the CPU twin; potrf's info through variable handles and InfoVector; forcing
// an implementation with no worker of that kind throws.
#include <gtest/gtest.h>
#include <starpu.h>

#include <cstdlib>
#include <functional>

#include "codelets/codelets.hpp"
#include "codelets/cpu/tile_kernels.hpp"
#include "common/error.hpp"
#include "common/kernel_error.hpp"
#include "test_support.hpp"
#include "tile_algorithms/tile_matrix.hpp"

namespace starfact::test {
namespace {
using codelets::Impl;
using codelets::ScopedImpl;

/// A HostMatrix registered as a StarPU matrix handle (ld = the matrix's ld); unregistering
/// waits for its tasks and brings the data back into the HostMatrix.
template <class T>
class Registered {
public:
    explicit Registered(HostMatrix<T>& M) {
        starpu_matrix_data_register(&h_, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(M.ptr()),
                                    static_cast<unsigned>(M.ld), static_cast<unsigned>(M.m), static_cast<unsigned>(M.n),
                                    sizeof(T));
    }
    ~Registered() { starpu_data_unregister(h_); }
    Registered(const Registered&) = delete;
    Registered& operator=(const Registered&) = delete;
    starpu_data_handle_t get() const { return h_; }

private:
    starpu_data_handle_t h_ = nullptr;
};

/// One int registered as a StarPU variable, starting at a sentinel no kernel writes.
class RegisteredInt {
public:
    static constexpr int kSentinel = -777;
    RegisteredInt() {
        starpu_variable_data_register(&h_, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(&value_), sizeof(int));
    }
    ~RegisteredInt() { unregister(); }
    RegisteredInt(const RegisteredInt&) = delete;
    RegisteredInt& operator=(const RegisteredInt&) = delete;
    starpu_data_handle_t get() const { return h_; }
    /// Waits for the writer and returns the value (the handle is gone afterwards).
    int take() {
        unregister();
        return value_;
    }

private:
    void unregister() {
        if (h_) starpu_data_unregister(h_);
        h_ = nullptr;
    }
    int value_ = kSentinel;
    starpu_data_handle_t h_ = nullptr;
};

template <class T>
class Codelets : public RuntimeTest {
protected:
    /// Runs `submit` with `impl` forced on tiles that are unregistered by the caller, then
    /// expects no recorded kernel error.
    void expect_no_kernel_error() { EXPECT_EQ(take_kernel_error(), "") << "a kernel recorded an error"; }

    /// Relative tolerance of a comparison with the pure CPU kernel: the CPU codelet runs the
    /// same OpenBLAS call (a few ulps for alignment-dependent paths), cuBLAS/cuSOLVER sum in
    /// another order (k eps).
    static double tolerance(Impl impl, int k) { return (impl == Impl::Cpu ? 4.0 : 30.0 * k) * ScalarTraits<T>::eps; }

    /// Skips visibly when `impl` is CUDA and no CUDA worker exists.
    bool unavailable(Impl impl) const { return impl == Impl::Cuda && this->ncuda() == 0; }

    void potrf_matches_cpu_kernel(Impl impl);
    void trsm_matches_cpu_kernel(Impl impl);
    void syrk_matches_cpu_kernel(Impl impl);
    void gemm_matches_cpu_kernel(Impl impl);
    void potrf_info_is_exact(Impl impl);
    void info_vector_reports_first_failure(Impl impl);
};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Codelets, Precisions);

constexpr int kNb = 13;

template <class T>
void Codelets<T>::potrf_matches_cpu_kernel(Impl impl) {
    for (char uplo : {'L', 'U'})
        for (int n : {1, 5, kNb}) {
            SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", n " << n);
            const char other = uplo == 'L' ? 'U' : 'L';
            HostMatrix<T> A0 = random_spd<T>(n, n + 3, this->seed() + n);
            poison_strict_triangle(A0, other);
            HostMatrix<T> expected = A0, got = A0;
            ASSERT_EQ(cpu::potrf(uplo, expected.view()), 0);
            int info = RegisteredInt::kSentinel;
            {
                Registered<T> tile(got);
                RegisteredInt var;
                ScopedImpl force(impl);
                codelets::submit_potrf<T>(uplo, tile.get(), var.get(), 0);
                info = var.take();
            }
            this->expect_no_kernel_error();
            EXPECT_EQ(info, 0);
            EXPECT_LE(max_abs_diff(got, expected, uplo), tolerance(impl, n) * max_abs(expected, uplo));
            EXPECT_EQ(non_nan_in_strict_triangle(got, other), 0) << "the other triangle was written";
            EXPECT_EQ(non_nan_in_padding(got), 0) << "the padding was written";
            EXPECT_PRED_FORMAT1(ResidualPasses, potrf_residual(uplo, A0, got));
        }
}

template <class T>
void Codelets<T>::trsm_matches_cpu_kernel(Impl impl) {
    struct Combo {
        char side, uplo, trans;
    };
    // potrf lower and upper panels, then the forward and backward sweeps of potrs.
    for (Combo c : {Combo{'R', 'L', 'T'}, Combo{'L', 'U', 'T'}, Combo{'L', 'L', 'N'}, Combo{'L', 'L', 'T'},
                    Combo{'L', 'U', 'N'}}) {
        SCOPED_TRACE(::testing::Message() << "side " << c.side << " uplo " << c.uplo << " trans " << c.trans);
        // A is the factor of a diagonal tile; B an edge tile (6 columns or 6 rows).
        HostMatrix<T> A = random_spd<T>(kNb, kNb + 2, this->seed());
        ASSERT_EQ(cpu::potrf(c.uplo, A.view()), 0);
        poison_strict_triangle(A, c.uplo == 'L' ? 'U' : 'L');
        const int m = c.side == 'L' ? kNb : 6, n = c.side == 'L' ? 6 : kNb;
        const HostMatrix<T> B0 = random_matrix<T>(m, n, m + 5, this->seed() + 1);
        HostMatrix<T> expected = B0, got = B0;
        cpu::trsm(c.side, c.uplo, c.trans, 'N', T(1), A.cview(), expected.view());
        {
            Registered<T> a(A), b(got);
            ScopedImpl force(impl);
            codelets::submit_trsm<T>(c.side, c.uplo, c.trans, 'N', T(1), a.get(), b.get(), 0);
        }
        this->expect_no_kernel_error();
        ASSERT_EQ(non_finite(got), 0);
        EXPECT_LE(max_abs_diff(got, expected), tolerance(impl, kNb) * max_abs(expected));
        EXPECT_GT(max_abs_diff(got, B0), 1e-3) << "B was not solved";
        EXPECT_EQ(non_nan_in_padding(got), 0);
        EXPECT_EQ(non_nan_in_strict_triangle(A, c.uplo == 'L' ? 'U' : 'L'), 0) << "A (read-only) was written";
    }
}

template <class T>
void Codelets<T>::syrk_matches_cpu_kernel(Impl impl) {
    for (char uplo : {'L', 'U'}) {
        const char trans = uplo == 'L' ? 'N' : 'T';  // as the lower and upper Cholesky use it
        SCOPED_TRACE(::testing::Message() << "uplo " << uplo << " trans " << trans);
        const int n = 6, k = kNb;  // an edge diagonal tile updated by a full panel tile
        const HostMatrix<T> A =
            trans == 'N' ? random_matrix<T>(n, k, n + 1, this->seed()) : random_matrix<T>(k, n, k + 1, this->seed());
        HostMatrix<T> C0 = random_spd<T>(n, n + 2, this->seed() + 1);
        const char other = uplo == 'L' ? 'U' : 'L';
        poison_strict_triangle(C0, other);
        HostMatrix<T> expected = C0, got = C0, a_copy = A;
        cpu::syrk(uplo, trans, T(-1), A.cview(), T(1), expected.view());
        {
            Registered<T> a(a_copy), c(got);
            ScopedImpl force(impl);
            codelets::submit_syrk<T>(uplo, trans, T(-1), a.get(), T(1), c.get(), 0);
        }
        this->expect_no_kernel_error();
        ASSERT_EQ(non_finite(got, uplo), 0);
        EXPECT_LE(max_abs_diff(got, expected, uplo), tolerance(impl, k) * (max_abs(C0, uplo) + k));
        EXPECT_GT(max_abs_diff(got, C0, uplo), 1e-3) << "C was not updated";
        EXPECT_EQ(non_nan_in_strict_triangle(got, other), 0) << "syrk wrote the other triangle";
        EXPECT_EQ(non_nan_in_padding(got), 0);
    }
}

template <class T>
void Codelets<T>::gemm_matches_cpu_kernel(Impl impl) {
    for (char ta : {'N', 'T'})
        for (char tb : {'N', 'T'}) {
            SCOPED_TRACE(::testing::Message() << "transa " << ta << " transb " << tb);
            const int m = 6, n = kNb, k = kNb;
            const HostMatrix<T> A =
                ta == 'N' ? random_matrix<T>(m, k, m + 2, this->seed()) : random_matrix<T>(k, m, k + 2, this->seed());
            const HostMatrix<T> B = tb == 'N' ? random_matrix<T>(k, n, k + 1, this->seed() + 1)
                                              : random_matrix<T>(n, k, n + 1, this->seed() + 1);
            const HostMatrix<T> C0 = random_matrix<T>(m, n, m + 3, this->seed() + 2);
            HostMatrix<T> expected = C0, got = C0, a_copy = A, b_copy = B;
            cpu::gemm(ta, tb, T(-1), A.cview(), B.cview(), T(1), expected.view());
            {
                Registered<T> a(a_copy), b(b_copy), c(got);
                ScopedImpl force(impl);
                codelets::submit_gemm<T>(ta, tb, T(-1), a.get(), b.get(), T(1), c.get(), 0);
            }
            this->expect_no_kernel_error();
            ASSERT_EQ(non_finite(got), 0);
            EXPECT_LE(max_abs_diff(got, expected), tolerance(impl, k) * (1 + k));
            EXPECT_GT(max_abs_diff(got, C0), 1e-3) << "C was not updated";
            EXPECT_EQ(non_nan_in_padding(got), 0);
        }
}

template <class T>
void Codelets<T>::potrf_info_is_exact(Impl impl) {
    for (char uplo : {'L', 'U'})
        for (int k : {1, kNb / 2 + 1, kNb}) {
            SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", planted minor " << k);
            HostMatrix<T> A = spd_failing_at<T>(kNb, k, kNb + 1, this->seed() + k);
            ASSERT_EQ(reference_potrf_info(uplo, A), k);
            int info = RegisteredInt::kSentinel;
            {
                Registered<T> tile(A);
                RegisteredInt var;
                ScopedImpl force(impl);
                codelets::submit_potrf<T>(uplo, tile.get(), var.get(), 0);
                info = var.take();
            }
            this->expect_no_kernel_error();
            EXPECT_EQ(info, k) << "the local info must be LAPACK's, exactly";
        }
}

template <class T>
void Codelets<T>::info_vector_reports_first_failure(Impl impl) {
    // Three diagonal tiles: SPD, failing at local minor 2, failing at local minor 1. The global
    // info is nb * k + info_k of the first failing tile: kNb + 2.
    HostMatrix<T> t0 = random_spd<T>(kNb, kNb, this->seed());
    HostMatrix<T> t1 = spd_failing_at<T>(kNb, 2, kNb, this->seed() + 1);
    HostMatrix<T> t2 = spd_failing_at<T>(5, 1, 5, this->seed() + 2);
    int global = -1;
    {
        Registered<T> r0(t0), r1(t1), r2(t2);
        InfoVector info(3);
        ScopedImpl force(impl);
        codelets::submit_potrf<T>('L', r0.get(), info[0], 3);
        codelets::submit_potrf<T>('L', r1.get(), info[1], 2);
        codelets::submit_potrf<T>('L', r2.get(), info[2], 1);
        global = info.global_info(kNb);
    }
    this->expect_no_kernel_error();
    EXPECT_EQ(global, kNb + 2);
}

#define STARFACT_CODELET_TESTS(Name, method)                     \
    TYPED_TEST(Codelets, Name##Cpu) { this->method(Impl::Cpu); } \
    TYPED_TEST(Codelets, Name##CudaMatchesCpu) {                 \
        STARFACT_REQUIRE_CUDA_WORKER(this->ncuda());             \
        this->method(Impl::Cuda);                                \
    }

STARFACT_CODELET_TESTS(Potrf, potrf_matches_cpu_kernel)
STARFACT_CODELET_TESTS(TrsmCholeskyCombinations, trsm_matches_cpu_kernel)
STARFACT_CODELET_TESTS(Syrk, syrk_matches_cpu_kernel)
STARFACT_CODELET_TESTS(Gemm, gemm_matches_cpu_kernel)
STARFACT_CODELET_TESTS(PotrfPlantedInfo, potrf_info_is_exact)
STARFACT_CODELET_TESTS(InfoVectorFirstFailure, info_vector_reports_first_failure)

// Forcing CUDA with no CUDA worker: every submission throws RuntimeError, nothing runs, and
// once the force is lifted the same handles work. On a GPU machine the Runtime is restarted
// with ncuda = 0 (skipped if STARPU_NCUDA overrides it). The scenario runs in a re-executed
// child process (a "threadsafe" death test) so that a crash inside StarPU fails this test alone
// instead of ending the whole binary.
template <class T>
void forced_cuda_scenario(std::uint64_t seed) {
    const HostMatrix<T> A0 = random_spd<T>(kNb, kNb + 1, seed);
    HostMatrix<T> A = A0, B = random_matrix<T>(kNb, kNb, kNb, seed + 1), C = A0;
    const HostMatrix<T> B0 = B;
    {
        Registered<T> a(A), b(B), c(C);
        RegisteredInt var;
        {
            ScopedImpl force(Impl::Cuda);
            EXPECT_THROW(codelets::submit_potrf<T>('L', a.get(), var.get(), 0), RuntimeError);
            EXPECT_THROW(codelets::submit_trsm<T>('R', 'L', 'T', 'N', T(1), a.get(), b.get(), 0), RuntimeError);
            EXPECT_THROW(codelets::submit_syrk<T>('L', 'N', T(-1), b.get(), T(1), c.get(), 0), RuntimeError);
            EXPECT_THROW(codelets::submit_gemm<T>('N', 'T', T(-1), b.get(), b.get(), T(1), c.get(), 0), RuntimeError);
        }
        EXPECT_EQ(codelets::forced_impl(), Impl::Any) << "ScopedImpl did not restore the previous setting";
        starpu_task_wait_for_all();
    }
    EXPECT_EQ(max_abs_diff(A, A0), 0.0) << "a refused task modified its data";
    EXPECT_EQ(max_abs_diff(B, B0), 0.0);
    // The handles are still usable: the same factorization now runs on the CPU.
    int info = RegisteredInt::kSentinel;
    {
        Registered<T> a(A);
        RegisteredInt var;
        codelets::submit_potrf<T>('L', a.get(), var.get(), 0);
        info = var.take();
    }
    EXPECT_EQ(info, 0);
    EXPECT_PRED_FORMAT1(ResidualPasses, potrf_residual('L', A0, A));
}

TYPED_TEST(Codelets, ForcedCudaWithoutCudaWorkerThrows) {
    if (this->ncuda() > 0) {
        RuntimeOptions options;
        options.ncuda = 0;
        this->restart_runtime(options);
    }
    if (this->ncuda() > 0) GTEST_SKIP() << "a CUDA worker exists even with ncuda = 0 (STARPU_NCUDA set?)";
    ASSERT_GT(this->runtime().ncpu(), 0);
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            forced_cuda_scenario<TypeParam>(this->seed());
            const bool failed = ::testing::Test::HasFailure();
            this->shutdown_runtime();
            std::exit(failed ? 1 : 0);
        },
        ::testing::ExitedWithCode(0), "")
        << "the scenario failed or crashed in the child process (its output is above)";
}

}  // namespace
}  // namespace starfact::test
