// POTRF codelet: Cholesky of a diagonal tile; LAPACK's local info goes to an int handle.
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
struct PotrfArgs {
    char uplo;
    std::uint32_t key() const { return detail::chars_key(uplo); }
};

template <class T>
void potrf_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<PotrfArgs>(cl_arg);
    *detail::info_ptr(buffers[1]) = cpu::potrf(a.uplo, detail::tile<T>(buffers[0]));
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void potrf_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<PotrfArgs>(cl_arg);
    const TileView<T> A = detail::tile<T>(buffers[0]);
    int* dinfo = detail::info_ptr(buffers[1]);
    const cuda::PriorityScope panel;  // the head of the critical path
    cusolverDnHandle_t h = cuda::solver_handle();
    cusolverDnParams_t p = cuda::solver_params();
    const std::size_t bytes = cuda::potrf_workspace(h, p, a.uplo, A);
    void* work = cuda::workspace(bytes);
    if (work == nullptr && bytes > 0) {
        record_kernel_error("potrf workspace allocation", static_cast<long>(bytes));
        return;
    }
    const cusolverStatus_t st = cuda::potrf(h, p, a.uplo, A, dinfo, work, bytes);
    if (st != CUSOLVER_STATUS_SUCCESS) {
        record_kernel_error("cusolverDnXpotrf", st);
        return;
    }
    const cudaError_t ce = cuda::potrf_nan_info(TileView<const T>{A.data, A.m, A.n, A.ld}, dinfo, panel.stream());
    if (ce != cudaSuccess) record_kernel_error("potrf NaN pivot check", ce);
}
template <class T>
constexpr detail::KernelFn potrf_cuda_fn = potrf_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn potrf_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("potrf", ScalarTraits<T>::letter, {STARPU_RW, STARPU_W}, potrf_cpu<T>,
                              potrf_cuda_fn<T>, detail::footprint<PotrfArgs>);
    return cl;
}
}  // namespace

template <class T>
void submit_potrf(char uplo, starpu_data_handle_t A, starpu_data_handle_t info, int priority) {
    const double n = static_cast<double>(starpu_matrix_get_nx(A));
    const double flops = n * n * n / 3.0 + n * n / 2.0 + n / 6.0;  // LAPACK's count
    detail::submit(codelet<T>(), {A, info}, PotrfArgs{uplo}, priority, flops);
}

template void submit_potrf<float>(char, starpu_data_handle_t, starpu_data_handle_t, int);
template void submit_potrf<double>(char, starpu_data_handle_t, starpu_data_handle_t, int);

}  // namespace starfact::codelets
