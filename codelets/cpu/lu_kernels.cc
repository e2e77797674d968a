// CPU kernels of tile LU with incremental pivoting (GETRF, GESSM, TSTRF, SSSSM) over LAPACKE/CBLAS.
#include "codelets/cpu/lu_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include "common/blas.hpp"

namespace starfact::cpu {

namespace {

// common/blas.hpp has no laswp; the _work entry point skips LAPACKE's NaN scan, which would
// refuse the NaN tiles that the kernels must go through without crashing.
void laswp_work(int n, double* A, int lda, int k1, int k2, const int* ipiv) {
    LAPACKE_dlaswp_work(LAPACK_COL_MAJOR, n, A, lda, k1, k2, ipiv, 1);
}
void laswp_work(int n, float* A, int lda, int k1, int k2, const int* ipiv) {
    LAPACKE_slaswp_work(LAPACK_COL_MAJOR, n, A, lda, k1, k2, ipiv, 1);
}

template <class T>
void swap_rows(TileView<T> X, int i, TileView<T> Y, int r) {
    for (int c = 0; c < X.n; ++c) std::swap(X(i, c), Y(r, c));
}

/// Partial-pivoting LU of the (b + m) x b panel [W; P], W the b x b top (upper triangular on
/// entry, its strict lower part zero), P = A(:, J) in place. Pivot candidates for column jj
/// are W's row jj and P's rows only: W's rows below jj are exact zeros in that column for
/// finite data, so getrf would never pick them; but a NaN pivot turns them into NaN (0 / NaN)
/// and OpenBLAS's getrf of such a stack then does pick other U rows, which the pivot encoding
/// cannot express. A NaN candidate never wins a > comparison, so every pivot is in range.
/// Writes ipiv[jj] in the header's encoding shifted by j0 and returns the first zero pivot
/// (1-based within the panel) or 0.
template <class T>
int panel_lu(TileView<T> W, TileView<T> P, int j0, int K, int* ipiv) {
    const int b = W.n, m = P.m;
    int info = 0;
    for (int jj = 0; jj < b; ++jj) {
        int r = -1;
        T amax = std::abs(W(jj, jj));
        for (int i = 0; i < m; ++i)
            if (std::abs(P(i, jj)) > amax) amax = std::abs(P(i, jj)), r = i;
        if (r >= 0) {
            // Whole panel rows, the multipliers left of jj included: L1/L2 end up in the final
            // row order within the block, which is what SSSSM's swaps-then-solve expects.
            for (int c = 0; c < b; ++c) std::swap(W(jj, c), P(r, c));
            ipiv[jj] = K + r + 1;
        } else {
            ipiv[jj] = j0 + jj + 1;
        }
        const T piv = W(jj, jj);
        if (piv == T(0)) {
            // As LAPACK: record the first zero pivot, leave the column unscaled and go on.
            if (info == 0) info = jj + 1;
        } else if (std::abs(piv) >= std::numeric_limits<T>::min()) {
            const T rpiv = T(1) / piv;
            for (int i = 0; i < m; ++i) P(i, jj) *= rpiv;
        } else {
            // The reciprocal of a subnormal pivot overflows; divide as LAPACK's getf2 does.
            for (int i = 0; i < m; ++i) P(i, jj) /= piv;
        }
        // W's rows below jj have zero multipliers: only P's rows change.
        for (int c = jj + 1; c < b; ++c) {
            const T u = W(jj, c);
            for (int i = 0; i < m; ++i) P(i, c) -= P(i, jj) * u;
        }
    }
    return info;
}

}  // namespace

template <class T>
int getrf(TileView<T> A, int* ipiv, int /*ib: LAPACK's getrf blocks on its own*/) {
    const int k = std::min(A.m, A.n);
    if (k == 0) return 0;
    const int info = blas::getrf(A.m, A.n, A.data, A.ld, ipiv);
    // LAPACK promises j + 1 <= ipiv[j] <= m, but an optimized i?amax may mishandle NaN
    // (OpenBLAS 0.3.21 stays in range on NaN/Inf tiles; other builds need not), and one pivot
    // out of range would make every later laswp on this tile row read out of bounds. Only NaN
    // data can trip this, and its factors are meaningless anyway.
    for (int j = 0; j < k; ++j)
        if (ipiv[j] < j + 1 || ipiv[j] > A.m) ipiv[j] = j + 1;
    return info;
}

template <class T>
void gessm(const int* ipiv, TileView<const T> D, TileView<T> A, int /*ib*/) {
    const int m = A.m, K = std::min(A.m, D.n);
    if (K == 0 || A.n == 0) return;
    // GETRF's L holds its rows in their final (all swaps applied) order, so all K swaps go
    // first; a swap-solve-update loop per ib block would pair rows with the wrong multipliers.
    laswp_work(A.n, A.data, A.ld, 1, K, ipiv);
    blas::trsm('L', 'L', 'N', 'U', K, A.n, T(1), D.data, D.ld, A.data, A.ld);
    if (m > K) blas::gemm('N', 'N', m - K, A.n, K, T(-1), &D(K, 0), D.ld, A.data, A.ld, T(1), &A(K, 0), A.ld);
}

template <class T>
int tstrf(TileView<T> U, TileView<T> A, TileView<T> L, int* ipiv, int ib, bool inverse) {
    const int K = A.n, m = A.m;
    if (K == 0) return 0;
    const int inverse_row = ib;  // where the variant's inverses start: the ib asked for, unclamped
    ib = std::max(1, std::min(ib, K));
    // The top b x b of each panel lives in a workspace, not in U: its strict lower part holds
    // L1 while the panel is factored, and U's strict lower part (GETRF's L) must survive.
    thread_local std::vector<T> work;
    work.resize(static_cast<std::size_t>(ib) * static_cast<std::size_t>(ib));
    int info = 0;
    for (int j0 = 0; j0 < K; j0 += ib) {
        const int b = std::min(ib, K - j0);
        const TileView<T> W{work.data(), b, b, b};
        for (int c = 0; c < b; ++c)
            for (int i = 0; i < b; ++i) W(i, c) = i <= c ? U(j0 + i, j0 + c) : T(0);
        const int pinfo = panel_lu(W, A.sub(0, j0, m, b), j0, K, ipiv + j0);
        if (pinfo != 0 && info == 0) info = j0 + pinfo;
        for (int c = 0; c < b; ++c)
            for (int i = 0; i < b; ++i) {
                if (i <= c)
                    U(j0 + i, j0 + c) = W(i, c);
                else
                    L(i, j0 + c) = W(i, c);
            }
        if (inverse) {
            const TileView<T> X = L.sub(inverse_row, j0, b, b);
            for (int c = 0; c < b; ++c)
                for (int i = 0; i < b; ++i) X(i, c) = i > c ? W(i, c) : (i == c ? T(1) : T(0));
            blas::trtri('L', 'U', b, X.data, X.ld);  // unit triangular: cannot fail
        }
        const int nr = K - j0 - b;
        if (nr == 0) continue;
        // The columns right of J, as SSSSM would update them (A's columns left of J keep their
        // row order: their multipliers were used before this block's swaps).
        const TileView<T> Ur = U.sub(j0, j0 + b, b, nr), Ar = A.sub(0, j0 + b, m, nr);
        for (int jj = 0; jj < b; ++jj)
            if (ipiv[j0 + jj] > K) swap_rows(Ur, jj, Ar, ipiv[j0 + jj] - K - 1);
        blas::trsm('L', 'L', 'N', 'U', b, nr, T(1), W.data, W.ld, Ur.data, Ur.ld);
        if (m > 0) blas::gemm('N', 'N', m, nr, b, T(-1), &A(0, j0), A.ld, Ur.data, Ur.ld, T(1), Ar.data, Ar.ld);
    }
    return info;
}

template <class T>
void ssssm(TileView<T> A1, TileView<T> A2, TileView<const T> L, TileView<const T> AL, const int* ipiv, int ib) {
    const int K = AL.n, m = A2.m, n = A1.n;
    if (K == 0 || n == 0) return;
    ib = std::max(1, std::min(ib, K));
    for (int j0 = 0; j0 < K; j0 += ib) {
        const int b = std::min(ib, K - j0);
        const TileView<T> A1J = A1.sub(j0, 0, b, n);
        // Only A2's rows can move up (TSTRF's encoding): any other value means "no swap".
        for (int jj = 0; jj < b; ++jj)
            if (ipiv[j0 + jj] > K) swap_rows(A1J, jj, A2, ipiv[j0 + jj] - K - 1);
        blas::trsm('L', 'L', 'N', 'U', b, n, T(1), &L(0, j0), L.ld, A1J.data, A1J.ld);
        if (m > 0) blas::gemm('N', 'N', m, n, b, T(-1), &AL(0, j0), AL.ld, A1J.data, A1J.ld, T(1), A2.data, A2.ld);
    }
}

template int getrf<float>(TileView<float>, int*, int);
template int getrf<double>(TileView<double>, int*, int);
template void gessm<float>(const int*, TileView<const float>, TileView<float>, int);
template void gessm<double>(const int*, TileView<const double>, TileView<double>, int);
template int tstrf<float>(TileView<float>, TileView<float>, TileView<float>, int*, int, bool);
template int tstrf<double>(TileView<double>, TileView<double>, TileView<double>, int*, int, bool);
template void ssssm<float>(TileView<float>, TileView<float>, TileView<const float>, TileView<const float>,
                           const int*, int);
template void ssssm<double>(TileView<double>, TileView<double>, TileView<const double>, TileView<const double>,
                            const int*, int);

}  // namespace starfact::cpu
