// GETRF codelet: LU with partial pivoting of a diagonal tile (inner blocking ib); pivots and
// LAPACK's local info are StarPU data.
#include "codelets/codelet.hpp"
#include "codelets/codelets.hpp"
#include "codelets/cpu/lu_kernels.hpp"
#include "common/kernel_error.hpp"
#ifdef STARFACT_HAVE_CUDA
#include "codelets/lu_context.hpp"
#endif

namespace starfact::codelets {
namespace {
struct GetrfArgs {
    int ib;
    std::uint32_t key() const { return static_cast<std::uint32_t>(ib); }
};

template <class T>
void getrf_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<GetrfArgs>(cl_arg);
    *detail::info_ptr(buffers[2]) = cpu::getrf(detail::tile<T>(buffers[0]), detail::pivots_ptr(buffers[1]), a.ib);
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void getrf_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<GetrfArgs>(cl_arg);
    const TileView<T> A = detail::tile<T>(buffers[0]);
    const cuda::PriorityScope panel;  // the head of the critical path
    const cuda::LuContext ctx = detail::lu_context<T>(A.m, A.n, a.ib, panel.stream());
    if (ctx.work == nullptr && ctx.work_bytes > 0) return record_kernel_error("getrf workspace", 0);
    const cudaError_t e = cuda::getrf(ctx, A, detail::pivots_ptr(buffers[1]), detail::info_ptr(buffers[2]), a.ib);
    if (e != cudaSuccess) record_kernel_error("cuda getrf", e);
}
template <class T>
constexpr detail::KernelFn getrf_cuda_fn = getrf_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn getrf_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("getrf", ScalarTraits<T>::letter, {STARPU_RW, STARPU_W, STARPU_W}, getrf_cpu<T>,
                              getrf_cuda_fn<T>, detail::footprint<GetrfArgs>);
    return cl;
}
}  // namespace

template <class T>
void submit_getrf(int ib, starpu_data_handle_t A, starpu_data_handle_t ipiv, starpu_data_handle_t info, int priority,
                  int worker) {
    const double m = static_cast<double>(starpu_matrix_get_nx(A));
    const double n = static_cast<double>(starpu_matrix_get_ny(A));
    // LAPACK's count for m >= n: m n^2 - n^3/3 (leading terms).
    const double flops = m * n * n - n * n * n / 3.0;
    detail::submit(codelet<T>(), {A, ipiv, info}, GetrfArgs{ib}, priority, flops, worker);
}

template void submit_getrf<float>(int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t, int, int);
template void submit_getrf<double>(int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t, int, int);

}  // namespace starfact::codelets
