// The batched module's host path: LAPACKE per matrix, matrices spread over threads, each on a
// single-threaded OpenBLAS. The per-matrix kernels also serve the batched codelet's CPU side.
#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "batched/batched.hpp"
#include "batched/detail.hpp"
#include "common/blas.hpp"

namespace starfact::batched {
namespace detail {

OneBlasThread::OneBlasThread() : previous_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
OneBlasThread::~OneBlasThread() { openblas_set_num_threads(previous_); }

namespace {
// LAPACK routines below that take a workspace, over float and double.
inline int geqrf_work(int m, int n, double* A, int lda, double* tau, double* work, int lwork) {
    return LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, m, n, A, lda, tau, work, lwork);
}
inline int geqrf_work(int m, int n, float* A, int lda, float* tau, float* work, int lwork) {
    return LAPACKE_sgeqrf_work(LAPACK_COL_MAJOR, m, n, A, lda, tau, work, lwork);
}
inline int ormqr_work(int m, int n, int k, const double* A, int lda, const double* tau, double* C, int ldc,
                      double* work, int lwork) {
    return LAPACKE_dormqr_work(LAPACK_COL_MAJOR, 'L', 'T', m, n, k, A, lda, tau, C, ldc, work, lwork);
}
inline int ormqr_work(int m, int n, int k, const float* A, int lda, const float* tau, float* C, int ldc, float* work,
                      int lwork) {
    return LAPACKE_sormqr_work(LAPACK_COL_MAJOR, 'L', 'T', m, n, k, A, lda, tau, C, ldc, work, lwork);
}

// LAPACK's blocked geqrf and ormqr use nb = 32 from ilaenv; 64 columns per block plus ormqr's
// T (65 x 64) always suffice for the blocked code, and any smaller lwork still works (narrower
// blocks). One buffer per thread, grown when a larger matrix comes: no allocation per matrix.
template <class T>
T* qr_work(int columns, int& lwork) {
    thread_local std::vector<T> work;
    const std::size_t need = static_cast<std::size_t>(std::max(1, columns)) * 64 + 65 * 64;
    if (work.size() < need) work.resize(need);
    lwork = static_cast<int>(work.size());
    return work.data();
}
}  // namespace

template <class T>
int getrf_one(int n, T* A, int lda, int* ipiv) {
    return blas::getrf(n, n, A, lda, ipiv);
}

template <class T>
void getrs_one(int n, int nrhs, const T* A, int lda, const int* ipiv, T* B, int ldb) {
    blas::getrs('N', n, nrhs, A, lda, ipiv, B, ldb);
}

template <class T>
int potrf_one(Uplo uplo, int n, T* A, int lda) {
    const int info = blas::potrf(uplo_char(uplo), n, A, lda);
    if (info != 0) return info;
    // OpenBLAS's potrf takes a NaN pivot for a positive one; LAPACK's reference stops there. The
    // first NaN on the factor's diagonal is that pivot.
    for (int j = 0; j < n; ++j)
        if (std::isnan(A[j + static_cast<std::size_t>(j) * lda])) return j + 1;
    return 0;
}

template <class T>
void potrs_one(Uplo uplo, int n, int nrhs, const T* A, int lda, T* B, int ldb) {
    blas::potrs(uplo_char(uplo), n, nrhs, A, lda, B, ldb);
}

template <class T>
void geqrf_one(int m, int n, T* A, int lda, T* tau) {
    int lwork = 0;
    T* work = qr_work<T>(n, lwork);
    geqrf_work(m, n, A, lda, tau, work, lwork);
}

template <class T>
int gels_one(int m, int n, int nrhs, T* A, int lda, T* tau, T* B, int ldb) {
    geqrf_one(m, n, A, lda, tau);
    // LAPACK's trtrs refuses an exactly zero diagonal entry of R; we look before B changes.
    for (int k = 0; k < n; ++k)
        if (A[k + static_cast<std::size_t>(k) * lda] == T(0)) return k + 1;
    int lwork = 0;
    T* work = qr_work<T>(nrhs, lwork);
    ormqr_work(m, nrhs, n, A, lda, tau, B, ldb, work, lwork);
    blas::trsm('L', 'U', 'N', 'N', n, nrhs, T(1), A, lda, B, ldb);
    return 0;
}

}  // namespace detail

