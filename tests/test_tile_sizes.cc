// Default tile sizes (tile_algorithms/tile_sizes.hpp): CPU-only sizes, the measured model's
// rows against the generic ones, the tall-skinny QR rule, larger Cholesky tiles past the GPUs'
// memory, ib never above nb, and the Runtime overload agreeing with the GPU the Runtime drives.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#ifdef STARFACT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "test_support.hpp"
#include "tile_algorithms/tile_sizes.hpp"

namespace starfact::test {
namespace {

constexpr Factorization kAll[] = {Factorization::Cholesky, Factorization::Lu, Factorization::Qr};

TEST(TileSizes, CpuOnly) {
    for (Factorization f : kAll) {
        const TileSizes t = default_tile_sizes(f, 4096, 4096, "");
        EXPECT_EQ(t.nb, 256);
        EXPECT_EQ(t.ib, f == Factorization::Cholesky ? 256 : 32);
    }
}

TEST(TileSizes, EveryOrderGivesValidSizes) {
    for (const char* gpu : {"NVIDIA H200", "NVIDIA H100 80GB HBM3", "Some Other GPU", ""})
        for (Factorization f : kAll)
            for (int n : {1, 100, 4096, 8191, 8192, 16384, 32768, 46000, 65536, 100000, INT_MAX / 2}) {
                SCOPED_TRACE(std::string(gpu) + " n = " + std::to_string(n));
                const TileSizes t = default_tile_sizes(f, n, n, gpu);
                EXPECT_GE(t.nb, 1);
                EXPECT_GE(t.ib, 1);
                EXPECT_LE(t.ib, t.nb);
                if (f == Factorization::Cholesky) {
                    EXPECT_EQ(t.ib, t.nb);
                }
            }
}

TEST(TileSizes, H200CholeskyFollowsTheSweep) {
    // The rows filled from bench/results/2026-12-04-h200-tile-sweep.csv.
    const char* gpu = "NVIDIA H200";
    EXPECT_EQ(default_tile_sizes(Factorization::Cholesky, 8192, 8192, gpu).nb, 2048);
    EXPECT_EQ(default_tile_sizes(Factorization::Cholesky, 12288, 12288, gpu).nb, 2048);
    EXPECT_EQ(default_tile_sizes(Factorization::Cholesky, 16384, 16384, gpu).nb, 4096);
    EXPECT_EQ(default_tile_sizes(Factorization::Cholesky, 24576, 24576, gpu).nb, 4096);
    for (int n : {32768, 46000, 65536, 100000}) {
        const TileSizes t = default_tile_sizes(Factorization::Cholesky, n, n, gpu);
        EXPECT_EQ(t.nb, 2048) << "n = " << n;
        EXPECT_EQ(t.ib, t.nb) << "n = " << n;
    }
    // Other GPUs keep their rows.
    EXPECT_EQ(default_tile_sizes(Factorization::Cholesky, 16384, 16384, "NVIDIA H100 80GB HBM3").nb, 1024);
}

TEST(TileSizes, UnknownGpusTakeTheGenericRows) {
    for (Factorization f : kAll)
        for (int n : {4096, 32768}) {
            const TileSizes a = default_tile_sizes(f, n, n, "Some Other GPU");
            const TileSizes b = default_tile_sizes(f, n, n, "NVIDIA A100-SXM4-80GB");
            EXPECT_EQ(a.nb, b.nb);
            EXPECT_EQ(a.ib, b.ib);
        }
}

TEST(TileSizes, TallSkinnyQrIsOneTileColumn) {
    // Up to 2^27 entries one tile of the whole matrix; beyond, 8192-row tiles.
    TileSizes t = default_tile_sizes(Factorization::Qr, 131072, 1024, "NVIDIA H200");
    EXPECT_EQ(t.nb, 131072);
    EXPECT_EQ(t.ib, 256);
    t = default_tile_sizes(Factorization::Qr, 1 << 20, 1024, "NVIDIA H200");
    EXPECT_EQ(t.nb, 8192);
    // Not tall enough: the square rule.
    EXPECT_EQ(default_tile_sizes(Factorization::Qr, 4 * 4096, 4096, "NVIDIA H200").nb,
              default_tile_sizes(Factorization::Qr, 4096, 4096, "NVIDIA H200").nb);
}

TEST(TileSizes, CholeskyTilesGrowPastTheGpusMemory) {
    const std::int64_t gib = std::int64_t{1} << 30;
    for (const char* gpu : {"NVIDIA H200", "NVIDIA H100 80GB HBM3", "Some Other GPU"}) {
        SCOPED_TRACE(gpu);
        const int n = 100000;
        const std::int64_t bytes = std::int64_t{n} * n * 8;  // 80 GB: over 2^31 entries
        const TileSizes in_core = default_tile_sizes(Factorization::Cholesky, n, n, gpu, bytes, 140 * gib);
        EXPECT_EQ(in_core.nb, default_tile_sizes(Factorization::Cholesky, n, n, gpu).nb);
        EXPECT_LT(in_core.nb, kOutOfCoreCholeskyNb);
        const TileSizes out = default_tile_sizes(Factorization::Cholesky, n, n, gpu, bytes, 26 * gib);
        EXPECT_EQ(out.nb, kOutOfCoreCholeskyNb);
        EXPECT_EQ(out.ib, out.nb);
        // Unknown memory (0) is taken to hold the matrix.
        EXPECT_EQ(default_tile_sizes(Factorization::Cholesky, n, n, gpu, bytes, 0).nb, in_core.nb);
        // A small order never gets a tile beyond itself.
        EXPECT_EQ(default_tile_sizes(Factorization::Cholesky, 5000, 5000, gpu, 200 * gib, gib).nb, 5000);
        // LU and QR keep their rows.
        for (Factorization f : {Factorization::Lu, Factorization::Qr}) {
            const TileSizes a = default_tile_sizes(f, n, n, gpu, bytes, 26 * gib);
            const TileSizes b = default_tile_sizes(f, n, n, gpu);
            EXPECT_EQ(a.nb, b.nb);
            EXPECT_EQ(a.ib, b.ib);
        }
    }
    // CPU cores only: the CPU sizes whatever the sizes given.
    EXPECT_EQ(default_tile_sizes(Factorization::Cholesky, 100000, 100000, "", 80 * gib, gib).nb, 256);
}

class TileSizesRuntime : public RuntimeTest {};

TEST_F(TileSizesRuntime, FollowsTheRuntimesGpu) {
    for (Factorization f : kAll) {
        const TileSizes a = default_tile_sizes(f, 16384, 16384, runtime());
        const TileSizes b = default_tile_sizes(f, 16384, 16384, runtime().ncuda() > 0 ? runtime().gpu_name() : "");
        EXPECT_EQ(a.nb, b.nb);
        EXPECT_EQ(a.ib, b.ib);
    }
    if (runtime().ncuda() == 0) {
        EXPECT_EQ(runtime().gpu_name(), "");
        EXPECT_EQ(runtime().cuda_memory_bytes(), 0);
    } else {
        // Several CUDA workers share the GPU: its name is still found, and never the CPU sizes.
        EXPECT_FALSE(runtime().gpu_name().empty());
        for (Factorization f : kAll) EXPECT_NE(default_tile_sizes(f, 16384, 16384, runtime()).nb, 256);
        // StarPU reports the GPU's memory, at most what the device has.
        const std::int64_t mem = runtime().cuda_memory_bytes();
        EXPECT_GT(mem, std::int64_t{1} << 30);
#ifdef STARFACT_HAVE_CUDA
        std::size_t free_b = 0, total_b = 0;
        ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
        EXPECT_LE(mem, static_cast<std::int64_t>(total_b * runtime().gpus().size()));
#endif
        // A matrix four times that memory takes the out-of-core Cholesky tiles.
        const int n = static_cast<int>(std::sqrt(4.0 * static_cast<double>(mem) / 8.0));
        EXPECT_EQ(default_tile_sizes(Factorization::Cholesky, n, n, runtime()).nb, kOutOfCoreCholeskyNb);
        EXPECT_EQ(default_tile_sizes(Factorization::Cholesky, n, n, runtime(), 1).nb,
                  default_tile_sizes(Factorization::Cholesky, n, n, runtime().gpu_name()).nb);
    }
}

}  // namespace
}  // namespace starfact::test
