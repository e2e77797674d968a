// TRSM codelet: triangular solve with a tile, B = alpha op(A)^{-1} B or alpha B op(A)^{-1}.
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
struct TrsmArgs {
    char side, uplo, transa, diag;
    T alpha;
    std::uint32_t key() const { return detail::chars_key(side, uplo, transa, diag); }
};

template <class T>
void trsm_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<TrsmArgs<T>>(cl_arg);
    cpu::trsm(a.side, a.uplo, a.transa, a.diag, a.alpha, detail::const_tile<T>(buffers[0]), detail::tile<T>(buffers[1]));
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void trsm_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<TrsmArgs<T>>(cl_arg);
    const cublasStatus_t st = cuda::trsm(cuda::blas_handle(), a.side, a.uplo, a.transa, a.diag, a.alpha,
                                         detail::const_tile<T>(buffers[0]), detail::tile<T>(buffers[1]));
    if (st != CUBLAS_STATUS_SUCCESS) record_kernel_error("cublas trsm", st);
}
template <class T>
constexpr detail::KernelFn trsm_cuda_fn = trsm_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn trsm_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("trsm", ScalarTraits<T>::letter, {STARPU_R, STARPU_RW}, trsm_cpu<T>, trsm_cuda_fn<T>,
                              detail::footprint<TrsmArgs<T>>);
    return cl;
}
}  // namespace

template <class T>
void submit_trsm(char side, char uplo, char transa, char diag, T alpha, starpu_data_handle_t A,
                 starpu_data_handle_t B, int priority) {
    const double m = static_cast<double>(starpu_matrix_get_nx(B));
    const double n = static_cast<double>(starpu_matrix_get_ny(B));
    const double flops = (side == 'L' || side == 'l') ? n * m * m : m * n * n;
    detail::submit(codelet<T>(), {A, B}, TrsmArgs<T>{side, uplo, transa, diag, alpha}, priority, flops);
}

template void submit_trsm<float>(char, char, char, char, float, starpu_data_handle_t, starpu_data_handle_t, int);
template void submit_trsm<double>(char, char, char, char, double, starpu_data_handle_t, starpu_data_handle_t, int);

}  // namespace starfact::codelets
