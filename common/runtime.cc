// Runtime: starts and stops StarPU, picks the default scheduler, sets up per-worker handles.
#include "common/runtime.hpp"

#include <cblas.h>
#include <starpu.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/host_pool.hpp"
#include "common/kernel_error.hpp"
#ifdef STARFACT_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "common/cuda_workers.hpp"
#endif

namespace starfact {
namespace {
std::atomic<bool> g_active{false};
std::atomic<double> g_cpu_max_slowdown{kDefaultCpuMaxSlowdown};

/// RuntimeOptions::cpu_max_slowdown resolved against the environment; ArgumentError naming the
/// variable for a value that is not a positive number or "inf".
double resolve_cpu_max_slowdown(double option) {
    if (option != 0) {
        require(option > 0, "cpu_max_slowdown", fmt::format("must be positive, got {}", option));
        return option;
    }
    const char* v = std::getenv("STARFACT_CPU_MAX_SLOWDOWN");
    if (v == nullptr || *v == '\0') return kDefaultCpuMaxSlowdown;
    char* end = nullptr;
    const double r = std::strtod(v, &end);
    require(end != v && *end == '\0' && r > 0 && !std::isnan(r), "STARFACT_CPU_MAX_SLOWDOWN",
            fmt::format("'{}' is not a positive number or inf", v));
    return r;
}

bool env_set(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0';
}

int visible_cuda_devices() {
#ifdef STARFACT_HAVE_CUDA
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no driver" error
        return 0;
    }
    return count;
#else
    return 0;
#endif
}
}  // namespace

Runtime::Runtime(const RuntimeOptions& options) {
    if (g_active.exchange(true)) throw RuntimeError("a starfact::Runtime already exists in this process");
    try {
        g_cpu_max_slowdown = resolve_cpu_max_slowdown(options.cpu_max_slowdown);
    } catch (...) {
        g_active = false;
        throw;
    }
    starpu_conf conf;
    starpu_conf_init(&conf);
    if (options.ncpu >= 0) conf.ncpus = options.ncpu;
    if (options.ncuda >= 0) conf.ncuda = options.ncuda;
    // STARPU_SCHED always wins (StarPU reads it after the conf); otherwise dmdas when a GPU
    // worker can exist, since its calibrated models place work by measured speed.
    std::string sched = options.sched;
    if (sched.empty() && !env_set("STARPU_SCHED") && options.ncuda != 0 && visible_cuda_devices() > 0) sched = "dmdas";
    if (!sched.empty()) conf.sched_policy_name = sched.c_str();
    // With a GPU, one core is left to the thread that submits the tasks (StarPU's
    // reserve_ncpus): StarPU's workers poll while idle, and a submitting thread that shares a
    // core with one of them starts the GPU's tasks late (docs/design.md, "A core for the
    // submitting thread"). Whoever sets the CPU count, or a reservation, decides instead.
    if (options.ncpu < 0 && !env_set("STARPU_NCPU") && !env_set("STARPU_NCPUS") && !env_set("STARPU_RESERVE_NCPU") &&
        !env_set("STARPU_MAIN_THREAD_BIND") && options.ncuda != 0 &&
        !(env_set("STARPU_NCUDA") && std::atoi(std::getenv("STARPU_NCUDA")) == 0) && visible_cuda_devices() > 0)
        conf.reserve_ncpus = 1;
    if (!env_set("STARPU_NWORKER_PER_CUDA") && options.workers_per_gpu > 0)
        setenv("STARPU_NWORKER_PER_CUDA", std::to_string(options.workers_per_gpu).c_str(), 0);
    // CPU workers each run single-threaded BLAS; StarPU provides the parallelism.
    openblas_set_num_threads(1);
    const int ret = starpu_init(&conf);
    if (ret != 0) {
        g_active = false;
        if (ret == -ENODEV)
            throw RuntimeError(
                "StarPU found no worker to run tasks on (check STARPU_NCPU / STARPU_NCUDA and the GPUs visible)");
        throw RuntimeError(fmt::format("starpu_init failed: {}", std::strerror(-ret)));
    }
    if (options.profiling) starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
#ifdef STARFACT_HAVE_CUDA
    if (starpu_cuda_worker_get_count() > 0) {
        starpu_cublas_init();
        cuda::init_workers();
    }
#endif
    // The set-up above runs as tasks on the workers: start with nothing in flight.
    starpu_task_wait_for_all();
}

Runtime::~Runtime() {
    starpu_task_wait_for_all();
    host_pool::clear();  // pinned buffers are freed through StarPU's CUDA context
#ifdef STARFACT_HAVE_CUDA
    if (starpu_cuda_worker_get_count() > 0) {
        cuda::shutdown_workers();
        starpu_cublas_shutdown();
    }
#endif
    starpu_shutdown();
    g_active = false;
}

int Runtime::ncpu() const { return static_cast<int>(starpu_cpu_worker_get_count()); }
int Runtime::ncuda() const { return static_cast<int>(starpu_cuda_worker_get_count()); }

