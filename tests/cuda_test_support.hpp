// Device-memory helpers shared by the CUDA kernel test suites (test_lu_cuda, test_qr_cuda):
// CUDA status as a gtest assertion, an owning device buffer, and a device copy of a HostMatrix
// that keeps its padding (so that poisoned entries travel both ways).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

#include "test_support.hpp"

namespace starfact::test {

inline ::testing::AssertionResult cuda_ok(cudaError_t err) {
    if (err == cudaSuccess) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << cudaGetErrorName(err) << ": " << cudaGetErrorString(err);
}

/// cudaMalloc'd storage for count elements, freed on destruction.
template <class E>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t count) : count_(count) {
        if (count > 0 && cudaMalloc(reinterpret_cast<void**>(&ptr_), count * sizeof(E)) != cudaSuccess)
            throw std::runtime_error("cudaMalloc of " + std::to_string(count * sizeof(E)) + " bytes failed");
    }
    ~DeviceBuffer() { cudaFree(ptr_); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), count_(other.count_) {
        other.ptr_ = nullptr;
        other.count_ = 0;
    }
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
        std::swap(ptr_, other.ptr_);
        std::swap(count_, other.count_);
        return *this;
    }
    E* get() const { return ptr_; }
    std::size_t size() const { return count_; }

private:
    E* ptr_ = nullptr;
    std::size_t count_ = 0;
};

/// A device copy of a HostMatrix, padding included (so that the poison travels both ways).
template <class T>
struct DeviceMatrix {
    int m, n, ld;
    DeviceBuffer<T> buf;

    explicit DeviceMatrix(const HostMatrix<T>& h) : m(h.m), n(h.n), ld(h.ld), buf(h.data.size()) {
        if (!h.data.empty() &&
            cudaMemcpy(buf.get(), h.ptr(), h.data.size() * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess)
            throw std::runtime_error("cudaMemcpy to the device failed");
    }
    TileView<T> view() const { return {buf.get(), m, n, ld}; }
    TileView<const T> cview() const { return {buf.get(), m, n, ld}; }
    HostMatrix<T> download() const {
        HostMatrix<T> h(m, n, ld);
        if (!h.data.empty() &&
            cudaMemcpy(h.ptr(), buf.get(), h.data.size() * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess)
            throw std::runtime_error("cudaMemcpy to the host failed");
        return h;
    }
};

/// A test with its own CUDA stream and cuBLAS/cuSOLVER handles bound to it; skips, visibly, on a
/// machine without a CUDA device. Suites add the context of their kernels on top (work_ holds its
/// workspace).
class CudaHandlesTest : public SeededTest {
protected:
    explicit CudaHandlesTest(const char* what) : what_(what) {}

    void SetUp() override {
        int count = 0;
        const cudaError_t err = cudaGetDeviceCount(&count);
        if (err != cudaSuccess || count == 0)
            GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount: " << cudaGetErrorName(err) << ", " << count
                         << " devices): the CUDA " << what_ << " kernels are not tested here";
        ASSERT_TRUE(cuda_ok(cudaStreamCreate(&stream_)));
        ASSERT_EQ(cublasCreate(&blas_), CUBLAS_STATUS_SUCCESS);
        ASSERT_EQ(cublasSetStream(blas_, stream_), CUBLAS_STATUS_SUCCESS);
        ASSERT_EQ(cusolverDnCreate(&solver_), CUSOLVER_STATUS_SUCCESS);
        ASSERT_EQ(cusolverDnSetStream(solver_, stream_), CUSOLVER_STATUS_SUCCESS);
        ASSERT_EQ(cusolverDnCreateParams(&params_), CUSOLVER_STATUS_SUCCESS);
    }

    void TearDown() override {
        if (stream_ != nullptr) {
            EXPECT_TRUE(cuda_ok(cudaStreamSynchronize(stream_)));
        }
        work_ = DeviceBuffer<unsigned char>();
        if (params_ != nullptr) cusolverDnDestroyParams(params_);
        if (solver_ != nullptr) cusolverDnDestroy(solver_);
        if (blas_ != nullptr) cublasDestroy(blas_);
        if (stream_ != nullptr) cudaStreamDestroy(stream_);
    }

    /// A workspace of exactly `bytes` (a fresh allocation when that changes, so an overrun shows
    /// under compute-sanitizer).
    void* workspace(std::size_t bytes) {
        if (bytes != work_.size()) work_ = DeviceBuffer<unsigned char>(bytes);
        return work_.get();
    }

public:
    ::testing::AssertionResult sync() { return cuda_ok(cudaStreamSynchronize(stream_)); }

protected:
    const char* what_;
    cudaStream_t stream_ = nullptr;
    cublasHandle_t blas_ = nullptr;
    cusolverDnHandle_t solver_ = nullptr;
    cusolverDnParams_t params_ = nullptr;
    DeviceBuffer<unsigned char> work_;
};

}  // namespace starfact::test
