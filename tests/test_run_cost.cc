// The run around the factorizations: the generators give the bits of their formula, the O(n^2)
// probe checks accept correct factors and refuse perturbed ones (LAPACK's factors and the tile
// factors, as the drivers apply them), the drivers' tile refills agree with TileMatrix's own
// layout and restore the matrix after a factorization, and `--niter 3` runs of every
// factorization subcommand give three rows and a checked last one, with either check.
#include <gtest/gtest.h>
#include <starpu.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "cli_runner.hpp"
#include "common/blas.hpp"
#include "common/checks.hpp"
#include "common/matgen.hpp"
#include "common/runtime.hpp"
#include "drivers/run_support.hpp"
#include "test_support.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

namespace starfact::test {
namespace {

namespace drivers = starfact::cli;  // run_support's helpers (test::cli is the runner)
using Precisions = ::testing::Types<float, double>;

// ---- the generators' formula, written out plainly ---------------------------------------------

std::uint64_t reference_mix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// The entry of (seed, i, j): uniform in [-1, 1) from the 53 high bits of the hash.
double reference_entry(std::uint64_t seed, std::uint64_t i, std::uint64_t j) {
    const std::uint64_t h = reference_mix(reference_mix(seed) ^ reference_mix((i << 32) ^ j ^ 0x5bd1e995ULL));
    return static_cast<double>(h >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

template <class T>
void reference_uniform(int m, int n, std::uint64_t seed, HostMatrix<T>& A) {
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) A(i, j) = static_cast<T>(reference_entry(seed, i, j));
}

// b(i, j) + b(j, i), plus 2n + 1 on the diagonal, into both triangles, column by column.
template <class T>
void reference_spd(int n, std::uint64_t seed, HostMatrix<T>& A) {
    for (int j = 0; j < n; ++j)
        for (int i = j; i < n; ++i) {
            T v = static_cast<T>(reference_entry(seed, i, j) + reference_entry(seed, j, i));
            if (i == j) v += static_cast<T>(2 * n + 1);
            A(i, j) = v;
            A(j, i) = v;
        }
}

// Whether A and B hold the same bits everywhere, padding included.
template <class T>
bool same_bits(const HostMatrix<T>& A, const HostMatrix<T>& B) {
    return A.data.size() == B.data.size() &&
           (A.data.empty() || std::memcmp(A.data.data(), B.data.data(), sizeof(T) * A.data.size()) == 0);
}

template <class T>
class Generators : public SeededTest {};
TYPED_TEST_SUITE(Generators, Precisions);

// Sizes around the blocks of 128 and past the 2^20 entries from which the generators use threads.
TYPED_TEST(Generators, SpdGivesTheFormulasBits) {
    using T = TypeParam;
    for (int n : {1, 2, 5, 127, 128, 129, 257, 1030}) {
        SCOPED_TRACE(::testing::Message() << "n = " << n);
        const std::uint64_t seed = this->seed() + static_cast<std::uint64_t>(n);
        HostMatrix<T> A(n, n, n + 3), R(n, n, n + 3);
        matgen::spd(n, seed, A.ptr(), A.ld);
        reference_spd(n, seed, R);
        EXPECT_EQ(non_nan_in_padding(A), 0) << "spd wrote outside the n x n block";
        EXPECT_TRUE(same_bits(A, R)) << "matgen::spd differs from its formula, max |diff| = " << max_abs_diff(A, R);
    }
}

TYPED_TEST(Generators, UniformGivesTheFormulasBits) {
    using T = TypeParam;
    for (const auto& [m, n] : {std::pair{1, 1}, {7, 3}, {300, 5}, {1100, 1000}}) {
        SCOPED_TRACE(::testing::Message() << m << " x " << n);
        const std::uint64_t seed = this->seed() ^ static_cast<std::uint64_t>(m);
        HostMatrix<T> A(m, n, m + 2), R(m, n, m + 2);
        matgen::uniform(m, n, seed, A.ptr(), A.ld);
        reference_uniform(m, n, seed, R);
        EXPECT_TRUE(same_bits(A, R)) << "matgen::uniform differs from its formula";
    }
}

// ---- the probes on LAPACK's factors ------------------------------------------------------------

// The relative perturbation of one entry of a factor that every check must refuse: 1e-6 in
// double. In float 1e-6 is 17 ulps, below what any residual normalized by n eps can tell from
// rounding (30 n eps is 1e-4 at n = 64); and a probe dilutes one entry's error over the n
// columns that A x sums (at 300 x 100 the QR probe refuses a perturbed R entry only from about
// 6% on, where the full check sees 0.1%), so float uses 30%.
template <class T>
constexpr double kPerturbation = sizeof(T) == 8 ? 1e-6 : 0.3;

// Multiplies by 1 + kPerturbation the largest entry of a random column j of F, among rows
// [lo(j), hi(j)), so that the entry is not a tiny one.
template <class T, class Rows>
void perturb_one_entry(HostMatrix<T>& F, std::mt19937_64& rng, Rows rows) {
    int j = 0, i0 = 0, i1 = 0;
    do {
        j = static_cast<int>(rng() % static_cast<std::uint64_t>(F.n));
        std::tie(i0, i1) = rows(j);
    } while (i0 >= i1);
    int best = i0;
    for (int i = i0; i < i1; ++i)
        if (std::abs(F(i, j)) > std::abs(F(best, j))) best = i;
    F(best, j) *= static_cast<T>(1.0 + kPerturbation<T>);
}

int lapack_geqrf(int m, int n, double* A, int lda, double* tau) {
    return LAPACKE_dgeqrf(LAPACK_COL_MAJOR, m, n, A, lda, tau);
}
int lapack_geqrf(int m, int n, float* A, int lda, float* tau) {
    return LAPACKE_sgeqrf(LAPACK_COL_MAJOR, m, n, A, lda, tau);
}
int lapack_ormqr(char trans, int m, int k, const double* A, int lda, const double* tau, double* v) {
    return LAPACKE_dormqr(LAPACK_COL_MAJOR, 'L', trans, m, 1, k, A, lda, tau, v, m);
}
int lapack_ormqr(char trans, int m, int k, const float* A, int lda, const float* tau, float* v) {
    return LAPACKE_sormqr(LAPACK_COL_MAJOR, 'L', trans, m, 1, k, A, lda, tau, v, m);
}

template <class T>
class Probes : public SeededTest {};
TYPED_TEST_SUITE(Probes, Precisions);

TYPED_TEST(Probes, PotrfProbeAcceptsTheFactorAndRefusesOnePerturbedEntry) {
    using T = TypeParam;
    std::mt19937_64 rng(this->seed());
    for (int n : {64, 200})
        for (char uplo : {'L', 'U'}) {
            SCOPED_TRACE(::testing::Message() << "n = " << n << ", uplo " << uplo);
            HostMatrix<T> A(n, n, n + 1);
            matgen::spd(n, this->seed() + n, A.ptr(), A.ld);
            HostMatrix<T> F = A;
            ASSERT_EQ(blas::potrf(uplo, n, F.ptr(), F.ld), 0);
            const std::uint64_t probe_seed = rng();
            EXPECT_PRED_FORMAT1(ResidualPasses,
                                checks::potrf_probe_residual<T>(uplo, n, A.ptr(), A.ld, F.ptr(), F.ld, probe_seed));
            HostMatrix<T> G = F;
            perturb_one_entry(G, rng, [&](int j) { return uplo == 'L' ? std::pair{j, n} : std::pair{0, j + 1}; });
            EXPECT_FALSE(checks::passes(potrf_residual(uplo, A, G))) << "the full check misses it too";
            EXPECT_FALSE(
                checks::passes(checks::potrf_probe_residual<T>(uplo, n, A.ptr(), A.ld, G.ptr(), G.ld, probe_seed)));
            G(n / 2, n / 2) = nan<T>();
            EXPECT_FALSE(
                checks::passes(checks::potrf_probe_residual<T>(uplo, n, A.ptr(), A.ld, G.ptr(), G.ld, probe_seed)));
        }
}

TYPED_TEST(Probes, LuProbeAcceptsTheFactorAndRefusesOnePerturbedEntry) {
    using T = TypeParam;
    std::mt19937_64 rng(this->seed());
    for (const auto& size : {std::pair{120, 120}, {300, 100}}) {
        const int m = size.first, n = size.second;
        SCOPED_TRACE(::testing::Message() << m << " x " << n);
        const HostMatrix<T> A = random_matrix<T>(m, n, m + 2, this->seed() + m);
        HostMatrix<T> F = A;
        std::vector<int> ipiv(n);
        ASSERT_EQ(blas::getrf(m, n, F.ptr(), F.ld, ipiv.data()), 0);
        // L~^{-1} P: LAPACK's row interchanges in order, then the m x m unit lower [L1 0; L2 I]^{-1}.
        const checks::LuForward<T> forward = [&](T* v) {
            for (int k = 0; k < n; ++k) std::swap(v[k], v[ipiv[k] - 1]);
            for (int k = 0; k < n; ++k)
                for (int i = k + 1; i < m; ++i) v[i] -= F(i, k) * v[k];
        };
        const std::uint64_t probe_seed = rng();
        EXPECT_PRED_FORMAT1(ResidualPasses,
                            checks::lu_probe_residual<T>(m, n, A.ptr(), A.ld, F.ptr(), F.ld, forward, probe_seed));
        // The full check on the same factor: G = L~^{-1} P A column by column.
        HostMatrix<T> Gt = A;
        for (int j = 0; j < n; ++j) forward(&Gt(0, j));
        EXPECT_PRED_FORMAT1(ResidualPasses,
                            checks::lu_transform_residual<T>(m, n, A.ptr(), A.ld, Gt.ptr(), Gt.ld, F.ptr(), F.ld));
        HostMatrix<T> U = F;  // a wrong U; forward keeps the right L
        perturb_one_entry(U, rng, [](int j) { return std::pair{0, j + 1}; });
        EXPECT_FALSE(
            checks::passes(checks::lu_transform_residual<T>(m, n, A.ptr(), A.ld, Gt.ptr(), Gt.ld, U.ptr(), U.ld)))
            << "the full check misses it too";
        EXPECT_FALSE(
            checks::passes(checks::lu_probe_residual<T>(m, n, A.ptr(), A.ld, U.ptr(), U.ld, forward, probe_seed)));
        // A transformation that yields NaN fails.
        const checks::LuForward<T> broken = [&](T* v) {
            forward(v);
            v[m - 1] = nan<T>();
        };
        EXPECT_FALSE(
            checks::passes(checks::lu_probe_residual<T>(m, n, A.ptr(), A.ld, F.ptr(), F.ld, broken, probe_seed)));
    }
}

TYPED_TEST(Probes, QrProbeAcceptsTheFactorAndRefusesOnePerturbedEntry) {
    using T = TypeParam;
    std::mt19937_64 rng(this->seed());
    for (const auto& size : {std::pair{120, 120}, {300, 100}}) {
        const int m = size.first, n = size.second;
        SCOPED_TRACE(::testing::Message() << m << " x " << n);
        const HostMatrix<T> A = random_matrix<T>(m, n, m + 2, this->seed() + m);
        HostMatrix<T> F = A;
        std::vector<T> tau(n);
        ASSERT_EQ(lapack_geqrf(m, n, F.ptr(), F.ld, tau.data()), 0);
        const checks::QApply<T> apply_q = [&tau, &F, m, n](char trans, T* v) {
            ASSERT_EQ(lapack_ormqr(trans, m, n, F.ptr(), F.ld, tau.data(), v), 0);
        };
        const std::uint64_t probe_seed = rng();
        const checks::QrProbe good =
            checks::qr_probe_residuals<T>(m, n, A.ptr(), A.ld, F.ptr(), F.ld, apply_q, probe_seed);
        EXPECT_PRED_FORMAT1(ResidualPasses, good.residual);
        EXPECT_PRED_FORMAT1(ResidualPasses, good.orthogonality);
        // One entry of R.
        HostMatrix<T> R = F;
        perturb_one_entry(R, rng, [](int j) { return std::pair{0, j + 1}; });
        const checks::QrProbe bad_r =
            checks::qr_probe_residuals<T>(m, n, A.ptr(), A.ld, R.ptr(), R.ld, apply_q, probe_seed);
        EXPECT_FALSE(checks::passes(bad_r.residual)) << bad_r.residual;
    }
}

// The orthogonality probe alone: a scalar factor of the first reflector off by 1e-6 makes
// I - tau v v^T, hence Q, not orthogonal, and Q^T (Q y) != y shows it. In double only: its margin
// there is about 10^5; in float a wrong tau shows through one vector's projection on v, and at
// these sizes even a 30% error stayed below 30 in a few runs in a thousand.
TEST(QrOrthogonalityProbe, RefusesAWrongReflectorScale) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(::testing::Message() << "seed = " << seed << "; replay with STARFACT_TEST_SEED=" << seed);
    for (const auto& size : {std::pair{120, 120}, {300, 100}}) {
        const int m = size.first, n = size.second;
        SCOPED_TRACE(::testing::Message() << m << " x " << n);
        const HostMatrix<double> A = random_matrix<double>(m, n, m, seed + m);
        HostMatrix<double> F = A;
        std::vector<double> tau(n);
        ASSERT_EQ(lapack_geqrf(m, n, F.ptr(), F.ld, tau.data()), 0);
        tau[0] *= 1.0 + 1e-6;
        const checks::QApply<double> skewed = [&](char trans, double* v) {
            ASSERT_EQ(lapack_ormqr(trans, m, n, F.ptr(), F.ld, tau.data(), v), 0);
        };
        const checks::QrProbe probe = checks::qr_probe_residuals<double>(m, n, A.ptr(), m, F.ptr(), m, skewed, seed);
        EXPECT_FALSE(checks::passes(probe.orthogonality)) << probe.orthogonality;
    }
}

TEST(CheckKind, FullUpToTheWorkOfN16384) {
    EXPECT_EQ(checks::check_kind(16384, 16384), checks::CheckKind::Full);
    EXPECT_EQ(checks::check_kind(16385, 16385), checks::CheckKind::Probe);
    EXPECT_EQ(checks::check_kind(46000, 46000), checks::CheckKind::Probe);
    EXPECT_EQ(checks::check_kind(100000, 100000), checks::CheckKind::Probe);
    EXPECT_EQ(checks::check_kind(131072, 1024), checks::CheckKind::Full) << "tall-skinny: m n^2 is small";
    EXPECT_EQ(checks::check_kind(262144, 16384), checks::CheckKind::Probe);
    EXPECT_EQ(drivers::resolve_check_kind("probe", 10, 10), checks::CheckKind::Probe);
    EXPECT_EQ(drivers::resolve_check_kind("full", 50000, 50000), checks::CheckKind::Full);
    EXPECT_EQ(drivers::resolve_check_kind("auto", 50000, 50000), checks::CheckKind::Probe);
}

// ---- the workers sleep while the host works ------------------------------------------------------

std::atomic<int> g_task_runs{0};
void count_run(void**, void*) { ++g_task_runs; }

class PausedWorkersTest : public RuntimeTest {};

// A task submitted while a guard lives does not start until the last guard is gone, and then
// runs; nested guards count.
TEST_F(PausedWorkersTest, NoTaskStartsUntilTheLastGuardGoes) {
    starpu_codelet cl;
    starpu_codelet_init(&cl);
    cl.where = STARPU_CPU;
    cl.cpu_funcs[0] = count_run;
    cl.nbuffers = 0;
    cl.name = "paused_workers_probe";
    g_task_runs = 0;
    auto outer = std::make_unique<PausedWorkers>();
    ASSERT_TRUE(outer->paused());
    auto inner = std::make_unique<PausedWorkers>();
    starpu_task* task = starpu_task_create();
    task->cl = &cl;
    task->synchronous = 0;
    ASSERT_EQ(starpu_task_submit(task), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(g_task_runs.load(), 0) << "a task ran under two guards";
    inner.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(g_task_runs.load(), 0) << "a task ran under the outer guard";
    outer.reset();
    ASSERT_EQ(starpu_task_wait_for_all(), 0);
    EXPECT_EQ(g_task_runs.load(), 1);
}

// Without StarPU a guard does nothing.
TEST(PausedWorkersWithoutStarpu, DoesNothing) {
    ASSERT_FALSE(starpu_is_initialized());
    const PausedWorkers guard;
    EXPECT_FALSE(guard.paused());
}

// ---- the tile refills and the probes on tile factors -------------------------------------------

template <class T>
class TileRuns : public RuntimeTest {};
TYPED_TEST_SUITE(TileRuns, Precisions);

// fill_tiles and read_tiles against TileMatrix's from_lapack and to_lapack: the same layout, edge
// tiles included, and nothing written outside the m x n block.
TYPED_TEST(TileRuns, FillAndReadAgreeWithTheTileLayout) {
    using T = TypeParam;
    for (const auto& [m, n, nb] : {std::tuple{130, 70, 32}, {64, 64, 64}, {1, 1, 5}, {700, 3, 256}, {50, 0, 8}}) {
        SCOPED_TRACE(::testing::Message() << m << " x " << n << ", nb " << nb);
        const HostMatrix<T> A = random_matrix<T>(m, n, m + 5, this->seed() + m);
        TileMatrix<T> t(m, n, nb);
        drivers::fill_tiles(t, A.ptr(), A.ld);
        HostMatrix<T> B(m, n, m + 5), C(m, n, m + 3);
        t.to_lapack(B.ptr(), B.ld);
        EXPECT_TRUE(same_bits(A, B)) << "fill_tiles then to_lapack";
        t.from_lapack(A.ptr(), A.ld);
        drivers::read_tiles(t, C.ptr(), C.ld);
        EXPECT_EQ(non_nan_in_padding(C), 0);
        EXPECT_EQ(max_abs_diff(A, C), 0.0) << "from_lapack then read_tiles";
        drivers::discard_tiles(t);
    }
}

// The drivers keep one TileMatrix for all the iterations: refilling it after a factorization
// gives the matrix back, so every iteration factors a fresh copy.
TYPED_TEST(TileRuns, RefillAfterAFactorizationRestoresTheMatrix) {
    using T = TypeParam;
    const int n = 150, nb = 40;
    HostMatrix<T> A(n, n, n);
    matgen::spd(n, this->seed(), A.ptr(), A.ld);
    TileMatrix<T> t(n, n, nb);
    for (int it = 0; it < 3; ++it) {
        drivers::fill_tiles(t, A.ptr(), A.ld);
        ASSERT_EQ(potrf('L', t), 0);
        HostMatrix<T> F(n, n, n);
        drivers::read_tiles(t, F.ptr(), F.ld);
        EXPECT_PRED_FORMAT1(ResidualPasses, potrf_residual('L', A, F)) << "iteration " << it;
        EXPECT_GT(max_abs_diff(A, F, 'L'), 0.0) << "the factorization changed nothing";
    }
    drivers::fill_tiles(t, A.ptr(), A.ld);
    HostMatrix<T> B(n, n, n);
    drivers::read_tiles(t, B.ptr(), B.ld);
    EXPECT_TRUE(same_bits(A, B));
}

TYPED_TEST(TileRuns, ProbesOfTileFactorsAsTheDriversApplyThem) {
    using T = TypeParam;
    std::mt19937_64 rng(this->seed());
    const int nb = 40, ib = 8;
    {
        SCOPED_TRACE("potrf");
        const int n = 150;
        HostMatrix<T> A(n, n, n);
        matgen::spd(n, this->seed(), A.ptr(), A.ld);
        TileMatrix<T> t(n, n, nb);
        drivers::fill_tiles(t, A.ptr(), A.ld);
        ASSERT_EQ(potrf('L', t), 0);
        HostMatrix<T> F(n, n, n);
        drivers::read_tiles(t, F.ptr(), F.ld);
        const std::uint64_t s = rng();
        EXPECT_PRED_FORMAT1(ResidualPasses, checks::potrf_probe_residual<T>('L', n, A.ptr(), n, F.ptr(), n, s));
        perturb_one_entry(F, rng, [n](int j) { return std::pair{j, n}; });
        EXPECT_FALSE(checks::passes(checks::potrf_probe_residual<T>('L', n, A.ptr(), n, F.ptr(), n, s)));
    }
    for (const auto& size : {std::pair{150, 150}, {230, 150}}) {
        const int m = size.first, n = size.second;
        SCOPED_TRACE(::testing::Message() << "getrf " << m << " x " << n);
        const HostMatrix<T> A = random_matrix<T>(m, n, m, this->seed() + m);
        TileMatrix<T> t(m, n, nb), v(m, 1, nb);
        drivers::fill_tiles(t, A.ptr(), A.ld);
        LuFactors<T> lu(t, ib);
        ASSERT_EQ(getrf(t, lu), 0);
        HostMatrix<T> F(m, n, m);
        drivers::read_tiles(t, F.ptr(), F.ld);
        const checks::LuForward<T> forward = [&](T* x) {
            drivers::fill_tiles(v, x, m);
            lu_apply_forward(t, lu, v);
            drivers::read_tiles(v, x, m);
        };
        const std::uint64_t s = rng();
        EXPECT_PRED_FORMAT1(ResidualPasses, checks::lu_probe_residual<T>(m, n, A.ptr(), m, F.ptr(), m, forward, s));
        perturb_one_entry(F, rng, [](int j) { return std::pair{0, j + 1}; });
        EXPECT_FALSE(checks::passes(checks::lu_probe_residual<T>(m, n, A.ptr(), m, F.ptr(), m, forward, s)));
    }
    for (const auto& size : {std::pair{150, 150}, {330, 110}}) {
        const int m = size.first, n = size.second;
        SCOPED_TRACE(::testing::Message() << "geqrf " << m << " x " << n);
        const HostMatrix<T> A = random_matrix<T>(m, n, m, this->seed() + m);
        TileMatrix<T> t(m, n, nb), v(m, 1, nb);
        drivers::fill_tiles(t, A.ptr(), A.ld);
        QrFactors<T> qr(t, ib);
        geqrf(t, qr);
        HostMatrix<T> F(m, n, m);
        drivers::read_tiles(t, F.ptr(), F.ld);
        const checks::QApply<T> apply_q = [&](char trans, T* x) {
            drivers::fill_tiles(v, x, m);
            qr_apply(trans, t, qr, v);
            drivers::read_tiles(v, x, m);
        };
        const std::uint64_t s = rng();
        const checks::QrProbe good = checks::qr_probe_residuals<T>(m, n, A.ptr(), m, F.ptr(), m, apply_q, s);
        EXPECT_PRED_FORMAT1(ResidualPasses, good.residual);
        EXPECT_PRED_FORMAT1(ResidualPasses, good.orthogonality);
        perturb_one_entry(F, rng, [](int j) { return std::pair{0, j + 1}; });
        EXPECT_FALSE(checks::passes(checks::qr_probe_residuals<T>(m, n, A.ptr(), m, F.ptr(), m, apply_q, s).residual));
    }
}

// ---- `--niter 3` on the command line ----------------------------------------------------------

class RunCostCli : public SeededTest {};

struct NiterCase {
    std::vector<std::string> args;
    std::vector<std::string> numbers;  ///< keys the checked row must carry as numbers below 30
    std::vector<std::string> lapack;   ///< keys that only the full check fills
};

TEST_F(RunCostCli, NiterThreeGivesThreeRowsAndTheLastPassesEitherCheck) {
    const std::vector<NiterCase> cases = {
        {{"potrf", "-n", "200", "--nb", "48"}, {"residual"}, {}},
        {{"potrf", "-n", "150", "--nb", "32", "--uplo", "U", "--prec", "s"}, {"residual"}, {}},
        {{"posv", "-n", "200", "--nb", "48", "--nrhs", "2"}, {"residual"}, {}},
        {{"getrf", "-n", "200", "--nb", "48", "--ib", "8"}, {"residual"}, {"residual_lapack", "growth_pp"}},
        {{"getrf", "-m", "260", "-n", "150", "--nb", "48", "--prec", "s"}, {"residual"}, {}},
        {{"gesv", "-n", "180", "--nb", "40", "--nrhs", "3"}, {"residual"}, {"residual_lapack", "growth_pp"}},
        {{"geqrf", "-n", "200", "--nb", "48", "--ib", "8"}, {"residual", "orthogonality"}, {}},
        {{"geqrf", "-m", "300", "-n", "120", "--nb", "48", "--prec", "s"}, {"residual", "orthogonality"}, {}},
        {{"gels", "-m", "260", "-n", "150", "--nb", "48", "--nrhs", "2"}, {"residual"}, {"residual_lapack"}},
    };
    for (const NiterCase& c : cases)
        for (const std::string kind : {"full", "probe"}) {
            std::vector<std::string> args = c.args;
            args.insert(args.end(), {"--check", "--check-kind", kind, "--niter", "3", "--format", "json", "--seed",
                                     std::to_string(seed() | 1)});
            SCOPED_TRACE("starfact " + cli::command_line(args));
            const cli::Result r = cli::run(args);
            ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
            std::istringstream lines(r.out);
            std::string line;
            std::vector<nlohmann::json> rows;
            int configs = 0;
            while (std::getline(lines, line)) {
                if (line.empty()) continue;
                const nlohmann::json j = nlohmann::json::parse(line);
                if (j.value("record", "") == "config") {
                    ++configs;
                    EXPECT_EQ(j.value("check", ""), kind) << "the header names the check";
                } else {
                    rows.push_back(j);
                }
            }
            EXPECT_EQ(configs, 1);
            ASSERT_EQ(rows.size(), 4u) << "three runs and the median\n" << r.describe();
            for (int it = 0; it < 3; ++it) {
                EXPECT_EQ(rows[it].value("iter", -1), it + 1);
                EXPECT_EQ(rows[it].value("info", -1), 0);
                EXPECT_EQ(rows[it].value("status", ""), "ok") << rows[it].dump();
                EXPECT_GT(rows[it].value("time_s", -1.0), 0.0);
            }
            const nlohmann::json& last = rows[2];
            EXPECT_EQ(last.value("check", ""), kind) << last.dump();
            for (const std::string& key : c.numbers) {
                ASSERT_TRUE(last[key].is_number()) << key << " in " << last.dump();
                EXPECT_GE(last[key].get<double>(), 0.0) << key;
                EXPECT_LT(last[key].get<double>(), checks::kThreshold) << key;
            }
            for (const std::string& key : c.lapack)
                EXPECT_EQ(last[key].is_number(), kind == "full") << key << " in " << last.dump();
            EXPECT_EQ(rows[3].value("iter", ""), "median");
            EXPECT_EQ(rows[3].value("status", ""), "ok");
        }
}

TEST_F(RunCostCli, SmallRunsPickTheFullCheckAndABadKindIsAUsageError) {
    const cli::Result r = cli::run({"geqrf", "-n", "100", "--nb", "32", "--check", "--format", "json"});
    ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
    const nlohmann::json config = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
    EXPECT_EQ(config.value("check", ""), "full");
    const cli::Result bad = cli::run({"potrf", "-n", "100", "--check", "--check-kind", "cheap"});
    EXPECT_TRUE(bad.exited && bad.code == 2) << bad.describe();
    EXPECT_NE(bad.err.find("--check-kind"), std::string::npos) << bad.describe();
    EXPECT_TRUE(bad.home_untouched) << "nothing may start on a usage error";
}

// STARFACT_GENERATE: gpu generates the matrix in place on the CUDA workers (and falls back to
// the host without them), host on the host; either way the factorization checks against the
// host's generator, so a GPU that generated other bits would fail the check. A bad value is a
// usage error.
TEST_F(RunCostCli, GenerateWhereAskedAndTheCheckPasses) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"potrf", "-n", "300", "--nb", "64"}, {"getrf", "-n", "300", "--nb", "64", "--ib", "16"},
          {"geqrf", "-m", "300", "-n", "200", "--nb", "64", "--ib", "16", "--prec", "s"}})
        for (const std::string where : {"gpu", "host"}) {
            std::vector<std::string> a = args;
            a.insert(a.end(), {"--check", "--check-kind", "probe", "--niter", "2", "--format", "json", "--seed",
                               std::to_string(seed() | 1)});
            SCOPED_TRACE("STARFACT_GENERATE=" + where + " starfact " + cli::command_line(a));
            const cli::Result r = cli::run(a, {"STARFACT_GENERATE=" + where});
            ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
            const nlohmann::json config = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
            const bool gpu = config.value("ncuda", 0) > 0;
            EXPECT_EQ(config.value("generate", ""), where == "gpu" && gpu ? "gpu" : "host") << config.dump();
            EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
            EXPECT_NE(r.out.find("\"residual\""), std::string::npos) << r.out;
        }
    const cli::Result bad = cli::run({"potrf", "-n", "100"}, {"STARFACT_GENERATE=device"});
    EXPECT_TRUE(bad.exited && bad.code == 2) << bad.describe();
    EXPECT_NE(bad.err.find("STARFACT_GENERATE"), std::string::npos) << bad.describe();
}

}  // namespace
}  // namespace starfact::test
