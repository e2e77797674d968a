// After cuSOLVER's potrf: turn a NaN pivot into LAPACK's info, as reference LAPACK does.
#include <cuda_runtime.h>

#include "codelets/cuda/tile_kernels.hpp"

namespace starfact::cuda {
namespace {
constexpr int kThreads = 256;

// One block: the smallest j with a NaN A(j, j), written as j + 1 when info is still 0.
template <class T>
__global__ void nan_pivot_kernel(const T* A, int n, int ld, int* info) {
    __shared__ int first;
    if (threadIdx.x == 0) first = n;
    __syncthreads();
    if (*info != 0) return;  // cuSOLVER already found a non-positive pivot
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const T d = A[j + static_cast<long long>(j) * ld];
        if (d != d) atomicMin(&first, j);
    }
    __syncthreads();
    if (threadIdx.x == 0 && first < n) *info = first + 1;
}
}  // namespace

template <class T>
cudaError_t potrf_nan_info(TileView<const T> A, int* dinfo, cudaStream_t stream) {
    nan_pivot_kernel<T><<<1, kThreads, 0, stream>>>(A.data, A.n, A.ld, dinfo);
    return cudaGetLastError();
}

template cudaError_t potrf_nan_info<float>(TileView<const float>, int*, cudaStream_t);
template cudaError_t potrf_nan_info<double>(TileView<const double>, int*, cudaStream_t);

}  // namespace starfact::cuda
