// Execution traces from StarPU's per-task profiling information.
#include "codelets/trace.hpp"

#include <starpu.h>
#include <starpu_profiling.h>

#include <algorithm>
#include <atomic>
#include <mutex>

namespace starfact::codelets {
namespace {
std::atomic<bool> g_on{false};
std::mutex g_mutex;
std::vector<TaskRecord> g_records;

double to_us(const timespec& t) { return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3; }
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

namespace detail {
bool trace_enabled() { return g_on.load(std::memory_order_relaxed); }

void trace_callback(void* arg) {
    const auto* task = static_cast<const starpu_task*>(arg);
    const starpu_profiling_task_info* info = task->profiling_info;
    if (info == nullptr) return;
    std::lock_guard<std::mutex> lock(g_mutex);
    g_records.push_back({task->name ? task->name : "?", info->workerid, to_us(info->start_time) / 1e6,
                         to_us(info->end_time) / 1e6});
}
}  // namespace detail

}  // namespace starfact::codelets
