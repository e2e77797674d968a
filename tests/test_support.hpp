// Shared test machinery: per-test seeds and StarPU homes, a Runtime fixture, host matrices
// with NaN-poisoned padding, naive reference kernels and residual wrappers.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/checks.hpp"
#include "common/runtime.hpp"
#include "common/scalar_traits.hpp"
#include "common/tile_view.hpp"

namespace starfact::test {

/// The seed of one test: $STARFACT_TEST_SEED when set (to replay a failure), else a fresh
/// value from std::random_device.
std::uint64_t fresh_seed();

/// Whether the process was started with a CUDA-capable build (STARFACT_HAVE_CUDA).
constexpr bool cuda_build() {
#ifdef STARFACT_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

/// Sets (or, with nullopt, unsets) an environment variable and restores it afterwards.
class ScopedEnv {
public:
    ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
        if (const char* old = std::getenv(name)) previous_ = old;
        if (value)
            setenv(name, value->c_str(), 1);
        else
            unsetenv(name);
    }
    ~ScopedEnv() {
        if (previous_)
            setenv(name_, previous_->c_str(), 1);
        else
            unsetenv(name_);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::optional<std::string> previous_;
};

/// A temporary directory made with mkdtemp under /tmp, removed (recursively) on destruction.
class TempDir {
public:
    explicit TempDir(const std::string& prefix = "starfact-test-");
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

/// A fresh STARPU_HOME for one Runtime: a TempDir, seeded with the bus calibration files found
/// under $STARFACT_TEST_BUS_SEED (a StarPU home, its .starpu, or its .starpu/sampling/bus) so that
/// StarPU does not recalibrate the bus for every test. Without that variable, the bus files of
/// the first home given up in this process seed the later ones (never the performance models).
/// Sets STARPU_HOME while it lives and restores the previous value afterwards.
class ScopedStarpuHome {
public:
    ScopedStarpuHome();
    ~ScopedStarpuHome();
    ScopedStarpuHome(const ScopedStarpuHome&) = delete;
    ScopedStarpuHome& operator=(const ScopedStarpuHome&) = delete;
    const std::string& path() const { return dir_.path(); }

private:
    TempDir dir_;
    bool had_previous_ = false;
    std::string previous_;
};

/// Base of every test: draws the seed, prints it, and keeps it in a SCOPED_TRACE so every
/// failure message carries "seed = ...; replay with STARFACT_TEST_SEED=...".
class SeededTest : public ::testing::Test {
protected:
    SeededTest();
    std::uint64_t seed() const { return seed_; }

private:
    std::uint64_t seed_;
    std::unique_ptr<::testing::ScopedTrace> trace_;
};

/// A test that owns a starfact::Runtime (and its own STARPU_HOME) for its whole lifetime.
/// The Runtime is destroyed in the fixture's destructor, after the test body's locals and the
/// derived fixtures' members (TileMatrix objects) are gone; the home is removed after that.
class RuntimeTest : public SeededTest {
protected:
    RuntimeTest() = default;
    ~RuntimeTest() override;
    void SetUp() override;

    Runtime& runtime() { return *runtime_; }
    int ncuda() const;
    /// Stops the Runtime and starts a new one with `options` (same home); no TileMatrix or
    /// registered handle may be alive.
    void restart_runtime(const RuntimeOptions& options);
    /// Stops the Runtime and removes the home now (before a test ends the process itself).
    void shutdown_runtime();

private:
    std::unique_ptr<ScopedStarpuHome> home_;
    std::unique_ptr<Runtime> runtime_;
};

/// Skips the current test, visibly, unless the runtime has a CUDA worker.
#define STARFACT_REQUIRE_CUDA_WORKER(ncuda_expr)                                                          \
    do {                                                                                                  \
        if (!::starfact::test::cuda_build()) GTEST_SKIP() << "built without CUDA (STARFACT_HAVE_CUDA)";   \
        if ((ncuda_expr) == 0)                                                                            \
            GTEST_SKIP() << "no CUDA worker (starpu_cuda_worker_get_count() == 0): CUDA path not tested"; \
    } while (0)

template <class T>
constexpr T nan() {
    return std::numeric_limits<T>::quiet_NaN();
}

/// A column-major host matrix m x n with leading dimension ld >= m. Everything outside the
/// m x n block (rows m..ld-1) starts as NaN, so a kernel that reads padding poisons its result.
template <class T>
struct HostMatrix {
    int m = 0, n = 0, ld = 1;
    std::vector<T> data;

    HostMatrix() = default;
    HostMatrix(int rows, int cols, int lead)
        : m(rows), n(cols), ld(lead), data(static_cast<std::size_t>(lead) * static_cast<std::size_t>(cols), nan<T>()) {}
    T& operator()(int i, int j) { return data[static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * ld]; }
    T operator()(int i, int j) const { return data[static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * ld]; }
    T* ptr() { return data.empty() ? nullptr : data.data(); }
    const T* ptr() const { return data.empty() ? nullptr : data.data(); }
    TileView<T> view() { return {ptr(), m, n, ld}; }
    TileView<const T> cview() const { return {ptr(), m, n, ld}; }
};

/// Whether the sign of a Householder reflector of LAPACK's geqrf (its tau, the problem having m
/// rows) is a near tie: alpha zero to rounding, |alpha / beta| = |1 - tau| <= 200 m eps, so that
/// two orders of the same sums may give beta = -sign(alpha) ||x|| either sign (and every later
/// column then differs).
template <class T>
bool reflector_sign_near_tie(T tau, int m) {
    return std::abs(1.0 - static_cast<double>(tau)) <= 200.0 * m * ScalarTraits<T>::eps;
}

/// The leading k x k block of A (both triangles as stored), ld = k.
template <class T>
HostMatrix<T> leading(const HostMatrix<T>& A, int k) {
    HostMatrix<T> B(k, k, k);
    for (int j = 0; j < k; ++j)
        for (int i = 0; i < k; ++i) B(i, j) = A(i, j);
    return B;
}

/// Sets the strict `triangle` ('L': below the diagonal, 'U': above) of the leading square
/// block of A to NaN.
template <class T>
void poison_strict_triangle(HostMatrix<T>& A, char triangle) {
    for (int j = 0; j < A.n; ++j)
        for (int i = 0; i < A.m; ++i)
            if ((triangle == 'L' && i > j) || (triangle == 'U' && i < j)) A(i, j) = nan<T>();
}

/// Number of entries of the strict `triangle` of A that are not NaN (0 when all still poisoned).
template <class T>
int non_nan_in_strict_triangle(const HostMatrix<T>& A, char triangle) {
    int count = 0;
    for (int j = 0; j < A.n; ++j)
        for (int i = 0; i < A.m; ++i)
            if (((triangle == 'L' && i > j) || (triangle == 'U' && i < j)) && !std::isnan(A(i, j))) ++count;
    return count;
}

/// Number of padding entries (rows m..ld-1) of A that are not NaN.
template <class T>
int non_nan_in_padding(const HostMatrix<T>& A) {
    int count = 0;
    for (int j = 0; j < A.n; ++j)
        for (int i = A.m; i < A.ld; ++i)
            if (!std::isnan(A(i, j))) ++count;
    return count;
}

/// Number of entries of the m x n block (restricted to `part`: 'A' all, 'L'/'U' that triangle
/// with the diagonal) that are NaN or Inf.
template <class T>
int non_finite(const HostMatrix<T>& A, char part = 'A') {
    int count = 0;
    for (int j = 0; j < A.n; ++j)
        for (int i = 0; i < A.m; ++i) {
            if ((part == 'L' && i < j) || (part == 'U' && i > j)) continue;
            if (!std::isfinite(A(i, j))) ++count;
        }
    return count;
}

/// Max |A(i,j) - B(i,j)| over the m x n block, restricted to `part` as in non_finite; NaN if
/// any compared entry is NaN.
template <class T>
double max_abs_diff(const HostMatrix<T>& A, const HostMatrix<T>& B, char part = 'A') {
    double d = 0.0;
    for (int j = 0; j < A.n; ++j)
        for (int i = 0; i < A.m; ++i) {
            if ((part == 'L' && i < j) || (part == 'U' && i > j)) continue;
            const double e = std::abs(static_cast<double>(A(i, j)) - static_cast<double>(B(i, j)));
            if (std::isnan(e)) return e;
            d = std::max(d, e);
        }
    return d;
}

/// Max |A(i,j)| over the m x n block restricted to `part`.
template <class T>
double max_abs(const HostMatrix<T>& A, char part = 'A') {
    double d = 0.0;
    for (int j = 0; j < A.n; ++j)
        for (int i = 0; i < A.m; ++i) {
            if ((part == 'L' && i < j) || (part == 'U' && i > j)) continue;
            d = std::max(d, std::abs(static_cast<double>(A(i, j))));
        }
    return d;
}

/// A random SPD matrix (matgen::spd plus n on the diagonal, so that it is strictly diagonally
/// dominant for every n), both triangles, in a HostMatrix with leading dimension ld.
template <class T>
HostMatrix<T> random_spd(int n, int ld, std::uint64_t seed);
/// A symmetric matrix with leading minor k not positive (matgen::spd_failing_at).
template <class T>
HostMatrix<T> spd_failing_at(int n, int k, int ld, std::uint64_t seed);
/// A uniform [-1, 1) matrix (matgen::uniform).
template <class T>
HostMatrix<T> random_matrix(int m, int n, int ld, std::uint64_t seed);

/// The reference unblocked Cholesky (LAPACK's dpotf2, in long double, with its
/// "AJJ <= 0 or AJJ is NaN" test) on the `uplo` triangle of A (n x n). Returns LAPACK's info:
/// the first column whose pivot is not positive or is NaN, 0 if none.
template <class T>
int reference_potrf_info(char uplo, const HostMatrix<T>& A);

/// ||A - L L^T||_1 / (n ||A||_1 eps) through starfact::checks (A's and F's uplo triangle).
template <class T>
double potrf_residual(char uplo, const HostMatrix<T>& A, const HostMatrix<T>& F) {
    return checks::potrf_residual<T>(uplo, A.n, A.ptr(), A.ld, F.ptr(), F.ld);
}

/// Solve backward error through starfact::checks; A holds both triangles.
template <class T>
double solve_residual(const HostMatrix<T>& A, const HostMatrix<T>& X, const HostMatrix<T>& B) {
    return checks::solve_residual<T>(A.n, B.n, A.ptr(), A.ld, X.ptr(), X.ld, B.ptr(), B.ld);
}

/// gtest predicate: the residual ratio passes (finite, not negative, below checks::kThreshold).
::testing::AssertionResult ResidualPasses(const char* expr, double ratio);

}  // namespace starfact::test
