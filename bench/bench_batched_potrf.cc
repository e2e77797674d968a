// bench_batched_potrf: our batched Cholesky (batched::cuda::potrf, potrs) against cuSOLVER's
// potrfBatched / potrsBatched and a CPU baseline (LAPACKE, one matrix per core, single-threaded
// OpenBLAS), in one process on the same FP64 matrices. GPU times: CUDA events around the call,
// after a warm-up, median of --reps, the input restored (untimed) before each run. Each matrix
// is its own allocation slot in one buffer; the batch is larger than L2 wherever count allows.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "batched/cuda/kernels.hpp"
#include "bench/bench_common.hpp"
#include "common/blas.hpp"
#include "common/checks.hpp"
#include "common/matgen.hpp"

namespace {
using namespace starfact;
namespace bc = starfact::batched::cuda;

constexpr double kBandwidth = 3.0e12;                    // H100 device copy, bytes/s read + written (measured)
constexpr std::size_t kCpuBytes = std::size_t(2) << 30;  // CPU baseline batch at most this large
constexpr int kPool = 64;                                // distinct matrices, repeated over the batch

/// A device batch: count matrices of n x cols (ld = n) back to back, and their pointers.
struct DeviceBatch {
    int n = 0, cols = 0, count = 0;
    double* data = nullptr;
    double** ptrs = nullptr;
    DeviceBatch(int rows, int c, int cnt) : n(rows), cols(c), count(cnt) {
        bench::check(cudaMalloc(&data, bytes()), "cudaMalloc");
        bench::check(cudaMalloc(&ptrs, sizeof(double*) * count), "cudaMalloc");
        bc::strided_pointers<double>(ptrs, data, stride(), count, nullptr);
    }
    ~DeviceBatch() {
        cudaFree(ptrs);
        cudaFree(data);
    }
    DeviceBatch(const DeviceBatch&) = delete;
    DeviceBatch& operator=(const DeviceBatch&) = delete;
    long long stride() const { return static_cast<long long>(n) * cols; }
    std::size_t bytes() const { return sizeof(double) * static_cast<std::size_t>(stride()) * count; }
    void copy_from(const DeviceBatch& o) {
        bench::check(cudaMemcpyAsync(data, o.data, bytes(), cudaMemcpyDeviceToDevice, nullptr), "cudaMemcpyAsync");
    }
    std::vector<double> matrix(int b) const {
        std::vector<double> h(stride());
        bench::check(cudaMemcpy(h.data(), data + b * stride(), sizeof(double) * h.size(), cudaMemcpyDeviceToHost),
                     "cudaMemcpy");
        return h;
    }
};

/// Fills the batch with the pool's matrices, matrix b = pool[b % pool.size()].
void fill(DeviceBatch& d, const std::vector<std::vector<double>>& pool) {
    for (int b = 0; b < d.count; ++b)
        bench::check(cudaMemcpy(d.data + b * d.stride(), pool[b % pool.size()].data(), sizeof(double) * d.stride(),
                                cudaMemcpyHostToDevice),
                     "cudaMemcpy");
}

std::vector<int> infos(const int* d, int count) {
    std::vector<int> h(count);
    bench::check(cudaMemcpy(h.data(), d, sizeof(int) * count, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return h;
}

int nonzero(const std::vector<int>& v) {
    return static_cast<int>(std::count_if(v.begin(), v.end(), [](int x) { return x != 0; }));
}

/// Largest potrf residual over a few matrices of the factored batch (first, middle, last).
double worst_residual(char uplo, const DeviceBatch& F, const std::vector<std::vector<double>>& pool) {
    double worst = 0;
    for (int b : {0, F.count / 2, F.count - 1}) {
        const auto f = F.matrix(b);
        worst = std::max(worst,
                         checks::potrf_residual<double>(uplo, F.n, pool[b % pool.size()].data(), F.n, f.data(), F.n));
    }
    return worst;
}

/// Largest solve backward error over a few matrices.
double worst_solve(const DeviceBatch& X, const std::vector<std::vector<double>>& pool,
                   const std::vector<std::vector<double>>& rhs) {
    double worst = 0;
    for (int b : {0, X.count / 2, X.count - 1}) {
        const auto x = X.matrix(b);
        worst = std::max(worst, checks::solve_residual<double>(X.n, X.cols, pool[b % pool.size()].data(), X.n, x.data(),
                                                               X.n, rhs[b % rhs.size()].data(), X.n));
    }
    return worst;
}

/// CPU baseline: LAPACKE dpotrf, one matrix at a time per thread, all cores; median seconds for
/// `count` matrices (measured on fewer when count would not fit kCpuBytes, scaled linearly).
double time_cpu(int n, int count, const std::vector<std::vector<double>>& pool, int reps, int* cpu_count) {
    const std::size_t per = static_cast<std::size_t>(n) * n;  // elements of one matrix
    const int c =
        static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(count, kCpuBytes / (sizeof(double) * per))));
    *cpu_count = c;
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<double> work(static_cast<std::size_t>(c) * n * n);
    auto parallel = [&](auto body) {
        std::vector<std::thread> pool_threads;
        for (int t = 0; t < threads; ++t)
            pool_threads.emplace_back([&, t] {
                for (int b = t; b < c; b += threads) body(b);
            });
        for (auto& th : pool_threads) th.join();
    };
    std::vector<double> t;
    for (int r = 0; r < reps + 1; ++r) {
        parallel([&](int b) {
            std::copy(pool[b % pool.size()].begin(), pool[b % pool.size()].end(), work.begin() + per * b);
        });
        const auto t0 = std::chrono::steady_clock::now();
        parallel([&](int b) { blas::potrf('L', n, work.data() + per * b, n); });
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r > 0) t.push_back(s);
    }
    return bench::median(t) * count / c;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"batched Cholesky (FP64): starfact vs cuSOLVER potrfBatched/potrsBatched vs LAPACKE per core"};
    std::vector<int> sizes{8, 16, 32, 64, 128, 256, 512};
    std::vector<int> counts{10000, 10000, 10000, 10000, 5000, 1000, 2000};
    std::vector<int> nrhs_list{1, 16};
    int reps = 10;
    bool cpu = true;
    std::string out_path;
    app.add_option("--sizes", sizes, "Matrix orders")->delimiter(',');
    app.add_option("--counts", counts, "Batch count per size (one value: the same for all)")->delimiter(',');
    app.add_option("--nrhs", nrhs_list, "Right-hand sides for potrs (cuSOLVER only for 1)")->delimiter(',');
    app.add_option("--reps", reps, "Timed repetitions (median reported)")->check(CLI::PositiveNumber);
    app.add_flag_callback("--no-cpu", [&cpu] { cpu = false; }, "Skip the CPU baseline");
    app.add_option("--json", out_path, "Also write the JSON lines to this file");
    CLI11_PARSE(app, argc, argv);
    if (counts.size() == 1) counts.assign(sizes.size(), counts[0]);
    if (counts.size() != sizes.size()) {
        fmt::print(stderr, "--counts: give one value or one per size ({} sizes)\n", sizes.size());
        return 2;
    }
    openblas_set_num_threads(1);  // the CPU baseline runs one matrix per core

    bench::Emitter emit(out_path);
    cudaDeviceProp prop{};
    bench::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    emit({{"record", "config"},
          {"device", prop.name},
          {"sms", prop.multiProcessorCount},
          {"cpu_threads", std::thread::hardware_concurrency()},
          {"reps", reps}});

    cublasHandle_t blas;
    cusolverDnHandle_t solver;
    bench::check(cublasCreate(&blas), "cublasCreate");
    bench::check(cusolverDnCreate(&solver), "cusolverDnCreate");

    struct Row {
        std::string op;
        int n, count, nrhs;
        std::string impl;
        double time, tflops, floor, vs;
    };
    std::vector<Row> rows;
    auto record = [&](const std::string& op, int n, int count, int nrhs, const std::string& impl, double t,
                      double flops, double floor, double vendor_t, nlohmann::ordered_json extra) {
        nlohmann::ordered_json j{{"record", "point"},
                                 {"op", op},
                                 {"n", n},
                                 {"count", count},
                                 {"nrhs", nrhs},
                                 {"impl", impl},
                                 {"time_s", t},
                                 {"tflops", flops / t / 1e12},
                                 {"floor_s", floor},
                                 {"vendor_over_this", vendor_t > 0 ? vendor_t / t : 0.0}};
        for (auto& [k, v] : extra.items()) j[k] = v;
        emit(j);
        rows.push_back({op, n, count, nrhs, impl, t, flops / t / 1e12, floor, vendor_t > 0 ? vendor_t / t : 0.0});
    };

    for (std::size_t s = 0; s < sizes.size(); ++s) {
        const int n = sizes[s], count = counts[s];
        std::vector<std::vector<double>> pool(std::min(kPool, count), std::vector<double>(std::size_t(n) * n));
        for (std::size_t p = 0; p < pool.size(); ++p) matgen::spd(n, 5000 + 97 * p + n, pool[p].data(), n);
        const double flops = count * (double(n) * n * n / 3.0 + double(n) * n / 2.0 + n / 6.0);
        const double floor = 2.0 * sizeof(double) * double(n) * n * count / kBandwidth;

        DeviceBatch orig(n, n, count), work(n, n, count);
        fill(orig, pool);
        int* dinfo = nullptr;
        bench::check(cudaMalloc(&dinfo, sizeof(int) * count), "cudaMalloc");
        std::size_t ws = bc::potrf_workspace<double>(n, count);
        for (int nrhs : nrhs_list) ws = std::max(ws, bc::potrs_workspace<double>(n, nrhs, count));
        void* dws = nullptr;
        if (ws > 0) bench::check(cudaMalloc(&dws, ws), "cudaMalloc");
        bc::Launch launch{nullptr, blas, dws, ws};
        auto restore = [&] { work.copy_from(orig); };

        // cuSOLVER first (lower only), then ours on the same data.
        const double tv = bench::time_on_device(reps, restore, [&] {
            bench::check(cusolverDnDpotrfBatched(solver, CUBLAS_FILL_MODE_LOWER, n, work.ptrs, n, dinfo, count),
                         "cusolverDnDpotrfBatched");
        });
        const int vfail = nonzero(infos(dinfo, count));
        const double vres = worst_residual('L', work, pool);
        record("potrf", n, count, 0, "cusolver_lower", tv, flops, floor, 0, {{"failed", vfail}, {"residual", vres}});

        for (char uplo : {'L', 'U'}) {
            const double t = bench::time_on_device(reps, restore, [&] {
                bc::potrf<double>(launch, uplo == 'L' ? bc::Uplo::lower : bc::Uplo::upper, n, work.ptrs, n, dinfo,
                                  count);
            });
            const int fail = nonzero(infos(dinfo, count));
            const double res = worst_residual(uplo, work, pool);
            record("potrf", n, count, 0, uplo == 'L' ? "starfact_lower" : "starfact_upper", t, flops, floor,
                   uplo == 'L' ? tv : 0.0, {{"failed", fail}, {"residual", res}});
        }

        // The same through potrf_strided (the batch is one array: cuBLAS's strided batched gemms).
        for (char uplo : {'L', 'U'}) {
            const double t = bench::time_on_device(reps, restore, [&] {
                bc::potrf_strided<double>(launch, uplo == 'L' ? bc::Uplo::lower : bc::Uplo::upper, n, work.ptrs,
                                          work.data, work.stride(), n, dinfo, count);
            });
            const int fail = nonzero(infos(dinfo, count));
            const double res = worst_residual(uplo, work, pool);
            record("potrf", n, count, 0, uplo == 'L' ? "starfact_lower_strided" : "starfact_upper_strided", t, flops,
                   floor, uplo == 'L' ? tv : 0.0, {{"failed", fail}, {"residual", res}});
        }

        if (cpu) {
            int cpu_count = 0;
            const double tc = time_cpu(n, count, pool, std::max(1, reps / 3), &cpu_count);
            record("potrf", n, count, 0, "lapacke_per_core", tc, flops, floor, 0, {{"measured_count", cpu_count}});
        }

        // potrs from our lower factor (the last run above left the upper one).
        restore();
        bc::potrf<double>(launch, bc::Uplo::lower, n, work.ptrs, n, dinfo, count);
        bench::check(cudaDeviceSynchronize(), "potrf");
        for (int nrhs : nrhs_list) {
            std::vector<std::vector<double>> rhs(pool.size(), std::vector<double>(std::size_t(n) * nrhs));
            for (std::size_t p = 0; p < rhs.size(); ++p) matgen::uniform(n, nrhs, 777 + p, rhs[p].data(), n);
            DeviceBatch borig(n, nrhs, count), b(n, nrhs, count);
            fill(borig, rhs);
            const double sflops = count * 2.0 * double(n) * n * nrhs;
            const double sfloor = sizeof(double) * count * (double(n) * n + 2.0 * n * nrhs) / kBandwidth;
            auto brestore = [&] { b.copy_from(borig); };
            double tvs = 0;
            if (nrhs == 1) {
                tvs = bench::time_on_device(reps, brestore, [&] {
                    bench::check(cusolverDnDpotrsBatched(solver, CUBLAS_FILL_MODE_LOWER, n, 1, work.ptrs, n, b.ptrs, n,
                                                         dinfo, count),
                                 "cusolverDnDpotrsBatched");
                });
                record("potrs", n, count, nrhs, "cusolver_lower", tvs, sflops, sfloor, 0,
                       {{"backward_error", worst_solve(b, pool, rhs)}});
            }
            const double t = bench::time_on_device(reps, brestore, [&] {
                bc::potrs<double>(launch, bc::Uplo::lower, n, nrhs, work.ptrs, n, b.ptrs, n, count);
            });
            record("potrs", n, count, nrhs, "starfact_lower", t, sflops, sfloor, tvs,
                   {{"backward_error", worst_solve(b, pool, rhs)}});
        }
        cudaFree(dws);
        cudaFree(dinfo);
    }
    cusolverDnDestroy(solver);
    cublasDestroy(blas);

    fmt::print("\n{:<6} {:>5} {:>6} {:>5} {:<17} {:>11} {:>8} {:>10} {:>9}\n", "op", "n", "count", "nrhs", "impl",
               "time_us", "TFLOP/s", "floor_us", "vendor/x");
    for (const auto& r : rows)
        fmt::print("{:<6} {:>5} {:>6} {:>5} {:<17} {:>11.1f} {:>8.3f} {:>10.1f} {:>9}\n", r.op, r.n, r.count, r.nrhs,
                   r.impl, r.time * 1e6, r.tflops, r.floor * 1e6, r.vs > 0 ? fmt::format("{:.2f}", r.vs) : "");
    return 0;
}
