// Helpers shared by the batched kernels: error checks, workspace carving, pointer arrays.
#include <string>

#include "batched/cuda/common.cuh"

namespace starfact::batched::cuda {
namespace detail {

void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) {
        throw RuntimeError(std::string("batched ") + what + ": " + cudaGetErrorString(status));
    }
}

void check(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS) {
        throw RuntimeError(std::string("batched ") + what + ": cuBLAS status " + std::to_string(status));
    }
}

void check_launch(const char* what) { check(cudaGetLastError(), what); }

WorkspaceCarver::WorkspaceCarver(const Launch& launch)
    : base_(static_cast<char*>(launch.workspace)), size_(launch.workspace_bytes) {}

void* WorkspaceCarver::take_bytes(std::size_t bytes) {
    const std::size_t rounded = round(bytes);
    if (used_ + rounded > size_) {
        throw RuntimeError("batched kernels: workspace of " + std::to_string(size_) +
                           " bytes is too small (need at least " + std::to_string(used_ + rounded) + ")");
    }
    void* p = base_ + used_;
    used_ += rounded;
    return p;
}

namespace {
constexpr int kOffsetJobs = 64;
struct OffsetJobs {
    long long offset[kOffsetJobs];
};
template <class T>
__global__ void offsets_kernel(T** out, T* const* in, OffsetJobs jobs, int count) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < count) out[static_cast<long long>(blockIdx.y) * count + b] = in[b] + jobs.offset[blockIdx.y];
}
template <class T>
__global__ void strided_kernel(T** out, T* base, long long stride, int count) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < count) out[b] = base + b * stride;
}
}  // namespace

template <class T>
void offset_pointers(T** out, T* const* in, const long long* offsets, int jobs, int count, cudaStream_t stream) {
    if (count <= 0) return;
    for (int q0 = 0; q0 < jobs; q0 += kOffsetJobs) {
        const int nj = jobs - q0 < kOffsetJobs ? jobs - q0 : kOffsetJobs;
        OffsetJobs batch{};
        for (int q = 0; q < nj; ++q) batch.offset[q] = offsets[q0 + q];
        offsets_kernel<<<dim3(ceil_div(count, 256), nj), 256, 0, stream>>>(out + static_cast<long long>(q0) * count, in,
                                                                           batch, count);
        check_launch("offset_pointers");
    }
}

template void offset_pointers<float>(float**, float* const*, const long long*, int, int, cudaStream_t);
template void offset_pointers<double>(double**, double* const*, const long long*, int, int, cudaStream_t);

}  // namespace detail

template <class T>
void strided_pointers(T** out, T* base, long long stride, int count, cudaStream_t stream) {
    if (count <= 0) return;
    detail::strided_kernel<<<detail::ceil_div(count, 256), 256, 0, stream>>>(out, base, stride, count);
    detail::check_launch("strided_pointers");
}

template void strided_pointers<float>(float**, float*, long long, int, cudaStream_t);
template void strided_pointers<double>(double**, double*, long long, int, cudaStream_t);

}  // namespace starfact::batched::cuda
