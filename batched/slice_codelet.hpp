// The StarPU codelet of a batch slice, shared by the fixed-size (codelet.cc) and variable-size
// (vcodelet.cc) batched tasks: a CPU and a CUDA implementation, a model, and the submission of
// one task per slice. Not installed.
#pragma once

#include <starpu.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/kernel_error.hpp"

namespace starfact::batched::detail {

using SliceKernel = void (*)(void* buffers[], void* cl_arg);

/// A task's argument block as the codelet's Args struct (trivially copyable), whatever its alignment.
template <class Args>
Args unpack_args(const void* cl_arg) {
    Args a;
    std::memcpy(&a, cl_arg, sizeof(Args));
    return a;
}

/// StarPU's CRC32 of the values in order: the footprints of the slice codelets.
inline std::uint32_t hash_values(std::initializer_list<std::uint32_t> values) {
    std::uint32_t h = 0;
    for (std::uint32_t v : values) h = starpu_hash_crc32c_be(v, h);
    return h;
}

/// A codelet named `name` (e.g. "batched_getrf") with its model "starfact_<name>_<s|d>":
/// StarPU's non-linear regression model, which in StarPU 1.3 also keeps the per-footprint
/// history. Once fitted, the curve a * size^b + c (size: size_base) predicts every slice whose
/// size lies within the measured range, seen or not; outside it, the footprint's history
/// predicts (docs/perfmodels.md). cuda is ignored in a build without CUDA.
class SliceCodelet {
public:
    SliceCodelet(std::string name, char precision, SliceKernel cpu, SliceKernel cuda,
                 const std::vector<starpu_data_access_mode>& modes, std::uint32_t (*footprint)(starpu_task*),
                 std::size_t (*size_base)(starpu_task*, unsigned));
    SliceCodelet(const SliceCodelet&) = delete;
    SliceCodelet& operator=(const SliceCodelet&) = delete;
    starpu_codelet* get() { return &cl_; }
    const std::string& symbol() const { return symbol_; }
    const char* task_name() const { return task_name_.c_str(); }

private:
    std::string name_, symbol_, task_name_;
    starpu_perfmodel model_{};
    starpu_codelet cl_{};
};

/// Submits one task of cl on `handles`, with a copy of the `size` bytes at args as its argument
/// and `flops` for the model and the traces (codelets::detail::submit_task, which also reports a
/// refusal).
void submit_slice(SliceCodelet& cl, const std::vector<starpu_data_handle_t>& handles, const void* args,
                  std::size_t size, double flops);

/// Throws RuntimeError when no starfact::Runtime is started: the tasks need StarPU.
void require_runtime();

/// Runs a codelet's body. Codelets never throw: an exception from the kernel layer is recorded
/// ("<module> <what>: <message>", common/kernel_error.hpp) and reported after the wait.
template <class F>
void guarded(const char* module, const char* what, F body) noexcept {
    try {
        body();
    } catch (const std::exception& e) {
        record_kernel_error(fmt::format("{} {}: {}", module, what, e.what()).c_str(), 0);
    } catch (...) {
        record_kernel_error(what, 0);
    }
}

}  // namespace starfact::batched::detail
