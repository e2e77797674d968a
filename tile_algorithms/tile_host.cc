// Host-side access to a TileMatrix's tiles, fills from a BlockSource and the tile-wise probes.
#include "tile_algorithms/tile_host.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "common/checks.hpp"
#include "common/error.hpp"
#include "common/matgen.hpp"
#include "common/parallel.hpp"
#include "common/scalar_traits.hpp"

namespace starfact {
namespace {
using Index = std::int64_t;

// max that keeps a NaN: a NaN anywhere must reach the ratio and fail it.
double nan_max(double a, double b) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    return std::max(a, b);
}

double ratio_or_inf(double num, double den) { return den > 0 ? num / den : (num == 0 ? 0.0 : INFINITY); }

double norm_inf(const std::vector<double>& v) {
    double r = 0.0;
    for (double e : v) r = nan_max(r, std::abs(e));
    return r;
}

// One thread for tiny matrices: starting threads would cost more than the work.
constexpr Index kSerialEntries = Index(1) << 18;
unsigned threads_for(Index entries) { return entries < kSerialEntries ? 1u : 0u; }
}  // namespace

template <class T>
HostTiles<T>::HostTiles(const TileMatrix<T>& t, starpu_data_access_mode mode, const std::function<bool(int, int)>& wanted)
    : mt_(static_cast<std::size_t>(t.mt())), ptr_(mt_ * static_cast<std::size_t>(t.nt()), nullptr), ld_(ptr_.size(), 0) {
    const auto want = [&](int i, int j) { return !wanted || wanted(i, j); };
    if (mode & STARPU_R)
        for (int j = 0; j < t.nt(); ++j)
            for (int i = 0; i < t.mt(); ++i)
                if (want(i, j)) starpu_data_fetch_on_node(t(i, j), STARPU_MAIN_RAM, 1);
    for (int j = 0; j < t.nt(); ++j)
        for (int i = 0; i < t.mt(); ++i) {
            if (!want(i, j)) continue;
            starpu_data_handle_t h = t(i, j);
            // In main memory, not at the home node (a GPU for TileMatrix::on_gpus).
            if (starpu_data_acquire_on_node(h, STARPU_MAIN_RAM, mode) != 0) {
                release();
                throw RuntimeError(fmt::format("cannot acquire tile ({}, {}) in main memory", i, j));
            }
            acquired_.push_back(h);
            ptr_[index(i, j)] = reinterpret_cast<T*>(starpu_matrix_get_local_ptr(h));
            ld_[index(i, j)] = static_cast<std::int64_t>(starpu_matrix_get_local_ld(h));
        }
    paused_.emplace();
}

template <class T>
HostTiles<T>::~HostTiles() {
    release();
}

template <class T>
void HostTiles<T>::release() noexcept {
    paused_.reset();
    for (starpu_data_handle_t h : acquired_) starpu_data_release_on_node(h, STARPU_MAIN_RAM);
    acquired_.clear();
}

template <class T>
BlockSource<T> held_source(const T* A, int lda) {
    return [A, lda](int i0, int j0, int rows, int cols, T* B, int ldb) {
        for (int c = 0; c < cols; ++c)
            std::memcpy(B + static_cast<Index>(c) * ldb, A + i0 + static_cast<Index>(j0 + c) * lda,
                        sizeof(T) * static_cast<std::size_t>(std::max(rows, 0)));
    };
}

template <class T>
BlockSource<T> spd_source(int n, std::uint64_t seed) {
    return [n, seed](int i0, int j0, int rows, int cols, T* B, int ldb) {
        matgen::spd_block<T>(n, seed, i0, j0, rows, cols, B, ldb);
    };
}

template <class T>
BlockSource<T> uniform_source(std::uint64_t seed) {
    return [seed](int i0, int j0, int rows, int cols, T* B, int ldb) {
        matgen::uniform_block<T>(seed, i0, j0, rows, cols, B, ldb);
    };
}

