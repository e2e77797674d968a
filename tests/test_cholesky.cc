// Tile Cholesky (potrf, potrs, posv) and TileMatrix on a running Runtime: residuals over
// sizes around odd and even nb, exact info of planted failures, NaN/Inf in one tile, argument
// errors that leave the data untouched, LAPACK layout round trips, and the CUDA path forced.
#include <gtest/gtest.h>
#include <starpu.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "codelets/codelets.hpp"
#include "common/error.hpp"
#include "test_support.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

namespace starfact::test {
namespace {
using codelets::Impl;
using codelets::ScopedImpl;

template <class T>
class Cholesky : public RuntimeTest {
protected:
    /// The input of a factorization: A (both triangles) and a copy whose strict `other`
    /// triangle is NaN, since potrf must neither read nor write it.
    struct Input {
        HostMatrix<T> full, poisoned;
    };
    static Input spd_input(char uplo, int n, int lda, std::uint64_t seed) {
        Input in{random_spd<T>(n, lda, seed), {}};
        in.poisoned = in.full;
        poison_strict_triangle(in.poisoned, uplo == 'L' ? 'U' : 'L');
        return in;
    }

    /// Copies A into a TileMatrix, runs potrf, copies the tiles back into a NaN-filled matrix
    /// with A's leading dimension.
    static HostMatrix<T> factor(char uplo, const HostMatrix<T>& A, int nb, int* info) {
        TileMatrix<T> tA(A.m, A.n, nb);
        tA.from_lapack(A.ptr(), A.ld);
        *info = potrf(uplo, tA);
        HostMatrix<T> F(A.m, A.n, A.ld);
        tA.to_lapack(F.ptr(), F.ld);
        return F;
    }

    /// The checks every successful factorization must pass.
    static void expect_good_factor(char uplo, const Input& in, const HostMatrix<T>& F, int info) {
        const char other = uplo == 'L' ? 'U' : 'L';
        EXPECT_EQ(info, 0);
        EXPECT_EQ(non_finite(F, uplo), 0) << "NaN or Inf in the factor";
        EXPECT_PRED_FORMAT1(ResidualPasses, potrf_residual(uplo, in.full, F));
        EXPECT_EQ(non_nan_in_strict_triangle(F, other), 0) << "the other triangle was read into or written";
        EXPECT_EQ(non_nan_in_padding(F), 0) << "to_lapack wrote rows beyond m";
    }

    void factor_every_size(char uplo);
    void planted_failures(char uplo, bool check_leading_block);
};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Cholesky, Precisions);

std::vector<int> sizes_around(int nb) { return {0, 1, 2, 3, nb - 1, nb, nb + 1, 2 * nb + 1, 3 * nb + 7}; }

template <class T>
void Cholesky<T>::factor_every_size(char uplo) {
    for (int nb : {7, 8})
        for (int n : sizes_around(nb)) {
            SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", n " << n << ", nb " << nb);
            const Input in = spd_input(uplo, n, n + 3, this->seed() + n);
            int info = -1;
            const HostMatrix<T> F = factor(uplo, in.poisoned, nb, &info);
            expect_good_factor(uplo, in, F, info);
        }
}

TYPED_TEST(Cholesky, PotrfLowerEverySizeAroundOddAndEvenNb) { this->factor_every_size('L'); }
TYPED_TEST(Cholesky, PotrfUpperEverySizeAroundOddAndEvenNb) { this->factor_every_size('U'); }

TYPED_TEST(Cholesky, PotrfManyTilesBothTriangles) {
    using T = TypeParam;
    for (char uplo : {'L', 'U'}) {
        SCOPED_TRACE(::testing::Message() << "uplo " << uplo);
        const int n = 257, nb = 16;  // 17 x 17 tiles, a full last-but-one and a 1-wide last tile
        const auto in = TestFixture::spd_input(uplo, n, n + 1, this->seed());
        int info = -1;
        const HostMatrix<T> F = TestFixture::factor(uplo, in.poisoned, nb, &info);
        TestFixture::expect_good_factor(uplo, in, F, info);
    }
}

