// Deterministic test matrices: a splitmix64 hash of (seed, i, j) gives every entry.
#include "common/matgen.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/blas.hpp"
#include "common/matgen_entry.hpp"
#include "common/parallel.hpp"
#include "common/runtime.hpp"

namespace starfact::matgen {
namespace {
using detail::mix;
using detail::uniform_entry;
double entry(std::uint64_t seed, std::uint64_t i, std::uint64_t j) { return uniform_entry(mix(seed), i, j); }

// Below this many entries one thread fills the matrix: starting threads would cost more.
constexpr std::int64_t kSerialEntries = std::int64_t(1) << 20;

// spd's blocks: a block and its mirror image are written as runs of kSpdBlock contiguous
// entries, and the block (kSpdBlock^2 entries, 128 KiB in double) stays in cache between
// the two writes.
constexpr int kSpdBlock = 128;
}  // namespace

template <class T>
void uniform(int m, int n, std::uint64_t seed, T* A, int lda) {
    const std::uint64_t ms = mix(seed);
    const PausedWorkers paused;
    parallel_for(
        n,
        [=](int j) {
            T* col = A + static_cast<std::int64_t>(j) * lda;
            for (int i = 0; i < m; ++i) col[i] = static_cast<T>(uniform_entry(ms, i, j));
        },
        static_cast<std::int64_t>(m) * n < kSerialEntries ? 1 : 0);
}

// A(i, j) = A(j, i) = b(i, j) + b(j, i), plus 2n + 1 on the diagonal, computed once per pair
// {i, j}. The work is the lower triangle of kSpdBlock x kSpdBlock blocks, one block (I, J),
// I >= J, at a time: its entries are computed into a buffer, written down the columns of block
// (I, J) and then down the columns of its mirror (J, I), so that every write is part of a
// contiguous run (writing row j of the upper triangle entry by entry, lda apart, missed the
// cache and the TLB on every entry). Every entry gets exactly the value the formula gives,
// whatever the blocking or the thread.
template <class T>
void spd(int n, std::uint64_t seed, T* A, int lda) {
    if (n <= 0) return;
    const std::uint64_t ms = mix(seed);
    const T shift = static_cast<T>(2 * static_cast<std::int64_t>(n) + 1);
    const std::int64_t blocks = (n + kSpdBlock - 1) / kSpdBlock;
    const std::int64_t pairs = blocks * (blocks + 1) / 2;
    const std::int64_t ld = lda;
    const PausedWorkers paused;
    parallel_for64(
        pairs,
        [=](std::int64_t p) {
            // Pair p -> (I, J), I >= J, column by column of the block triangle: column J holds
            // the pairs first(J) .. first(J) + blocks - J - 1, first(J) = J blocks - J (J - 1) / 2.
            std::int64_t J = 0;
            while ((J + 1) * blocks - (J + 1) * J / 2 <= p) ++J;
            const std::int64_t I = J + (p - (J * blocks - J * (J - 1) / 2));
            const int i0 = static_cast<int>(I * kSpdBlock), j0 = static_cast<int>(J * kSpdBlock);
            const int bi = std::min(kSpdBlock, n - i0), bj = std::min(kSpdBlock, n - j0);
            thread_local std::vector<T> buffer;
            buffer.resize(static_cast<std::size_t>(kSpdBlock) * kSpdBlock);
            T* b = buffer.data();  // b[r + c kSpdBlock] = A(i0 + r, j0 + c)
            for (int c = 0; c < bj; ++c) {
                const int j = j0 + c;
                T* col = A + static_cast<std::int64_t>(j) * ld;
                for (int r = I == J ? c : 0; r < bi; ++r) {
                    const int i = i0 + r;
                    T v = static_cast<T>(uniform_entry(ms, i, j) + uniform_entry(ms, j, i));
                    if (i == j) v += shift;
                    b[r + c * kSpdBlock] = v;
                    col[i] = v;
                }
            }
            // The mirror block: column i of A, rows j0 .. j0 + bj - 1 (above the diagonal).
            for (int r = 0; r < bi; ++r) {
                const int i = i0 + r;
                T* col = A + static_cast<std::int64_t>(i) * ld;
                for (int c = 0; c < (I == J ? r : bj); ++c) col[j0 + c] = b[r + c * kSpdBlock];
            }
        },
        static_cast<std::int64_t>(n) * n < kSerialEntries ? 1 : 0);
}

template <class T>
void uniform_block(std::uint64_t seed, int i0, int j0, int rows, int cols, T* B, int ldb) {
    const std::uint64_t ms = mix(seed);
    for (int c = 0; c < cols; ++c) {
        T* col = B + static_cast<std::int64_t>(c) * ldb;
        for (int r = 0; r < rows; ++r) col[r] = static_cast<T>(uniform_entry(ms, i0 + r, j0 + c));
    }
}

template <class T>
void spd_block(int n, std::uint64_t seed, int i0, int j0, int rows, int cols, T* B, int ldb) {
    const std::uint64_t ms = mix(seed);
    const T shift = static_cast<T>(2 * static_cast<std::int64_t>(n) + 1);
    for (int c = 0; c < cols; ++c) {
        const int j = j0 + c;
        T* col = B + static_cast<std::int64_t>(c) * ldb;
        // spd rounds the sum of the lower entry's pair once, in the same order for both
        // triangles: (i, j) with i >= j takes entry(i, j) + entry(j, i); the mirror the same.
        for (int r = 0; r < rows; ++r) col[r] = detail::spd_entry<T>(ms, shift, i0 + r, j);
    }
}

template <class T>
void spd_failing_at(int n, int k, std::uint64_t seed, T* A, int lda) {
    // L unit lower with entries of size 1/n keeps L D L^T well conditioned.
    std::vector<T> L(static_cast<std::size_t>(n) * n, T(0));
    for (int j = 0; j < n; ++j) {
        L[j + static_cast<std::size_t>(j) * n] = T(1);
        for (int i = j + 1; i < n; ++i) L[i + static_cast<std::size_t>(j) * n] = static_cast<T>(entry(seed, i, j) / n);
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
        for (int i = j + 1; i < n; ++i)
            A[j + static_cast<std::size_t>(i) * lda] = A[i + static_cast<std::size_t>(j) * lda];
}

template void uniform<float>(int, int, std::uint64_t, float*, int);
template void uniform<double>(int, int, std::uint64_t, double*, int);
template void spd<float>(int, std::uint64_t, float*, int);
template void spd<double>(int, std::uint64_t, double*, int);
template void uniform_block<float>(std::uint64_t, int, int, int, int, float*, int);
template void uniform_block<double>(std::uint64_t, int, int, int, int, double*, int);
template void spd_block<float>(int, std::uint64_t, int, int, int, int, float*, int);
template void spd_block<double>(int, std::uint64_t, int, int, int, int, double*, int);
template void spd_failing_at<float>(int, int, std::uint64_t, float*, int);
template void spd_failing_at<double>(int, int, std::uint64_t, double*, int);

}  // namespace starfact::matgen
