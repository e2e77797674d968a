// The tile_algorithms layer's public header.
#pragma once

#include "tile_algorithms/accuracy.hpp"
#include "tile_algorithms/cholesky.hpp"
#include "tile_algorithms/lu.hpp"
#include "tile_algorithms/qr.hpp"
#include "tile_algorithms/tile_matrix.hpp"
#include "tile_algorithms/tile_sizes.hpp"
