// CPU kernels of tile QR (GEQRT, UNMQR, TSQRT, TSMQR, TTQRT, TTMQR) over LAPACKE.
#include "codelets/cpu/qr_kernels.hpp"

#include <lapacke.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace starfact::cpu {

namespace {

// common/blas.hpp has no compact-WY QR routines; the _work entry points skip LAPACKE's NaN
// scan, which would refuse NaN tiles that the kernels must go through without crashing.
int geqrt_work(int m, int n, int nb, double* a, int lda, double* t, int ldt, double* work) {
    return LAPACKE_dgeqrt_work(LAPACK_COL_MAJOR, m, n, nb, a, lda, t, ldt, work);
}
int geqrt_work(int m, int n, int nb, float* a, int lda, float* t, int ldt, float* work) {
    return LAPACKE_sgeqrt_work(LAPACK_COL_MAJOR, m, n, nb, a, lda, t, ldt, work);
}
int gemqrt_work(char side, char trans, int m, int n, int k, int nb, const double* v, int ldv, const double* t, int ldt,
                double* c, int ldc, double* work) {
    return LAPACKE_dgemqrt_work(LAPACK_COL_MAJOR, side, trans, m, n, k, nb, v, ldv, t, ldt, c, ldc, work);
}
int gemqrt_work(char side, char trans, int m, int n, int k, int nb, const float* v, int ldv, const float* t, int ldt,
                float* c, int ldc, float* work) {
    return LAPACKE_sgemqrt_work(LAPACK_COL_MAJOR, side, trans, m, n, k, nb, v, ldv, t, ldt, c, ldc, work);
}
int tpqrt_work(int m, int n, int l, int nb, double* a, int lda, double* b, int ldb, double* t, int ldt, double* work) {
    return LAPACKE_dtpqrt_work(LAPACK_COL_MAJOR, m, n, l, nb, a, lda, b, ldb, t, ldt, work);
}
int tpqrt_work(int m, int n, int l, int nb, float* a, int lda, float* b, int ldb, float* t, int ldt, float* work) {
    return LAPACKE_stpqrt_work(LAPACK_COL_MAJOR, m, n, l, nb, a, lda, b, ldb, t, ldt, work);
}
int tpmqrt_work(char side, char trans, int m, int n, int k, int l, int nb, const double* v, int ldv, const double* t,
                int ldt, double* a, int lda, double* b, int ldb, double* work) {
    return LAPACKE_dtpmqrt_work(LAPACK_COL_MAJOR, side, trans, m, n, k, l, nb, v, ldv, t, ldt, a, lda, b, ldb, work);
}
int tpmqrt_work(char side, char trans, int m, int n, int k, int l, int nb, const float* v, int ldv, const float* t,
                int ldt, float* a, int lda, float* b, int ldb, float* work) {
    return LAPACKE_stpmqrt_work(LAPACK_COL_MAJOR, side, trans, m, n, k, l, nb, v, ldv, t, ldt, a, lda, b, ldb, work);
}

/// A per-thread workspace of nb * n entries (what all four LAPACK routines ask for).
template <class T>
T* workspace(int nb, int n) {
    thread_local std::vector<T> work;
    work.resize(static_cast<std::size_t>(std::max(1, nb)) * static_cast<std::size_t>(std::max(1, n)));
    return work.data();
}

int clamp_ib(int ib, int k) { return std::max(1, std::min(ib, k)); }

}  // namespace

template <class T>
void geqrt(int ib, TileView<T> A, TileView<T> Tf) {
    const int k = std::min(A.m, A.n);
    if (k == 0) return;
    ib = clamp_ib(ib, k);
    geqrt_work(A.m, A.n, ib, A.data, A.ld, Tf.data, Tf.ld, workspace<T>(ib, A.n));
}

