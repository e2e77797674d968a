// GEMM codelet: C = alpha op(A) op(B) + beta C on tiles.
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
struct GemmArgs {
    char transa, transb;
    T alpha, beta;
    std::uint32_t key() const { return detail::chars_key(transa, transb); }
};

template <class T>
void gemm_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<GemmArgs<T>>(cl_arg);
    cpu::gemm(a.transa, a.transb, a.alpha, detail::const_tile<T>(buffers[0]), detail::const_tile<T>(buffers[1]),
              a.beta, detail::tile<T>(buffers[2]));
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void gemm_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<GemmArgs<T>>(cl_arg);
    const cublasStatus_t st =
        cuda::gemm(cuda::blas_handle(), a.transa, a.transb, a.alpha, detail::const_tile<T>(buffers[0]),
                   detail::const_tile<T>(buffers[1]), a.beta, detail::tile<T>(buffers[2]));
    if (st != CUBLAS_STATUS_SUCCESS) record_kernel_error("cublas gemm", st);
}
template <class T>
constexpr detail::KernelFn gemm_cuda_fn = gemm_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn gemm_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("gemm", ScalarTraits<T>::letter, {STARPU_R, STARPU_R, STARPU_RW}, gemm_cpu<T>,
                              gemm_cuda_fn<T>, detail::footprint<GemmArgs<T>>);
    return cl;
}
}  // namespace

template <class T>
void submit_gemm(char transa, char transb, T alpha, starpu_data_handle_t A, starpu_data_handle_t B, T beta,
                 starpu_data_handle_t C, int priority) {
    const double m = static_cast<double>(starpu_matrix_get_nx(C));
    const double n = static_cast<double>(starpu_matrix_get_ny(C));
    const double k = static_cast<double>((transa == 'N' || transa == 'n') ? starpu_matrix_get_ny(A)
                                                                          : starpu_matrix_get_nx(A));
    detail::submit(codelet<T>(), {A, B, C}, GemmArgs<T>{transa, transb, alpha, beta}, priority, 2.0 * m * n * k);
}

template void submit_gemm<float>(char, char, float, starpu_data_handle_t, starpu_data_handle_t, float,
                                 starpu_data_handle_t, int);
template void submit_gemm<double>(char, char, double, starpu_data_handle_t, starpu_data_handle_t, double,
                                  starpu_data_handle_t, int);

}  // namespace starfact::codelets
