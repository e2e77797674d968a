// The batched module's public header: LU, Cholesky and QR of many small matrices at
// once, and their solves, for float and double, three ways: on the host (LAPACKE per matrix,
// spread over threads), directly on a user's CUDA stream (Context), and as StarPU tasks that
// the scheduler shares between CPU and GPU workers (namespace tasks).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "batched/uplo.hpp"

#ifdef STARFACT_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#endif

/// @file
/// Conventions (LAPACK's, for every matrix of a batch):
/// - Matrices are column-major. A strided batch is one array: matrix b starts at A + b * strideA
///   (strideA >= lda * n when count > 1). A pointer batch is an array of `count` pointers.
/// - ipiv: count * n ints, matrix b's 1-based pivots at ipiv + b * n (both forms).
/// - tau: count * n scalars (n = min(m, n), as m >= n), matrix b's at tau + b * n.
/// - info: count ints, every entry written: 0, or k > 0 when U(k,k) is exactly zero (getrf: the
///   factorization still completes), the leading minor of order k is not positive (potrf: the
///   factorization stops there), R(k,k) is exactly zero (gels: that matrix's B is left as it was).
///   Every failing matrix is reported, not only the first (failures()).
/// - A NaN or Inf in one matrix affects that matrix only.
/// - Arguments are checked before anything runs: a bad one throws starfact::ArgumentError
///   (common/error.hpp) naming it (argument() is "n", "lda", "strideA", "ipiv", ...), and no
///   data is read or written. count = 0 or n = 0 is a valid no-op (info set to 0 for n = 0).
///
/// Host example, 1000 LU factorizations of 32 x 32 matrices stored one after the other:
/// @code
/// std::vector<double> A(1000 * 32 * 32);  // filled by the caller
/// std::vector<int> ipiv(1000 * 32), info(1000);
/// int failed = starfact::batched::getrf(32, A.data(), 32, 32 * 32, ipiv.data(), info.data(), 1000);
/// for (auto f : starfact::batched::failures(info.data(), 1000)) std::printf("%d: %d\n", f.index, f.info);
/// @endcode

