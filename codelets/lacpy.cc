// LACPY codelet: copies a tile (dst = src), so that readers of a factored diagonal tile's L
// part do not wait for the tasks that later rewrite its U part.
#include <cstring>

#include "codelets/codelet.hpp"
#include "codelets/codelets.hpp"
#include "common/kernel_error.hpp"
#ifdef STARFACT_HAVE_CUDA
#include "common/cuda_workers.hpp"
#endif

namespace starfact::codelets {
namespace {
// No arguments; the footprint key stays 0, that of the plain copies in earlier model files
// (the trtri variant's copy that held L^{-1}, key 1, is gone: GESSM solves, see docs/design.md).
struct LacpyArgs {
    std::uint32_t key() const { return 0u; }
};

template <class T>
void lacpy_cpu(void* buffers[], void*) noexcept {
    const TileView<T> src = detail::tile<T>(buffers[0]);
    const TileView<T> dst = detail::tile<T>(buffers[1]);
    for (int j = 0; j < src.n; ++j) std::memcpy(&dst(0, j), &src(0, j), sizeof(T) * src.m);
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void lacpy_cuda(void* buffers[], void*) noexcept {
    const TileView<T> src = detail::tile<T>(buffers[0]);
    const TileView<T> dst = detail::tile<T>(buffers[1]);
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
void submit_lacpy(starpu_data_handle_t src, starpu_data_handle_t dst, int priority, int worker) {
    detail::submit(codelet<T>(), {src, dst}, LacpyArgs{}, priority, 0.0, worker);
}

template void submit_lacpy<float>(starpu_data_handle_t, starpu_data_handle_t, int, int);
template void submit_lacpy<double>(starpu_data_handle_t, starpu_data_handle_t, int, int);

}  // namespace starfact::codelets
