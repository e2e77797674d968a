// Default tile sizes: nb and the inner block ib per factorization, matrix shape and the GPU the
// Runtime drives, from a table measured by scripts/tune_tiles.sh (docs/performance.md, "Default
// tile sizes"). The command line uses it whenever --nb or --ib is 0; a library user asks it for
// the nb of a TileMatrix and the ib of LuFactors / QrFactors.
#pragma once

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
TileSizes default_tile_sizes(Factorization f, int m, int n, const Runtime& rt);

/// The same for a GPU named `gpu` ("" for none: CPU cores only), for tests and the tuning script.
TileSizes default_tile_sizes(Factorization f, int m, int n, const std::string& gpu);

}  // namespace starfact
