// The batch-slice codelet shared by the fixed-size and variable-size batched tasks.
#include "batched/slice_codelet.hpp"

#include <cstdlib>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "codelets/codelet.hpp"
#include "common/error.hpp"
#include "common/runtime.hpp"

namespace starfact::batched::detail {

SliceCodelet::SliceCodelet(std::string name, char precision, SliceKernel cpu, SliceKernel cuda,
                           const std::vector<starpu_data_access_mode>& modes, std::uint32_t (*footprint)(starpu_task*),
                           std::size_t (*size_base)(starpu_task*, unsigned))
    : name_(std::move(name)),
      symbol_(fmt::format("starfact_{}_{}", name_, precision)),
      task_name_(fmt::format("{}_{}", name_, precision)) {
    model_.type = STARPU_NL_REGRESSION_BASED;
    model_.symbol = symbol_.c_str();
    model_.footprint = footprint;
    model_.size_base = size_base;
    cl_.where = STARPU_CPU;
    cl_.cpu_funcs[0] = cpu;
    cl_.cpu_funcs_name[0] = name_.c_str();
#ifdef STARFACT_HAVE_CUDA
    cl_.where |= STARPU_CUDA;
    cl_.cuda_funcs[0] = cuda;
    cl_.cuda_flags[0] = STARPU_CUDA_ASYNC;
#else
    (void)cuda;
#endif
    cl_.can_execute = codelets::detail::can_execute;  // honours codelets::force_impl
    cl_.nbuffers = static_cast<int>(modes.size());
    for (std::size_t i = 0; i < modes.size(); ++i) cl_.modes[i] = modes[i];
    cl_.model = &model_;
    cl_.name = name_.c_str();
}

void submit_slice(SliceCodelet& cl, const std::vector<starpu_data_handle_t>& handles, const void* args,
                  std::size_t size, double flops) {
    starpu_task* task = starpu_task_create();
    task->cl = cl.get();
    for (std::size_t i = 0; i < handles.size(); ++i) task->handles[i] = handles[i];
    task->cl_arg = std::malloc(size);
    std::memcpy(task->cl_arg, args, size);
    task->cl_arg_size = size;
    task->cl_arg_free = 1;
    task->flops = flops;
    task->name = cl.task_name();
    codelets::detail::submit_task(task, cl.symbol());
}

void require_runtime() {
    if (!Runtime::active())
        throw RuntimeError("batched::tasks needs a started starfact::Runtime (StarPU is not running)");
}

}  // namespace starfact::batched::detail
