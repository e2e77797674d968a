// Execution traces from StarPU's per-task profiling information and performance models.
#include "codelets/trace.hpp"

#include <starpu.h>
#include <starpu_profiling.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>

#include <fmt/format.h>

namespace starfact::codelets {
namespace {
std::atomic<bool> g_on{false};
std::mutex g_mutex;
std::vector<TaskRecord> g_records;

double to_us(const timespec& t) { return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3; }

std::string arch_of(int worker) {
    switch (starpu_worker_get_type(worker)) {
        case STARPU_CPU_WORKER: return "cpu";
        case STARPU_CUDA_WORKER: return fmt::format("cuda{}", starpu_worker_get_devid(worker));
        default: return fmt::format("type{}.{}", static_cast<int>(starpu_worker_get_type(worker)),
                                    starpu_worker_get_devid(worker));
    }
}

std::string time_cell(double s) { return std::isnan(s) ? "nan" : fmt::format("{:.6f}", s); }
}  // namespace

void start_trace() {
    starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        g_records.clear();
    }
    g_on = true;
}

std::vector<TaskRecord> stop_trace() {
    starpu_task_wait_for_all();
    g_on = false;
    starpu_profiling_status_set(STARPU_PROFILING_DISABLE);
    std::lock_guard<std::mutex> lock(g_mutex);
    std::vector<TaskRecord> out = std::move(g_records);
    g_records.clear();
    // StarPU's clock has an arbitrary origin: times count from the first task's start.
    double origin = 0;
    for (std::size_t i = 0; i < out.size(); ++i) origin = i == 0 ? out[i].start_s : std::min(origin, out[i].start_s);
    for (TaskRecord& r : out) {
        r.start_s -= origin;
        r.end_s -= origin;
    }
    return out;
}

void set_tile_coordinates(starpu_data_handle_t tile, int i, int j) { starpu_data_set_coordinates(tile, 2, i, j); }

std::string trace_csv_header() { return "task,worker,arch,start_s,end_s,predicted_s,model_s,model,footprint,tiles"; }

std::string trace_csv_line(const TaskRecord& r) {
    std::string tiles;
    for (const auto& t : r.tiles)
        tiles += (tiles.empty() ? "" : " ") + (t[0] < 0 ? std::string("-") : fmt::format("{}:{}", t[0], t[1]));
    return fmt::format("{},{},{},{:.6f},{:.6f},{},{},{},{:08x},{}", r.name, r.worker, r.arch, r.start_s, r.end_s,
                       time_cell(r.predicted_s), time_cell(r.model_s), r.model, r.footprint, tiles);
}

namespace detail {
bool trace_enabled() { return g_on.load(std::memory_order_relaxed); }

void trace_callback(void* arg) {
    auto* task = static_cast<starpu_task*>(arg);
    const starpu_profiling_task_info* info = task->profiling_info;
    if (info == nullptr) return;
    TaskRecord r;
    r.name = task->name ? task->name : "?";
    r.worker = info->workerid;
    r.start_s = to_us(info->start_time) / 1e6;
    r.end_s = to_us(info->end_time) / 1e6;
    // StarPU predicts in microseconds. dmda and its variants write 0 when they had no calibrated
    // model and placed the task to measure it; the schedulers that do not predict leave NaN.
    const bool predicted = task->predicted > 0;  // false for NaN too
    if (predicted) r.predicted_s = task->predicted / 1e6;
    const int w = info->workerid;
    starpu_perfmodel* model = task->cl != nullptr ? task->cl->model : nullptr;
    if (w >= 0) {
        r.arch = arch_of(w);
        if (model != nullptr && model->symbol != nullptr) {
            r.model = model->symbol;
            starpu_perfmodel_arch* arch = starpu_worker_get_perf_archtype(w, task->sched_ctx);
            const unsigned impl = starpu_task_get_implementation(task);
            r.footprint = starpu_task_footprint(model, task, arch, impl);
            // Asking an uncalibrated model outside calibration makes StarPU warn and switch
            // calibration on: only ask while it calibrates, or when the scheduler had a prediction.
            if (model->benchmarking || predicted)
                r.model_s = starpu_task_expected_length(task, arch, impl) / 1e6;
        }
    }
    const unsigned nbuffers = STARPU_TASK_GET_NBUFFERS(task);
    for (unsigned b = 0; b < nbuffers; ++b) {
        int dims[2] = {-1, -1};
        if (starpu_data_get_coordinates_array(STARPU_TASK_GET_HANDLE(task, b), 2, dims) < 2) dims[0] = dims[1] = -1;
        r.tiles.push_back({dims[0], dims[1]});
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    g_records.push_back(std::move(r));
}
}  // namespace detail

}  // namespace starfact::codelets