namespace {
using detail::Op;
using detail::Problem;

// Matrix b of either form: the strided base plus b * stride, or the b-th pointer.
template <class P>
struct Batch {
    P base;
    long long stride;
    P operator[](int b) const { return batch_matrix(base, stride, b); }
};
template <class P>
struct PointerBatch {
    const P* array;
    P operator[](int b) const { return array[b]; }
};

template <class P>
Batch<P> strided(P base, long long stride) {
    return {base, stride};
}
template <class P>
PointerBatch<P> pointers(const P* array) {
    return {array};
}

template <class T, class BatchA>
int getrf_host(const Problem& p, BatchA A, int* ipiv, int* info, const HostOptions& opt) {
    if (detail::nothing_to_do(p)) {
        detail::zero_info(info, p.count);
        return 0;
    }
    detail::for_each_matrix(p.count, opt.threads,
                            [&](int b) { info[b] = detail::getrf_one(p.n, A[b], p.lda, batch_matrix(ipiv, p.n, b)); });
    return detail::count_failures(info, p.count);
}

template <class T, class BatchA, class BatchB>
void getrs_host(const Problem& p, BatchA A, const int* ipiv, BatchB B, const HostOptions& opt) {
    if (detail::nothing_to_do(p)) return;
    detail::for_each_matrix(p.count, opt.threads, [&](int b) {
        detail::getrs_one<T>(p.n, p.nrhs, A[b], p.lda, batch_matrix(ipiv, p.n, b), B[b], p.ldb);
    });
}

template <class T, class BatchA>
int potrf_host(const Problem& p, Uplo uplo, BatchA A, int* info, const HostOptions& opt) {
    if (detail::nothing_to_do(p)) {
        detail::zero_info(info, p.count);
        return 0;
    }
    detail::for_each_matrix(p.count, opt.threads,
                            [&](int b) { info[b] = detail::potrf_one<T>(uplo, p.n, A[b], p.lda); });
    return detail::count_failures(info, p.count);
}

template <class T, class BatchA, class BatchB>
void potrs_host(const Problem& p, Uplo uplo, BatchA A, BatchB B, const HostOptions& opt) {
    if (detail::nothing_to_do(p)) return;
    detail::for_each_matrix(p.count, opt.threads,
                            [&](int b) { detail::potrs_one<T>(uplo, p.n, p.nrhs, A[b], p.lda, B[b], p.ldb); });
}

template <class T, class BatchA>
void geqrf_host(const Problem& p, BatchA A, T* tau, const HostOptions& opt) {
    if (detail::nothing_to_do(p)) return;
    detail::for_each_matrix(p.count, opt.threads,
                            [&](int b) { detail::geqrf_one<T>(p.m, p.n, A[b], p.lda, batch_matrix(tau, p.n, b)); });
}

template <class T, class BatchA, class BatchB>
int gels_host(const Problem& p, BatchA A, T* tau, BatchB B, int* info, const HostOptions& opt) {
    if (detail::nothing_to_do(p)) {
        detail::zero_info(info, p.count);
        return 0;
    }
    detail::for_each_matrix(p.count, opt.threads, [&](int b) {
        info[b] = detail::gels_one<T>(p.m, p.n, p.nrhs, A[b], p.lda, batch_matrix(tau, p.n, b), B[b], p.ldb);
    });
    return detail::count_failures(info, p.count);
}

// The Problem of each call, and the host check of pointer batches' entries.
using detail::problem;

template <class P>
void check_entries(const Problem& p, const P* array, const char* name) {
    if (p.count > 0 && p.n > 0) detail::check_host_pointers(reinterpret_cast<const void* const*>(array), p.count, name);
}
}  // namespace

// ---- getrf ----------------------------------------------------------------------------------
template <class T>
int getrf(int n, T* A, int lda, long long strideA, int* ipiv, int* info, int count, const HostOptions& opt) {
    Problem p = problem(Op::getrf, n, n, 0, count, lda, 1, true);
    p.strideA = strideA;
    p.A = A;
    p.ipiv = ipiv;
    p.info = info;
    detail::check(p);
    return getrf_host<T>(p, strided(A, strideA), ipiv, info, opt);
}

template <class T>
int getrf(int n, T* const* A, int lda, int* ipiv, int* info, int count, const HostOptions& opt) {
    Problem p = problem(Op::getrf, n, n, 0, count, lda, 1, false);
    p.A = A;
    p.ipiv = ipiv;
    p.info = info;
    detail::check(p);
    check_entries(p, A, "A");
    return getrf_host<T>(p, pointers(A), ipiv, info, opt);
}

