// `starfact batched`: many small factorizations or solves at once, cut into slices that StarPU
// shares between CPU and GPU workers (batched::tasks), timed and checked matrix by matrix; the
// batch is generated or read from a .npy file (--input, --rhs; --output writes the result).
// --sizes runs a variable-size batch (batched/vbatched.hpp) as StarPU tasks (batched::tasks::v*).
#include <starpu.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "batched/batched.hpp"
#include "batched/residuals.hpp"
#include "batched/vbatched.hpp"
#include "common/error.hpp"
#include "common/matgen.hpp"
#include "common/parallel.hpp"
#include "drivers/commands.hpp"
#include "drivers/session.hpp"
#include "io/io.hpp"

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
    std::string input, rhs, output;  ///< --input, --rhs (.npy or .mtx batches) and --output (.npy)
    std::string sizes;               ///< --sizes uniform:NMAX | skewed:NMAX | file:PATH
    std::string schedule = "dsse";   ///< --schedule (with --sizes): ssde or dsse
    double aspect = 1.0;             ///< --aspect (geqrf, gels with --sizes): m[b] = ceil(aspect n[b])
    bool schedule_given = false, aspect_given = false;
    std::string trace_file;  ///< --trace: the slice tasks of every iteration, one CSV line each
    bool m_given = false, n_given = false, count_given = false, nrhs_given = false;
};

const std::vector<std::string> kColumns = {"op",     "prec", "count",  "m",      "n",        "nrhs",   "uplo",
                                           "slices", "iter", "time_s", "gflops", "residual", "failed", "status"};

// ---- the operations: one entry per --op, looked up once (run_any) -----------------------------

/// What an operation's batch holds; the option checks need only this.
struct OpShape {
    bool qr = false;        ///< m x n matrices (-m, --aspect; m >= n) and tau; the others are square
    bool solve = false;     ///< right-hand sides (--nrhs, --rhs); --output writes the solutions
    bool cholesky = false;  ///< SPD matrices and --uplo
    bool lu = false;        ///< pivots
};

/// A fixed-size batch as run_batched holds it, for an operation's calls.
template <class T>
struct FixedArgs {
    int m, n, nrhs, count;
    batched::Uplo uplo;
    T* A;  ///< the timed factorizations' matrices
    T* F;  ///< the solves' factors (getrs, potrs)
    int lda;
    long long sA;
    int* ipiv;
    T* tau;
    T* B;
    int ldb;
    long long sB;
    int* info;
    batched::tasks::TaskOptions topt;
};

/// A variable-size batch as run_vbatched holds it (arrays of count entries), for the calls.
template <class T>
struct VarArgs {
    const int* m;
    const int* n;
    int nrhs, count;
    batched::Uplo uplo;
    T* const* A;  ///< the timed factorizations' matrices
    T* const* F;  ///< the solves' factors (getrs, potrs)
    const int* ld;
    int* const* ipiv;
    const int* const* cipiv;  ///< the same pivots, as getrs takes them
    T* const* tau;
    T* const* B;
    int* info;
    batched::tasks::VTaskOptions topt;
};

/// One matrix for --check: its original a0 and the call's output, the factors a (with ipiv or
/// tau) or the solutions x of the original right-hand sides b0.
template <class T>
struct MatrixCheck {
    int m, n, nrhs;
    batched::Uplo uplo;
    const T* a0;
    int lda;
    const T* a;
    const int* ipiv;
    const T* tau;
    const T* x;
    int ldb;
    const T* b0;
};

/// An --op: its name, what its batch holds, its flops, its calls on a fixed-size and on a
/// variable-size batch, and its check. The calls return the matrices that their info reports
/// as failing (0 for the calls that set no info).
template <class T>
struct Operation {
    const char* name = nullptr;
    OpShape shape;
    /// What info = k means, for the failure lines; null: the operation sets no info (geqrf).
    const char* failure = nullptr;
    /// LAPACK's count for one matrix (m = n for the square operations).
    double (*flops)(int m, int n, int nrhs) = nullptr;
    /// The solves' factorization into F, once, untimed, by the same path; null for the others.
    int (*factor)(const FixedArgs<T>&) = nullptr;
    int (*vfactor)(const VarArgs<T>&) = nullptr;
    /// The timed call.
    int (*run)(const FixedArgs<T>&) = nullptr;
    int (*vrun)(const VarArgs<T>&) = nullptr;
    /// --check's ratio of one matrix (batched/residuals.hpp).
    double (*residual)(const MatrixCheck<T>&) = nullptr;
};

template <class T>
Operation<T> getrf_operation() {
    using namespace starfact::batched;
    Operation<T> op;
    op.name = "getrf";
    op.shape.lu = true;
    op.failure = "U(k,k) is exactly zero";
    op.flops = [](int, int n, int) { return getrf_flops(n); };
    op.run = [](const FixedArgs<T>& a) { return tasks::getrf(a.n, a.A, a.lda, a.sA, a.ipiv, a.info, a.count, a.topt); };
    op.vrun = [](const VarArgs<T>& a) { return tasks::vgetrf(a.n, a.A, a.ld, a.ipiv, a.info, a.count, a.topt); };
    op.residual = [](const MatrixCheck<T>& c) { return residuals::getrf(c.n, c.a0, c.lda, c.a, c.lda, c.ipiv); };
    return op;
}

