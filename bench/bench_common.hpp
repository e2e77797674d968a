// Shared pieces of the benchmarks: medians, JSON-lines output, CUDA checks, the GPU's node.
#pragma once

#include <cuda_runtime_api.h>
#include <starpu.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "codelets/codelets.hpp"
#include "common/parallel.hpp"
#include "tile_algorithms/tile_host.hpp"

namespace starfact::bench {

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// Throws with the call's text when a CUDA, cuBLAS or cuSOLVER status is not 0.
inline void check(long status, const char* what) {
    if (status != 0) throw std::runtime_error(fmt::format("{} failed: {}", what, status));
}

/// Median seconds of `run` (enqueued on the default stream, timed with CUDA events) over reps
/// runs after one warm-up; `prepare` runs untimed before each, e.g. to restore the input.
template <class Prepare, class Run>
double time_on_device(int reps, Prepare prepare, Run run) {
    cudaEvent_t e0, e1;
    check(cudaEventCreate(&e0), "cudaEventCreate");
    check(cudaEventCreate(&e1), "cudaEventCreate");
    std::vector<double> t;
    for (int r = 0; r < reps + 1; ++r) {
        prepare();
        check(cudaEventRecord(e0), "cudaEventRecord");
        run();
        check(cudaEventRecord(e1), "cudaEventRecord");
        check(cudaEventSynchronize(e1), "cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
        if (r > 0) t.push_back(ms / 1e3);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return median(t);
}

/// Writes the m x n matrix of `src` into the device array dA (leading dimension m), generated
/// on every core in panels of columns that travel through two pinned buffers while the next
/// panel is generated: the vendor library gets the same matrix as starfact's tiles without a
/// host copy of all of it (n = 100000 in double is 80 GB).
template <class T>
void to_device(const BlockSource<T>& src, int m, int n, T* dA) {
    if (m == 0 || n == 0) return;
    const int width = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(n, (std::int64_t(64) << 20) / (sizeof(T) * m))));
    T* panel[2] = {nullptr, nullptr};
    cudaEvent_t done[2];
    cudaStream_t stream;
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    for (int b = 0; b < 2; ++b) {
        check(cudaMallocHost(&panel[b], sizeof(T) * static_cast<std::size_t>(m) * width), "cudaMallocHost");
        check(cudaEventCreate(&done[b]), "cudaEventCreate");
        check(cudaEventRecord(done[b], stream), "cudaEventRecord");
    }
    constexpr int kRows = 2048;
    const int pieces = (m + kRows - 1) / kRows;
    for (int j0 = 0, b = 0; j0 < n; j0 += width, b ^= 1) {
        const int cols = std::min(width, n - j0);
        check(cudaEventSynchronize(done[b]), "cudaEventSynchronize");  // buffer b's last copy is over
        parallel_for(pieces, [&](int p) {
            const int i0 = p * kRows;
            src(i0, j0, std::min(kRows, m - i0), cols, panel[b] + i0, m);
        });
        check(cudaMemcpyAsync(dA + static_cast<std::size_t>(j0) * m, panel[b], sizeof(T) * static_cast<std::size_t>(m) * cols,
                              cudaMemcpyHostToDevice, stream),
              "cudaMemcpyAsync");
        check(cudaEventRecord(done[b], stream), "cudaEventRecord");
    }
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    for (int b = 0; b < 2; ++b) {
        cudaEventDestroy(done[b]);
        cudaFreeHost(panel[b]);
    }
    cudaStreamDestroy(stream);
}

/// The memory node of the first CUDA worker (STARPU_MAIN_RAM if none).
inline unsigned first_cuda_node() {
    for (unsigned w = 0; w < starpu_worker_get_count(); ++w)
        if (starpu_worker_get_type(static_cast<int>(w)) == STARPU_CUDA_WORKER) return starpu_worker_get_memory_node(w);
    return STARPU_MAIN_RAM;
}

/// --workers: "all" lets StarPU place every task on any worker it started (what a user of the
/// command line gets); "gpu" restricts every codelet to the CUDA workers in the same process.
constexpr const char* kWorkersHelp = "all (every worker StarPU started), gpu (CUDA workers only); each is measured";
/// --start: "device" moves the matrix into GPU memory before the timed region, as the vendor
/// library's timing starts; "host" times from host memory, transfers included, as the command line does.
constexpr const char* kStartHelp = "device (matrix in GPU memory when the clock starts) or host (transfers timed)";
inline codelets::Impl workers_impl(const std::string& workers) {
    return workers == "gpu" ? codelets::Impl::Cuda : codelets::Impl::Any;
}

inline std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

/// Prints JSON lines to stdout and, when a path is given, to that file too.
class Emitter {
public:
    explicit Emitter(const std::string& path) {
        if (!path.empty()) file_.open(path);
    }
    void operator()(const nlohmann::ordered_json& j) {
        fmt::print("{}\n", j.dump());
        std::fflush(stdout);
        if (file_) file_ << j.dump() << "\n" << std::flush;
    }

private:
    std::ofstream file_;
};

}  // namespace starfact::bench
