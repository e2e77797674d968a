// Internal machinery shared by the codelet files: a Codelet object owning a starpu_codelet and
// its performance model, buffer unpacking, argument footprints and task submission.
#pragma once

#include <starpu.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

#include "common/scalar_traits.hpp"
#include "common/tile_view.hpp"

namespace starfact::codelets::detail {

using KernelFn = void (*)(void* buffers[], void* cl_arg);

/// Honours force_impl(), and under Impl::Any asks cpu_admits for CPU workers: set as every
/// codelet's can_execute.
int can_execute(unsigned workerid, starpu_task* task, unsigned nimpl);

/// Whether CPU worker `cpu_worker` may run `task` while GPU workers exist: its predicted time
/// on the CPU (the model's, else an estimate from the task's flops and bytes) is at most
/// Runtime::cpu_max_slowdown() times its predicted time on a GPU worker. Always true without
/// GPU workers (codelets/cpu_admission.cc says why).
bool cpu_admits(starpu_task* task, unsigned cpu_worker);

/// Args structs are trivially copyable and expose key(): the part of them that changes run
/// time. The footprint is the data footprint (tile sizes) combined with that key.
template <class Args>
Args unpack(const void* cl_arg) {
    Args a;
    std::memcpy(&a, cl_arg, sizeof(Args));
    return a;
}

template <class Args>
std::uint32_t footprint(starpu_task* task) {
    const std::uint32_t key = unpack<Args>(task->cl_arg).key();
    return starpu_hash_crc32c_be(key, starpu_task_data_footprint(task));
}

/// A StarPU codelet plus its history-based performance model "starfact_<name>_<s|d>".
class Codelet {
public:
    Codelet(const char* name, char precision, std::initializer_list<starpu_data_access_mode> modes, KernelFn cpu,
            KernelFn cuda, std::uint32_t (*footprint_fn)(starpu_task*));
    Codelet(const Codelet&) = delete;
    Codelet& operator=(const Codelet&) = delete;
    starpu_codelet* get() { return &cl_; }
    const std::string& symbol() const { return symbol_; }
    /// The name every task of this codelet carries, e.g. "potrf_d".
    const char* task_name() const { return task_name_.c_str(); }

private:
    std::string symbol_;
    std::string name_;
    std::string task_name_;
    starpu_perfmodel model_{};
    starpu_codelet cl_{};
};

/// Submits one task of `cl` on `handles` (in the codelet's buffer order) with a copy of
/// `args` that StarPU frees; on worker `worker` when it is >= 0 (static schedules), else where
/// the scheduler decides. Throws RuntimeError if StarPU refuses it.
void submit(Codelet& cl, std::initializer_list<starpu_data_handle_t> handles, const void* args, std::size_t size,
            int priority, double flops, int worker);

/// Submits a filled task of the codelet `symbol` names: with the trace callback while tracing is
/// on (codelets/trace.hpp); a refused task is freed and reported as RuntimeError naming the
/// codelet (-ENODEV: no worker may run it). Also used by the batched codelets.
void submit_task(starpu_task* task, const std::string& symbol);

template <class Args>
void submit(Codelet& cl, std::initializer_list<starpu_data_handle_t> handles, const Args& args, int priority,
            double flops, int worker = -1) {
    submit(cl, handles, &args, sizeof(Args), priority, flops, worker);
}

template <class T>
TileView<T> tile(void* buffer) {
    return {reinterpret_cast<T*>(STARPU_MATRIX_GET_PTR(buffer)), static_cast<int>(STARPU_MATRIX_GET_NX(buffer)),
            static_cast<int>(STARPU_MATRIX_GET_NY(buffer)), static_cast<int>(STARPU_MATRIX_GET_LD(buffer))};
}
template <class T>
TileView<const T> const_tile(void* buffer) {
    const TileView<T> t = tile<T>(buffer);
    return {t.data, t.m, t.n, t.ld};
}
inline int* info_ptr(void* buffer) { return reinterpret_cast<int*>(STARPU_VARIABLE_GET_PTR(buffer)); }
/// Pivot vectors are StarPU vectors of int.
inline int* pivots_ptr(void* buffer) { return reinterpret_cast<int*>(STARPU_VECTOR_GET_PTR(buffer)); }

/// Tile LU's trtri + gemm variant: LuFactors makes the TSTRF L tiles ib x K, or 2 ib x K when they
/// also hold the inverses of the L1 blocks; TSTRF and SSSSM read the variant from that shape.
inline bool lu_l_has_inverses(starpu_data_handle_t L, int ib) {
    return starpu_matrix_get_nx(L) >= 2u * static_cast<unsigned>(ib);
}

inline std::uint32_t chars_key(char a, char b = 0, char c = 0, char d = 0) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(a)) |
           static_cast<std::uint32_t>(static_cast<unsigned char>(b)) << 8 |
           static_cast<std::uint32_t>(static_cast<unsigned char>(c)) << 16 |
           static_cast<std::uint32_t>(static_cast<unsigned char>(d)) << 24;
}

}  // namespace starfact::codelets::detail
