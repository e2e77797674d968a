// `starfact geqrf` and `starfact gels`: tile QR and the least-squares solve, timed and checked
// (QR residual and orthogonality of the explicit Q; the least-squares residual next to LAPACK's
// gels on the same problem).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/blas.hpp"
#include "common/checks.hpp"
#include "common/error.hpp"
#include "common/matgen.hpp"
#include "common/scalar_traits.hpp"
#include "drivers/commands.hpp"
#include "drivers/session.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

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

/// The inner block when the user gave 0: 256 with a GPU (best or within 2% of the best at
/// nb = 2048-4096 on the H100, docs/performance.md), min(nb, 32) on CPU cores only.
int default_ib(int nb, int ncuda) { return ncuda > 0 ? std::min(nb, 256) : std::min(nb, 32); }

/// QR's tile size when the user gave 0: with a GPU, 4096 (best at n = 8192-32768 on the H100),
/// except for tall-skinny matrices (m >= 8 n, n <= 4096), which are one tile column:
/// - up to 2^27 entries (1 GiB in FP64, the size measured): one tile (nb = m), the whole QR one
///   cuSOLVER geqrf plus the T factors; 0.93-0.96 of cuSOLVER at 32768 x 4096, 65536 x 2048
///   and 131072 x 1024 on the H100, where the best trees of tall tiles reached 0.77-0.92;
/// - larger (not measured): tall 8192 x n tiles and the tree, so that no tile outgrows the GPU
///   (8192 was the trees' best tile size at 32768 x 4096 and 65536 x 2048).
/// docs/performance.md, "Tall tiles". On CPU cores only, the common default.
int default_qr_nb(const Runtime& rt, int m, int n) {
    if (rt.ncuda() == 0) return default_nb(rt);
    if (n <= 0 || n > 4096 || m < 8 * static_cast<long long>(n)) return 4096;
    return static_cast<long long>(m) * n <= (1LL << 27) ? m : 8192;
}

// The checks run multi-threaded OpenBLAS between factorizations (CPU workers use one thread).
class AllThreads {
public:
    AllThreads() : previous_(openblas_get_num_threads()) {
        openblas_set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    }
    ~AllThreads() { openblas_set_num_threads(previous_); }
    AllThreads(const AllThreads&) = delete;
    AllThreads& operator=(const AllThreads&) = delete;

private:
    int previous_;
};

/// ||A - Q R||_1 / (m ||A||_1 eps) and ||I - Q^T Q||_1 / (m eps); A m x n, Q m x n, R the upper
/// triangle of the top n rows of F.
template <class T>
std::pair<double, double> qr_residuals(int m, int n, const T* A, int lda, const T* Q, int ldq, const T* F, int ldf) {
    if (m == 0 || n == 0) return {0.0, 0.0};
    AllThreads threads;
    const double eps = ScalarTraits<T>::eps;
    const std::size_t mn = static_cast<std::size_t>(m) * n;
    std::vector<T> W(mn);
    for (int j = 0; j < n; ++j) {
        const T* q = Q + j * static_cast<std::size_t>(ldq);
        std::copy(q, q + m, W.begin() + j * static_cast<std::size_t>(m));
    }
    blas::trmm('R', 'U', 'N', 'N', m, n, T(1), F, ldf, W.data(), m);  // W = Q R
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) W[i + j * static_cast<std::size_t>(m)] -= A[i + j * static_cast<std::size_t>(lda)];
    const double anorm = blas::lange('1', m, n, A, lda);
    const double rnorm = blas::lange('1', m, n, W.data(), m);
    const double residual = anorm > 0 ? rnorm / (m * anorm * eps) : (rnorm == 0 ? 0.0 : INFINITY);
    std::vector<T> G(static_cast<std::size_t>(n) * n, T(0));
    for (int j = 0; j < n; ++j) G[j + j * static_cast<std::size_t>(n)] = T(1);
    blas::syrk('U', 'T', n, m, T(-1), Q, ldq, T(1), G.data(), n);  // I - Q^T Q, upper triangle
    const double orthogonality = blas::lansy('1', 'U', n, G.data(), n) / (m * eps);
    return {residual, orthogonality};
}

