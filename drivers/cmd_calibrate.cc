// `starfact calibrate`: runs the tile factorizations on small matrices and the batched
// operations on small batches, one kind of worker at a time, until every performance model they
// use has STARPU_CALIBRATE_MINIMUM samples on every kind of worker, then prints a convergence
// report read from the model files and the measured tasks (samples against the minimum, mean,
// deviation, tasks placed without a calibrated model, workers that disagree, outlier samples,
// and the batched models' regressions).
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "batched/batched.hpp"
#include "batched/vbatched.hpp"
#include "codelets/codelets.hpp"
#include "codelets/trace.hpp"
#include "common/error.hpp"
#include "common/matgen.hpp"
#include "perfmodels/model_check.hpp"
#include "drivers/commands.hpp"
#include "drivers/session.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

namespace starfact::cli {
namespace {

struct CalibrateOptions {
    std::vector<int> nbs;  ///< empty: 128,256 on CPUs only, 1024,2048,4096 with a GPU
    std::vector<int> batch_ns = {16, 32, 64};  ///< matrix orders of the batched operations
    int batch_count = 64;
    std::vector<std::string> ops = {"potrf", "getrf", "geqrf"};
    std::string prec = "d";
    std::string home;
    int min_samples = 0;  ///< 0: STARPU_CALIBRATE_MINIMUM, else StarPU's 10
    int ib = 0;
    std::string trtri = "auto";
    int tiles = 4;
    int max_rounds = 30;
    bool report_only = false;
    std::string format = "table";
};

/// What one operation needs to run once on an nb * tiles matrix: the inner block and the trtri
/// variant follow the factorization subcommands' defaults, so that the calibrated footprints
/// (which include the shapes of the L and T factor tiles) are the ones those runs use.
struct Setup {
    int nb, ib;  ///< batched operations: nb is the matrices' order
    bool trtri;
    int count;  ///< batched operations: matrices per batch
};

enum class BatchedKind { getrf, getrs, potrf, potrs, geqrf, gels };

/// One calibration run of a batched operation through batched::tasks: a batch of s.count
/// matrices of order s.nb (one right-hand side for the solves, which factor first), run cut into
/// slices of one matrix, into 4 slices of about count/4, into the slices `starfact batched` and
/// batched::tasks make by default (two per worker), and as one slice. The default slicing is the
/// one a run of count matrices on these workers uses, so its footprints have history and dmda
/// does not fall back on the fitted curve (which mixes every order: docs/perfmodels.md); the
/// others give the regression a spread of sizes.
template <class T>
void run_batched(BatchedKind kind, const Setup& s) {
    const int n = s.nb, count = s.count;
    const long long stride = static_cast<long long>(n) * n;
    const bool spd = kind == BatchedKind::potrf || kind == BatchedKind::potrs;
    std::vector<T> A0(static_cast<std::size_t>(stride * count)), B0(static_cast<std::size_t>(n) * count);
    for (int b = 0; b < count; ++b) {
        T* Ab = A0.data() + stride * b;
        if (spd)
            matgen::spd(n, static_cast<std::uint64_t>(b) + 1, Ab, n);
        else
            matgen::uniform(n, n, static_cast<std::uint64_t>(b) + 1, Ab, n);
    }
    matgen::uniform(n, count, 7, B0.data(), n);
    std::vector<T> tau(static_cast<std::size_t>(n) * count);
    std::vector<int> ipiv(static_cast<std::size_t>(n) * count), info(static_cast<std::size_t>(count));
    std::vector<int> slicings;  // numbers of slices
    for (int sl : {count, std::min(count, 4), batched::tasks::default_slices(count, stride), 1})
        if (std::find(slicings.begin(), slicings.end(), sl) == slicings.end()) slicings.push_back(sl);
    namespace bt = batched::tasks;
    for (int slices : slicings) {
        std::vector<T> A = A0, B = B0;
        bt::TaskOptions opt;
        opt.slices = slices;
        switch (kind) {
            case BatchedKind::getrf:
                bt::getrf<T>(n, A.data(), n, stride, ipiv.data(), info.data(), count, opt);
                break;
            case BatchedKind::getrs:
                bt::getrf<T>(n, A.data(), n, stride, ipiv.data(), info.data(), count, opt);
                bt::getrs<T>(n, 1, A.data(), n, stride, ipiv.data(), B.data(), n, n, count, opt);
                break;
            case BatchedKind::potrf:
                bt::potrf<T>(batched::Uplo::lower, n, A.data(), n, stride, info.data(), count, opt);
                break;
            case BatchedKind::potrs:
                bt::potrf<T>(batched::Uplo::lower, n, A.data(), n, stride, info.data(), count, opt);
                bt::potrs<T>(batched::Uplo::lower, n, 1, A.data(), n, stride, B.data(), n, n, count, opt);
                break;
            case BatchedKind::geqrf:
                bt::geqrf<T>(n, n, A.data(), n, stride, tau.data(), count, opt);
                break;
            case BatchedKind::gels:
                bt::gels<T>(n, n, 1, A.data(), n, stride, tau.data(), B.data(), n, n, info.data(), count, opt);
                break;
        }
    }
}

/// One calibration run of a variable-size batched operation through batched::tasks::v*: s.count
/// matrices of orders drawn uniformly in [1, s.nb] (the same orders every round, so that each
/// footprint collects samples), cut into the same slicings as run_batched. The slices' flops
/// spread over three orders of magnitude, which is what the regression of the variable-size
/// models (fitted on flops, the footprint being a slice's exact flops) needs to predict batches
/// never run.
template <class T>
void run_vbatched(BatchedKind kind, const Setup& s) {
    const int count = s.count;
    std::vector<int> n(static_cast<std::size_t>(count)), ld(n.size());
    std::uint64_t state = 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(s.nb);
    std::vector<std::size_t> off(n.size() + 1, 0);
    for (int b = 0; b < count; ++b) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;  // fixed orders, any platform
        n[b] = 1 + static_cast<int>((state >> 33) % static_cast<std::uint64_t>(s.nb));
        ld[b] = n[b];
        off[b + 1] = off[b] + static_cast<std::size_t>(n[b]) * n[b];
    }
    const bool spd = kind == BatchedKind::potrf || kind == BatchedKind::potrs;
    std::vector<T> A0(off[count]), B0(static_cast<std::size_t>(count) * s.nb);
    for (int b = 0; b < count; ++b) {
        if (spd)
            matgen::spd(n[b], static_cast<std::uint64_t>(b) + 1, A0.data() + off[b], n[b]);
        else
            matgen::uniform(n[b], n[b], static_cast<std::uint64_t>(b) + 1, A0.data() + off[b], n[b]);
        matgen::uniform(n[b], 1, static_cast<std::uint64_t>(b) + 7, B0.data() + static_cast<std::size_t>(b) * s.nb, n[b]);
    }
    std::vector<T> tau(static_cast<std::size_t>(count) * s.nb);
    std::vector<int> ipiv(static_cast<std::size_t>(count) * s.nb), info(n.size());
    std::vector<int> slicings;
    for (int sl : {count, std::min(count, 4), batched::tasks::default_slices(count, 0), 1})
        if (std::find(slicings.begin(), slicings.end(), sl) == slicings.end()) slicings.push_back(sl);
    namespace bt = batched::tasks;
    for (int slices : slicings) {
        std::vector<T> A = A0, B = B0;
        std::vector<T*> pA(n.size()), pB(n.size()), pT(n.size());
        std::vector<int*> pP(n.size());
        for (int b = 0; b < count; ++b) {
            pA[b] = A.data() + off[b];
            pB[b] = B.data() + static_cast<std::size_t>(b) * s.nb;
            pT[b] = tau.data() + static_cast<std::size_t>(b) * s.nb;
            pP[b] = ipiv.data() + static_cast<std::size_t>(b) * s.nb;
        }
        const std::vector<const int*> cP(pP.begin(), pP.end());
        bt::VTaskOptions opt;
        opt.slices = slices;
        const batched::Uplo lower = batched::Uplo::lower;
        switch (kind) {
            case BatchedKind::getrf:
                bt::vgetrf<T>(n.data(), pA.data(), ld.data(), pP.data(), info.data(), count, opt);
                break;
            case BatchedKind::getrs:
                bt::vgetrf<T>(n.data(), pA.data(), ld.data(), pP.data(), info.data(), count, opt);
                bt::vgetrs<T>(n.data(), 1, pA.data(), ld.data(), cP.data(), pB.data(), ld.data(), count, opt);
                break;
            case BatchedKind::potrf:
                bt::vpotrf<T>(lower, n.data(), pA.data(), ld.data(), info.data(), count, opt);
                break;
            case BatchedKind::potrs:
                bt::vpotrf<T>(lower, n.data(), pA.data(), ld.data(), info.data(), count, opt);
                bt::vpotrs<T>(lower, n.data(), 1, pA.data(), ld.data(), pB.data(), ld.data(), count, opt);
                break;
            case BatchedKind::geqrf:
                bt::vgeqrf<T>(n.data(), n.data(), pA.data(), ld.data(), pT.data(), count, opt);
                break;
            case BatchedKind::gels:
                bt::vgels<T>(n.data(), n.data(), 1, pA.data(), ld.data(), pT.data(), pB.data(), ld.data(), info.data(),
                             count, opt);
                break;
        }
    }
}

/// An operation calibrate can run: its name and one run on an n x n matrix `A` (column-major,
/// generated once per size). Another module's codelets are calibrated by adding one entry to
/// operations() (e.g. the batched codelet, whose run would build its batch from A's entries):
/// --ops accepts every name listed there, and the report covers every starfact_* model.
template <class T>
struct Operation {
    const char* name;
    bool spd;  ///< the matrix must be SPD (else uniform random)
    std::function<void(const std::vector<T>& A, int n, const Setup& s)> run;
    bool batched = false;  ///< runs batches of order nb built by itself (A is empty)
};

template <class T>
Operation<T> batched_operation(const char* name, BatchedKind kind, bool variable = false) {
    return {name, false,
            [kind, variable](const std::vector<T>&, int, const Setup& s) {
                if (variable)
                    run_vbatched<T>(kind, s);
                else
                    run_batched<T>(kind, s);
            },
            true};
}

template <class T>
std::vector<Operation<T>> operations() {
    return {
        {"potrf", true,
         [](const std::vector<T>& A, int n, const Setup& s) {
             TileMatrix<T> tA(n, n, s.nb);
             tA.from_lapack(A.data(), n);
             potrf('L', tA);
         }},
        {"getrf", false,
         [](const std::vector<T>& A, int n, const Setup& s) {
             TileMatrix<T> tA(n, n, s.nb);
             tA.from_lapack(A.data(), n);
             LuFactors<T> F(tA, s.ib, s.trtri);
             getrf(tA, F);
         }},
        {"geqrf", false,
         [](const std::vector<T>& A, int n, const Setup& s) {
             // The flat plan (GEQRT, UNMQR, TSQRT, TSMQR) and a binary tree (TTQRT, TTMQR too):
             // on a square matrix the default plan is flat and would leave the TT kernels out.
             for (const QrOptions& plan : {QrOptions{QrTree::Flat, 0}, QrOptions{QrTree::Binary, 1}}) {
                 TileMatrix<T> tA(n, n, s.nb);
                 tA.from_lapack(A.data(), n);
                 QrFactors<T> F(tA, s.ib, plan);
                 geqrf(tA, F);
             }
         }},
        batched_operation<T>("batched-getrf", BatchedKind::getrf),
        batched_operation<T>("batched-getrs", BatchedKind::getrs),
        batched_operation<T>("batched-potrf", BatchedKind::potrf),
        batched_operation<T>("batched-potrs", BatchedKind::potrs),
        batched_operation<T>("batched-geqrf", BatchedKind::geqrf),
        batched_operation<T>("batched-gels", BatchedKind::gels),
        batched_operation<T>("vbatched-getrf", BatchedKind::getrf, true),
        batched_operation<T>("vbatched-getrs", BatchedKind::getrs, true),
        batched_operation<T>("vbatched-potrf", BatchedKind::potrf, true),
        batched_operation<T>("vbatched-potrs", BatchedKind::potrs, true),
        batched_operation<T>("vbatched-geqrf", BatchedKind::geqrf, true),
        batched_operation<T>("vbatched-gels", BatchedKind::gels, true),
    };
}

const std::vector<std::string> kColumns = {"model", "arch", "footprint", "size", "samples", "minimum", "mean_us",
                                           "rel_dev", "median_us", "tasks", "fallback", "status"};

using Key = std::tuple<std::string, std::string, std::uint32_t>;  // model, arch, footprint

unsigned calibration_minimum() {
    const char* m = std::getenv("STARPU_CALIBRATE_MINIMUM");
    const int v = m != nullptr ? std::atoi(m) : 0;
    return v > 0 ? static_cast<unsigned>(v) : 10u;  // StarPU's default
}

/// One line per regression model and architecture (the batched models): the fitted curve and
/// whether StarPU predicts with it, or why not.
void print_regressions(const std::vector<models::ModelFile>& files) {
    const unsigned minimum = calibration_minimum();
    for (const models::ModelFile& f : files)
        for (const models::ArchModel& a : f.archs) {
            const models::Regression& r = a.regression;
            if (r.nsample == 0) continue;  // a history-based model
            const std::string range = fmt::format("sizes {} to {} flops, {} samples", r.minx, r.maxx, r.nsample);
            if (r.valid(minimum))
                fmt::print(stderr, "starfact: calibrate: regression {} {}: time_us = {:.4g} * size^{:.4g} + {:.4g} ({}; "
                           "predicts sizes {:.0f} to {:.0f})\n",
                           f.symbol, a.arch, r.a, r.b, r.c, range, 0.9 * static_cast<double>(r.minx),
                           1.1 * static_cast<double>(r.maxx));
            else
                fmt::print(stderr, "starfact: calibrate: regression {} {}: not used ({}; {})\n", f.symbol, a.arch, range,
                           !r.fitted() ? "StarPU's fit gave NaN (too few footprints, or its search for c failed); "
                                         "the footprints' history predicts"
                           : r.nsample < minimum ? "fewer samples than the minimum"
                                                 : "sizes spread by less than 10%");
        }
}

/// Prints the report and returns the number of targeted rows (measured in this run, or every
/// row for --report-only) still under the minimum.
int print_report(const CalibrateOptions& o, const std::vector<models::ModelFile>& files,
                 const std::vector<models::Sample>& samples, bool report_only) {
    const models::Report rep = models::analyse(files, samples, calibration_minimum());
    Reporter out(parse_format(o.format), kColumns);
    nlohmann::ordered_json config;
    config["command"] = "calibrate";
    config["perfmodel_dir"] = models::codelet_dir();
    config["host"] = models::host_name();
    config["minimum"] = calibration_minimum();
    config["files"] = files.size();
    config["tasks"] = samples.size();
    out.header(config);
    int under = 0;
    for (const models::ReportRow& r : rep.rows) {
        const bool targeted = report_only || r.tasks > 0;
        const bool ok = r.calibrated();
        if (targeted && !ok) ++under;
        out.row({{"model", r.symbol}, {"arch", r.arch}, {"footprint", fmt::format("{:08x}", r.footprint)},
                 {"size", r.size}, {"samples", r.nsample}, {"minimum", r.minimum}, {"mean_us", r.mean_us},
                 {"rel_dev", r.rel_dev}, {"median_us", r.tasks > 0 ? nlohmann::ordered_json(r.median_us) : nullptr},
                 {"tasks", r.tasks}, {"fallback", r.fallback}, {"status", !ok ? (targeted ? "UNDER" : "under") : r.by_regression ? "regression" : "ok"}});
    }
    print_regressions(files);
    for (const std::string& w : rep.warnings) fmt::print(stderr, "starfact: warning: {}\n", w);
    if (!rep.warnings.empty())
        fmt::print(stderr, "starfact: note: StarPU drops a sample more than 50% off a model's mean (STARPU_HISTORY_MAX_ERROR)"
                   ", but not the first ones: an early outlier keeps the mean wrong. Where a model's mean is off,\n"
                   "  recalibrate it with STARPU_CALIBRATE=2 (it starts from empty models) on a quiet machine\n");
    fmt::print(stderr, "starfact: calibrate: {} of {} models x architectures x footprints calibrated ({} samples or more), "
               "{} warnings\n",
               rep.rows.size() - static_cast<std::size_t>(rep.uncalibrated()), rep.rows.size(), calibration_minimum(),
               rep.warnings.size());
    return std::min(under, 100);
}

std::vector<models::ModelFile> read_models(const std::set<std::string>& symbols) {
    std::vector<models::ModelFile> files;
    for (const std::string& path : models::model_files()) {
        models::ModelFile f = models::parse_model_file(path);
        if (symbols.empty() || symbols.count(f.symbol)) files.push_back(std::move(f));
    }
    return files;
}

template <class T>
int calibrate(const CalibrateOptions& o) {
    const models::CalibrationLock lock;
    if (lock.waited()) fmt::print(stderr, "starfact: calibrate: waited for another calibration ({})\n", lock.path());
    // The other calibration may have changed the files since the pre-flight.
    for (const std::string& note : models::preflight_or_throw(true)) fmt::print(stderr, "starfact: note: {}\n", note);

    std::vector<models::Sample> samples;
    std::set<std::string> symbols;
    int remaining = 0;
    {
        RuntimeOptions ropt;
        ropt.profiling = true;
        // dmda: it predicts with the models (so tasks placed without one are counted).
        if (const char* s = std::getenv("STARPU_SCHED"); s == nullptr || *s == '\0') ropt.sched = "dmda";
        Runtime rt(ropt);
        std::vector<int> nbs = o.nbs;
        if (nbs.empty()) nbs = rt.ncuda() > 0 ? std::vector<int>{1024, 2048, 4096} : std::vector<int>{128, 256};
        std::vector<std::pair<codelets::Impl, const char*>> kinds;
        if (rt.ncpu() > 0) kinds.push_back({codelets::Impl::Cpu, "cpu"});
        if (rt.ncuda() > 0) kinds.push_back({codelets::Impl::Cuda, "cuda"});
        nlohmann::ordered_json config = runtime_config(rt);
        config["command"] = "calibrate";
        config["prec"] = o.prec;
        std::string nb_text, op_text;
        for (int nb : nbs) nb_text += (nb_text.empty() ? "" : ",") + std::to_string(nb);
        for (const auto& op : o.ops) op_text += (op_text.empty() ? "" : ",") + op;
        config["nb"] = nb_text;
        config["ops"] = op_text;
        config["tiles"] = o.tiles;
        std::string batch_text;
        for (int n : o.batch_ns) batch_text += (batch_text.empty() ? "" : ",") + std::to_string(n);
        config["batch_n"] = batch_text;
        config["batch_count"] = o.batch_count;
        config["minimum"] = calibration_minimum();
        Reporter(parse_format(o.format), {}).header(config);

        // One job: an operation, a tile size, a kind of worker; done once every (model, arch,
        // footprint) it produced is calibrated.
        struct Job {
            const Operation<T>* op;
            Setup setup;
            codelets::Impl kind;
            const char* kind_name;
            std::set<Key> keys;
            bool done = false;
        };
        const auto ops = operations<T>();
        std::vector<Job> jobs;
        for (const std::string& name : o.ops) {
            const auto it = std::find_if(ops.begin(), ops.end(), [&](const Operation<T>& op) { return name == op.name; });
            for (int nb : nbs) {
                if (it->batched) continue;
                const int ib = o.ib > 0 ? std::min(o.ib, nb) : rt.ncuda() > 0 ? std::min(nb, 512) : std::min(nb, 32);
                const bool trtri = o.trtri == "on" || (o.trtri == "auto" && rt.ncuda() > 0);
                for (const auto& [kind, kind_name] : kinds)
                    jobs.push_back({&*it, {nb, ib, trtri, 0}, kind, kind_name, {}, false});
            }
            if (it->batched)
                for (int n : o.batch_ns)
                    for (const auto& [kind, kind_name] : kinds)
                        jobs.push_back({&*it, {n, 0, false, o.batch_count}, kind, kind_name, {}, false});
        }
        std::map<std::pair<bool, int>, std::vector<T>> matrices;  // (spd, n) -> A
        std::map<Key, bool> calibrated;
        for (int round = 1; round <= o.max_rounds; ++round) {
            bool ran = false;
            for (Job& job : jobs) {
                if (job.done) continue;
                const int n = job.setup.nb * o.tiles;
                std::vector<T>& A = matrices[{job.op->spd, job.op->batched ? 0 : n}];
                if (A.empty() && !job.op->batched) {
                    A.resize(static_cast<std::size_t>(n) * n);
                    if (job.op->spd)
                        matgen::spd(n, 1, A.data(), n);
                    else
                        matgen::uniform(n, n, 1, A.data(), n);
                }
                const codelets::ScopedImpl force(job.kind);
                codelets::start_trace();
                job.op->run(A, n, job.setup);
                for (const codelets::TaskRecord& r : codelets::stop_trace()) {
                    if (r.model.empty()) continue;
                    const Key key{r.model, r.arch, r.footprint};
                    job.keys.insert(key);
                    calibrated[key] = !std::isnan(r.model_s);  // the latest task says where the model is
                    symbols.insert(r.model);
                    samples.push_back({r.model, r.arch, r.worker, r.footprint, (r.end_s - r.start_s) * 1e6,
                                       !std::isnan(r.predicted_s)});
                }
                ran = true;
            }
            int done = 0;
            for (const auto& [key, ok] : calibrated) done += ok ? 1 : 0;
            for (Job& job : jobs)
                job.done = !job.keys.empty() && std::all_of(job.keys.begin(), job.keys.end(),
                                                            [&](const Key& k) { return calibrated[k]; });
            fmt::print(stderr, "starfact: calibrate: round {}: {} of {} (model, arch, footprint) calibrated\n", round, done,
                       calibrated.size());
            if (!ran || std::all_of(jobs.begin(), jobs.end(), [](const Job& j) { return j.done; })) break;
        }
        for (const auto& [key, ok] : calibrated) remaining += ok ? 0 : 1;
        if (remaining > 0)
            fmt::print(stderr, "starfact: calibrate: {} not calibrated after {} rounds (--max-rounds)\n", remaining,
                       o.max_rounds);
    }  // StarPU writes the models at shutdown
    return print_report(o, read_models(symbols), samples, false);
}

int run_calibrate(const CalibrateOptions& o) {
    if (o.report_only) return print_report(o, read_models({}), {}, true);
    return o.prec == "s" ? calibrate<float>(o) : calibrate<double>(o);
}

}  // namespace