template <class T>
void Cholesky<T>::planted_failures(char uplo, bool check_leading_block) {
    for (int nb : {7, 8}) {
        const int n = 3 * nb + 7;
        for (int k : {1, n / 2 + 1, n, nb, nb + 1}) {
            SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", n " << n << ", nb " << nb << ", minor " << k);
            HostMatrix<T> A = spd_failing_at<T>(n, k, n + 2, this->seed() + k);
            ASSERT_EQ(reference_potrf_info(uplo, A), k);
            const HostMatrix<T> full = A;
            poison_strict_triangle(A, uplo == 'L' ? 'U' : 'L');
            int info = -1;
            const HostMatrix<T> F = factor(uplo, A, nb, &info);
            EXPECT_EQ(info, k) << "info must be the global order of the first non-positive minor";
            // As in LAPACK, the leading k-1 columns hold the factor of the leading minor.
            if (check_leading_block && k > 1) {
                EXPECT_PRED_FORMAT1(ResidualPasses,
                                    checks::potrf_residual<T>(uplo, k - 1, full.ptr(), full.ld, F.ptr(), F.ld));
            }
        }
    }
}

// A TileMatrix wrapped around storage the caller already holds in the tile layout: nothing is
// copied in, the factor lands in the caller's storage when the TileMatrix goes, and the result
// is the one of the copying path.
TYPED_TEST(Cholesky, WrappedTileStorageFactorsInPlace) {
    using T = TypeParam;
    const int n = 23, nb = 8;
    const typename TestFixture::Input in = this->spd_input('L', n, n, this->seed());
    // The caller's storage in the tile layout, filled from the column-major matrix.
    std::vector<T> tiled(static_cast<std::size_t>(n) * n, std::numeric_limits<T>::quiet_NaN());
    const int nt = (n + nb - 1) / nb;
    auto tile_rows = [&](int i) { return i + 1 < nt ? nb : n - i * nb; };
    for (int j = 0; j < nt; ++j)
        for (int i = 0; i < nt; ++i) {
            T* t = tiled.data() + TileMatrix<T>::tile_offset(n, n, nb, i, j);
            for (int c = 0; c < tile_rows(j); ++c)
                for (int r = 0; r < tile_rows(i); ++r) t[r + c * tile_rows(i)] = in.full(i * nb + r, j * nb + c);
        }
    int info = -1;
    {
        TileMatrix<T> A = TileMatrix<T>::wrap(tiled.data(), n, n, nb);
        info = potrf('L', A);
    }
    ASSERT_EQ(info, 0);
    HostMatrix<T> F(n, n, n);
    for (int j = 0; j < nt; ++j)
        for (int i = 0; i < nt; ++i) {
            const T* t = tiled.data() + TileMatrix<T>::tile_offset(n, n, nb, i, j);
            for (int c = 0; c < tile_rows(j); ++c)
                for (int r = 0; r < tile_rows(i); ++r) F(i * nb + r, j * nb + c) = t[r + c * tile_rows(i)];
        }
    EXPECT_PRED_FORMAT1(ResidualPasses, potrf_residual('L', in.full, F));
    int info_copy = -1;
    const HostMatrix<T> G = this->factor('L', in.full, nb, &info_copy);
    ASSERT_EQ(info_copy, 0);
    // Not bitwise: the scheduler may run a task on a GPU in one run and on a CPU in the other.
    T gmax = 0;
    for (int j = 0; j < n; ++j)
        for (int i = j; i < n; ++i) gmax = std::max(gmax, std::abs(G(i, j)));
    const T tol = 100 * n * ScalarTraits<T>::eps * gmax;
    for (int j = 0; j < n; ++j)
        for (int i = j; i < n; ++i) EXPECT_NEAR(F(i, j), G(i, j), tol) << "(" << i << ", " << j << ")";
    EXPECT_THROW(TileMatrix<T>::wrap(nullptr, n, n, nb), ArgumentError);
}

