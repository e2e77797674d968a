// generate_tiles: one GENERATE task per tile, pinned to the CUDA workers of its GPU in turn.
#include "tile_algorithms/tile_generate.hpp"

#include <starpu.h>

#include <map>
#include <vector>

#include "codelets/codelets.hpp"
#include "common/kernel_error.hpp"

namespace starfact {

template <class T>
void generate_tiles(TileMatrix<T>& t, const GeneratedMatrix& g, const std::function<bool(int, int)>& wanted) {
    std::vector<int> gpus;                      // every eligible CUDA worker
    std::map<unsigned, std::vector<int>> by_node;  // the same by memory node
    for (int w : codelets::eligible_workers())
        if (starpu_worker_get_type(w) == STARPU_CUDA_WORKER) {
            gpus.push_back(w);
            by_node[starpu_worker_get_memory_node(static_cast<unsigned>(w))].push_back(w);
        }
    std::size_t k = 0;
    for (int j = 0; j < t.nt(); ++j)
        for (int i = 0; i < t.mt(); ++i) {
            if (wanted && !wanted(i, j)) continue;
            int worker = -1;
            if (!gpus.empty()) {
                const int home = starpu_data_get_home_node(t(i, j));
                const auto on_home = home >= 0 ? by_node.find(static_cast<unsigned>(home)) : by_node.end();
                const std::vector<int>& pool = on_home != by_node.end() ? on_home->second : gpus;
                worker = pool[k++ % pool.size()];
            }
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