// ---- getrs ----------------------------------------------------------------------------------
template <class T>
void getrs(int n, int nrhs, const T* A, int lda, long long strideA, const int* ipiv, T* B, int ldb, long long strideB,
           int count, const HostOptions& opt) {
    Problem p = problem(Op::getrs, n, n, nrhs, count, lda, ldb, true);
    p.strideA = strideA;
    p.strideB = strideB;
    p.A = A;
    p.B = B;
    p.ipiv = ipiv;
    detail::check(p);
    getrs_host<T>(p, strided(A, strideA), ipiv, strided(B, strideB), opt);
}

template <class T>
void getrs(int n, int nrhs, const T* const* A, int lda, const int* ipiv, T* const* B, int ldb, int count,
           const HostOptions& opt) {
    Problem p = problem(Op::getrs, n, n, nrhs, count, lda, ldb, false);
    p.A = A;
    p.B = B;
    p.ipiv = ipiv;
    detail::check(p);
    check_entries(p, A, "A");
    if (nrhs > 0) check_entries(p, B, "B");
    getrs_host<T>(p, pointers(A), ipiv, pointers(B), opt);
}

// ---- potrf ----------------------------------------------------------------------------------
template <class T>
int potrf(Uplo uplo, int n, T* A, int lda, long long strideA, int* info, int count, const HostOptions& opt) {
    Problem p = problem(Op::potrf, n, n, 0, count, lda, 1, true);
    p.strideA = strideA;
    p.A = A;
    p.info = info;
    detail::check(p);
    return potrf_host<T>(p, uplo, strided(A, strideA), info, opt);
}

template <class T>
int potrf(Uplo uplo, int n, T* const* A, int lda, int* info, int count, const HostOptions& opt) {
    Problem p = problem(Op::potrf, n, n, 0, count, lda, 1, false);
    p.A = A;
    p.info = info;
    detail::check(p);
    check_entries(p, A, "A");
    return potrf_host<T>(p, uplo, pointers(A), info, opt);
}

// ---- potrs ----------------------------------------------------------------------------------
template <class T>
void potrs(Uplo uplo, int n, int nrhs, const T* A, int lda, long long strideA, T* B, int ldb, long long strideB,
           int count, const HostOptions& opt) {
    Problem p = problem(Op::potrs, n, n, nrhs, count, lda, ldb, true);
    p.strideA = strideA;
    p.strideB = strideB;
    p.A = A;
    p.B = B;
    detail::check(p);
    potrs_host<T>(p, uplo, strided(A, strideA), strided(B, strideB), opt);
}

template <class T>
void potrs(Uplo uplo, int n, int nrhs, const T* const* A, int lda, T* const* B, int ldb, int count,
           const HostOptions& opt) {
    Problem p = problem(Op::potrs, n, n, nrhs, count, lda, ldb, false);
    p.A = A;
    p.B = B;
    detail::check(p);
    check_entries(p, A, "A");
    if (nrhs > 0) check_entries(p, B, "B");
    potrs_host<T>(p, uplo, pointers(A), pointers(B), opt);
}

// ---- geqrf ----------------------------------------------------------------------------------
template <class T>
void geqrf(int m, int n, T* A, int lda, long long strideA, T* tau, int count, const HostOptions& opt) {
    Problem p = problem(Op::geqrf, m, n, 0, count, lda, 1, true);
    p.strideA = strideA;
    p.A = A;
    p.tau = tau;
    detail::check(p);
    geqrf_host<T>(p, strided(A, strideA), tau, opt);
}

template <class T>
void geqrf(int m, int n, T* const* A, int lda, T* tau, int count, const HostOptions& opt) {
    Problem p = problem(Op::geqrf, m, n, 0, count, lda, 1, false);
    p.A = A;
    p.tau = tau;
    detail::check(p);
    check_entries(p, A, "A");
    geqrf_host<T>(p, pointers(A), tau, opt);
}

