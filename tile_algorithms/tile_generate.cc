// generate_tiles: one GENERATE task per tile, pinned to the CUDA workers in turn.
#include "tile_algorithms/tile_generate.hpp"

#include <starpu.h>

#include <vector>

#include "codelets/codelets.hpp"
#include "common/kernel_error.hpp"

namespace starfact {

template <class T>
void generate_tiles(TileMatrix<T>& t, const GeneratedMatrix& g, const std::function<bool(int, int)>& wanted) {
    std::vector<int> gpus;
    for (int w : codelets::eligible_workers())
        if (starpu_worker_get_type(w) == STARPU_CUDA_WORKER) gpus.push_back(w);
    std::size_t k = 0;
    for (int j = 0; j < t.nt(); ++j)
        for (int i = 0; i < t.mt(); ++i) {
            if (wanted && !wanted(i, j)) continue;
            const int worker = gpus.empty() ? -1 : gpus[k++ % gpus.size()];
            codelets::submit_generate<T>(g.kind, g.seed, g.n, i * t.nb(), j * t.nb(), t(i, j), 0, worker);
        }
    starpu_task_wait_for_all();
    throw_if_kernel_error();
}

template <class T>
void generate_triangle_tiles(char uplo, TileMatrix<T>& t, const GeneratedMatrix& g) {
    const bool lower = uplo == 'L' || uplo == 'l';
    generate_tiles(t, g, [lower](int i, int j) { return lower ? i >= j : i <= j; });
}

template void generate_tiles<float>(TileMatrix<float>&, const GeneratedMatrix&, const std::function<bool(int, int)>&);
template void generate_tiles<double>(TileMatrix<double>&, const GeneratedMatrix&,
                                     const std::function<bool(int, int)>&);
template void generate_triangle_tiles<float>(char, TileMatrix<float>&, const GeneratedMatrix&);
template void generate_triangle_tiles<double>(char, TileMatrix<double>&, const GeneratedMatrix&);

}  // namespace starfact
