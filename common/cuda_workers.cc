// Per-CUDA-worker cuSOLVER handles and workspace, created on each worker's own thread.
#include "common/cuda_workers.hpp"

#include <starpu.h>
#include <starpu_cublas_v2.h>

#include <array>
#include <cstdlib>
#include <string>

#include "common/kernel_error.hpp"

namespace starfact::cuda {
namespace {
struct WorkerState {
    cusolverDnHandle_t solver = nullptr;
    cusolverDnParams_t params = nullptr;
    void* buffer = nullptr;
    std::size_t bytes = 0;
    cudaStream_t priority_stream = nullptr;  ///< highest priority; nullptr: not available
    cudaEvent_t enter = nullptr, leave = nullptr;
};
std::array<WorkerState, STARPU_NMAXWORKERS> g_state;

void init_one(void*) {
    WorkerState& s = g_state[starpu_worker_get_id_check()];
    cusolverStatus_t st = cusolverDnCreate(&s.solver);
    if (st != CUSOLVER_STATUS_SUCCESS) {
        record_kernel_error("cusolverDnCreate", st);
        s.solver = nullptr;
        return;
    }
    cusolverDnSetStream(s.solver, starpu_cuda_get_local_stream());
    if (cusolverDnCreateParams(&s.params) != CUSOLVER_STATUS_SUCCESS) record_kernel_error("cusolverDnCreateParams", 0);
    // STARFACT_CUSOLVER_GETRF_ALG=1 selects cuSOLVER's second getrf algorithm (for measurements).
    if (const char* alg = std::getenv("STARFACT_CUSOLVER_GETRF_ALG"); alg != nullptr && std::string(alg) == "1")
        cusolverDnSetAdvOptions(s.params, CUSOLVERDN_GETRF, CUSOLVER_ALG_1);
    int least = 0, greatest = 0;
    if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess ||
        cudaStreamCreateWithPriority(&s.priority_stream, cudaStreamNonBlocking, greatest) != cudaSuccess ||
        cudaEventCreateWithFlags(&s.enter, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&s.leave, cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        s.priority_stream = nullptr;  // PriorityScope then uses StarPU's stream
    }
}

void shutdown_one(void*) {
    WorkerState& s = g_state[starpu_worker_get_id_check()];
    if (s.buffer) {
        cudaStreamSynchronize(starpu_cuda_get_local_stream());
        cudaFree(s.buffer);
    }
    if (s.priority_stream) cudaStreamDestroy(s.priority_stream);
    if (s.enter) cudaEventDestroy(s.enter);
    if (s.leave) cudaEventDestroy(s.leave);
    if (s.params) cusolverDnDestroyParams(s.params);
    if (s.solver) cusolverDnDestroy(s.solver);
    s = WorkerState{};
}
}  // namespace

void init_workers() { starpu_execute_on_each_worker(init_one, nullptr, STARPU_CUDA); }
void shutdown_workers() { starpu_execute_on_each_worker(shutdown_one, nullptr, STARPU_CUDA); }

cudaStream_t stream() { return starpu_cuda_get_local_stream(); }
cublasHandle_t blas_handle() { return starpu_cublas_get_local_handle(); }
cusolverDnHandle_t solver_handle() { return g_state[starpu_worker_get_id_check()].solver; }
cusolverDnParams_t solver_params() { return g_state[starpu_worker_get_id_check()].params; }

PriorityScope::PriorityScope() : stream_(starpu_cuda_get_local_stream()) {
    WorkerState& s = g_state[starpu_worker_get_id_check()];
    if (s.priority_stream == nullptr) return;
    if (cudaEventRecord(s.enter, stream_) != cudaSuccess || cudaStreamWaitEvent(s.priority_stream, s.enter, 0) != cudaSuccess) {
        record_kernel_error("PriorityScope: ordering the priority stream", cudaGetLastError());
        return;
    }
    stream_ = s.priority_stream;
    cublasSetStream(blas_handle(), stream_);
    cusolverDnSetStream(s.solver, stream_);
}

PriorityScope::~PriorityScope() {
    const cudaStream_t starpu_stream = starpu_cuda_get_local_stream();
    if (stream_ == starpu_stream) return;
    WorkerState& s = g_state[starpu_worker_get_id_check()];
    if (cudaEventRecord(s.leave, stream_) != cudaSuccess || cudaStreamWaitEvent(starpu_stream, s.leave, 0) != cudaSuccess) {
        record_kernel_error("PriorityScope: ordering StarPU's stream", cudaGetLastError());
        cudaStreamSynchronize(stream_);  // StarPU must not see the task end before its kernels do
    }
    cublasSetStream(blas_handle(), starpu_stream);
    cusolverDnSetStream(s.solver, starpu_stream);
}

void* workspace(std::size_t bytes) {
    WorkerState& s = g_state[starpu_worker_get_id_check()];
    if (bytes <= s.bytes) return s.buffer;
    // Tasks already queued on this worker's streams may still use the old buffer (work on the
    // priority stream is always followed by a wait on StarPU's stream).
    cudaStreamSynchronize(starpu_cuda_get_local_stream());
    if (s.buffer) cudaFree(s.buffer);
    s.buffer = nullptr;
    s.bytes = 0;
    const std::size_t grown = bytes + bytes / 4;
    if (cudaMalloc(&s.buffer, grown) != cudaSuccess) {
        cudaGetLastError();
        s.buffer = nullptr;
        return nullptr;
    }
    s.bytes = grown;
    return s.buffer;
}

}  // namespace starfact::cuda
