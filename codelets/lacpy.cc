// LACPY codelet: copies a tile (dst = src), so that readers of a factored diagonal tile's L
// part do not wait for the tasks that later rewrite its U part.
#include <algorithm>
#include <cstring>

#include "codelets/codelet.hpp"
#include "codelets/codelets.hpp"
#include "codelets/cpu/lu_kernels.hpp"
#include "common/kernel_error.hpp"
#ifdef STARFACT_HAVE_CUDA
#include "codelets/lu_context.hpp"
#include "common/cuda_workers.hpp"
#endif

namespace starfact::codelets {
namespace {
struct LacpyArgs {
    bool invert_l;  // the trtri + gemm variant's diagonal copy
    std::uint32_t key() const { return invert_l ? 1u : 0u; }
};

template <class T>
void lacpy_cpu(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<LacpyArgs>(cl_arg);
    const TileView<T> src = detail::tile<T>(buffers[0]);
    const TileView<T> dst = detail::tile<T>(buffers[1]);
    if (a.invert_l) return cpu::diag_inverse_copy<T>({src.data, src.m, src.n, src.ld}, dst);
    for (int j = 0; j < src.n; ++j) std::memcpy(&dst(0, j), &src(0, j), sizeof(T) * src.m);
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void lacpy_cuda(void* buffers[], void* cl_arg) noexcept {
    const auto a = detail::unpack<LacpyArgs>(cl_arg);
    const TileView<T> src = detail::tile<T>(buffers[0]);
    const TileView<T> dst = detail::tile<T>(buffers[1]);
    if (a.invert_l) {
        const cuda::LuContext ctx = detail::lu_context<T>(src.m, src.n, 1);
        if (ctx.work == nullptr && ctx.work_bytes > 0) return record_kernel_error("lacpy workspace", 0);
        const cudaError_t e = cuda::diag_inverse_copy<T>(ctx, {src.data, src.m, src.n, src.ld}, dst);
        if (e != cudaSuccess) record_kernel_error("cuda diag_inverse_copy", e);
        return;
    }
    const cudaError_t e = cudaMemcpy2DAsync(dst.data, sizeof(T) * dst.ld, src.data, sizeof(T) * src.ld,
                                            sizeof(T) * src.m, src.n, cudaMemcpyDeviceToDevice, cuda::stream());
    if (e != cudaSuccess) record_kernel_error("lacpy cudaMemcpy2DAsync", e);
}
template <class T>
constexpr detail::KernelFn lacpy_cuda_fn = lacpy_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn lacpy_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("lacpy", ScalarTraits<T>::letter, {STARPU_R, STARPU_W}, lacpy_cpu<T>, lacpy_cuda_fn<T>,
                              detail::footprint<LacpyArgs>);
    return cl;
}
}  // namespace

template <class T>
void submit_lacpy(starpu_data_handle_t src, starpu_data_handle_t dst, int priority, int worker, bool invert_l) {
    const double k = std::min(starpu_matrix_get_nx(src), starpu_matrix_get_ny(src));
    detail::submit(codelet<T>(), {src, dst}, LacpyArgs{invert_l}, priority, invert_l ? k * k * k / 3.0 : 0.0, worker);
}

template void submit_lacpy<float>(starpu_data_handle_t, starpu_data_handle_t, int, int, bool);
template void submit_lacpy<double>(starpu_data_handle_t, starpu_data_handle_t, int, int, bool);

}  // namespace starfact::codelets
