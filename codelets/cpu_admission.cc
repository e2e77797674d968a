// Which tasks a CPU worker may take while GPU workers exist: the part of every codelet's
// can_execute that depends on the task's cost on each kind of worker.
//
// StarPU's dmda schedulers send a task whose model has no calibrated entry for some worker to
// that worker, whatever it costs there, and afterwards place it greedily by predicted end time.
// A task that a CPU core runs hundreds of times slower than a GPU (a 1024 x 1024 GEMM: tens of
// milliseconds against tens of microseconds) then either stalls the whole factorization while
// it calibrates, or lands on the critical path. So a CPU worker only admits a task when its
// predicted time there is at most `max_slowdown` times its predicted time on a GPU worker; the
// scheduler still chooses among the workers that admit it.
#include <starpu.h>

#include <cmath>
#include <cstddef>

#include "codelets/codelet.hpp"
#include "common/runtime.hpp"

namespace starfact::codelets::detail {
namespace {

// Rough rates for a task no model has measured yet on a kind of worker. They only need to
// order the two kinds correctly by far more than max_slowdown for large tasks, and to let
// latency-bound small ones through: one core against one of a GPU's streams.
struct Rates {
    double flops_per_us;
    double bytes_per_us;
    double latency_us;
};
constexpr Rates kCpuCore{50e3, 5e3, 2.0};       // 50 GFLOP/s, 5 GB/s, 2 us
constexpr Rates kGpuStream{10e6, 500e3, 20.0};  // 10 TFLOP/s, 500 GB/s, 20 us

double task_bytes(starpu_task* task) {
    double bytes = 0;
    const unsigned n = STARPU_TASK_GET_NBUFFERS(task);
    for (unsigned i = 0; i < n; ++i)
        bytes += static_cast<double>(starpu_data_get_size(STARPU_TASK_GET_HANDLE(task, i)));
    return bytes;
}

/// The model's prediction on `arch` in microseconds, or the rates' estimate when the model has
/// none (uncalibrated: NaN; or zero).
double predicted_us(starpu_task* task, starpu_perfmodel_arch* arch, const Rates& r) {
    const double us = starpu_task_expected_length(task, arch, 0);
    if (std::isfinite(us) && us > 0) return us;
    return r.latency_us + task->flops / r.flops_per_us + task_bytes(task) / r.bytes_per_us;
}

bool decide(starpu_task* task, unsigned cpu_worker) {
    const double limit = Runtime::cpu_max_slowdown();
    if (std::isinf(limit)) return true;
    const int cuda_worker = starpu_worker_get_by_type(STARPU_CUDA_WORKER, 0);
    if (cuda_worker < 0) return true;
    starpu_perfmodel_arch* cpu_arch =
        starpu_worker_get_perf_archtype(static_cast<int>(cpu_worker), STARPU_NMAX_SCHED_CTXS);
    starpu_perfmodel_arch* gpu_arch = starpu_worker_get_perf_archtype(cuda_worker, STARPU_NMAX_SCHED_CTXS);
    return predicted_us(task, cpu_arch, kCpuCore) <= limit * predicted_us(task, gpu_arch, kGpuStream);
}

}  // namespace

bool cpu_admits(starpu_task* task, unsigned cpu_worker) {
    // The scheduler asks every CPU worker about the same task in a row: decide once per task.
    // The job id tells a new task from an old one that reused the same address.
    thread_local const starpu_task* last_task = nullptr;
    thread_local unsigned long last_job = 0;
    thread_local bool last_answer = true;
    const unsigned long job = starpu_task_get_job_id(task);
    if (task != last_task || job != last_job) {
        last_answer = decide(task, cpu_worker);
        last_task = task;
        last_job = job;
    }
    return last_answer;
}

}  // namespace starfact::codelets::detail
