// TSMQR codelet: applies a TSQRT's Q or Q^T to the two tiles of a trailing column (the tile of
// the diagonal tile's row and the tile of the factored tile's row).
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
struct TsmqrArgs {
    char trans;
    int ib;
    std::uint32_t key() const { return detail::chars_key(trans) | static_cast<std::uint32_t>(ib) << 8; }
};

template <class T>
void tsmqr_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<TsmqrArgs>(cl_arg);
    cpu::tsmqr(a.trans, a.ib, detail::tile<T>(buffers[0]), detail::tile<T>(buffers[1]),
               detail::const_tile<T>(buffers[2]), detail::const_tile<T>(buffers[3]));
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void tsmqr_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<TsmqrArgs>(cl_arg);
    const TileView<T> A1 = detail::tile<T>(buffers[0]);
    const TileView<T> A2 = detail::tile<T>(buffers[1]);
    const cuda::QrContext ctx = detail::qr_context<T>(std::max(A1.m, A2.m), A2.n, a.ib);
    if (ctx.work == nullptr && ctx.work_bytes > 0) return record_kernel_error("tsmqr workspace", 0);
    const cudaError_t e = cuda::tsmqr(ctx, a.trans, a.ib, A1, A2, detail::const_tile<T>(buffers[2]),
                                      detail::const_tile<T>(buffers[3]));
    if (e != cudaSuccess) record_kernel_error("cuda tsmqr", e);
}
template <class T>
constexpr detail::KernelFn tsmqr_cuda_fn = tsmqr_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn tsmqr_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("tsmqr", ScalarTraits<T>::letter, {STARPU_RW, STARPU_RW, STARPU_R, STARPU_R},
                              tsmqr_cpu<T>, tsmqr_cuda_fn<T>, detail::footprint<TsmqrArgs>);
    return cl;
}
}  // namespace

template <class T>
void submit_tsmqr(char trans, int ib, starpu_data_handle_t A1, starpu_data_handle_t A2, starpu_data_handle_t V2,
                  starpu_data_handle_t Tf, int priority, int worker) {
    const double m = static_cast<double>(starpu_matrix_get_nx(A2));
    const double n = static_cast<double>(starpu_matrix_get_ny(A2));
    const double k = static_cast<double>(starpu_matrix_get_ny(V2));
    // K reflectors of length 1 + m applied to n columns: 4 m n K.
    detail::submit(codelet<T>(), {A1, A2, V2, Tf}, TsmqrArgs{trans, ib}, priority, 4.0 * m * n * k, worker);
}

template void submit_tsmqr<float>(char, int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t,
                                  starpu_data_handle_t, int, int);
template void submit_tsmqr<double>(char, int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t,
                                   starpu_data_handle_t, int, int);

}  // namespace starfact::codelets
