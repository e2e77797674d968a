// Tile Cholesky (POTRF), its solve (POTRS) and the driver POSV, on TileMatrix.
#pragma once

#include "tile_algorithms/tile_matrix.hpp"

namespace starfact {

/// Cholesky factorization of the symmetric positive definite n x n matrix A:
/// A = L L^T (uplo 'L', the lower triangle is read and overwritten with L) or
/// A = U^T U (uplo 'U', the upper triangle). The other triangle of the diagonal tiles is
/// left untouched; off-diagonal tiles of the other triangle are not accessed.
/// Returns LAPACK's info: 0, or k > 0 when the leading minor of order k (1-based, global)
/// is not positive definite; the factorization is then incomplete, as in LAPACK.
/// Throws ArgumentError (before any task) for uplo not in {L, U} or a non-square A, and
/// RuntimeError if a kernel failed.
template <class T>
int potrf(char uplo, TileMatrix<T>& A);

/// Solves A X = B with the factor from potrf(uplo, A); B (n x nrhs, same nb) is overwritten
/// with X. Throws ArgumentError when the shapes or tile sizes do not match.
template <class T>
void potrs(char uplo, const TileMatrix<T>& A, TileMatrix<T>& B);

/// potrf then potrs; returns potrf's info and leaves B untouched when it is nonzero.
template <class T>
int posv(char uplo, TileMatrix<T>& A, TileMatrix<T>& B);

}  // namespace starfact