namespace starfact::batched {

/// A failing matrix of a batch: its index (0-based) and its info (> 0).
struct Failure {
    int index;
    int info;
};

/// Where matrix b of a strided batch starts, in elements from the batch's base: b * stride,
/// formed in 64 bits (it passes 2^31 as soon as the batch holds more than 2^31 elements, e.g.
/// 3 million matrices of 32 x 32, though every matrix's own indices fit in an int). The same
/// for matrix b's pivots (stride n) and tau (stride min(m, n)).
constexpr long long batch_offset(int b, long long stride) { return static_cast<long long>(b) * stride; }

/// Matrix b of a strided batch (or its pivots, its tau): base + batch_offset(b, stride).
template <class E>
constexpr E* batch_matrix(E* base, long long stride, int b) {
    return base + batch_offset(b, stride);
}

/// Every b with info[b] != 0, in increasing order (host array).
std::vector<Failure> failures(const int* info, int count);

/// Floating-point operations of one matrix (LAPACK's counts, LAWN 41), for rates and STARPU_FLOPS.
double getrf_flops(int n);
double potrf_flops(int n);
double geqrf_flops(int m, int n);
double getrs_flops(int n, int nrhs);
double potrs_flops(int n, int nrhs);
double gels_flops(int m, int n, int nrhs);

// =============================================================================================
// Host: host memory, each matrix factored by LAPACKE on one thread (single-threaded OpenBLAS
// while the call runs), matrices spread over `threads` threads. Synchronous.
// =============================================================================================

struct HostOptions {
    unsigned threads = 0;  ///< 0: every core
};

/// A[b] = P L U, L unit lower (LAPACK's getrf). Returns the number of failing matrices.
template <class T>
int getrf(int n, T* A, int lda, long long strideA, int* ipiv, int* info, int count, const HostOptions& opt = {});
template <class T>
int getrf(int n, T* const* A, int lda, int* ipiv, int* info, int count, const HostOptions& opt = {});

/// Solves A[b] X = B[b] (B[b] is n x nrhs, overwritten by X) from getrf's output.
template <class T>
void getrs(int n, int nrhs, const T* A, int lda, long long strideA, const int* ipiv, T* B, int ldb, long long strideB,
           int count, const HostOptions& opt = {});
template <class T>
void getrs(int n, int nrhs, const T* const* A, int lda, const int* ipiv, T* const* B, int ldb, int count,
           const HostOptions& opt = {});

/// A[b] = L L^T (lower) or U^T U (upper) in that triangle; the other one is neither read nor
/// written. Returns the number of failing matrices.
template <class T>
int potrf(Uplo uplo, int n, T* A, int lda, long long strideA, int* info, int count, const HostOptions& opt = {});
template <class T>
int potrf(Uplo uplo, int n, T* const* A, int lda, int* info, int count, const HostOptions& opt = {});

/// Solves A[b] X = B[b] from potrf's output (the same uplo).
template <class T>
void potrs(Uplo uplo, int n, int nrhs, const T* A, int lda, long long strideA, T* B, int ldb, long long strideB,
           int count, const HostOptions& opt = {});
template <class T>
void potrs(Uplo uplo, int n, int nrhs, const T* const* A, int lda, T* const* B, int ldb, int count,
           const HostOptions& opt = {});

/// A[b] = Q R (m >= n), LAPACK's geqrf: R on and above the diagonal, the reflectors below it,
/// their scalars in tau. QR cannot fail: there is no info.
template <class T>
void geqrf(int m, int n, T* A, int lda, long long strideA, T* tau, int count, const HostOptions& opt = {});
template <class T>
void geqrf(int m, int n, T* const* A, int lda, T* tau, int count, const HostOptions& opt = {});

/// Least squares min ||A[b] x - B[b](:, j)||_2 for every column (m >= n; LAPACK's gels
/// without its scaling): A[b] is overwritten by geqrf's factors and tau, B[b] (m x nrhs, ldb >= m)
/// by Q^T B[b] whose first n rows are then solved with R: they hold the solution, rows n..m-1
/// the components of the residual. info[b] = k when R(k,k) is exactly zero (rank deficient):
/// B[b] is then left as it was. Returns the number of failing matrices.
template <class T>
int gels(int m, int n, int nrhs, T* A, int lda, long long strideA, T* tau, T* B, int ldb, long long strideB, int* info,
         int count, const HostOptions& opt = {});
template <class T>
int gels(int m, int n, int nrhs, T* const* A, int lda, T* tau, T* const* B, int ldb, int* info, int count,
         const HostOptions& opt = {});

// =============================================================================================
// StarPU tasks: a strided batch in host memory cut into slices, one task of the batched codelet
// per slice (CPU implementation: LAPACKE over the slice; CUDA: our batched kernels on the
// worker's stream), placed by the scheduler from its performance models. Needs a started
// starfact::Runtime. Synchronous: returns after every task ended and the data is back in place.
// Same arguments, conventions and checks as the host functions.
// =============================================================================================
namespace tasks {

struct TaskOptions {
    int slices = 0;  ///< tasks per batch; 0: default_slices(count)
};

/// The slices used when TaskOptions::slices is 0: two per StarPU worker, at most count, and
/// at least enough to keep every slice below 2^31 elements.
int default_slices(int count, long long elements_per_matrix);

/// The performance-model symbols of the batched codelets ("starfact_batched_getrf_d", ...).
std::vector<std::string> perfmodel_symbols();

template <class T>
int getrf(int n, T* A, int lda, long long strideA, int* ipiv, int* info, int count, const TaskOptions& opt = {});
template <class T>
void getrs(int n, int nrhs, const T* A, int lda, long long strideA, const int* ipiv, T* B, int ldb, long long strideB,
           int count, const TaskOptions& opt = {});
template <class T>
int potrf(Uplo uplo, int n, T* A, int lda, long long strideA, int* info, int count, const TaskOptions& opt = {});
template <class T>
void potrs(Uplo uplo, int n, int nrhs, const T* A, int lda, long long strideA, T* B, int ldb, long long strideB,
           int count, const TaskOptions& opt = {});
template <class T>
void geqrf(int m, int n, T* A, int lda, long long strideA, T* tau, int count, const TaskOptions& opt = {});
template <class T>
int gels(int m, int n, int nrhs, T* A, int lda, long long strideA, T* tau, T* B, int ldb, long long strideB, int* info,
         int count, const TaskOptions& opt = {});

}  // namespace tasks

#ifdef STARFACT_HAVE_CUDA
// =============================================================================================
// Direct GPU: device pointers, work enqueued on the Context's stream, asynchronous (nothing
// waits for the GPU; info is a device array). Pointer batches are device arrays of device
// pointers. Argument checks are done on the host before anything is enqueued.
// =============================================================================================

/// Owns a cuBLAS handle bound to the caller's stream and a device workspace that grows only
/// when a call needs more than it holds (stream-ordered, so growing never waits), so repeated
/// calls allocate nothing. Move-only; the stream stays the caller's. One Context per stream;
/// it is not thread-safe.
class Context {
public:
    explicit Context(cudaStream_t stream);
    ~Context();
    Context(Context&& other) noexcept;
    Context& operator=(Context&& other) noexcept;
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    cudaStream_t stream() const { return stream_; }
    cublasHandle_t cublas() const { return cublas_; }
    std::size_t workspace_bytes() const { return bytes_; }
    /// Makes the workspace at least `bytes` (e.g. before a timed loop); returns it.
    void* reserve(std::size_t bytes);
    /// Copies count infos from the device, waits for the stream, and lists every failing matrix.
    std::vector<Failure> failures(const int* device_info, int count);

private:
    void release() noexcept;
    cudaStream_t stream_ = nullptr;
    cublasHandle_t cublas_ = nullptr;
    void* workspace_ = nullptr;
    std::size_t bytes_ = 0;
};

template <class T>
void getrf(Context& ctx, int n, T* A, int lda, long long strideA, int* ipiv, int* info, int count);
template <class T>
void getrf(Context& ctx, int n, T* const* A, int lda, int* ipiv, int* info, int count);

template <class T>
void getrs(Context& ctx, int n, int nrhs, const T* A, int lda, long long strideA, const int* ipiv, T* B, int ldb,
           long long strideB, int count);
template <class T>
void getrs(Context& ctx, int n, int nrhs, const T* const* A, int lda, const int* ipiv, T* const* B, int ldb, int count);

template <class T>
void potrf(Context& ctx, Uplo uplo, int n, T* A, int lda, long long strideA, int* info, int count);
template <class T>
void potrf(Context& ctx, Uplo uplo, int n, T* const* A, int lda, int* info, int count);

template <class T>
void potrs(Context& ctx, Uplo uplo, int n, int nrhs, const T* A, int lda, long long strideA, T* B, int ldb,
           long long strideB, int count);
template <class T>
void potrs(Context& ctx, Uplo uplo, int n, int nrhs, const T* const* A, int lda, T* const* B, int ldb, int count);

template <class T>
void geqrf(Context& ctx, int m, int n, T* A, int lda, long long strideA, T* tau, int count);
template <class T>
void geqrf(Context& ctx, int m, int n, T* const* A, int lda, T* tau, int count);

template <class T>
void gels(Context& ctx, int m, int n, int nrhs, T* A, int lda, long long strideA, T* tau, T* B, int ldb,
          long long strideB, int* info, int count);
template <class T>
void gels(Context& ctx, int m, int n, int nrhs, T* const* A, int lda, T* tau, T* const* B, int ldb, int* info,
          int count);
#endif

}  // namespace starfact::batched
