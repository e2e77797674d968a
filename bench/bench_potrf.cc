// bench_potrf: starfact's tile Cholesky against cuSOLVER's dpotrf on the same FP64 matrices.
// Both start from data already in GPU memory and end when the factor is there, so the
// comparison is kernel work against kernel work; host<->device copies are timed apart.
#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#include <starpu.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_common.hpp"
#include "codelets/codelets.hpp"
#include "common/checks.hpp"
#include "common/matgen.hpp"
#include "common/runtime.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

namespace {
using namespace starfact;

// cuSOLVER's 64-bit dpotrf on A generated into GPU memory before each run (untimed); returns
// the median seconds over reps.
double time_cusolver(int n, const BlockSource<double>& A, int reps, int* info_out) {
    cusolverDnHandle_t h;
    bench::check(cusolverDnCreate(&h), "cusolverDnCreate");
    cusolverDnParams_t params;
    bench::check(cusolverDnCreateParams(&params), "cusolverDnCreateParams");
    double* dA = nullptr;
    int* dinfo = nullptr;
    const std::size_t bytes = sizeof(double) * n * static_cast<std::size_t>(n);
    bench::check(cudaMalloc(&dA, bytes), "cudaMalloc");
    bench::check(cudaMalloc(&dinfo, sizeof(int)), "cudaMalloc");
    std::size_t dws = 0, hws = 0;
    bench::check(
        cusolverDnXpotrf_bufferSize(h, params, CUBLAS_FILL_MODE_LOWER, n, CUDA_R_64F, dA, n, CUDA_R_64F, &dws, &hws),
        "cusolverDnXpotrf_bufferSize");
    void* dwork = nullptr;
    bench::check(cudaMalloc(&dwork, std::max<std::size_t>(dws, 1)), "cudaMalloc");
    std::vector<char> hwork(std::max<std::size_t>(hws, 1));
    const double t = bench::time_on_device(
        reps, [&] { bench::to_device(A, n, n, dA); },
        [&] {
            bench::check(cusolverDnXpotrf(h, params, CUBLAS_FILL_MODE_LOWER, n, CUDA_R_64F, dA, n, CUDA_R_64F, dwork,
                                          dws, hwork.data(), hws, dinfo),
                         "cusolverDnXpotrf");
        });
    bench::check(cudaMemcpy(info_out, dinfo, sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
    cudaFree(dwork);
    cudaFree(dinfo);
    cudaFree(dA);
    cusolverDnDestroyParams(params);
    cusolverDnDestroy(h);
    return t;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"starfact tile Cholesky vs cuSOLVER dpotrf (FP64, lower), same matrices, device-resident timing"};
    std::vector<int> sizes{8192, 16384, 32768, 40000};
    std::vector<int> nbs{512, 1024, 2048};
    int reps = 3;
    int warmup = 2;
    bool check = true;
    std::string out_path;
    std::vector<std::string> workers{"all"};
    std::string start = "device";
    app.add_option("--start", start, bench::kStartHelp)
        ->check(CLI::IsMember({"device", "host"}))
        ->capture_default_str();
    app.add_option("--sizes", sizes, "Matrix orders")->delimiter(',');
    app.add_option("--workers", workers, bench::kWorkersHelp)->delimiter(',')->check(CLI::IsMember({"all", "gpu"}));
    app.add_option("--nb", nbs, "Tile sizes to try (the best is reported)")->delimiter(',');
    app.add_option("--reps", reps, "Timed repetitions per point (median reported)")->check(CLI::PositiveNumber);
    app.add_option("--warmup", warmup, "Untimed runs per point first (they also calibrate StarPU's models)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--check", check, "Probe residual of every starfact factor (O(n^2))");
    app.add_option("--json", out_path, "Also write JSON lines to this file");
    CLI11_PARSE(app, argc, argv);

    bench::Emitter emit(out_path);

    Runtime rt;
    const unsigned gpu_node = bench::first_cuda_node();
    using bench::env;
    emit({{"record", "config"},
          {"sched", rt.scheduler()},
          {"ncpu", rt.ncpu()},
          {"ncuda", rt.ncuda()},
          {"starpu", Runtime::starpu_version()},
          {"STARPU_NWORKER_PER_CUDA", env("STARPU_NWORKER_PER_CUDA")},
          {"STARPU_CUDA_PIPELINE", env("STARPU_CUDA_PIPELINE")},
          {"STARPU_NCPU", env("STARPU_NCPU")}});
    if (rt.ncuda() == 0) {
        fmt::print(stderr, "bench_potrf: no CUDA worker\n");
        return 1;
    }
    for (int n : sizes) {
        const double flops = double(n) * n * n / 3.0;
        // The matrix is generated where it goes (GPU memory for cuSOLVER, the tiles for
        // starfact), never held whole on the host: n = 100000 leaves room for one copy only.
        const BlockSource<double> A = spd_source<double>(n, 1000 + n);
        int cinfo = -1;
        const double tc = time_cusolver(n, A, reps, &cinfo);
        emit({{"record", "point"},
              {"impl", "cusolver"},
              {"n", n},
              {"time_s", tc},
              {"tflops", flops / tc / 1e12},
              {"info", cinfo}});
        double best_t = 1e30;
        int best_nb = 0;
        for (int nb : nbs)
            for (const std::string& who : workers) {
                const codelets::ScopedImpl only(bench::workers_impl(who));
                std::vector<double> t, warm;
                int info = -1;
                double residual = -1;
                double h2d = 0;
                TileMatrix<double> tA(n, n, nb);  // pinning gigabytes is slow: once per point
                for (int r = 0; r < warmup + reps; ++r) {
                    fill_tiles_from(tA, A);
                    const auto c0 = std::chrono::steady_clock::now();
                    if (start == "device") tA.fetch_to(gpu_node);
                    h2d = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
                    const auto t0 = std::chrono::steady_clock::now();
                    info = potrf('L', tA);
                    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                    (r >= warmup ? t : warm).push_back(secs);
                    if (check && r == warmup + reps - 1) residual = potrf_probe_residual_tiles('L', tA, A, 7);
                }
                const double tm = bench::median(t);
                emit({{"record", "point"},
                      {"impl", "starfact"},
                      {"workers", who},
                      {"start", start},
                      {"n", n},
                      {"nb", nb},
                      {"time_s", tm},
                      {"tflops", flops / tm / 1e12},
                      {"info", info},
                      {"probe_residual", residual},
                      {"h2d_s", h2d},
                      {"warmup_runs", warm},
                      {"runs", t}});
                if (tm < best_t) best_t = tm, best_nb = nb;
            }
        emit({{"record", "summary"},
              {"n", n},
              {"best_nb", best_nb},
              {"starfact_tflops", flops / best_t / 1e12},
              {"cusolver_tflops", flops / tc / 1e12},
              {"ratio", tc / best_t}});
    }
    return 0;
}
