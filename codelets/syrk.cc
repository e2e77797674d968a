// SYRK codelet: symmetric rank-k update of a diagonal tile, C = alpha op(A) op(A)^T + beta C.
#include "codelets/codelet.hpp"
#include "codelets/codelets.hpp"
#include "codelets/cpu/tile_kernels.hpp"
#include "common/kernel_error.hpp"
#ifdef STARFACT_HAVE_CUDA
#include "codelets/cuda/tile_kernels.hpp"
#include "common/cuda_workers.hpp"
#endif

namespace starfact::codelets {
namespace {
template <class T>
struct SyrkArgs {
    char uplo, trans;
    T alpha, beta;
    std::uint32_t key() const { return detail::chars_key(uplo, trans); }
};

template <class T>
void syrk_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<SyrkArgs<T>>(cl_arg);
    cpu::syrk(a.uplo, a.trans, a.alpha, detail::const_tile<T>(buffers[0]), a.beta, detail::tile<T>(buffers[1]));
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void syrk_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<SyrkArgs<T>>(cl_arg);
    const cublasStatus_t st = cuda::syrk(cuda::blas_handle(), a.uplo, a.trans, a.alpha,
                                         detail::const_tile<T>(buffers[0]), a.beta, detail::tile<T>(buffers[1]));
    if (st != CUBLAS_STATUS_SUCCESS) record_kernel_error("cublas syrk", st);
}
template <class T>
constexpr detail::KernelFn syrk_cuda_fn = syrk_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn syrk_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("syrk", ScalarTraits<T>::letter, {STARPU_R, STARPU_RW}, syrk_cpu<T>, syrk_cuda_fn<T>,
                              detail::footprint<SyrkArgs<T>>);
    return cl;
}
}  // namespace

template <class T>
void submit_syrk(char uplo, char trans, T alpha, starpu_data_handle_t A, T beta, starpu_data_handle_t C,
                 int priority) {
    const double n = static_cast<double>(starpu_matrix_get_nx(C));
    const double k = static_cast<double>((trans == 'N' || trans == 'n') ? starpu_matrix_get_ny(A)
                                                                        : starpu_matrix_get_nx(A));
    detail::submit(codelet<T>(), {A, C}, SyrkArgs<T>{uplo, trans, alpha, beta}, priority, k * n * (n + 1));
}

template void submit_syrk<float>(char, char, float, starpu_data_handle_t, float, starpu_data_handle_t, int);
template void submit_syrk<double>(char, char, double, starpu_data_handle_t, double, starpu_data_handle_t, int);

}  // namespace starfact::codelets
