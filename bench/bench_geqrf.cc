// bench_geqrf: starfact's tile QR against cuSOLVER's dgeqrf on the same FP64 matrices, square and
// tall-skinny (generated in place: starfact's tiles on every core, cuSOLVER's copy on the GPU, so
// that the host holds one copy, the tiles). cuSOLVER starts from device-resident data, starfact
// from --start host|device; flops counted as 2 m n^2 - 2 n^3 / 3. Each
// starfact factorization is checked with a probe: for a random x, ||A x - Q [R x; 0]||_inf /
// (||A||_inf ||x||_inf max(m, n) eps), Q applied by the tile algorithm (below 30 passes).
// --tree and --domain sweep the elimination trees (flat chain, binary tree over domains, auto).
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <chrono>
#include <fstream>
#include <limits>
#include <utility>
#include <vector>

#include "bench/bench_common.hpp"
#include "codelets/codelets.hpp"
#include "codelets/cuda/matgen.hpp"
#include "codelets/trace.hpp"
#include "common/blas.hpp"
#include "common/matgen.hpp"
#include "common/parallel.hpp"
#include "common/runtime.hpp"
#include "common/scalar_traits.hpp"
#include "tile_algorithms/tile_algorithms.hpp"
#include "tile_algorithms/tile_host.hpp"

