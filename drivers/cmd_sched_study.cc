// `starfact sched-study`: one factorization under several StarPU schedulers (and tile LU's
// static schedules), each run in a fresh StarPU, with the models of the current StarPU home
// ("calibrated") and with an empty model directory ("none"); a table of the median time,
// TFLOP/s, bytes moved between memory nodes and tasks placed without a prediction.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <starpu.h>
#include <starpu_profiling.h>

#include "codelets/trace.hpp"
#include "common/error.hpp"
#include "common/matgen.hpp"
#include "drivers/commands.hpp"
#include "drivers/session.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

namespace starfact::cli {
namespace {
namespace fs = std::filesystem;

struct StudyOptions {
    std::string op = "potrf";
    int n = 4096;
    int nb = 0;
    int ib = 0;
    std::string trtri = "auto";
    std::string prec = "d";
    std::vector<std::string> scheds = {"dmda", "dmdas", "dmdar", "eager", "lws"};
    std::string models = "both";
    int niter = 3;
    std::uint64_t seed = 0;
    std::string format = "table";
};

const std::vector<std::string> kColumns = {"models", "sched", "starpu_sched", "op", "n", "nb", "time_s", "tflops",
                                           "moved_gb", "transfers", "tasks", "unpredicted", "status"};

bool is_static(const std::string& s) { return s.rfind("static-", 0) == 0; }

/// Usage checks before anything starts: scheduler names StarPU knows (or LU's static ones).
void check_scheds(const StudyOptions& o) {
    std::vector<std::string> known;
    for (starpu_sched_policy** p = starpu_sched_get_predefined_policies(); *p != nullptr; ++p)
        known.emplace_back((*p)->policy_name);
    for (const std::string& s : o.scheds) {
        if (is_static(s)) {
            if (o.op != "getrf")
                throw ArgumentError("--scheds", fmt::format("'{}': the static schedules exist for getrf only", s));
            parse_lu_schedule(s);  // throws on an unknown one
            continue;
        }
        if (std::find(known.begin(), known.end(), s) == known.end()) {
            std::string list;
            for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
            throw ArgumentError("--scheds", fmt::format("'{}' is not a StarPU scheduler (known: {}; and static-rl, "
                                                        "static-ll, static-bfll for getrf)", s, list));
        }
    }
}

/// Resets StarPU's bus counters (reading them resets them).
void reset_bus_counters() {
    for (int b = 0; b < starpu_bus_get_count(); ++b) {
        starpu_profiling_bus_info info;
        starpu_bus_get_profiling_info(b, &info);
    }
}

std::pair<double, long> bus_traffic() {
    double bytes = 0;
    long transfers = 0;
    for (int b = 0; b < starpu_bus_get_count(); ++b) {
        starpu_profiling_bus_info info;
        if (starpu_bus_get_profiling_info(b, &info) == 0) {
            bytes += static_cast<double>(info.transferred_bytes);
            transfers += info.transfer_count;
        }
    }
    return {bytes, transfers};
}

/// An empty StarPU model directory for the "none" runs, holding only a copy of the bus
/// calibration (so StarPU does not recalibrate the bus each time); removed on destruction.
/// Points STARPU_HOME and STARPU_PERF_MODEL_DIR at it while it lives.
class EmptyModels {
public:
    EmptyModels() {
        std::string tmpl = (fs::temp_directory_path() / "starfact-nomodels-XXXXXX").string();
        if (mkdtemp(tmpl.data()) == nullptr) throw RuntimeError("cannot create a temporary StarPU home");
        dir_ = tmpl;
        const fs::path sampling = dir_ / ".starpu" / "sampling";
        std::error_code ec;
        fs::create_directories(sampling, ec);
        fs::copy(fs::path(Runtime::perfmodel_dir()) / "bus", sampling / "bus", fs::copy_options::recursive, ec);
        save("STARPU_HOME", home_);
        save("STARPU_PERF_MODEL_DIR", dir_env_);
        setenv("STARPU_HOME", dir_.c_str(), 1);
        setenv("STARPU_PERF_MODEL_DIR", sampling.c_str(), 1);
    }
    ~EmptyModels() {
        restore("STARPU_HOME", home_);
        restore("STARPU_PERF_MODEL_DIR", dir_env_);
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    EmptyModels(const EmptyModels&) = delete;
    EmptyModels& operator=(const EmptyModels&) = delete;

private:
    static void save(const char* name, std::optional<std::string>& v) {
        if (const char* e = std::getenv(name)) v = e;
    }
    static void restore(const char* name, const std::optional<std::string>& v) {
        if (v)
            setenv(name, v->c_str(), 1);
        else
            unsetenv(name);
    }
    fs::path dir_;
    std::optional<std::string> home_, dir_env_;
};

struct RunResult {
    double secs = 0, bytes = 0;
    long transfers = 0;
    int tasks = 0, unpredicted = 0, info = 0;
    std::string starpu_sched;
    int nb = 0;
};

template <class T>
RunResult run_once(const StudyOptions& o, const std::string& sched, const std::vector<T>& A) {
    RuntimeOptions ropt;
    ropt.profiling = true;
    if (!is_static(sched)) ropt.sched = sched;
    Runtime rt(ropt);
    RunResult r;
    r.starpu_sched = rt.scheduler();
    const int n = o.n;
    // LU and QR in 4096 tiles with a GPU: the study compares schedulers on many tasks, where the
    // command line's LU default would make an order up to 8192 one tile.
    const int cholesky_nb = default_tile_sizes(Factorization::Cholesky, n, n, rt).nb;
    const int nb = o.nb > 0 ? o.nb : o.op == "potrf" || rt.ncuda() == 0 ? cholesky_nb : 4096;
    const int ib = o.ib > 0 ? std::min(o.ib, nb) : rt.ncuda() > 0 ? std::min(nb, 512) : std::min(nb, 32);
    r.nb = nb;
    TileMatrix<T> tA(n, n, nb);
    tA.from_lapack(A.data(), std::max(1, n));
    std::unique_ptr<LuFactors<T>> lu;
    std::unique_ptr<QrFactors<T>> qr;
    if (o.op == "getrf") lu = std::make_unique<LuFactors<T>>(tA, ib, o.trtri == "on" || (o.trtri == "auto" && rt.ncuda() > 0));
    if (o.op == "geqrf") qr = std::make_unique<QrFactors<T>>(tA, ib);
    starpu_task_wait_for_all();
    reset_bus_counters();
    codelets::start_trace();
    const auto t0 = std::chrono::steady_clock::now();
    if (o.op == "potrf")
        r.info = potrf('L', tA);
    else if (o.op == "getrf")
        r.info = getrf(tA, *lu, is_static(sched) ? parse_lu_schedule(sched) : LuSchedule::Dynamic);
    else
        geqrf(tA, *qr);
    r.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::vector<codelets::TaskRecord> tasks = codelets::stop_trace();
    std::tie(r.bytes, r.transfers) = bus_traffic();
    r.tasks = static_cast<int>(tasks.size());
    for (const auto& t : tasks) r.unpredicted += std::isnan(t.predicted_s) ? 1 : 0;
    return r;
}

template <class T>
int study(const StudyOptions& o) {
    check_scheds(o);
    check_problem_size("-n", o.n, o.n, o.prec == "s" ? 4 : 8, 3);
    if (const char* s = std::getenv("STARPU_SCHED"); s != nullptr && *s != '\0') {
        fmt::print(stderr, "starfact: note: STARPU_SCHED={} is ignored: sched-study sets the scheduler of each run\n", s);
        unsetenv("STARPU_SCHED");
    }
    const std::uint64_t seed = o.seed != 0 ? o.seed : std::random_device{}() | 1ULL;
    const int n = o.n;
    std::vector<T> A(static_cast<std::size_t>(std::max(1, n)) * n);
    if (o.op == "potrf")
        matgen::spd(n, seed, A.data(), std::max(1, n));
    else
        matgen::uniform(n, n, seed, A.data(), std::max(1, n));
    const double dn = n;
    const double flops = o.op == "potrf"   ? dn * dn * dn / 3.0 + dn * dn / 2.0 + dn / 6.0
                         : o.op == "getrf" ? 2.0 * dn * dn * dn / 3.0
                                           : 4.0 * dn * dn * dn / 3.0;

    Reporter out(parse_format(o.format), kColumns);
    nlohmann::ordered_json config;
    config["command"] = "sched-study";
    config["starpu"] = Runtime::starpu_version();
    config["op"] = o.op;
    config["prec"] = o.prec;
    config["n"] = n;
    config["niter"] = o.niter;
    config["seed"] = seed;
    config["perfmodel_dir"] = Runtime::perfmodel_dir();
    config["note"] = "each run starts a fresh StarPU with the matrix in host memory; moved_gb counts every transfer "
                     "between memory nodes during the factorization; unpredicted: tasks placed without a calibrated "
                     "model (all of them for schedulers that do not predict)";
    out.header(config);

    std::vector<std::string> modes;
    if (o.models != "none") modes.push_back("calibrated");
    if (o.models != "calibrated") modes.push_back("none");
    int failed = 0;
    for (const std::string& mode : modes)
        for (const std::string& sched : o.scheds) {
            std::vector<RunResult> runs;
            for (int it = 0; it < o.niter; ++it) {
                std::unique_ptr<EmptyModels> empty;
                if (mode == "none") empty = std::make_unique<EmptyModels>();
                runs.push_back(run_once<T>(o, sched, A));
            }
            std::vector<double> t;
            for (const auto& r : runs) t.push_back(r.secs);
            const double tm = median(t);
            // The run whose time is the median (the lower one for an even count) speaks for the others.
            std::sort(runs.begin(), runs.end(), [](const RunResult& a, const RunResult& b) { return a.secs < b.secs; });
            const RunResult& r = runs[(runs.size() - 1) / 2];
            const bool ok = std::all_of(runs.begin(), runs.end(), [](const RunResult& x) { return x.info == 0; });
            if (!ok) ++failed;
            out.row({{"models", mode}, {"sched", sched}, {"starpu_sched", r.starpu_sched}, {"op", o.op}, {"n", n},
                     {"nb", r.nb}, {"time_s", tm}, {"tflops", tm > 0 ? flops / tm / 1e12 : 0.0},
                     {"moved_gb", r.bytes / 1e9}, {"transfers", r.transfers}, {"tasks", r.tasks},
                     {"unpredicted", r.unpredicted}, {"status", ok ? "ok" : "FAILED"}});
        }
    return failed;
}

}  // namespace

void add_sched_study_command(CLI::App& app, Run& run) {
    auto o = std::make_shared<StudyOptions>();
    CLI::App* cmd = app.add_subcommand(
        "sched-study", "One factorization under several schedulers, with calibrated models and without: time, TFLOP/s,\n"
                       "bytes moved between memories");
    const CLI::Range positive(1, std::numeric_limits<int>::max());
    cmd->add_option("--op", o->op, "The factorization")
        ->check(CLI::IsMember({"potrf", "getrf", "geqrf"}))
        ->capture_default_str();
    cmd->add_option("-n", o->n, "Matrix order")->check(positive)->capture_default_str();
    cmd->add_option("--nb", o->nb, "Tile size; 0: the subcommand's default (potrf: 1024 with a GPU, LU and QR 4096; "
                                   "256 without)")
        ->check(CLI::Range(0, std::numeric_limits<int>::max()))
        ->capture_default_str();
    cmd->add_option("--ib", o->ib, "LU/QR inner block; 0: the subcommand's default")
        ->check(CLI::Range(0, std::numeric_limits<int>::max()))
        ->capture_default_str();
    cmd->add_option("--trtri", o->trtri, "LU's trtri + gemm variant, as getrf's --trtri")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    cmd->add_option("--prec", o->prec, "Precision: s or d")->check(CLI::IsMember({"s", "d"}))->capture_default_str();
    cmd->add_option("--scheds", o->scheds,
                    "Schedulers, comma separated: StarPU's (dmda, dmdas, dmdar, eager, lws, ws, prio, heft, ...) and, "
                    "for getrf,\nstatic-rl, static-ll, static-bfll")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--models", o->models,
                    "calibrated: the current StarPU home's models; none: an empty model directory for every run; both")
        ->check(CLI::IsMember({"calibrated", "none", "both"}))
        ->capture_default_str();
    cmd->add_option("--niter", o->niter, "Runs per scheduler (the median is reported)")->check(positive)->capture_default_str();
    cmd->add_option("--seed", o->seed, "Random seed of the matrix (0: random, printed)")
        ->check(no_minus_sign())
        ->capture_default_str();
    cmd->add_option("--format", o->format, "Output: table, csv or json (one object per line)")
        ->check(CLI::IsMember({"table", "csv", "json"}))
        ->capture_default_str();
    cmd->footer("Calibrate first (starfact calibrate --nb <the nb used here>) for the 'calibrated' rows to mean it.\n"
                "Example: starfact sched-study --op potrf -n 16384 --nb 1024 --scheds dmda,dmdas,dmdar,eager,lws");
    cmd->callback([&run, o] {
        run = [o]() -> int { return o->prec == "s" ? study<float>(*o) : study<double>(*o); };
    });
}

}  // namespace starfact::cli
