// Tile Householder QR (GEQRT, UNMQR, TSQRT, TSMQR, and TTQRT, TTMQR for reduction trees), the
// application of Q and Q^T, the explicit Q, and the least-squares solve GELS.
#pragma once

#include <starpu.h>

#include <vector>

#include "tile_algorithms/tile_matrix.hpp"

namespace starfact {

/// How each panel's tile rows are eliminated. Flat: the diagonal tile's GEQRT, then one TSQRT
/// per tile row below, in order (a serial chain of mt - k kernels). Binary: the rows k..mt-1 in
/// domains of `domain` consecutive rows, a flat chain inside each (GEQRT on the domain's first
/// row, its head, then TSQRTs), the heads then merged pairwise by TTQRTs in a binary tree
/// (log2 of the domain count levels; domain = 1: a pure binary tree, domain >= mt - k: flat).
/// Auto: flat unless the matrix is tall (see resolve_qr_options).
enum class QrTree { Auto, Flat, Binary };

struct QrOptions {
    QrTree tree = QrTree::Auto;
    int domain = 0;  ///< Binary's domain in tile rows; 0 picks one
};

/// The tree and domain that `requested` gives for an mt x nt tile grid (never Auto, domain >= 1;
/// Flat reports domain = mt). Throws ArgumentError for a negative domain.
QrOptions resolve_qr_options(QrOptions requested, int mt, int nt);

/// One elimination of a panel: GEQRT of tile row `row`, or TS/TT of tile row `row` into the
/// pivot tile row `pivot` (whose tile then holds the R of both).
struct QrStep {
    enum class Kind : char { Geqrt, Ts, Tt };
    Kind kind;
    int pivot;  ///< -1 for GEQRT
    int row;
};

/// What tile QR produces besides the overwritten A: the elimination plan of every panel, the T
/// factors of every GEQRT and every TSQRT (one handle per tile (i, k), i >= k) and of every TTQRT
/// (a second handle for the tiles a tree eliminates), min(ib, nb) x K each (K: the tile's
/// columns). StarPU data, allocated where they are first written. Together with the reflectors
/// stored in A they define Q.
template <class T>
class QrFactors {
public:
    /// Factors for an m x n TileMatrix (m >= n) with inner block ib >= 1, eliminating each panel
    /// as `options` says (resolved for A's tile grid).
    QrFactors(const TileMatrix<T>& A, int ib, QrOptions options = {});
    ~QrFactors();
    QrFactors(const QrFactors&) = delete;
    QrFactors& operator=(const QrFactors&) = delete;

    int ib() const { return ib_; }
    int mt() const { return mt_; }
    int nt() const { return nt_; }
    /// The T factors of tile (i, k), i >= k: GEQRT's for i == k, TSQRT's below.
    starpu_data_handle_t Tf(int i, int k) const { return T_[static_cast<std::size_t>(k) * mt_ + i]; }
    /// The T factors of the TTQRT that eliminated tile (i, k) (null when no TT step did).
    starpu_data_handle_t Tt(int i, int k) const { return TT_[static_cast<std::size_t>(k) * mt_ + i]; }
    /// The resolved tree (Flat or Binary) and domain.
    const QrOptions& options() const { return options_; }
    /// Panel k's eliminations in the order the factorization applies them; the first is the
    /// GEQRT of row k and the last one leaves R in row k.
    const std::vector<QrStep>& steps(int k) const { return steps_[k]; }

private:
    int ib_, mt_, nt_;
    QrOptions options_;
    std::vector<std::vector<QrStep>> steps_;
    std::vector<starpu_data_handle_t> T_, TT_;
};

/// Tile QR of the m x n matrix A (m >= n), in place: A = Q R with R (n x n upper triangular)
/// in the upper triangle of A; the reflectors fill the rest (the strict lower part of the tiles
/// a GEQRT factored: its V; a tile a TSQRT eliminated: its V2, whole; a tile a TTQRT eliminated:
/// its V2 in the upper triangle, over the R its GEQRT left) and F holds their T factors.
/// Q = Q(0) ... Q(nt-1), Q(k) = the product of panel k's steps (F.steps(k)) in order.
/// QR cannot fail: NaN or Inf propagate without error. Throws ArgumentError before any task
/// when m < n or F was made for another shape; RuntimeError if a kernel failed.
template <class T>
void geqrf(TileMatrix<T>& A, QrFactors<T>& F);

/// B = Q^T B (trans 'T') or B = Q B (trans 'N') with Q from geqrf(A, F) (m x m); B has m rows
/// and the tile size of A. Throws ArgumentError for another trans, shape or tile size.
template <class T>
void qr_apply(char trans, const TileMatrix<T>& A, const QrFactors<T>& F, TileMatrix<T>& B);

/// The first Q.n columns of Q from geqrf(A, F) into Q (A.m x Q.n, Q.n <= A.m, same tile size as
/// A); Q's previous content is ignored. Q.n = A.n gives the thin Q with A = Q R.
template <class T>
void orgqr(const TileMatrix<T>& A, const QrFactors<T>& F, TileMatrix<T>& Q);

/// Least-squares solve with the factors of geqrf(A, F): B (m x nrhs) becomes Q^T B; its first
/// n rows then hold X = argmin ||A X - B||_2 (column by column) and the others the residual's
/// coordinates, as LAPACK's gels. R must be nonsingular (see gels).
template <class T>
void geqrs(const TileMatrix<T>& A, const QrFactors<T>& F, TileMatrix<T>& B);

/// geqrf then geqrs with inner block ib and the elimination tree of `options`. Returns 0, or the
/// global index k (1-based) of the first exactly zero R(k, k) (A does not have full rank; B is
/// then left untouched), as LAPACK's gels.
template <class T>
int gels(TileMatrix<T>& A, TileMatrix<T>& B, int ib, QrOptions options = {});

}  // namespace starfact
