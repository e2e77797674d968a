// bench_batched_vpotrf: variable-size batched Cholesky (issue 6) on the same FP64 matrices, in
// one process: our vpotrf with the SSDE and DSSE schedules, every matrix padded to NMAX (identity
// below and right of it) and factored by the fixed-size batched::cuda::potrf, cuSOLVER potrf
// looped over the matrices on one stream, and the CPU baseline (LAPACKE, one matrix per core,
// single-threaded OpenBLAS: the host path of batched/vbatched.hpp). Orders: uniform in [1, NMAX]
// or the paper's skewed distribution (1% NMAX, the rest in [1, NMAX/10]). Rates count the useful
// flops, the sum of n^3/3; "fixed_equal_flops" is the fixed-size potrf on as many NMAX matrices
// as carry the same flops, the yardstick of the 0.8x goal (the summary prints its time
// over DSSE's, "equal flops / dsse"). GPU times: CUDA events,
// warm-up, median of --reps, the input restored (untimed) before each run.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "batched/cuda/kernels.hpp"
#include "batched/cuda/vbatched_kernels.hpp"
#include "batched/vbatched.hpp"
#include "bench/bench_common.hpp"
#include "bench/bench_vbatched_common.hpp"
#include "common/blas.hpp"
#include "common/checks.hpp"
#include "common/matgen.hpp"
#include "common/parallel.hpp"

