// bench_batched_getrf: starfact's batched LU (batched/cuda/kernels.hpp: getrf, getrs) against
// cuBLAS getrfBatched / getrsBatched and a CPU baseline (LAPACKE getrf, one matrix per core,
// OpenBLAS single-threaded), in one process on the same FP64 data. Device times are medians of
// CUDA-event timings after a warm-up, the input restored (untimed) before each run. Flops are
// LAPACK's counts (LAWN 41); the memory floor reads and writes every matrix once at 3.0 TB/s
// (getrs: reads A, reads and writes B). starfact's factors are checked on three matrices.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "batched/cuda/kernels.hpp"
#include "bench/bench_common.hpp"
#include "common/blas.hpp"
#include "common/checks.hpp"
#include "common/matgen.hpp"
#include "common/scalar_traits.hpp"

namespace {
using namespace starfact;
namespace bc = starfact::batched::cuda;

constexpr double kBandwidth = 3.0e12;  // H100 device copy, bytes/s read + written (measured)

/// LAPACK's flop count of dgetrf on a square n x n matrix (LAWN 41, multiplications + additions).
double getrf_flops(double n) {
    const double mul = 0.5 * n * n * n - n * n * n / 6.0 + 0.5 * n * n - 0.5 * n * n + 2.0 * n / 3.0;
    const double add = 0.5 * n * n * n - n * n * n / 6.0 - 0.5 * n * n + n / 6.0;
    return mul + add;
}
/// dgetrs: two triangular solves with nrhs columns.
double getrs_flops(double n, double nrhs) { return nrhs * (2.0 * n * n - n); }

template <class E>
struct Device {
    E* p = nullptr;
    explicit Device(std::size_t n) { bench::check(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(E)), "cudaMalloc"); }
    ~Device() { cudaFree(p); }
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;
};

/// Worst ||P A - L U||_1 / (n ||A||_1 eps) over the first, middle and last matrix.
double sample_residual(int n, int count, const std::vector<double>& A, const double* dA, const int* dipiv) {
    double worst = 0.0;
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    for (int b : {0, count / 2, count - 1}) {
        std::vector<double> F(nn), L(nn, 0.0), U(nn, 0.0), PA(A.begin() + static_cast<std::ptrdiff_t>(b * nn),
                                                            A.begin() + static_cast<std::ptrdiff_t>((b + 1) * nn));
        std::vector<int> ipiv(static_cast<std::size_t>(n));
        bench::check(cudaMemcpy(F.data(), dA + b * nn, nn * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy");
        bench::check(cudaMemcpy(ipiv.data(), dipiv + static_cast<std::size_t>(b) * n, n * sizeof(int),
                                cudaMemcpyDeviceToHost),
                     "cudaMemcpy");
        for (int i = 0; i < n; ++i) {
            if (ipiv[i] < i + 1 || ipiv[i] > n) return INFINITY;
            for (int j = 0; j < n; ++j) std::swap(PA[i + static_cast<std::size_t>(j) * n], PA[ipiv[i] - 1 + static_cast<std::size_t>(j) * n]);
        }
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i) {
                const std::size_t e = i + static_cast<std::size_t>(j) * n;
                if (i > j) L[e] = F[e];
                if (i == j) L[e] = 1.0;
                if (i <= j) U[e] = F[e];
            }
        const double anorm = blas::lange('1', n, n, PA.data(), n);
        blas::gemm('N', 'N', n, n, n, -1.0, L.data(), n, U.data(), n, 1.0, PA.data(), n);
        worst = std::max(worst, blas::lange('1', n, n, PA.data(), n) / (n * anorm * ScalarTraits<double>::eps));
    }
    return worst;
}

/// The CPU baseline: every core factors whole matrices with LAPACKE (OpenBLAS on one thread).
double time_cpu(int n, int count, const std::vector<double>& A, int reps) {
    openblas_set_num_threads(1);
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<double> work(A.size());
    std::vector<int> ipiv(static_cast<std::size_t>(count) * n);
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        std::copy(A.begin(), A.end(), work.begin());
        std::atomic<int> next{0};
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> pool;
        for (unsigned k = 0; k < threads; ++k)
            pool.emplace_back([&] {
                for (int b = next++; b < count; b = next++)
                    LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, n, n, work.data() + b * nn, n,
                                        ipiv.data() + static_cast<std::size_t>(b) * n);
            });
        for (auto& th : pool) th.join();
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return bench::median(t);
}

