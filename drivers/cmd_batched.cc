// `starfact batched`: many small factorizations or solves at once, cut into slices that StarPU
// shares between CPU and GPU workers (batched::tasks), timed and checked matrix by matrix.
#include <starpu.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "batched/batched.hpp"
#include "batched/residuals.hpp"
#include "common/error.hpp"
#include "common/matgen.hpp"
#include "common/parallel.hpp"
#include "drivers/commands.hpp"
#include "drivers/session.hpp"

namespace starfact::cli {
namespace {

struct BatchedOptions {
    std::string op = "getrf";
    int count = 1000;
    int n = 32;
    int m = -1;  ///< geqrf and gels only; -1: n
    int nrhs = 1;
    std::string uplo = "lower";
    std::string prec = "d";
    int slices = 0;
    std::uint64_t seed = 0;
    bool check = false;
    int niter = 1;
    std::string format = "table";
    bool m_given = false;
};

const std::vector<std::string> kColumns = {"op",     "prec", "count",  "m",      "n",        "nrhs",   "uplo",
                                           "slices", "iter", "time_s", "gflops", "residual", "failed", "status"};

bool is_qr(const std::string& op) { return op == "geqrf" || op == "gels"; }
bool is_solve(const std::string& op) { return op == "getrs" || op == "potrs" || op == "gels"; }
bool is_cholesky(const std::string& op) { return op == "potrf" || op == "potrs"; }

/// Host storage from starpu_malloc (pinned when CUDA workers exist, so transfers overlap).
template <class E>
class Storage {
public:
    explicit Storage(std::size_t count) : count_(count) {
        if (count == 0) return;
        void* p = nullptr;
        if (starpu_malloc(&p, count * sizeof(E)) != 0 || p == nullptr)
            throw RuntimeError(fmt::format("cannot allocate {} bytes of host memory", count * sizeof(E)));
        data_ = static_cast<E*>(p);
    }
    ~Storage() {
        if (data_ != nullptr) starpu_free(data_);
    }
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    E* get() const { return data_; }
    std::size_t size() const { return count_; }
    void copy_from(const Storage& other) {
        // One chunk per thread: the batch can be gigabytes.
        const std::size_t chunk = 1 << 20;
        const int chunks = static_cast<int>((count_ + chunk - 1) / chunk);
        parallel_for(chunks, [&](int c) {
            const std::size_t lo = static_cast<std::size_t>(c) * chunk, hi = std::min(count_, lo + chunk);
            std::memcpy(data_ + lo, other.data_ + lo, (hi - lo) * sizeof(E));
        });
    }

private:
    E* data_ = nullptr;
    std::size_t count_;
};

/// Matrix b's seed: distinct for every matrix and for A and B.
std::uint64_t matrix_seed(std::uint64_t seed, int b, int which) {
    return seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(b) * 2 + static_cast<std::uint64_t>(which) + 1;
}

template <class T>
int run_batched(const BatchedOptions& o) {
    using namespace starfact::batched;
    const std::uint64_t seed = o.seed != 0 ? o.seed : std::random_device{}() | 1ULL;
    const int n = o.n, count = o.count;
    const int m = is_qr(o.op) ? (o.m >= 0 ? o.m : n) : n;
    const int nrhs = is_solve(o.op) ? o.nrhs : 0;
    const int lda = std::max(1, m), ldb = std::max(1, m);
    const long long sA = static_cast<long long>(lda) * n, sB = static_cast<long long>(ldb) * nrhs;
    const Uplo uplo = o.uplo == "upper" ? Uplo::upper : Uplo::lower;

    Runtime rt;
    const int slices = o.slices > 0 ? std::min(o.slices, std::max(1, count)) : tasks::default_slices(count, sA);
    const tasks::TaskOptions topt{slices};
    Reporter out(parse_format(o.format), kColumns);
    nlohmann::ordered_json config = runtime_config(rt);
    config["op"] = o.op;
    config["prec"] = o.prec;
    config["count"] = count;
    config["m"] = m;
    config["n"] = n;
    config["nrhs"] = nrhs;
    if (is_cholesky(o.op)) config["uplo"] = o.uplo;
    config["slices"] = slices;
    config["seed"] = seed;
    out.header(config);

    const std::size_t cnt = static_cast<std::size_t>(count);
    Storage<T> A0(cnt * sA), A(cnt * sA), B0(cnt * sB), B(cnt * sB), tau(is_qr(o.op) ? cnt * n : 0);
    Storage<int> ipiv(o.op == "getrf" || o.op == "getrs" ? cnt * n : 0), info(cnt);
    if (cnt > 0) std::fill(info.get(), info.get() + cnt, 0);  // geqrf, getrs and potrs leave it as it is
    parallel_for(count, [&](int b) {
        T* a = A0.get() + b * sA;
        if (is_cholesky(o.op))
            matgen::spd(n, matrix_seed(seed, b, 0), a, lda);
        else
            matgen::uniform(m, n, matrix_seed(seed, b, 0), a, lda);
        if (nrhs > 0) matgen::uniform(m, nrhs, matrix_seed(seed, b, 1), B0.get() + b * sB, ldb);
    });

    // The solves need factors: computed once, untimed, by the same path.
    Storage<T> F(o.op == "getrs" || o.op == "potrs" ? cnt * sA : 0);
    int factor_failures = 0;
    if (o.op == "getrs" || o.op == "potrs") {
        F.copy_from(A0);
        factor_failures = o.op == "getrs" ? tasks::getrf(n, F.get(), lda, sA, ipiv.get(), info.get(), count, topt)
                                          : tasks::potrf(uplo, n, F.get(), lda, sA, info.get(), count, topt);
    }

    double flops = 0;
    if (o.op == "getrf") flops = getrf_flops(n);
    if (o.op == "potrf") flops = potrf_flops(n);
    if (o.op == "geqrf") flops = geqrf_flops(m, n);
    if (o.op == "getrs") flops = getrs_flops(n, nrhs);
    if (o.op == "potrs") flops = potrs_flops(n, nrhs);
    if (o.op == "gels") flops = gels_flops(m, n, nrhs);
    flops *= count;

    int failed_rows = 0;
    std::vector<double> times;
    for (int it = 1; it <= o.niter; ++it) {
        A.copy_from(A0);
        if (nrhs > 0) B.copy_from(B0);
        int failures = factor_failures;
        const auto t0 = std::chrono::steady_clock::now();
        if (o.op == "getrf") failures = tasks::getrf(n, A.get(), lda, sA, ipiv.get(), info.get(), count, topt);
        if (o.op == "potrf") failures = tasks::potrf(uplo, n, A.get(), lda, sA, info.get(), count, topt);
        if (o.op == "geqrf") tasks::geqrf(m, n, A.get(), lda, sA, tau.get(), count, topt);
        if (o.op == "getrs") tasks::getrs(n, nrhs, F.get(), lda, sA, ipiv.get(), B.get(), ldb, sB, count, topt);
        if (o.op == "potrs") tasks::potrs(uplo, n, nrhs, F.get(), lda, sA, B.get(), ldb, sB, count, topt);
        if (o.op == "gels")
            failures = tasks::gels(m, n, nrhs, A.get(), lda, sA, tau.get(), B.get(), ldb, sB, info.get(), count, topt);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        times.push_back(secs);

        nlohmann::ordered_json r = {{"op", o.op},
                                    {"prec", o.prec},
                                    {"count", count},
                                    {"m", m},
                                    {"n", n},
                                    {"nrhs", nrhs},
                                    {"uplo", is_cholesky(o.op) ? nlohmann::ordered_json(o.uplo) : nullptr},
                                    {"slices", slices},
                                    {"iter", it},
                                    {"time_s", secs},
                                    {"gflops", secs > 0 ? flops / secs / 1e9 : 0.0},
                                    {"sched", rt.scheduler()},
                                    {"ncpu", rt.ncpu()},
                                    {"ncuda", rt.ncuda()},
                                    {"seed", seed},
                                    {"info_failures", failures},
                                    {"residual", nullptr},
                                    {"failed", failures}};
        // Random uniform and SPD matrices are nonsingular with probability one: a failing info fails.
        bool ok = failures == 0;
        if (o.check && it == o.niter) {
            std::vector<double> res(cnt, 0.0);
            parallel_for(count, [&](int b) {
                if (info.get()[b] != 0 && o.op != "geqrf") return;  // counted as failing already
                const T* a0 = A0.get() + b * sA;
                const T* a = A.get() + b * sA;
                if (o.op == "getrf") res[b] = residuals::getrf(n, a0, lda, a, lda, ipiv.get() + b * n);
                if (o.op == "potrf") res[b] = residuals::potrf(uplo, n, a0, lda, a, lda);
                if (o.op == "geqrf") res[b] = residuals::geqrf(m, n, a0, lda, a, lda, tau.get() + b * n);
                if (o.op == "getrs" || o.op == "potrs")
                    res[b] = residuals::solve(n, nrhs, a0, lda, B.get() + b * sB, ldb, B0.get() + b * sB, ldb);
                if (o.op == "gels")
                    res[b] =
                        residuals::least_squares(m, n, nrhs, a0, lda, B.get() + b * sB, ldb, B0.get() + b * sB, ldb);
            });
            double worst = 0.0;
            int bad = 0;
            for (int b = 0; b < count; ++b) {
                const bool pass = residuals::passes(res[b]) && (o.op == "geqrf" || info.get()[b] == 0);
                if (!pass) ++bad;
                if (std::isnan(res[b]) || std::isnan(worst))
                    worst = NAN;
                else
                    worst = std::max(worst, res[b]);
            }
            r["residual"] = worst;
            r["failed"] = bad;
            ok = bad == 0;
        }
        r["status"] = ok ? "ok" : "FAILED";
        if (!ok) ++failed_rows;
        out.row(r);
    }
    if (o.niter > 1) {
        const double t = median(times);
        out.row({{"op", o.op},
                 {"prec", o.prec},
                 {"count", count},
                 {"m", m},
                 {"n", n},
                 {"nrhs", nrhs},
                 {"slices", slices},
                 {"iter", "median"},
                 {"time_s", t},
                 {"gflops", t > 0 ? flops / t / 1e9 : 0.0},
                 {"sched", rt.scheduler()},
                 {"ncpu", rt.ncpu()},
                 {"ncuda", rt.ncuda()},
                 {"status", failed_rows ? "FAILED" : "ok"}});
    }
    return failed_rows;
}

/// Usage checks that CLI11's ranges cannot express; exit code 2, nothing started.
void check_options(const BatchedOptions& o) {
    if (o.m_given && !is_qr(o.op) && o.m != o.n)
        throw ArgumentError("-m", fmt::format("{}: only geqrf and gels take -m (their matrices are m x n); {} matrices "
                                              "are square",
                                              o.m, o.op));
    const int m = is_qr(o.op) && o.m >= 0 ? o.m : o.n;
    if (m < o.n)
        throw ArgumentError(
            "-m", fmt::format("must be >= n = {} ({} of a wide matrix is not supported), got {}", o.n, o.op, m));
    const long long per_matrix = static_cast<long long>(std::max(1, m)) * o.n;
    if (per_matrix > std::numeric_limits<int>::max())
        throw ArgumentError(
            "-n", fmt::format("{} x {} has more than 2^31-1 elements, beyond LAPACK's 32-bit indices", m, o.n));
    const int elem = o.prec == "s" ? 4 : 8;
    const int nrhs = is_solve(o.op) ? o.nrhs : 0;
    // A, its original and (solves) the factors; B and its original; pivots, tau, info.
    const double per = (per_matrix * 3.0 + static_cast<double>(std::max(1, m)) * nrhs * 2.0 + o.n * 2.0) * elem + 4;
    const double need = per * o.count;
    const double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    if (need > have)
        throw ArgumentError("--count", fmt::format("{} matrices of {} x {} need about {:.1f} GiB of host memory, this "
                                                   "machine has {:.1f} GiB",
                                                   o.count, m, o.n, need / (1 << 30), have / (1 << 30)));
}

}  // namespace

void add_batched_command(CLI::App& app, Run& run) {
    auto o = std::make_shared<BatchedOptions>();
    CLI::App* cmd =
        app.add_subcommand("batched",
                           "Many small factorizations or solves at once (LU, Cholesky, QR, least squares), in slices\n"
                           "that StarPU shares between CPU and GPU workers");
    const CLI::Range non_negative(0, std::numeric_limits<int>::max());
    const CLI::Range positive(1, std::numeric_limits<int>::max());
    cmd->add_option("--op", o->op,
                    "Operation: getrf, potrf, geqrf (factorizations), getrs, potrs (solves after the\n"
                    "factorization, untimed), gels (least squares: geqrf + the solve)")
        ->check(CLI::IsMember({"getrf", "potrf", "geqrf", "getrs", "potrs", "gels"}))
        ->capture_default_str();
    cmd->add_option("--count", o->count, "Matrices in the batch")->check(non_negative)->capture_default_str();
    cmd->add_option("-n", o->n, "Order (columns) of every matrix")->check(non_negative)->capture_default_str();
    CLI::Option* m_opt = cmd->add_option("-m", o->m, "Rows of every matrix, geqrf and gels only (default: n); m >= n")
                             ->check(non_negative);
    cmd->add_option("--nrhs", o->nrhs, "Right-hand sides per matrix (solves)")
        ->check(non_negative)
        ->capture_default_str();
    cmd->add_option("--uplo", o->uplo, "Cholesky's triangle: lower or upper")
        ->check(CLI::IsMember({"lower", "upper"}))
        ->capture_default_str();
    cmd->add_option("--prec", o->prec, "Precision: s (float) or d (double)")
        ->check(CLI::IsMember({"s", "d"}))
        ->capture_default_str();
    cmd->add_option("--slices", o->slices, "Tasks the batch is cut into; 0: two per StarPU worker (at most count)")
        ->check(non_negative)
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "Random seed of the matrices (0: random, printed)")
        ->check(no_minus_sign())
        ->capture_default_str();
    cmd->add_flag("--check", o->check,
                  "Check every matrix (LAPACK-style residual, pass below 30) and report the largest and the\n"
                  "number of failing matrices");
    cmd->add_option("--niter", o->niter, "Repetitions; each starts from a fresh copy of the batch")
        ->check(positive)
        ->capture_default_str();
    cmd->add_option("--format", o->format, "Output: table, csv or json (one object per line)")
        ->check(CLI::IsMember({"table", "csv", "json"}))
        ->capture_default_str();
    cmd->footer(
        "Checks, per matrix: getrf ||P A - L U||_1 / (n ||A||_1 eps); potrf ||A - L L^T||_1 / (n ||A||_1 eps);\n"
        "geqrf the larger of ||A - Q R||_1 / (m ||A||_1 eps) and ||I - Q^T Q||_1 / (m eps); getrs and potrs the\n"
        "solve backward error; gels ||A^T (B - A X)||_1 / (m ||A||_1 (||A||_1 ||X||_1 + ||B||_1) eps). A matrix\n"
        "fails when its ratio is not below 30 or its info is not 0.\n"
        "The time covers the whole call: registering the batch with StarPU, transfers, the tasks.\n"
        "Example: starfact batched --op getrf --count 10000 -n 32 --check");
    cmd->callback([&run, o, m_opt] {
        o->m_given = m_opt->count() > 0;
        run = [o]() -> int {
            check_options(*o);
            return o->prec == "s" ? run_batched<float>(*o) : run_batched<double>(*o);
        };
    });
}

}  // namespace starfact::cli
