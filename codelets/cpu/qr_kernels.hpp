// Pure CPU kernels of tile QR (Householder, compact WY): GEQRT, UNMQR, TSQRT, TSMQR, TTQRT, TTMQR.
// No StarPU. They follow LAPACK's dgeqrt, dgemqrt, dtpqrt and dtpmqrt (TS: l = 0, the bottom tile
// is full; TT: l = the bottom triangle's rows, the bottom tile is upper triangular).
//
// Conventions (ib = the inner block, clamped to [1, K] where K is the number of reflectors; the
// T factor tiles have ld >= ib and K columns, block J = [j0, j0 + b) holding its b x b upper
// triangular T in rows 0..b-1 of columns J, as LAPACK's geqrt/tpqrt store it):
// - GEQRT: A = Q R with Q = H(0) ... H(K-1), K = min(m, n); R in A's upper triangle/trapezoid,
//   the reflectors V (unit lower trapezoidal, the unit diagonal implicit) strictly below it.
// - UNMQR reads only V's strict lower part (its upper part is R and may change meanwhile).
// - TSQRT factors the stack [R; A] (R: the n x n upper triangle at the top of the diagonal
//   tile, A: the m x n tile below): [R; A] = Q [R'; 0], Q = I - [I; V2] T [I; V2]^T block by
//   block. R' overwrites R's upper triangle, V2 (full, m x n) overwrites A, T goes to Tf.
//   R's strict lower triangle (GEQRT's V, still needed by the UNMQRs of that tile row) and any
//   row of the diagonal tile below n are never read nor written.
// - TSMQR applies that Q (or Q^T) to the pair [A1; A2] of a trailing column: A1 is the tile of
//   the diagonal tile's row (only its first K rows, K = V2.n, are used), A2 the tile of V2's row.
// - TTQRT factors [R1; R2], both upper triangles at the top of their tiles (R1: the pivot tile's,
//   n x n; R2: the first m' = min(A.m, n) rows of the lower tile A, upper trapezoidal when
//   m' < n): dtpqrt with m = l = m'. R1' overwrites R1's upper triangle, V2 (upper triangular or
//   trapezoidal, m' x n) overwrites R2's upper part. Strict lower parts of both tiles (GEQRT's V
//   of those rows) and rows of A below m' are neither read nor written.
// - TTMQR applies that Q (or Q^T) to [A1; A2]: rows 0..K-1 of A1 and rows 0..m'-1 of A2
//   (m' = min(V2.m, K)), reading only V2's upper part (dtpmqrt with m = l = m').
// Empty tiles are no-ops. NaN data goes through without crashing (the LAPACKE _work entry
// points are used: they do not scan for NaN).
#pragma once

#include "common/tile_view.hpp"

namespace starfact::cpu {

/// Householder QR of the m x n tile A with inner blocking ib (dgeqrt). Tf: ib x min(m, n).
template <class T>
void geqrt(int ib, TileView<T> A, TileView<T> Tf);

/// C = op(Q) C with Q from GEQRT of the tile V (m x n, m = C.m; K = min(m, n) reflectors) and
/// its T factors Tf (dgemqrt). side: only 'L' is supported; trans: 'T' (Q^T) or 'N' (Q).
template <class T>
void unmqr(char side, char trans, int ib, TileView<const T> V, TileView<const T> Tf, TileView<T> C);

/// TSQRT as described above (dtpqrt, l = 0). R: the diagonal tile (R.m >= n), A: m x n, Tf:
/// ib x n.
template <class T>
void tsqrt(int ib, TileView<T> R, TileView<T> A, TileView<T> Tf);

/// [A1(0:K, :); A2] = op(Q) [A1(0:K, :); A2] with Q from TSQRT (dtpmqrt, side L, l = 0):
/// trans 'T' applies Q^T (the factorization's update), 'N' applies Q. A1: k x n with k >= K,
/// A2: m x n, V2: m x K (the factored tile below the diagonal), Tf: ib x K.
template <class T>
void tsmqr(char trans, int ib, TileView<T> A1, TileView<T> A2, TileView<const T> V2, TileView<const T> Tf);

/// TTQRT as described above (dtpqrt, l = m'). R: the pivot tile (R.m >= n), A: m x n (only its
/// upper triangle/trapezoid is used), Tf: ib x n.
template <class T>
void ttqrt(int ib, TileView<T> R, TileView<T> A, TileView<T> Tf);

/// [A1(0:K, :); A2(0:m', :)] = op(Q) [...] with Q from TTQRT (dtpmqrt, side L, l = m'):
/// A1: k x n with k >= K, A2: m x n, V2: m x K (only its upper part is read), Tf: ib x K.
template <class T>
void ttmqr(char trans, int ib, TileView<T> A1, TileView<T> A2, TileView<const T> V2, TileView<const T> Tf);

}  // namespace starfact::cpu
