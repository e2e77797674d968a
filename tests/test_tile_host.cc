// A matrix given by its blocks (tile_algorithms/tile_host.hpp): the block generators give the
// bits of the whole-matrix generators at any offset, tiles filled from a source hold the
// matrix, and the tile-wise checks (the Cholesky probe, the solve's backward error, the growth
// factor) agree with the column-major checks on the same factors, accept correct ones and
// refuse a factor with one perturbed entry. These are what the command line and the benches
// run for matrices too large to hold twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "codelets/codelets.hpp"
#include "common/checks.hpp"
#include "common/error.hpp"
#include "common/matgen.hpp"
#include "common/pinned.hpp"
#include "test_support.hpp"
#include "tile_algorithms/tile_algorithms.hpp"
#include "tile_algorithms/tile_generate.hpp"
#include "tile_algorithms/tile_host.hpp"

namespace starfact::test {
namespace {

using Precisions = ::testing::Types<float, double>;

template <class T>
bool same_bits(const T* a, const T* b, std::size_t count) {
    return count == 0 || std::memcmp(a, b, sizeof(T) * count) == 0;
}

template <class T>
class BlockGenerators : public SeededTest {};
TYPED_TEST_SUITE(BlockGenerators, Precisions);

// Blocks at random offsets, across the diagonal and the 128-blocks spd works in, against the
// same rows and columns of the whole matrix.
TYPED_TEST(BlockGenerators, BlocksGiveTheWholeMatrixsBits) {
    using T = TypeParam;
    std::mt19937_64 rng(this->seed());
    for (int n : {1, 7, 130, 300}) {
        HostMatrix<T> S(n, n, n + 3), U(n, n, n + 3);
        matgen::spd(n, this->seed() + n, S.ptr(), S.ld);
        matgen::uniform(n, n, this->seed() + n, U.ptr(), U.ld);
        for (int trial = 0; trial < 20; ++trial) {
            const int i0 = static_cast<int>(rng() % n), j0 = static_cast<int>(rng() % n);
            const int rows = 1 + static_cast<int>(rng() % (n - i0)), cols = 1 + static_cast<int>(rng() % (n - j0));
            SCOPED_TRACE(::testing::Message() << "n " << n << ", block (" << i0 << ", " << j0 << ") " << rows
                                              << " x " << cols);
            std::vector<T> b(static_cast<std::size_t>(rows + 2) * cols, T(-7));
            matgen::spd_block<T>(n, this->seed() + n, i0, j0, rows, cols, b.data(), rows + 2);
            for (int c = 0; c < cols; ++c) {
                ASSERT_TRUE(same_bits(b.data() + static_cast<std::size_t>(c) * (rows + 2), &S(i0, j0 + c), rows))
                    << "spd_block, column " << c;
                EXPECT_EQ(b[static_cast<std::size_t>(c) * (rows + 2) + rows], T(-7)) << "written past the rows";
            }
            matgen::uniform_block<T>(this->seed() + n, i0, j0, rows, cols, b.data(), rows + 2);
            for (int c = 0; c < cols; ++c)
                ASSERT_TRUE(same_bits(b.data() + static_cast<std::size_t>(c) * (rows + 2), &U(i0, j0 + c), rows))
                    << "uniform_block, column " << c;
        }
    }
}

template <class T>
class TileHost : public RuntimeTest {};
TYPED_TEST_SUITE(TileHost, Precisions);

TYPED_TEST(TileHost, TilesFilledFromASourceHoldTheMatrix) {
    using T = TypeParam;
    for (const auto& [m, n, nb] : {std::tuple{130, 70, 32}, {600, 600, 256}, {1, 1, 5}, {1100, 3, 1024}, {50, 0, 8}}) {
        SCOPED_TRACE(::testing::Message() << m << " x " << n << ", nb " << nb);
        HostMatrix<T> U(m, n, m + 1);
        matgen::uniform(m, n, this->seed(), U.ptr(), U.ld);
        TileMatrix<T> t(m, n, nb);
        fill_tiles_from<T>(t, uniform_source<T>(this->seed()));
        HostMatrix<T> B(m, n, m + 1);
        t.to_lapack(B.ptr(), B.ld);
        EXPECT_EQ(max_abs_diff(U, B), 0.0) << "uniform_source";
        const HostMatrix<T> R = random_matrix<T>(m, n, m + 4, this->seed() + 1);
        fill_tiles_from<T>(t, held_source<T>(R.ptr(), R.ld));
        t.to_lapack(B.ptr(), B.ld);
        EXPECT_EQ(max_abs_diff(R, B), 0.0) << "held_source";
        if (m == n) {
            HostMatrix<T> S(n, n, n);
            matgen::spd(n, this->seed(), S.ptr(), S.ld);
            fill_tiles_from<T>(t, spd_source<T>(n, this->seed()));
            HostMatrix<T> C(n, n, n);
            t.to_lapack(C.ptr(), C.ld);
            EXPECT_EQ(max_abs_diff(S, C), 0.0) << "spd_source";
        }
    }
}

// A Cholesky's fill writes the tiles of its triangle (the diagonal tiles whole) with the
// matrix's bits and leaves every other tile as it was.
TYPED_TEST(TileHost, TriangleFillWritesOnlyThatTriangle) {
    using T = TypeParam;
    for (const char uplo : {'L', 'U'})
        for (const auto& [n, nb] : {std::pair{130, 32}, {300, 300}, {1, 4}, {257, 64}}) {
            SCOPED_TRACE(::testing::Message() << uplo << ", n " << n << ", nb " << nb);
            HostMatrix<T> S(n, n, n);
            matgen::spd(n, this->seed(), S.ptr(), S.ld);
            TileMatrix<T> t(n, n, nb);
            const T marker = T(-12.5);
            fill_tiles_from<T>(t, [marker](int, int, int rows, int cols, T* B, int ldb) {
                for (int c = 0; c < cols; ++c) {
                    T* column = B + static_cast<std::size_t>(c) * ldb;
                    std::fill(column, column + rows, marker);
                }
            });
            fill_triangle_tiles_from<T>(uplo, t, spd_source<T>(n, this->seed()));
            HostMatrix<T> C(n, n, n);
            t.to_lapack(C.ptr(), C.ld);
            int written = 0, kept = 0;
            for (int j = 0; j < n; ++j)
                for (int i = 0; i < n; ++i) {
                    const int I = i / nb, J = j / nb;
                    if (uplo == 'L' ? I >= J : I <= J) {
                        ASSERT_EQ(C(i, j), S(i, j)) << "(" << i << ", " << j << ") in the triangle's tiles";
                        ++written;
                    } else {
                        ASSERT_EQ(C(i, j), marker) << "(" << i << ", " << j << ") outside the triangle's tiles";
                        ++kept;
                    }
                }
            EXPECT_GT(written, 0);
            if (n > nb) {
                EXPECT_GT(kept, 0);
            }
        }
}

// GENERATE tasks write matgen's bits, on CPU workers and on CUDA workers, into tiles in host
// memory and (with a GPU) into tiles in GPU memory (TileMatrix::on_gpus), edge tiles included;
// the triangle variant writes only its tiles.
void expect_generated_tiles_hold_the_matrix(codelets::Impl impl, std::uint64_t seed, int ncuda) {
    for (const auto& [m, n, nb] : {std::tuple{130, 70, 32}, {257, 257, 64}, {1, 1, 5}, {600, 300, 256}, {50, 0, 8}})
        for (const bool on_gpus : {false, true}) {
            if (on_gpus && ncuda == 0) continue;
            SCOPED_TRACE(::testing::Message() << m << " x " << n << ", nb " << nb << (on_gpus ? ", on the GPUs" : ""));
            const codelets::ScopedImpl forced(impl);
            TileMatrix<double> t = on_gpus ? TileMatrix<double>::on_gpus(m, n, nb) : TileMatrix<double>(m, n, nb);
            EXPECT_EQ(t.on_gpus(), on_gpus && m > 0 && n > 0);
            HostMatrix<double> U(m, n, m + 1), B(m, n, m + 1);
            matgen::uniform(m, n, seed, U.ptr(), U.ld);
            generate_tiles(t, GeneratedMatrix{matgen::Kind::Uniform, seed, n});
            t.to_lapack(B.ptr(), B.ld);
            EXPECT_EQ(max_abs_diff(U, B), 0.0) << "uniform";
            for (int j = 0; j < n; ++j)
                for (int i = 0; i < m; ++i) ASSERT_TRUE(same_bits(&U(i, j), &B(i, j), 1)) << i << ", " << j;
            if (m != n) continue;
            HostMatrix<float> S(n, n, n), C(n, n, n);
            matgen::spd(n, seed, S.ptr(), S.ld);
            TileMatrix<float> f = on_gpus ? TileMatrix<float>::on_gpus(n, n, nb) : TileMatrix<float>(n, n, nb);
            generate_tiles(f, GeneratedMatrix{matgen::Kind::Spd, seed, n});
            f.to_lapack(C.ptr(), C.ld);
            EXPECT_TRUE(same_bits(S.ptr(), C.ptr(), S.data.size())) << "spd in float";
            // Only the lower tiles: the others keep what from_lapack put there.
            HostMatrix<float> Z(n, n, n);
            std::fill(Z.data.begin(), Z.data.end(), -12.5f);
            f.from_lapack(Z.ptr(), Z.ld);
            generate_triangle_tiles('L', f, GeneratedMatrix{matgen::Kind::Spd, seed, n});
            f.to_lapack(C.ptr(), C.ld);
            for (int j = 0; j < n; ++j)
                for (int i = 0; i < n; ++i)
                    ASSERT_EQ(C(i, j), i / nb >= j / nb ? S(i, j) : -12.5f) << i << ", " << j;
        }
}

TEST_F(RuntimeTest, GeneratedTilesHoldTheMatrixOnCpuWorkers) {
    expect_generated_tiles_hold_the_matrix(codelets::Impl::Cpu, seed(), ncuda());
}

TEST_F(RuntimeTest, GeneratedTilesHoldTheMatrixOnCudaWorkers) {
    STARFACT_REQUIRE_CUDA_WORKER(ncuda());
    expect_generated_tiles_hold_the_matrix(codelets::Impl::Cuda, seed(), ncuda());
}

// A factorization of tiles that live in GPU memory: Cholesky of an SPD matrix generated in
// place there, checked on the host (StarPU copies the factor's tiles to main memory).
TEST_F(RuntimeTest, GpuTilesFactorAndCheck) {
    STARFACT_REQUIRE_CUDA_WORKER(ncuda());
    const int n = 300, nb = 64;
    TileMatrix<double> t = TileMatrix<double>::on_gpus(n, n, nb);
    ASSERT_TRUE(t.on_gpus());
    generate_triangle_tiles('L', t, GeneratedMatrix{matgen::Kind::Spd, seed(), n});
    ASSERT_EQ(potrf('L', t), 0);
    const double res = potrf_probe_residual_tiles<double>('L', t, spd_source<double>(n, seed()), seed() + 2);
    EXPECT_TRUE(checks::passes(res)) << res;
}

TEST_F(RuntimeTest, GpuTilesNeedACudaWorker) {
    if (ncuda() > 0) GTEST_SKIP() << "this machine has a CUDA worker";
    EXPECT_THROW(TileMatrix<double>::on_gpus(10, 10, 4), RuntimeError);
}

// The pinned pieces cover the storage in order, each a run of whole tiles (a tile's transfer
// never crosses two pinned ranges) of at least kPinPiece bytes but the last, and no longer than
// needed to reach that size.
TEST(TilePinPieces, RunsOfWholeTiles) {
    using T = double;
    for (const auto& [m, n, nb] : {std::tuple{5940, 5940, 1024}, {100000, 100000, 2048}, {32768, 32768, 8192},
                                  {46000, 46000, 4096}, {300, 20, 7}, {1, 1, 1}, {200000, 3, 64}}) {
        SCOPED_TRACE(::testing::Message() << m << " x " << n << ", nb " << nb);
        const std::vector<std::size_t> ends = TileMatrix<T>::pin_piece_ends(m, n, nb);
        const std::size_t bytes = static_cast<std::size_t>(m) * n * sizeof(T);
        ASSERT_FALSE(ends.empty());
        EXPECT_EQ(ends.back(), bytes);
        const int mt = (m + nb - 1) / nb, nt = (n + nb - 1) / nb;
        std::size_t largest = 0;
        std::vector<std::size_t> tile_ends;
        for (int j = 0; j < nt; ++j)
            for (int i = 0; i < mt; ++i) {
                const std::size_t start = TileMatrix<T>::tile_offset(m, n, nb, i, j) * sizeof(T);
                const std::size_t len = static_cast<std::size_t>(TileMatrix<T>::tile_extent(m, nb, i)) *
                                        TileMatrix<T>::tile_extent(n, nb, j) * sizeof(T);
                largest = std::max(largest, len);
                tile_ends.push_back(start + len);
                // The piece holding the tile's first byte holds its last one too.
                const auto k = std::upper_bound(ends.begin(), ends.end(), start) - ends.begin();
                ASSERT_LT(k, static_cast<long>(ends.size()));
                ASSERT_LE(start + len, ends[k]) << "tile (" << i << ", " << j << ") straddles piece " << k;
            }
        for (std::size_t k = 0; k < ends.size(); ++k) {
            const std::size_t start = k ? ends[k - 1] : 0;
            ASSERT_GT(ends[k], start);
            EXPECT_TRUE(std::binary_search(tile_ends.begin(), tile_ends.end(), ends[k])) << "piece " << k << " ends mid-tile";
            if (k + 1 < ends.size()) {
                EXPECT_GE(ends[k] - start, kPinPiece) << "piece " << k;
            }
            EXPECT_LT(ends[k] - start, kPinPiece + largest) << "piece " << k;
        }
    }
}

// Every way of holding the tiles (STARFACT_PIN: pinned in pieces, one pinned allocation, not
// pinned) stores the same matrix and factors it right. The matrix is larger than one piece and
// its tiles do not line up with kPinPiece, so on a GPU the tiles' transfers meet the pieces'
// ends; an unknown mode is refused by name.
TYPED_TEST(TileHost, EveryPinModeHoldsTheTiles) {
    using T = TypeParam;
    const int n = sizeof(T) == 4 ? 8400 : 5940;  // just over 256 MiB
    const int nb = 1000;
    struct Restore {
        ~Restore() { unsetenv("STARFACT_PIN"); }
    } restore;
    for (const char* mode : {"pieces", "whole", "none"}) {
        SCOPED_TRACE(mode);
        setenv("STARFACT_PIN", mode, 1);
        TileMatrix<T> t(n, n, nb);
        const BlockSource<T> A = spd_source<T>(n, this->seed());
        fill_tiles_from<T>(t, A);
        {
            HostMatrix<T> B(n, n, n);
            t.to_lapack(B.ptr(), B.ld);
            // The first block, in the first piece, and the last one, in the last piece.
            for (const int i0 : {0, n - 300}) {
                const int j0 = i0 == 0 ? 0 : n - 64;
                std::vector<T> expect(static_cast<std::size_t>(300) * 64);
                A(i0, j0, 300, 64, expect.data(), 300);
                for (int c = 0; c < 64; ++c) {
                    ASSERT_TRUE(same_bits(&expect[static_cast<std::size_t>(c) * 300], &B(i0, j0 + c), 300))
                        << "block at " << i0 << ", column " << c;
                }
            }
        }
        ASSERT_EQ(potrf('L', t), 0);
        EXPECT_TRUE(checks::passes(potrf_probe_residual_tiles<T>('L', t, A, this->seed() + 1)));
    }
    setenv("STARFACT_PIN", "locked", 1);
    try {
        TileMatrix<T> t(10, 10, 4);
        FAIL() << "STARFACT_PIN=locked was accepted";
    } catch (const ArgumentError& e) {
        EXPECT_NE(std::string(e.what()).find("STARFACT_PIN"), std::string::npos) << e.what();
    }
}

// The tile probe and the column-major probe see the same x and the same factor: the ratios
// agree to rounding; both accept the factor and both refuse it with one entry changed, in the
// diagonal tile or below it, for either triangle.
TYPED_TEST(TileHost, CholeskyProbeOfTilesMatchesTheColumnMajorProbe) {
    using T = TypeParam;
    const int n = 333, nb = 64;
    const BlockSource<T> source = spd_source<T>(n, this->seed());
    HostMatrix<T> A(n, n, n);
    matgen::spd(n, this->seed(), A.ptr(), A.ld);
    for (char uplo : {'L', 'U'}) {
        SCOPED_TRACE(::testing::Message() << "uplo " << uplo);
        TileMatrix<T> t(n, n, nb);
        fill_tiles_from(t, source);
        ASSERT_EQ(potrf(uplo, t), 0);
        HostMatrix<T> F(n, n, n);
        t.to_lapack(F.ptr(), F.ld);
        const double column_major = checks::potrf_probe_residual<T>(uplo, n, A.ptr(), A.ld, F.ptr(), F.ld, 11);
        const double tiles = potrf_probe_residual_tiles(uplo, t, source, 11);
        EXPECT_PRED_FORMAT1(ResidualPasses, tiles);
        // The sums run in double in another order: in double precision that moves the ratio
        // by a fraction of a unit.
        EXPECT_NEAR(tiles, column_major, 0.5);
        // One entry of the factor's triangle changed by a tenth of L(0, 0), in tile (5, 1)
        // (lower) or (1, 5) (upper), then on the diagonal of tile 2.
        for (const auto& [i, j] : {std::pair{5 * nb + 3, nb + 7}, {2 * nb + 9, 2 * nb + 4}}) {
            const int r = uplo == 'L' ? i : j, c = uplo == 'L' ? j : i;
            HostMatrix<T> G = F;
            G(r, c) += static_cast<T>(0.1 * std::abs(F(0, 0)));
            t.from_lapack(G.ptr(), G.ld);
            const double bad = potrf_probe_residual_tiles(uplo, t, source, 11);
            EXPECT_FALSE(checks::passes(bad)) << "entry (" << r << ", " << c << "): " << bad;
            EXPECT_FALSE(checks::passes(checks::potrf_probe_residual<T>(uplo, n, A.ptr(), A.ld, G.ptr(), G.ld, 11)));
        }
    }
}

TYPED_TEST(TileHost, SolveResidualAndGrowthFromASourceMatchTheColumnMajorOnes) {
    using T = TypeParam;
    const int n = 300, nb = 64, nrhs = 3;
    HostMatrix<T> A(n, n, n);
    matgen::uniform(n, n, this->seed(), A.ptr(), A.ld);
    const BlockSource<T> source = uniform_source<T>(this->seed());
    TileMatrix<T> t(n, n, nb), tb(n, nrhs, nb);
    fill_tiles_from(t, source);
    const HostMatrix<T> B = random_matrix<T>(n, nrhs, n, this->seed() + 2);
    tb.from_lapack(B.ptr(), B.ld);
    LuFactors<T> F(t, 16, false);
    ASSERT_EQ(getrf(t, F), 0);
    getrs(t, F, tb);
    HostMatrix<T> X(n, nrhs, n), Fa(n, n, n);
    tb.to_lapack(X.ptr(), X.ld);
    t.to_lapack(Fa.ptr(), Fa.ld);
    const double column_major = checks::solve_residual<T>(n, nrhs, A.ptr(), A.ld, X.ptr(), X.ld, B.ptr(), B.ld);
    const double from_source = solve_residual_source<T>(n, nrhs, nb, source, X.ptr(), X.ld, B.ptr(), B.ld);
    EXPECT_PRED_FORMAT1(ResidualPasses, from_source);
    // The residual is rounded to T once here, after a sum in double; the gemm in T rounds at
    // every step: they agree to a few units of the ratio.
    EXPECT_PRED_FORMAT1(ResidualPasses, column_major);
    EXPECT_LT(std::abs(from_source - column_major), 3.0);
    EXPECT_EQ(growth_factor_tiles(t, source), checks::growth_factor<T>(n, n, A.ptr(), A.ld, Fa.ptr(), Fa.ld));
    // A solution with one entry off by the largest of its column fails.
    HostMatrix<T> Y = X;
    double xmax = 0.0;
    for (int i = 0; i < n; ++i) xmax = std::max(xmax, std::abs(static_cast<double>(X(i, 1))));
    Y(n / 2, 1) += static_cast<T>(xmax);
    EXPECT_FALSE(checks::passes(solve_residual_source<T>(n, nrhs, nb, source, Y.ptr(), Y.ld, B.ptr(), B.ld)));
}

// source_multiply against a plain double loop, rows and columns not multiples of the block.
TYPED_TEST(TileHost, SourceMultiplyIsAPlainProduct) {
    using T = TypeParam;
    const int m = 1500, n = 1100, k = 2;
    HostMatrix<T> A(m, n, m);
    matgen::uniform(m, n, this->seed(), A.ptr(), A.ld);
    std::vector<double> X(static_cast<std::size_t>(n) * k), Y(static_cast<std::size_t>(m) * k), rowabs(m);
    std::mt19937_64 rng(this->seed());
    std::uniform_real_distribution<double> u(-1, 1);
    for (double& x : X) x = u(rng);
    source_multiply<T>(uniform_source<T>(this->seed()), m, n, 1024, k, X.data(), n, Y.data(), m, rowabs.data());
    for (int i = 0; i < m; i += 37)
        for (int c = 0; c < k; ++c) {
            double y = 0.0, a = 0.0;
            for (int j = 0; j < n; ++j) {
                y += static_cast<double>(A(i, j)) * X[j + static_cast<std::size_t>(c) * n];
                a += std::abs(static_cast<double>(A(i, j)));
            }
            EXPECT_NEAR(Y[i + static_cast<std::size_t>(c) * m], y, 1e-10 * n);
            EXPECT_NEAR(rowabs[i], a, 1e-10 * n);
        }
}

}  // namespace
}  // namespace starfact::test
