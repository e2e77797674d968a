// TTQRT codelet: QR of a pivot tile's R stacked on the R of another tile row's head (both upper
// triangles); that upper triangle becomes the reflectors V2, the T factors are StarPU data.
#include <algorithm>

#include "codelets/codelet.hpp"
#include "codelets/codelets.hpp"
#include "codelets/cpu/qr_kernels.hpp"
#include "common/kernel_error.hpp"
#ifdef STARFACT_HAVE_CUDA
#include "codelets/qr_context.hpp"
#endif

namespace starfact::codelets {
namespace {
struct TtqrtArgs {
    int ib;
    std::uint32_t key() const { return static_cast<std::uint32_t>(ib); }
};

template <class T>
void ttqrt_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<TtqrtArgs>(cl_arg);
    cpu::ttqrt(a.ib, detail::tile<T>(buffers[0]), detail::tile<T>(buffers[1]), detail::tile<T>(buffers[2]));
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void ttqrt_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<TtqrtArgs>(cl_arg);
    const TileView<T> R = detail::tile<T>(buffers[0]);
    const TileView<T> A = detail::tile<T>(buffers[1]);
    const cuda::PriorityScope panel;  // the TTQRTs of a panel's tree are on the critical path
    const cuda::QrContext ctx = detail::qr_context<T>(A.m, A.n, a.ib, panel.stream());
    if (ctx.work == nullptr && ctx.work_bytes > 0) return record_kernel_error("ttqrt workspace", 0);
    const cudaError_t e = cuda::ttqrt(ctx, a.ib, R, A, detail::tile<T>(buffers[2]));
    if (e != cudaSuccess) record_kernel_error("cuda ttqrt", e);
}
template <class T>
constexpr detail::KernelFn ttqrt_cuda_fn = ttqrt_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn ttqrt_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("ttqrt", ScalarTraits<T>::letter, {STARPU_RW, STARPU_RW, STARPU_W}, ttqrt_cpu<T>,
                              ttqrt_cuda_fn<T>, detail::footprint<TtqrtArgs>);
    return cl;
}
}  // namespace

template <class T>
void submit_ttqrt(int ib, starpu_data_handle_t R, starpu_data_handle_t A, starpu_data_handle_t Tf, int priority,
                  int worker) {
    const double m = static_cast<double>(starpu_matrix_get_nx(A));
    const double n = static_cast<double>(starpu_matrix_get_ny(A));
    // Reflector j has min(j + 1, m) entries below, applied to the n - j columns from j on.
    double flops = 0;
    for (double j = 0; j < n; ++j) flops += 4.0 * std::min(j + 1, m) * (n - j);
    detail::submit(codelet<T>(), {R, A, Tf}, TtqrtArgs{ib}, priority, flops, worker);
}

template void submit_ttqrt<float>(int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t, int, int);
template void submit_ttqrt<double>(int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t, int, int);

}  // namespace starfact::codelets