void add_calibrate_command(CLI::App& app, Run& run) {
    auto o = std::make_shared<CalibrateOptions>();
    CLI::App* cmd = app.add_subcommand(
        "calibrate", "Calibrate the performance models: run the tile and batched kernels on every kind of worker until\n"
                     "every model has STARPU_CALIBRATE_MINIMUM samples, then report their convergence");
    const CLI::Range positive(1, std::numeric_limits<int>::max());
    cmd->add_option("--nb", o->nbs, "Tile sizes, comma separated (default: 128,256 on CPUs, 1024,2048,4096 with a GPU)")
        ->delimiter(',')
        ->check(positive);
    std::vector<std::string> names;
    for (const Operation<double>& op : operations<double>()) names.emplace_back(op.name);
    cmd->add_option("--ops", o->ops, "Operations whose kernels to calibrate, comma separated: tile potrf, getrf, geqrf; batched-getrf,\n"
                    "batched-getrs, batched-potrf, batched-potrs, batched-geqrf, batched-gels; the variable-size\n"
                    "vbatched-getrf, vbatched-getrs, vbatched-potrf, vbatched-potrs, vbatched-geqrf, vbatched-gels")
        ->delimiter(',')
        ->check(CLI::IsMember(names))
        ->capture_default_str();
    cmd->add_option("--prec", o->prec, "Precision: s (float) or d (double)")
        ->check(CLI::IsMember({"s", "d"}))
        ->capture_default_str();
    cmd->add_option("--home", o->home, "StarPU home to calibrate (sets STARPU_HOME; default: the current one)");
    cmd->add_option("--min-samples", o->min_samples,
                    "Samples a model needs (sets STARPU_CALIBRATE_MINIMUM; default: its value, else 10)")
        ->check(positive);
    cmd->add_option("--ib", o->ib, "LU/QR inner block; 0: the getrf/geqrf default (min(nb, 512) with a GPU, else "
                                   "min(nb, 32)). Use the ib of the runs the models are for")
        ->check(CLI::Range(0, std::numeric_limits<int>::max()))
        ->capture_default_str();
    cmd->add_option("--trtri", o->trtri, "LU's trtri + gemm variant, as getrf's --trtri (changes the footprints)")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    cmd->add_option("--tiles", o->tiles, "Tile rows and columns of the matrices run")
        ->check(CLI::Range(2, 64))
        ->capture_default_str();
    cmd->add_option("--batch-n", o->batch_ns,
                    "Matrix orders of the batched operations (vbatched-*: the largest order), comma separated")
        ->delimiter(',')
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    cmd->add_option("--batch-count", o->batch_count,
                    "Matrices per batch of the batched operations (run as slices of 1, count/4 and count matrices and as\n"
                    "the default slicing of a run of that many on these workers: calibrate the counts you run)")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    cmd->add_option("--max-rounds", o->max_rounds, "Give up after this many rounds")->check(positive)->capture_default_str();
    cmd->add_flag("--report-only", o->report_only, "Only report on the existing model files (StarPU is not started)");
    cmd->add_option("--format", o->format, "Output: table, csv or json (one object per line)")
        ->check(CLI::IsMember({"table", "csv", "json"}))
        ->capture_default_str();
    cmd->footer(
        "Each round runs every operation on an (nb * tiles)^2 matrix for every tile size, once with the CPU\n"
        "workers only and once with the CUDA workers only, under dmda (unless STARPU_SCHED is set), with\n"
        "STARPU_CALIBRATE=1 (STARPU_CALIBRATE=2 is honoured: it starts from empty models). Models are keyed by\n"
        "tile shape: calibrate the nb (and ib) of the runs they are for; edge tiles get their own entries.\n"
        "The batched-* operations run batches of --batch-count matrices of each --batch-n order through the\n"
        "batched codelet (the solves with one right-hand side, after factoring); their models are also fitted\n"
        "as a * flops^b + c, which predicts slice sizes never run (one line per model on stderr). The vbatched-*\n"
        "operations run --batch-count matrices of orders drawn in [1, N] for each --batch-n N through the\n"
        "variable-size codelet, sliced the same ways; only their regression predicts unseen batches.\n"
        "Exit code: the number of (model, arch, footprint) left under the minimum.\n"
        "Example: starfact calibrate --nb 1024,2048 --ops potrf,getrf --prec d --home /tmp/models");
    cmd->callback([&run, o] {
        // Before the pre-flight and StarPU: they read these.
        if (!o->home.empty()) {
            std::error_code ec;
            const std::filesystem::path abs = std::filesystem::absolute(o->home, ec);
            setenv("STARPU_HOME", (ec ? o->home : abs.string()).c_str(), 1);
        }
        if (o->min_samples > 0) setenv("STARPU_CALIBRATE_MINIMUM", std::to_string(o->min_samples).c_str(), 1);
        if (!o->report_only && models::calibrate_level() < 1) setenv("STARPU_CALIBRATE", "1", 1);
        run = [o]() -> int { return run_calibrate(*o); };
    });
}

}  // namespace starfact::cli
