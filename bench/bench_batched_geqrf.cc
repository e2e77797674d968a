// bench_batched_geqrf: starfact's batched Householder QR (batched/cuda/kernels.hpp) against
// cuBLAS geqrfBatched, cuSOLVER geqrf looped over the matrices on one stream, and a CPU
// baseline (LAPACKE geqrf, one matrix per core, OpenBLAS single-threaded), on the same FP64
// data; and least squares (geqrf + geqrs, one right-hand side) against cuBLAS gelsBatched.
// Device times are medians of CUDA-event timings after a warm-up, the input restored (untimed)
// before each run. Flops are LAPACK's counts (LAWN 41); the memory floor reads and writes every
// matrix once at 3.0 TB/s. Each starfact result is checked on a few matrices with LAPACK's orgqr.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

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

/// LAPACK's flop count of dgeqrf (LAWN 41: multiplications plus additions).
double geqrf_flops(double m, double n) {
    const double mul =
        m >= n ? n * (n * (0.5 - n / 3.0 + m) + m + 23.0 / 6.0) : m * (m * (-0.5 - m / 3.0 + n) + 2.0 * n + 23.0 / 6.0);
    const double add =
        m >= n ? n * (n * (0.5 - n / 3.0 + m) + 5.0 / 6.0) : m * (m * (-0.5 - m / 3.0 + n) + n + 5.0 / 6.0);
    return mul + add;
}

/// Flops of applying Q^T (ormqr) and R^{-1} (trsm) to nrhs columns, LAWN 41.
double geqrs_flops(double m, double n, double nrhs) {
    const double ormqr = nrhs * (4.0 * m * n - 2.0 * n * n + 3.0 * n);
    const double trsm = nrhs * n * n;
    return ormqr + trsm;
}

template <class E>
struct Device {
    E* p = nullptr;
    explicit Device(std::size_t n) {
        bench::check(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(E)), "cudaMalloc");
    }
    ~Device() { cudaFree(p); }
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;
};

/// max over a few matrices (first, middle, last) of the QR residual ratios
/// ||A - QR||_1 / (m ||A||_1 eps) and ||I - Q^T Q||_1 / (m eps), Q by LAPACK's orgqr.
double sample_residual(int m, int n, int count, const std::vector<double>& A, const double* dA, const double* dtau) {
    double worst = 0.0;
    const std::size_t mn = static_cast<std::size_t>(m) * n;
    for (int b : {0, count / 2, count - 1}) {
        std::vector<double> F(mn), tau(static_cast<std::size_t>(n)), R(static_cast<std::size_t>(n) * n, 0.0);
        bench::check(cudaMemcpy(F.data(), dA + b * mn, mn * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy");
        bench::check(
            cudaMemcpy(tau.data(), dtau + static_cast<std::size_t>(b) * n, n * sizeof(double), cudaMemcpyDeviceToHost),
            "cudaMemcpy");
        for (int j = 0; j < n; ++j)
            for (int i = 0; i <= j; ++i)
                R[i + static_cast<std::size_t>(j) * n] = F[i + static_cast<std::size_t>(j) * m];
        LAPACKE_dorgqr(LAPACK_COL_MAJOR, m, n, n, F.data(), m, tau.data());
        std::vector<double> D(A.begin() + static_cast<std::ptrdiff_t>(b * mn),
                              A.begin() + static_cast<std::ptrdiff_t>((b + 1) * mn));
        blas::gemm('N', 'N', m, n, n, -1.0, F.data(), m, R.data(), n, 1.0, D.data(), m);
        std::vector<double> I(static_cast<std::size_t>(n) * n, 0.0);
        for (int j = 0; j < n; ++j) I[j + static_cast<std::size_t>(j) * n] = 1.0;
        blas::gemm('T', 'N', n, n, m, -1.0, F.data(), m, F.data(), m, 1.0, I.data(), n);
        const double eps = ScalarTraits<double>::eps;
        const double anorm = blas::lange('1', m, n, A.data() + b * mn, m);
        worst = std::max({worst, blas::lange('1', m, n, D.data(), m) / (m * anorm * eps),
                          blas::lange('1', n, n, I.data(), n) / (m * eps)});
    }
    return worst;
}

/// The CPU baseline: every core factors whole matrices with LAPACKE (OpenBLAS on one thread).
double time_cpu(int m, int n, int count, const std::vector<double>& A, int reps) {
    openblas_set_num_threads(1);
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<double> work(A.size()), tau(static_cast<std::size_t>(count) * n);
    double lwork_q = 0;
    LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, m, n, work.data(), m, tau.data(), &lwork_q, -1);
    const std::size_t lwork = static_cast<std::size_t>(std::max(1.0, lwork_q));
    const std::size_t mn = static_cast<std::size_t>(m) * n;
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        std::copy(A.begin(), A.end(), work.begin());
        std::atomic<int> next{0};
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> pool;
        for (unsigned k = 0; k < threads; ++k)
            pool.emplace_back([&] {
                std::vector<double> w(lwork);
                for (int b = next++; b < count; b = next++)
                    LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, m, n, work.data() + b * mn, m,
                                        tau.data() + static_cast<std::size_t>(b) * n, w.data(),
                                        static_cast<int>(lwork));
            });
        for (auto& th : pool) th.join();
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return bench::median(t);
}

