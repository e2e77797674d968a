// starfact's public header: the runtime, tile matrices and the tile factorizations and solves,
// and the file io of the command line. Link with starfact::starfact (CMake) or `pkg-config
// --cflags --libs starfact`.
#pragma once

/// @file
/// Everything a program needs to factor and solve with starfact:
/// - starfact::Runtime (common/runtime.hpp): starts StarPU and the CUDA handles; exactly one
///   per process, created before and destroyed after every TileMatrix.
/// - starfact::TileMatrix<T> (tile_algorithms/tile_matrix.hpp), T = float or double: an m x n
///   matrix in nb x nb tiles of pinned host memory; from_lapack / to_lapack copy a user's
///   column-major array (leading dimension lda >= max(1, m)) in and out; TileMatrix<T>::wrap
///   uses storage the caller already holds in the tile layout (TileMatrix<T>::tile_offset)
///   without copying. Host memory, pinned by starpu_malloc; StarPU moves tiles to the GPUs.
/// - potrf/potrs/posv (Cholesky), getrf/getrs/gesv (LU with incremental pivoting), geqrf/
///   gels (Householder QR, least squares), in tile_algorithms/*.hpp; they return LAPACK's info
///   (0 success, k > 0 the first failing column, 1-based) for numerical failure.
/// - starfact::io (io/io.hpp): dense matrices from and to .npy and Matrix Market files.
/// - starfact::batched (batched/batched.hpp): LU, Cholesky, QR and their solves on many small
///   matrices at once, on the host, on a CUDA stream (Context) or as StarPU tasks (docs/batched.md).
/// - starfact::batched::vpotrf / vpotrs (batched/vbatched.hpp): variable-size batches (one order
///   per matrix), on the host or on a CUDA stream with the SSDE or DSSE schedule.
/// Errors: starfact::ArgumentError (a bad argument, named by argument(); nothing was done) and
/// starfact::RuntimeError (StarPU, CUDA or a kernel failed), both from common/error.hpp.
///
/// A solve, from a column-major array a (n x n, lda) and b (n x nrhs, ldb):
/// @code
/// starfact::Runtime rt;
/// starfact::TileMatrix<double> A(n, n, 256), B(n, nrhs, 256);
/// A.from_lapack(a, lda);
/// B.from_lapack(b, ldb);
/// int info = starfact::gesv(A, B, /*ib=*/32);  // 0, or k: U(k,k) exactly zero
/// B.to_lapack(b, ldb);                          // the solution
/// @endcode

#include "common/error.hpp"
#include "common/runtime.hpp"
#include "batched/batched.hpp"
#include "batched/vbatched.hpp"
#include "io/io.hpp"
#include "tile_algorithms/tile_algorithms.hpp"