TYPED_TEST(Cholesky, PlantedNonSpdMinorGivesExactInfo) {
    ScopedImpl cpu(Impl::Cpu);  // the leading-block property is LAPACK's; cuSOLVER's is tested below
    this->planted_failures('L', true);
    this->planted_failures('U', true);
}

// NaN or Inf in one tile of the referenced triangle: the factorization finishes (no crash, no
// hang) and reports what LAPACK's potrf reports on the whole matrix. LAPACK stops at the first
// column j whose pivot a(j,j) - sum_k l(j,k)^2 is not positive or is NaN (DISNAN) and returns
// info = j. A NaN at (i, j), i > j, in L (or at (j, i) in U) spreads along row i and reaches
// the pivot of column i first: info = i + 1. A NaN on the diagonal at (d, d): info = d + 1. An
// Inf off the diagonal at (i, j) makes pivot i equal to -Inf or NaN: info = i + 1 too. (An Inf
// on the diagonal is not reported by LAPACK: sqrt(Inf) is a valid pivot; not tested.)
// The expected info is computed by the reference dpotf2 (reference_potrf_info), not assumed.
TYPED_TEST(Cholesky, NaNOrInfInOneTileReportsLapackColumn) {
    using T = TypeParam;
    const int nb = 7, n = 3 * nb + 7;  // 28: tiles of 7, 7, 7, 7
    struct Plant {
        int i, j;
        T value;
    };
    const T inf = std::numeric_limits<T>::infinity();
    for (char uplo : {'L', 'U'})
        for (Plant p : {Plant{16, 3, nan<T>()}, Plant{10, 10, nan<T>()}, Plant{27, 26, nan<T>()}, Plant{9, 8, nan<T>()},
                        Plant{20, 2, inf}}) {
            SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", " << p.value << " at (" << p.i << ", " << p.j
                                              << ") of the lower triangle");
            HostMatrix<T> A = random_spd<T>(n, n, this->seed());
            A(p.i, p.j) = p.value;
            A(p.j, p.i) = p.value;
            const int expected = reference_potrf_info(uplo, A);
            ASSERT_EQ(expected, p.i + 1);
            int info = -1;
            TestFixture::factor(uplo, A, nb, &info);
            EXPECT_EQ(info, expected);
        }
}

// ---- solve ---------------------------------------------------------------------------------

TYPED_TEST(Cholesky, PosvSeveralRightHandSides) {
    using T = TypeParam;
    const int nb = 7;
    for (char uplo : {'L', 'U'})
        for (int n : {1, nb, 2 * nb + 1, 3 * nb + 7})
            for (int nrhs : {1, 3, nb + 2}) {
                SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", n " << n << ", nrhs " << nrhs);
                const auto in = TestFixture::spd_input(uplo, n, n + 2, this->seed() + n);
                const HostMatrix<T> B = random_matrix<T>(n, nrhs, n + 4, this->seed() + 100 + nrhs);
                TileMatrix<T> tA(n, n, nb), tB(n, nrhs, nb);
                tA.from_lapack(in.poisoned.ptr(), in.poisoned.ld);
                tB.from_lapack(B.ptr(), B.ld);
                ASSERT_EQ(posv(uplo, tA, tB), 0);
                HostMatrix<T> X(n, nrhs, n + 4);
                tB.to_lapack(X.ptr(), X.ld);
                ASSERT_EQ(non_finite(X), 0);
                EXPECT_PRED_FORMAT1(ResidualPasses, solve_residual(in.full, X, B));
                EXPECT_GT(max_abs_diff(X, B), 0.0) << "B was not overwritten with X";
            }
}

TYPED_TEST(Cholesky, PotrsReusesTheFactor) {
    using T = TypeParam;
    const int n = 30, nb = 8;
    for (char uplo : {'L', 'U'}) {
        SCOPED_TRACE(::testing::Message() << "uplo " << uplo);
        const auto in = TestFixture::spd_input(uplo, n, n, this->seed());
        TileMatrix<T> tA(n, n, nb);
        tA.from_lapack(in.poisoned.ptr(), n);
        ASSERT_EQ(potrf(uplo, tA), 0);
        for (int nrhs : {2, 17}) {
            const HostMatrix<T> B = random_matrix<T>(n, nrhs, n, this->seed() + nrhs);
            TileMatrix<T> tB(n, nrhs, nb);
            tB.from_lapack(B.ptr(), n);
            potrs(uplo, tA, tB);
            HostMatrix<T> X(n, nrhs, n);
            tB.to_lapack(X.ptr(), n);
            EXPECT_PRED_FORMAT1(ResidualPasses, solve_residual(in.full, X, B)) << "nrhs " << nrhs;
        }
    }
}