template <class T>
void unmqr(char /*side: only 'L'*/, char trans, int ib, TileView<const T> V, TileView<const T> Tf, TileView<T> C) {
    const int k = std::min(V.m, V.n);
    if (k == 0 || C.empty()) return;
    ib = clamp_ib(ib, k);
    const char tr = (trans == 'T' || trans == 't' || trans == 'C' || trans == 'c') ? 'T' : 'N';
    gemqrt_work('L', tr, C.m, C.n, k, ib, V.data, V.ld, Tf.data, Tf.ld, C.data, C.ld, workspace<T>(ib, C.n));
}

template <class T>
void tsqrt(int ib, TileView<T> R, TileView<T> A, TileView<T> Tf) {
    const int n = A.n;
    if (n == 0) return;
    ib = clamp_ib(ib, n);
    // dtpqrt (l = 0) reads and writes only R's upper triangle (rows i, columns i..n-1).
    tpqrt_work(A.m, n, 0, ib, R.data, R.ld, A.data, std::max(1, A.ld), Tf.data, Tf.ld, workspace<T>(ib, n));
}

template <class T>
void tsmqr(char trans, int ib, TileView<T> A1, TileView<T> A2, TileView<const T> V2, TileView<const T> Tf) {
    const int K = V2.n, n = A1.n;
    if (K == 0 || n == 0) return;
    ib = clamp_ib(ib, K);
    const char tr = (trans == 'T' || trans == 't' || trans == 'C' || trans == 'c') ? 'T' : 'N';
    tpmqrt_work('L', tr, A2.m, n, K, 0, ib, V2.data, std::max(1, V2.ld), Tf.data, Tf.ld, A1.data, A1.ld, A2.data,
                std::max(1, A2.ld), workspace<T>(ib, n));
}

template <class T>
void ttqrt(int ib, TileView<T> R, TileView<T> A, TileView<T> Tf) {
    const int n = A.n, m = std::min(A.m, n);
    if (n == 0 || m == 0) return;
    ib = clamp_ib(ib, n);
    // l = m: the whole m x n part of A is the upper trapezoid, so dtpqrt leaves A's strict lower
    // triangle (another GEQRT's reflectors) alone.
    tpqrt_work(m, n, m, ib, R.data, R.ld, A.data, std::max(1, A.ld), Tf.data, Tf.ld, workspace<T>(ib, n));
}

template <class T>
void ttmqr(char trans, int ib, TileView<T> A1, TileView<T> A2, TileView<const T> V2, TileView<const T> Tf) {
    const int K = V2.n, n = A1.n, m = std::min(V2.m, K);
    if (K == 0 || n == 0 || m == 0) return;
    ib = clamp_ib(ib, K);
    const char tr = (trans == 'T' || trans == 't' || trans == 'C' || trans == 'c') ? 'T' : 'N';
    tpmqrt_work('L', tr, m, n, K, m, ib, V2.data, std::max(1, V2.ld), Tf.data, Tf.ld, A1.data, A1.ld, A2.data,
                std::max(1, A2.ld), workspace<T>(ib, n));
}

template void geqrt<float>(int, TileView<float>, TileView<float>);
template void unmqr<float>(char, char, int, TileView<const float>, TileView<const float>, TileView<float>);
template void tsqrt<float>(int, TileView<float>, TileView<float>, TileView<float>);
template void tsmqr<float>(char, int, TileView<float>, TileView<float>, TileView<const float>, TileView<const float>);
template void geqrt<double>(int, TileView<double>, TileView<double>);
template void unmqr<double>(char, char, int, TileView<const double>, TileView<const double>, TileView<double>);
template void tsqrt<double>(int, TileView<double>, TileView<double>, TileView<double>);
template void tsmqr<double>(char, int, TileView<double>, TileView<double>, TileView<const double>,
                            TileView<const double>);

template void ttqrt<float>(int, TileView<float>, TileView<float>, TileView<float>);
template void ttmqr<float>(char, int, TileView<float>, TileView<float>, TileView<const float>, TileView<const float>);
template void ttqrt<double>(int, TileView<double>, TileView<double>, TileView<double>);
template void ttmqr<double>(char, int, TileView<double>, TileView<double>, TileView<const double>,
                            TileView<const double>);

}  // namespace starfact::cpu
