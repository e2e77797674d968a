// The default tile sizes: one table, a row per GPU model, factorization and range of orders.
#include "tile_algorithms/tile_sizes.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>

namespace starfact {
namespace {

struct TileRule {
    const char* gpu;   ///< a substring of the device name; "" matches any GPU
    Factorization op;  ///< Cholesky, LU or QR (square and moderately tall matrices)
    int max_n;         ///< the rule covers orders n <= max_n (the last row of a model: INT_MAX)
    int nb;
    int ib;
};

// Measured on the H200 (scripts/tune_tiles.sh; bench/results/ and docs/performance.md,
// "Default tile sizes"); the rows for any other GPU are the H100 figures the earlier defaults
// came from. Why the sizes differ by factorization: LU's tiles are the largest, since every tile
// column costs a chain of TSTRF panels whose cuSOLVER calls are latency-bound, so fewer, larger
// tiles win and an order up to one tile is cuSOLVER's getrf plus little; its ib is wide because
// TSTRF's panel goes to cuSOLVER and SSSSM's GEMMs want a large k. QR's ib is narrower: its T
// factors and the extra flops of the blocked updates grow with it. On CPU cores alone, narrow
// inner blocks keep the incremental pivoting's extra triangular work small.
constexpr TileRule kRules[] = {
    // Cholesky: around 16384 the 4x4 grid of 4096 tiles runs GEMMs large enough to fill the GPU
    // with few enough tasks; below that there are too few tiles to overlap the transfers from
    // host memory, and above it 2048 tiles keep more streams busy with GEMMs that are still
    // near peak.
    {"H200", Factorization::Cholesky, 12288, 2048, 2048},
    {"H200", Factorization::Cholesky, 24576, 4096, 4096},
    {"H200", Factorization::Cholesky, INT_MAX, 2048, 2048},
    {"H200", Factorization::Lu, INT_MAX, 8192, 1024},
    {"H200", Factorization::Qr, INT_MAX, 4096, 256},        {"", Factorization::Cholesky, INT_MAX, 1024, 1024},
    {"", Factorization::Lu, INT_MAX, 8192, 1024},           {"", Factorization::Qr, INT_MAX, 4096, 256},
};

/// QR of tall-skinny matrices (m >= 8 n, n <= 4096) is one tile column: up to 2^27 entries one
/// tile (nb = m, the whole QR one cuSOLVER geqrf plus the T factors, better than any tree of
/// tall tiles measured), beyond that tall 8192 x n tiles and a reduction tree so that no tile
/// outgrows the GPU.
bool tall_skinny(int m, int n) { return n > 0 && n <= 4096 && m >= 8 * static_cast<std::int64_t>(n); }

}  // namespace

TileSizes default_tile_sizes(Factorization f, int m, int n, const std::string& gpu, std::int64_t matrix_bytes,
                             std::int64_t gpu_bytes) {
    if (gpu.empty()) {
        const int nb = 256;
        return {nb, f == Factorization::Cholesky ? nb : std::min(nb, 32)};
    }
    if (f == Factorization::Qr && tall_skinny(m, n)) {
        const int nb = static_cast<std::int64_t>(m) * n <= (std::int64_t{1} << 27) ? m : 8192;
        return {nb, std::min(nb, 256)};
    }
    const TileRule* best = nullptr;
    for (const TileRule& r : kRules) {
        if (r.op != f || n > r.max_n) continue;
        const bool named = *r.gpu != '\0';
        if (named && gpu.find(r.gpu) == std::string::npos) continue;
        // The first matching row of the device's own model wins over the generic rows.
        if (best == nullptr || (named && *best->gpu == '\0')) best = &r;
        if (named) break;
    }
    int nb = best ? best->nb : 1024;
    // Out of core, a right-looking Cholesky streams the trailing matrix through the GPU at every
    // tile step, so the traffic falls with the tile size while the GEMMs stay near peak.
    if (f == Factorization::Cholesky && gpu_bytes > 0 && matrix_bytes > gpu_bytes)
        nb = std::max(nb, std::min(kOutOfCoreCholeskyNb, n));
    const int ib = best ? std::min(best->ib, nb) : nb;
    return {nb, f == Factorization::Cholesky ? nb : ib};
}

TileSizes default_tile_sizes(Factorization f, int m, int n, const Runtime& rt, std::size_t elem_bytes) {
    if (rt.ncuda() == 0) return default_tile_sizes(f, m, n, std::string());
    const std::string name = rt.gpu_name();
    const std::int64_t matrix_bytes = static_cast<std::int64_t>(m) * n * static_cast<std::int64_t>(elem_bytes);
    return default_tile_sizes(f, m, n, name.empty() ? std::string("unnamed GPU") : name,  // generic rows
                              matrix_bytes, rt.cuda_memory_bytes());
}

}  // namespace starfact
