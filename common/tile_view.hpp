// TileView<T>: a non-owning column-major view {data, m, n, ld}, usable on host and device.
#pragma once

#include <cstddef>

#if defined(__CUDACC__)
#define STARFACT_HD __host__ __device__
#else
#define STARFACT_HD
#endif

namespace starfact {

template <class T>
struct TileView {
    T* data = nullptr;
    int m = 0;   ///< rows
    int n = 0;   ///< columns
    int ld = 1;  ///< leading dimension, >= max(1, m)

    STARFACT_HD T& operator()(int i, int j) const { return data[i + static_cast<std::ptrdiff_t>(j) * ld]; }
    /// The sub-view of rows [i, i+rows) and columns [j, j+cols).
    STARFACT_HD TileView sub(int i, int j, int rows, int cols) const {
        return {data + i + static_cast<std::ptrdiff_t>(j) * ld, rows, cols, ld};
    }
    STARFACT_HD bool empty() const { return m == 0 || n == 0; }
};

}  // namespace starfact