template <class T>
Operation<T> potrf_operation() {
    using namespace starfact::batched;
    Operation<T> op;
    op.name = "potrf";
    op.shape.cholesky = true;
    op.failure = "the leading minor of order k is not positive";
    op.flops = [](int, int n, int) { return potrf_flops(n); };
    op.run = [](const FixedArgs<T>& a) { return tasks::potrf(a.uplo, a.n, a.A, a.lda, a.sA, a.info, a.count, a.topt); };
    op.vrun = [](const VarArgs<T>& a) { return tasks::vpotrf(a.uplo, a.n, a.A, a.ld, a.info, a.count, a.topt); };
    op.residual = [](const MatrixCheck<T>& c) { return residuals::potrf(c.uplo, c.n, c.a0, c.lda, c.a, c.lda); };
    return op;
}

template <class T>
Operation<T> geqrf_operation() {
    using namespace starfact::batched;
    Operation<T> op;
    op.name = "geqrf";
    op.shape.qr = true;
    op.flops = [](int m, int n, int) { return geqrf_flops(m, n); };
    op.run = [](const FixedArgs<T>& a) {
        tasks::geqrf(a.m, a.n, a.A, a.lda, a.sA, a.tau, a.count, a.topt);
        return 0;
    };
    op.vrun = [](const VarArgs<T>& a) {
        tasks::vgeqrf(a.m, a.n, a.A, a.ld, a.tau, a.count, a.topt);
        return 0;
    };
    op.residual = [](const MatrixCheck<T>& c) { return residuals::geqrf(c.m, c.n, c.a0, c.lda, c.a, c.lda, c.tau); };
    return op;
}

/// The check of getrs and potrs: the solutions' backward error.
template <class T>
double solve_residual(const MatrixCheck<T>& c) {
    return batched::residuals::solve(c.n, c.nrhs, c.a0, c.lda, c.x, c.ldb, c.b0, c.ldb);
}

template <class T>
Operation<T> getrs_operation() {
    using namespace starfact::batched;
    Operation<T> op;
    op.name = "getrs";
    op.shape.solve = true;
    op.shape.lu = true;
    op.failure = "U(k,k) is exactly zero";
    op.flops = [](int, int n, int nrhs) { return getrs_flops(n, nrhs); };
    op.factor = [](const FixedArgs<T>& a) {
        return tasks::getrf(a.n, a.F, a.lda, a.sA, a.ipiv, a.info, a.count, a.topt);
    };
    op.vfactor = [](const VarArgs<T>& a) { return tasks::vgetrf(a.n, a.F, a.ld, a.ipiv, a.info, a.count, a.topt); };
    op.run = [](const FixedArgs<T>& a) {
        tasks::getrs(a.n, a.nrhs, a.F, a.lda, a.sA, a.ipiv, a.B, a.ldb, a.sB, a.count, a.topt);
        return 0;
    };
    op.vrun = [](const VarArgs<T>& a) {
        tasks::vgetrs(a.n, a.nrhs, a.F, a.ld, a.cipiv, a.B, a.ld, a.count, a.topt);
        return 0;
    };
    op.residual = solve_residual<T>;
    return op;
}

template <class T>
Operation<T> potrs_operation() {
    using namespace starfact::batched;
    Operation<T> op;
    op.name = "potrs";
    op.shape.solve = true;
    op.shape.cholesky = true;
    op.failure = "the leading minor of order k is not positive";
    op.flops = [](int, int n, int nrhs) { return potrs_flops(n, nrhs); };
    op.factor = [](const FixedArgs<T>& a) {
        return tasks::potrf(a.uplo, a.n, a.F, a.lda, a.sA, a.info, a.count, a.topt);
    };
    op.vfactor = [](const VarArgs<T>& a) { return tasks::vpotrf(a.uplo, a.n, a.F, a.ld, a.info, a.count, a.topt); };
    op.run = [](const FixedArgs<T>& a) {
        tasks::potrs(a.uplo, a.n, a.nrhs, a.F, a.lda, a.sA, a.B, a.ldb, a.sB, a.count, a.topt);
        return 0;
    };
    op.vrun = [](const VarArgs<T>& a) {
        tasks::vpotrs(a.uplo, a.n, a.nrhs, a.F, a.ld, a.B, a.ld, a.count, a.topt);
        return 0;
    };
    op.residual = solve_residual<T>;
    return op;
}

template <class T>
Operation<T> gels_operation() {
    using namespace starfact::batched;
    Operation<T> op;
    op.name = "gels";
    op.shape.qr = true;
    op.shape.solve = true;
    op.failure = "R(k,k) is exactly zero, B left as it was";
    op.flops = [](int m, int n, int nrhs) { return gels_flops(m, n, nrhs); };
    op.run = [](const FixedArgs<T>& a) {
        return tasks::gels(a.m, a.n, a.nrhs, a.A, a.lda, a.sA, a.tau, a.B, a.ldb, a.sB, a.info, a.count, a.topt);
    };
    op.vrun = [](const VarArgs<T>& a) {
        return tasks::vgels(a.m, a.n, a.nrhs, a.A, a.ld, a.tau, a.B, a.ld, a.info, a.count, a.topt);
    };
    op.residual = [](const MatrixCheck<T>& c) {
        return residuals::least_squares(c.m, c.n, c.nrhs, c.a0, c.lda, c.x, c.ldb, c.b0, c.ldb);
    };
    return op;
}