/// The least-squares check, with r = b - A x for each column: ||A^T r||_2 / (||A||_F (||A||_F
/// ||x||_2 + ||b||_2) max(m, n) eps), the largest over the columns. The exact least-squares
/// solution has A^T r = 0, and a backward-stable one keeps the ratio O(1) whether the system is
/// nearly consistent (r ~ 0, where ||A^T r|| / (||A|| ||r||) would not be) or not. X holds x in
/// its first n rows.
template <class T>
double ls_residual(int m, int n, int nrhs, const T* A, int lda, const T* X, int ldx, const T* B, int ldb) {
    if (m == 0 || n == 0 || nrhs == 0) return 0.0;
    AllThreads threads;
    const double anorm = blas::lange('F', m, n, A, lda);
    std::vector<T> r(static_cast<std::size_t>(m)), w(static_cast<std::size_t>(n));
    double worst = 0.0;
    for (int c = 0; c < nrhs; ++c) {
        const T* x = X + static_cast<std::size_t>(c) * ldx;
        const T* b = B + static_cast<std::size_t>(c) * ldb;
        std::copy(b, b + m, r.begin());
        blas::gemm('N', 'N', m, 1, n, T(-1), A, lda, x, n, T(1), r.data(), m);
        blas::gemm('T', 'N', n, 1, m, T(1), A, lda, r.data(), m, T(0), w.data(), n);
        const double num = blas::lange('F', n, 1, w.data(), n);
        const double den = anorm * (anorm * blas::lange('F', n, 1, x, n) + blas::lange('F', m, 1, b, m)) *
                           std::max(m, n) * ScalarTraits<T>::eps;
        const double ratio = den > 0 ? num / den : (num == 0 ? 0.0 : INFINITY);
        if (std::isnan(ratio)) return ratio;
        worst = std::max(worst, ratio);
    }
    return worst;
}

int lapack_gels(int m, int n, int nrhs, double* A, int lda, double* B, int ldb) {
    return LAPACKE_dgels(LAPACK_COL_MAJOR, 'N', m, n, nrhs, A, lda, B, ldb);
}
int lapack_gels(int m, int n, int nrhs, float* A, int lda, float* B, int ldb) {
    return LAPACKE_sgels(LAPACK_COL_MAJOR, 'N', m, n, nrhs, A, lda, B, ldb);
}

/// ls_residual of LAPACK's gels on the same problem (copies of A and B).
template <class T>
double lapack_ls_residual(int m, int n, int nrhs, const T* A, int lda, const T* B, int ldb) {
    if (m == 0 || n == 0 || nrhs == 0) return 0.0;
    AllThreads threads;
    std::vector<T> F(A, A + static_cast<std::size_t>(lda) * n), X(B, B + static_cast<std::size_t>(ldb) * nrhs);
    if (lapack_gels(m, n, nrhs, F.data(), lda, X.data(), ldb) != 0) return INFINITY;
    return ls_residual(m, n, nrhs, A, lda, X.data(), ldb, B, ldb);
}

