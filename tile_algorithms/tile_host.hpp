// Host-side work on a TileMatrix without a column-major copy of the matrix: its tiles acquired
// in main memory, filled block by block from a matrix given by a function of its blocks, and
// the O(n^2) probes of its factors against such a matrix. A generated matrix then needs one
// copy only, the tiles (n = 100000 in double is 80 GB: two copies do not fit 128 GiB).
#pragma once

#include <starpu.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "common/runtime.hpp"
#include "tile_algorithms/tile_matrix.hpp"

namespace starfact {

/// Every tile of t acquired on main memory in `mode` (STARPU_R, STARPU_W or STARPU_RW), with
/// where each lies there; all released when destroyed. For reading, every tile's transfer to
/// main memory is started before the first acquisition waits, so that the transfers overlap.
/// Once the tiles are acquired, StarPU's workers are paused (PausedWorkers) until they are
/// released, so that the host-side work meanwhile has every core (tasks on other data wait
/// too). Throws RuntimeError (and holds nothing) when a tile cannot be acquired.
template <class T>
class HostTiles {
public:
    /// `wanted(i, j)` (if given) picks the tiles to acquire; the others are not touched and
    /// tile(i, j) is null for them.
    HostTiles(const TileMatrix<T>& t, starpu_data_access_mode mode, const std::function<bool(int, int)>& wanted = {});
    ~HostTiles();
    HostTiles(const HostTiles&) = delete;
    HostTiles& operator=(const HostTiles&) = delete;

    /// Tile (i, j) in main memory, column-major with leading dimension ld(i, j).
    T* tile(int i, int j) const { return ptr_[index(i, j)]; }
    std::int64_t ld(int i, int j) const { return ld_[index(i, j)]; }
    /// Column c (0 <= c < tile_n(j)) of tile (i, j).
    T* column(int i, int j, int c) const { return tile(i, j) + c * ld(i, j); }

private:
    std::size_t index(int i, int j) const { return static_cast<std::size_t>(j) * mt_ + i; }
    void release() noexcept;
    std::size_t mt_;
    std::vector<T*> ptr_;
    std::vector<std::int64_t> ld_;
    std::vector<starpu_data_handle_t> acquired_;
    std::optional<PausedWorkers> paused_;
};

/// A matrix given by its blocks: block(i0, j0, rows, cols, B, ldb) writes A(i0 + r, j0 + c),
/// 0 <= r < rows, 0 <= c < cols, into B[r + c ldb]. It must be safe to call concurrently.
template <class T>
using BlockSource = std::function<void(int i0, int j0, int rows, int cols, T* B, int ldb)>;

/// The blocks of the column-major A (leading dimension lda), which must outlive the source.
template <class T>
BlockSource<T> held_source(const T* A, int lda);
/// The blocks of matgen::spd(n, seed) (the same bits), generated when asked for.
template <class T>
BlockSource<T> spd_source(int n, std::uint64_t seed);
/// The blocks of matgen::uniform(., ., seed) (the same bits), generated when asked for.
template <class T>
BlockSource<T> uniform_source(std::uint64_t seed);

/// Writes every tile of t from `src`, the tiles spread over every core. The tiles are acquired
/// for writing, so their copies on GPUs are dropped, not read back.
template <class T>
void fill_tiles_from(TileMatrix<T>& t, const BlockSource<T>& src);
/// The same for the tiles a Cholesky of the `uplo` triangle reads ('L': tile row >= tile
/// column, 'U': <=), half the work; the other tiles are neither acquired nor written.
template <class T>
void fill_triangle_tiles_from(char uplo, TileMatrix<T>& t, const BlockSource<T>& src);

/// Y = A X and rowabs[i] = sum_j |A(i, j)|, A the m x n matrix of `src` visited once in blocks
/// of nb x nb on every core; X is n x k (leading dimension ldx), Y m x k (ldy), in double.
/// rowabs (m entries) may be null.
template <class T>
void source_multiply(const BlockSource<T>& src, int m, int n, int nb, int k, const double* X, std::int64_t ldx,
                     double* Y, std::int64_t ldy, double* rowabs);

/// checks::potrf_probe_residual with the factor in the tiles of F (uplo 'L': L in the lower
/// tiles; 'U': U in the upper ones) and A given by its blocks: with the same random x,
/// ||A x - L (L^T x)||_inf / (||A||_inf ||x||_inf n eps). Nothing of size n^2 is allocated.
template <class T>
double potrf_probe_residual_tiles(char uplo, const TileMatrix<T>& F, const BlockSource<T>& A,
                                  unsigned long long seed);

/// The solve's backward error max_c ||B - A X||_inf / ((||A||_inf ||X||_inf + ||B||_inf) n eps)
/// (checks::solve_residual) with A (n x n) given by its blocks, visited in blocks of nb.
template <class T>
double solve_residual_source(int n, int nrhs, int nb, const BlockSource<T>& A, const T* X, int ldx, const T* B,
                             int ldb);

/// checks::growth_factor with A given by its blocks and the factor in the tiles of F:
/// max |U(i, j)| over F's upper triangle against max |A(i, j)|.
template <class T>
double growth_factor_tiles(const TileMatrix<T>& F, const BlockSource<T>& A);

}  // namespace starfact
