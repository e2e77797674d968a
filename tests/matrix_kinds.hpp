// Matrix kinds and checks shared by the matrix_kinds and property suites: matrices of a given
// condition number (general and SPD), exact power-of-two scaling, the QR and least-squares ratios,
// and the pivot range check of tile LU.
#pragma once

#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/blas.hpp"
#include "common/scalar_traits.hpp"
#include "test_support.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

namespace starfact::test::kinds {

template <class T>
constexpr double eps() {
    return ScalarTraits<T>::eps;
}

// ---- generators ------------------------------------------------------------------------------

/// The first `cols` columns of a random m x m orthogonal matrix (QR of a uniform matrix), in double.
inline std::vector<double> random_orthonormal(int m, int cols, std::uint64_t seed) {
    HostMatrix<double> G = random_matrix<double>(m, cols, m, seed);
    std::vector<double> tau(static_cast<std::size_t>(std::max(1, cols)));
    EXPECT_EQ(LAPACKE_dgeqrf(LAPACK_COL_MAJOR, m, cols, G.ptr(), m, tau.data()), 0);
    EXPECT_EQ(LAPACKE_dorgqr(LAPACK_COL_MAJOR, m, cols, cols, G.ptr(), m, tau.data()), 0);
    return G.data;
}

/// Singular values from 1 down to 1/cond, geometrically.
inline std::vector<double> geometric(int n, double cond) {
    std::vector<double> s(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) s[i] = n == 1 ? 1.0 : std::pow(cond, -static_cast<double>(i) / (n - 1));
    return s;
}

/// An m x n (m >= n) matrix U diag(sigma) V^T with 2-norm condition number `cond` (before the
/// rounding to T), leading dimension ld.
template <class T>
HostMatrix<T> with_condition(int m, int n, int ld, double cond, std::uint64_t seed) {
    const std::vector<double> U = random_orthonormal(m, n, seed), V = random_orthonormal(n, n, seed + 1);
    const std::vector<double> s = geometric(n, cond);
    std::vector<double> W(U), A(static_cast<std::size_t>(m) * n);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) W[i + static_cast<std::size_t>(j) * m] *= s[j];
    blas::gemm('N', 'T', m, n, n, 1.0, W.data(), m, V.data(), n, 0.0, A.data(), m);
    HostMatrix<T> out(m, n, ld);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) out(i, j) = static_cast<T>(A[i + static_cast<std::size_t>(j) * m]);
    return out;
}

/// A symmetric positive definite Q diag(sigma) Q^T with condition `cond` (before rounding),
/// exactly symmetric after the rounding, both triangles stored.
template <class T>
HostMatrix<T> spd_with_condition(int n, int ld, double cond, std::uint64_t seed) {
    const std::vector<double> Q = random_orthonormal(n, n, seed);
    const std::vector<double> s = geometric(n, cond);
    std::vector<double> W(Q), A(static_cast<std::size_t>(n) * n);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) W[i + static_cast<std::size_t>(j) * n] *= s[j];
    blas::gemm('N', 'T', n, n, n, 1.0, W.data(), n, Q.data(), n, 0.0, A.data(), n);
    HostMatrix<T> out(n, n, ld);
    for (int j = 0; j < n; ++j)
        for (int i = j; i < n; ++i) {
            const double v = 0.5 * (A[i + static_cast<std::size_t>(j) * n] + A[j + static_cast<std::size_t>(i) * n]);
            out(i, j) = out(j, i) = static_cast<T>(v);
        }
    return out;
}

/// The two condition numbers of TESTING.md: 1e6 and near 1/eps (1/(16 eps): 2.8e14 in double,
/// 5.2e5 in single, where 1e6 is already beyond 1/eps / 10).
template <class T>
std::vector<double> conditions() {
    return {1e6, 1.0 / (16.0 * eps<T>())};
}

/// Power-of-two scalings: near underflow, the smallest normal number times 2^14 (2^-1008 in double,
/// 2^-112 in single; the subnormal spacing is then 2^-66 resp. 2^-37 of the largest entry, below
/// eps), and near overflow, the largest power of two below the overflow threshold divided by 2^20
/// (2^1004 resp. 2^108: room for the growth of the factorizations and for sums of n entries).
/// Both exponents are even, so the Cholesky factor scales by exactly 2^(e/2).
template <class T>
std::vector<int> scale_exponents() {
    return {std::numeric_limits<T>::min_exponent - 1 + 14, std::numeric_limits<T>::max_exponent - 20};
}

