// `starfact geqrf` and `starfact gels`: tile QR and the least-squares solve, timed and checked
// (QR residual and orthogonality of the explicit Q, or their probes for large matrices; the
// least-squares residual next to LAPACK's gels on the same problem).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
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

namespace starfact::cli {
namespace {

enum class Op { Geqrf, Gels };

/// --tree and --domain (the other options are the factorizations' common ones).
struct TreeOptions {
    std::string tree = "auto";
    int domain = 0;
};

QrOptions qr_options(const TreeOptions& t) {
    const QrTree tree = t.tree == "flat" ? QrTree::Flat : t.tree == "binary" ? QrTree::Binary : QrTree::Auto;
    return {tree, t.domain};
}

const char* tree_name(QrTree t) { return t == QrTree::Flat ? "flat" : t == QrTree::Binary ? "binary" : "auto"; }

const std::vector<std::string> kColumns = {"op",
                                           "prec",
                                           "m",
                                           "n",
                                           "nrhs",
                                           "nb",
                                           "ib",
                                           "iter",
                                           "time_s",
                                           "gflops",
                                           "residual",
                                           "orthogonality",
                                           "residual_lapack",
                                           "info",
                                           "status"};

template <class T>
int run_qr(Op op, const FactorOptions& o, const TreeOptions& tree, const std::string& check_kind,
           const FileInputs<T>& in) {
    PhaseClock clock;
    const std::uint64_t seed = o.seed != 0 ? o.seed : std::random_device{}() | 1ULL;
    const int n = o.n;
    const int m = o.m < 0 ? n : o.m;
    const int nrhs = op == Op::Gels ? o.nrhs : 0;
    const checks::CheckKind kind = resolve_check_kind(check_kind, m, n);
    const bool full = kind == checks::CheckKind::Full;
    Runtime rt;
    clock.lap("runtime start");
    const auto [nb, ib] = tile_sizes(Factorization::Qr, o, m, n, rt);
    Reporter out(parse_format(o.format), kColumns);
    nlohmann::ordered_json config = runtime_config(rt);
    config["op"] = op == Op::Geqrf ? "geqrf" : "gels";
    config["prec"] = o.prec;
    config["m"] = m;
    config["n"] = n;
    config["nrhs"] = nrhs;
    config["nb"] = nb;
    config["ib"] = ib;
    config["seed"] = seed;
    {
        // The tree as resolved for this tile grid (auto picks flat or binary and the domain).
        const QrOptions resolved = resolve_qr_options(qr_options(tree), (m + nb - 1) / nb, (n + nb - 1) / nb);
        config["tree"] = tree_name(resolved.tree);
        config["domain"] = resolved.domain;
    }
    if (o.check) config["check"] = checks::check_kind_name(kind);
    add_file_config(config, o);
    // Generated on the GPUs, into tiles that exist only there, when nothing on the host reads
    // the matrix (generate_on); then A is not generated on the host at all unless a forced
    // STARFACT_GENERATE=gpu run checks it.
    const GenerateOn where = generate_on(in.has_a(), o.check, static_cast<std::int64_t>(m) * n * sizeof(T), rt.ncuda());
    const GeneratedMatrix generated{matgen::Kind::Uniform, seed, n};
    config["generate"] = generate_on_name(where);
    out.header(config);

    const int lda = std::max(1, m);
    // The tiles are allocated once for all the iterations, on another thread while A is
    // generated (pinning tens of GiB takes seconds); every iteration refills them from A.
    auto pending_a = allocate_tiles<T>(m, n, nb, where);
    auto pending_b = allocate_tiles<T>(m, nrhs, nb);
    HostArray<T> A = where == GenerateOn::Gpu && !o.check ? HostArray<T>() : file_or_uniform(in.A, m, n, seed);
    HostArray<T> B = file_or_uniform(in.B, m, nrhs, seed + 1);
    clock.lap("generate");
    TileMatrix<T> tA = pending_a.get(), tB = pending_b.get();
    clock.lap("allocate tiles (after the generation)");
    const double dm = m, dn = n;
    // Householder QR: 2 m n^2 - 2 n^3 / 3; gels adds Q^T B (2 nrhs n (2m - n)) and the solve (n^2 nrhs).
    double flops = 2.0 * dm * dn * dn - 2.0 * dn * dn * dn / 3.0;
    if (op == Op::Gels) flops += 2.0 * nrhs * dn * (2.0 * dm - dn) + dn * dn * nrhs;

    int failed = 0;
    std::vector<double> times;
    TraceRecorder trace(o);
    for (int it = 1; it <= o.niter; ++it) {
        if (where == GenerateOn::Gpu)
            generate_tiles(tA, generated);
        else
            fill_tiles(tA, A.data(), lda);
        fill_tiles(tB, B.data(), lda);
        QrFactors<T> F(tA, ib, qr_options(tree));
        clock.lap("fill tiles");
        int info = 0;
        trace.start(it, tA, tB);
        const auto t0 = std::chrono::steady_clock::now();
        if (op == Op::Geqrf)
            geqrf(tA, F);
        else
            info = gels(tA, tB, ib, qr_options(tree));
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        times.push_back(secs);
        trace.stop();
        clock.lap("factorization");

        nlohmann::ordered_json r = {{"op", config["op"]},
                                    {"prec", o.prec},
                                    {"m", m},
                                    {"n", n},
                                    {"nrhs", nrhs},
                                    {"nb", nb},
                                    {"ib", ib},
                                    {"iter", it},
                                    {"time_s", secs},
                                    {"gflops", secs > 0 ? flops / secs / 1e9 : 0.0},
                                    {"sched", rt.scheduler()},
                                    {"ncpu", rt.ncpu()},
                                    {"ncuda", rt.ncuda()},
                                    {"seed", seed},
                                    {"info", info},
                                    {"residual", nullptr},
                                    {"orthogonality", nullptr},
                                    {"residual_lapack", nullptr}};
        // A random uniform matrix has full rank with probability one: a nonzero info fails.
        bool ok = info == 0;
        if (op == Op::Gels && it == o.niter && info == 0 && !o.x_file.empty()) {
            HostArray<T> X(B.size());
            read_tiles(tB, X.data(), lda);
            write_solution(o, n, nrhs, X.data(), lda);  // x: the first n rows
        }
        if (o.check && it == o.niter && info == 0) {
            if (op == Op::Geqrf) {
                HostArray<T> Fa(A.size());
                checks::QrResiduals res{};
                if (full) {
                    TileMatrix<T> tQ(m, n, nb);
                    orgqr(tA, F, tQ);
                    HostArray<T> Q(A.size());
                    read_tiles(tA, Fa.data(), lda);
                    read_tiles(tQ, Q.data(), lda);
                    res = checks::qr_residuals(m, n, A.data(), lda, Q.data(), lda, Fa.data(), lda);
                } else {
                    // A x against Q (R x), and Q^T Q y against y: Q applied to single vectors.
                    read_tiles(tA, Fa.data(), lda);
                    TileMatrix<T> v(m, 1, nb);
                    const checks::QApply<T> apply_q = [&](char trans, T* x) {
                        fill_tiles(v, x, lda);
                        qr_apply(trans, tA, F, v);
                        read_tiles(v, x, lda);
                    };
                    const checks::QrProbe probe =
                        checks::qr_probe_residuals(m, n, A.data(), lda, Fa.data(), lda, apply_q, seed + 2);
                    res = {probe.residual, probe.orthogonality};
                }
                r["residual"] = res.residual;
                r["orthogonality"] = res.orthogonality;
                ok = ok && checks::passes(res.residual) && checks::passes(res.orthogonality);
            } else {
                // The least-squares residual costs O(m n nrhs); LAPACK's gels O(m n^2).
                HostArray<T> X(B.size());
                read_tiles(tB, X.data(), lda);
                const double res = checks::ls_residual(m, n, nrhs, A.data(), lda, X.data(), lda, B.data(), lda);
                r["residual"] = res;
                if (full) r["residual_lapack"] = checks::lapack_ls_residual(m, n, nrhs, A.data(), lda, B.data(), lda);
                ok = ok && checks::passes(res);
            }
            r["check"] = checks::check_kind_name(kind);
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
        out.row({{"op", config["op"]},
                 {"prec", o.prec},
                 {"m", m},
                 {"n", n},
                 {"nrhs", nrhs},
                 {"nb", nb},
                 {"ib", ib},
                 {"iter", "median"},
                 {"time_s", t},
                 {"gflops", t > 0 ? flops / t / 1e9 : 0.0},
                 {"sched", rt.scheduler()},
                 {"ncpu", rt.ncpu()},
                 {"ncuda", rt.ncuda()},
                 {"status", failed ? "FAILED" : "ok"}});
    }
    return failed;
}

/// The usage checks that need the files' shapes, then the run.
template <class T>
int start_qr(Op op, FactorOptions& o, const TreeOptions& tree, const std::string& check_kind) {
    const FileInputs<T> in = load_file_inputs<T>(o, Shape::Tall, op == Op::Gels ? FileUse::Solve : FileUse::Matrix);
    const int m = o.m >= 0 ? o.m : o.n;
    if (m < o.n)
        throw ArgumentError("-m", fmt::format("must be >= n = {} (tile QR of a wide matrix is not "
                                              "supported), got {}",
                                              o.n, m));
    const int elem = o.prec == "s" ? 4 : 8;
    // A and the tiles; the check adds the factor (probe), Q's tiles and two host matrices (full).
    const bool full = resolve_check_kind(check_kind, m, o.n) == checks::CheckKind::Full;
    check_problem_size("-n", m, o.n, elem, !o.check ? 2 : full ? 6 : 3);
    if (op == Op::Gels) check_problem_size("--nrhs", m, o.nrhs, elem, o.check ? 4 : 2);
    return run_qr<T>(op, o, tree, check_kind, in);
}

void add_command(CLI::App& app, Run& run, Op op) {
    auto opts = std::make_shared<FactorOptions>();
    auto tree = std::make_shared<TreeOptions>();
    auto check_kind = std::make_shared<std::string>("auto");
    CLI::App* cmd = op == Op::Geqrf
                        ? app.add_subcommand("geqrf", "Tile Householder QR of a random m x n matrix (m >= n)")
                        : app.add_subcommand("gels",
                                             "Least squares min ||A X - B|| with A random m x n (m >= n), "
                                             "by tile QR");
    add_factor_options(*cmd, *opts);
    const CLI::Range non_negative(0, std::numeric_limits<int>::max());
    cmd->add_option("-m", opts->m, "Rows (default: n); m >= n")->check(non_negative);
    if (op == Op::Gels)
        cmd->add_option("--nrhs", opts->nrhs, "Number of right-hand sides")->check(non_negative)->capture_default_str();
    cmd->add_option("--ib", opts->ib,
                    "Inner block of the kernels; 0 picks 256 with a GPU (and nb 0 picks 4096; when m >= 8 n and\n"
                    "n <= 4096: m, one tile, up to 2^27 entries, else 8192), min(nb, 32) without")
        ->check(non_negative)
        ->capture_default_str();
    cmd->add_option("--tree", tree->tree,
                    "How each panel's tile rows are eliminated: flat (one chain of TSQRTs), binary (flat chains in\n"
                    "domains of --domain tile rows, then a binary tree of TTQRTs over their heads), auto (binary\n"
                    "for tall matrices, see docs/performance.md)")
        ->check(CLI::IsMember({"flat", "binary", "auto"}))
        ->capture_default_str();
    cmd->add_option("--domain", tree->domain,
                    "Tile rows per domain of the binary tree (1: pure binary tree); 0 picks one")
        ->check(non_negative)
        ->capture_default_str();
    add_check_kind_option(*cmd, *check_kind);
    add_file_options(*cmd, *opts, op == Op::Gels ? FileUse::Solve : FileUse::Matrix);
    cmd->footer(op == Op::Geqrf
                    ? "The checks form the thin Q (m x n) from the factors: ||A - Q R||_1 / (m ||A||_1 eps) < 30\n"
                      "(residual) and ||I - Q^T Q||_1 / (m eps) < 30 (orthogonality). Beyond m n^2 = 16384^3\n"
                      "(--check-kind) they probe with a random x instead, in O(mn): ||A x - Q (R x)||_inf /\n"
                      "(||A||_inf ||x||_inf m eps) and ||Q^T Q y - y||_inf / (||y||_inf m eps), y = [R x; 0].\n"
                      "Example: starfact geqrf -m 32768 -n 4096 --nb 1024 --tree binary --domain 1 --check"
                    : "The check, with r = b - A x per column: ||A^T r||_2 / (||A||_F (||A||_F ||x||_2 + ||b||_2)\n"
                      "max(m, n) eps) < 30 (zero for the exact least-squares solution), printed next to LAPACK's\n"
                      "gels on the same problem (residual_lapack; not beyond m n^2 = 16384^3, --check-kind).\n"
                      "Example: starfact gels -m 20000 -n 5000 --nrhs 8 --check\n"
                      "With files (X gets the n x nrhs solution): starfact gels --A A.npy --B B.npy --X X.npy");
    cmd->callback([&run, opts, tree, check_kind, op, cmd] {
        note_given_options(*cmd, *opts);
        run = [opts, tree, check_kind, op]() -> int {
            return opts->prec == "s" ? start_qr<float>(op, *opts, *tree, *check_kind)
                                     : start_qr<double>(op, *opts, *tree, *check_kind);
        };
    });
}
}  // namespace

void add_qr_commands(CLI::App& app, Run& run) {
    add_command(app, run, Op::Geqrf);
    add_command(app, run, Op::Gels);
}

}  // namespace starfact::cli
