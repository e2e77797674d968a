// Device-side helpers shared by the batched kernels' .cu files (not installed).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <tuple>

#include "batched/cuda/kernels.hpp"
#include "common/error.hpp"

namespace starfact::batched::cuda::detail {

/// Throws RuntimeError naming `what` when a launch or a cuBLAS call failed.
void check(cudaError_t status, const char* what);
void check(cublasStatus_t status, const char* what);
/// Checks the last launch (cudaGetLastError).
void check_launch(const char* what);

/// Carves aligned pieces out of Launch::workspace; throws when it is too small, so a wrong
/// *_workspace function shows as an error, not as memory corruption.
class WorkspaceCarver {
public:
    explicit WorkspaceCarver(const Launch& launch);
    template <class U>
    U* take(std::size_t elements) {
        return static_cast<U*>(take_bytes(elements * sizeof(U)));
    }
    void* take_bytes(std::size_t bytes);
    /// Bytes that take_bytes(b1), take_bytes(b2), ... would use from an aligned start.
    static std::size_t round(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

private:
    char* base_;
    std::size_t size_;
    std::size_t used_ = 0;
};

/// out + q * count gets in[b] + offsets[q] for b < count and q < jobs (device arrays in, out;
/// host array offsets), in one launch per 64 offsets: the pointer arrays that batched cuBLAS
/// calls need for sub-blocks (row i, column j: offset = i + j * ld) of every matrix.
template <class T>
void offset_pointers(T** out, T* const* in, const long long* offsets, int jobs, int count, cudaStream_t stream);

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

/// The blocks of `threads` threads of `kernel` that the current device holds at once (at least
/// 1), the kernel first asking that device for the largest shared-memory carveout: the grid of a
/// kernel whose blocks go through the work in turn. Measured once per device, kernel and block
/// size and kept (the grid's size changes the speed only, never the result).
template <class Kernel>
int resident_blocks(Kernel* kernel, int threads, const char* what) {
    int device = 0;
    check(cudaGetDevice(&device), what);
    static std::mutex mutex;
    static std::map<std::tuple<int, const void*, int>, int> known;
    const std::tuple<int, const void*, int> key{device, reinterpret_cast<const void*>(kernel), threads};
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = known.find(key); it != known.end()) return it->second;
    int sms = 0, per_sm = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), what);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared),
          what);
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0), what);
    const int blocks = sms * per_sm > 0 ? sms * per_sm : 1;
    known.emplace(key, blocks);
    return blocks;
}

// Asynchronous copies from global to shared memory (sm_80 and later): one element per thread
// and call; a commit closes a group, wait_all waits for every group of the thread.
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ inline void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
/// Waits for all but the most recently committed group of the thread.
__device__ inline void cp_async_wait_but_one() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
template <class T>
__device__ inline void cp_async(T* smem, const T* gmem) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(sizeof(T)));
}

/// cp_async of one element, or zeros into smem (nothing read) when !valid; gmem must still be a
/// valid address then (any element of the same array).
template <class T>
__device__ inline void cp_async_zfill(T* smem, const T* gmem, bool valid) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const unsigned bytes = valid ? sizeof(T) : 0u;
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(gmem), "n"(sizeof(T)), "r"(bytes));
}

/// Opts `kernel` in to all the dynamic shared memory the current device allows it beside its
/// static shared memory, for launches above the default 48 KiB. Never to one launch's request:
/// host threads launching the kernel with different sizes at once would shrink each other's
/// allowance between the call and the launch.
template <class Kernel>
void opt_in_shared(Kernel* kernel, const char* what) {
    int device = 0, optin = 0;
    cudaFuncAttributes attr{};
    check(cudaGetDevice(&device), what);
    check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), what);
    check(cudaFuncGetAttributes(&attr, kernel), what);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               optin - static_cast<int>(attr.sharedSizeBytes)),
          what);
}

/// D = A B + D for one 8 x 8 x 4 product on the FP64 tensor cores (mma.m8n8k4): lane (g, q) =
/// (lane / 4, lane % 4) holds A(g, q), B(q, g) and D(g, 2q), D(g, 2q + 1). Staged operands read
/// conflict-free when their leading dimension is 4 more than a multiple of 16 entries.
__device__ __forceinline__ void dmma_8x8x4(double (&d)[2], double a, double b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
        : "+d"(d[0]), "+d"(d[1])
        : "d"(a), "d"(b));
#else
    __trap();  // not built for such devices (sm_90 only); kept so that the code compiles
#endif
}

}  // namespace starfact::batched::cuda::detail
