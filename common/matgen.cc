// Deterministic test matrices: a splitmix64 hash of (seed, i, j) gives every entry.
#include "common/matgen.hpp"

#include <cstddef>
#include <vector>

#include "common/blas.hpp"
#include "common/parallel.hpp"

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
}  // namespace

template <class T>
void uniform(int m, int n, std::uint64_t seed, T* A, int lda) {
    parallel_for(n, [=](int j) {
        for (int i = 0; i < m; ++i) A[i + static_cast<std::size_t>(j) * lda] = static_cast<T>(entry(seed, i, j));
    }, static_cast<std::size_t>(m) * n < (1u << 20) ? 1 : 0);
}

template <class T>
void spd(int n, std::uint64_t seed, T* A, int lda) {
    // Each pair {i, j}, i >= j, is written only by the thread owning column j.
    parallel_for(n, [=](int j) {
        for (int i = j; i < n; ++i) {
            T v = static_cast<T>(entry(seed, i, j) + entry(seed, j, i));
            if (i == j) v += static_cast<T>(2 * n + 1);
            A[i + static_cast<std::size_t>(j) * lda] = v;
            A[j + static_cast<std::size_t>(i) * lda] = v;
        }
    }, static_cast<std::size_t>(n) * n < (1u << 20) ? 1 : 0);
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
