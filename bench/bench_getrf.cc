// bench_getrf: starfact's tile LU with incremental pivoting against cuSOLVER's dgetrf (partial
// pivoting) on the same FP64 matrices. Both start from device-resident data; flops counted as
// 2/3 n^3. The solve backward error of each starfact factor is checked with a random b.
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <vector>

#include "bench/bench_common.hpp"
#include "codelets/codelets.hpp"
#include "codelets/trace.hpp"
#include "common/checks.hpp"
#include "common/matgen.hpp"
#include "common/runtime.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

namespace {
using namespace starfact;

// cuSOLVER's 64-bit Xgetrf on A generated into GPU memory before each run (untimed): the
// median seconds over reps.
double time_cusolver(int n, const BlockSource<double>& A, int reps, int* info_out) {
    cusolverDnHandle_t h;
    bench::check(cusolverDnCreate(&h), "cusolverDnCreate");
    cusolverDnParams_t params;
    bench::check(cusolverDnCreateParams(&params), "cusolverDnCreateParams");
    const std::size_t bytes = sizeof(double) * n * static_cast<std::size_t>(n);
    double* dA = nullptr;
    int64_t* dipiv = nullptr;
    int* dinfo = nullptr;
    bench::check(cudaMalloc(&dA, bytes), "cudaMalloc");
    bench::check(cudaMalloc(&dipiv, sizeof(int64_t) * n), "cudaMalloc");
    bench::check(cudaMalloc(&dinfo, sizeof(int)), "cudaMalloc");
    std::size_t dws = 0, hws = 0;
    bench::check(cusolverDnXgetrf_bufferSize(h, params, n, n, CUDA_R_64F, dA, n, CUDA_R_64F, &dws, &hws),
                 "cusolverDnXgetrf_bufferSize");
    void* dwork = nullptr;
    bench::check(cudaMalloc(&dwork, std::max<std::size_t>(dws, 1)), "cudaMalloc");
    std::vector<char> hwork(std::max<std::size_t>(hws, 1));
    const double t = bench::time_on_device(
        reps, [&] { bench::to_device(A, n, n, dA); },
        [&] {
            bench::check(cusolverDnXgetrf(h, params, n, n, CUDA_R_64F, dA, n, dipiv, CUDA_R_64F, dwork, dws,
                                          hwork.data(), hws, dinfo),
                         "cusolverDnXgetrf");
        });
    bench::check(cudaMemcpy(info_out, dinfo, sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
    cudaFree(dwork);
    cudaFree(dinfo);
    cudaFree(dipiv);
    cudaFree(dA);
    cusolverDnDestroyParams(params);
    cusolverDnDestroy(h);
    return t;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"starfact tile LU (incremental pivoting) vs cuSOLVER dgetrf (FP64), same matrices, device-resident"};
    std::vector<int> sizes{8192, 16384, 32768, 40000};
    std::vector<int> nbs{1024, 2048};
    std::vector<int> ibs{32, 64};
    std::vector<std::string> schedules{"dynamic"};
    int reps = 3, warmup = 2;
    std::string out_path;
    std::vector<std::string> workers{"all"};
    std::string start = "device";
    app.add_option("--start", start, bench::kStartHelp)
        ->check(CLI::IsMember({"device", "host"}))
        ->capture_default_str();
    app.add_option("--sizes", sizes, "Matrix orders")->delimiter(',');
    app.add_option("--workers", workers, bench::kWorkersHelp)->delimiter(',')->check(CLI::IsMember({"all", "gpu"}));
    app.add_option("--nb", nbs, "Tile sizes to try")->delimiter(',');
    app.add_option("--ib", ibs, "Inner block sizes to try")->delimiter(',');
    std::vector<int> trtris{0};
    app.add_option("--trtri", trtris, "0: triangular solves with L1; 1: the trtri + gemm variant (each is measured)")
        ->delimiter(',')
        ->check(CLI::Range(0, 1));
    app.add_option("--schedules", schedules, "dynamic, static-rl, static-ll, static-bfll (each is measured)")
        ->delimiter(',')
        ->check(CLI::IsMember({"dynamic", "static-rl", "static-ll", "static-bfll"}));
    app.add_option("--reps", reps, "Timed repetitions per point (median reported)")->check(CLI::PositiveNumber);
    app.add_option("--warmup", warmup, "Untimed runs per point first (they also calibrate the models)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--json", out_path, "Also write JSON lines to this file");
    std::string trace_path;
    app.add_option("--trace", trace_path,
                   "Write every task of each point's last run (name, worker, start, end) to this CSV file");
    CLI11_PARSE(app, argc, argv);

    bench::Emitter emit(out_path);
    std::ofstream trace;
    if (!trace_path.empty()) {
        trace.open(trace_path);
        trace << "n,nb,ib,trtri,schedule,task,worker,start_s,end_s\n";
    }
    Runtime rt;
    const unsigned gpu_node = bench::first_cuda_node();
    emit({{"record", "config"},
          {"bench", "getrf"},
          {"sched", rt.scheduler()},
          {"ncpu", rt.ncpu()},
          {"ncuda", rt.ncuda()},
          {"starpu", Runtime::starpu_version()},
          {"STARPU_NWORKER_PER_CUDA", bench::env("STARPU_NWORKER_PER_CUDA")},
          {"STARPU_NCPU", bench::env("STARPU_NCPU")}});
    if (rt.ncuda() == 0) {
        fmt::print(stderr, "bench_getrf: no CUDA worker\n");
        return 1;
    }
    for (int n : sizes) {
        const double flops = 2.0 / 3.0 * double(n) * n * n;
        // The matrix is generated where it goes (GPU memory for cuSOLVER, the tiles for
        // starfact), never held whole on the host: n = 100000 leaves room for one copy only.
        const BlockSource<double> A = uniform_source<double>(2000 + n);
        std::vector<double> b(static_cast<std::size_t>(n));
        matgen::uniform(n, 1, 3000 + n, b.data(), n);
        int cinfo = -1;
        const double tc = time_cusolver(n, A, reps, &cinfo);
        emit({{"record", "point"},
              {"impl", "cusolver"},
              {"n", n},
              {"time_s", tc},
              {"tflops", flops / tc / 1e12},
              {"info", cinfo}});
        double best_t = 1e30;
        int best_nb = 0, best_ib = 0, best_trtri = 0;
        std::string best_schedule;
        for (const std::string& schedule_name : schedules)
            for (int nb : nbs)
                for (int ib : ibs)
                    for (int trtri : trtris)
                        for (const std::string& who : workers) {
                            if (ib > nb) continue;
                            const codelets::ScopedImpl only(bench::workers_impl(who));
                            const LuSchedule schedule = parse_lu_schedule(schedule_name);
                            TileMatrix<double> tA(n, n, nb);
                            LuFactors<double> F(tA, ib, trtri != 0);
                            std::vector<double> t, warm;
                            int info = -1;
                            double backward = -1;
                            for (int r = 0; r < warmup + reps; ++r) {
                                fill_tiles_from(tA, A);
                                if (start == "device") tA.fetch_to(gpu_node);
                                const bool traced = !trace_path.empty() && r == warmup + reps - 1;
                                if (traced) codelets::start_trace();
                                const auto t0 = std::chrono::steady_clock::now();
                                info = getrf(tA, F, schedule);
                                const double secs =
                                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                                (r >= warmup ? t : warm).push_back(secs);
                                if (traced)
                                    for (const codelets::TaskRecord& task : codelets::stop_trace())
                                        trace << fmt::format("{},{},{},{},{},{},{},{:.6f},{:.6f}\n", n, nb, ib, trtri,
                                                             schedule_name, task.name, task.worker, task.start_s,
                                                             task.end_s);
                            }
                            if (info == 0) {
                                TileMatrix<double> tb(n, 1, nb);
                                tb.from_lapack(b.data(), n);
                                getrs(tA, F, tb);
                                std::vector<double> x(b.size());
                                tb.to_lapack(x.data(), n);
                                backward = solve_residual_source(n, 1, nb, A, x.data(), n, b.data(), n);
                            }
                            const double tm = bench::median(t);
                            emit({{"record", "point"},
                                  {"impl", "starfact"},
                                  {"workers", who},
                                  {"start", start},
                                  {"schedule", schedule_name},
                                  {"n", n},
                                  {"nb", nb},
                                  {"ib", ib},
                                  {"trtri", trtri},
                                  {"time_s", tm},
                                  {"tflops", flops / tm / 1e12},
                                  {"info", info},
                                  {"backward_error", backward},
                                  {"warmup_runs", warm},
                                  {"runs", t}});
                            if (tm < best_t)
                                best_t = tm, best_nb = nb, best_ib = ib, best_trtri = trtri,
                                best_schedule = schedule_name;
                        }
        emit({{"record", "summary"},
              {"bench", "getrf"},
              {"n", n},
              {"best_nb", best_nb},
              {"best_ib", best_ib},
              {"best_trtri", best_trtri},
              {"best_schedule", best_schedule},
              {"starfact_tflops", flops / best_t / 1e12},
              {"cusolver_tflops", flops / tc / 1e12},
              {"ratio", tc / best_t}});
    }
    return 0;
}