// ---- gels -----------------------------------------------------------------------------------
template <class T>
int gels(int m, int n, int nrhs, T* A, int lda, long long strideA, T* tau, T* B, int ldb, long long strideB, int* info,
         int count, const HostOptions& opt) {
    Problem p = problem(Op::gels, m, n, nrhs, count, lda, ldb, true);
    p.strideA = strideA;
    p.strideB = strideB;
    p.A = A;
    p.B = B;
    p.tau = tau;
    p.info = info;
    detail::check(p);
    return gels_host<T>(p, strided(A, strideA), tau, strided(B, strideB), info, opt);
}

template <class T>
int gels(int m, int n, int nrhs, T* const* A, int lda, T* tau, T* const* B, int ldb, int* info, int count,
         const HostOptions& opt) {
    Problem p = problem(Op::gels, m, n, nrhs, count, lda, ldb, false);
    p.A = A;
    p.B = B;
    p.tau = tau;
    p.info = info;
    detail::check(p);
    check_entries(p, A, "A");
    if (nrhs > 0) check_entries(p, B, "B");
    return gels_host<T>(p, pointers(A), tau, pointers(B), info, opt);
}

template int getrf<float>(int, float*, int, long long, int*, int*, int, const HostOptions&);
template int getrf<float>(int, float* const*, int, int*, int*, int, const HostOptions&);
template void getrs<float>(int, int, const float*, int, long long, const int*, float*, int, long long, int,
                           const HostOptions&);
template void getrs<float>(int, int, const float* const*, int, const int*, float* const*, int, int, const HostOptions&);
template int potrf<float>(Uplo, int, float*, int, long long, int*, int, const HostOptions&);
template int potrf<float>(Uplo, int, float* const*, int, int*, int, const HostOptions&);
template void potrs<float>(Uplo, int, int, const float*, int, long long, float*, int, long long, int,
                           const HostOptions&);
template void potrs<float>(Uplo, int, int, const float* const*, int, float* const*, int, int, const HostOptions&);
template void geqrf<float>(int, int, float*, int, long long, float*, int, const HostOptions&);
template void geqrf<float>(int, int, float* const*, int, float*, int, const HostOptions&);
template int gels<float>(int, int, int, float*, int, long long, float*, float*, int, long long, int*, int,
                         const HostOptions&);
template int gels<float>(int, int, int, float* const*, int, float*, float* const*, int, int*, int, const HostOptions&);
template int detail::getrf_one<float>(int, float*, int, int*);
template void detail::getrs_one<float>(int, int, const float*, int, const int*, float*, int);
template int detail::potrf_one<float>(Uplo, int, float*, int);
template void detail::potrs_one<float>(Uplo, int, int, const float*, int, float*, int);
template void detail::geqrf_one<float>(int, int, float*, int, float*);
template int detail::gels_one<float>(int, int, int, float*, int, float*, float*, int);

template int getrf<double>(int, double*, int, long long, int*, int*, int, const HostOptions&);
template int getrf<double>(int, double* const*, int, int*, int*, int, const HostOptions&);
template void getrs<double>(int, int, const double*, int, long long, const int*, double*, int, long long, int,
                            const HostOptions&);
template void getrs<double>(int, int, const double* const*, int, const int*, double* const*, int, int,
                            const HostOptions&);
template int potrf<double>(Uplo, int, double*, int, long long, int*, int, const HostOptions&);
template int potrf<double>(Uplo, int, double* const*, int, int*, int, const HostOptions&);
template void potrs<double>(Uplo, int, int, const double*, int, long long, double*, int, long long, int,
                            const HostOptions&);
template void potrs<double>(Uplo, int, int, const double* const*, int, double* const*, int, int, const HostOptions&);
template void geqrf<double>(int, int, double*, int, long long, double*, int, const HostOptions&);
template void geqrf<double>(int, int, double* const*, int, double*, int, const HostOptions&);
template int gels<double>(int, int, int, double*, int, long long, double*, double*, int, long long, int*, int,
                          const HostOptions&);
template int gels<double>(int, int, int, double* const*, int, double*, double* const*, int, int*, int,
                          const HostOptions&);
template int detail::getrf_one<double>(int, double*, int, int*);
template void detail::getrs_one<double>(int, int, const double*, int, const int*, double*, int);
template int detail::potrf_one<double>(Uplo, int, double*, int);
template void detail::potrs_one<double>(Uplo, int, int, const double*, int, double*, int);
template void detail::geqrf_one<double>(int, int, double*, int, double*);
template int detail::gels_one<double>(int, int, int, double*, int, double*, double*, int);

}  // namespace starfact::batched
