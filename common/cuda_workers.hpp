// Per-CUDA-worker resources that StarPU does not provide: cuSOLVER handles and a growing
// device workspace. Only called from codelets running on a CUDA worker (and the Runtime).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <cstddef>
#include <string>

namespace starfact::cuda {

void init_workers();
void shutdown_workers();

/// The calling CUDA worker's stream (StarPU's per-worker stream).
cudaStream_t stream();
/// The calling worker's cuBLAS handle (StarPU's, bound to stream()).
cublasHandle_t blas_handle();
/// The calling worker's cuSOLVER handle, bound to stream().
cusolverDnHandle_t solver_handle();
cusolverDnParams_t solver_params();
/// Runs the critical-path kernels of one task (the panel) on the calling worker's high-priority
/// stream, so that the GPU schedules them ahead of the trailing updates the other streams
/// queue. The scope orders that stream after all work already on StarPU's stream, points the
/// worker's cuBLAS and cuSOLVER handles at it, and on exit makes StarPU's stream wait for it
/// and points the handles back: StarPU still sees the task end when its own stream drains.
class PriorityScope {
public:
    PriorityScope();
    ~PriorityScope();
    PriorityScope(const PriorityScope&) = delete;
    PriorityScope& operator=(const PriorityScope&) = delete;
    cudaStream_t stream() const { return stream_; }

private:
    cudaStream_t stream_;
};

/// A device buffer of at least `bytes` owned by the calling worker; valid until the next call.
/// Growing it synchronizes the worker's stream first. Returns nullptr if allocation fails.
void* workspace(std::size_t bytes);

}  // namespace starfact::cuda
