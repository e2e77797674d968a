// `starfact potrf` and `starfact posv`: tile Cholesky and the SPD solve, timed and checked.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "common/checks.hpp"
#include "common/error.hpp"
#include "common/matgen.hpp"
#include "common/parallel.hpp"
#include "common/scalar_traits.hpp"
#include "drivers/commands.hpp"
#include "drivers/run_support.hpp"
#include "drivers/session.hpp"
#include "tile_algorithms/tile_algorithms.hpp"
#include "tile_algorithms/tile_generate.hpp"
#include "tile_algorithms/tile_host.hpp"

namespace starfact::cli {
namespace {

enum class Op { Potrf, Posv };

const std::vector<std::string> kColumns = {"op", "prec", "uplo", "n", "nrhs", "nb", "iter", "time_s", "gflops",
                                           "residual", "info", "status"};

/// A file's matrix as Cholesky sees it: only the `uplo` triangle is read, so it is mirrored
/// into the other one, and the check compares with the matrix that was factored. Blocks of
/// kMirrorBlock columns are mirrored in parallel, each block's writes contiguous.
constexpr int kMirrorBlock = 128;
template <class T>
void mirror_triangle(char uplo, int n, T* A, int lda) {
    const int blocks = (n + kMirrorBlock - 1) / kMirrorBlock;
    const std::int64_t ld = lda;
    const PausedWorkers paused;
    parallel_for(blocks, [&](int J) {
        const int j0 = J * kMirrorBlock, j1 = std::min(n, j0 + kMirrorBlock);
        // The pairs (i, j), i > j, with j in block J: for each i, a contiguous run of column i
        // (rows j0..) and one entry of each of the block's columns, which stay in cache.
        for (int i = j0 + 1; i < n; ++i)
            for (int j = j0; j < std::min(i, j1); ++j) {
                T& lower = A[i + j * ld];
                T& upper = A[j + i * ld];
                if (uplo == 'L')
                    upper = lower;
                else
                    lower = upper;
            }
    });
}

template <class T>
int run_cholesky(Op op, const FactorOptions& o, const std::string& check_kind, const FileInputs<T>& in) {
    PhaseClock clock;
    const char uplo = o.uplo[0];
    const std::uint64_t seed = o.seed != 0 ? o.seed : std::random_device{}() | 1ULL;
    Runtime rt;
    clock.lap("runtime start");
    const int nb = tile_sizes(Factorization::Cholesky, o, o.n, o.n, rt).nb;
    const int n = o.n;
    const int nrhs = op == Op::Posv ? o.nrhs : 0;
    const int ld = std::max(1, n);
    const checks::CheckKind kind = resolve_check_kind(check_kind, n, n);
    Reporter out(parse_format(o.format), kColumns);
    nlohmann::ordered_json config = runtime_config(rt);
    config["op"] = op == Op::Potrf ? "potrf" : "posv";
    config["prec"] = o.prec;
    config["n"] = o.n;
    config["nb"] = nb;
    config["seed"] = seed;
    if (o.check) config["check"] = checks::check_kind_name(kind);
    add_file_config(config, o);

    // The tiles are allocated once for all the iterations, on another thread while A is
    // generated (pinning tens of GiB takes seconds); every iteration refills them from A.
    // A generated matrix is not held unless the full check needs it: every iteration generates
    // it into the tiles again, and the probe regenerates the blocks it reads, so that the tiles
    // are the only n^2 copy (n = 100000 in double is 80 GB). When nothing on the host reads
    // it, it is generated on the GPUs, into tiles that exist only there (generate_on).
    const bool full_check = o.check && op == Op::Potrf && kind == checks::CheckKind::Full;
    const bool held = in.has_a() || full_check;
    const GenerateOn where = generate_on(in.has_a(), o.check, static_cast<std::int64_t>(n) * n * sizeof(T), rt.ncuda());
    const GeneratedMatrix generated{matgen::Kind::Spd, seed, n};
    config["generate"] = generate_on_name(where);
    auto pending_a = allocate_tiles<T>(n, n, nb, where);
    auto pending_b = allocate_tiles<T>(n, nrhs, nb);
    out.header(config);
    HostArray<T> A;
    if (in.has_a()) {
        A = copy_of(in.A.data(), n, n, ld);
        mirror_triangle(uplo, n, A.data(), ld);
    } else if (held) {
        A = HostArray<T>(static_cast<std::int64_t>(ld) * n);
        matgen::spd(n, seed, A.data(), ld);
    }
    const BlockSource<T> source = held ? held_source<T>(A.data(), ld) : spd_source<T>(n, seed);
    HostArray<T> B = file_or_uniform(in.B, n, nrhs, seed + 1);
    clock.lap("generate");
    TileMatrix<T> tA = pending_a.get(), tB = pending_b.get();
    clock.lap("allocate tiles (after the generation)");
    // Cholesky: n^3/3 (+ lower-order terms); the solve adds 2 n^2 nrhs.
    const double flops = double(n) * n * n / 3.0 + double(n) * n / 2.0 + double(n) / 6.0 + 2.0 * n * n * double(nrhs);

    int failed = 0;
    std::vector<double> times;
    TraceRecorder trace(o);
    for (int it = 1; it <= o.niter; ++it) {
        // The other triangle is never read, but by the full check's copy of every tile (tiles
        // that exist only on the GPUs must have been written to be read).
        if (where == GenerateOn::Gpu && full_check)
            generate_tiles(tA, generated);
        else if (where == GenerateOn::Gpu)
            generate_triangle_tiles(uplo, tA, generated);
        else
            fill_triangle_tiles_from(uplo, tA, source);
        fill_tiles(tB, B.data(), ld);
        clock.lap("fill tiles");
        trace.start(it, tA, tB);
        const auto t0 = std::chrono::steady_clock::now();
        const int info = op == Op::Potrf ? potrf(uplo, tA) : posv(uplo, tA, tB);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        times.push_back(secs);
        trace.stop();
        clock.lap("factorization");

        nlohmann::ordered_json r = {{"op", config["op"]}, {"prec", o.prec}, {"uplo", o.uplo}, {"n", n}, {"nrhs", nrhs},
                            {"nb", nb}, {"iter", it}, {"time_s", secs}, {"gflops", secs > 0 ? flops / secs / 1e9 : 0.0},
                            {"sched", rt.scheduler()}, {"ncpu", rt.ncpu()}, {"ncuda", rt.ncuda()}, {"m", n},
                            {"seed", seed}, {"info", info}, {"residual", nullptr}};
        bool ok = info == 0;  // the matrices are SPD: a nonzero info is a failure
        if (op == Op::Posv && it == o.niter && info == 0 && !o.x_file.empty()) {
            HostArray<T> X(B.size());
            read_tiles(tB, X.data(), ld);
            write_solution(o, n, nrhs, X.data(), ld);
        }
        if (o.check && it == o.niter && info == 0) {
            double res;
            if (op == Op::Potrf && kind == checks::CheckKind::Full) {
                HostArray<T> F(A.size());
                read_tiles(tA, F.data(), ld);
                res = checks::potrf_residual(uplo, n, A.data(), ld, F.data(), ld);
            } else if (op == Op::Potrf) {
                res = potrf_probe_residual_tiles(uplo, tA, source, seed + 2);  // the factor where it lies
            } else {
                // The backward error costs O(n^2 nrhs) either way.
                HostArray<T> X(B.size());
                read_tiles(tB, X.data(), ld);
                res = solve_residual_source(n, nrhs, nb, source, X.data(), ld, B.data(), ld);
            }
            r["residual"] = res;
            r["check"] = checks::check_kind_name(kind);
            ok = ok && checks::passes(res);
            clock.lap("check");
        }
        r["status"] = ok ? "ok" : "FAILED";
        if (!ok) ++failed;
        out.row(r);
    }
    {
        // Nothing needs the factors any more: unregistering would copy every tile back from
        // the GPU first.
        discard_tiles(tA);
        discard_tiles(tB);
        const TileMatrix<T> dropped_a = std::move(tA), dropped_b = std::move(tB);
    }
    clock.lap("teardown");
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
int start_cholesky(Op op, FactorOptions& o, const std::string& check_kind) {
    const FileInputs<T> in = load_file_inputs<T>(o, Shape::Square, op == Op::Posv ? FileUse::Solve : FileUse::Matrix);
    // The tiles, and A when it is held (a file's, or for the full check, which adds the
    // factor and two work matrices).
    const checks::CheckKind kind = resolve_check_kind(check_kind, o.n, o.n);
    const bool full = o.check && op == Op::Potrf && kind == checks::CheckKind::Full;
    const int copies = full ? 5 : in.has_a() ? 2 : 1;
    check_problem_size("-n", o.n, o.n, o.prec == "s" ? 4 : 8, copies);
    if (op == Op::Posv) check_problem_size("--nrhs", o.n, o.nrhs, o.prec == "s" ? 4 : 8, 3);
    return run_cholesky<T>(op, o, check_kind, in);
}

void add_command(CLI::App& app, Run& run, Op op) {
    auto opts = std::make_shared<FactorOptions>();
    auto check_kind = std::make_shared<std::string>("auto");
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
    add_check_kind_option(*cmd, *check_kind);
    add_file_options(*cmd, *opts, op == Op::Posv ? FileUse::Solve : FileUse::Matrix);
    cmd->footer(op == Op::Potrf
                    ? "The check is ||A - L L^T||_1 / (n ||A||_1 eps) < 30 up to n = 16384; beyond, the O(n^2) probe\n"
                      "||A x - L (L^T x)||_inf / (||A||_inf ||x||_inf n eps) < 30 with a random x (--check-kind).\n"
                      "StarPU's environment variables (STARPU_SCHED, STARPU_NCPU, STARPU_NCUDA, STARPU_CALIBRATE,\n"
                      "...) are honoured.\n"
                      "Example: starfact potrf -n 8192 --nb 512 --check --niter 3"
                    : "The check is the backward error ||B - A X||_inf / ((||A|| ||X|| + ||B||) n eps) < 30.\n"
                      "Example: starfact posv -n 8192 --nrhs 16 --check\n"
                      "With files (only the --uplo triangle of A is read): starfact posv --A A.npy --B B.npy --X X.npy");
    cmd->callback([&run, opts, check_kind, op, cmd] {
        note_given_options(*cmd, *opts);
        run = [opts, check_kind, op]() -> int {
            return opts->prec == "s" ? start_cholesky<float>(op, *opts, *check_kind)
                                     : start_cholesky<double>(op, *opts, *check_kind);
        };
    });
}
}  // namespace

void add_cholesky_commands(CLI::App& app, Run& run) {
    add_command(app, run, Op::Potrf);
    add_command(app, run, Op::Posv);
}

}  // namespace starfact::cli
