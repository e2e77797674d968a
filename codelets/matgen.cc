// GENERATE codelet: writes one tile of a generated matrix (common/matgen.hpp) in place, on the
// worker that runs it. On a GPU the tile is born in device memory: a run that factors a
// generated matrix then neither fills host memory nor copies it over the bus.
#include <cstdint>

#include "codelets/codelet.hpp"
#include "codelets/codelets.hpp"
#include "common/kernel_error.hpp"
#include "common/matgen.hpp"
#ifdef STARFACT_HAVE_CUDA
#include "codelets/cuda/matgen.hpp"
#include "common/cuda_workers.hpp"
#endif

namespace starfact::codelets {
namespace {
struct GenerateArgs {
    std::uint64_t seed;
    matgen::Kind kind;
    std::int32_t n;   ///< spd's order (its diagonal shift)
    std::int32_t i0;  ///< the tile's first row and column in the matrix
    std::int32_t j0;
    std::uint32_t key() const { return static_cast<std::uint32_t>(kind); }
};

template <class T>
void generate_cpu(void* buffers[], void* cl_arg) noexcept {
    const TileView<T> A = detail::tile<T>(buffers[0]);
    const auto a = detail::unpack<GenerateArgs>(cl_arg);
    if (a.kind == matgen::Kind::Spd)
        matgen::spd_block<T>(a.n, a.seed, a.i0, a.j0, A.m, A.n, A.data, A.ld);
    else
        matgen::uniform_block<T>(a.seed, a.i0, a.j0, A.m, A.n, A.data, A.ld);
}

#ifdef STARFACT_HAVE_CUDA
template <class T>
void generate_cuda(void* buffers[], void* cl_arg) noexcept {
    const TileView<T> A = detail::tile<T>(buffers[0]);
    const auto a = detail::unpack<GenerateArgs>(cl_arg);
    const cudaError_t e = cuda::generate_tile<T>(A, a.kind, a.seed, a.n, a.i0, a.j0, cuda::stream());
    if (e != cudaSuccess) record_kernel_error("generate kernel launch", e);
}
template <class T>
constexpr detail::KernelFn generate_cuda_fn = generate_cuda<T>;
#else
template <class T>
constexpr detail::KernelFn generate_cuda_fn = nullptr;
#endif

template <class T>
detail::Codelet& codelet() {
    static detail::Codelet cl("generate", ScalarTraits<T>::letter, {STARPU_W}, generate_cpu<T>, generate_cuda_fn<T>,
                              detail::footprint<GenerateArgs>);
    return cl;
}
}  // namespace

template <class T>
void submit_generate(matgen::Kind kind, std::uint64_t seed, int n, int i0, int j0, starpu_data_handle_t A,
                     int priority, int worker) {
    detail::submit(codelet<T>(), {A}, GenerateArgs{seed, kind, n, i0, j0}, priority, 0.0, worker);
}

template void submit_generate<float>(matgen::Kind, std::uint64_t, int, int, int, starpu_data_handle_t, int, int);
template void submit_generate<double>(matgen::Kind, std::uint64_t, int, int, int, starpu_data_handle_t, int, int);

}  // namespace starfact::codelets
