// Deterministic test matrices: a splitmix64 hash of (seed, i, j) gives every entry.
#include "common/matgen.hpp"

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

#include "common/blas.hpp"

namespace starfact::matgen {
namespace {
std::uint64_t mix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
// Uniform in [-1, 1) from 53 random bits.
double entry(std::uint64_t seed, std::uint64_t i, std::uint64_t j) {
    const std::uint64_t h = mix(mix(seed) ^ mix((i << 32) ^ j ^ 0x5bd1e995ULL));
    return static_cast<double>(h >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}
// Runs body(j0, j1) over column ranges on every core: large matrices take seconds otherwise.
template <class F>
void for_columns(int n, std::size_t work, F body) {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    const unsigned nthreads = work < (1u << 20) ? 1u : std::min<unsigned>(hw, static_cast<unsigned>(std::max(n, 1)));
    if (nthreads <= 1) return body(0, n);
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < nthreads; ++t) {
        const int j0 = static_cast<int>(static_cast<long>(n) * t / nthreads);
        const int j1 = static_cast<int>(static_cast<long>(n) * (t + 1) / nthreads);
        pool.emplace_back(body, j0, j1);
    }
    for (auto& th : pool) th.join();
}
}  // namespace

template <class T>
void uniform(int m, int n, std::uint64_t seed, T* A, int lda) {
    for_columns(n, static_cast<std::size_t>(m) * n, [=](int j0, int j1) {
        for (int j = j0; j < j1; ++j)
            for (int i = 0; i < m; ++i) A[i + static_cast<std::size_t>(j) * lda] = static_cast<T>(entry(seed, i, j));
    });
}

template <class T>
void spd(int n, std::uint64_t seed, T* A, int lda) {
    // Each pair {i, j}, i >= j, is written only by the thread owning column j.
    for_columns(n, static_cast<std::size_t>(n) * n, [=](int j0, int j1) {
        for (int j = j0; j < j1; ++j)
            for (int i = j; i < n; ++i) {
                T v = static_cast<T>(entry(seed, i, j) + entry(seed, j, i));
                if (i == j) v += static_cast<T>(n);
                A[i + static_cast<std::size_t>(j) * lda] = v;
                A[j + static_cast<std::size_t>(i) * lda] = v;
            }
    });
}

template <class T>
void spd_failing_at(int n, int k, std::uint64_t seed, T* A, int lda) {
    // L unit lower with entries of size 1/n keeps L D L^T well conditioned.
    std::vector<T> L(static_cast<std::size_t>(n) * n, T(0));
    for (int j = 0; j < n; ++j) {
        L[j + static_cast<std::size_t>(j) * n] = T(1);
        for (int i = j + 1; i < n; ++i)
            L[i + static_cast<std::size_t>(j) * n] = static_cast<T>(entry(seed, i, j) / n);
    }
    // W = L D, then A = W L^T.
    std::vector<T> W(L);
    for (int j = 0; j < n; ++j) {
        const T d = (j == k - 1) ? T(-1) : static_cast<T>(1.5 + 0.5 * entry(seed ^ 0xd1ULL, j, j));
        for (int i = 0; i < n; ++i) W[i + static_cast<std::size_t>(j) * n] *= d;
    }
    if (n > 0) blas::gemm('N', 'T', n, n, n, T(1), W.data(), n, L.data(), n, T(0), A, lda);
    // Exact symmetry (the product is symmetric only up to rounding).
    for (int j = 0; j < n; ++j)
        for (int i = j + 1; i < n; ++i) A[j + static_cast<std::size_t>(i) * lda] = A[i + static_cast<std::size_t>(j) * lda];
}

template void uniform<float>(int, int, std::uint64_t, float*, int);
template void uniform<double>(int, int, std::uint64_t, double*, int);
template void spd<float>(int, std::uint64_t, float*, int);
template void spd<double>(int, std::uint64_t, double*, int);
template void spd_failing_at<float>(int, int, std::uint64_t, float*, int);
template void spd_failing_at<double>(int, int, std::uint64_t, double*, int);

}  // namespace starfact::matgen
