// Pure CPU tile kernels (OpenBLAS/LAPACKE) on TileView: no StarPU, unit-testable alone.
#pragma once

#include "common/blas.hpp"
#include "common/tile_view.hpp"

namespace starfact::cpu {

/// Cholesky of a tile: A = L L^T (uplo 'L') or U^T U ('U'). Returns LAPACK's info:
/// 0, or k > 0 when the leading minor of order k is not positive definite.
template <class T>
int potrf(char uplo, TileView<T> A) {
    if (A.n == 0) return 0;
    const int info = blas::potrf(uplo, A.n, A.data, A.ld);
    if (info != 0) return info;
    // OpenBLAS does not test pivots for NaN as reference LAPACK does (ajj <= 0 or NaN). A NaN
    // anywhere in the leading part reaches the diagonal of the factor at LAPACK's column.
    for (int j = 0; j < A.n; ++j)
        if (A(j, j) != A(j, j)) return j + 1;
    return 0;
}

/// B = alpha op(A)^{-1} B (side 'L') or alpha B op(A)^{-1} (side 'R'), A triangular.
template <class T>
void trsm(char side, char uplo, char transa, char diag, T alpha, TileView<const T> A, TileView<T> B) {
    if (B.empty()) return;
    blas::trsm(side, uplo, transa, diag, B.m, B.n, alpha, A.data, A.ld, B.data, B.ld);
}

/// C = alpha A A^T + beta C (trans 'N') or alpha A^T A + beta C ('T'); only the uplo triangle.
template <class T>
void syrk(char uplo, char trans, T alpha, TileView<const T> A, T beta, TileView<T> C) {
    if (C.empty()) return;
    const int k = (trans == 'N' || trans == 'n') ? A.n : A.m;
    blas::syrk(uplo, trans, C.n, k, alpha, A.data, A.ld, beta, C.data, C.ld);
}

/// C = alpha op(A) op(B) + beta C.
template <class T>
void gemm(char transa, char transb, T alpha, TileView<const T> A, TileView<const T> B, T beta, TileView<T> C) {
    if (C.empty()) return;
    const int k = (transa == 'N' || transa == 'n') ? A.n : A.m;
    blas::gemm(transa, transb, C.m, C.n, k, alpha, A.data, A.ld, B.data, B.ld, beta, C.data, C.ld);
}

}  // namespace starfact::cpu
