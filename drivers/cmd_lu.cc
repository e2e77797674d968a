// `starfact getrf` and `starfact gesv`: tile LU with incremental pivoting, timed and checked
// next to LAPACK's partial pivoting on the same matrix.
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
#include "drivers/commands.hpp"
#include "drivers/run_support.hpp"
#include "drivers/session.hpp"
#include "tile_algorithms/tile_algorithms.hpp"
#include "tile_algorithms/tile_generate.hpp"
#include "tile_algorithms/tile_host.hpp"

namespace starfact::cli {
namespace {

enum class Op { Getrf, Gesv };

const std::vector<std::string> kColumns = {"op", "prec", "m", "n", "nb", "ib", "schedule", "iter", "time_s", "gflops",
                                           "residual", "residual_lapack", "growth", "growth_pp", "info", "status"};

template <class T>
int run_lu(Op op, const FactorOptions& o, const std::string& check_kind, const FileInputs<T>& in) {
    PhaseClock clock;
    const std::uint64_t seed = o.seed != 0 ? o.seed : std::random_device{}() | 1ULL;
    const int n = o.n;
    const int m = op == Op::Gesv || o.m < 0 ? n : o.m;
    const int nrhs = op == Op::Gesv ? o.nrhs : (m == n ? 1 : 0);
    const checks::CheckKind kind = resolve_check_kind(check_kind, m, n);
    const bool full = kind == checks::CheckKind::Full;
    Runtime rt;
    clock.lap("runtime start");
    const auto [nb, ib] = tile_sizes(Factorization::Lu, o, m, n, rt);
    Reporter out(parse_format(o.format), kColumns);
    nlohmann::ordered_json config = runtime_config(rt);
    config["op"] = op == Op::Getrf ? "getrf" : "gesv";
    config["prec"] = o.prec;
    config["m"] = m;
    config["n"] = n;
    config["nb"] = nb;
    config["ib"] = ib;
    config["schedule"] = o.schedule;
    // auto: the trtri variant on square matrices with a CUDA worker only. On tall ones its
    // products by inverted L blocks lose accuracy (H100, 12000 x 6000, nb 1024: transformation
    // residual 61-260 for ib 256-1024 against 28 with the solves, docs/accuracy.md).
    const bool trtri = o.trtri == "on" || (o.trtri == "auto" && rt.ncuda() > 0 && m == n);
    config["trtri"] = trtri;
    config["seed"] = seed;
    // The probe has no LAPACK reference: LAPACK's getrf at n = 46000 takes minutes on 16 cores.
    if (o.check) config["check"] = checks::check_kind_name(kind);
    add_file_config(config, o);
    const LuSchedule schedule = parse_lu_schedule(o.schedule);
    // Generated on the GPUs, into tiles that exist only there, when nothing on the host reads
    // the matrix (generate_on).
    const GenerateOn where = generate_on(in.has_a(), o.check, static_cast<std::int64_t>(m) * n * sizeof(T), rt.ncuda());
    const GeneratedMatrix generated{matgen::Kind::Uniform, seed, n};
    config["generate"] = generate_on_name(where);
    out.header(config);

    const int lda = std::max(1, m);
    // The tiles are allocated once for all the iterations, on another thread while A is
    // generated (pinning tens of GiB takes seconds); every iteration refills them from A.
    auto pending_a = allocate_tiles<T>(m, n, nb, where);
    auto pending_b = allocate_tiles<T>(m, nrhs, nb);
    // A generated matrix is held only for the checks that need it explicitly (the full ones,
    // and the tall probe); otherwise every iteration generates it into the tiles again and the
    // square probe regenerates the blocks it reads: the tiles are the only m x n copy.
    const bool held = in.has_a() || (o.check && (full || m != n));
    const HostArray<T> A = held ? file_or_uniform(in.A, m, n, seed) : HostArray<T>();
    const BlockSource<T> source = held ? held_source<T>(A.data(), lda) : uniform_source<T>(seed);
    HostArray<T> B = file_or_uniform(in.B, m, nrhs, seed + 1);
    clock.lap("generate");
    TileMatrix<T> tA = pending_a.get(), tB = pending_b.get();
    clock.lap("allocate tiles (after the generation)");
    const double dm = m, dn = n;
    double flops = dm * dn * dn - dn * dn * dn / 3.0;
    if (op == Op::Gesv) flops += 2.0 * dn * dn * nrhs;

    int failed = 0;
    std::vector<double> times;
    TraceRecorder trace(o);
    for (int it = 1; it <= o.niter; ++it) {
        if (where == GenerateOn::Gpu)
            generate_tiles(tA, generated);
        else
            fill_tiles_from(tA, source);
        fill_tiles(tB, B.data(), lda);
        LuFactors<T> F(tA, ib, trtri);
        clock.lap("fill tiles");
        trace.start(it, tA, tB);
        const auto t0 = std::chrono::steady_clock::now();
        int info = getrf(tA, F, schedule);
        if (op == Op::Gesv && info == 0) getrs(tA, F, tB);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        times.push_back(secs);
        trace.stop();
        clock.lap("factorization");

        nlohmann::ordered_json r = {{"op", config["op"]}, {"prec", o.prec}, {"m", m}, {"n", n}, {"nrhs", nrhs},
                                    {"nb", nb}, {"ib", ib}, {"schedule", o.schedule}, {"iter", it}, {"time_s", secs},
                                    {"gflops", secs > 0 ? flops / secs / 1e9 : 0.0}, {"sched", rt.scheduler()},
                                    {"ncpu", rt.ncpu()}, {"ncuda", rt.ncuda()}, {"seed", seed}, {"info", info},
                                    {"residual", nullptr}, {"residual_lapack", nullptr}, {"growth", nullptr},
                                    {"growth_pp", nullptr}};
        // A random uniform matrix is nonsingular with probability one: a nonzero info fails.
        bool ok = info == 0;
        if (op == Op::Gesv && it == o.niter && info == 0 && !o.x_file.empty()) {
            HostArray<T> X(B.size());
            read_tiles(tB, X.data(), lda);
            write_solution(o, n, nrhs, X.data(), lda);
        }
        if (o.check && it == o.niter && info == 0) {
            r["growth"] = growth_factor_tiles(tA, source);
            double res;
            if (m == n) {
                // The solve's backward error with a random b: already O(n^2), so the probe keeps
                // it (A x regenerated block by block when A is not held). The transformation
                // residual grows with tile LU's growth factor and, with the trtri variant, with
                // the inverted L blocks' norms (docs/accuracy.md), where the backward error does not.
                if (op == Op::Getrf) getrs(tA, F, tB);  // the check solves with a random b
                HostArray<T> X(B.size());
                read_tiles(tB, X.data(), lda);
                res = solve_residual_source(n, nrhs, nb, source, X.data(), lda, B.data(), lda);
                if (full) {
                    const auto ref = checks::lapack_lu_reference(n, nrhs, A.data(), lda, B.data(), lda);
                    r["residual_lapack"] = ref.backward_error;
                    r["growth_pp"] = ref.growth;
                }
            } else {
                HostArray<T> Fa(A.size());
                read_tiles(tA, Fa.data(), lda);
                if (!full) {
                    // L~^{-1} P~ (A x) against [U; 0] x: the transformations applied to one vector.
                    TileMatrix<T> v(m, 1, nb);
                    const checks::LuForward<T> forward = [&](T* x) {
                        fill_tiles(v, x, lda);
                        lu_apply_forward(tA, F, v);
                        read_tiles(v, x, lda);
                    };
                    res = checks::lu_probe_residual(m, n, A.data(), lda, Fa.data(), lda, forward, seed + 2);
                } else {
                    // The factorization's transformations applied to the original A; U over zeros.
                    TileMatrix<T> G(m, n, nb);
                    fill_tiles(G, A.data(), lda);
                    lu_apply_forward(tA, F, G);
                    HostArray<T> Ga(A.size());
                    read_tiles(G, Ga.data(), lda);
                    res = checks::lu_transform_residual(m, n, A.data(), lda, Ga.data(), lda, Fa.data(), lda);
                }
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
        out.row({{"op", config["op"]}, {"prec", o.prec}, {"m", m}, {"n", n}, {"nb", nb}, {"ib", ib},
                 {"schedule", o.schedule}, {"iter", "median"}, {"time_s", t}, {"gflops", t > 0 ? flops / t / 1e9 : 0.0},
                 {"sched", rt.scheduler()}, {"ncpu", rt.ncpu()}, {"ncuda", rt.ncuda()},
                 {"status", failed ? "FAILED" : "ok"}});
    }
    return failed;
}

/// The usage checks that need the files' shapes, then the run.
template <class T>
int start_lu(Op op, FactorOptions& o, const std::string& check_kind) {
    const FileInputs<T> in = load_file_inputs<T>(o, op == Op::Gesv ? Shape::Square : Shape::Tall,
                                                 op == Op::Gesv ? FileUse::Solve : FileUse::Matrix);
    const int m = op == Op::Getrf && o.m >= 0 ? o.m : o.n;
    if (m < o.n)
        throw ArgumentError("-m", fmt::format("must be >= n = {} (tile LU of a wide matrix is not "
                                              "supported), got {}", o.n, m));
    const int elem = o.prec == "s" ? 4 : 8;
    // A and the tiles; the check adds the factor (probe), LAPACK's copy or the transformed A
    // and its tiles (full).
    const bool full = resolve_check_kind(check_kind, m, o.n) == checks::CheckKind::Full;
    const int copies = !o.check ? (in.has_a() ? 2 : 1) : full ? 5 : m != o.n ? 3 : in.has_a() ? 2 : 1;
    check_problem_size("-n", m, o.n, elem, copies);
    if (op == Op::Gesv) check_problem_size("--nrhs", o.n, o.nrhs, elem, 3);
    return run_lu<T>(op, o, check_kind, in);
}

void add_command(CLI::App& app, Run& run, Op op) {
    auto opts = std::make_shared<FactorOptions>();
    auto check_kind = std::make_shared<std::string>("auto");
    CLI::App* cmd =
        op == Op::Getrf
            ? app.add_subcommand("getrf", "Tile LU with incremental pivoting of a random m x n matrix (m >= n)")
            : app.add_subcommand("gesv", "Solve A X = B with A random n x n, by tile LU with incremental pivoting");
    add_factor_options(*cmd, *opts);
    const CLI::Range non_negative(0, std::numeric_limits<int>::max());
    if (op == Op::Getrf)
        cmd->add_option("-m", opts->m, "Rows (default: n); m >= n")->check(non_negative);
    else
        cmd->add_option("--nrhs", opts->nrhs, "Number of right-hand sides")->check(non_negative)->capture_default_str();
    cmd->add_option("--ib", opts->ib, "Inner block of the kernels; 0 picks min(nb, 1024) with a GPU, min(nb, 32) without")
        ->check(non_negative)
        ->capture_default_str();
    cmd->add_option("--schedule", opts->schedule,
                    "dynamic (StarPU's STARPU_SCHED, dmdas by default) or a static schedule: tile column j on\n"
                    "worker j mod W in right-looking (static-rl), left-looking (static-ll) or breadth-first\n"
                    "left-looking (static-bfll) order")
        ->check(CLI::IsMember({"dynamic", "static-rl", "static-ll", "static-bfll"}))
        ->capture_default_str();
    cmd->add_option("--trtri", opts->trtri,
                    "The paper's trtri + gemm variant: TSTRF also stores the inverses of its L1 blocks and\n"
                    "SSSSM multiplies by them instead of solving (auto: on for square matrices when there is a\n"
                    "CUDA worker; tall ones lose accuracy with it)")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    add_check_kind_option(*cmd, *check_kind);
    add_file_options(*cmd, *opts, op == Op::Gesv ? FileUse::Solve : FileUse::Matrix);
    cmd->footer(
        "The check is the solve backward error ||b - A x||_inf / ((||A|| ||x|| + ||b||) n eps) < 30 (a random b\n"
        "for getrf), printed next to LAPACK's getrf+getrs on the same system (residual_lapack), with the growth\n"
        "factor max|U|/max|A| of tile LU and of partial pivoting (growth_pp). For m > n getrf checks\n"
        "||L~^{-1} P~ A - [U; 0]||_1 / (n ||A||_1 eps) instead. Beyond m n^2 = 16384^3 (--check-kind) LAPACK does\n"
        "not run, and a tall getrf checks the O(mn) probe ||L~^{-1} P~ (A x) - [U; 0] x||_inf / (||A||_inf ||x||_inf\n"
        "n eps) with a random x.\n"
        "With a GPU, --nb 0 picks 8192 for LU (each tile costs a chain of latency-bound TSTRF panels) and --ib 0\n"
        "picks 1024; STARPU_NWORKER_PER_CUDA=6 measured about 5% faster than the default 4 streams for LU.\n"
        "Example: starfact gesv -n 8192 --nb 1024 --ib 32 --nrhs 16 --check\n"
        "With files: starfact gesv --A A.npy --B B.npy --X X.npy --check");
    cmd->callback([&run, opts, check_kind, op, cmd] {
        note_given_options(*cmd, *opts);
        run = [opts, check_kind, op]() -> int {
            return opts->prec == "s" ? start_lu<float>(op, *opts, *check_kind)
                                     : start_lu<double>(op, *opts, *check_kind);
        };
    });
}
}  // namespace

void add_lu_commands(CLI::App& app, Run& run) {
    add_command(app, run, Op::Getrf);
    add_command(app, run, Op::Gesv);
}

}  // namespace starfact::cli