/// The entry of --op `name` (CLI11 admits only the names of this table).
template <class T>
const Operation<T>& operation(const std::string& name) {
    static const Operation<T> table[] = {getrf_operation<T>(), potrf_operation<T>(), geqrf_operation<T>(),
                                         getrs_operation<T>(), potrs_operation<T>(), gels_operation<T>()};
    for (const Operation<T>& op : table)
        if (name == op.name) return op;
    throw ArgumentError("--op", fmt::format("'{}' is not an operation", name));
}

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

/// The batch read from --input (and --rhs): column-major matrices one after the other, as io
/// reads them; empty when the batch is generated.
template <class T>
struct BatchFiles {
    bool loaded = false;
    io::Dense<T> a, b;
};

/// Matrix b's data from a file batch into storage with leading dimension ld and stride s.
template <class T>
void copy_in(const io::Dense<T>& d, T* dst, int ld, long long s) {
    parallel_for(d.count, [&](int b) {
        const T* src = d.matrix(b);
        T* out = batched::batch_matrix(dst, s, b);
        for (int j = 0; j < d.n; ++j)
            for (int i = 0; i < d.m; ++i)
                out[i + static_cast<std::size_t>(j) * ld] = src[i + static_cast<std::size_t>(j) * d.m];
    });
}

/// Every failing matrix and its info, after the run: comment lines (table, CSV) or one JSON
/// object per matrix ("record": "failure").
void print_failures(const BatchedOptions& o, const char* what, const int* info, int count) {
    for (const batched::Failure& f : batched::failures(info, count)) {
        if (parse_format(o.format) == Format::Json)
            fmt::print("{}\n",
                       nlohmann::ordered_json{{"record", "failure"}, {"op", o.op}, {"index", f.index}, {"info", f.info}}
                           .dump());
        else
            fmt::print("# failure: matrix {} info {} ({}, k = {})\n", f.index, f.info, what, f.info);
    }
    std::fflush(stdout);
}