TYPED_TEST(Cholesky, PosvOnNonSpdReportsInfoAndLeavesBUntouched) {
    using T = TypeParam;
    const int n = 25, nb = 8, k = 13;
    for (char uplo : {'L', 'U'}) {
        SCOPED_TRACE(::testing::Message() << "uplo " << uplo);
        const HostMatrix<T> A = spd_failing_at<T>(n, k, n, this->seed());
        const HostMatrix<T> B = random_matrix<T>(n, 3, n, this->seed() + 1);
        TileMatrix<T> tA(n, n, nb), tB(n, 3, nb);
        tA.from_lapack(A.ptr(), n);
        tB.from_lapack(B.ptr(), n);
        EXPECT_EQ(posv(uplo, tA, tB), k);
        HostMatrix<T> X(n, 3, n);
        tB.to_lapack(X.ptr(), n);
        EXPECT_EQ(std::memcmp(X.ptr(), B.ptr(), sizeof(T) * B.data.size()), 0) << "B changed although potrf failed";
    }
}

// ---- argument errors -----------------------------------------------------------------------

/// Runs `call`, expects ArgumentError naming `argument`, and that no task is left in flight.
template <class F>
void expect_argument_error(const char* argument, F call) {
    starpu_task_wait_for_all();  // nothing of an earlier step may be counted below
    try {
        call();
        ADD_FAILURE() << "no ArgumentError for '" << argument << "'";
    } catch (const ArgumentError& e) {
        EXPECT_EQ(e.argument(), argument) << e.what();
    } catch (const std::exception& e) {
        ADD_FAILURE() << "expected ArgumentError for '" << argument << "', got: " << e.what();
    }
    EXPECT_EQ(starpu_task_nsubmitted(), 0) << "a task was submitted before the argument check";
}

template <class T>
HostMatrix<T> contents(const TileMatrix<T>& t) {
    HostMatrix<T> M(t.m(), t.n(), std::max(1, t.m()));
    t.to_lapack(M.ptr(), M.ld);
    return M;
}

template <class T>
bool same_bits(const HostMatrix<T>& a, const HostMatrix<T>& b) {
    return a.data.size() == b.data.size() && std::memcmp(a.ptr(), b.ptr(), sizeof(T) * a.data.size()) == 0;
}

TYPED_TEST(Cholesky, ArgumentErrorsComeFirstAndLeaveTilesUntouched) {
    using T = TypeParam;
    const int n = 20, nb = 6;
    const HostMatrix<T> A = random_spd<T>(n, n, this->seed());
    const HostMatrix<T> R = random_matrix<T>(n + 1, n + 3, n + 1, this->seed() + 1);  // wide enough for rect
    TileMatrix<T> tA(n, n, nb), rect(n, n + 3, nb), tB(n, 2, nb), shortB(n - 1, 2, nb), otherNb(n, 2, nb + 1);
    tA.from_lapack(A.ptr(), n);
    rect.from_lapack(R.ptr(), R.ld);
    tB.from_lapack(R.ptr(), R.ld);
    shortB.from_lapack(R.ptr(), R.ld);
    otherNb.from_lapack(R.ptr(), R.ld);
    const HostMatrix<T> a0 = contents(tA), rect0 = contents(rect), b0 = contents(tB);

    expect_argument_error("uplo", [&] { potrf('X', tA); });
    expect_argument_error("uplo", [&] { potrf('\0', tA); });
    expect_argument_error("A", [&] { potrf('L', rect); });
    expect_argument_error("uplo", [&] { potrs('X', tA, tB); });
    expect_argument_error("A", [&] { potrs('U', rect, tB); });
    expect_argument_error("B", [&] { potrs('L', tA, shortB); });
    expect_argument_error("B", [&] { potrs('L', tA, otherNb); });
    expect_argument_error("uplo", [&] { posv('x', tA, tB); });
    expect_argument_error("A", [&] { posv('L', rect, tB); });
    expect_argument_error("B", [&] { posv('U', tA, shortB); });
    expect_argument_error("B", [&] { posv('L', tA, otherNb); });
    EXPECT_TRUE(same_bits(contents(tA), a0)) << "A changed after argument errors";
    EXPECT_TRUE(same_bits(contents(rect), rect0));
    EXPECT_TRUE(same_bits(contents(tB), b0)) << "B changed after argument errors";

    // posv must check B before factoring A: A is still unfactored (bit for bit).
    EXPECT_TRUE(same_bits(contents(tA), a0));
    // And the same objects still work afterwards.
    ASSERT_EQ(posv('L', tA, tB), 0);
}

