// The accuracy study of tile LU (Section VII of Agullo et al., LU Factorization for
// Accelerator-based Systems, 2011; docs/design.md, "References"): test matrices, accurately
// computed residuals, row-swap counts, LAPACK's partial pivoting on the same system, one study
// point (tile LU at one tile size) and iterative refinement on top of the tile LU factors. Host
// matrices are column-major.
#pragma once

#include <starpu.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tile_algorithms/lu.hpp"
#include "tile_algorithms/tile_matrix.hpp"

namespace starfact::accuracy {

/// The matrices of the study.
/// - Uniform: entries uniform in [-1, 1) (matgen::uniform; the paper's random matrices).
/// - Normal: entries standard normal (Box-Muller on counter-based uniforms).
/// - IllConditioned: Q1 diag(sigma) Q2^T with Q1, Q2 the orthogonal factors of the QR of two
///   normal matrices and sigma geometric from 1 down to 1/ill_conditioned_cond<T>(): O(n^3).
/// - Antitriangular: a unit lower triangular matrix with entries uniform in [-1, 1)/sqrt(n)
///   below its diagonal, rows in reverse order (A(i, n-1-i) = 1, zero below the antidiagonal).
///   Partial pivoting picks the unit rows and does no arithmetic at all (growth exactly 1,
///   condition number about 3), while each tile's GETRF only sees the small entries of its own
///   rows: the case where incremental pivoting grows much faster than partial pivoting.
enum class MatrixKind { Uniform, Normal, IllConditioned, Antitriangular };

/// "uniform", "normal", "illcond", "antitriangular"; throws ArgumentError("kind") otherwise.
MatrixKind parse_matrix_kind(const std::string& name);
const char* matrix_kind_name(MatrixKind kind);
std::vector<std::string> matrix_kind_names();

/// The 2-norm condition number of IllConditioned matrices in precision T: 1e8 in double, 1e4 in
/// single (about eps^{-1/2}: ill-conditioned, yet far from singular in working precision).
template <class T>
double ill_conditioned_cond();

/// Fills the n x n matrix A (lda >= n) with the matrix of `kind` drawn from `seed`. Entries are
/// computed in double and rounded to T, so a seed gives the same matrix up to rounding in both
/// precisions. Uses every core (host threads and multi-threaded BLAS).
template <class T>
void generate(MatrixKind kind, int n, std::uint64_t seed, T* A, int lda);

/// How the residual r = b - A x is formed: in working precision T (BLAS), or extended: for float
/// in double (products exact, sums to double accuracy), for double with error-free product and
/// sum transformations (compensated dot product, as accurate as if computed in twice the working
/// precision and then rounded).
enum class ResidualPrecision { Working, Extended };

/// r = b - A x for the n x n matrix A, in the given precision, returned in double.
template <class T>
void residual(ResidualPrecision precision, int n, const T* A, int lda, const T* x, const T* b, double* r);

/// How good a solution x of A x = b is: ||b - A x||_inf and the normalized backward error
/// ||b - A x||_inf / ((||A||_inf ||x||_inf + ||b||_inf) n eps) (eps of T), once with the residual
/// evaluated in working precision (as checks::solve_residual and, presumably, the paper: it
/// carries the evaluation's own rounding, about sqrt(n) eps ||A|| ||x||) and once in extended
/// precision (the residual of x itself, which can be far smaller for a backward stable solve).
struct SolveQuality {
    double residual = 0.0;
    double backward_error = 0.0;
    double residual_exact = 0.0;
    double backward_error_exact = 0.0;
};
template <class T>
SolveQuality solve_quality(int n, const T* A, int lda, const T* x, const T* b, double anorm_inf);

/// Number of pivots that move a row, ipiv[j] != j + 1 (1-based LAPACK pivots; TSTRF's encoding
/// in codelets/cpu/lu_kernels.hpp also means "no swap" by j + 1).
long count_row_swaps(const int* ipiv, int k);

/// A host copy of a pivot vector handle of LuFactors (waits for its writer).
std::vector<int> read_pivots(starpu_data_handle_t pivots);

/// Row swaps of a finished getrf(A, F): over every GETRF (diagonal tile) and TSTRF pivot vector.
template <class T>
long count_row_swaps(const LuFactors<T>& F);

/// LAPACK's getrf + getrs (partial pivoting) on a copy of A and b, with one BLAS thread and the
/// solve written as reference LAPACK's getrs (laswp, trsm, trsm): the arithmetic of tile LU with
/// one tile on a CPU worker, so that t = 1 reproduces this solution bit for bit.
template <class T>
struct PartialPivotingSolve {
    std::vector<T> x;       ///< the solution (n)
    std::vector<int> ipiv;  ///< getrf's pivots (n)
    double growth = 0.0;    ///< max|U| / max|A|
    long swaps = 0;         ///< pivots that move a row
    int info = 0;           ///< getrf's info
    double factor_s = 0.0;  ///< getrf's time
};
template <class T>
PartialPivotingSolve<T> partial_pivoting_solve(int n, const T* A, int lda, const T* b);

/// Iterative refinement of x on the factors of getrf(LU, F) (A's original entries in A):
/// `steps` times r = b - A x (in `precision`), solve A d = r with getrs on the tile LU factors,
/// x += d in working precision. quality[k] is the quality of x after k steps (quality[0]: the
/// input x); seconds is the time of the refinement itself (residuals, solves, updates), not of
/// the quality measurements.
struct Refinement {
    std::vector<SolveQuality> quality;
    double seconds = 0.0;
};
template <class T>
Refinement refine(const TileMatrix<T>& LU, const LuFactors<T>& F, const T* A, int lda, const T* b, T* x, int steps,
                  ResidualPrecision precision, double anorm_inf);

/// One point of the study: tile LU (tile size nb, inner block ib) of A, the solve of A x = b,
/// then refinement in working and in extended precision, each from the same tile LU solution.
struct PointOptions {
    int nb = 1;
    int ib = 1;
    int refine_steps = 0;
    LuSchedule schedule = LuSchedule::Dynamic;
};
struct PointResult {
    int tiles = 0;          ///< tiles per row, ceil(n / nb)
    int info = 0;           ///< getrf's info; the solve and refinements are skipped when nonzero
    double factor_s = 0.0;  ///< getrf
    double solve_s = 0.0;   ///< getrs
    double growth = 0.0;    ///< max|U| / max|A|
    long swaps = 0;
    SolveQuality quality;   ///< of the tile LU solution
    Refinement refined;     ///< working-precision residuals
    Refinement refined_x;   ///< extended-precision residuals
};
template <class T>
PointResult tile_lu_point(int n, const T* A, int lda, const T* b, double anorm_inf, const PointOptions& options);

}  // namespace starfact::accuracy
