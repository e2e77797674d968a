// Default tile sizes: nb and the inner block ib per factorization, matrix shape and the GPU the
// Runtime drives, from a table measured by scripts/tune_tiles.sh (docs/performance.md, "Default
// tile sizes"). The command line uses it whenever --nb or --ib is 0; a library user asks it for
// the nb of a TileMatrix and the ib of LuFactors / QrFactors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/runtime.hpp"

namespace starfact {

enum class Factorization { Cholesky, Lu, Qr };

struct TileSizes {
    int nb;  ///< tile size
    int ib;  ///< inner block of the LU and QR kernels (nb for Cholesky, which has none)
};

/// The tile sizes for an m x n factorization (Cholesky and LU: square, m = n; QR: m >= n) on the
/// workers `rt` started: with a CUDA worker, the row of the table for that GPU model (a measured
/// one, else the closest measured model's) and the largest order it covers; on CPU cores only,
/// nb 256 and ib min(nb, 32). Always 1 <= ib <= nb.
/// A matrix of `elem_bytes`-byte entries larger than the memory StarPU may use on the GPUs
/// (Runtime::cuda_memory_bytes, which STARPU_LIMIT_CUDA_MEM lowers) gets Cholesky tiles of at
/// least kOutOfCoreCholeskyNb: each tile then brings more flops per byte over the host link,
/// which bounds the factorization once tiles must be evicted and fetched again.
TileSizes default_tile_sizes(Factorization f, int m, int n, const Runtime& rt, std::size_t elem_bytes = 8);

/// The same for a GPU named `gpu` ("" for none: CPU cores only) with `gpu_bytes` of device memory
/// for StarPU (0: unknown, taken to hold the matrix), for tests and the tuning script.
TileSizes default_tile_sizes(Factorization f, int m, int n, const std::string& gpu, std::int64_t matrix_bytes = 0,
                             std::int64_t gpu_bytes = 0);

/// The smallest Cholesky tile for a matrix that does not fit in the GPUs' memory.
constexpr int kOutOfCoreCholeskyNb = 8192;

}  // namespace starfact