namespace {
// Fills the tiles (i, j) with wanted(i, j) from src, the tiles spread over every core.
template <class T>
void fill_some_tiles(TileMatrix<T>& t, const BlockSource<T>& src, const std::function<bool(int, int)>& wanted) {
    const HostTiles<T> tiles(t, STARPU_W, wanted);
    const int nb = t.nb();
    // Each acquired tile in pieces of at most kRows rows, so that a matrix of a few tile columns
    // (LU's nb = 8192) still keeps every core busy.
    constexpr int kRows = 512;
    std::vector<std::tuple<int, int, int>> pieces;  // (i, j, first row)
    for (int j = 0; j < t.nt(); ++j)
        for (int i = 0; i < t.mt(); ++i)
            if (tiles.tile(i, j) != nullptr)
                for (int r = 0; r < t.tile_m(i); r += kRows) pieces.emplace_back(i, j, r);
    parallel_for64(
        static_cast<Index>(pieces.size()),
        [&](Index p) {
            const auto [i, j, r] = pieces[p];
            const int rows = std::min(kRows, t.tile_m(i) - r);
            src(i * nb + r, j * nb, rows, t.tile_n(j), tiles.tile(i, j) + r, static_cast<int>(tiles.ld(i, j)));
        },
        threads_for(static_cast<Index>(t.m()) * t.n()));
}
}  // namespace

template <class T>
void fill_tiles_from(TileMatrix<T>& t, const BlockSource<T>& src) {
    fill_some_tiles(t, src, [](int, int) { return true; });
}

template <class T>
void fill_triangle_tiles_from(char uplo, TileMatrix<T>& t, const BlockSource<T>& src) {
    const bool lower = uplo == 'L' || uplo == 'l';
    fill_some_tiles(t, src, [lower](int i, int j) { return lower ? i >= j : i <= j; });
}

template <class T>
void source_multiply(const BlockSource<T>& src, int m, int n, int nb, int k, const double* X, std::int64_t ldx,
                     double* Y, std::int64_t ldy, double* rowabs) {
    for (int c = 0; c < k; ++c) std::fill(Y + c * ldy, Y + c * ldy + m, 0.0);
    if (rowabs) std::fill(rowabs, rowabs + m, 0.0);
    if (m == 0 || n == 0) return;
    const PausedWorkers paused;  // the whole matrix is generated again: every core
    nb = std::max(1, std::min(nb, 1024));  // a block of work per step; the buffer stays small
    const int mt = (m + nb - 1) / nb, nt = (n + nb - 1) / nb;
    // Each row block is one thread's: it owns those rows of Y and rowabs, no reduction needed.
    parallel_for(
        mt,
        [&](int I) {
            const int i0 = I * nb, rows = std::min(nb, m - i0);
            thread_local std::vector<T> buffer;
            buffer.resize(static_cast<std::size_t>(nb) * nb);
            for (int J = 0; J < nt; ++J) {
                const int j0 = J * nb, cols = std::min(nb, n - j0);
                src(i0, j0, rows, cols, buffer.data(), rows);
                for (int jj = 0; jj < cols; ++jj) {
                    const T* a = buffer.data() + static_cast<Index>(jj) * rows;
                    if (rowabs)
                        for (int r = 0; r < rows; ++r) rowabs[i0 + r] += std::abs(static_cast<double>(a[r]));
                    for (int c = 0; c < k; ++c) {
                        const double x = X[j0 + jj + c * ldx];
                        double* y = Y + i0 + c * ldy;
                        for (int r = 0; r < rows; ++r) y[r] += static_cast<double>(a[r]) * x;
                    }
                }
            }
        },
        threads_for(static_cast<Index>(m) * n));
}