// ---- TileMatrix ----------------------------------------------------------------------------

TYPED_TEST(Cholesky, TileMatrixLayoutAndLapackRoundTrip) {
    using T = TypeParam;
    struct Shape {
        int m, n, nb;
    };
    for (Shape s : {Shape{23, 17, 7}, Shape{16, 16, 8}, Shape{5, 9, 13}, Shape{1, 1, 1}, Shape{0, 4, 3}, Shape{4, 0, 3},
                    Shape{31, 2, 4}}) {
        SCOPED_TRACE(::testing::Message() << s.m << " x " << s.n << ", nb " << s.nb);
        const int lda = s.m + 3;
        const HostMatrix<T> A = random_matrix<T>(s.m, s.n, lda, this->seed());
        TileMatrix<T> t(s.m, s.n, s.nb);
        ASSERT_EQ(t.m(), s.m);
        ASSERT_EQ(t.n(), s.n);
        ASSERT_EQ(t.nb(), s.nb);
        ASSERT_EQ(t.mt(), (s.m + s.nb - 1) / s.nb);
        ASSERT_EQ(t.nt(), (s.n + s.nb - 1) / s.nb);
        t.from_lapack(A.ptr(), lda);
        // Every tile handle has the edge size and holds exactly its block of A.
        for (int j = 0; j < t.nt(); ++j)
            for (int i = 0; i < t.mt(); ++i) {
                const int tm = std::min(s.nb, s.m - i * s.nb), tn = std::min(s.nb, s.n - j * s.nb);
                ASSERT_EQ(t.tile_m(i), tm);
                ASSERT_EQ(t.tile_n(j), tn);
                starpu_data_handle_t h = t(i, j);
                ASSERT_EQ(static_cast<int>(starpu_matrix_get_nx(h)), tm);
                ASSERT_EQ(static_cast<int>(starpu_matrix_get_ny(h)), tn);
                ASSERT_EQ(starpu_data_acquire(h, STARPU_R), 0);
                const T* p = reinterpret_cast<const T*>(starpu_matrix_get_local_ptr(h));
                const int ld = static_cast<int>(starpu_matrix_get_local_ld(h));
                int wrong = 0;
                for (int c = 0; c < tn; ++c)
                    for (int r = 0; r < tm; ++r)
                        if (std::memcmp(&p[r + static_cast<std::size_t>(c) * ld],
                                        &A.data[(i * s.nb + r) + static_cast<std::size_t>(j * s.nb + c) * lda],
                                        sizeof(T)) != 0)
                            ++wrong;
                starpu_data_release(h);
                EXPECT_EQ(wrong, 0) << "tile (" << i << ", " << j << ") does not hold its block of A";
            }
        HostMatrix<T> B(s.m, s.n, lda + 2);
        t.to_lapack(B.ptr(), B.ld);
        EXPECT_EQ(max_abs_diff(A, B), 0.0);
        EXPECT_EQ(non_nan_in_padding(B), 0) << "to_lapack wrote rows beyond m";
        if (s.m > 1) {
            expect_argument_error("lda", [&] { t.from_lapack(A.ptr(), s.m - 1); });
            expect_argument_error("lda", [&] { t.to_lapack(B.ptr(), s.m - 1); });
        }
        if (s.m * s.n > 0) {
            expect_argument_error("A", [&] { t.from_lapack(nullptr, lda); });
            expect_argument_error("A", [&] { t.to_lapack(nullptr, lda); });
        }
    }
}

