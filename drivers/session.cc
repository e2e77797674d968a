// Shared pieces of the subcommands: options, size checks, the configuration header.
#include "drivers/session.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include <fmt/format.h>

#include "codelets/codelets.hpp"
#include "common/error.hpp"
#include "perfmodels/model_check.hpp"
#include "io/atomic_file.hpp"
#include "io/io.hpp"

namespace starfact::cli {

void add_factor_options(CLI::App& cmd, FactorOptions& o) {
    const CLI::Range non_negative(0, std::numeric_limits<int>::max());
    const CLI::Range positive(1, std::numeric_limits<int>::max());
    cmd.add_option("-n", o.n, "Matrix order")->check(non_negative)->capture_default_str();
    cmd.add_option("--nb", o.nb, "Tile size; 0 picks one for the workers (1024 with a GPU, 256 without)")
        ->check(non_negative)
        ->capture_default_str();
    cmd.add_option("--prec", o.prec, "Precision: s (float) or d (double)")
        ->check(CLI::IsMember({"s", "d"}))
        ->capture_default_str();
    cmd.add_flag("--check", o.check, "Check the result (LAPACK-style residual, pass below 30)");
    cmd.add_option("--niter", o.niter, "Repetitions; each starts from a fresh copy of the matrix")
        ->check(positive)
        ->capture_default_str();
    cmd.add_option("--seed", o.seed, "Random seed of the matrix (0: random, printed)")
        ->check(no_minus_sign())
        ->capture_default_str();
    cmd.add_option("--format", o.format, "Output: table, csv or json (one object per line)")
        ->check(CLI::IsMember({"table", "csv", "json"}))
        ->capture_default_str();
    cmd.add_option("--trace", o.trace_file,
                   "Write every task of the timed part (codelet, worker, start, end, tile coordinates, predicted\n"
                   "time) to this CSV file; scripts/plot_trace.py draws it");
}

CLI::Validator no_minus_sign() {
    return CLI::Validator(
        [](std::string& value) {
            return value.find_first_not_of(" \t") != std::string::npos && value[value.find_first_not_of(" \t")] == '-'
                       ? fmt::format("'{}' is negative; an unsigned integer is expected", value)
                       : std::string();
        },
        "");
}

Format parse_format(const std::string& s) {
    return s == "json" ? Format::Json : s == "csv" ? Format::Csv : Format::Table;
}

void check_problem_size(const char* option, long rows, long cols, int elem_size, int copies, int nb) {
    // Element counts are 64-bit all the way (TileMatrix, the LAPACK-layout copies, the files):
    // only the orders themselves and one tile must fit LAPACK's and cuBLAS's 32-bit ints.
    if (rows > INT_MAX || cols > INT_MAX)
        throw ArgumentError(option,
                            fmt::format("{} x {}: an order beyond 2^31-1 (matrix orders are 32-bit ints)", rows, cols));
    if (nb > 0) {
        const long long tile = static_cast<long long>(std::min<long>(nb, rows)) * std::min<long>(nb, cols);
        if (tile > INT_MAX)
            throw ArgumentError("--nb", fmt::format("{}: a tile of the {} x {} matrix would hold {} elements, beyond "
                                                    "the 2^31-1 that one tile's LAPACK and cuBLAS calls take",
                                                    nb, rows, cols, tile));
    }
    const double need = static_cast<double>(rows) * cols * elem_size * copies;
    const double total = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    // What the run can take without the kernel killing it is what is free now (MemAvailable),
    // not the machine's whole memory.
    double available = total;
    if (std::ifstream meminfo("/proc/meminfo"); meminfo) {
        std::string key;
        double kib = 0;
        std::string unit;
        while (meminfo >> key >> kib >> unit)
            if (key == "MemAvailable:") {
                available = std::min(total, kib * 1024.0);
                break;
            }
    }
    if (need > available)
        throw ArgumentError(option, fmt::format("{} x {} needs about {:.1f} GiB of host memory; {:.1f} GiB of this "
                                                "machine's {:.1f} GiB is available",
                                                rows, cols, need / (1 << 30), available / (1 << 30),
                                                total / (1 << 30)));
}

nlohmann::ordered_json runtime_config(const Runtime& rt) {
    nlohmann::ordered_json c;
    c["starpu"] = Runtime::starpu_version();
    c["sched"] = rt.scheduler();
    c["ncpu"] = rt.ncpu();
    c["ncuda"] = rt.ncuda();
    c["gpus"] = rt.gpus();
    const double slowdown = Runtime::cpu_max_slowdown();
    c["cpu_max_slowdown"] = std::isinf(slowdown) ? nlohmann::ordered_json("inf") : nlohmann::ordered_json(slowdown);
    const std::string dir = Runtime::perfmodel_dir();
    c["perfmodel_dir"] = dir;
    const char* calibrate = std::getenv("STARPU_CALIBRATE");
    c["calibrate"] = calibrate ? calibrate : "0";
    // StarPU 1.3 keeps one file per model and host: <dir>/codelets/45/<symbol>.<hostname>.
    std::string host;
    if (const char* h = std::getenv("STARPU_HOSTNAME"); h && *h) {
        host = h;
    } else {
        char buf[256] = {};
        gethostname(buf, sizeof(buf) - 1);
        host = buf;
    }
    int present = 0;
    const auto symbols = codelets::perfmodel_symbols();
    for (const auto& s : symbols)
        if (std::filesystem::exists(fmt::format("{}/codelets/45/{}.{}", dir, s, host))) ++present;
    c["models"] = fmt::format("{} of {} present for host {}", present, symbols.size(), host);
    return c;
}

TileSizes tile_sizes(Factorization f, const FactorOptions& o, int m, int n, const Runtime& rt) {
    const TileSizes table = default_tile_sizes(f, m, n, rt, o.prec == "s" ? sizeof(float) : sizeof(double));
    const int nb = o.nb > 0 ? o.nb : table.nb;
    if (f == Factorization::Cholesky) return {nb, nb};
    return {nb, std::min(o.ib > 0 ? o.ib : table.ib, nb)};
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void add_file_options(CLI::App& cmd, FactorOptions& o, FileUse use) {
    cmd.add_option("--A", o.a_file,
                   "The matrix from a file instead of a random one: NumPy .npy (2-D, C or Fortran order, float32 or\n"
                   "float64) or Matrix Market array .mtx; its shape sets m and n");
    if (use != FileUse::Solve) return;
    cmd.add_option("--B", o.b_file, "The right-hand sides from a file (.npy 1-D or 2-D, or .mtx; default: random)");
    cmd.add_option("--X", o.x_file,
                   "Write the solution to this file (.npy, Fortran order, or .mtx) when the solve succeeded (info 0)");
}

void note_given_options(const CLI::App& cmd, FactorOptions& o) {
    const auto given = [&](const char* name) {
        const CLI::Option* opt = cmd.get_option_no_throw(name);
        return opt != nullptr && opt->count() > 0;
    };
    o.n_given = given("-n");
    o.m_given = given("-m");
    o.nrhs_given = given("--nrhs");
}

namespace {

/// The file of `option` read as T, with io's FileError turned into a usage error naming the option.
template <class T>
io::Dense<T> read_option_file(const char* option, const std::string& path) {
    try {
        return io::read_dense<T>(path);
    } catch (const io::FileError& e) {
        throw ArgumentError(option, fmt::format("'{}': {}", path, e.reason()));
    }
}

/// The matrix's data with leading dimension max(1, rows) (a 0-row matrix still has one per column).
template <class T>
std::vector<T> with_lead(io::Dense<T>&& d) {
    if (d.m > 0) return std::move(d.data);
    return std::vector<T>(static_cast<std::size_t>(d.n), T(0));
}

}  // namespace

template <class T>
FileInputs<T> load_file_inputs(FactorOptions& o, Shape shape, FileUse use) {
    FileInputs<T> in;
    int rows = -1;  // the rows that B must have: A's, or -n / -m
    if (!o.a_file.empty()) {
        io::Dense<T> a = read_option_file<T>("--A", o.a_file);
        if (a.ndim != 2)
            throw ArgumentError("--A", fmt::format("'{}': wrong dimensions: a {}-D array, not a matrix (2-D)", o.a_file,
                                                   a.ndim));
        if (shape == Shape::Square && a.m != a.n)
            throw ArgumentError("--A", fmt::format("'{}': not square: {} x {}; this command needs a square matrix",
                                                   o.a_file, a.m, a.n));
        if (shape == Shape::Tall && a.m < a.n)
            throw ArgumentError("--A", fmt::format("'{}': {} x {} is wider than tall; this command needs m >= n",
                                                   o.a_file, a.m, a.n));
        if (o.n_given && o.n != a.n)
            throw ArgumentError("-n", fmt::format("{} disagrees with --A '{}', which is {} x {}", o.n, o.a_file, a.m,
                                                  a.n));
        if (o.m_given && o.m != a.m)
            throw ArgumentError("-m", fmt::format("{} disagrees with --A '{}', which is {} x {}", o.m, o.a_file, a.m,
                                                  a.n));
        o.n = a.n;
        o.m = a.m;
        rows = a.m;
        in.A = with_lead(std::move(a));
    }
    if (use == FileUse::Solve && !o.b_file.empty()) {
        io::Dense<T> b = read_option_file<T>("--B", o.b_file);
        if (b.ndim == 3)
            throw ArgumentError("--B", fmt::format("'{}': wrong dimensions: a 3-D array (a batch), not a matrix",
                                                   o.b_file));
        if (rows < 0) {
            // No --A: B's rows set the order (square) or the rows (tall), unless given.
            if (shape == Shape::Square && o.n_given) rows = o.n;
            if (shape == Shape::Tall && o.m_given) rows = o.m;
        }
        if (rows >= 0 && b.m != rows)
            throw ArgumentError("--B", fmt::format("'{}' has {} rows, A has {}", o.b_file, b.m, rows));
        if (o.nrhs_given && o.nrhs != b.n)
            throw ArgumentError("--nrhs", fmt::format("{} disagrees with --B '{}', which is {} x {}", o.nrhs, o.b_file,
                                                      b.m, b.n));
        if (shape == Shape::Square) o.n = b.m;
        o.m = b.m;
        o.nrhs = b.n;
        in.B = with_lead(std::move(b));
    }
    check_trace_path(o.trace_file);
    if (use == FileUse::Solve && !o.x_file.empty()) {
        try {
            io::check_writable(o.x_file);
        } catch (const io::FileError& e) {
            throw ArgumentError("--X", fmt::format("'{}': {}", o.x_file, e.reason()));
        }
    }
    return in;
}

template <class T>
void write_solution(const FactorOptions& o, int rows, int cols, const T* X, int ldx) {
    if (o.x_file.empty()) return;
    try {
        io::write_dense(o.x_file, rows, cols, X, ldx);
    } catch (const io::FileError& e) {
        throw RuntimeError(fmt::format("--X '{}': {}", o.x_file, e.reason()));
    }
}

void add_file_config(nlohmann::ordered_json& config, const FactorOptions& o) {
    if (!o.a_file.empty()) config["A"] = o.a_file;
    if (!o.b_file.empty()) config["B"] = o.b_file;
    if (!o.x_file.empty()) config["X"] = o.x_file;
    if (!o.trace_file.empty()) config["trace"] = o.trace_file;
}

void check_trace_path(const std::string& path) {
    if (path.empty()) return;
    // io::check_writable without its .npy/.mtx rule: the trace is CSV.
    const std::string dir = io::detail::directory_of(path);
    if (std::filesystem::is_directory(path) || !std::filesystem::is_directory(dir))
        throw ArgumentError("--trace",
                            fmt::format("'{}': is a directory, or directory '{}' does not exist", path, dir));
    try {
        io::detail::AtomicFile probe(path);  // created and dropped: the only reliable test
    } catch (const io::FileError& e) {
        throw ArgumentError("--trace", fmt::format("'{}': {}", path, e.reason()));
    }
}

void TraceRecorder::stop() {
    if (path_.empty()) return;
    for (const codelets::TaskRecord& r : codelets::stop_trace())
        lines_ += fmt::format("{},{}\n", iter_, codelets::trace_csv_line(r));
}

void TraceRecorder::write() const {
    if (path_.empty()) return;
    try {
        io::detail::AtomicFile f(path_);
        f.write("iter," + codelets::trace_csv_header() + "\n");
        f.write(lines_);
        f.commit();
    } catch (const io::FileError& e) {
        throw RuntimeError(fmt::format("--trace '{}': {}", path_, e.reason()));
    }
}

void preflight_models() {
    for (const std::string& note : models::preflight_or_throw(models::calibrate_level() >= 1))
        fmt::print(stderr, "starfact: note: {}\n", note);
}

template FileInputs<float> load_file_inputs<float>(FactorOptions&, Shape, FileUse);
template FileInputs<double> load_file_inputs<double>(FactorOptions&, Shape, FileUse);
template void write_solution<float>(const FactorOptions&, int, int, const float*, int);
template void write_solution<double>(const FactorOptions&, int, int, const double*, int);

}  // namespace starfact::cli
