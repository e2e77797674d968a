// Pieces shared by the variable-size batched benchmarks (bench_batched_v*.cc, issue 6): the
// order distributions, device allocation and download, failure counts.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"

namespace starfact::bench::vbatched {

/// Orders uniform in [1, nmax], or skewed (the paper's: 1% nmax, the rest in [1, nmax/10]).
inline std::vector<int> draw_sizes(const std::string& dist, int nmax, int count, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int> n(count);
    for (int b = 0; b < count; ++b)
        n[b] = dist == "skewed" ? (rng() % 100 == 0 ? nmax : 1 + static_cast<int>(rng() % std::max(1, nmax / 10)))
                                : 1 + static_cast<int>(rng() % nmax);
    return n;
}

template <class T>
T* device_alloc(std::size_t elements) {
    T* p = nullptr;
    check(cudaMalloc(&p, sizeof(T) * std::max<std::size_t>(elements, 1)), "cudaMalloc");
    return p;
}

inline std::vector<int> download(const int* d, std::size_t count) {
    std::vector<int> h(count);
    check(cudaMemcpy(h.data(), d, sizeof(int) * count, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return h;
}

inline int nonzero(const std::vector<int>& v) {
    return static_cast<int>(std::count_if(v.begin(), v.end(), [](int x) { return x != 0; }));
}

}  // namespace starfact::bench::vbatched
