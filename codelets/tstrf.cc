// TSTRF codelet: LU with pivoting across the diagonal tile's U and a tile below it; writes the
// inner L factors, the pivots and the local info.
#include "codelets/codelet.hpp"
#include "codelets/codelets.hpp"
#include "codelets/cpu/lu_kernels.hpp"
#include "common/kernel_error.hpp"
#ifdef STARFACT_HAVE_CUDA
#include "codelets/lu_context.hpp"
#endif

namespace starfact::codelets {
namespace {
struct TstrfArgs {
    int ib;
    bool inverse;  // the trtri + gemm variant: L has 2 ib rows, the inverses below L1
    std::uint32_t key() const { return static_cast<std::uint32_t>(ib) * 2u + (inverse ? 1u : 0u); }
};

template <class T>
void tstrf_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<TstrfArgs>(cl_arg);
    *detail::info_ptr(buffers[4]) =
        cpu::tstrf(detail::tile<T>(buffers[0]), detail::tile<T>(buffers[1]), detail::tile<T>(buffers[2]),
                   detail::pivots_ptr(buffers[3]), a.ib, a.inverse);
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void tstrf_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<TstrfArgs>(cl_arg);
    const TileView<T> A = detail::tile<T>(buffers[1]);
    const cuda::PriorityScope panel;  // the TSTRFs of a panel form the critical path
    const cuda::LuContext ctx = detail::lu_context<T>(A.m, A.n, a.ib, panel.stream());
    if (ctx.work == nullptr && ctx.work_bytes > 0) return record_kernel_error("tstrf workspace", 0);
    const cudaError_t e = cuda::tstrf(ctx, detail::tile<T>(buffers[0]), A, detail::tile<T>(buffers[2]),
                                      detail::pivots_ptr(buffers[3]), detail::info_ptr(buffers[4]), a.ib, a.inverse);
    if (e != cudaSuccess) record_kernel_error("cuda tstrf", e);
}
template <class T>
constexpr detail::KernelFn tstrf_cuda_fn = tstrf_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn tstrf_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("tstrf", ScalarTraits<T>::letter, {STARPU_RW, STARPU_RW, STARPU_W, STARPU_W, STARPU_W},
                              tstrf_cpu<T>, tstrf_cuda_fn<T>, detail::footprint<TstrfArgs>);
    return cl;
}
}  // namespace

template <class T>
void submit_tstrf(int ib, starpu_data_handle_t U, starpu_data_handle_t A, starpu_data_handle_t L,
                  starpu_data_handle_t ipiv, starpu_data_handle_t info, int priority, int worker) {
    const double m = static_cast<double>(starpu_matrix_get_nx(A));
    const double k = static_cast<double>(starpu_matrix_get_ny(A));
    const TstrfArgs args{ib, detail::lu_l_has_inverses(L, ib)};
    detail::submit(codelet<T>(), {U, A, L, ipiv, info}, args, priority, m * k * k, worker);  // LU of [U; A]
}

template void submit_tstrf<float>(int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t,
                                  starpu_data_handle_t, starpu_data_handle_t, int, int);
template void submit_tstrf<double>(int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t,
                                   starpu_data_handle_t, starpu_data_handle_t, int, int);

}  // namespace starfact::codelets