template <class T>
double potrf_probe_residual_tiles(char uplo, const TileMatrix<T>& F, const BlockSource<T>& A,
                                  unsigned long long seed) {
    const int n = F.n(), nb = F.nb(), nt = F.nt();
    if (n == 0) return 0.0;
    const bool lower = uplo == 'L' || uplo == 'l';
    const std::vector<double> x = checks::probe_x<T>(n, seed);
    std::vector<double> ax(x.size()), rowabs(x.size()), y(x.size(), 0.0), z(x.size(), 0.0);
    source_multiply<T>(A, n, n, nb, 1, x.data(), n, ax.data(), n, rowabs.data());
    // Only the factor's triangle: the other tiles may never have been written.
    const HostTiles<T> tiles(F, STARPU_R, [lower](int i, int j) { return lower ? i >= j : i <= j; });
    // Rows [first, end) of column c of tile (I, J) that hold the factor's triangle: every row
    // off the diagonal tiles, lower i >= j or upper i <= j on them.
    const auto rows = [&](int I, int J, int c) -> std::pair<int, int> {
        if (I != J) return {0, F.tile_m(I)};
        return lower ? std::pair<int, int>{c, F.tile_m(I)} : std::pair<int, int>{0, c + 1};
    };
    // First product, one block of y per thread: lower, y_K = sum_{L >= K} L_LK^T x_L (tile
    // column K); upper, y_K = sum_{L >= K} U_KL x_L (tile row K).
    parallel_for(
        nt,
        [&](int K) {
            const int k0 = K * nb;
            for (int L = K; L < nt; ++L) {
                const int l0 = L * nb;
                if (lower) {  // tile (L, K)
                    for (int c = 0; c < F.tile_n(K); ++c) {
                        const T* col = tiles.column(L, K, c);
                        const auto [r0, r1] = rows(L, K, c);
                        double s = 0.0;
                        for (int r = r0; r < r1; ++r) s += static_cast<double>(col[r]) * x[l0 + r];
                        y[k0 + c] += s;
                    }
                } else {  // tile (K, L)
                    for (int c = 0; c < F.tile_n(L); ++c) {
                        const T* col = tiles.column(K, L, c);
                        const auto [r0, r1] = rows(K, L, c);
                        const double xc = x[l0 + c];
                        for (int r = r0; r < r1; ++r) y[k0 + r] += static_cast<double>(col[r]) * xc;
                    }
                }
            }
        },
        threads_for(static_cast<Index>(n) * n));
    // Second product, one block of z per thread: lower, z_K = sum_{L <= K} L_KL y_L (tile row
    // K); upper, z_K = sum_{L <= K} U_LK^T y_L (tile column K).
    parallel_for(
        nt,
        [&](int K) {
            const int k0 = K * nb;
            for (int L = 0; L <= K; ++L) {
                const int l0 = L * nb;
                if (lower) {  // tile (K, L)
                    for (int c = 0; c < F.tile_n(L); ++c) {
                        const T* col = tiles.column(K, L, c);
                        const auto [r0, r1] = rows(K, L, c);
                        const double yc = y[l0 + c];
                        for (int r = r0; r < r1; ++r) z[k0 + r] += static_cast<double>(col[r]) * yc;
                    }
                } else {  // tile (L, K)
                    for (int c = 0; c < F.tile_n(K); ++c) {
                        const T* col = tiles.column(L, K, c);
                        const auto [r0, r1] = rows(L, K, c);
                        double s = 0.0;
                        for (int r = r0; r < r1; ++r) s += static_cast<double>(col[r]) * y[l0 + r];
                        z[k0 + c] += s;
                    }
                }
            }
        },
        threads_for(static_cast<Index>(n) * n));
    double rnorm = 0.0, anorm = 0.0;
    for (int i = 0; i < n; ++i) {
        rnorm = nan_max(rnorm, std::abs(ax[i] - z[i]));
        anorm = nan_max(anorm, rowabs[i]);
    }
    return ratio_or_inf(rnorm, anorm * norm_inf(x) * n * ScalarTraits<T>::eps);
}

template <class T>
double solve_residual_source(int n, int nrhs, int nb, const BlockSource<T>& A, const T* X, int ldx, const T* B,
                             int ldb) {
    if (n == 0 || nrhs == 0) return 0.0;
    std::vector<double> x(static_cast<std::size_t>(n) * nrhs), ax(x.size()), rowabs(static_cast<std::size_t>(n));
    for (int c = 0; c < nrhs; ++c)
        for (int i = 0; i < n; ++i) x[i + static_cast<Index>(c) * n] = X[i + static_cast<Index>(c) * ldx];
    source_multiply<T>(A, n, n, nb, nrhs, x.data(), n, ax.data(), n, rowabs.data());
    double anorm = 0.0;
    for (double v : rowabs) anorm = nan_max(anorm, v);
    double worst = 0.0;
    for (int c = 0; c < nrhs; ++c) {
        double rnorm = 0.0, xnorm = 0.0, bnorm = 0.0;
        for (int i = 0; i < n; ++i) {
            const double b = B[i + static_cast<Index>(c) * ldb];
            // The residual is formed in T, as checks::solve_residual's B - A X is.
            const T r = static_cast<T>(b - ax[i + static_cast<Index>(c) * n]);
            rnorm = nan_max(rnorm, std::abs(static_cast<double>(r)));
            xnorm = nan_max(xnorm, std::abs(x[i + static_cast<Index>(c) * n]));
            bnorm = nan_max(bnorm, std::abs(b));
        }
        const double ratio = ratio_or_inf(rnorm, (anorm * xnorm + bnorm) * n * ScalarTraits<T>::eps);
        if (std::isnan(ratio)) return ratio;
        worst = std::max(worst, ratio);
    }
    return worst;
}

