// UNMQR codelet: applies a diagonal tile's GEQRT (Q or Q^T, from the left) to a tile of its row.
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
struct UnmqrArgs {
    char trans;
    int ib;
    std::uint32_t key() const { return detail::chars_key(trans) | static_cast<std::uint32_t>(ib) << 8; }
};

template <class T>
void unmqr_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<UnmqrArgs>(cl_arg);
    cpu::unmqr('L', a.trans, a.ib, detail::const_tile<T>(buffers[0]), detail::const_tile<T>(buffers[1]),
               detail::tile<T>(buffers[2]));
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void unmqr_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<UnmqrArgs>(cl_arg);
    const TileView<T> C = detail::tile<T>(buffers[2]);
    const cuda::QrContext ctx = detail::qr_context<T>(C.m, C.n, a.ib);
    if (ctx.work == nullptr && ctx.work_bytes > 0) return record_kernel_error("unmqr workspace", 0);
    const cudaError_t e = cuda::unmqr(ctx, 'L', a.trans, a.ib, detail::const_tile<T>(buffers[0]),
                                      detail::const_tile<T>(buffers[1]), C);
    if (e != cudaSuccess) record_kernel_error("cuda unmqr", e);
}
template <class T>
constexpr detail::KernelFn unmqr_cuda_fn = unmqr_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn unmqr_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("unmqr", ScalarTraits<T>::letter, {STARPU_R, STARPU_R, STARPU_RW}, unmqr_cpu<T>,
                              unmqr_cuda_fn<T>, detail::footprint<UnmqrArgs>);
    return cl;
}
}  // namespace

template <class T>
void submit_unmqr(char trans, int ib, starpu_data_handle_t V, starpu_data_handle_t Tf, starpu_data_handle_t C,
                  int priority, int worker) {
    const double m = static_cast<double>(starpu_matrix_get_nx(C));
    const double n = static_cast<double>(starpu_matrix_get_ny(C));
    const double k =
        std::min(static_cast<double>(starpu_matrix_get_nx(V)), static_cast<double>(starpu_matrix_get_ny(V)));
    // K reflectors of length m - j applied to n columns: 4 m n K - 2 n K^2.
    detail::submit(codelet<T>(), {V, Tf, C}, UnmqrArgs{trans, ib}, priority, 4.0 * m * n * k - 2.0 * n * k * k,
                   worker);
}

template void submit_unmqr<float>(char, int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t, int,
                                  int);
template void submit_unmqr<double>(char, int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t, int,
                                   int);

}  // namespace starfact::codelets