struct Row {
    int n = 0, count = 0;
    std::map<std::string, double> t;  // "op:impl" -> seconds
    double floor = 0, flops = 0;
};

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"starfact batched LU vs cuBLAS getrfBatched / getrsBatched and the CPU (FP64)"};
    std::vector<int> sizes{8, 16, 32, 64, 128, 256, 512};
    std::vector<int> counts;
    std::vector<int> nrhs_list{1, 16};
    int reps = 5, cpu_reps = 1;
    std::string out_path;
    bool no_cpu = false;
    app.add_option("--sizes", sizes, "Matrix orders n")->delimiter(',');
    app.add_option("--counts", counts, "Batch count (one value for all sizes, or one per size); default fills the GPU")
        ->delimiter(',');
    app.add_option("--nrhs", nrhs_list, "Right-hand sides of the timed solves")->delimiter(',');
    app.add_option("--reps", reps, "Timed device runs per point (median)")->check(CLI::PositiveNumber);
    app.add_option("--cpu-reps", cpu_reps, "Timed CPU runs per point (median)")->check(CLI::PositiveNumber);
    app.add_flag("--no-cpu", no_cpu, "Skip the CPU baseline");
    app.add_option("--json", out_path, "Also write JSON lines to this file");
    CLI11_PARSE(app, argc, argv);
    for (int n : sizes)
        if (n <= 0) {
            fmt::print(stderr, "bench_batched_getrf: --sizes: {} is not positive\n", n);
            return 2;
        }
    for (int r : nrhs_list)
        if (r <= 0) {
            fmt::print(stderr, "bench_batched_getrf: --nrhs: {} is not positive\n", r);
            return 2;
        }
    if (!counts.empty() && counts.size() != 1 && counts.size() != sizes.size()) {
        fmt::print(stderr, "bench_batched_getrf: --counts: give one value or one per size ({} sizes)\n", sizes.size());
        return 2;
    }
    for (int c : counts)
        if (c <= 0) {
            fmt::print(stderr, "bench_batched_getrf: --counts: {} is not positive\n", c);
            return 2;
        }

    bench::Emitter emit(out_path);
    cudaDeviceProp prop{};
    bench::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    emit({{"record", "config"},
          {"bench", "batched_getrf"},
          {"device", prop.name},
          {"sms", prop.multiProcessorCount},
          {"cpu_threads", std::thread::hardware_concurrency()},
          {"reps", reps}});
    cublasHandle_t blas;
    bench::check(cublasCreate(&blas), "cublasCreate");
    bench::check(cublasSetStream(blas, nullptr), "cublasSetStream");
    std::vector<Row> rows;

    for (std::size_t si = 0; si < sizes.size(); ++si) {
        const int n = sizes[si];
        const int count = counts.empty() ? (n <= 64 ? 10000 : n <= 128 ? 5000 : 2000) : counts[counts.size() == 1 ? 0 : si];
        const std::size_t nn = static_cast<std::size_t>(n) * n, total = nn * count;
        Row row;
        row.n = n;
        row.count = count;
        row.flops = getrf_flops(n) * count;
        row.floor = 2.0 * total * sizeof(double) / kBandwidth;
        std::vector<double> A(total);
        for (int b = 0; b < count; ++b) matgen::uniform(n, n, 1000003ull * n + b, A.data() + b * nn, n);

        Device<double> dA0(total), dA(total);
        Device<double*> pA(count);
        Device<int> dipiv(static_cast<std::size_t>(count) * n), dinfo(count);
        bench::check(cudaMemcpy(dA0.p, A.data(), total * sizeof(double), cudaMemcpyHostToDevice), "cudaMemcpy");
        bc::strided_pointers(pA.p, dA.p, static_cast<long long>(nn), count, nullptr);
        const std::size_t ws = bc::getrf_workspace<double>(n, count);
        Device<unsigned char> work(ws);
        const bc::Launch launch{nullptr, blas, work.p, ws};
        auto restore_a = [&] {
            bench::check(cudaMemcpy(dA.p, dA0.p, total * sizeof(double), cudaMemcpyDeviceToDevice), "restore A");
        };
        auto point = [&](const std::string& op, const std::string& impl, double secs, double flops, double floor,
                         nlohmann::ordered_json extra) {
            row.t[op + ":" + impl] = secs;
            nlohmann::ordered_json j{{"record", "point"}, {"op", op},           {"impl", impl},
                                     {"n", n},            {"count", count},     {"time_s", secs},
                                     {"tflops", flops / secs / 1e12},           {"floor_s", floor}};
            const auto sf = row.t.find(op + ":starfact");
            if (sf != row.t.end() && impl != "starfact") j["vs_starfact"] = secs / sf->second;
            for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
            emit(j);
        };

        const double t_sf = bench::time_on_device(reps, restore_a, [&] {
            bc::getrf<double>(launch, n, pA.p, n, dipiv.p, dinfo.p, count);
        });
        bench::check(cudaDeviceSynchronize(), "starfact getrf");
        point("getrf", "starfact", t_sf, row.flops, row.floor,
              {{"residual_max_sampled", sample_residual(n, count, A, dA.p, dipiv.p)}, {"workspace_bytes", ws}});

        const double t_cb = bench::time_on_device(reps, restore_a, [&] {
            bench::check(cublasDgetrfBatched(blas, n, pA.p, n, dipiv.p, dinfo.p, count), "cublasDgetrfBatched");
        });
        bench::check(cudaDeviceSynchronize(), "cublasDgetrfBatched");
        point("getrf", "cublas_getrfBatched", t_cb, row.flops, row.floor,
              {{"residual_max_sampled", sample_residual(n, count, A, dA.p, dipiv.p)}});

        if (!no_cpu)
            point("getrf", "cpu_lapacke", time_cpu(n, count, A, cpu_reps), row.flops, row.floor,
                  {{"threads", std::thread::hardware_concurrency()}});

        // Solves from starfact's factors (the last getrf above was cuBLAS's: factor again).
        restore_a();
        bc::getrf<double>(launch, n, pA.p, n, dipiv.p, dinfo.p, count);
        bench::check(cudaDeviceSynchronize(), "starfact getrf");
        for (int nrhs : nrhs_list) {
            const std::size_t nb_total = static_cast<std::size_t>(n) * nrhs * count;
            std::vector<double> B(nb_total);
            matgen::uniform(n, nrhs * count, 77ull + n, B.data(), n);
            Device<double> dB0(nb_total), dB(nb_total);
            Device<double*> pB(count);
            bench::check(cudaMemcpy(dB0.p, B.data(), nb_total * sizeof(double), cudaMemcpyHostToDevice), "cudaMemcpy");
            bc::strided_pointers(pB.p, dB.p, static_cast<long long>(n) * nrhs, count, nullptr);
            auto restore_b = [&] {
                bench::check(cudaMemcpy(dB.p, dB0.p, nb_total * sizeof(double), cudaMemcpyDeviceToDevice), "restore B");
            };
            const std::string op = "getrs_nrhs" + std::to_string(nrhs);
            const double flops = getrs_flops(n, nrhs) * count;
            const double floor = (static_cast<double>(total) + 2.0 * nb_total) * sizeof(double) / kBandwidth;
            const double ts = bench::time_on_device(reps, restore_b, [&] {
                bc::getrs<double>(launch, n, nrhs, pA.p, n, dipiv.p, pB.p, n, count);
            });
            bench::check(cudaDeviceSynchronize(), "starfact getrs");
            std::vector<double> x(static_cast<std::size_t>(n) * nrhs);
            bench::check(cudaMemcpy(x.data(), dB.p, x.size() * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy");
            const double berr = checks::solve_residual<double>(n, nrhs, A.data(), n, x.data(), n, B.data(), n);
            point(op, "starfact", ts, flops, floor, {{"nrhs", nrhs}, {"backward_error_first", berr}});
            int hinfo = 0;
            const double tc = bench::time_on_device(reps, restore_b, [&] {
                bench::check(cublasDgetrsBatched(blas, CUBLAS_OP_N, n, nrhs, pA.p, n, dipiv.p, pB.p, n, &hinfo, count),
                             "cublasDgetrsBatched");
            });
            point(op, "cublas_getrsBatched", tc, flops, floor, {{"nrhs", nrhs}, {"info", hinfo}});
        }
        rows.push_back(row);
    }

    fmt::print("\nbatched LU, FP64, {} ({} SMs); times in ms (median), ratio = other / starfact\n", prop.name,
               prop.multiProcessorCount);
    fmt::print("{:>5} {:>6} {:>8} {:>9} {:>6} | {:>9} {:>6} | {:>9} {:>6}", "n", "count", "floor", "starfact", "TF/s",
               "cuBLAS", "ratio", "CPU", "ratio");
    for (int r : nrhs_list) fmt::print(" | {:>8} {:>8} {:>6}", fmt::format("rs{} sf", r), "cuBLAS", "ratio");
    fmt::print("\n");
    for (const Row& r : rows) {
        auto ms = [&](const std::string& k) {
            return r.t.count(k) ? fmt::format("{:.3f}", 1e3 * r.t.at(k)) : std::string("-");
        };
        auto ratio = [&](const std::string& k, const std::string& base) {
            return r.t.count(k) && r.t.count(base) ? fmt::format("{:.2f}", r.t.at(k) / r.t.at(base)) : std::string("-");
        };
        fmt::print("{:>5} {:>6} {:>8.3f} {:>9} {:>6.2f} | {:>9} {:>6} | {:>9} {:>6}", r.n, r.count, 1e3 * r.floor,
                   ms("getrf:starfact"), r.flops / r.t.at("getrf:starfact") / 1e12, ms("getrf:cublas_getrfBatched"),
                   ratio("getrf:cublas_getrfBatched", "getrf:starfact"), ms("getrf:cpu_lapacke"),
                   ratio("getrf:cpu_lapacke", "getrf:starfact"));
        for (int rh : nrhs_list) {
            const std::string op = "getrs_nrhs" + std::to_string(rh);
            fmt::print(" | {:>8} {:>8} {:>6}", ms(op + ":starfact"), ms(op + ":cublas_getrsBatched"),
                       ratio(op + ":cublas_getrsBatched", op + ":starfact"));
        }
        fmt::print("\n");
    }
    cublasDestroy(blas);
    return 0;
}
