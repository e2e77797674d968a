// GEQRT codelet: Householder QR of a diagonal tile with inner blocking ib; the T factors are
// StarPU data.
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
struct GeqrtArgs {
    int ib;
    std::uint32_t key() const { return static_cast<std::uint32_t>(ib); }
};

template <class T>
void geqrt_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<GeqrtArgs>(cl_arg);
    cpu::geqrt(a.ib, detail::tile<T>(buffers[0]), detail::tile<T>(buffers[1]));
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void geqrt_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<GeqrtArgs>(cl_arg);
    const TileView<T> A = detail::tile<T>(buffers[0]);
    const cuda::PriorityScope panel;  // the head of the critical path
    const cuda::QrContext ctx = detail::qr_context<T>(A.m, A.n, a.ib, panel.stream());
    if (ctx.work == nullptr && ctx.work_bytes > 0) return record_kernel_error("geqrt workspace", 0);
    const cudaError_t e = cuda::geqrt(ctx, a.ib, A, detail::tile<T>(buffers[1]));
    if (e != cudaSuccess) record_kernel_error("cuda geqrt", e);
}
template <class T>
constexpr detail::KernelFn geqrt_cuda_fn = geqrt_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn geqrt_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("geqrt", ScalarTraits<T>::letter, {STARPU_RW, STARPU_W}, geqrt_cpu<T>, geqrt_cuda_fn<T>,
                              detail::footprint<GeqrtArgs>);
    return cl;
}
}  // namespace

template <class T>
void submit_geqrt(int ib, starpu_data_handle_t A, starpu_data_handle_t Tf, int priority, int worker) {
    const double m = static_cast<double>(starpu_matrix_get_nx(A));
    const double n = static_cast<double>(starpu_matrix_get_ny(A));
    const double k = std::min(m, n);
    // Householder QR, K = min(m, n) reflectors: 4 m n K - 2 (m + n) K^2 + 4 K^3 / 3 (leading terms).
    const double flops = 4.0 * m * n * k - 2.0 * (m + n) * k * k + 4.0 * k * k * k / 3.0;
    detail::submit(codelet<T>(), {A, Tf}, GeqrtArgs{ib}, priority, flops, worker);
}

template void submit_geqrt<float>(int, starpu_data_handle_t, starpu_data_handle_t, int, int);
template void submit_geqrt<double>(int, starpu_data_handle_t, starpu_data_handle_t, int, int);

}  // namespace starfact::codelets