namespace {
using namespace starfact;
namespace bc = starfact::batched::cuda;

constexpr int kSources = 16;  // distinct SPD matrices of order NMAX; matrix b is a leading block of one

using bench::vbatched::device_alloc;
using bench::vbatched::draw_sizes;
using bench::vbatched::nonzero;

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"variable-size batched Cholesky (FP64): SSDE, DSSE, padded fixed-size, looped cuSOLVER, CPU"};
    std::vector<int> nmaxes{32, 64, 128, 256, 512};
    std::vector<std::string> dists{"uniform", "skewed"};
    int count = 5000, reps = 5;
    bool cpu = true, loop = true, upper = false;
    std::string out_path;
    app.add_option("--nmax", nmaxes, "Largest orders")->check(CLI::PositiveNumber);
    app.add_option("--dist", dists, "Distributions: uniform, skewed")->check(CLI::IsMember({"uniform", "skewed"}));
    app.add_option("--count", count, "Matrices per batch")->check(CLI::PositiveNumber);
    app.add_option("--reps", reps, "Timed repetitions (median reported)")->check(CLI::PositiveNumber);
    app.add_option("--cpu", cpu, "Run the CPU baseline");
    app.add_option("--cusolver-loop", loop, "Run cuSOLVER potrf looped over the matrices");
    app.add_option("--upper", upper, "Also time our upper factorization (DSSE)");
    app.add_option("--json", out_path, "Also write the JSON lines to this file");
    CLI11_PARSE(app, argc, argv);

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

    for (const auto& dist : dists)
        for (int nmax : nmaxes) {
            const auto n = draw_sizes(dist, nmax, count, 1000 + nmax);
            double flops = 0, n3 = 0;
            std::vector<std::size_t> off(count + 1, 0);
            std::vector<int> ld(count);
            for (int b = 0; b < count; ++b) {
                ld[b] = std::max(1, n[b]);
                off[b + 1] = off[b] + static_cast<std::size_t>(ld[b]) * n[b];
                flops += double(n[b]) * n[b] * n[b] / 3.0;
                n3 += double(n[b]) * n[b] * n[b];
            }
            const std::size_t total = off[count];
            // Sources: SPD of order nmax, strictly diagonally dominant (any leading block is SPD).
            std::vector<std::vector<double>> src(kSources, std::vector<double>(std::size_t(nmax) * nmax));
            for (int s = 0; s < kSources; ++s) {
                matgen::spd(nmax, 77 + 13 * s + nmax, src[s].data(), nmax);
                for (int i = 0; i < nmax; ++i) src[s][i + std::size_t(i) * nmax] += nmax;
            }
            std::vector<double> host(total);
            parallel_for(count, [&](int b) {
                const auto& S = src[b % kSources];
                for (int j = 0; j < n[b]; ++j)
                    std::copy(S.begin() + std::size_t(j) * nmax, S.begin() + std::size_t(j) * nmax + n[b],
                              host.begin() + off[b] + std::size_t(j) * ld[b]);
            });

            // Device: packed original and work copy, pointer arrays, sizes.
            double* d_orig = device_alloc<double>(total);
            double* d_work = device_alloc<double>(total);
            bench::check(cudaMemcpy(d_orig, host.data(), sizeof(double) * total, cudaMemcpyHostToDevice), "cudaMemcpy");
            std::vector<double*> p(count);
            for (int b = 0; b < count; ++b) p[b] = d_work + off[b];
            double** d_ptrs = device_alloc<double*>(count);
            int *d_n = device_alloc<int>(count), *d_ld = device_alloc<int>(count), *d_info = device_alloc<int>(count);
            bench::check(cudaMemcpy(d_ptrs, p.data(), sizeof(double*) * count, cudaMemcpyHostToDevice), "cudaMemcpy");
            bench::check(cudaMemcpy(d_n, n.data(), sizeof(int) * count, cudaMemcpyHostToDevice), "cudaMemcpy");
            bench::check(cudaMemcpy(d_ld, ld.data(), sizeof(int) * count, cudaMemcpyHostToDevice), "cudaMemcpy");
            auto restore = [&] {
                bench::check(cudaMemcpyAsync(d_work, d_orig, sizeof(double) * total, cudaMemcpyDeviceToDevice, nullptr),
                             "cudaMemcpyAsync");
            };
            int big = 0;  // a largest matrix, for the residual check
            for (int b = 0; b < count; ++b)
                if (n[b] > n[big]) big = b;
            auto residual = [&](char uplo) {
                std::vector<double> f(off[big + 1] - off[big]);
                bench::check(cudaMemcpy(f.data(), d_work + off[big], sizeof(double) * f.size(), cudaMemcpyDeviceToHost),
                             "cudaMemcpy");
                return checks::potrf_residual<double>(uplo, n[big], host.data() + off[big], ld[big], f.data(), ld[big]);
            };

            struct Point {
                std::string impl;
                double t;
            };
            std::vector<Point> pts;
            auto record = [&](const std::string& impl, double t, double useful, nlohmann::ordered_json extra) {
                nlohmann::ordered_json j{
                    {"record", "point"}, {"op", "vpotrf"}, {"nmax", nmax}, {"dist", dist},
                    {"count", count},    {"impl", impl},   {"seconds", t}, {"gflops", useful / t / 1e9}};
                for (auto& [k, v] : extra.items()) j[k] = v;
                emit(j);
                pts.push_back({impl, t});
            };

            bc::Launch launch{nullptr, blas, nullptr, 0};
            for (auto s : {bc::Schedule::ssde, bc::Schedule::dsse}) {
                const double t = bench::time_on_device(reps, restore, [&] {
                    bc::vpotrf<double>(launch, bc::Uplo::lower, s, nmax, d_n, d_ptrs, d_ld, d_info, count);
                });
                const int fail = nonzero(bench::vbatched::download(d_info, count));
                record(s == bc::Schedule::ssde ? "starfact_ssde" : "starfact_dsse", t, flops,
                       {{"failed", fail}, {"residual_largest", residual('L')}});
            }
            if (upper) {  // the same matrices read as upper storage (symmetric sources)
                const double t = bench::time_on_device(reps, restore, [&] {
                    bc::vpotrf<double>(launch, bc::Uplo::upper, bc::Schedule::dsse, nmax, d_n, d_ptrs, d_ld, d_info,
                                       count);
                });
                record("starfact_dsse_upper", t, flops,
                       {{"failed", nonzero(bench::vbatched::download(d_info, count))},
                        {"residual_largest", residual('U')}});
            }

            // Padded to nmax (identity outside each matrix), fixed-size potrf.
            {
                const std::size_t per = std::size_t(nmax) * nmax;
                double* d_pad_orig = device_alloc<double>(per * count);
                double* d_pad = device_alloc<double>(per * count);
                std::vector<double> eye(per, 0.0);
                for (int i = 0; i < nmax; ++i) eye[i + std::size_t(i) * nmax] = 1.0;
                bench::check(cudaMemcpy(d_pad_orig, eye.data(), sizeof(double) * per, cudaMemcpyHostToDevice),
                             "cudaMemcpy");
                for (int b = 1; b < count; ++b)
                    bench::check(cudaMemcpyAsync(d_pad_orig + per * b, d_pad_orig, sizeof(double) * per,
                                                 cudaMemcpyDeviceToDevice, nullptr),
                                 "cudaMemcpyAsync");
                for (int b = 0; b < count; ++b)
                    if (n[b] > 0)
                        bench::check(cudaMemcpy2DAsync(d_pad_orig + per * b, sizeof(double) * nmax, d_orig + off[b],
                                                       sizeof(double) * ld[b], sizeof(double) * n[b], n[b],
                                                       cudaMemcpyDeviceToDevice, nullptr),
                                     "cudaMemcpy2DAsync");
                double** d_pad_ptrs = device_alloc<double*>(count);
                bc::strided_pointers<double>(d_pad_ptrs, d_pad, static_cast<long long>(per), count, nullptr);
                const std::size_t ws = bc::potrf_workspace<double>(nmax, count);
                void* d_ws = ws > 0 ? device_alloc<char>(ws) : nullptr;
                bc::Launch fl{nullptr, blas, d_ws, ws};
                auto pad_restore = [&] {
                    bench::check(cudaMemcpyAsync(d_pad, d_pad_orig, sizeof(double) * per * count,
                                                 cudaMemcpyDeviceToDevice, nullptr),
                                 "cudaMemcpyAsync");
                };
                const double tp = bench::time_on_device(reps, pad_restore, [&] {
                    bc::potrf<double>(fl, bc::Uplo::lower, nmax, d_pad_ptrs, nmax, d_info, count);
                });
                record("padded_fixed", tp, flops, {{"failed", nonzero(bench::vbatched::download(d_info, count))}});
                // Fixed-size on as many nmax matrices as carry the same flops.
                const int ceq =
                    std::max(1, std::min(count, static_cast<int>(std::lround(n3 / (double(nmax) * nmax * nmax)))));
                const double te = bench::time_on_device(reps, pad_restore, [&] {
                    bc::potrf<double>(fl, bc::Uplo::lower, nmax, d_pad_ptrs, nmax, d_info, ceq);
                });
                const double eq_flops = ceq * double(nmax) * nmax * nmax / 3.0;
                record("fixed_equal_flops", te, eq_flops, {{"fixed_count", ceq}});
                // Fixed-size on the same count of matrices of order neq = round(cbrt(mean n^3)): the
                // same count and flops. Each is the leading neq x neq block of its padded matrix (SPD).
                const int neq = std::max(1, static_cast<int>(std::lround(std::cbrt(n3 / count))));
                {
                    const std::size_t pe = std::size_t(neq) * neq;
                    double* d_eq_orig = device_alloc<double>(pe * count);
                    double* d_eq = device_alloc<double>(pe * count);
                    for (int b = 0; b < count; ++b)
                        bench::check(cudaMemcpy2DAsync(d_eq_orig + pe * b, sizeof(double) * neq, d_pad_orig + per * b,
                                                       sizeof(double) * nmax, sizeof(double) * neq, neq,
                                                       cudaMemcpyDeviceToDevice, nullptr),
                                     "cudaMemcpy2DAsync");
                    double** d_eq_ptrs = device_alloc<double*>(count);
                    bc::strided_pointers<double>(d_eq_ptrs, d_eq, static_cast<long long>(pe), count, nullptr);
                    const std::size_t wse = bc::potrf_workspace<double>(neq, count);
                    void* d_wse = wse > 0 ? device_alloc<char>(wse) : nullptr;
                    bc::Launch el{nullptr, blas, d_wse, wse};
                    const double ts = bench::time_on_device(
                        reps,
                        [&] {
                            bench::check(cudaMemcpyAsync(d_eq, d_eq_orig, sizeof(double) * pe * count,
                                                         cudaMemcpyDeviceToDevice, nullptr),
                                         "cudaMemcpyAsync");
                        },
                        [&] { bc::potrf<double>(el, bc::Uplo::lower, neq, d_eq_ptrs, neq, d_info, count); });
                    record("fixed_same_count", ts, count * double(neq) * neq * neq / 3.0,
                           {{"order", neq}, {"failed", nonzero(bench::vbatched::download(d_info, count))}});
                    cudaFree(d_wse);
                    cudaFree(d_eq_ptrs);
                    cudaFree(d_eq);
                    cudaFree(d_eq_orig);
                }
                cudaFree(d_ws);
                cudaFree(d_pad_ptrs);
                cudaFree(d_pad);
                cudaFree(d_pad_orig);
            }

            if (loop) {  // cuSOLVER potrf per matrix, one stream
                int lwork = 0;
                bench::check(cusolverDnDpotrf_bufferSize(solver, CUBLAS_FILL_MODE_LOWER, nmax, d_work, nmax, &lwork),
                             "cusolverDnDpotrf_bufferSize");
                double* d_lw = device_alloc<double>(std::max(lwork, 1));
                const double tl = bench::time_on_device(std::max(1, reps / 2), restore, [&] {
                    for (int b = 0; b < count; ++b)
                        if (n[b] > 0)
                            bench::check(cusolverDnDpotrf(solver, CUBLAS_FILL_MODE_LOWER, n[b], p[b], ld[b], d_lw,
                                                          lwork, d_info + b),
                                         "cusolverDnDpotrf");
                });
                record("cusolver_loop", tl, flops, {{"failed", nonzero(bench::vbatched::download(d_info, count))}});
                cudaFree(d_lw);
            }

            if (cpu) {  // LAPACKE per matrix, one per core
                std::vector<double> work(total);
                std::vector<double*> hp(count);
                for (int b = 0; b < count; ++b) hp[b] = work.data() + off[b];
                std::vector<int> hinfo(count);
                std::vector<double> ts;
                for (int r = 0; r < std::max(1, reps / 2) + 1; ++r) {
                    parallel_for(count, [&](int b) {
                        std::copy(host.begin() + off[b], host.begin() + off[b + 1], work.begin() + off[b]);
                    });
                    const auto t0 = std::chrono::steady_clock::now();
                    batched::vpotrf<double>(batched::Uplo::lower, n.data(), hp.data(), ld.data(), hinfo.data(), count);
                    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                    if (r > 0) ts.push_back(s);
                }
                record("lapacke_per_core", bench::median(ts), flops, {{"failed", nonzero(hinfo)}});
            }

            // Summary: every time against DSSE's.
            double t_dsse = 0, t_equal = 0, t_same = 0, best_other = 0;
            std::string best_name;
            for (const auto& pt : pts) {
                if (pt.impl == "starfact_dsse") t_dsse = pt.t;
                if (pt.impl == "fixed_equal_flops") t_equal = pt.t;
                if (pt.impl == "fixed_same_count") t_same = pt.t;
            }
            fmt::print("# {} nmax {} count {} ({:.3f} GFLOP useful):\n", dist, nmax, count, flops / 1e9);
            for (const auto& pt : pts) {
                fmt::print("#   {:20s} {:10.3f} ms {:9.1f} GFLOP/s  time / dsse {:6.2f}\n", pt.impl, pt.t * 1e3,
                           (pt.impl == "fixed_equal_flops" || pt.impl == "fixed_same_count" ? 0.0 : flops / pt.t / 1e9),
                           pt.t / t_dsse);
                if (pt.impl != "starfact_dsse" && pt.impl != "starfact_ssde" && pt.impl != "fixed_equal_flops" &&
                    pt.impl != "fixed_same_count" && pt.impl != "starfact_dsse_upper" &&
                    (best_other == 0 || pt.t < best_other)) {
                    best_other = pt.t;
                    best_name = pt.impl;
                }
            }
            emit({{"record", "summary"},
                  {"op", "vpotrf"},
                  {"nmax", nmax},
                  {"dist", dist},
                  {"count", count},
                  {"best_alternative", best_name},
                  {"best_alternative_over_dsse", best_other / t_dsse},
                  {"equal_flops_over_dsse", t_equal / t_dsse},
                  {"same_count_over_dsse", t_same / t_dsse}});
            fmt::print(
                "#   best other / dsse {:.2f} ({}), equal flops / dsse {:.2f}, same count / dsse {:.2f} (issue 6: "
                ">= 0.8 uniform)\n",
                best_other / t_dsse, best_name, t_equal / t_dsse, t_same / t_dsse);

            cudaFree(d_ptrs);
            cudaFree(d_n);
            cudaFree(d_ld);
            cudaFree(d_info);
            cudaFree(d_work);
            cudaFree(d_orig);
        }
    cusolverDnDestroy(solver);
    cublasDestroy(blas);
    return 0;
}