TYPED_TEST(Cholesky, TileMatrixRejectsBadSizes) {
    using T = TypeParam;
    expect_argument_error("m", [] { TileMatrix<T>(-1, 4, 2); });
    expect_argument_error("n", [] { TileMatrix<T>(4, -5, 2); });
    expect_argument_error("nb", [] { TileMatrix<T>(4, 4, 0); });
    expect_argument_error("nb", [] { TileMatrix<T>(4, 4, -3); });
    EXPECT_NO_THROW(TileMatrix<T>(0, 0, 1));
}

template <class T>
class TileMatrixWithoutRuntime : public SeededTest {};
TYPED_TEST_SUITE(TileMatrixWithoutRuntime, Precisions);

TYPED_TEST(TileMatrixWithoutRuntime, Throws) {
    ASSERT_FALSE(Runtime::active());
    EXPECT_THROW(TileMatrix<TypeParam>(4, 4, 2), RuntimeError);
}

// ---- the CUDA path -------------------------------------------------------------------------

TYPED_TEST(Cholesky, CudaForcedFactorAndSolveMatchCpu) {
    using T = TypeParam;
    STARFACT_REQUIRE_CUDA_WORKER(this->ncuda());
    for (char uplo : {'L', 'U'})
        for (int nb : {7, 8})
            for (int n : sizes_around(nb)) {
                SCOPED_TRACE(::testing::Message() << "uplo " << uplo << ", n " << n << ", nb " << nb);
                const auto in = TestFixture::spd_input(uplo, n, n + 3, this->seed() + n);
                int info_gpu = -1, info_cpu = -1;
                HostMatrix<T> Fg, Fc;
                {
                    ScopedImpl force(Impl::Cuda);
                    Fg = TestFixture::factor(uplo, in.poisoned, nb, &info_gpu);
                }
                {
                    ScopedImpl force(Impl::Cpu);
                    Fc = TestFixture::factor(uplo, in.poisoned, nb, &info_cpu);
                }
                TestFixture::expect_good_factor(uplo, in, Fg, info_gpu);
                EXPECT_EQ(info_cpu, 0);
                EXPECT_LE(max_abs_diff(Fg, Fc, uplo), 30.0 * (n + 1) * ScalarTraits<T>::eps * max_abs(Fc, uplo));
            }
    // Solve with several right-hand sides, every task on the GPU.
    ScopedImpl force(Impl::Cuda);
    const int n = 3 * 8 + 7, nb = 8, nrhs = 11;
    for (char uplo : {'L', 'U'}) {
        const auto in = TestFixture::spd_input(uplo, n, n, this->seed());
        const HostMatrix<T> B = random_matrix<T>(n, nrhs, n, this->seed() + 1);
        TileMatrix<T> tA(n, n, nb), tB(n, nrhs, nb);
        tA.from_lapack(in.poisoned.ptr(), n);
        tB.from_lapack(B.ptr(), n);
        ASSERT_EQ(posv(uplo, tA, tB), 0);
        HostMatrix<T> X(n, nrhs, n);
        tB.to_lapack(X.ptr(), n);
        EXPECT_PRED_FORMAT1(ResidualPasses, solve_residual(in.full, X, B)) << "uplo " << uplo;
    }
}

TYPED_TEST(Cholesky, CudaForcedPlantedFailureGivesExactInfo) {
    STARFACT_REQUIRE_CUDA_WORKER(this->ncuda());
    ScopedImpl force(Impl::Cuda);
    this->planted_failures('L', false);
    this->planted_failures('U', false);
}

}  // namespace
}  // namespace starfact::test
