// The batched module's direct GPU path: a Context (cuBLAS handle on the caller's stream, a
// workspace that only grows) and the calls that check their arguments on the host, then enqueue
// the batched kernels (batched/cuda/kernels.hpp) without waiting.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "batched/batched.hpp"
#include "batched/cuda/kernels.hpp"
#include "batched/detail.hpp"
#include "common/error.hpp"

namespace starfact::batched {
namespace {
using detail::Op;
using detail::Problem;

void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw RuntimeError(fmt::format("batched Context: {}: {}", what, cudaGetErrorString(e)));
}

/// One call's use of the workspace: `arrays` device pointer arrays of `count` entries (for
/// strided batches), then the kernel's own workspace.
class Work {
public:
    Work(Context& ctx, int count, int arrays, std::size_t kernel_bytes)
        : array_bytes_(detail::round256(static_cast<std::size_t>(count) * sizeof(void*))) {
        const std::size_t total = array_bytes_ * arrays + kernel_bytes;
        base_ = static_cast<char*>(total > 0 ? ctx.reserve(total) : nullptr);
        launch.stream = ctx.stream();
        launch.cublas = ctx.cublas();
        launch.workspace = kernel_bytes > 0 ? base_ + array_bytes_ * arrays : nullptr;
        launch.workspace_bytes = kernel_bytes;
        count_ = count;
    }
    /// Pointer array i for the strided batch (base, stride), built on the stream.
    template <class T>
    T** pointers(int i, const T* base, long long stride) const {
        T** out = reinterpret_cast<T**>(base_ + array_bytes_ * i);
        cuda::strided_pointers<T>(out, const_cast<T*>(base), stride, count_, launch.stream);
        return out;
    }
    cuda::Launch launch;

private:
    std::size_t array_bytes_;
    char* base_ = nullptr;
    int count_ = 0;
};

using detail::problem;

/// A no-op call still writes its infos (0), on the stream.
void zero_device_info(Context& ctx, int* info, int count) {
    if (count > 0 && info != nullptr)
        check_cuda(cudaMemsetAsync(info, 0, static_cast<std::size_t>(count) * sizeof(int), ctx.stream()),
                   "clearing info");
}
}  // namespace

// ---- Context ------------------------------------------------------------------------------

Context::Context(cudaStream_t stream) : stream_(stream) {
    const cublasStatus_t st = cublasCreate(&cublas_);
    if (st != CUBLAS_STATUS_SUCCESS) throw RuntimeError(fmt::format("batched Context: cublasCreate failed ({})", st));
    if (cublasSetStream(cublas_, stream_) != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(cublas_);
        throw RuntimeError("batched Context: cublasSetStream failed");
    }
}

Context::~Context() { release(); }

void Context::release() noexcept {
    // Stream-ordered: work already enqueued keeps its workspace until it ran.
    if (workspace_ != nullptr) cudaFreeAsync(workspace_, stream_);
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    workspace_ = nullptr;
    cublas_ = nullptr;
    bytes_ = 0;
}

Context::Context(Context&& other) noexcept
    : stream_(other.stream_), cublas_(other.cublas_), workspace_(other.workspace_), bytes_(other.bytes_) {
    other.cublas_ = nullptr;
    other.workspace_ = nullptr;
    other.bytes_ = 0;
}

