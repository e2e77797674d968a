// The entry formulas of common/matgen.hpp's matrices, for the host generators and for the
// CUDA kernel that generates tiles in place on a GPU (codelets/cuda/matgen.cu): one definition,
// so that both give the same bits for the same seed. Every operation is an integer operation
// or one correctly rounded IEEE operation, which a GPU performs exactly as a CPU does.
#pragma once

#include <cstdint>

#include "common/tile_view.hpp"  // STARFACT_HD

namespace starfact::matgen::detail {

/// splitmix64's finaliser.
STARFACT_HD inline std::uint64_t mix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/// Uniform entry (i, j) in [-1, 1) from 53 random bits; mixed_seed = mix(seed). The product
/// of the 53-bit integer by 2^-52 and the subtraction are exact.
STARFACT_HD inline double uniform_entry(std::uint64_t mixed_seed, std::uint64_t i, std::uint64_t j) {
    const std::uint64_t h = mix(mixed_seed ^ mix((i << 32) ^ j ^ 0x5bd1e995ULL));
    return static_cast<double>(h >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/// Entry (i, j) of the SPD matrix B + B^T + shift I (B uniform): the pair's sum rounded once to
/// T in the same order for (i, j) and (j, i), then the shift added on the diagonal in T.
template <class T>
STARFACT_HD inline T spd_entry(std::uint64_t mixed_seed, T shift, int i, int j) {
    const int lo = i > j ? i : j, hi = i < j ? i : j;
    T v = static_cast<T>(uniform_entry(mixed_seed, static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(hi)) +
                         uniform_entry(mixed_seed, static_cast<std::uint64_t>(hi), static_cast<std::uint64_t>(lo)));
    if (i == j) v += shift;
    return v;
}

}  // namespace starfact::matgen::detail
