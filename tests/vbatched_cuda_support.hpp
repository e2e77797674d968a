// Device side of the variable-size batched CUDA suites (test_vbatched_cuda and the
// test_vbatched_{lu,potrf,qr}_small_cuda ones): batches back to back in one device buffer, pivot
// and tau storage, and a fixture that runs vgetrf, vpotrf and vgeqrf on a device copy.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <utility>
#include <vector>

#include "batched/cuda/vbatched_kernels.hpp"
#include "batched/vbatched.hpp"
#include "cuda_test_support.hpp"
#include "test_support.hpp"
#include "vbatched_lu_support.hpp"
#include "vbatched_test_support.hpp"

namespace starfact::test {

inline void device_copy(void* to, const void* from, std::size_t bytes, cudaMemcpyKind kind) {
    if (bytes > 0 && cudaMemcpy(to, from, bytes, kind) != cudaSuccess) throw std::runtime_error("cudaMemcpy failed");
}

inline std::vector<int> download_ints(const DeviceBuffer<int>& d) {
    std::vector<int> h(d.size());
    device_copy(h.data(), d.get(), h.size() * sizeof(int), cudaMemcpyDeviceToHost);
    return h;
}

inline const char* schedule_name(batched::cuda::Schedule s) {
    return s == batched::cuda::Schedule::ssde ? "ssde" : "dsse";
}

/// Matrices of different shapes back to back in one device buffer (an access past one lands in
/// its neighbour's poison), their pointers, row counts (n) and leading dimensions on the device.
template <class T>
struct DeviceVBatch {
    int count = 0;
    std::vector<std::size_t> offset;
    std::vector<int> n, ld;
    DeviceBuffer<T> data;
    DeviceBuffer<T*> ptrs;
    DeviceBuffer<int> dn, dld;

    explicit DeviceVBatch(const std::vector<HostMatrix<T>>& h) : count(static_cast<int>(h.size())) {
        std::size_t total = 0;
        for (const auto& m : h) {
            offset.push_back(total);
            n.push_back(m.m);
            ld.push_back(m.ld);
            total += m.data.size();
        }
        data = DeviceBuffer<T>(std::max<std::size_t>(total, 1));
        ptrs = DeviceBuffer<T*>(h.size());
        dn = DeviceBuffer<int>(h.size());
        dld = DeviceBuffer<int>(h.size());
        std::vector<T*> p(h.size());
        for (std::size_t b = 0; b < h.size(); ++b) {
            p[b] = data.get() + offset[b];
            device_copy(p[b], h[b].ptr(), h[b].data.size() * sizeof(T), cudaMemcpyHostToDevice);
        }
        device_copy(ptrs.get(), p.data(), p.size() * sizeof(T*), cudaMemcpyHostToDevice);
        device_copy(dn.get(), n.data(), n.size() * sizeof(int), cudaMemcpyHostToDevice);
        device_copy(dld.get(), ld.data(), ld.size() * sizeof(int), cudaMemcpyHostToDevice);
    }
    std::vector<HostMatrix<T>> download(const std::vector<HostMatrix<T>>& shape) const {
        std::vector<HostMatrix<T>> h;
        for (int b = 0; b < count; ++b) {
            h.emplace_back(shape[b].m, shape[b].n, shape[b].ld);
            device_copy(h[b].ptr(), data.get() + offset[b], h[b].data.size() * sizeof(T), cudaMemcpyDeviceToHost);
        }
        return h;
    }
    batched::VSizes sizes() const { return {n.data(), ld.data(), dn.get(), dld.get()}; }
};

/// Device pivot storage for a variable-size batch: max(1, n[b]) ints per matrix back to back,
/// poisoned with -99, and the array of their device pointers.
struct DevicePivots {
    std::vector<std::size_t> offset;
    std::vector<int> n;
    DeviceBuffer<int> data;
    DeviceBuffer<int*> ptrs;