std::string Runtime::scheduler() const {
    starpu_sched_policy* policy = starpu_sched_ctx_get_sched_policy(0 /* the initial context */);
    return policy && policy->policy_name ? policy->policy_name : "unknown";
}

std::vector<WorkerInfo> Runtime::workers() const {
    std::vector<WorkerInfo> out;
    const unsigned n = starpu_worker_get_count();
    for (unsigned w = 0; w < n; ++w) {
        char name[256];
        starpu_worker_get_name(static_cast<int>(w), name, sizeof(name));
        const auto type = starpu_worker_get_type(static_cast<int>(w));
        out.push_back({static_cast<int>(w),
                       type == STARPU_CUDA_WORKER  ? "cuda"
                       : type == STARPU_CPU_WORKER ? "cpu"
                                                   : "other",
                       name});
    }
    return out;
}

std::vector<std::string> Runtime::gpus() const {
    std::vector<std::string> out;
#ifdef STARFACT_HAVE_CUDA
    std::map<int, std::pair<std::string, int>> devices;  // devid -> (description, workers)
    const unsigned n = starpu_worker_get_count();
    for (unsigned w = 0; w < n; ++w) {
        if (starpu_worker_get_type(static_cast<int>(w)) != STARPU_CUDA_WORKER) continue;
        const int dev = starpu_worker_get_devid(static_cast<int>(w));
        auto& d = devices[dev];
        if (d.second++ == 0) {
            const cudaDeviceProp* p = starpu_cuda_get_device_properties(w);
            d.first = p ? fmt::format("{}, {:.1f} GiB", p->name, static_cast<double>(p->totalGlobalMem) / (1 << 30))
                        : "unknown";
        }
    }
    for (const auto& [dev, d] : devices) out.push_back(fmt::format("{}: {}, {} workers", dev, d.first, d.second));
#endif
    return out;
}

std::string Runtime::gpu_name() const {
#ifdef STARFACT_HAVE_CUDA
    const int w = starpu_worker_get_by_type(STARPU_CUDA_WORKER, 0);
    if (w >= 0)
        if (const cudaDeviceProp* p = starpu_cuda_get_device_properties(static_cast<unsigned>(w))) return p->name;
#endif
    return "";
}

std::int64_t Runtime::cuda_memory_bytes() {
    std::int64_t total = 0;
    std::vector<unsigned> seen;
    const unsigned nw = starpu_worker_get_count();
    for (unsigned w = 0; w < nw; ++w) {
        if (starpu_worker_get_type(static_cast<int>(w)) != STARPU_CUDA_WORKER) continue;
        const unsigned node = starpu_worker_get_memory_node(w);
        // Several workers (streams) of one GPU share its memory node: count it once.
        if (std::find(seen.begin(), seen.end(), node) != seen.end()) continue;
        seen.push_back(node);
        const starpu_ssize_t bytes = starpu_memory_get_total(node);
        if (bytes > 0) total += bytes;
    }
    return total;
}

std::string Runtime::perfmodel_dir() {
    if (env_set("STARPU_PERF_MODEL_DIR")) return std::getenv("STARPU_PERF_MODEL_DIR");
    std::string home;
    if (env_set("STARPU_HOME"))
        home = std::getenv("STARPU_HOME");
    else if (env_set("HOME"))
        home = std::getenv("HOME");
    return home + "/.starpu/sampling";
}

std::string Runtime::starpu_version() {
    int major = 0, minor = 0, release = 0;
    starpu_get_version(&major, &minor, &release);
    return fmt::format("{}.{}.{}", major, minor, release);
}

bool Runtime::active() { return g_active.load(); }
double Runtime::cpu_max_slowdown() { return g_cpu_max_slowdown.load(); }

namespace {
// starpu_pause's depth counter is not atomic: guards on several threads take turns here.
std::mutex g_pause_mutex;
}  // namespace

PausedWorkers::PausedWorkers() {
    if (!starpu_is_initialized() || starpu_worker_get_id() >= 0) return;
    std::lock_guard<std::mutex> lock(g_pause_mutex);
    starpu_pause();
    paused_ = true;
}

PausedWorkers::~PausedWorkers() {
    if (!paused_) return;
    std::lock_guard<std::mutex> lock(g_pause_mutex);
    starpu_resume();
}

}  // namespace starfact

// ---- kernel errors ------------------------------------------------------------------------
namespace starfact {
namespace {
std::mutex g_error_mutex;
std::string g_error;
}  // namespace

void record_kernel_error(const char* what, long code) {
    std::lock_guard<std::mutex> lock(g_error_mutex);
    if (g_error.empty()) g_error = fmt::format("{} failed with status {}", what, code);
}

std::string take_kernel_error() {
    std::lock_guard<std::mutex> lock(g_error_mutex);
    std::string e;
    e.swap(g_error);
    return e;
}

void throw_if_kernel_error() {
    std::string e = take_kernel_error();
    if (!e.empty()) throw RuntimeError("a kernel failed: " + e);
}

}  // namespace starfact