Context& Context::operator=(Context&& other) noexcept {
    if (this != &other) {
        release();
        stream_ = other.stream_;
        cublas_ = std::exchange(other.cublas_, nullptr);
        workspace_ = std::exchange(other.workspace_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

void* Context::reserve(std::size_t bytes) {
    if (cublas_ == nullptr) throw RuntimeError("batched Context: used after being moved from");
    if (bytes <= bytes_) return workspace_;
    // Grown by a quarter more than asked, so that slowly growing calls do not reallocate each time.
    const std::size_t grown = detail::round256(bytes + bytes / 4);
    if (workspace_ != nullptr) check_cuda(cudaFreeAsync(workspace_, stream_), "freeing the workspace");
    workspace_ = nullptr;
    bytes_ = 0;
    check_cuda(cudaMallocAsync(&workspace_, grown, stream_), fmt::format("allocating {} bytes", grown).c_str());
    bytes_ = grown;
    return workspace_;
}

std::vector<Failure> Context::failures(const int* device_info, int count) {
    require(count >= 0, "count", fmt::format("must be >= 0, got {}", count));
    require(count == 0 || device_info != nullptr, "info", "is null with count > 0");
    std::vector<int> info(static_cast<std::size_t>(count));
    if (count > 0) {
        check_cuda(
            cudaMemcpyAsync(info.data(), device_info, info.size() * sizeof(int), cudaMemcpyDeviceToHost, stream_),
            "copying info");
        check_cuda(cudaStreamSynchronize(stream_), "waiting for the stream");
    }
    return batched::failures(info.data(), count);
}

// ---- getrf ----------------------------------------------------------------------------------
template <class T>
void getrf(Context& ctx, int n, T* A, int lda, long long strideA, int* ipiv, int* info, int count) {
    Problem p = problem(Op::getrf, n, n, 0, count, lda, 1, true);
    p.strideA = strideA;
    p.A = A;
    p.ipiv = ipiv;
    p.info = info;
    detail::check(p);
    if (detail::nothing_to_do(p)) return zero_device_info(ctx, info, count);
    const Work w(ctx, count, 1, cuda::getrf_workspace<T>(n, count));
    cuda::getrf<T>(w.launch, n, w.pointers(0, A, strideA), lda, ipiv, info, count);
}

template <class T>
void getrf(Context& ctx, int n, T* const* A, int lda, int* ipiv, int* info, int count) {
    Problem p = problem(Op::getrf, n, n, 0, count, lda, 1, false);
    p.A = A;
    p.ipiv = ipiv;
    p.info = info;
    detail::check(p);
    if (detail::nothing_to_do(p)) return zero_device_info(ctx, info, count);
    const Work w(ctx, count, 0, cuda::getrf_workspace<T>(n, count));
    cuda::getrf<T>(w.launch, n, A, lda, ipiv, info, count);
}

// ---- getrs ----------------------------------------------------------------------------------
template <class T>
void getrs(Context& ctx, int n, int nrhs, const T* A, int lda, long long strideA, const int* ipiv, T* B, int ldb,
           long long strideB, int count) {
    Problem p = problem(Op::getrs, n, n, nrhs, count, lda, ldb, true);
    p.strideA = strideA;
    p.strideB = strideB;
    p.A = A;
    p.B = B;
    p.ipiv = ipiv;
    detail::check(p);
    if (detail::nothing_to_do(p)) return;
    const Work w(ctx, count, 2, cuda::getrs_workspace<T>(n, nrhs, count));
    cuda::getrs<T>(w.launch, n, nrhs, w.pointers(0, A, strideA), lda, ipiv, w.pointers(1, B, strideB), ldb, count);
}

template <class T>
void getrs(Context& ctx, int n, int nrhs, const T* const* A, int lda, const int* ipiv, T* const* B, int ldb,
           int count) {
    Problem p = problem(Op::getrs, n, n, nrhs, count, lda, ldb, false);
    p.A = A;
    p.B = B;
    p.ipiv = ipiv;
    detail::check(p);
    if (detail::nothing_to_do(p)) return;
    const Work w(ctx, count, 0, cuda::getrs_workspace<T>(n, nrhs, count));
    cuda::getrs<T>(w.launch, n, nrhs, A, lda, ipiv, B, ldb, count);
}

// ---- potrf ----------------------------------------------------------------------------------
template <class T>
void potrf(Context& ctx, Uplo uplo, int n, T* A, int lda, long long strideA, int* info, int count) {
    Problem p = problem(Op::potrf, n, n, 0, count, lda, 1, true);
    p.strideA = strideA;
    p.A = A;
    p.info = info;
    detail::check(p);
    if (detail::nothing_to_do(p)) return zero_device_info(ctx, info, count);
    const Work w(ctx, count, 1, cuda::potrf_workspace<T>(n, count));
    cuda::potrf_strided<T>(w.launch, uplo, n, w.pointers(0, A, strideA), A, strideA, lda, info, count);
}

template <class T>
void potrf(Context& ctx, Uplo uplo, int n, T* const* A, int lda, int* info, int count) {
    Problem p = problem(Op::potrf, n, n, 0, count, lda, 1, false);
    p.A = A;
    p.info = info;
    detail::check(p);
    if (detail::nothing_to_do(p)) return zero_device_info(ctx, info, count);
    const Work w(ctx, count, 0, cuda::potrf_workspace<T>(n, count));
    cuda::potrf<T>(w.launch, uplo, n, A, lda, info, count);
}

// ---- potrs ----------------------------------------------------------------------------------
template <class T>
void potrs(Context& ctx, Uplo uplo, int n, int nrhs, const T* A, int lda, long long strideA, T* B, int ldb,
           long long strideB, int count) {
    Problem p = problem(Op::potrs, n, n, nrhs, count, lda, ldb, true);
    p.strideA = strideA;
    p.strideB = strideB;
    p.A = A;
    p.B = B;
    detail::check(p);
    if (detail::nothing_to_do(p)) return;
    const Work w(ctx, count, 2, cuda::potrs_workspace<T>(n, nrhs, count));
    cuda::potrs<T>(w.launch, uplo, n, nrhs, w.pointers(0, A, strideA), lda, w.pointers(1, B, strideB), ldb, count);
}

template <class T>
void potrs(Context& ctx, Uplo uplo, int n, int nrhs, const T* const* A, int lda, T* const* B, int ldb, int count) {
    Problem p = problem(Op::potrs, n, n, nrhs, count, lda, ldb, false);
    p.A = A;
    p.B = B;
    detail::check(p);
    if (detail::nothing_to_do(p)) return;
    const Work w(ctx, count, 0, cuda::potrs_workspace<T>(n, nrhs, count));
    cuda::potrs<T>(w.launch, uplo, n, nrhs, A, lda, B, ldb, count);
}

// ---- geqrf ----------------------------------------------------------------------------------
template <class T>
void geqrf(Context& ctx, int m, int n, T* A, int lda, long long strideA, T* tau, int count) {
    Problem p = problem(Op::geqrf, m, n, 0, count, lda, 1, true);
    p.strideA = strideA;
    p.A = A;
    p.tau = tau;
    detail::check(p);
    if (detail::nothing_to_do(p)) return;
    const Work w(ctx, count, 1, cuda::geqrf_workspace<T>(m, n, count));
    cuda::geqrf<T>(w.launch, m, n, w.pointers(0, A, strideA), lda, tau, count);
}

template <class T>
void geqrf(Context& ctx, int m, int n, T* const* A, int lda, T* tau, int count) {
    Problem p = problem(Op::geqrf, m, n, 0, count, lda, 1, false);
    p.A = A;
    p.tau = tau;
    detail::check(p);
    if (detail::nothing_to_do(p)) return;
    const Work w(ctx, count, 0, cuda::geqrf_workspace<T>(m, n, count));
    cuda::geqrf<T>(w.launch, m, n, A, lda, tau, count);
}

// ---- gels: geqrf, then geqrs on the same workspace (the stream orders them) -----------------
template <class T>
void gels(Context& ctx, int m, int n, int nrhs, T* A, int lda, long long strideA, T* tau, T* B, int ldb,
          long long strideB, int* info, int count) {
    Problem p = problem(Op::gels, m, n, nrhs, count, lda, ldb, true);
    p.strideA = strideA;
    p.strideB = strideB;
    p.A = A;
    p.B = B;
    p.tau = tau;
    p.info = info;
    detail::check(p);
    if (detail::nothing_to_do(p)) return zero_device_info(ctx, info, count);
    const std::size_t bytes =
        std::max(cuda::geqrf_workspace<T>(m, n, count), cuda::geqrs_workspace<T>(m, n, nrhs, count));
    const Work w(ctx, count, 2, bytes);
    T** pa = w.pointers(0, A, strideA);
    cuda::geqrf<T>(w.launch, m, n, pa, lda, tau, count);
    cuda::geqrs<T>(w.launch, m, n, nrhs, pa, lda, tau, w.pointers(1, B, strideB), ldb, info, count);
}

template <class T>
void gels(Context& ctx, int m, int n, int nrhs, T* const* A, int lda, T* tau, T* const* B, int ldb, int* info,
          int count) {
    Problem p = problem(Op::gels, m, n, nrhs, count, lda, ldb, false);
    p.A = A;
    p.B = B;
    p.tau = tau;
    p.info = info;
    detail::check(p);
    if (detail::nothing_to_do(p)) return zero_device_info(ctx, info, count);
    const std::size_t bytes =
        std::max(cuda::geqrf_workspace<T>(m, n, count), cuda::geqrs_workspace<T>(m, n, nrhs, count));
    const Work w(ctx, count, 0, bytes);
    cuda::geqrf<T>(w.launch, m, n, A, lda, tau, count);
    cuda::geqrs<T>(w.launch, m, n, nrhs, A, lda, tau, B, ldb, info, count);
}

template void getrf<float>(Context&, int, float*, int, long long, int*, int*, int);
template void getrf<float>(Context&, int, float* const*, int, int*, int*, int);
template void getrs<float>(Context&, int, int, const float*, int, long long, const int*, float*, int, long long, int);
template void getrs<float>(Context&, int, int, const float* const*, int, const int*, float* const*, int, int);
template void potrf<float>(Context&, Uplo, int, float*, int, long long, int*, int);
template void potrf<float>(Context&, Uplo, int, float* const*, int, int*, int);
template void potrs<float>(Context&, Uplo, int, int, const float*, int, long long, float*, int, long long, int);
template void potrs<float>(Context&, Uplo, int, int, const float* const*, int, float* const*, int, int);
template void geqrf<float>(Context&, int, int, float*, int, long long, float*, int);
template void geqrf<float>(Context&, int, int, float* const*, int, float*, int);
template void gels<float>(Context&, int, int, int, float*, int, long long, float*, float*, int, long long, int*, int);
template void gels<float>(Context&, int, int, int, float* const*, int, float*, float* const*, int, int*, int);

template void getrf<double>(Context&, int, double*, int, long long, int*, int*, int);
template void getrf<double>(Context&, int, double* const*, int, int*, int*, int);
template void getrs<double>(Context&, int, int, const double*, int, long long, const int*, double*, int, long long,
                            int);
template void getrs<double>(Context&, int, int, const double* const*, int, const int*, double* const*, int, int);
template void potrf<double>(Context&, Uplo, int, double*, int, long long, int*, int);
template void potrf<double>(Context&, Uplo, int, double* const*, int, int*, int);
template void potrs<double>(Context&, Uplo, int, int, const double*, int, long long, double*, int, long long, int);
template void potrs<double>(Context&, Uplo, int, int, const double* const*, int, double* const*, int, int);
template void geqrf<double>(Context&, int, int, double*, int, long long, double*, int);
template void geqrf<double>(Context&, int, int, double* const*, int, double*, int);
template void gels<double>(Context&, int, int, int, double*, int, long long, double*, double*, int, long long, int*,
                           int);
template void gels<double>(Context&, int, int, int, double* const*, int, double*, double* const*, int, int*, int);

}  // namespace starfact::batched
