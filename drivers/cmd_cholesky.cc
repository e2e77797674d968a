// `starfact potrf` and `starfact posv`: tile Cholesky and the SPD solve, timed and checked.
#include <chrono>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "common/checks.hpp"
#include "common/error.hpp"
#include "common/matgen.hpp"
#include "common/scalar_traits.hpp"
#include "drivers/commands.hpp"
#include "drivers/session.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

namespace starfact::cli {
namespace {

enum class Op { Potrf, Posv };

const std::vector<std::string> kColumns = {"op", "prec", "uplo", "n", "nrhs", "nb", "iter", "time_s", "gflops",
                                           "residual", "info", "status"};

/// A file's matrix as Cholesky sees it: only the `uplo` triangle is read, so it is mirrored
/// into the other one, and the check compares with the matrix that was factored.
template <class T>
void mirror_triangle(char uplo, int n, T* A, int lda) {
    for (int j = 0; j < n; ++j)
        for (int i = j + 1; i < n; ++i) {
            T& lower = A[i + static_cast<std::size_t>(j) * lda];
            T& upper = A[j + static_cast<std::size_t>(i) * lda];
            if (uplo == 'L')
                upper = lower;
            else
                lower = upper;
        }
}

template <class T>
int run_cholesky(Op op, const FactorOptions& o, const FileInputs<T>& in) {
    const char uplo = o.uplo[0];
    const std::uint64_t seed = o.seed != 0 ? o.seed : std::random_device{}() | 1ULL;
    Runtime rt;
    const int nb = o.nb > 0 ? o.nb : default_nb(rt);
    Reporter out(parse_format(o.format), kColumns);
    nlohmann::ordered_json config = runtime_config(rt);
    config["op"] = op == Op::Potrf ? "potrf" : "posv";
    config["prec"] = o.prec;
    config["n"] = o.n;
    config["nb"] = nb;
    config["seed"] = seed;
    add_file_config(config, o);
    out.header(config);

    const int n = o.n;
    const int nrhs = op == Op::Posv ? o.nrhs : 0;
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    std::vector<T> A(nn), B(static_cast<std::size_t>(n) * nrhs);
    if (in.has_a()) {
        A = in.A;
        mirror_triangle(uplo, n, A.data(), std::max(1, n));
    } else {
        matgen::spd(n, seed, A.data(), std::max(1, n));
    }
    if (in.has_b())
        B = in.B;
    else
        matgen::uniform(n, nrhs, seed + 1, B.data(), std::max(1, n));
    // Cholesky: n^3/3 (+ lower-order terms); the solve adds 2 n^2 nrhs.
    const double flops = double(n) * n * n / 3.0 + double(n) * n / 2.0 + double(n) / 6.0 + 2.0 * n * n * double(nrhs);

    int failed = 0;
    std::vector<double> times;
    TraceRecorder trace(o);
    for (int it = 1; it <= o.niter; ++it) {
        TileMatrix<T> tA(n, n, nb), tB(n, nrhs, nb);
        tA.from_lapack(A.data(), std::max(1, n));
        tB.from_lapack(B.data(), std::max(1, n));
        trace.start(it, tA, tB);
        const auto t0 = std::chrono::steady_clock::now();
        const int info = op == Op::Potrf ? potrf(uplo, tA) : posv(uplo, tA, tB);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        times.push_back(secs);
        trace.stop();

        nlohmann::ordered_json r = {{"op", config["op"]}, {"prec", o.prec}, {"uplo", o.uplo}, {"n", n}, {"nrhs", nrhs},
                            {"nb", nb}, {"iter", it}, {"time_s", secs}, {"gflops", secs > 0 ? flops / secs / 1e9 : 0.0},
                            {"sched", rt.scheduler()}, {"ncpu", rt.ncpu()}, {"ncuda", rt.ncuda()}, {"m", n},
                            {"seed", seed}, {"info", info}, {"residual", nullptr}};
        bool ok = info == 0;  // the matrices are SPD: a nonzero info is a failure
        if (op == Op::Posv && it == o.niter && info == 0 && !o.x_file.empty()) {
            std::vector<T> X(B.size());
            tB.to_lapack(X.data(), std::max(1, n));
            write_solution(o, n, nrhs, X.data(), std::max(1, n));
        }
        if (o.check && it == o.niter && info == 0) {
            double res;
            if (op == Op::Potrf) {
                std::vector<T> F(nn);
                tA.to_lapack(F.data(), std::max(1, n));
                res = checks::potrf_residual(uplo, n, A.data(), std::max(1, n), F.data(), std::max(1, n));
            } else {
                std::vector<T> X(B.size());
                tB.to_lapack(X.data(), std::max(1, n));
                res = checks::solve_residual(n, nrhs, A.data(), std::max(1, n), X.data(), std::max(1, n), B.data(),
                                             std::max(1, n));
            }
            r["residual"] = res;
            ok = ok && checks::passes(res);
        }
        r["status"] = ok ? "ok" : "FAILED";
        if (!ok) ++failed;
        out.row(r);
    }
    trace.write();
    if (o.niter > 1) {
        const double t = median(times);
        out.row({{"op", config["op"]}, {"prec", o.prec}, {"uplo", o.uplo}, {"n", n}, {"nrhs", nrhs}, {"nb", nb},
                 {"iter", "median"}, {"time_s", t}, {"gflops", t > 0 ? flops / t / 1e9 : 0.0},
                 {"sched", rt.scheduler()}, {"ncpu", rt.ncpu()}, {"ncuda", rt.ncuda()}, {"m", n},
                 {"status", failed ? "FAILED" : "ok"}});
    }
    return failed;
}

/// The usage checks that need the files' shapes, then the run.
template <class T>
int start_cholesky(Op op, FactorOptions& o) {
    const FileInputs<T> in = load_file_inputs<T>(o, Shape::Square, op == Op::Posv ? FileUse::Solve : FileUse::Matrix);
    const int copies = o.check ? 5 : 2;
    check_problem_size("-n", o.n, o.n, o.prec == "s" ? 4 : 8, copies);
    if (op == Op::Posv) check_problem_size("--nrhs", o.n, o.nrhs, o.prec == "s" ? 4 : 8, 2);
    return run_cholesky<T>(op, o, in);
}

void add_command(CLI::App& app, Run& run, Op op) {
    auto opts = std::make_shared<FactorOptions>();
    CLI::App* cmd = op == Op::Potrf
                        ? app.add_subcommand("potrf", "Tile Cholesky factorization of a random SPD matrix")
                        : app.add_subcommand("posv", "Solve A X = B with A random SPD, by tile Cholesky");
    add_factor_options(*cmd, *opts);
    cmd->add_option("--uplo", opts->uplo, "Triangle: L (A = L L^T) or U (A = U^T U)")
        ->check(CLI::IsMember({"L", "U"}))
        ->capture_default_str();
    if (op == Op::Posv)
        cmd->add_option("--nrhs", opts->nrhs, "Number of right-hand sides")
            ->check(CLI::Range(0, std::numeric_limits<int>::max()))
            ->capture_default_str();
    add_file_options(*cmd, *opts, op == Op::Posv ? FileUse::Solve : FileUse::Matrix);
    cmd->footer(op == Op::Potrf
                    ? "The check is ||A - L L^T||_1 / (n ||A||_1 eps) < 30. StarPU's environment variables\n"
                      "(STARPU_SCHED, STARPU_NCPU, STARPU_NCUDA, STARPU_CALIBRATE, ...) are honoured.\n"
                      "Example: starfact potrf -n 8192 --nb 512 --check --niter 3"
                    : "The check is the backward error ||B - A X||_inf / ((||A|| ||X|| + ||B||) n eps) < 30.\n"
                      "Example: starfact posv -n 8192 --nrhs 16 --check\n"
                      "With files (only the --uplo triangle of A is read): starfact posv --A A.npy --B B.npy --X X.npy");
    cmd->callback([&run, opts, op, cmd] {
        note_given_options(*cmd, *opts);
        run = [opts, op]() -> int {
            return opts->prec == "s" ? start_cholesky<float>(op, *opts) : start_cholesky<double>(op, *opts);
        };
    });
}
}  // namespace

void add_cholesky_commands(CLI::App& app, Run& run) {
    add_command(app, run, Op::Potrf);
    add_command(app, run, Op::Posv);
}

}  // namespace starfact::cli
