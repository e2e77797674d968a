// What the factorization subcommands share around their timed region: host arrays without a
// zero-fill, the tile matrices allocated once and refilled on every core for each iteration,
// device copies dropped before teardown, the choice of check, and an opt-in report of where the
// time of a run goes.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/checks.hpp"
#include "tile_algorithms/tile_host.hpp"
#include "tile_algorithms/tile_matrix.hpp"

namespace starfact::cli {

/// An uninitialised host array of T (no zero-fill: a std::vector would write every entry on one
/// thread, which also makes that thread the first to touch every page). Fill it in parallel.
template <class T>
class HostArray {
public:
    HostArray() = default;
    explicit HostArray(std::int64_t count) : data_(count > 0 ? new T[count] : nullptr), size_(count > 0 ? count : 0) {}
    T* data() { return data_.get(); }
    const T* data() const { return data_.get(); }
    std::int64_t size() const { return size_; }

private:
    std::unique_ptr<T[]> data_;
    std::int64_t size_ = 0;
};

/// A (rows x cols, leading dimension lda) into a new HostArray of leading dimension
/// max(1, rows), copied on every core.
template <class T>
HostArray<T> copy_of(const T* A, int rows, int cols, int lda);

/// A file's matrix (`file`: column-major, leading dimension max(1, rows)) copied on every core,
/// or, when `file` is empty, matgen::uniform(rows, cols, seed) generated on every core; leading
/// dimension max(1, rows) either way.
template <class T>
HostArray<T> file_or_uniform(const std::vector<T>& file, int rows, int cols, std::uint64_t seed);

/// Copies the column-major A (lda >= max(1, t.m())) into every tile of t, all of A's columns
/// spread over every core (TileMatrix::from_lapack gives one tile column to a thread, which
/// leaves most cores idle when there are few tile columns, as with LU's nb = 8192). The tiles
/// are acquired for writing first, so copies on GPUs are dropped, not read back.
template <class T>
void fill_tiles(TileMatrix<T>& t, const T* A, int lda);

/// Copies every tile of t into the column-major A, the same way; the tiles on GPUs are fetched
/// to main memory first, all transfers at once.
template <class T>
void read_tiles(const TileMatrix<T>& t, T* A, int lda);

/// Drops the copies of t's tiles outside main memory without reading them back, so that
/// destroying t (which unregisters every tile, writing each one back to main memory from where
/// it is valid) copies nothing. t's content is then undefined.
template <class T>
void discard_tiles(TileMatrix<T>& t);

/// A TileMatrix(m, n, nb) built on another thread, so that its allocation (starpu_malloc pins
/// the whole matrix when there is a GPU: seconds for tens of GiB) overlaps the generation of the
/// matrix. get() waits and hands it over; an exception of the constructor comes out of get().
template <class T>
std::future<TileMatrix<T>> allocate_tiles(int m, int n, int nb);

/// Where a run generates its matrix (a file's matrix is always copied from main memory):
/// Host: into pinned tiles, on every core, from its BlockSource; Gpu: into
/// TileMatrix::unallocated tiles by generate_tiles on the CUDA workers, so that the matrix is
/// born in device memory and never fills, pins or crosses to main memory.
enum class GenerateOn { Host, Gpu };

/// Host for a file's matrix (`from_file`), whatever is asked. Otherwise Gpu when a CUDA worker
/// exists, the matrix (`bytes`) fits three quarters of the memory StarPU may use on the GPUs
/// (Runtime::cuda_memory_bytes; the rest is for the factorization's own data, since GPU-homed
/// tiles cannot be evicted) and nothing on the host reads it (`host_reads`: a check, an
/// output); otherwise Host. STARFACT_GENERATE=host or gpu forces one (gpu falls back to host
/// without a CUDA worker); auto or unset decides as above; anything else throws ArgumentError
/// naming STARFACT_GENERATE.
GenerateOn generate_on(bool from_file, bool host_reads, std::int64_t bytes, int ncuda);
const char* generate_on_name(GenerateOn g);

/// allocate_tiles for GenerateOn::Host; for Gpu, TileMatrix::on_gpus (allocated when get() is called).
template <class T>
std::future<TileMatrix<T>> allocate_tiles(int m, int n, int nb, GenerateOn where);

/// --check-kind auto|full|probe for a factorization subcommand: which check --check runs.
void add_check_kind_option(CLI::App& cmd, std::string& kind);

/// The check for an m x n factorization: "full" or "probe" as asked, "auto":
/// checks::check_kind(m, n).
checks::CheckKind resolve_check_kind(const std::string& kind, long long m, long long n);

/// With STARFACT_PHASES=1 in the environment, lap(name) prints on stderr the wall time since
/// the previous lap (or since construction) as "# phase <name>: <seconds> s"; otherwise it
/// does nothing. The subcommands mark their setup, generation, copies, factorizations, checks
/// and teardown with it, so that a run shows where its time goes.
class PhaseClock {
public:
    PhaseClock();
    void lap(const char* name);

private:
    bool on_;
    std::chrono::steady_clock::time_point last_;
};

}  // namespace starfact::cli
