// Small layout kernels shared by the CUDA LU and QR kernels.
#include <cuda_runtime.h>

#include <algorithm>

#include "codelets/cuda/tile_kernels.hpp"

namespace starfact::cuda {
namespace {
constexpr int kThreads = 256;
constexpr long long kMaxBlocks = 1024;

template <class T>
__global__ void explicit_unit_lower_kernel(TileView<const T> L, TileView<T> X) {
    const long long total = static_cast<long long>(X.m) * X.n;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const int i = static_cast<int>(idx % X.m), j = static_cast<int>(idx / X.m);
        X(i, j) = i > j ? L(i, j) : (i == j ? T(1) : T(0));
    }
}
}  // namespace

template <class T>
cudaError_t explicit_unit_lower(TileView<const T> L, TileView<T> X, cudaStream_t stream) {
    const long long total = static_cast<long long>(X.m) * X.n;
    if (total == 0) return cudaSuccess;
    const int blocks = static_cast<int>(std::min((total + kThreads - 1) / kThreads, kMaxBlocks));
    explicit_unit_lower_kernel<T><<<blocks, kThreads, 0, stream>>>(L, X);
    return cudaGetLastError();
}

template cudaError_t explicit_unit_lower<float>(TileView<const float>, TileView<float>, cudaStream_t);
template cudaError_t explicit_unit_lower<double>(TileView<const double>, TileView<double>, cudaStream_t);

}  // namespace starfact::cuda