namespace {
using namespace starfact;

// cuSOLVER Xgeqrf on matgen::uniform(m, n, seed), generated in device memory before every run (the same
// bits as the host generator gives starfact; untimed): the median seconds over reps.
double time_cusolver(int m, int n, std::uint64_t seed, int reps, int* info_out) {
    cusolverDnHandle_t h;
    bench::check(cusolverDnCreate(&h), "cusolverDnCreate");
    cusolverDnParams_t params;
    bench::check(cusolverDnCreateParams(&params), "cusolverDnCreateParams");
    const std::size_t bytes = sizeof(double) * m * static_cast<std::size_t>(n);
    double *dA = nullptr, *dtau = nullptr;
    int* dinfo = nullptr;
    bench::check(cudaMalloc(&dA, bytes), "cudaMalloc");
    bench::check(cudaMalloc(&dtau, sizeof(double) * std::max(1, std::min(m, n))), "cudaMalloc");
    bench::check(cudaMalloc(&dinfo, sizeof(int)), "cudaMalloc");
    std::size_t dws = 0, hws = 0;
    bench::check(
        cusolverDnXgeqrf_bufferSize(h, params, m, n, CUDA_R_64F, dA, m, CUDA_R_64F, dtau, CUDA_R_64F, &dws, &hws),
        "cusolverDnXgeqrf_bufferSize");
    void* dwork = nullptr;
    bench::check(cudaMalloc(&dwork, std::max<std::size_t>(dws, 1)), "cudaMalloc");
    std::vector<char> hwork(std::max<std::size_t>(hws, 1));
    const double t = bench::time_on_device(
        reps,
        [&] {
            bench::check(cuda::generate_tile<double>(TileView<double>{dA, m, n, m}, matgen::Kind::Uniform, seed, n, 0, 0,
                                                     nullptr),
                         "generate_tile");
            bench::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        },
        [&] {
            bench::check(cusolverDnXgeqrf(h, params, m, n, CUDA_R_64F, dA, m, CUDA_R_64F, dtau, CUDA_R_64F, dwork, dws,
                                          hwork.data(), hws, dinfo),
                         "cusolverDnXgeqrf");
        });
    bench::check(cudaMemcpy(info_out, dinfo, sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
    cudaFree(dwork);
    cudaFree(dinfo);
    cudaFree(dtau);
    cudaFree(dA);
    cusolverDnDestroyParams(params);
    cusolverDnDestroy(h);
    return t;
}

// ||A x - Q [R x; 0]||_inf / (||A||_inf ||x||_inf max(m, n) eps) for a random x: O(m n) work on
// top of one application of Q by the tile algorithm, where the full residual would cost a
// factorization. R is read from the tiles where they lie and A x is formed from the generator
// block by block, so that nothing of size m n is allocated besides the tiles (n = 100000 in
// double is 80 GB of the machine's 128 GiB).
double probe_residual(const BlockSource<double>& A, int m, int n, const TileMatrix<double>& tA,
                      const QrFactors<double>& F) {
    if (m == 0 || n == 0) return 0.0;
    const int nb = tA.nb();
    std::vector<double> x(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(m), 0.0);
    std::vector<double> ax(static_cast<std::size_t>(m), 0.0), rowabs(static_cast<std::size_t>(m), 0.0);
    matgen::uniform(n, 1, 77, x.data(), n);
    {
        // y = [R x; 0]: tile row I of R x is the sum over tile columns J >= I of R's tiles.
        const HostTiles<double> tiles(tA, STARPU_R, [](int i, int j) { return i <= j; });
        parallel_for(tA.nt(), [&](int I) {
            for (int J = I; J < tA.nt(); ++J)
                for (int c = 0; c < tA.tile_n(J); ++c) {
                    const double* col = tiles.column(I, J, c);
                    const int rows = I == J ? c + 1 : tA.tile_m(I);  // R's upper triangle
                    const double xc = x[static_cast<std::size_t>(J) * nb + c];
                    for (int r = 0; r < rows; ++r) y[static_cast<std::size_t>(I) * nb + r] += col[r] * xc;
                }
        });
    }
    TileMatrix<double> tY(m, 1, nb);
    tY.from_lapack(y.data(), m);
    qr_apply('N', tA, F, tY);
    tY.to_lapack(y.data(), m);
    source_multiply<double>(A, m, n, nb, 1, x.data(), n, ax.data(), m, rowabs.data());
    for (int i = 0; i < m; ++i) ax[i] -= y[i];
    // ||A||_inf from the generator's row sums; lange lets a NaN of the factor reach the ratio.
    const double anorm = *std::max_element(rowabs.begin(), rowabs.end());
    const double denom = anorm * blas::lange('I', n, 1, x.data(), n) * std::max(m, n) * ScalarTraits<double>::eps;
    return blas::lange('I', m, 1, ax.data(), m) / denom;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"starfact tile QR vs cuSOLVER dgeqrf (FP64), same matrices, device-resident"};
    std::vector<int> sizes{8192, 16384, 32768};
    std::vector<std::string> shapes{"32768x4096", "65536x2048"};
    std::vector<int> nbs{1024, 2048};
    std::vector<int> ibs{64, 128};
    std::vector<std::string> trees{"flat", "binary"};
    std::vector<int> domains{1};
    int reps = 3, warmup = 2;
    std::string out_path, trace_path;
    std::vector<std::string> workers{"all"};
    std::string start = "device";
    app.add_option("--start", start, bench::kStartHelp)
        ->check(CLI::IsMember({"device", "host"}))
        ->capture_default_str();
    app.add_option("--sizes", sizes, "Square matrix orders (n x n)")->delimiter(',');
    app.add_option("--workers", workers, bench::kWorkersHelp)->delimiter(',')->check(CLI::IsMember({"all", "gpu"}));
    app.add_option("--shapes", shapes, "Tall matrices MxN (M >= N), e.g. 32768x4096")->delimiter(',');
    app.add_option("--nb", nbs, "Tile sizes to try")->delimiter(',');
    app.add_option("--ib", ibs, "Inner block sizes to try")->delimiter(',');
    app.add_option("--tree", trees, "Elimination trees to try: flat, binary, auto")
        ->delimiter(',')
        ->check(CLI::IsMember({"flat", "binary", "auto"}));
    app.add_option("--domain", domains, "Domain sizes (tile rows) to try with binary (0: auto's choice)")
        ->delimiter(',')
        ->check(CLI::NonNegativeNumber);
    app.add_option("--reps", reps, "Timed repetitions per point (median reported)")->check(CLI::PositiveNumber);
    app.add_option("--warmup", warmup, "Untimed runs per point first (they also calibrate the models)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--json", out_path, "Also write JSON lines to this file");
    app.add_option("--trace", trace_path,
                   "Write every task of each point's last run (name, worker, start, end) to this CSV file");
    CLI11_PARSE(app, argc, argv);

    std::vector<std::pair<int, int>> problems;
    for (int n : sizes)
        if (n > 0) problems.emplace_back(n, n);  // an empty --sizes "" gives none
    for (const std::string& s : shapes) {
        if (s.empty()) continue;
        const auto x = s.find('x');
        int m = -1, n = -1;
        try {
            if (x != std::string::npos) m = std::stoi(s.substr(0, x)), n = std::stoi(s.substr(x + 1));
        } catch (const std::exception&) {
        }
        if (m < n || n <= 0 || static_cast<long>(m) * n > std::numeric_limits<int>::max()) {
            fmt::print(stderr, "bench_geqrf: --shapes: '{}' is not MxN with M >= N > 0 and M N < 2^31\n", s);
            return 2;
        }
        problems.emplace_back(m, n);
    }

    bench::Emitter emit(out_path);
    std::ofstream trace;
    if (!trace_path.empty()) {
        trace.open(trace_path);
        trace << "m,n,nb,ib,task,worker,start_s,end_s\n";
    }
    Runtime rt;
    const unsigned gpu_node = bench::first_cuda_node();
    emit({{"record", "config"},
          {"bench", "geqrf"},
          {"sched", rt.scheduler()},
          {"ncpu", rt.ncpu()},
          {"ncuda", rt.ncuda()},
          {"starpu", Runtime::starpu_version()},
          {"STARPU_NWORKER_PER_CUDA", bench::env("STARPU_NWORKER_PER_CUDA")},
          {"STARPU_NCPU", bench::env("STARPU_NCPU")}});
    if (rt.ncuda() == 0) {
        fmt::print(stderr, "bench_geqrf: no CUDA worker\n");
        return 1;
    }
    for (auto [m, n] : problems) {
        const double dm = m, dn = n;
        const double flops = 2.0 * dm * dn * dn - 2.0 * dn * dn * dn / 3.0;
        const std::uint64_t seed = 4000 + m + n;
        const BlockSource<double> A = uniform_source<double>(seed);
        int cinfo = -1;
        const double tc = time_cusolver(m, n, seed, reps, &cinfo);
        emit({{"record", "point"},
              {"impl", "cusolver"},
              {"m", m},
              {"n", n},
              {"time_s", tc},
              {"tflops", flops / tc / 1e12},
              {"info", cinfo}});
        double best_t = 1e30;
        int best_nb = 0, best_ib = 0, best_domain = 0;
        std::string best_tree;
        std::vector<std::pair<std::string, int>> variants;
        const bool has_flat = std::find(trees.begin(), trees.end(), "flat") != trees.end();
        for (const std::string& tr : trees) {
            if (tr != "binary") {
                variants.emplace_back(tr, 0);
                continue;
            }
            for (int d : domains) variants.emplace_back(tr, d);
        }
        for (int nb : nbs)
            for (int ib : ibs)
                for (const auto& [tree_name, domain] : variants)
                    for (const std::string& who : workers) {
                        if (ib > nb) continue;
                        const codelets::ScopedImpl only(bench::workers_impl(who));
                        const QrTree tree = tree_name == "flat"     ? QrTree::Flat
                                            : tree_name == "binary" ? QrTree::Binary
                                                                    : QrTree::Auto;
                        TileMatrix<double> tA(m, n, nb);
                        QrFactors<double> F(tA, ib, {tree, domain});
                        // Flat and a binary tree whose domains cover every panel's rows are one plan.
                        if (tree == QrTree::Binary && F.options().domain >= tA.mt() && has_flat) continue;
                        std::vector<double> t, warm;
                        for (int r = 0; r < warmup + reps; ++r) {
                            fill_tiles_from(tA, A);
                            if (start == "device") tA.fetch_to(gpu_node);
                            const bool traced = !trace_path.empty() && r == warmup + reps - 1;
                            if (traced) codelets::start_trace();
                            const auto t0 = std::chrono::steady_clock::now();
                            geqrf(tA, F);
                            const double secs =
                                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                            (r >= warmup ? t : warm).push_back(secs);
                            if (traced)
                                for (const codelets::TaskRecord& task : codelets::stop_trace())
                                    trace << fmt::format("{},{},{},{},{},{},{:.6f},{:.6f}\n", m, n, nb, ib, task.name,
                                                         task.worker, task.start_s, task.end_s);
                        }
                        const double probe = probe_residual(A, m, n, tA, F);
                        const double tm = bench::median(t);
                        emit({{"record", "point"},
                              {"impl", "starfact"},
                              {"workers", who},
                              {"start", start},
                              {"m", m},
                              {"n", n},
                              {"nb", nb},
                              {"ib", ib},
                              {"tree", tree_name},
                              {"resolved_tree", F.options().tree == QrTree::Flat ? "flat" : "binary"},
                              {"domain", F.options().domain},
                              {"time_s", tm},
                              {"tflops", flops / tm / 1e12},
                              {"residual_probe", probe},
                              {"warmup_runs", warm},
                              {"runs", t}});
                        if (tm < best_t) {
                            best_t = tm, best_nb = nb, best_ib = ib, best_domain = F.options().domain;
                            best_tree = F.options().tree == QrTree::Flat ? "flat" : "binary";
                        }
                    }
        emit({{"record", "summary"},
              {"bench", "geqrf"},
              {"m", m},
              {"n", n},
              {"best_nb", best_nb},
              {"best_ib", best_ib},
              {"best_tree", best_tree},
              {"best_domain", best_domain},
              {"starfact_tflops", flops / best_t / 1e12},
              {"cusolver_tflops", flops / tc / 1e12},
              {"ratio", tc / best_t}});
    }
    return 0;
}
