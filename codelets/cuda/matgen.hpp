// In-place generation of one tile of common/matgen.hpp's matrices on a GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/matgen.hpp"
#include "common/tile_view.hpp"

namespace starfact::cuda {

/// A(r, c) = entry (i0 + r, j0 + c) of the matrix `kind` (n: spd's order), the same bits as
/// matgen::uniform_block / spd_block write on the host. Asynchronous on `stream`.
template <class T>
cudaError_t generate_tile(TileView<T> A, matgen::Kind kind, std::uint64_t seed, int n, int i0, int j0,
                          cudaStream_t stream);

}  // namespace starfact::cuda
