// CUDA tile kernels: thin, checked wrappers over cuBLAS and cuSOLVER's 64-bit API.
#include "codelets/cuda/tile_kernels.hpp"

#include "common/cuda_blas.hpp"

namespace starfact::cuda {
namespace {
using cublas::data_type;

cublasFillMode_t fill(char uplo) { return (uplo == 'U' || uplo == 'u') ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER; }
cublasOperation_t op(char t) { return (t == 'T' || t == 't' || t == 'C' || t == 'c') ? CUBLAS_OP_T : CUBLAS_OP_N; }
cublasSideMode_t side_mode(char s) { return (s == 'R' || s == 'r') ? CUBLAS_SIDE_RIGHT : CUBLAS_SIDE_LEFT; }
cublasDiagType_t diag_type(char d) { return (d == 'U' || d == 'u') ? CUBLAS_DIAG_UNIT : CUBLAS_DIAG_NON_UNIT; }
}  // namespace

template <class T>
std::size_t potrf_workspace(cusolverDnHandle_t h, cusolverDnParams_t p, char uplo, TileView<T> A) {
    std::size_t device_bytes = 0, host_bytes = 0;
    if (cusolverDnXpotrf_bufferSize(h, p, fill(uplo), A.n, data_type<T>(), A.data, A.ld, data_type<T>(),
                                    &device_bytes, &host_bytes) != CUSOLVER_STATUS_SUCCESS)
        return 0;
    return device_bytes;
}

template <class T>
cusolverStatus_t potrf(cusolverDnHandle_t h, cusolverDnParams_t p, char uplo, TileView<T> A, int* dinfo, void* work,
                       std::size_t work_bytes) {
    return cusolverDnXpotrf(h, p, fill(uplo), A.n, data_type<T>(), A.data, A.ld, data_type<T>(), work, work_bytes,
                            nullptr, 0, dinfo);
}

template <class T>
cublasStatus_t trsm(cublasHandle_t h, char side, char uplo, char transa, char diag, T alpha, TileView<const T> A,
                    TileView<T> B) {
    if (B.empty()) return CUBLAS_STATUS_SUCCESS;
    return cublas::trsm(h, side_mode(side), fill(uplo), op(transa), diag_type(diag), B.m, B.n, &alpha, A.data, A.ld,
                        B.data, B.ld);
}

template <class T>
cublasStatus_t syrk(cublasHandle_t h, char uplo, char trans, T alpha, TileView<const T> A, T beta, TileView<T> C) {
    if (C.empty()) return CUBLAS_STATUS_SUCCESS;
    const int k = op(trans) == CUBLAS_OP_N ? A.n : A.m;
    return cublas::syrk(h, fill(uplo), op(trans), C.n, k, &alpha, A.data, A.ld, &beta, C.data, C.ld);
}

template <class T>
cublasStatus_t gemm(cublasHandle_t h, char transa, char transb, T alpha, TileView<const T> A, TileView<const T> B,
                    T beta, TileView<T> C) {
    if (C.empty()) return CUBLAS_STATUS_SUCCESS;
    const int k = op(transa) == CUBLAS_OP_N ? A.n : A.m;
    return cublas::gemm(h, op(transa), op(transb), C.m, C.n, k, &alpha, A.data, A.ld, B.data, B.ld, &beta, C.data,
                        C.ld);
}

template std::size_t potrf_workspace<float>(cusolverDnHandle_t, cusolverDnParams_t, char, TileView<float>);
template cusolverStatus_t potrf<float>(cusolverDnHandle_t, cusolverDnParams_t, char, TileView<float>, int*, void*, std::size_t);
template cublasStatus_t trsm<float>(cublasHandle_t, char, char, char, char, float, TileView<const float>, TileView<float>);
template cublasStatus_t syrk<float>(cublasHandle_t, char, char, float, TileView<const float>, float, TileView<float>);
template cublasStatus_t gemm<float>(cublasHandle_t, char, char, float, TileView<const float>, TileView<const float>, float, TileView<float>);
template std::size_t potrf_workspace<double>(cusolverDnHandle_t, cusolverDnParams_t, char, TileView<double>);
template cusolverStatus_t potrf<double>(cusolverDnHandle_t, cusolverDnParams_t, char, TileView<double>, int*, void*, std::size_t);
template cublasStatus_t trsm<double>(cublasHandle_t, char, char, char, char, double, TileView<const double>, TileView<double>);
template cublasStatus_t syrk<double>(cublasHandle_t, char, char, double, TileView<const double>, double, TileView<double>);
template cublasStatus_t gemm<double>(cublasHandle_t, char, char, double, TileView<const double>, TileView<const double>, double, TileView<double>);

}  // namespace starfact::cuda
