// Codelet machinery: construction of codelets and models, forced implementation, submission.
#include "codelets/codelet.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <vector>

#include <fmt/format.h>

#include "codelets/codelets.hpp"
#include "codelets/trace.hpp"
#include "common/error.hpp"

namespace starfact::codelets {
namespace {
std::atomic<Impl> g_forced{Impl::Any};
// Every codelet file adds its name here, so the models can be listed before any task ran.
constexpr const char* kCodeletNames[] = {"potrf", "trsm",  "syrk",  "gemm",  "getrf", "lacpy", "gessm", "tstrf",
                                         "ssssm", "geqrt", "unmqr", "tsqrt", "tsmqr", "ttqrt", "ttmqr", "generate"};
}  // namespace

void force_impl(Impl impl) { g_forced = impl; }
Impl forced_impl() { return g_forced.load(); }

std::vector<std::string> perfmodel_symbols() {
    std::vector<std::string> s;
    for (const char* name : kCodeletNames)
        for (char precision : {'s', 'd'}) s.push_back(fmt::format("starfact_{}_{}", name, precision));
    return s;
}

std::vector<int> eligible_workers() {
    std::vector<int> out;
    const int n = static_cast<int>(starpu_worker_get_count());
    for (int w = 0; w < n; ++w)
        if (detail::can_execute(static_cast<unsigned>(w), nullptr, 0)) out.push_back(w);
    return out;
}

namespace detail {

int can_execute(unsigned workerid, starpu_task* task, unsigned) {
    const bool cpu = starpu_worker_get_type(static_cast<int>(workerid)) == STARPU_CPU_WORKER;
    switch (g_forced.load()) {
        case Impl::Cpu:
            return cpu;
        case Impl::Cuda:
            return starpu_worker_get_type(static_cast<int>(workerid)) == STARPU_CUDA_WORKER;
        case Impl::Any:
            break;
    }
    // A null task: which workers may run anything at all (eligible_workers).
    return !cpu || task == nullptr || cpu_admits(task, workerid);
}

Codelet::Codelet(const char* name, char precision, std::initializer_list<starpu_data_access_mode> modes, KernelFn cpu,
                 KernelFn cuda, std::uint32_t (*footprint_fn)(starpu_task*))
    : symbol_(fmt::format("starfact_{}_{}", name, precision)),
      name_(name),
      task_name_(fmt::format("{}_{}", name, precision)) {
    // History only, edge tiles included (their own footprints): StarPU 1.3's regression model
    // would predict the full tiles by its curve too, instead of their exact means
    // (docs/perfmodels.md, "Edge tiles").
    model_.type = STARPU_HISTORY_BASED;
    model_.symbol = symbol_.c_str();
    model_.footprint = footprint_fn;

    cl_.where = STARPU_CPU;
    cl_.cpu_funcs[0] = cpu;
    cl_.cpu_funcs_name[0] = name_.c_str();
#ifdef STARFACT_HAVE_CUDA
    if (cuda) {
        cl_.where |= STARPU_CUDA;
        cl_.cuda_funcs[0] = cuda;
        cl_.cuda_flags[0] = STARPU_CUDA_ASYNC;
    }
#else
    (void)cuda;
#endif
    cl_.can_execute = can_execute;
    cl_.nbuffers = static_cast<int>(modes.size());
    int i = 0;
    for (starpu_data_access_mode m : modes) cl_.modes[i++] = m;
    cl_.model = &model_;
    cl_.name = name_.c_str();
}

void submit(Codelet& cl, std::initializer_list<starpu_data_handle_t> handles, const void* args, std::size_t size,
            int priority, double flops, int worker) {
    starpu_task* task = starpu_task_create();
    if (worker >= 0) {
        task->execute_on_a_specific_worker = 1;
        task->workerid = static_cast<unsigned>(worker);
    }
    task->cl = cl.get();
    int i = 0;
    for (starpu_data_handle_t h : handles) task->handles[i++] = h;
    task->cl_arg = std::malloc(size);
    std::memcpy(task->cl_arg, args, size);
    task->cl_arg_size = size;
    task->cl_arg_free = 1;
    task->priority = priority;
    task->flops = flops;
    task->name = cl.task_name();
    submit_task(task, cl.symbol());
}

void submit_task(starpu_task* task, const std::string& symbol) {
    if (trace_enabled()) {
        task->callback_func = trace_callback;
        task->callback_arg = task;
    }
    const int ret = starpu_task_submit(task);
    if (ret != 0) {
        task->destroy = 0;  // a refused task is ours to free
        starpu_task_destroy(task);
        if (ret == -ENODEV)
            throw RuntimeError(
                fmt::format("no worker can run codelet '{}' (forced implementation or no such worker)", symbol));
        throw RuntimeError(fmt::format("starpu_task_submit({}) failed: {}", symbol, ret));
    }
}

}  // namespace detail
}  // namespace starfact::codelets
