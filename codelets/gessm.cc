// GESSM codelet: applies a diagonal tile's GETRF (row swaps, then L^{-1}) to a tile of its row.
#include "codelets/codelet.hpp"
#include "codelets/codelets.hpp"
#include "codelets/cpu/lu_kernels.hpp"
#include "common/kernel_error.hpp"
#ifdef STARFACT_HAVE_CUDA
#include "codelets/lu_context.hpp"
#endif

namespace starfact::codelets {
namespace {
struct GessmArgs {
    int ib;
    // 2 ib: the footprint the solve had when an inverse variant (odd keys) existed, so that
    // earlier model files keep matching.
    std::uint32_t key() const { return static_cast<std::uint32_t>(ib) * 2u; }
};

template <class T>
void gessm_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<GessmArgs>(cl_arg);
    cpu::gessm(detail::pivots_ptr(buffers[0]), detail::const_tile<T>(buffers[1]), detail::tile<T>(buffers[2]), a.ib);
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void gessm_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<GessmArgs>(cl_arg);
    const TileView<T> A = detail::tile<T>(buffers[2]);
    const cuda::LuContext ctx = detail::lu_context<T>(A.m, A.n, a.ib);
    if (ctx.work == nullptr && ctx.work_bytes > 0) return record_kernel_error("gessm workspace", 0);
    const cudaError_t e =
        cuda::gessm(ctx, detail::pivots_ptr(buffers[0]), detail::const_tile<T>(buffers[1]), A, a.ib);
    if (e != cudaSuccess) record_kernel_error("cuda gessm", e);
}
template <class T>
constexpr detail::KernelFn gessm_cuda_fn = gessm_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn gessm_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("gessm", ScalarTraits<T>::letter, {STARPU_R, STARPU_R, STARPU_RW}, gessm_cpu<T>,
                              gessm_cuda_fn<T>, detail::footprint<GessmArgs>);
    return cl;
}
}  // namespace

template <class T>
void submit_gessm(int ib, starpu_data_handle_t ipiv, starpu_data_handle_t D, starpu_data_handle_t A, int priority,
                  int worker) {
    const double k = static_cast<double>(starpu_matrix_get_nx(A));
    const double n = static_cast<double>(starpu_matrix_get_ny(A));
    detail::submit(codelet<T>(), {ipiv, D, A}, GessmArgs{ib}, priority, n * k * k, worker);  // unit-lower trsm
}

template void submit_gessm<float>(int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t, int, int);
template void submit_gessm<double>(int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t, int, int);

}  // namespace starfact::codelets