template <class T>
double growth_factor_tiles(const TileMatrix<T>& F, const BlockSource<T>& A) {
    const int m = F.m(), n = F.n(), nb = F.nb();
    std::vector<double> amax(static_cast<std::size_t>(F.mt()), 0.0), umax(amax.size(), 0.0);
    {
        const HostTiles<T> tiles(F, STARPU_R);
        parallel_for(
            F.mt(),
            [&](int I) {
                const int i0 = I * nb, rows = F.tile_m(I);
                thread_local std::vector<T> column;  // one column of A's tile row at a time
                column.resize(static_cast<std::size_t>(nb));
                double a = 0.0, u = 0.0;
                for (int J = 0; J < F.nt(); ++J) {
                    const int j0 = J * nb;
                    for (int c = 0; c < F.tile_n(J); ++c) {
                        A(i0, j0 + c, rows, 1, column.data(), rows);
                        for (int r = 0; r < rows; ++r) a = nan_max(a, std::abs(static_cast<double>(column[r])));
                        if (J < I) continue;
                        const T* f = tiles.column(I, J, c);
                        for (int r = 0; r < rows && i0 + r <= j0 + c; ++r)
                            u = nan_max(u, std::abs(static_cast<double>(f[r])));
                    }
                }
                amax[I] = a;
                umax[I] = u;
            },
            threads_for(static_cast<Index>(m) * n));
    }
    double a = 0.0, u = 0.0;
    for (std::size_t k = 0; k < amax.size(); ++k) a = nan_max(a, amax[k]), u = nan_max(u, umax[k]);
    return a > 0 ? u / a : (u == 0 ? 1.0 : INFINITY);
}

template class HostTiles<float>;
template class HostTiles<double>;
template BlockSource<float> held_source<float>(const float*, int);
template BlockSource<double> held_source<double>(const double*, int);
template BlockSource<float> spd_source<float>(int, std::uint64_t);
template BlockSource<double> spd_source<double>(int, std::uint64_t);
template BlockSource<float> uniform_source<float>(std::uint64_t);
template BlockSource<double> uniform_source<double>(std::uint64_t);
template void fill_tiles_from<float>(TileMatrix<float>&, const BlockSource<float>&);
template void fill_tiles_from<double>(TileMatrix<double>&, const BlockSource<double>&);
template void fill_triangle_tiles_from<float>(char, TileMatrix<float>&, const BlockSource<float>&);
template void fill_triangle_tiles_from<double>(char, TileMatrix<double>&, const BlockSource<double>&);
template void source_multiply<float>(const BlockSource<float>&, int, int, int, int, const double*, std::int64_t,
                                     double*, std::int64_t, double*);
template void source_multiply<double>(const BlockSource<double>&, int, int, int, int, const double*, std::int64_t,
                                      double*, std::int64_t, double*);
template double potrf_probe_residual_tiles<float>(char, const TileMatrix<float>&, const BlockSource<float>&,
                                                  unsigned long long);
template double potrf_probe_residual_tiles<double>(char, const TileMatrix<double>&, const BlockSource<double>&,
                                                   unsigned long long);
template double solve_residual_source<float>(int, int, int, const BlockSource<float>&, const float*, int,
                                             const float*, int);
template double solve_residual_source<double>(int, int, int, const BlockSource<double>&, const double*, int,
                                              const double*, int);
template double growth_factor_tiles<float>(const TileMatrix<float>&, const BlockSource<float>&);
template double growth_factor_tiles<double>(const TileMatrix<double>&, const BlockSource<double>&);

}  // namespace starfact
