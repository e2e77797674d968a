// Execution traces: when on, every task submitted through the codelets records its name, its
// worker and when it started and ended (StarPU's task profiling), for the benchmarks and for
// `starfact ... --trace`. Off by default: it enables StarPU's profiling, which costs a little.
#pragma once

#include <string>
#include <vector>

namespace starfact::codelets {

/// One executed task. Times in seconds since the trace started.
struct TaskRecord {
    std::string name;  // the task name, e.g. "ssssm_d"
    int worker;
    double start_s, end_s;
};

/// Starts recording (clears what an earlier trace left); needs a started Runtime.
void start_trace();
/// Stops recording and returns the tasks that ended since start_trace(), in completion order.
std::vector<TaskRecord> stop_trace();

namespace detail {
bool trace_enabled();
/// The callback submit() installs on every task while a trace is on; arg is the task.
void trace_callback(void* arg);
}  // namespace detail

}  // namespace starfact::codelets