struct Row {
    std::map<std::string, double> t;  // implementation -> seconds
    double floor = 0, flops = 0, gels_flops = 0;
};

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"starfact batched QR vs cuBLAS geqrfBatched / gelsBatched, looped cuSOLVER geqrf, CPU (FP64)"};
    std::vector<int> sizes{8, 16, 32, 64, 128, 256, 512};
    std::vector<int> counts;
    int reps = 5, cpu_reps = 1, loop_max = 200;
    std::string out_path;
    bool no_cpu = false, no_gels = false, no_vendor = false;
    app.add_option("--sizes", sizes, "Matrix orders n (square n x n)")->delimiter(',');
    app.add_option("--counts", counts,
                   "Batch count per size (one value for all, or one per size); default fills the GPU")
        ->delimiter(',');
    app.add_option("--reps", reps, "Timed device runs per point (median)")->check(CLI::PositiveNumber);
    app.add_option("--cpu-reps", cpu_reps, "Timed CPU runs per point (median)")->check(CLI::PositiveNumber);
    app.add_option("--loop-max", loop_max,
                   "cuSOLVER geqrf is looped over at most this many matrices; its time is scaled to the count")
        ->check(CLI::PositiveNumber);
    app.add_flag("--no-cpu", no_cpu, "Skip the CPU baseline");
    app.add_flag("--no-gels", no_gels, "Skip the least-squares comparison");
    app.add_flag("--no-vendor", no_vendor, "Skip cuBLAS and cuSOLVER (starfact alone, e.g. under a profiler)");
    app.add_option("--json", out_path, "Also write JSON lines to this file");
    CLI11_PARSE(app, argc, argv);
    for (int n : sizes)
        if (n <= 0) {
            fmt::print(stderr, "bench_batched_geqrf: --sizes: {} is not positive\n", n);
            return 2;
        }
    if (!counts.empty() && counts.size() != 1 && counts.size() != sizes.size()) {
        fmt::print(stderr, "bench_batched_geqrf: --counts: give one value or one per size ({} sizes)\n", sizes.size());
        return 2;
    }
    for (int c : counts)
        if (c <= 0) {
            fmt::print(stderr, "bench_batched_geqrf: --counts: {} is not positive\n", c);
            return 2;
        }

    bench::Emitter emit(out_path);
    cudaDeviceProp prop{};
    bench::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    emit({{"record", "config"},
          {"bench", "batched_geqrf"},
          {"device", prop.name},
          {"sms", prop.multiProcessorCount},
          {"cpu_threads", std::thread::hardware_concurrency()},
          {"reps", reps},
          {"loop_max", loop_max}});
    cublasHandle_t blas;
    bench::check(cublasCreate(&blas), "cublasCreate");
    cusolverDnHandle_t solver;
    bench::check(cusolverDnCreate(&solver), "cusolverDnCreate");
    std::vector<std::pair<int, Row>> rows;

    for (std::size_t si = 0; si < sizes.size(); ++si) {
        const int n = sizes[si], m = n;
        const int count = counts.empty() ? (n <= 64    ? 10000
                                            : n <= 128 ? 5000
                                            : n <= 256 ? 1000
                                                       : 2000)
                                         : counts[counts.size() == 1 ? 0 : si];
        const std::size_t mn = static_cast<std::size_t>(m) * n, total = mn * count;
        Row row;
        row.flops = geqrf_flops(m, n) * count;
        row.gels_flops = (geqrf_flops(m, n) + geqrs_flops(m, n, 1)) * count;
        row.floor = 2.0 * total * sizeof(double) / kBandwidth;
        std::vector<double> A(total), B(static_cast<std::size_t>(m) * count);
        for (int b = 0; b < count; ++b) matgen::uniform(m, n, 1000003ull * n + b, A.data() + b * mn, m);
        matgen::uniform(m, count, 77ull + n, B.data(), m);

        Device<double> dA0(total), dA(total), dtau(static_cast<std::size_t>(n) * count), dB0(B.size()), dB(B.size());
        Device<double*> pA(count), ptau(count), pB(count);
        Device<int> dinfo(count);
        bench::check(cudaMemcpy(dA0.p, A.data(), total * sizeof(double), cudaMemcpyHostToDevice), "cudaMemcpy");
        bench::check(cudaMemcpy(dB0.p, B.data(), B.size() * sizeof(double), cudaMemcpyHostToDevice), "cudaMemcpy");
        bc::strided_pointers(pA.p, dA.p, static_cast<long long>(mn), count, nullptr);
        bc::strided_pointers(ptau.p, dtau.p, n, count, nullptr);
        bc::strided_pointers(pB.p, dB.p, m, count, nullptr);
        const std::size_t ws =
            std::max(bc::geqrf_workspace<double>(m, n, count), bc::geqrs_workspace<double>(m, n, 1, count));
        Device<unsigned char> work(ws);
        const bc::Launch launch{nullptr, blas, work.p, ws};
        bench::check(cublasSetStream(blas, nullptr), "cublasSetStream");
        auto restore_a = [&] {
            bench::check(cudaMemcpy(dA.p, dA0.p, total * sizeof(double), cudaMemcpyDeviceToDevice), "restore A");
        };
        auto restore_ab = [&] {
            restore_a();
            bench::check(cudaMemcpy(dB.p, dB0.p, B.size() * sizeof(double), cudaMemcpyDeviceToDevice), "restore B");
        };
        auto point = [&](const std::string& op, const std::string& impl, double secs, double flops,
                         nlohmann::ordered_json extra) {
            row.t[op + ":" + impl] = secs;
            nlohmann::ordered_json j{{"record", "point"},
                                     {"op", op},
                                     {"impl", impl},
                                     {"m", m},
                                     {"n", n},
                                     {"count", count},
                                     {"time_s", secs},
                                     {"tflops", flops / secs / 1e12},
                                     {"floor_s", row.floor}};
            const auto sf = row.t.find(op + ":starfact");
            if (sf != row.t.end() && impl != "starfact") j["vs_starfact"] = secs / sf->second;
            for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
            emit(j);
        };

        // starfact geqrf
        const double t_sf =
            bench::time_on_device(reps, restore_a, [&] { bc::geqrf<double>(launch, m, n, pA.p, m, dtau.p, count); });
        bench::check(cudaDeviceSynchronize(), "starfact geqrf");
        point("geqrf", "starfact", t_sf, row.flops,
              {{"residual_max_sampled", sample_residual(m, n, count, A, dA.p, dtau.p)}, {"workspace_bytes", ws}});

        // cuBLAS geqrfBatched
        int hinfo = 0;
        if (!no_vendor) {
            const double t_cb = bench::time_on_device(reps, restore_a, [&] {
                bench::check(cublasDgeqrfBatched(blas, m, n, pA.p, m, ptau.p, &hinfo, count), "cublasDgeqrfBatched");
            });
            point("geqrf", "cublas_geqrfBatched", t_cb, row.flops, {{"info", hinfo}});

            // cuSOLVER geqrf looped over (at most loop_max) matrices on one stream
            {
                const int looped = std::min(count, loop_max);
                int lwork = 0;
                bench::check(cusolverDnDgeqrf_bufferSize(solver, m, n, dA.p, m, &lwork), "cusolverDnDgeqrf_bufferSize");
                Device<double> swork(static_cast<std::size_t>(std::max(lwork, 1)));
                const double t = bench::time_on_device(reps, restore_a, [&] {
                    for (int b = 0; b < looped; ++b)
                        bench::check(
                            cusolverDnDgeqrf(solver, m, n, dA.p + b * mn, m, dtau.p + static_cast<std::size_t>(b) * n,
                                             swork.p, lwork, dinfo.p),
                            "cusolverDnDgeqrf");
                });
                point("geqrf", "cusolver_geqrf_loop", t * count / looped, row.flops,
                      {{"looped", looped}, {"scaled_from_s", t}});
            }
        }

        if (!no_cpu)
            point("geqrf", "cpu_lapacke", time_cpu(m, n, count, A, cpu_reps), row.flops,
                  {{"threads", std::thread::hardware_concurrency()}});

        if (!no_gels) {
            const double t_gs = bench::time_on_device(reps, restore_ab, [&] {
                bc::geqrf<double>(launch, m, n, pA.p, m, dtau.p, count);
                bc::geqrs<double>(launch, m, n, 1, pA.p, m, dtau.p, pB.p, m, dinfo.p, count);
            });
            std::vector<int> info(static_cast<std::size_t>(count));
            bench::check(cudaMemcpy(info.data(), dinfo.p, count * sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
            const int failed = static_cast<int>(std::count_if(info.begin(), info.end(), [](int i) { return i != 0; }));
            // Square systems: the solve's backward error on the first matrix.
            std::vector<double> x(static_cast<std::size_t>(m));
            bench::check(cudaMemcpy(x.data(), dB.p, m * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy");
            const double berr = checks::solve_residual<double>(n, 1, A.data(), m, x.data(), m, B.data(), m);
            point("gels", "starfact", t_gs, row.gels_flops, {{"nonzero_info", failed}, {"backward_error_first", berr}});
            int ginfo = 0;
            if (!no_vendor) {
                const double t_cg = bench::time_on_device(reps, restore_ab, [&] {
                    bench::check(
                        cublasDgelsBatched(blas, CUBLAS_OP_N, m, n, 1, pA.p, m, pB.p, m, &ginfo, dinfo.p, count),
                        "cublasDgelsBatched");
                });
                point("gels", "cublas_gelsBatched", t_cg, row.gels_flops, {{"info", ginfo}});
            }
        }
        rows.emplace_back(n, row);
    }

    fmt::print("\nbatched QR, FP64, {} ({} SMs); times in ms (median), ratio = other / starfact\n", prop.name,
               prop.multiProcessorCount);
    fmt::print("{:>5} {:>6} {:>8} {:>9} {:>7} | {:>9} {:>7} | {:>10} {:>7} | {:>9} {:>7} | {:>8} {:>9} {:>7}\n", "n",
               "count", "floor", "starfact", "TF/s", "cuBLAS", "ratio", "cuSOLVER*", "ratio", "CPU", "ratio", "gels sf",
               "cuBLAS", "ratio");
    for (auto& [n, r] : rows) {
        auto ms = [&](const std::string& k) {
            return r.t.count(k) ? fmt::format("{:.3f}", 1e3 * r.t.at(k)) : std::string("-");
        };
        auto ratio = [&](const std::string& k, const std::string& base) {
            return r.t.count(k) && r.t.count(base) ? fmt::format("{:.1f}", r.t.at(k) / r.t.at(base)) : std::string("-");
        };
        const double tsf = r.t.at("geqrf:starfact");
        fmt::print(
            "{:>5} {:>6} {:>8.3f} {:>9} {:>7.2f} | {:>9} {:>7} | {:>10} {:>7} | {:>9} {:>7} | {:>8} {:>9} {:>7}\n", n,
            static_cast<long long>(std::llround(r.flops / geqrf_flops(n, n))), 1e3 * r.floor, ms("geqrf:starfact"),
            r.flops / tsf / 1e12, ms("geqrf:cublas_geqrfBatched"), ratio("geqrf:cublas_geqrfBatched", "geqrf:starfact"),
            ms("geqrf:cusolver_geqrf_loop"), ratio("geqrf:cusolver_geqrf_loop", "geqrf:starfact"),
            ms("geqrf:cpu_lapacke"), ratio("geqrf:cpu_lapacke", "geqrf:starfact"), ms("gels:starfact"),
            ms("gels:cublas_gelsBatched"), ratio("gels:cublas_gelsBatched", "gels:starfact"));
    }
    fmt::print("* cuSOLVER geqrf looped over at most {} matrices, time scaled to the count\n", loop_max);
    cusolverDnDestroy(solver);
    cublasDestroy(blas);
    return 0;
}
