// Runtime: RAII owner of StarPU (starpu_init/starpu_shutdown) and the per-worker cuBLAS and
// cuSOLVER handles. Create one before any TileMatrix and destroy it after the last one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace starfact {

/// What the caller wants of the runtime; every field left at its default defers to StarPU's
/// environment variables (STARPU_NCPU, STARPU_NCUDA, STARPU_SCHED, ...), which always win.
struct RuntimeOptions {
    int ncpu = -1;           ///< CPU workers; -1: StarPU's choice or STARPU_NCPU
    int ncuda = -1;          ///< CUDA workers; -1: StarPU's choice or STARPU_NCUDA
    std::string sched;       ///< scheduler when STARPU_SCHED is unset; empty: dmdas if a GPU exists
    bool profiling = false;  ///< turn StarPU's task profiling on (traces)
    /// CUDA workers (each with its own stream) per GPU when STARPU_NWORKER_PER_CUDA is
    /// unset: several streams let small kernels (the panel) overlap the trailing updates.
    int workers_per_gpu = 4;
    /// While GPU workers exist, a CPU worker takes a task only if its predicted time there is
    /// at most this many times its predicted time on a GPU worker (codelets/cpu_admission.cc);
    /// infinity admits everything. 0: STARFACT_CPU_MAX_SLOWDOWN (a positive number, or "inf"),
    /// else kDefaultCpuMaxSlowdown.
    double cpu_max_slowdown = 0;
};

/// The default of RuntimeOptions::cpu_max_slowdown.
constexpr double kDefaultCpuMaxSlowdown = 8.0;

/// One worker as StarPU sees it.
struct WorkerInfo {
    int id;
    std::string kind;  ///< "cpu" or "cuda"
    std::string name;  ///< StarPU's description, e.g. "CUDA 0 (NVIDIA H100 80GB HBM3 79.1 GiB 01:00.0)"
};

class Runtime {
public:
    /// Starts StarPU; throws RuntimeError with StarPU's reason if it cannot start (for example
    /// no worker at all). Only one Runtime may exist at a time.
    explicit Runtime(const RuntimeOptions& options = {});
    ~Runtime();
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;
    Runtime(Runtime&&) = delete;
    Runtime& operator=(Runtime&&) = delete;

    int ncpu() const;
    int ncuda() const;
    std::string scheduler() const;
    std::vector<WorkerInfo> workers() const;
    /// One line per GPU in use: "<devid>: <name>, <memory> GiB, <n> workers".
    std::vector<std::string> gpus() const;
    /// The device name of the first CUDA worker's GPU (e.g. "NVIDIA H200"), "" without one.
    std::string gpu_name() const;
    /// The memory StarPU may use on the GPUs of the CUDA workers, summed over devices, in bytes
    /// (the device memory, or STARPU_LIMIT_CUDA_MEM where it is set); 0 without a CUDA worker.
    static std::int64_t cuda_memory_bytes();
    /// The directory holding the performance models (STARPU_PERF_MODEL_DIR or $STARPU_HOME/.starpu/sampling).
    static std::string perfmodel_dir();
    static std::string starpu_version();
    /// True while a Runtime exists.
    static bool active();
    /// The CPU admission limit in effect (RuntimeOptions::cpu_max_slowdown, resolved).
    static double cpu_max_slowdown();
};

/// While one lives, StarPU's workers take no new task and sleep (starpu_pause) instead of
/// polling, so that a host-side loop on every core (matrix generation, layout conversion, the
/// checks) has the cores to itself: with 15 polling workers on 16 cores such a loop runs at a
/// fraction of its speed. Tasks already running finish; the others wait until the last guard
/// goes (starpu_resume). Nothing may wait for a task or a data transfer (starpu_task_wait_*,
/// starpu_data_acquire of a tile that is not in main memory) while a guard lives. Guards nest;
/// without StarPU, or on one of its worker threads, a guard does nothing.
class PausedWorkers {
public:
    PausedWorkers();
    ~PausedWorkers();
    PausedWorkers(const PausedWorkers&) = delete;
    PausedWorkers& operator=(const PausedWorkers&) = delete;

    /// Whether this guard paused the workers (false: a no-op guard).
    bool paused() const { return paused_; }

private:
    bool paused_ = false;
};

}  // namespace starfact