    explicit DevicePivots(const std::vector<int>& orders) : n(orders) {
        std::size_t total = 0;
        for (int k : orders) {
            offset.push_back(total);
            total += static_cast<std::size_t>(std::max(k, 1));
        }
        data = DeviceBuffer<int>(std::max<std::size_t>(total, 1));
        ptrs = DeviceBuffer<int*>(std::max<std::size_t>(orders.size(), 1));
        std::vector<int> poison(data.size(), -99);
        std::vector<int*> p;
        for (std::size_t b = 0; b < orders.size(); ++b) p.push_back(data.get() + offset[b]);
        device_copy(data.get(), poison.data(), poison.size() * sizeof(int), cudaMemcpyHostToDevice);
        device_copy(ptrs.get(), p.data(), p.size() * sizeof(int*), cudaMemcpyHostToDevice);
    }
    std::vector<std::vector<int>> download() const {
        const auto all = download_ints(data);
        std::vector<std::vector<int>> h;
        for (std::size_t b = 0; b < n.size(); ++b)
            h.emplace_back(all.begin() + static_cast<long>(offset[b]),
                           all.begin() + static_cast<long>(offset[b]) + std::max(n[b], 1));
        return h;
    }
};

/// A QR batch on the device: the matrices (DeviceVBatch: its n are the rows), the columns, and
/// tau (max(1, min(m, n)) entries per matrix, poisoned with NaN) with its pointer array.
template <class T>
struct DeviceQr {
    DeviceVBatch<T> a;
    std::vector<int> m, n;
    DeviceBuffer<int> dcols;
    std::vector<std::size_t> toff;
    DeviceBuffer<T> tau;
    DeviceBuffer<T*> tptrs;

    explicit DeviceQr(const std::vector<HostMatrix<T>>& h) : a(h) {
        std::size_t total = 0;
        for (const auto& A : h) {
            m.push_back(A.m);
            n.push_back(A.n);
            toff.push_back(total);
            total += static_cast<std::size_t>(std::max(1, std::min(A.m, A.n)));
        }
        dcols = DeviceBuffer<int>(std::max<std::size_t>(h.size(), 1));
        tau = DeviceBuffer<T>(std::max<std::size_t>(total, 1));
        tptrs = DeviceBuffer<T*>(std::max<std::size_t>(h.size(), 1));
        std::vector<T> poison(tau.size(), nan<T>());
        device_copy(tau.get(), poison.data(), poison.size() * sizeof(T), cudaMemcpyHostToDevice);
        std::vector<T*> p;
        for (std::size_t b = 0; b < h.size(); ++b) p.push_back(tau.get() + toff[b]);
        device_copy(dcols.get(), n.data(), n.size() * sizeof(int), cudaMemcpyHostToDevice);
        device_copy(tptrs.get(), p.data(), p.size() * sizeof(T*), cudaMemcpyHostToDevice);
    }
    std::vector<std::vector<T>> download_tau() const {
        std::vector<T> all(tau.size());
        device_copy(all.data(), tau.get(), all.size() * sizeof(T), cudaMemcpyDeviceToHost);
        std::vector<std::vector<T>> h;
        for (std::size_t b = 0; b < m.size(); ++b)
            h.emplace_back(all.begin() + static_cast<long>(toff[b]),
                           all.begin() + static_cast<long>(toff[b]) + std::max(1, std::min(m[b], n[b])));
        return h;
    }
    batched::VShapes shapes() const { return {m.data(), n.data(), a.ld.data(), a.dn.get(), dcols.get(), a.dld.get()}; }
};

/// Factored QR matrices and their tau.
template <class T>
using Factored = std::pair<std::vector<HostMatrix<T>>, std::vector<std::vector<T>>>;

/// A CudaHandlesTest that launches the variable-size kernels on a device copy of a host batch.
class VBatchedCudaTest : public CudaHandlesTest {
protected:
    using CudaHandlesTest::CudaHandlesTest;