template <class T>
int run_qr(Op op, const FactorOptions& o, const TreeOptions& tree, const FileInputs<T>& in) {
    const std::uint64_t seed = o.seed != 0 ? o.seed : std::random_device{}() | 1ULL;
    const int n = o.n;
    const int m = o.m < 0 ? n : o.m;
    const int nrhs = op == Op::Gels ? o.nrhs : 0;
    Runtime rt;
    const int nb = o.nb > 0 ? o.nb : default_qr_nb(rt, m, n);
    const int ib = o.ib > 0 ? std::min(o.ib, nb) : default_ib(nb, rt.ncuda());
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
    add_file_config(config, o);
    out.header(config);

    const int lda = std::max(1, m);
    std::vector<T> A(static_cast<std::size_t>(lda) * n), B(static_cast<std::size_t>(lda) * nrhs);
    if (in.has_a())
        A = in.A;
    else
        matgen::uniform(m, n, seed, A.data(), lda);
    if (in.has_b())
        B = in.B;
    else
        matgen::uniform(m, nrhs, seed + 1, B.data(), lda);
    const double dm = m, dn = n;
    // Householder QR: 2 m n^2 - 2 n^3 / 3; gels adds Q^T B (2 nrhs n (2m - n)) and the solve (n^2 nrhs).
    double flops = 2.0 * dm * dn * dn - 2.0 * dn * dn * dn / 3.0;
    if (op == Op::Gels) flops += 2.0 * nrhs * dn * (2.0 * dm - dn) + dn * dn * nrhs;

    int failed = 0;
    std::vector<double> times;
    TraceRecorder trace(o);
    for (int it = 1; it <= o.niter; ++it) {
        TileMatrix<T> tA(m, n, nb), tB(m, nrhs, nb);
        tA.from_lapack(A.data(), lda);
        tB.from_lapack(B.data(), lda);
        QrFactors<T> F(tA, ib, qr_options(tree));
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
            std::vector<T> X(B.size());
            tB.to_lapack(X.data(), lda);
            write_solution(o, n, nrhs, X.data(), lda);  // x: the first n rows
        }
        if (o.check && it == o.niter && info == 0) {
            if (op == Op::Geqrf) {
                TileMatrix<T> tQ(m, n, nb);
                orgqr(tA, F, tQ);
                std::vector<T> Fa(A.size()), Q(A.size());
                tA.to_lapack(Fa.data(), lda);
                tQ.to_lapack(Q.data(), lda);
                const auto [res, orth] = qr_residuals(m, n, A.data(), lda, Q.data(), lda, Fa.data(), lda);
                r["residual"] = res;
                r["orthogonality"] = orth;
                ok = ok && checks::passes(res) && checks::passes(orth);
            } else {
                std::vector<T> X(B.size());
                tB.to_lapack(X.data(), lda);
                const double res = ls_residual(m, n, nrhs, A.data(), lda, X.data(), lda, B.data(), lda);
                r["residual"] = res;
                r["residual_lapack"] = lapack_ls_residual(m, n, nrhs, A.data(), lda, B.data(), lda);
                ok = ok && checks::passes(res);
            }
        }
        r["status"] = ok ? "ok" : "FAILED";
        if (!ok) ++failed;
        out.row(r);
    }
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
int start_qr(Op op, FactorOptions& o, const TreeOptions& tree) {
    const FileInputs<T> in = load_file_inputs<T>(o, Shape::Tall, op == Op::Gels ? FileUse::Solve : FileUse::Matrix);
    const int m = o.m >= 0 ? o.m : o.n;
    if (m < o.n)
        throw ArgumentError("-m", fmt::format("must be >= n = {} (tile QR of a wide matrix is not "
                                              "supported), got {}",
                                              o.n, m));
    const int elem = o.prec == "s" ? 4 : 8;
    check_problem_size("-n", m, o.n, elem, o.check ? 6 : 2);
    if (op == Op::Gels) check_problem_size("--nrhs", m, o.nrhs, elem, o.check ? 4 : 2);
    return run_qr<T>(op, o, tree, in);
}

void add_command(CLI::App& app, Run& run, Op op) {
    auto opts = std::make_shared<FactorOptions>();
    auto tree = std::make_shared<TreeOptions>();
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
    add_file_options(*cmd, *opts, op == Op::Gels ? FileUse::Solve : FileUse::Matrix);
    cmd->footer(op == Op::Geqrf
                    ? "The checks form the thin Q (m x n) from the factors: ||A - Q R||_1 / (m ||A||_1 eps) < 30\n"
                      "(residual) and ||I - Q^T Q||_1 / (m eps) < 30 (orthogonality).\n"
                      "Example: starfact geqrf -m 32768 -n 4096 --nb 1024 --tree binary --domain 1 --check"
                    : "The check, with r = b - A x per column: ||A^T r||_2 / (||A||_F (||A||_F ||x||_2 + ||b||_2)\n"
                      "max(m, n) eps) < 30 (zero for the exact least-squares solution), printed next to LAPACK's\n"
                      "gels on the same problem (residual_lapack).\n"
                      "Example: starfact gels -m 20000 -n 5000 --nrhs 8 --check\n"
                      "With files (X gets the n x nrhs solution): starfact gels --A A.npy --B B.npy --X X.npy");
    cmd->callback([&run, opts, tree, op, cmd] {
        note_given_options(*cmd, *opts);
        run = [opts, tree, op]() -> int {
            return opts->prec == "s" ? start_qr<float>(op, *opts, *tree) : start_qr<double>(op, *opts, *tree);
        };
    });
}
}  // namespace

void add_qr_commands(CLI::App& app, Run& run) {
    add_command(app, run, Op::Geqrf);
    add_command(app, run, Op::Gels);
}

}  // namespace starfact::cli
