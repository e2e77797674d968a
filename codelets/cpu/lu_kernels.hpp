// Pure CPU kernels of tile LU with incremental (block pairwise) pivoting: GETRF, GESSM,
// TSTRF, SSSSM. No StarPU. The CUDA twins in codelets/cuda/lu_kernels.hpp have the same
// semantics and storage conventions; tests compare the two.
//
// Conventions (K = number of columns of the panel tile, b = min(ib, K - j0) for the inner
// block of columns J = [j0, j0 + b)):
// - GETRF pivots: ipiv[j] (1-based, LAPACK style) is the row of the tile swapped with row j.
// - TSTRF factors the stack [U; A] (U: the K x K upper triangle at the top of the diagonal
//   tile, A: the tile below, m x K) by partial pivoting, one inner block J at a time, which is
//   exactly getrf of the (b + m) x b panel [U(J, J); A(:, J)] followed by the update of the
//   columns right of J. Pivots: ipiv[j] = j + 1 (no swap: U's row j stays) or K + r + 1 (U's
//   row j swapped with A's row r, 0-based); never another row of U.
//   Storage: U's upper triangle becomes the new U; A(:, J) holds the multipliers L2 of block
//   J; the unit lower b x b factor L1 of block J (the multipliers of the rows that moved up
//   into U) goes to L(0:b, J), strictly below its diagonal. U's strict lower triangle (GETRF's
//   L, still needed by the solve) is never written.
// - The trtri + gemm variant (`inverse`): L has 2 ib rows, and TSTRF also stores the inverse
//   of block J's L1 at L(ib:ib+b, J), in full (ones on its diagonal, zeros above), for GPU
//   kernels that apply L1^{-1} by GEMM. The CPU SSSSM keeps its triangular solve.
// - Info: the first column j (1-based) whose pivot is exactly zero, else 0. The factorization
//   goes on (a zero column is skipped, not divided by), as LAPACK's getrf does. NaN pivots
//   never produce an out-of-range pivot index.
#pragma once

#include "common/tile_view.hpp"

namespace starfact::cpu {

/// LU with partial pivoting of the m x n tile A: A = P L U, L unit lower (m x min(m, n)) in A's
/// strict lower part, U in its upper part. ipiv has min(m, n) entries. ib is the inner
/// blocking (any value >= 1 gives the same factorization up to rounding). Returns info.
template <class T>
int getrf(TileView<T> A, int* ipiv, int ib);

/// Applies GETRF's row swaps and L to a tile of the same tile row: A = L^{-1} P A, where D is
/// the factored diagonal tile (L unit lower in its strict lower part), ipiv its K pivots,
/// K = min(A.m, D.n), and A is m x n. When m > K (the tall last diagonal tile of a tall
/// matrix, met when the transformations are applied to a right-hand side), L is m x K
/// trapezoidal: rows K.. of A are updated by D's rows K.. after the solve of the top K rows.
template <class T>
void gessm(const int* ipiv, TileView<const T> D, TileView<T> A, int ib);

/// TSTRF as described above. U: the diagonal tile (K x K at its top is used; it may have more
/// rows, which are not touched), A: m x K, L: ib x K (2 ib x K with `inverse`; ld >= its rows),
/// ipiv: K entries. Returns info.
template <class T>
int tstrf(TileView<T> U, TileView<T> A, TileView<T> L, int* ipiv, int ib, bool inverse = false);

/// Applies TSTRF(i, k)'s transformations to the tiles of a trailing column: A1 (the tile of
/// tile row k: only its first K rows are used) and A2 (the tile of tile row i, m x n), where
/// L and AL (= the factored A(i, k), m x K) and ipiv come from that TSTRF. Block by block:
/// the b swaps between A1's rows J and A2's rows, A1(J, :) = L1^{-1} A1(J, :),
/// A2 -= AL(:, J) A1(J, :).
template <class T>
void ssssm(TileView<T> A1, TileView<T> A2, TileView<const T> L, TileView<const T> AL, const int* ipiv, int ib);

}  // namespace starfact::cpu
