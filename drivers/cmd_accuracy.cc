// `starfact accuracy`: how incremental pivoting loses accuracy as tiles multiply (Section VII and
// Figure 8 of Agullo et al., LU Factorization for Accelerator-based Systems, 2011; docs/design.md,
// "References"), and what iterative refinement on the tile LU factors recovers. One row per
// (order, tiles, precision, kind, matrix).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/blas.hpp"
#include "common/error.hpp"
#include "common/matgen.hpp"
#include "drivers/commands.hpp"
#include "drivers/session.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

namespace starfact::cli {
namespace {

struct AccuracyOptions {
    std::vector<int> orders{1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192, 9216, 10240};
    std::vector<int> tiles{1, 2, 4, 8, 16, 32, 64};
    std::vector<std::string> precs{"d"};
    std::vector<std::string> kinds{"uniform"};
    int matrices = 1;
    int refine = 3;
    int ib = 0;
    std::uint64_t seed = 0;
    std::string csv;
    std::string format = "table";
};

/// Every column of the CSV and of the JSON lines; documented in docs/accuracy.md.
const std::vector<std::string> kColumns = {
    "N", "t", "nb", "ib", "prec", "kind", "matrix", "seed", "ratio", "residual", "residual_pp", "backward_error",
    "backward_error_pp", "ratio_exact", "residual_exact", "residual_exact_pp", "backward_error_exact",
    "backward_error_exact_pp", "growth", "growth_pp", "swaps", "swaps_pp", "factor_time_s", "factor_time_pp_s",
    "solve_time_s", "refine_steps", "ratio_after_refine", "backward_error_after_refine", "refine_time_s",
    "ratio_after_refine_x", "backward_error_after_refine_x", "refine_time_x_s", "berr_history", "berr_history_x",
    "info", "status"};
/// The --csv file has kColumns and then the study's configuration (runtime_config, the study, its
/// command, date, host; the study's seed as `study_seed`, since `seed` is the matrix's), repeated in
/// every row: a plain CSV file, header on the first line and no comment lines, that still says how
/// it was made.
nlohmann::ordered_json csv_config_columns(const nlohmann::ordered_json& config) {
    nlohmann::ordered_json c = nlohmann::ordered_json::object();
    for (auto it = config.begin(); it != config.end(); ++it) c[it.key() == "seed" ? "study_seed" : it.key()] = *it;
    return c;
}

/// What the table on the terminal shows.
const std::vector<std::string> kTableColumns = {
    "N", "t", "nb", "prec", "kind", "matrix", "ratio", "ratio_exact", "backward_error", "growth", "growth_pp",
    "swaps", "swaps_pp", "ratio_after_refine", "ratio_after_refine_x", "factor_time_s", "refine_time_s", "status"};

/// The CSV file: written as FILE.partial and renamed when the study is complete, so an interrupted
/// run never leaves a file that looks like a result.
class CsvFile {
public:
    explicit CsvFile(const std::string& path) : path_(path), partial_(path + ".partial") {
        if (path_.empty()) return;
        file_ = std::fopen(partial_.c_str(), "w");
        if (!file_)
            throw ArgumentError("--csv", fmt::format("cannot write '{}' (tried '{}')", path_, partial_));
    }
    ~CsvFile() {
        if (!file_) return;
        std::fclose(file_);
        std::remove(partial_.c_str());
    }
    CsvFile(const CsvFile&) = delete;
    CsvFile& operator=(const CsvFile&) = delete;
    std::FILE* get() const { return file_; }
    void commit() {
        if (!file_) return;
        const bool closed = std::fclose(file_) == 0;
        file_ = nullptr;
        if (!closed || std::rename(partial_.c_str(), path_.c_str()) != 0) {
            std::remove(partial_.c_str());
            throw RuntimeError(fmt::format("could not finish writing '{}'", path_));
        }
    }

private:
    std::string path_, partial_;
    std::FILE* file_ = nullptr;
};

std::string join(const std::vector<int>& v) {
    std::string s;
    for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}
std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
    return s;
}

std::string utc_now() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string host_name() {
    char buf[256] = {};
    gethostname(buf, sizeof(buf) - 1);
    return buf;
}

/// The seed of one matrix: a function of the run's seed, the order and the matrix index, the
/// same for every kind and precision (so s and d study the same matrix, rounded).
std::uint64_t matrix_seed(std::uint64_t seed, int n, int index) {
    std::uint64_t x = seed + 0x9e3779b97f4a7c15ULL * (static_cast<std::uint64_t>(n) * 1000003ULL + index + 1);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return (x ^ (x >> 31)) | 1ULL;
}

/// residual / residual_pp, with 0 / 0 = 1 (both exact, as for n = 1).
double ratio(double r, double r_pp) {
    if (r_pp == 0.0) return r == 0.0 ? 1.0 : INFINITY;
    return r / r_pp;
}

nlohmann::ordered_json history(const accuracy::Refinement& r) {
    nlohmann::ordered_json h = nlohmann::ordered_json::array();
    for (const auto& q : r.quality) h.push_back(q.backward_error_exact);
    return h;
}

template <class T>
int run_study(const AccuracyOptions& o, Runtime& rt, Reporter& out, Reporter* csv,
              const nlohmann::ordered_json& csv_config, const std::string& prec, std::uint64_t seed) {
    int failed = 0;
    for (const std::string& kind_name : o.kinds) {
        const accuracy::MatrixKind kind = accuracy::parse_matrix_kind(kind_name);
        for (int n : o.orders) {
            for (int index = 0; index < o.matrices; ++index) {
                const std::uint64_t mseed = matrix_seed(seed, n, index);
                std::vector<T> A(static_cast<std::size_t>(n) * n), b(static_cast<std::size_t>(n));
                accuracy::generate(kind, n, mseed, A.data(), n);
                matgen::uniform(n, 1, mseed + 1, b.data(), n);
                const double anorm = blas::lange('I', n, n, A.data(), n);
                const auto pp = accuracy::partial_pivoting_solve(n, A.data(), n, b.data());
                const accuracy::SolveQuality pq = accuracy::solve_quality(n, A.data(), n, pp.x.data(), b.data(), anorm);
                for (int t : o.tiles) {
                    const int nb = (n + std::min(t, n) - 1) / std::min(t, n);
                    accuracy::PointOptions po;
                    po.nb = nb;
                    po.ib = o.ib > 0 ? std::min(o.ib, nb) : std::min(nb, 32);
                    po.refine_steps = o.refine;
                    const accuracy::PointResult p = accuracy::tile_lu_point(n, A.data(), n, b.data(), anorm, po);
                    const auto& last = p.refined.quality.back();
                    const auto& last_x = p.refined_x.quality.back();
                    const bool ok = p.info == 0 && pp.info == 0 && std::isfinite(p.quality.backward_error) &&
                                    std::isfinite(last.backward_error_exact) &&
                                    std::isfinite(last_x.backward_error_exact);
                    if (!ok) ++failed;
                    const nlohmann::ordered_json row = {
                        {"N", n},
                        {"t", p.tiles},
                        {"nb", nb},
                        {"ib", po.ib},
                        {"prec", prec},
                        {"kind", kind_name},
                        {"matrix", index},
                        {"seed", mseed},
                        {"ratio", ratio(p.quality.residual, pq.residual)},
                        {"residual", p.quality.residual},
                        {"residual_pp", pq.residual},
                        {"backward_error", p.quality.backward_error},
                        {"backward_error_pp", pq.backward_error},
                        {"ratio_exact", ratio(p.quality.residual_exact, pq.residual_exact)},
                        {"residual_exact", p.quality.residual_exact},
                        {"residual_exact_pp", pq.residual_exact},
                        {"backward_error_exact", p.quality.backward_error_exact},
                        {"backward_error_exact_pp", pq.backward_error_exact},
                        {"growth", p.growth},
                        {"growth_pp", pp.growth},
                        {"swaps", p.swaps},
                        {"swaps_pp", pp.swaps},
                        {"factor_time_s", p.factor_s},
                        {"factor_time_pp_s", pp.factor_s},
                        {"solve_time_s", p.solve_s},
                        {"refine_steps", o.refine},
                        {"ratio_after_refine", ratio(last.residual_exact, pq.residual_exact)},
                        {"backward_error_after_refine", last.backward_error_exact},
                        {"refine_time_s", p.refined.seconds},
                        {"ratio_after_refine_x", ratio(last_x.residual_exact, pq.residual_exact)},
                        {"backward_error_after_refine_x", last_x.backward_error_exact},
                        {"refine_time_x_s", p.refined_x.seconds},
                        {"berr_history", history(p.refined)},
                        {"berr_history_x", history(p.refined_x)},
                        {"info", p.info != 0 ? p.info : pp.info},
                        {"status", ok ? "ok" : "FAILED"},
                        {"sched", rt.scheduler()},
                        {"ncpu", rt.ncpu()},
                        {"ncuda", rt.ncuda()}};
                    out.row(row);
                    if (csv) {
                        nlohmann::ordered_json csv_row = row;
                        csv_row.update(csv_config);
                        csv->row(csv_row);
                    }
                }
            }
        }
    }
    return failed;
}

int run_accuracy(const AccuracyOptions& o) {
    const std::uint64_t seed = o.seed != 0 ? o.seed : std::random_device{}() | 1ULL;
    CsvFile file(o.csv);
    Runtime rt;
    nlohmann::ordered_json config = runtime_config(rt);
    config["study"] = "accuracy";
    config["command"] = fmt::format("starfact accuracy --orders {} --tiles {} --prec {} --kind {} --matrices {} "
                                    "--refine {} --ib {} --seed {}",
                                    join(o.orders), join(o.tiles), join(o.precs), join(o.kinds), o.matrices, o.refine,
                                    o.ib, seed);
    config["date"] = utc_now();
    config["host"] = host_name();
    config["seed"] = seed;
    const Format format = parse_format(o.format);
    Reporter out(format, format == Format::Table ? kTableColumns : kColumns);
    out.header(config);
    std::unique_ptr<Reporter> csv;
    const nlohmann::ordered_json csv_config = csv_config_columns(config);
    if (file.get()) {
        std::vector<std::string> columns = kColumns;
        for (auto it = csv_config.begin(); it != csv_config.end(); ++it) columns.push_back(it.key());
        csv = std::make_unique<Reporter>(Format::Csv, columns, file.get());
    }
    int failed = 0;
    for (const std::string& prec : o.precs)
        failed += prec == "s" ? run_study<float>(o, rt, out, csv.get(), csv_config, prec, seed)
                              : run_study<double>(o, rt, out, csv.get(), csv_config, prec, seed);
    csv.reset();
    file.commit();
    return std::min(failed, 100);
}

}  // namespace

