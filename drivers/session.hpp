// What every subcommand shares: common options, their validation, the runtime header.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "codelets/trace.hpp"
#include "common/runtime.hpp"
#include "drivers/report.hpp"
#include "tile_algorithms/tile_sizes.hpp"

namespace starfact::cli {

/// Options of the factorization subcommands.
struct FactorOptions {
    int n = 4096;
    int nb = 0;  ///< 0: from the tile-size table (tile_algorithms/tile_sizes.hpp)
    std::string prec = "d";
    bool check = false;
    int niter = 1;
    std::uint64_t seed = 0;  ///< 0: drawn at random and printed
    std::string format = "table";
    std::string uplo = "L";  ///< Cholesky only
    int nrhs = 1;            ///< solves only
    int m = -1;              ///< LU only: rows (-1: n)
    int ib = 0;              ///< LU only: inner block (0: automatic)
    std::string schedule = "dynamic";  ///< LU only: dynamic, static-rl, static-ll, static-bfll
    std::string trtri = "auto";        ///< LU only: the trtri + gemm variant, auto (with a GPU), on, off
    std::string a_file, b_file, x_file;  ///< --A, --B (inputs) and --X (output): .npy or .mtx files
    std::string trace_file;              ///< --trace: the tasks of the timed part, one CSV line each
    bool n_given = false, m_given = false, nrhs_given = false;  ///< set by note_given_options
};

/// What the subcommand takes from files: the matrix (all), the right-hand sides and the solution (solves).
enum class FileUse { Matrix, Solve };
/// How A's shape is constrained: square (Cholesky, gesv, getrf's default) or m >= n.
enum class Shape { Square, Tall };

/// Adds --A (and, for FileUse::Solve, --B and --X) to a subcommand.
void add_file_options(CLI::App& cmd, FactorOptions& o, FileUse use);

/// Records which of -n, -m, --nrhs the user gave: they must then agree with the files.
void note_given_options(const CLI::App& cmd, FactorOptions& o);

/// The matrices read from --A and --B, converted to T, column-major with leading dimension
/// max(1, rows); empty when the option was not given.
template <class T>
struct FileInputs {
    std::vector<T> A, B;
    bool has_a() const { return !A.empty(); }
    bool has_b() const { return !B.empty(); }
};

/// Usage checks of the file options, before anything starts: reads --A and --B (bad files,
/// a batch or a vector for A, A not square for Shape::Square or wider than tall, B's rows not
/// A's, -n/-m/--nrhs given and not agreeing with the files) and checks that --X can be written.
/// Sets o.m, o.n and o.nrhs from the files. Throws ArgumentError naming the option.
template <class T>
FileInputs<T> load_file_inputs(FactorOptions& o, Shape shape, FileUse use);

/// Writes the solution X (rows x cols, leading dimension ldx) to --X when it was given; a
/// failure at this point (disk full) is a RuntimeError, as the work has been done.
template <class T>
void write_solution(const FactorOptions& o, int rows, int cols, const T* X, int ldx);

/// Adds the file options in use to the configuration header.
void add_file_config(nlohmann::ordered_json& config, const FactorOptions& o);

/// Adds -n, --nb, --prec, --check, --niter, --seed, --format, --trace to a subcommand.
void add_factor_options(CLI::App& cmd, FactorOptions& o);
/// Refuses a value written with a leading minus sign: CLI11 would wrap "-1" around to 2^64 - 1
/// for an unsigned option (--seed), silently.
CLI::Validator no_minus_sign();
Format parse_format(const std::string& s);

/// Usage errors found after parsing (exit code 2, nothing started), naming `option`: a rows x
/// cols problem whose `copies` copies of elem_size-byte elements do not fit in host memory, or
/// an order beyond 2^31-1. Element counts may pass 2^31 (n = 100000 is fine: offsets are 64-bit
/// everywhere). With nb > 0 also refuses, naming --nb, a tile min(nb, rows) x min(nb, cols) of
/// more than 2^31-1 elements (one tile's LAPACK and cuBLAS calls take 32-bit sizes).
void check_problem_size(const char* option, long rows, long cols, int elem_size, int copies, int nb = 0);

/// The configuration in effect: StarPU version, scheduler, workers, GPUs, models.
nlohmann::ordered_json runtime_config(const Runtime& rt);

/// --nb and --ib in effect for an m x n factorization: each one given (> 0) as given (ib at
/// most nb), each one left at 0 from the library's table for the workers StarPU started
/// (default_tile_sizes, tile_algorithms/tile_sizes.hpp); Cholesky's ib is its nb.
TileSizes tile_sizes(Factorization f, const FactorOptions& o, int m, int n, const Runtime& rt);

/// Median of a non-empty list.
double median(std::vector<double> v);

/// Usage error (exit 2, nothing started) unless --trace's file can be created: its directory
/// exists and it is not a directory. Does nothing for an empty path.
void check_trace_path(const std::string& path);

/// --trace FILE: records the tasks of the timed part of every iteration (codelet, worker, start,
/// end, tile coordinates, prediction) and writes them once the run is over, atomically, as CSV
/// with a leading "iter" column. Does nothing when the option was not given.
class TraceRecorder {
public:
    explicit TraceRecorder(const FactorOptions& o) : path_(o.trace_file) {}
    explicit TraceRecorder(std::string path) : path_(std::move(path)) {}
    /// Labels the tiles of `matrices` with their coordinates and starts recording.
    template <class... Matrices>
    void start(int iter, const Matrices&... matrices) {
        if (path_.empty()) return;
        (codelets::label_tiles(matrices), ...);
        iter_ = iter;
        codelets::start_trace();
    }
    void stop();
    /// Writes the file; a failure now (disk full) is a RuntimeError, as the work has been done.
    void write() const;

private:
    std::string path_, lines_;
    int iter_ = 0;
};

}  // namespace starfact::cli