/// s = 2^e applied in place; A then holds exactly the scaled matrix, and `base` (if given) is
/// replaced by A / s, which differs from the input only where s A fell below the normal range.
template <class T>
void scale(HostMatrix<T>& A, int e, HostMatrix<T>* base = nullptr) {
    for (int j = 0; j < A.n; ++j)
        for (int i = 0; i < A.m; ++i) {
            A(i, j) = std::ldexp(A(i, j), e);
            if (base) (*base)(i, j) = std::ldexp(A(i, j), -e);
        }
}

// ---- checks ----------------------------------------------------------------------------------

/// ||A - Q R||_1 / (m ||A||_1 eps), R the upper triangle of F's top n rows, Q m x n.
template <class T>
double qr_residual(const HostMatrix<T>& A, const HostMatrix<T>& F, const HostMatrix<T>& Q) {
    const int m = A.m, n = A.n;
    if (m == 0 || n == 0) return 0.0;
    HostMatrix<T> W(m, n, m);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) W(i, j) = Q(i, j);
    blas::trmm('R', 'U', 'N', 'N', m, n, T(1), F.ptr(), F.ld, W.ptr(), W.ld);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) W(i, j) -= A(i, j);
    const double diff = blas::lange('1', m, n, W.ptr(), W.ld), anorm = blas::lange('1', m, n, A.ptr(), A.ld);
    if (anorm == 0.0) return diff == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();  // A = 0: Q R must be 0
    return diff / (m * anorm * eps<T>());
}

/// ||I - Q^T Q||_1 / (m eps).
template <class T>
double orthogonality(const HostMatrix<T>& Q) {
    const int m = Q.m, q = Q.n;
    if (m == 0 || q == 0) return 0.0;
    HostMatrix<T> G(q, q, q);
    for (int j = 0; j < q; ++j)
        for (int i = 0; i < q; ++i) G(i, j) = i == j ? T(1) : T(0);
    blas::syrk('U', 'T', q, m, T(-1), Q.ptr(), Q.ld, T(1), G.ptr(), G.ld);
    return blas::lansy('1', 'U', q, G.ptr(), G.ld) / (m * eps<T>());
}

/// Least squares: max over the columns of ||A^T r||_2 / (||A||_F (||A||_F ||x||_2 + ||b||_2) max(m, n)
/// eps), r = b - A x, x = X's first n rows. Evaluated in double: a backward-stable solution passes
/// whatever the conditioning.
template <class T>
double ls_ratio(const HostMatrix<T>& A, const HostMatrix<T>& X, const HostMatrix<T>& B) {
    const int m = A.m, n = A.n;
    double worst = 0.0, afro = 0.0;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) afro += static_cast<double>(A(i, j)) * A(i, j);
    afro = std::sqrt(afro);
    for (int c = 0; c < B.n; ++c) {
        std::vector<double> r(static_cast<std::size_t>(m));
        double x2 = 0.0, b2 = 0.0, w2 = 0.0;
        for (int i = 0; i < m; ++i) r[i] = B(i, c), b2 += static_cast<double>(B(i, c)) * B(i, c);
        for (int j = 0; j < n; ++j) {
            x2 += static_cast<double>(X(j, c)) * X(j, c);
            for (int i = 0; i < m; ++i) r[i] -= static_cast<double>(A(i, j)) * X(j, c);
        }
        for (int j = 0; j < n; ++j) {
            double w = 0.0;
            for (int i = 0; i < m; ++i) w += static_cast<double>(A(i, j)) * r[i];
            w2 += w * w;
        }
        const double ratio =
            std::sqrt(w2) / (afro * (afro * std::sqrt(x2) + std::sqrt(b2)) * std::max(m, n) * eps<T>());
        if (std::isnan(ratio)) return ratio;
        worst = std::max(worst, ratio);
    }
    return worst;
}

/// Every pivot of a finished getrf is in range: GETRF's ipiv[j] in [j + 1, rows of the tile],
/// TSTRF's ipiv[j] = j + 1 (no swap) or in [K + 1, K + rows of the lower tile] (K: the panel's
/// columns). Returns the number of pivots out of range.
template <class T>
int pivots_out_of_range(const TileMatrix<T>& A, const LuFactors<T>& F) {
    int bad = 0;
    for (int k = 0; k < F.nt(); ++k) {
        const std::vector<int> d = accuracy::read_pivots(F.diag_pivots(k));
        for (int j = 0; j < static_cast<int>(d.size()); ++j)
            if (d[j] < j + 1 || d[j] > A.tile_m(k)) ++bad;
        const int K = A.tile_n(k);
        for (int i = k + 1; i < F.mt(); ++i) {
            const std::vector<int> p = accuracy::read_pivots(F.pivots(i, k));
            for (int j = 0; j < static_cast<int>(p.size()); ++j)
                if (p[j] != j + 1 && (p[j] < K + 1 || p[j] > K + A.tile_m(i))) ++bad;
        }
    }
    return bad;
}

}  // namespace starfact::test::kinds