template <class T>
int run_batched(const BatchedOptions& o, const Operation<T>& op, const BatchFiles<T>& files) {
    using namespace starfact::batched;
    const std::uint64_t seed = o.seed != 0 ? o.seed : std::random_device{}() | 1ULL;
    const int n = o.n, count = o.count;
    const int m = op.shape.qr ? (o.m >= 0 ? o.m : n) : n;
    const int nrhs = op.shape.solve ? o.nrhs : 0;
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
    if (op.shape.cholesky) config["uplo"] = o.uplo;
    config["slices"] = slices;
    if (files.loaded) {
        config["input"] = o.input;
        if (!o.rhs.empty()) config["rhs"] = o.rhs;
    } else {
        config["seed"] = seed;
    }
    if (!o.output.empty()) config["output"] = o.output;
    if (!o.trace_file.empty()) config["trace"] = o.trace_file;
    out.header(config);
    TraceRecorder trace(o.trace_file);

    const std::size_t cnt = static_cast<std::size_t>(count);
    Storage<T> A0(cnt * sA), A(cnt * sA), B0(cnt * sB), B(cnt * sB), tau(op.shape.qr ? cnt * n : 0);
    Storage<int> ipiv(op.shape.lu ? cnt * n : 0), info(cnt);
    if (cnt > 0) std::fill(info.get(), info.get() + cnt, 0);  // geqrf, getrs and potrs leave it as it is
    if (files.loaded) {
        copy_in(files.a, A0.get(), lda, sA);
        if (nrhs > 0) copy_in(files.b, B0.get(), ldb, sB);
    } else {
        parallel_for(count, [&](int b) {
            T* a = batch_matrix(A0.get(), sA, b);
            if (op.shape.cholesky)
                matgen::spd(n, matrix_seed(seed, b, 0), a, lda);
            else
                matgen::uniform(m, n, matrix_seed(seed, b, 0), a, lda);
            if (nrhs > 0) matgen::uniform(m, nrhs, matrix_seed(seed, b, 1), batch_matrix(B0.get(), sB, b), ldb);
        });
    }

    // The solves need factors: computed once, untimed, by the same path.
    Storage<T> F(op.factor != nullptr ? cnt * sA : 0);
    const FixedArgs<T> args{m,  n,          nrhs,      count,   uplo, A.get(), F.get(),    lda,
                            sA, ipiv.get(), tau.get(), B.get(), ldb,  sB,      info.get(), topt};
    int factor_failures = 0;
    if (op.factor != nullptr) {
        F.copy_from(A0);
        factor_failures = op.factor(args);
    }

    double flops = op.flops(m, n, nrhs);
    flops *= count;

    int failed_rows = 0;
    std::vector<double> times;
    for (int it = 1; it <= o.niter; ++it) {
        A.copy_from(A0);
        if (nrhs > 0) B.copy_from(B0);
        int failures = factor_failures;
        trace.start(it);
        const auto t0 = std::chrono::steady_clock::now();
        failures += op.run(args);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        trace.stop();
        times.push_back(secs);

        nlohmann::ordered_json r = {{"op", o.op},
                                    {"prec", o.prec},
                                    {"count", count},
                                    {"m", m},
                                    {"n", n},
                                    {"nrhs", nrhs},
                                    {"uplo", op.shape.cholesky ? nlohmann::ordered_json(o.uplo) : nullptr},
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
        if (files.loaded) r.erase("seed");
        // Random uniform and SPD matrices are nonsingular with probability one: a failing info fails
        // (a file's too: the run is then reported as failed, with every failing matrix listed).
        bool ok = failures == 0;
        if (o.check && it == o.niter) {
            std::vector<double> res(cnt, 0.0);
            parallel_for(count, [&](int b) {
                if (info.get()[b] != 0 && op.failure != nullptr) return;  // counted as failing already
                const T* a0 = batch_matrix(A0.get(), sA, b);
                const T* a = batch_matrix(A.get(), sA, b);
                const int* piv = op.shape.lu ? batch_matrix(ipiv.get(), n, b) : nullptr;
                const T* t = op.shape.qr ? batch_matrix(tau.get(), n, b) : nullptr;
                res[b] = op.residual({m, n, nrhs, uplo, a0, lda, a, piv, t, batch_matrix(B.get(), sB, b), ldb,
                                      batch_matrix(B0.get(), sB, b)});
            });
            double worst = 0.0;
            int bad = 0;
            for (int b = 0; b < count; ++b) {
                const bool pass = residuals::passes(res[b]) && (op.failure == nullptr || info.get()[b] == 0);
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
    if (op.failure != nullptr) print_failures(o, op.failure, info.get(), count);
    trace.write();
    if (!o.output.empty()) {
        // The factors (A) or the solutions (B's first n rows), packed: count x rows x cols.
        const bool solve = op.shape.solve;
        const int rows = solve ? n : m, cols = solve ? nrhs : n, ld = solve ? ldb : lda;
        const T* src = solve ? B.get() : A.get();
        const long long s = solve ? sB : sA;
        std::vector<T> packed(cnt * rows * cols);
        parallel_for(count, [&](int b) {
            const T* from = batch_matrix(src, s, b);
            for (int j = 0; j < cols; ++j)
                for (int i = 0; i < rows; ++i)
                    packed[(static_cast<std::size_t>(b) * cols + j) * rows + i] =
                        from[i + static_cast<std::size_t>(j) * ld];
        });
        try {
            io::write_npy_batch(o.output, count, rows, cols, packed.data());
        } catch (const io::FileError& e) {
            throw RuntimeError(fmt::format("--output '{}': {}", o.output, e.reason()));
        }
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
void check_options(const BatchedOptions& o, const OpShape& shape) {
    if (o.m_given && !shape.qr && o.m != o.n)
        throw ArgumentError("-m", fmt::format("{}: only geqrf and gels take -m (their matrices are m x n); {} matrices "
                                              "are square",
                                              o.m, o.op));
    const int m = shape.qr && o.m >= 0 ? o.m : o.n;
    if (m < o.n)
        throw ArgumentError(
            "-m", fmt::format("must be >= n = {} ({} of a wide matrix is not supported), got {}", o.n, o.op, m));
    // The batch's element count and offsets are 64-bit; one matrix must fit the 32-bit sizes
    // that the per-matrix kernels and StarPU's slices take.
    const long long per_matrix = static_cast<long long>(std::max(1, m)) * o.n;
    if (per_matrix > std::numeric_limits<int>::max())
        throw ArgumentError("-n", fmt::format("{} x {}: one matrix of more than 2^31-1 elements, beyond the 32-bit "
                                              "sizes of the batched kernels",
                                              m, o.n));
    const int elem = o.prec == "s" ? 4 : 8;
    const int nrhs = shape.solve ? o.nrhs : 0;
    // A, its original and (solves) the factors; B and its original; pivots, tau, info.
    const double per = (per_matrix * 3.0 + static_cast<double>(std::max(1, m)) * nrhs * 2.0 + o.n * 2.0) * elem + 4;
    const double need = per * o.count;
    const double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    if (need > have)
        throw ArgumentError("--count", fmt::format("{} matrices of {} x {} need about {:.1f} GiB of host memory, this "
                                                   "machine has {:.1f} GiB",
                                                   o.count, m, o.n, need / (1 << 30), have / (1 << 30)));
}

/// Option combinations of --input, --rhs, --output and --sizes; exit code 2, nothing started.
void check_file_options(const BatchedOptions& o, const OpShape& shape) {
    if (!o.input.empty() && !o.sizes.empty())
        throw ArgumentError("--sizes", fmt::format("'{}' with --input: the sizes come from the file", o.sizes));
    if (o.input.empty()) {
        if (!o.rhs.empty()) throw ArgumentError("--rhs", fmt::format("'{}' needs --input (the matrices)", o.rhs));
        if (!o.output.empty())
            throw ArgumentError("--output",
                                fmt::format("'{}' needs --input (a generated batch is not written)", o.output));
    } else {
        const std::pair<bool, const char*> given[] = {
            {o.count_given, "--count"}, {o.n_given, "-n"}, {o.m_given, "-m"}, {o.nrhs_given, "--nrhs"}};
        for (const auto& [g, name] : given)
            if (g)
                throw ArgumentError(name,
                                    fmt::format("given with --input '{}': the sizes come from the files", o.input));
        if (shape.solve && o.rhs.empty())
            throw ArgumentError("--rhs", fmt::format("--op {} with --input needs the right-hand sides (--rhs FILE, a "
                                                     "batch of as many matrices as --input)",
                                                     o.op));
        if (!shape.solve && !o.rhs.empty())
            throw ArgumentError("--rhs", fmt::format("'{}': --op {} takes no right-hand sides", o.rhs, o.op));
    }
    if (o.sizes.empty() && o.schedule_given)
        throw ArgumentError("--schedule",
                            fmt::format("'{}' needs --sizes (the schedule of the variable-size kernels)", o.schedule));
    if (o.aspect_given && (o.sizes.empty() || !shape.qr))
        throw ArgumentError("--aspect",
                            fmt::format("{}: only geqrf and gels with --sizes take an aspect, not --op {}{}", o.aspect,
                                        o.op, o.sizes.empty() ? " without --sizes" : ""));
    if (!o.sizes.empty() && (o.n_given || o.m_given))
        throw ArgumentError(o.n_given ? "-n" : "-m", fmt::format("given with --sizes '{}'", o.sizes));
    check_trace_path(o.trace_file);
}

/// A file of `option` read as T, io's FileError turned into a usage error naming the option and file.
template <class T>
io::Dense<T> read_batch_file(const char* option, const std::string& path) {
    try {
        return io::read_dense<T>(path);
    } catch (const io::FileError& e) {
        throw ArgumentError(option, fmt::format("'{}': {}", path, e.reason()));
    }
}

/// Reads --input and --rhs and checks --output before anything starts; sets count, n, m, nrhs.
template <class T>
BatchFiles<T> load_batch_files(BatchedOptions& o, const OpShape& shape) {
    BatchFiles<T> f;
    if (o.input.empty()) return f;
    f.a = read_batch_file<T>("--input", o.input);
    const io::Dense<T>& a = f.a;
    if (a.ndim == 1)
        throw ArgumentError("--input", fmt::format("'{}': wrong dimensions: a 1-D array (a vector); a batch is 3-D "
                                                   "(count x m x n) or 2-D (one matrix)",
                                                   o.input));
    if (!shape.qr && a.m != a.n)
        throw ArgumentError("--input", fmt::format("'{}': not square: {} matrices of {} x {}; --op {} needs square "
                                                   "matrices",
                                                   o.input, a.count, a.m, a.n, o.op));
    if (shape.qr && a.m < a.n)
        throw ArgumentError("--input", fmt::format("'{}': {} x {} matrices are wider than tall; --op {} needs m >= n",
                                                   o.input, a.m, a.n, o.op));
    o.count = a.count;
    o.n = a.n;
    o.m = a.m;
    if (shape.solve) {
        f.b = read_batch_file<T>("--rhs", o.rhs);
        const io::Dense<T>& b = f.b;
        if (b.count != a.count)
            throw ArgumentError("--rhs", fmt::format("'{}' holds {} right-hand-side matrices, --input '{}' holds {} "
                                                     "matrices",
                                                     o.rhs, b.count, o.input, a.count));
        if (b.m != a.m)
            throw ArgumentError(
                "--rhs", fmt::format("'{}' has {} rows per matrix, the matrices of --input '{}' have {}", o.rhs, b.m,
                                     o.input, a.m));
        o.nrhs = b.n;
    }
    if (!o.output.empty()) {
        try {
            if (io::format_of(o.output) != io::Format::Npy)
                throw io::FileError(o.output, "a batch is written as a 3-D NumPy array: the name must end in .npy");
            io::check_writable(o.output);
        } catch (const io::FileError& e) {
            throw ArgumentError("--output", fmt::format("'{}': {}", o.output, e.reason()));
        }
    }
    f.loaded = true;
    return f;
}

// ---- --sizes: a variable-size batch as StarPU tasks ------------------------------------------

/// The orders of a --sizes batch: uniform in [1, NMAX], skewed (1% of NMAX, the rest in
/// [1, NMAX/10], as in the variable-size Cholesky paper), or one order per line of a file.
std::vector<int> draw_sizes(const BatchedOptions& o, std::uint64_t seed) {
    const std::size_t colon = o.sizes.find(':');
    const std::string kind = colon == std::string::npos ? o.sizes : o.sizes.substr(0, colon);
    const std::string value = colon == std::string::npos ? "" : o.sizes.substr(colon + 1);
    std::vector<int> n;
    if (kind == "file") {
        std::ifstream in(value);
        if (value.empty() || !in)
            throw ArgumentError("--sizes", fmt::format("'{}': cannot read the file '{}'", o.sizes, value));
        std::string line;
        for (int lineno = 1; std::getline(in, line); ++lineno) {
            const std::size_t first = line.find_first_not_of(" \t\r");
            if (first == std::string::npos) continue;  // blank line
            const std::size_t last = line.find_last_not_of(" \t\r");
            const std::string word = line.substr(first, last - first + 1);
            long long v = -1;
            if (word.find_first_not_of("0123456789") == std::string::npos && word.size() <= 9) v = std::stoll(word);
            if (v < 0)
                throw ArgumentError("--sizes", fmt::format("'{}' line {}: '{}' is not an order (a non-negative integer "
                                                           "below 10^9)",
                                                           value, lineno, word));
            n.push_back(static_cast<int>(v));
        }
        if (o.count_given && o.count != static_cast<int>(n.size()))
            throw ArgumentError("--count", fmt::format("{} disagrees with --sizes '{}', which holds {} orders", o.count,
                                                       o.sizes, n.size()));
        return n;
    }
    int nmax = 0;
    const bool numeric =
        !value.empty() && value.size() <= 9 && value.find_first_not_of("0123456789") == std::string::npos;
    if (numeric) nmax = std::stoi(value);
    if ((kind != "uniform" && kind != "skewed") || nmax < 1)
        throw ArgumentError("--sizes",
                            fmt::format("'{}': expected uniform:NMAX, skewed:NMAX (NMAX >= 1) or file:PATH", o.sizes));
    std::mt19937_64 rng(seed);
    const auto in_range = [&](int hi) { return 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(hi)); };
    n.resize(static_cast<std::size_t>(o.count));
    if (kind == "uniform") {
        for (int& v : n) v = in_range(nmax);
    } else {
        // 1% of the matrices (at least one) of order NMAX, at random places.
        const int big = o.count == 0 ? 0 : std::max(1, (o.count + 99) / 100);
        for (int b = 0; b < o.count; ++b) n[b] = b < big ? nmax : in_range(std::max(1, nmax / 10));
        std::shuffle(n.begin(), n.end(), rng);
    }
    return n;
}

const std::vector<std::string> kVColumns = {"op",     "prec", "count",  "sizes",  "nmax",     "nrhs",   "uplo",
                                            "slices", "iter", "time_s", "gflops", "residual", "failed", "status"};

template <class T>
int run_vbatched(const BatchedOptions& o, const Operation<T>& op) {
    using namespace starfact::batched;
    const std::uint64_t seed = o.seed != 0 ? o.seed : std::random_device{}() | 1ULL;
    const std::vector<int> n = draw_sizes(o, seed);
    const int count = static_cast<int>(n.size());
    const bool lu = op.shape.lu, qr = op.shape.qr;
    const int nrhs = op.shape.solve ? o.nrhs : 0;
    const int nmax = count > 0 ? *std::max_element(n.begin(), n.end()) : 0;
    const Uplo uplo = o.uplo == "upper" ? Uplo::upper : Uplo::lower;
    // QR: m[b] = ceil(aspect n[b]) rows; the other operations are square.
    std::vector<int> m(n.size()), ld(n.size());
    std::vector<std::size_t> offA(n.size() + 1, 0), offB(n.size() + 1, 0), offP(n.size() + 1, 0);
    for (int b = 0; b < count; ++b) {
        m[b] = qr ? static_cast<int>(std::ceil(o.aspect * n[b] - 1e-9)) : n[b];
        ld[b] = std::max(1, m[b]);
        offP[b + 1] = offP[b] + (lu || qr ? static_cast<std::size_t>(std::max(1, n[b])) : 0);
        offA[b + 1] = offA[b] + static_cast<std::size_t>(ld[b]) * n[b];
        offB[b + 1] = offB[b] + static_cast<std::size_t>(ld[b]) * nrhs;
    }
    const int elem = static_cast<int>(sizeof(T));
    // A, its original, the solve's factors and the packed slices; B, its original and its slices.
    const double need = (4.0 * static_cast<double>(offA[count]) + 3.0 * static_cast<double>(offB[count])) * elem;
    const double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    if (need > have)
        throw ArgumentError("--sizes",
                            fmt::format("'{}': the batch needs about {:.1f} GiB of host memory, this machine "
                                        "has {:.1f} GiB",
                                        o.sizes, need / (1 << 30), have / (1 << 30)));

    Runtime rt;
    const int slices = o.slices > 0 ? std::min(o.slices, std::max(1, count)) : tasks::default_slices(count, 0);
    const tasks::VTaskOptions topt{slices, o.schedule == "ssde" ? Schedule::ssde : Schedule::dsse};
    Reporter out(parse_format(o.format), kVColumns);
    nlohmann::ordered_json config = runtime_config(rt);
    config["path"] =
        "StarPU tasks: slices of about equal flops, LAPACKE per matrix on CPU workers, the SSDE/DSSE "
        "kernels on CUDA workers";
    config["op"] = o.op;
    config["prec"] = o.prec;
    config["count"] = count;
    config["sizes"] = o.sizes;
    config["nmax"] = nmax;
    if (qr) config["aspect"] = o.aspect;
    config["nrhs"] = nrhs;
    config["uplo"] = o.uplo;
    config["schedule"] = o.schedule;
    config["slices"] = slices;
    config["seed"] = seed;
    if (!o.trace_file.empty()) config["trace"] = o.trace_file;
    out.header(config);
    TraceRecorder trace(o.trace_file);

    std::vector<T> A0(offA[count]), A(offA[count]), F(nrhs > 0 && !qr ? offA[count] : 0), B0(offB[count]),
        B(offB[count]), tau(qr ? offP[count] : 0);
    parallel_for(count, [&](int b) {
        if (op.shape.cholesky)
            matgen::spd(n[b], matrix_seed(seed, b, 0), A0.data() + offA[b], ld[b]);
        else
            matgen::uniform(m[b], n[b], matrix_seed(seed, b, 0), A0.data() + offA[b], ld[b]);
        if (nrhs > 0) matgen::uniform(m[b], nrhs, matrix_seed(seed, b, 1), B0.data() + offB[b], ld[b]);
    });
    const auto pointers = [&](std::vector<T>& v, const std::vector<std::size_t>& off) {
        std::vector<T*> p(n.size());
        for (int b = 0; b < count; ++b) p[b] = v.data() + off[b];
        return p;
    };
    const std::vector<T*> pA = pointers(A, offA), pF = pointers(F, offA), pB = pointers(B, offB),
                          pT = pointers(tau, offP);
    std::vector<int> ipiv(lu ? offP[count] : 0);
    std::vector<int*> pP(n.size());
    for (int b = 0; b < count; ++b) pP[b] = lu ? ipiv.data() + offP[b] : nullptr;
    const std::vector<const int*> cP(pP.begin(), pP.end());
    std::vector<int> info(n.size(), 0);
    const VarArgs<T> args{m.data(),  n.data(),  nrhs,      count,     uplo,      pA.data(),   pF.data(),
                          ld.data(), pP.data(), cP.data(), pT.data(), pB.data(), info.data(), topt};
    int factor_failures = 0;
    if (nrhs > 0 && !qr) {
        F = A0;  // the solve's factors, untimed, by the same path
        factor_failures = op.vfactor(args);
    }
    double flops = 0;
    for (int b = 0; b < count; ++b) {
        if (n[b] == 0) continue;
        flops += op.flops(m[b], n[b], nrhs);
    }

    int failed_rows = 0;
    std::vector<double> times;
    for (int it = 1; it <= o.niter; ++it) {
        A = A0;
        B = B0;
        int failures = factor_failures;
        trace.start(it);
        const auto t0 = std::chrono::steady_clock::now();
        failures += op.vrun(args);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        trace.stop();
        times.push_back(secs);
        nlohmann::ordered_json r = {{"op", o.op},
                                    {"prec", o.prec},
                                    {"count", count},
                                    {"sizes", o.sizes},
                                    {"nmax", nmax},
                                    {"nrhs", nrhs},
                                    {"uplo", o.uplo},
                                    {"slices", slices},
                                    {"iter", it},
                                    {"time_s", secs},
                                    {"gflops", secs > 0 ? flops / secs / 1e9 : 0.0},
                                    {"schedule", o.schedule},
                                    {"sched", rt.scheduler()},
                                    {"ncpu", rt.ncpu()},
                                    {"ncuda", rt.ncuda()},
                                    {"seed", seed},
                                    {"residual", nullptr},
                                    {"failed", failures}};
        bool ok = failures == 0;
        if (o.check && it == o.niter) {
            std::vector<double> res(n.size(), 0.0);
            parallel_for(count, [&](int b) {
                if (info[b] != 0 || n[b] == 0) return;
                const T* a0 = A0.data() + offA[b];
                res[b] = op.residual({m[b], n[b], nrhs, uplo, a0, ld[b], A.data() + offA[b], pP[b], pT[b],
                                      B.data() + offB[b], ld[b], B0.data() + offB[b]});
            });
            double worst = 0.0;
            int bad = 0;
            for (int b = 0; b < count; ++b) {
                if (!residuals::passes(res[b]) || info[b] != 0) ++bad;
                worst = std::isnan(res[b]) || std::isnan(worst) ? NAN : std::max(worst, res[b]);
            }
            r["residual"] = worst;
            r["failed"] = bad;
            ok = bad == 0;
        }
        r["status"] = ok ? "ok" : "FAILED";
        if (!ok) ++failed_rows;
        out.row(r);
    }
    if (op.failure != nullptr) print_failures(o, op.failure, info.data(), count);
    trace.write();
    if (o.niter > 1) {
        const double t = median(times);
        out.row({{"op", o.op},
                 {"prec", o.prec},
                 {"count", count},
                 {"sizes", o.sizes},
                 {"nmax", nmax},
                 {"nrhs", nrhs},
                 {"slices", slices},
                 {"iter", "median"},
                 {"time_s", t},
                 {"gflops", t > 0 ? flops / t / 1e9 : 0.0},
                 {"schedule", o.schedule},
                 {"sched", rt.scheduler()},
                 {"ncpu", rt.ncpu()},
                 {"ncuda", rt.ncuda()},
                 {"status", failed_rows ? "FAILED" : "ok"}});
    }
    return failed_rows;
}

/// Looks --op up once, then runs the variable-size batch (--sizes) or the fixed-size one.
template <class T>
int run_any(BatchedOptions& o) {
    const Operation<T>& op = operation<T>(o.op);
    check_file_options(o, op.shape);
    if (!o.sizes.empty()) return run_vbatched<T>(o, op);
    const BatchFiles<T> files = load_batch_files<T>(o, op.shape);
    check_options(o, op.shape);
    return run_batched<T>(o, op, files);
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
    cmd->add_option("--input", o->input,
                    "Read the batch from this file instead of generating it: .npy, 3-D (count x m x n) or 2-D (one\n"
                    "matrix), C or Fortran order, float32 or float64; its shape sets --count, -m and -n");
    cmd->add_option("--rhs", o->rhs,
                    "With --input, the right-hand sides of getrs, potrs, gels: .npy, count x m x nrhs");
    cmd->add_option("--output", o->output,
                    "With --input, write the factors (getrf, potrf, geqrf) or the solutions (getrs, potrs, gels:\n"
                    "count x n x nrhs) to this .npy file (3-D, Fortran order), atomically");
    cmd->add_option("--trace", o->trace_file,
                    "Write every slice task of the timed part (codelet, worker, start, end, predicted time) to this\n"
                    "CSV file, as the other factorization subcommands do; scripts/plot_trace.py draws it");
    cmd->add_option("--sizes", o->sizes,
                    "Variable-size batch (every --op): uniform:NMAX (orders in [1, NMAX]), skewed:NMAX (1% of\n"
                    "order NMAX, the rest in [1, NMAX/10]) or file:PATH (one order per line); StarPU tasks of\n"
                    "about equal flops (CPU workers: LAPACKE per matrix; CUDA workers: the SSDE/DSSE kernels)");
    CLI::Option* schedule_opt =
        cmd->add_option("--schedule", o->schedule,
                        "With --sizes, the CUDA kernels' schedule: dsse (different starts, same end) or ssde (same\n"
                        "start, different ends)")
            ->check(CLI::IsMember({"ssde", "dsse"}))
            ->capture_default_str();
    CLI::Option* aspect_opt =
        cmd->add_option("--aspect", o->aspect, "With --sizes, geqrf and gels: matrix b is ceil(aspect n[b]) x n[b]")
            ->check(CLI::Range(1.0, 1e6))
            ->capture_default_str();
    cmd->footer(
        "Checks, per matrix: getrf ||P A - L U||_1 / (n ||A||_1 eps); potrf ||A - L L^T||_1 / (n ||A||_1 eps);\n"
        "geqrf the larger of ||A - Q R||_1 / (m ||A||_1 eps) and ||I - Q^T Q||_1 / (m eps); getrs and potrs the\n"
        "solve backward error; gels ||A^T (B - A X)||_1 / (m ||A||_1 (||A||_1 ||X||_1 + ||B||_1) eps). A matrix\n"
        "fails when its ratio is not below 30 or its info is not 0.\n"
        "The time covers the whole call: registering the batch with StarPU, transfers, the tasks.\n"
        "Files: --input a .npy batch (3-D count x m x n, or 2-D for one matrix; C or Fortran order, float32 or\n"
        "float64; or a 2-D .mtx), --rhs the right-hand sides of getrs, potrs and gels (count x m x nrhs), --output\n"
        "a .npy written atomically: the factors (getrf: L and U without the pivots, potrf: the factor in the uplo\n"
        "triangle, the other as read; geqrf: R and the reflectors without tau) or the solutions (count x n x nrhs).\n"
        "Every failing matrix is listed with its info. A bad file exits 2 naming it, with nothing written.\n"
        "--sizes runs a variable-size batch (n[b] from the distribution; geqrf and gels: ceil(aspect n[b]) rows)\n"
        "through batched::tasks::v* (batched/vbatched.hpp): slices of about equal flops, packed, shared by\n"
        "StarPU between CPU workers (LAPACKE per matrix) and CUDA workers (our kernels, --schedule ssde|dsse).\n"
        "The time covers packing, registering, transfers, the tasks and unpacking.\n"
        "Example: starfact batched --op getrf --count 10000 -n 32 --check\n"
        "         starfact batched --op potrf --input blocks.npy --output factors.npy --check");
    CLI::Option* n_opt = cmd->get_option("-n");
    CLI::Option* count_opt = cmd->get_option("--count");
    CLI::Option* nrhs_opt = cmd->get_option("--nrhs");
    cmd->callback([&run, o, m_opt, n_opt, count_opt, nrhs_opt, schedule_opt, aspect_opt] {
        o->schedule_given = schedule_opt->count() > 0;
        o->aspect_given = aspect_opt->count() > 0;
        o->m_given = m_opt->count() > 0;
        o->n_given = n_opt->count() > 0;
        o->count_given = count_opt->count() > 0;
        o->nrhs_given = nrhs_opt->count() > 0;
        run = [o]() -> int { return o->prec == "s" ? run_any<float>(*o) : run_any<double>(*o); };
    });
}

}  // namespace starfact::cli
