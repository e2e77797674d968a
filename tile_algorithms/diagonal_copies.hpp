// Scratch copies of factored diagonal tiles, shared by tile LU and tile QR: the tasks that read a
// diagonal tile's lower part (GESSM, UNMQR) read the copy, so they need not wait for the tasks of
// the panel (TSTRF, TSQRT) that rewrite its upper part.
#pragma once

#include <starpu.h>

#include <cstddef>
#include <vector>

#include "tile_algorithms/tile_matrix.hpp"

namespace starfact::detail {

/// One handle per diagonal tile of A, shaped like it, registered with no home node (StarPU
/// allocates each where it is first written) and unregistered without waiting for its tasks.
template <class T>
class DiagonalCopies {
public:
    explicit DiagonalCopies(const TileMatrix<T>& A) : handles_(static_cast<std::size_t>(A.nt())) {
        for (int k = 0; k < A.nt(); ++k)
            starpu_matrix_data_register(&handles_[k], -1, 0, A.tile_m(k), A.tile_m(k), A.tile_n(k), sizeof(T));
    }
    ~DiagonalCopies() {
        for (starpu_data_handle_t h : handles_) starpu_data_unregister_submit(h);
    }
    DiagonalCopies(const DiagonalCopies&) = delete;
    DiagonalCopies& operator=(const DiagonalCopies&) = delete;
    starpu_data_handle_t operator[](int k) const { return handles_[k]; }

private:
    std::vector<starpu_data_handle_t> handles_;
};

}  // namespace starfact::detail
