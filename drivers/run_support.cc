// Host arrays, tile refills and teardown helpers of the factorization subcommands.
#include "drivers/run_support.hpp"

#include <starpu.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/matgen.hpp"
#include "common/parallel.hpp"
#include "common/runtime.hpp"

namespace starfact::cli {
namespace {
// Below this many elements a copy runs on one thread: starting threads would cost more.
constexpr std::int64_t kSerialElements = std::int64_t(1) << 18;

unsigned threads_for(std::int64_t elements) { return elements < kSerialElements ? 1u : 0u; }

/// Copies between the column-major A and the acquired tiles of t, one matrix column per step,
/// every core taking columns: each step reads or writes one contiguous column of A.
template <class T>
void copy_columns(const TileMatrix<T>& t, const HostTiles<T>& tiles, T* A, int lda, bool into_tiles) {
    const int nb = t.nb();
    parallel_for(
        t.n(),
        [&](int col) {
            const int j = col / nb, c = col % nb;
            T* a = A + static_cast<std::int64_t>(col) * lda;
            for (int i = 0; i < t.mt(); ++i) {
                T* tile = tiles.column(i, j, c);
                T* piece = a + static_cast<std::int64_t>(i) * nb;
                const std::size_t bytes = sizeof(T) * static_cast<std::size_t>(t.tile_m(i));
                if (into_tiles)
                    std::memcpy(tile, piece, bytes);
                else
                    std::memcpy(piece, tile, bytes);
            }
        },
        threads_for(static_cast<std::int64_t>(t.m()) * t.n()));
}

template <class T>
void require_lapack(const TileMatrix<T>& t, const T* A, int lda) {
    require(lda >= std::max(1, t.m()), "lda",
            fmt::format("must be >= max(1, m) = {}, got {}", std::max(1, t.m()), lda));
    require(A != nullptr || static_cast<std::int64_t>(t.m()) * t.n() == 0, "A", "null pointer for a non-empty matrix");
}
}  // namespace

template <class T>
HostArray<T> copy_of(const T* A, int rows, int cols, int lda) {
    const std::int64_t ld = std::max(1, rows);
    HostArray<T> C(ld * cols);
    const PausedWorkers paused;
    parallel_for(
        cols, [&](int j) { std::memcpy(C.data() + j * ld, A + static_cast<std::int64_t>(j) * lda, sizeof(T) * rows); },
        threads_for(ld * cols));
    return C;
}

template <class T>
void fill_tiles(TileMatrix<T>& t, const T* A, int lda) {
    require_lapack(t, A, lda);
    const HostTiles<T> tiles(t, STARPU_W);
    // A is only read: copy_columns writes through it only when copying out of the tiles.
    copy_columns(t, tiles, const_cast<T*>(A), lda, true);
}

template <class T>
void read_tiles(const TileMatrix<T>& t, T* A, int lda) {
    require_lapack(t, A, lda);
    const HostTiles<T> tiles(t, STARPU_R);
    copy_columns(t, tiles, A, lda, false);
}

template <class T>
void discard_tiles(TileMatrix<T>& t) {
    // Tiles homed on a GPU copy nothing back when destroyed, and acquiring them in main memory
    // would allocate copies there.
    if (t.on_gpus()) return;
    // Write access in main memory invalidates every other copy without a transfer.
    for (int j = 0; j < t.nt(); ++j)
        for (int i = 0; i < t.mt(); ++i)
            if (starpu_data_acquire_on_node(t(i, j), STARPU_MAIN_RAM, STARPU_W) == 0)
                starpu_data_release_on_node(t(i, j), STARPU_MAIN_RAM);
}

template <class T>
std::future<TileMatrix<T>> allocate_tiles(int m, int n, int nb) {
    return std::async(std::launch::async, [m, n, nb] { return TileMatrix<T>(m, n, nb); });
}

GenerateOn generate_on(bool from_file, bool host_reads, std::int64_t bytes, int ncuda) {
    const char* env = std::getenv("STARFACT_GENERATE");
    const std::string asked = env != nullptr ? env : "";
    if (!asked.empty() && asked != "host" && asked != "gpu" && asked != "auto")
        throw ArgumentError("STARFACT_GENERATE", fmt::format("must be host, gpu or auto, got '{}'", asked));
    if (from_file || asked == "host") return GenerateOn::Host;
    if (asked == "gpu") return ncuda > 0 ? GenerateOn::Gpu : GenerateOn::Host;
    if (ncuda <= 0 || host_reads) return GenerateOn::Host;
    // Tiles homed on a GPU cannot be evicted: a quarter of its memory stays for what the
    // factorization allocates there (LU's L factors are a quarter of the lower tiles with the
    // trtri variant, QR's T factors, diagonal copies, cuSOLVER's workspaces).
    return bytes <= Runtime::cuda_memory_bytes() / 4 * 3 ? GenerateOn::Gpu : GenerateOn::Host;
}

const char* generate_on_name(GenerateOn g) { return g == GenerateOn::Gpu ? "gpu" : "host"; }

template <class T>
std::future<TileMatrix<T>> allocate_tiles(int m, int n, int nb, GenerateOn where) {
    if (where == GenerateOn::Host) return allocate_tiles<T>(m, n, nb);
    return std::async(std::launch::deferred, [m, n, nb] { return TileMatrix<T>::on_gpus(m, n, nb); });
}

void add_check_kind_option(CLI::App& cmd, std::string& kind) {
    cmd.add_option("--check-kind", kind,
                   "Which check --check runs: full (the residual from the explicit factors, O(n^3) on the host),\n"
                   "probe (the same through one random vector, O(n^2), without the LAPACK reference) or auto\n"
                   "(full while m n^2 <= 16384^3)")
        ->check(CLI::IsMember({"auto", "full", "probe"}))
        ->capture_default_str();
}

checks::CheckKind resolve_check_kind(const std::string& kind, long long m, long long n) {
    if (kind == "full") return checks::CheckKind::Full;
    if (kind == "probe") return checks::CheckKind::Probe;
    return checks::check_kind(m, n);
}

PhaseClock::PhaseClock() : last_(std::chrono::steady_clock::now()) {
    const char* env = std::getenv("STARFACT_PHASES");
    on_ = env != nullptr && std::strcmp(env, "1") == 0;
}

void PhaseClock::lap(const char* name) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "# phase %s: %.3f s\n", name, std::chrono::duration<double>(now - last_).count());
    last_ = now;
}

