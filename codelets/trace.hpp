// Execution traces: when on, every task submitted through the codelets records its name, its
// worker, when it started and ended (StarPU's task profiling), the tile coordinates of its
// buffers, its model's footprint and the time the scheduler predicted for it, for the
// benchmarks, `starfact ... --trace` and `starfact calibrate`. Off by default: it enables
// StarPU's profiling, which costs a little.
#pragma once

#include <starpu.h>

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace starfact::codelets {

/// One executed task. Times in seconds since the trace started.
struct TaskRecord {
    std::string name;  // the task name, e.g. "ssssm_d"
    int worker;
    double start_s, end_s;
    std::string model;  ///< the performance model's symbol, e.g. "starfact_ssssm_d" ("" without one)
    std::string arch;   ///< the worker's architecture as the models name it: "cpu", "cuda0", ...
    std::uint32_t footprint = 0;  ///< the model's footprint of this task on that architecture
    /// What the scheduler expected the task to take on its worker when it placed it (dmda and
    /// its variants); NaN when it had no calibrated model and placed the task to measure it (it
    /// then writes 0), or when the scheduler does not predict (eager, lws, ...).
    double predicted_s = std::numeric_limits<double>::quiet_NaN();
    /// The model's expectation for this footprint and architecture once the task ended (NaN
    /// while the model has fewer than STARPU_CALIBRATE_MINIMUM samples): calibrated or not.
    double model_s = std::numeric_limits<double>::quiet_NaN();
    /// Per buffer, in the codelet's order, the tile coordinates (row, column) set with
    /// set_tile_coordinates; {-1, -1} for a buffer without (pivots, info, L/T factors, copies).
    std::vector<std::array<int, 2>> tiles;
};

/// Starts recording (clears what an earlier trace left); needs a started Runtime.
void start_trace();
/// Stops recording and returns the tasks that ended since start_trace(), in completion order.
std::vector<TaskRecord> stop_trace();

/// Marks `tile` as tile (i, j) of its matrix for the traces (StarPU's data coordinates).
void set_tile_coordinates(starpu_data_handle_t tile, int i, int j);

/// set_tile_coordinates on every tile of a tile matrix (anything with mt(), nt() and (i, j)).
template <class Matrix>
void label_tiles(const Matrix& A) {
    for (int j = 0; j < A.nt(); ++j)
        for (int i = 0; i < A.mt(); ++i) set_tile_coordinates(A(i, j), i, j);
}

/// The columns of a trace file and one task as CSV (no line end): task, worker, arch, start_s,
/// end_s, predicted_s, model_s, model, footprint (hex), tiles ("i:j" per buffer separated by
/// spaces, "-" for a buffer without coordinates). NaN times are written "nan".
std::string trace_csv_header();
std::string trace_csv_line(const TaskRecord& r);

namespace detail {
bool trace_enabled();
/// The callback submit() installs on every task while a trace is on; arg is the task.
void trace_callback(void* arg);
}  // namespace detail

}  // namespace starfact::codelets
