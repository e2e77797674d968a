// Tile Householder QR (GEQRT, UNMQR, TSQRT, TSMQR), the application of Q and Q^T, the explicit
// Q, and the least-squares solve GELS.
#pragma once

#include <starpu.h>

#include <vector>

#include "tile_algorithms/tile_matrix.hpp"

namespace starfact {

/// What tile QR produces besides the overwritten A: the T factors of every GEQRT (diagonal
/// tiles) and of every TSQRT (tiles below them), min(ib, nb) x K each (K: the tile's columns).
/// StarPU data, allocated where they are first written. Together with the reflectors stored
/// in A they define Q.
template <class T>
class QrFactors {
public:
    /// Factors for an m x n TileMatrix (m >= n) with inner block ib >= 1.
    QrFactors(const TileMatrix<T>& A, int ib);
    ~QrFactors();
    QrFactors(const QrFactors&) = delete;
    QrFactors& operator=(const QrFactors&) = delete;

    int ib() const { return ib_; }
    int mt() const { return mt_; }
    int nt() const { return nt_; }
    /// The T factors of tile (i, k), i >= k: GEQRT's for i == k, TSQRT's below.
    starpu_data_handle_t Tf(int i, int k) const { return T_[static_cast<std::size_t>(k) * mt_ + i]; }

private:
    int ib_, mt_, nt_;
    std::vector<starpu_data_handle_t> T_;
};

/// Tile QR of the m x n matrix A (m >= n), in place: A = Q R with R (n x n upper triangular)
/// in the upper triangle of A; the reflectors fill the rest (the strict lower part of the
/// diagonal tiles: GEQRT's V; the tiles below: TSQRT's V2) and F holds their T factors.
/// Q = Q(0) ... Q(nt-1), Q(k) = the product of tile column k's GEQRT and its TSQRTs in order.
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

/// geqrf then geqrs with inner block ib. Returns 0, or the global index k (1-based) of the first
/// exactly zero R(k, k) (A does not have full rank; B is then left untouched), as LAPACK's gels.
template <class T>
int gels(TileMatrix<T>& A, TileMatrix<T>& B, int ib);

}  // namespace starfact