template class HostArray<float>;
template class HostArray<double>;
template <class T>
HostArray<T> file_or_uniform(const std::vector<T>& file, int rows, int cols, std::uint64_t seed) {
    const int ld = std::max(1, rows);
    if (!file.empty()) return copy_of(file.data(), rows, cols, ld);
    HostArray<T> A(static_cast<std::int64_t>(ld) * cols);
    matgen::uniform(rows, cols, seed, A.data(), ld);
    return A;
}

template HostArray<float> file_or_uniform<float>(const std::vector<float>&, int, int, std::uint64_t);
template HostArray<double> file_or_uniform<double>(const std::vector<double>&, int, int, std::uint64_t);
template HostArray<float> copy_of<float>(const float*, int, int, int);
template HostArray<double> copy_of<double>(const double*, int, int, int);
template void fill_tiles<float>(TileMatrix<float>&, const float*, int);
template void fill_tiles<double>(TileMatrix<double>&, const double*, int);
template void read_tiles<float>(const TileMatrix<float>&, float*, int);
template void read_tiles<double>(const TileMatrix<double>&, double*, int);
template std::future<TileMatrix<float>> allocate_tiles<float>(int, int, int, GenerateOn);
template std::future<TileMatrix<double>> allocate_tiles<double>(int, int, int, GenerateOn);
template void discard_tiles<float>(TileMatrix<float>&);
template void discard_tiles<double>(TileMatrix<double>&);
template std::future<TileMatrix<float>> allocate_tiles<float>(int, int, int);
template std::future<TileMatrix<double>> allocate_tiles<double>(int, int, int);

}  // namespace starfact::cli
