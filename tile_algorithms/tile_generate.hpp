// A generated matrix (common/matgen.hpp) written into a TileMatrix by tasks, one per tile, on
// the GPUs when there are any: the tiles are born where they are factored. With
// TileMatrix::on_gpus the matrix then never exists in main memory.
#pragma once

#include <cstdint>
#include <functional>

#include "common/matgen.hpp"
#include "tile_algorithms/tile_matrix.hpp"

namespace starfact {

/// Which generated matrix: matgen::uniform(., ., seed) or matgen::spd(n, seed).
struct GeneratedMatrix {
    matgen::Kind kind = matgen::Kind::Uniform;
    std::uint64_t seed = 1;
    int n = 0;  ///< spd's order (its diagonal shift); unused for uniform
};

/// Writes every tile (i, j) of t with wanted(i, j) (every tile when wanted is empty) with the
/// entries of g at its place, the same bits as matgen's host generators give there, and waits.
/// The tasks run on the CUDA workers when codelets::eligible_workers() has any (a tile homed on
/// a GPU on that GPU's workers, in turn; the others on all of them, in turn), else where
/// StarPU places them. Throws RuntimeError when a task is refused or a kernel fails.
template <class T>
void generate_tiles(TileMatrix<T>& t, const GeneratedMatrix& g, const std::function<bool(int, int)>& wanted = {});

/// The same for the tiles a Cholesky of the `uplo` triangle reads ('L': tile row >= tile
/// column, 'U': <=).
template <class T>
void generate_triangle_tiles(char uplo, TileMatrix<T>& t, const GeneratedMatrix& g);

}  // namespace starfact
