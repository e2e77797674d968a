// LAPACK-style normalized residuals (host, column-major). Each returns a ratio that passes
// below 30 (the threshold of LAPACK's test suite, docs/testing.md); NaN or Inf in the data
// gives NaN or Inf, which fails.
// The full residuals cost O(n^3) (multi-threaded OpenBLAS); the probes cost O(n^2) (one pass
// over each matrix on every core) and replace them for large matrices (check_kind).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace starfact::checks {

/// Threshold every normalized residual must stay below.
constexpr double kThreshold = 30.0;

/// ||A - L L^T||_1 / (n ||A||_1 eps) (uplo 'L', F holds L in its lower triangle), or
/// ||A - U^T U||_1 / (n ||A||_1 eps) (uplo 'U'). A is symmetric; only its uplo triangle is read.
template <class T>
double potrf_residual(char uplo, int n, const T* A, int lda, const T* F, int ldf);

/// Solve backward error ||B - A X||_inf / ((||A||_inf ||X||_inf + ||B||_inf) n eps), the
/// maximum over the columns of B (n x nrhs).
template <class T>
double solve_residual(int n, int nrhs, const T* A, int lda, const T* X, int ldx, const T* B, int ldb);

/// True when the ratio passes: finite and below kThreshold.
bool passes(double ratio);

}  // namespace starfact::checks

namespace starfact::checks {

/// Which check --check runs. Full: the residuals above, from the explicit factors (O(n^3) on
/// the host, plus for QR the explicit Q). Probe: the same quantities seen through one random
/// vector (O(n^2)), and no LAPACK reference.
enum class CheckKind { Full, Probe };

/// The work, m n^2, up to which check_kind picks the full check: 16384^3, a square n = 16384
/// (the full potrf check then costs 2^42 flops, seconds on 16 cores and already dozens of
/// factorizations on a GPU; its cost grows as n^3 while the probe's grows as n^2).
constexpr double kFullCheckWork = 16384.0 * 16384.0 * 16384.0;

/// Full while m n^2 <= kFullCheckWork, else Probe (an m x n factorization, m >= n).
CheckKind check_kind(long long m, long long n);

/// "full" or "probe".
const char* check_kind_name(CheckKind kind);

/// The probes' random vector x (n entries of random sign and magnitude in [0.5, 1), rounded to
/// T, returned in double): the x every probe below draws from `seed`, for probes computed
/// elsewhere (tile_algorithms/tile_host.hpp) to use the same one.
template <class T>
std::vector<double> probe_x(std::int64_t n, unsigned long long seed);

/// An O(n^2) probe of the Cholesky residual for large n: with a random x,
/// ||A x - L (L^T x)||_inf / (||A||_inf ||x||_inf n eps) (uplo 'L'; U^T (U x) for 'U').
/// It cannot see every error the full residual sees, but any wrong factor shows in it
/// with probability one; A is symmetric with both triangles stored.
template <class T>
double potrf_probe_residual(char uplo, int n, const T* A, int lda, const T* F, int ldf, unsigned long long seed);

/// Replaces the m entries of v by L~^{-1} P~ v: the transformations of an LU factorization
/// (tile LU with incremental pivoting: lu_apply_forward on an m x 1 matrix).
template <class T>
using LuForward = std::function<void(T* v)>;

/// An O(mn) probe of the LU factorization of the m x n A (m >= n) for large matrices: with a
/// random x, ||L~^{-1} P~ (A x) - [U; 0] x||_inf / (||A||_inf ||x||_inf n eps), U the upper
/// triangle of the factor F's top n rows and `forward` the transformations (the probe form of
/// lu_transform_residual, and for square A of ||A x - L (U x)||).
template <class T>
double lu_probe_residual(int m, int n, const T* A, int lda, const T* F, int ldf, const LuForward<T>& forward,
                         unsigned long long seed);

/// Replaces the m entries of v by Q v (trans 'N') or Q^T v (trans 'T'), Q the m x m orthogonal
/// factor of a QR factorization (tile QR: qr_apply on an m x 1 matrix).
template <class T>
using QApply = std::function<void(char trans, T* v)>;

struct QrProbe {
    double residual;       ///< ||A x - Q (R x)||_inf / (||A||_inf ||x||_inf m eps)
    double orthogonality;  ///< ||Q^T (Q y) - y||_inf / (||y||_inf m eps), y = [R x; 0]
};

/// An O(mn) probe of the QR factorization of the m x n A (m >= n) for large matrices, with a
/// random x: the residual and orthogonality of qr_residuals seen through one vector. R is the
/// upper triangle of the factor F's top n rows; apply_q applies Q and Q^T.
template <class T>
QrProbe qr_probe_residuals(int m, int n, const T* A, int lda, const T* F, int ldf, const QApply<T>& apply_q,
                           unsigned long long seed);

}  // namespace starfact::checks

namespace starfact::checks {

/// What LAPACK's partial pivoting does on the same system, for comparison with tile LU:
/// the backward error of getrf + getrs (as solve_residual) and the growth factor
/// max|U| / max|A|. A is n x n, B n x nrhs; neither is modified.
struct LapackLuReference {
    double backward_error;
    double growth;
    int info;
};
template <class T>
LapackLuReference lapack_lu_reference(int n, int nrhs, const T* A, int lda, const T* B, int ldb);

/// max |U(i, j)| over i <= j (the upper trapezoid of a factored m x n matrix F) divided by
/// max |A(i, j)|: the growth factor.
template <class T>
double growth_factor(int m, int n, const T* A, int lda, const T* F, int ldf);

/// For tile LU (L is not explicit): with G = the transformations applied to the original A
/// (m x n, as lu_apply_forward does), ||G - [U; 0]||_1 / (n ||A||_1 eps), U = the upper
/// trapezoid of the factor F.
template <class T>
double lu_transform_residual(int m, int n, const T* A, int lda, const T* G, int ldg, const T* F, int ldf);

}  // namespace starfact::checks

namespace starfact::checks {

/// QR's full check: ||A - Q R||_1 / (m ||A||_1 eps) and ||I - Q^T Q||_1 / (m eps); A m x n,
/// Q the thin m x n Q, R the upper triangle of the top n rows of F.
struct QrResiduals {
    double residual;
    double orthogonality;
};
template <class T>
QrResiduals qr_residuals(int m, int n, const T* A, int lda, const T* Q, int ldq, const T* F, int ldf);

/// The least-squares check, with r = b - A x for each column: ||A^T r||_2 / (||A||_F (||A||_F
/// ||x||_2 + ||b||_2) max(m, n) eps), the largest over the columns. The exact least-squares
/// solution has A^T r = 0, and a backward-stable one keeps the ratio O(1) whether the system is
/// nearly consistent (r ~ 0, where ||A^T r|| / (||A|| ||r||) would not be) or not. A is m x n,
/// B m x nrhs, X holds x in its first n rows. O(m n nrhs).
template <class T>
double ls_residual(int m, int n, int nrhs, const T* A, int lda, const T* X, int ldx, const T* B, int ldb);

/// ls_residual of LAPACK's gels on the same problem (copies of A and B; O(m n^2)).
template <class T>
double lapack_ls_residual(int m, int n, int nrhs, const T* A, int lda, const T* B, int ldb);

}  // namespace starfact::checks
