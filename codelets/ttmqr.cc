// TTMQR codelet: applies a TTQRT's Q or Q^T to the two tiles of a trailing column (the tile of
// the pivot row and the tile of the eliminated head's row; only the top rows of both change).
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
struct TtmqrArgs {
    char trans;
    int ib;
    std::uint32_t key() const { return detail::chars_key(trans) | static_cast<std::uint32_t>(ib) << 8; }
};

template <class T>
void ttmqr_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<TtmqrArgs>(cl_arg);
    cpu::ttmqr(a.trans, a.ib, detail::tile<T>(buffers[0]), detail::tile<T>(buffers[1]),
               detail::const_tile<T>(buffers[2]), detail::const_tile<T>(buffers[3]));
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void ttmqr_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<TtmqrArgs>(cl_arg);
    const TileView<T> A1 = detail::tile<T>(buffers[0]);
    const TileView<T> A2 = detail::tile<T>(buffers[1]);
    const cuda::QrContext ctx = detail::qr_context<T>(std::max(A1.m, A2.m), A2.n, a.ib);
    if (ctx.work == nullptr && ctx.work_bytes > 0) return record_kernel_error("ttmqr workspace", 0);
    const cudaError_t e =
        cuda::ttmqr(ctx, a.trans, a.ib, A1, A2, detail::const_tile<T>(buffers[2]), detail::const_tile<T>(buffers[3]));
    if (e != cudaSuccess) record_kernel_error("cuda ttmqr", e);
}
template <class T>
constexpr detail::KernelFn ttmqr_cuda_fn = ttmqr_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn ttmqr_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("ttmqr", ScalarTraits<T>::letter, {STARPU_RW, STARPU_RW, STARPU_R, STARPU_R},
                              ttmqr_cpu<T>, ttmqr_cuda_fn<T>, detail::footprint<TtmqrArgs>);
    return cl;
}
}  // namespace

template <class T>
void submit_ttmqr(char trans, int ib, starpu_data_handle_t A1, starpu_data_handle_t A2, starpu_data_handle_t V2,
                  starpu_data_handle_t Tf, int priority, int worker) {
    const double m = static_cast<double>(starpu_matrix_get_nx(A2));
    const double n = static_cast<double>(starpu_matrix_get_ny(A2));
    const double k = static_cast<double>(starpu_matrix_get_ny(V2));
    // Reflector j has min(j + 1, m) entries below, applied to the n columns.
    double flops = 0;
    for (double j = 0; j < k; ++j) flops += 4.0 * std::min(j + 1, m) * n;
    detail::submit(codelet<T>(), {A1, A2, V2, Tf}, TtmqrArgs{trans, ib}, priority, flops, worker);
}

template void submit_ttmqr<float>(char, int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t,
                                  starpu_data_handle_t, int, int);
template void submit_ttmqr<double>(char, int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t,
                                   starpu_data_handle_t, int, int);

}  // namespace starfact::codelets