    /// A launch on the test's stream and cuBLAS handle with workspace ws of `bytes`.
    batched::cuda::Launch launch(void* ws = nullptr, std::size_t bytes = 0) {
        batched::cuda::Launch l;
        l.stream = stream_;
        l.cublas = blas_;
        l.workspace = ws;
        l.workspace_bytes = bytes;
        return l;
    }

    /// A launch with the fixture's workspace of exactly `bytes` (none for 0).
    batched::cuda::Launch launch_with_workspace(std::size_t bytes) {
        return launch(bytes > 0 ? workspace(bytes) : nullptr, bytes);
    }

    /// vgetrf (schedule s) on A, its pivots poisoned with -99 and its infos with 0x5a5a5a5a.
    template <class T>
    LuResult<T> run_vgetrf(const std::vector<HostMatrix<T>>& A, batched::cuda::Schedule s) {
        const int count = static_cast<int>(A.size());
        int nmax = 0;
        std::vector<int> n;
        for (const auto& M : A) {
            nmax = std::max(nmax, M.n);
            n.push_back(M.n);
        }
        DeviceVBatch<T> d(A);
        DevicePivots piv(n);
        DeviceBuffer<int> info(std::max(count, 1));
        EXPECT_TRUE(cuda_ok(cudaMemset(info.get(), 0x5a, info.size() * sizeof(int))));
        const std::size_t bytes = batched::cuda::vgetrf_workspace<T>(nmax, count);
        batched::cuda::vgetrf<T>(launch_with_workspace(bytes), s, nmax, d.dn.get(), d.ptrs.get(), d.dld.get(),
                                 piv.ptrs.get(), info.get(), count);
        EXPECT_TRUE(sync());
        auto got = download_ints(info);
        got.resize(count);
        return {d.download(A), piv.download(), got};
    }

    /// vpotrf (c's triangle, schedule s, largest order nmax) on c's matrices, its infos poisoned
    /// with 0x5a5a5a5a; the factors and infos.
    template <class T>
    std::pair<std::vector<HostMatrix<T>>, std::vector<int>> run_vpotrf(const SpdCase<T>& c, batched::cuda::Schedule s,
                                                                       int nmax) {
        const int count = static_cast<int>(c.A.size());
        DeviceVBatch<T> d(c.A);
        DeviceBuffer<int> info(std::max(count, 1));
        EXPECT_TRUE(cuda_ok(cudaMemset(info.get(), 0x5a, info.size() * sizeof(int))));
        batched::cuda::vpotrf<T>(launch(), c.uplo == 'L' ? batched::cuda::Uplo::lower : batched::cuda::Uplo::upper, s,
                                 nmax, d.dn.get(), d.ptrs.get(), d.dld.get(), info.get(), count);
        EXPECT_TRUE(sync());
        auto got = download_ints(info);
        got.resize(count);
        return {d.download(c.A), got};
    }

    /// vgeqrf (schedule s) on A, tau poisoned with NaN; the factors and tau.
    template <class T>
    Factored<T> run_vgeqrf(const std::vector<HostMatrix<T>>& A, batched::cuda::Schedule s) {
        const int count = static_cast<int>(A.size());
        DeviceQr<T> d(A);
        const batched::cuda::VQrBounds bounds = batched::cuda::vqr_bounds(d.m.data(), d.n.data(), count);
        const std::size_t bytes = batched::cuda::vgeqrf_workspace<T>(count);
        batched::cuda::vgeqrf<T>(launch_with_workspace(bytes), s, bounds, d.a.dn.get(), d.dcols.get(), d.a.ptrs.get(),
                                 d.a.dld.get(), d.tptrs.get(), count);
        EXPECT_TRUE(sync());
        return {d.a.download(A), d.download_tau()};
    }
};

}  // namespace starfact::test