void add_accuracy_command(CLI::App& app, Run& run) {
    auto o = std::make_shared<AccuracyOptions>();
    CLI::App* cmd = app.add_subcommand(
        "accuracy", "Accuracy of tile LU (incremental pivoting) against LAPACK's partial pivoting as tiles multiply,\n"
                    "and what iterative refinement on the tile LU factors recovers (the paper's Figure 8)");
    const CLI::Range positive(1, std::numeric_limits<int>::max());
    cmd->add_option("--orders", o->orders, "Matrix orders N, comma-separated")
        ->delimiter(',')
        ->check(positive)
        ->capture_default_str();
    cmd->add_option("--tiles", o->tiles,
                    "Tiles per row t, comma-separated (nb = ceil(N / t); t = 1 is one tile). About t^3/3 SSSSM\n"
                    "tasks each: t <= 64 is practical on a few CPU cores, a few hundred on a large node")
        ->delimiter(',')
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    cmd->add_option("--prec", o->precs, "Precisions: d, s or d,s")
        ->delimiter(',')
        ->check(CLI::IsMember({"s", "d"}))
        ->capture_default_str();
    cmd->add_option("--kind", o->kinds,
                    "Matrix kinds, comma-separated: uniform (the paper's), normal, illcond (condition 1e8 in\n"
                    "double, 1e4 in single; O(N^3) to generate), antitriangular (partial pivoting does no\n"
                    "arithmetic on it, tile LU grows)")
        ->delimiter(',')
        ->check(CLI::IsMember(accuracy::matrix_kind_names()))
        ->capture_default_str();
    cmd->add_option("--matrices", o->matrices, "Random matrices per order and kind")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    cmd->add_option("--refine", o->refine, "Iterative refinement steps on the tile LU factors (0: none)")
        ->check(CLI::Range(0, 20))
        ->capture_default_str();
    cmd->add_option("--ib", o->ib, "Inner block of the kernels; 0 picks min(nb, 32)")
        ->check(CLI::Range(0, std::numeric_limits<int>::max()))
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "Random seed of the study (0: random, printed)")
        ->check(no_minus_sign())
        ->capture_default_str();
    cmd->add_option("--csv", o->csv,
                    "Also write every column to this CSV file, the configuration and command as columns too\n"
                    "(plain CSV: the header first, no comment lines; renamed into place when complete)");
    cmd->add_option("--format", o->format, "Output on the terminal: table (main columns), csv or json (every column)")
        ->check(CLI::IsMember({"table", "csv", "json"}))
        ->capture_default_str();
    cmd->footer(
        "For every matrix (N x N, b uniform), LAPACK's getrf+getrs (partial pivoting) and tile LU at each t solve\n"
        "A x = b. ratio = ||b - A x||_inf of tile LU / that of LAPACK, residuals evaluated in working precision;\n"
        "ratio_exact: evaluated in extended precision (the residual of x itself). backward_error = ||b - A x||_inf /\n"
        "((||A||_inf ||x||_inf + ||b||_inf) N eps); growth = max|U|/max|A|; swaps = pivots that move a row. Then\n"
        "--refine steps of iterative refinement on the tile LU factors from the tile LU solution, residual in working\n"
        "precision (ratio_after_refine) and in extended precision (ratio_after_refine_x), both measured exactly.\n"
        "A row is FAILED when a factorization is singular or a backward error is not finite; the exit code is the\n"
        "number of FAILED rows. The default run takes about 20 minutes on 2 cores (docs/accuracy.md). On GPUs: the\n"
        "same command with STARPU_NCUDA=1.\n"
        "Example: starfact accuracy --orders 1024,2048 --tiles 1,4,16,64 --prec d,s --csv acc.csv");
    cmd->callback([&run, o] {
        run = [o]() -> int {
            for (const auto& [name, empty] : {std::pair{"--orders", o->orders.empty()}, {"--tiles", o->tiles.empty()},
                                              {"--prec", o->precs.empty()}, {"--kind", o->kinds.empty()}})
                if (empty) throw ArgumentError(name, "needs at least one value");
            const int nmax = *std::max_element(o->orders.begin(), o->orders.end());
            const bool single_only = std::all_of(o->precs.begin(), o->precs.end(), [](auto& p) { return p == "s"; });
            const bool illcond = std::find(o->kinds.begin(), o->kinds.end(), "illcond") != o->kinds.end();
            // A, its tile copy, the tile factor and LAPACK's factor; illcond's generator adds 3 in double.
            check_problem_size("--orders", nmax, nmax, 8, (single_only ? 2 : 4) + (illcond ? 3 : 0));
            return run_accuracy(*o);
        };
    });
}

}  // namespace starfact::cli
