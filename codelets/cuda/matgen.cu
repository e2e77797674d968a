// The CUDA twin of matgen::uniform_block and matgen::spd_block: every entry from the shared
// formulas of common/matgen_entry.hpp, so a tile generated here holds the host's bits.
#include "codelets/cuda/matgen.hpp"

#include <algorithm>

#include "common/matgen_entry.hpp"

namespace starfact::cuda {
namespace {
constexpr int kThreads = 256;
constexpr int kMaxColumnBlocks = 4096;

// Threads along the rows (coalesced stores), blocks along the columns; each block walks
// columns with a stride of gridDim.y.
template <class T, bool Spd>
__global__ void generate_kernel(TileView<T> A, std::uint64_t mixed_seed, T shift, int i0, int j0) {
    const int r = blockIdx.x * kThreads + threadIdx.x;
    if (r >= A.m) return;
    for (int c = blockIdx.y; c < A.n; c += gridDim.y) {
        if constexpr (Spd)
            A(r, c) = matgen::detail::spd_entry<T>(mixed_seed, shift, i0 + r, j0 + c);
        else
            A(r, c) = static_cast<T>(matgen::detail::uniform_entry(mixed_seed, static_cast<std::uint64_t>(i0 + r),
                                                                   static_cast<std::uint64_t>(j0 + c)));
    }
}
}  // namespace

template <class T>
cudaError_t generate_tile(TileView<T> A, matgen::Kind kind, std::uint64_t seed, int n, int i0, int j0,
                          cudaStream_t stream) {
    if (A.empty()) return cudaSuccess;
    const dim3 grid((A.m + kThreads - 1) / kThreads, std::min(A.n, kMaxColumnBlocks));
    const std::uint64_t ms = matgen::detail::mix(seed);
    // spd's diagonal shift 2n + 1, formed as matgen::spd forms it.
    const T shift = static_cast<T>(2 * static_cast<std::int64_t>(n) + 1);
    if (kind == matgen::Kind::Spd)
        generate_kernel<T, true><<<grid, kThreads, 0, stream>>>(A, ms, shift, i0, j0);
    else
        generate_kernel<T, false><<<grid, kThreads, 0, stream>>>(A, ms, shift, i0, j0);
    return cudaGetLastError();
}

template cudaError_t generate_tile<float>(TileView<float>, matgen::Kind, std::uint64_t, int, int, int, cudaStream_t);
template cudaError_t generate_tile<double>(TileView<double>, matgen::Kind, std::uint64_t, int, int, int,
                                           cudaStream_t);

}  // namespace starfact::cuda
