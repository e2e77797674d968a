// TSQRT codelet: QR of the diagonal tile's R stacked on a tile below it; the tile below becomes
// the reflectors V2, the T factors are StarPU data.
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
struct TsqrtArgs {
    int ib;
    std::uint32_t key() const { return static_cast<std::uint32_t>(ib); }
};

template <class T>
void tsqrt_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<TsqrtArgs>(cl_arg);
    cpu::tsqrt(a.ib, detail::tile<T>(buffers[0]), detail::tile<T>(buffers[1]), detail::tile<T>(buffers[2]));
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void tsqrt_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<TsqrtArgs>(cl_arg);
    const TileView<T> R = detail::tile<T>(buffers[0]);
    const TileView<T> A = detail::tile<T>(buffers[1]);
    const cuda::PriorityScope panel;  // the TSQRTs of a panel form the critical path
    const cuda::QrContext ctx = detail::qr_context<T>(A.m, A.n, a.ib, panel.stream());
    if (ctx.work == nullptr && ctx.work_bytes > 0) return record_kernel_error("tsqrt workspace", 0);
    const cudaError_t e = cuda::tsqrt(ctx, a.ib, R, A, detail::tile<T>(buffers[2]));
    if (e != cudaSuccess) record_kernel_error("cuda tsqrt", e);
}
template <class T>
constexpr detail::KernelFn tsqrt_cuda_fn = tsqrt_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn tsqrt_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("tsqrt", ScalarTraits<T>::letter, {STARPU_RW, STARPU_RW, STARPU_W}, tsqrt_cpu<T>,
                              tsqrt_cuda_fn<T>, detail::footprint<TsqrtArgs>);
    return cl;
}
}  // namespace

template <class T>
void submit_tsqrt(int ib, starpu_data_handle_t R, starpu_data_handle_t A, starpu_data_handle_t Tf, int priority,
                  int worker) {
    const double m = static_cast<double>(starpu_matrix_get_nx(A));
    const double n = static_cast<double>(starpu_matrix_get_ny(A));
    // n reflectors of length 1 + m, each applied to the columns right of it: 2 m n^2.
    detail::submit(codelet<T>(), {R, A, Tf}, TsqrtArgs{ib}, priority, 2.0 * m * n * n, worker);
}

template void submit_tsqrt<float>(int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t, int, int);
template void submit_tsqrt<double>(int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t, int, int);

}  // namespace starfact::codelets
