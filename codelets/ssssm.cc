// SSSSM codelet: applies a TSTRF's swaps and L factors to the two tiles of a trailing column.
#include "codelets/codelet.hpp"
#include "codelets/codelets.hpp"
#include "codelets/cpu/lu_kernels.hpp"
#include "common/kernel_error.hpp"
#ifdef STARFACT_HAVE_CUDA
#include "codelets/lu_context.hpp"
#endif

namespace starfact::codelets {
namespace {
struct SsssmArgs {
    int ib;
    bool inverse;  // the trtri + gemm variant: L has 2 ib rows, the inverses below L1
    std::uint32_t key() const { return static_cast<std::uint32_t>(ib) * 2u + (inverse ? 1u : 0u); }
};

template <class T>
void ssssm_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<SsssmArgs>(cl_arg);
    cpu::ssssm(detail::tile<T>(buffers[0]), detail::tile<T>(buffers[1]), detail::const_tile<T>(buffers[2]),
               detail::const_tile<T>(buffers[3]), detail::pivots_ptr(buffers[4]), a.ib);
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void ssssm_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<SsssmArgs>(cl_arg);
    const TileView<T> A2 = detail::tile<T>(buffers[1]);
    const cuda::LuContext ctx = detail::lu_context<T>(A2.m, A2.n, a.ib);
    if (ctx.work == nullptr && ctx.work_bytes > 0) return record_kernel_error("ssssm workspace", 0);
    const cudaError_t e = cuda::ssssm(ctx, detail::tile<T>(buffers[0]), A2, detail::const_tile<T>(buffers[2]),
                                      detail::const_tile<T>(buffers[3]), detail::pivots_ptr(buffers[4]), a.ib,
                                      a.inverse);
    if (e != cudaSuccess) record_kernel_error("cuda ssssm", e);
}
template <class T>
constexpr detail::KernelFn ssssm_cuda_fn = ssssm_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn ssssm_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("ssssm", ScalarTraits<T>::letter, {STARPU_RW, STARPU_RW, STARPU_R, STARPU_R, STARPU_R},
                              ssssm_cpu<T>, ssssm_cuda_fn<T>, detail::footprint<SsssmArgs>);
    return cl;
}
}  // namespace

template <class T>
void submit_ssssm(int ib, starpu_data_handle_t A1, starpu_data_handle_t A2, starpu_data_handle_t L,
                  starpu_data_handle_t AL, starpu_data_handle_t ipiv, int priority, int worker) {
    const double m = static_cast<double>(starpu_matrix_get_nx(A2));
    const double n = static_cast<double>(starpu_matrix_get_ny(A2));
    const double k = static_cast<double>(starpu_matrix_get_ny(AL));
    const SsssmArgs args{ib, detail::lu_l_has_inverses(L, ib)};
    detail::submit(codelet<T>(), {A1, A2, L, AL, ipiv}, args, priority, 2.0 * m * n * k, worker);
}

template void submit_ssssm<float>(int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t,
                                  starpu_data_handle_t, starpu_data_handle_t, int, int);
template void submit_ssssm<double>(int, starpu_data_handle_t, starpu_data_handle_t, starpu_data_handle_t,
                                   starpu_data_handle_t, starpu_data_handle_t, int, int);

}  // namespace starfact::codelets
