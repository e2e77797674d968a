// bench_lu_kernels: the four CUDA kernels of tile LU (GETRF, GESSM, TSTRF, SSSSM) timed one at a
// time on one stream, no StarPU, next to the cuBLAS/cuSOLVER calls that bound them: a GEMM of
// SSSSM's shape (nb x nb x nb) and cuSOLVER's getrf of TSTRF's stacked (2 nb) x nb panel. It
// says which kernel is far from its floor; the whole factorization is bench_getrf's job.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <vector>

#include "bench/bench_common.hpp"
#include "codelets/cuda/lu_kernels.hpp"
#include "codelets/cuda/tile_kernels.hpp"
#include "common/matgen.hpp"

namespace {
using namespace starfact;

constexpr int kStreams = 4;
constexpr int kPerStream = 6;

TileView<const double> as_const(TileView<double> v) { return {v.data, v.m, v.n, v.ld}; }

/// A device array of n doubles filled from host data; restore() copies it back in.
struct Tile {
    int n;
    double* d = nullptr;
    std::vector<double> host;
    explicit Tile(int nb, std::uint64_t seed) : n(nb), host(static_cast<std::size_t>(nb) * nb) {
        matgen::uniform(nb, nb, seed, host.data(), nb);
        bench::check(cudaMalloc(&d, sizeof(double) * host.size()), "cudaMalloc");
        restore();
    }
    ~Tile() { cudaFree(d); }
    Tile(const Tile&) = delete;
    Tile& operator=(const Tile&) = delete;
    void restore() {
        bench::check(cudaMemcpy(d, host.data(), sizeof(double) * host.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    /// Takes the device content as the new state restore() goes back to.
    void keep() {
        bench::check(cudaMemcpy(host.data(), d, sizeof(double) * host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
    }
    TileView<double> view() { return {d, n, n, n}; }  // n x n
    TileView<const double> cview() const { return {d, n, n, n}; }
};

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"The CUDA kernels of tile LU, one at a time on one stream, next to GEMM and cuSOLVER getrf (FP64)"};
    std::vector<int> nbs{1024, 2048};
    std::vector<int> ibs{256, 512, 1024};
    int reps = 5;
    std::string out_path;
    app.add_option("--nb", nbs, "Tile sizes")->delimiter(',');
    app.add_option("--ib", ibs, "Inner blocks")->delimiter(',');
    app.add_option("--reps", reps, "Timed repetitions (median)")->check(CLI::PositiveNumber);
    app.add_option("--json", out_path, "Also write JSON lines to this file");
    CLI11_PARSE(app, argc, argv);

    bench::Emitter emit(out_path);
    cublasHandle_t blas;
    cusolverDnHandle_t solver;
    cusolverDnParams_t params;
    bench::check(cublasCreate(&blas), "cublasCreate");
    bench::check(cusolverDnCreate(&solver), "cusolverDnCreate");
    bench::check(cusolverDnCreateParams(&params), "cusolverDnCreateParams");

    for (int nb : nbs) {
        const double n3 = double(nb) * nb * nb;
        Tile D(nb, 11), A(nb, 12), L(2 * nb, 13), C(nb, 14), C2(nb, 15);  // L: room for the inverses
        int *dipiv = nullptr, *tpiv = nullptr, *dinfo = nullptr;
        bench::check(cudaMalloc(&dipiv, sizeof(int) * nb), "cudaMalloc");
        bench::check(cudaMalloc(&tpiv, sizeof(int) * nb), "cudaMalloc");
        bench::check(cudaMalloc(&dinfo, sizeof(int)), "cudaMalloc");

        // The vendor floors: SSSSM is one nb^3 GEMM's worth of flops plus ib/(2 nb) of triangular
        // work; TSTRF is an LU of a (2 nb) x nb panel whose top half is triangular.
        const double t_gemm = bench::time_on_device(
            reps, [] {},
            [&] {
                bench::check(cuda::gemm<double>(blas, 'N', 'N', -1.0, A.cview(), C.cview(), 1.0, C2.view()), "gemm");
            });
        emit({{"record", "kernel"},
              {"kernel", "cublas_gemm"},
              {"nb", nb},
              {"time_s", t_gemm},
              {"tflops", 2 * n3 / t_gemm / 1e12}});
        {
            const int rows = 2 * nb;
            double* P = nullptr;
            std::int64_t* piv64 = nullptr;
            bench::check(cudaMalloc(&P, sizeof(double) * rows * nb), "cudaMalloc");
            bench::check(cudaMalloc(&piv64, sizeof(std::int64_t) * nb), "cudaMalloc");
            std::vector<double> hp(static_cast<std::size_t>(rows) * nb);
            matgen::uniform(rows, nb, 17, hp.data(), rows);
            std::size_t dws = 0, hws = 0;
            bench::check(
                cusolverDnXgetrf_bufferSize(solver, params, rows, nb, CUDA_R_64F, P, rows, CUDA_R_64F, &dws, &hws),
                "bufferSize");
            void* w = nullptr;
            bench::check(cudaMalloc(&w, std::max<std::size_t>(dws, 1)), "cudaMalloc");
            const double t = bench::time_on_device(
                reps,
                [&] {
                    bench::check(cudaMemcpy(P, hp.data(), sizeof(double) * hp.size(), cudaMemcpyHostToDevice), "cpy");
                },
                [&] {
                    bench::check(cusolverDnXgetrf(solver, params, rows, nb, CUDA_R_64F, P, rows, piv64, CUDA_R_64F, w,
                                                  dws, nullptr, 0, dinfo),
                                 "getrf");
                });
            emit({{"record", "kernel"},
                  {"kernel", "cusolver_getrf_2nb_x_nb"},
                  {"nb", nb},
                  {"time_s", t},
                  {"tflops", 5.0 / 3.0 * n3 / t / 1e12}});
            {
                // cuSOLVER's second getrf algorithm on the same panel.
                cusolverDnParams_t p1;
                bench::check(cusolverDnCreateParams(&p1), "cusolverDnCreateParams");
                bench::check(cusolverDnSetAdvOptions(p1, CUSOLVERDN_GETRF, CUSOLVER_ALG_1), "SetAdvOptions");
                std::size_t dws1 = 0, hws1 = 0;
                bench::check(
                    cusolverDnXgetrf_bufferSize(solver, p1, rows, nb, CUDA_R_64F, P, rows, CUDA_R_64F, &dws1, &hws1),
                    "bufferSize");
                void* w1 = nullptr;
                bench::check(cudaMalloc(&w1, std::max<std::size_t>(dws1, 1)), "cudaMalloc");
                const double t1 = bench::time_on_device(
                    reps,
                    [&] {
                        bench::check(cudaMemcpy(P, hp.data(), sizeof(double) * hp.size(), cudaMemcpyHostToDevice),
                                     "cpy");
                    },
                    [&] {
                        bench::check(cusolverDnXgetrf(solver, p1, rows, nb, CUDA_R_64F, P, rows, piv64, CUDA_R_64F, w1,
                                                      dws1, nullptr, 0, dinfo),
                                     "getrf");
                    });
                emit({{"record", "kernel"},
                      {"kernel", "cusolver_getrf_2nb_x_nb_alg1"},
                      {"nb", nb},
                      {"time_s", t1},
                      {"tflops", 5.0 / 3.0 * n3 / t1 / 1e12}});
                cudaFree(w1);
                cusolverDnDestroyParams(p1);
            }
            cudaFree(w);
            cudaFree(piv64);
            cudaFree(P);
        }

        for (int ib : ibs) {
            if (ib > nb) continue;
            const std::size_t bytes = cuda::lu_workspace_bytes<double>(solver, params, nb, nb, ib);
            void* work = nullptr;
            bench::check(cudaMalloc(&work, bytes), "cudaMalloc");
            const cuda::LuContext ctx{blas, solver, params, nullptr, work, bytes};
            auto point = [&](const char* kernel, double t, double flops) {
                emit({{"record", "kernel"},
                      {"kernel", kernel},
                      {"nb", nb},
                      {"ib", ib},
                      {"time_s", t},
                      {"tflops", flops / t / 1e12}});
            };
            D.restore();
            const double t_getrf = bench::time_on_device(
                reps, [&] { D.restore(); },
                [&] { bench::check(cuda::getrf<double>(ctx, D.view(), dipiv, dinfo, ib), "getrf"); });
            point("getrf", t_getrf, 2 * n3 / 3);
            // The state the later kernels start from: D factored.
            D.keep();
            const double t_gessm = bench::time_on_device(
                reps, [&] { C.restore(); },
                [&] { bench::check(cuda::gessm<double>(ctx, dipiv, D.cview(), C.view(), ib), "gessm"); });
            point("gessm", t_gessm, n3);
            const TileView<double> Lplain{L.d, ib, nb, 2 * nb}, Linv{L.d, 2 * ib, nb, 2 * nb};
            const double t_tstrf = bench::time_on_device(
                reps, [&] { D.restore(), A.restore(); },
                [&] { bench::check(cuda::tstrf<double>(ctx, D.view(), A.view(), Lplain, tpiv, dinfo, ib), "tstrf"); });
            point("tstrf", t_tstrf, n3);  // LU of [U; A]: about nb^3 of the flops that matter
            A.keep();
            L.keep();
            const double t_ssssm = bench::time_on_device(
                reps, [&] { C.restore(), C2.restore(); },
                [&] {
                    bench::check(cuda::ssssm<double>(ctx, C.view(), C2.view(), as_const(Lplain), A.cview(), tpiv, ib),
                                 "ssssm");
                });
            point("ssssm", t_ssssm, 2 * n3);
            // SSSSM's parts, per inner block: the triangular solve on ib rows and the rank-ib GEMM.
            {
                const TileView<const double> Lb{L.d, ib, ib, 2 * nb};
                const TileView<double> Cb{C.d, ib, nb, nb};
                const double t_trsm = bench::time_on_device(
                    reps, [] {},
                    [&] { bench::check(cuda::trsm<double>(blas, 'L', 'L', 'N', 'U', 1.0, Lb, Cb), "trsm"); });
                point("ssssm_part_trsm", t_trsm, double(ib) * ib * nb);
                const TileView<const double> ALb{A.d, nb, ib, nb}, C1{C.d, ib, nb, nb};
                const double t_g = bench::time_on_device(
                    reps, [] {},
                    [&] { bench::check(cuda::gemm<double>(blas, 'N', 'N', -1.0, ALb, C1, 1.0, C2.view()), "gemm"); });
                point("ssssm_part_gemm", t_g, 2.0 * nb * nb * ib);
            }
            // The bulk of the factorization is many SSSSMs on several streams at once (StarPU's
            // CUDA workers of one GPU): their aggregate rate is what the trailing update gets.
            auto four_streams = [&](const char* kernel, TileView<const double> Lv, bool inverse) {
                std::vector<cudaStream_t> streams(kStreams);
                std::vector<cublasHandle_t> handles(kStreams);
                std::vector<void*> works(kStreams);
                std::vector<double*> tiles(2 * kStreams);
                for (int s = 0; s < kStreams; ++s) {
                    bench::check(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking), "cudaStreamCreate");
                    bench::check(cublasCreate(&handles[s]), "cublasCreate");
                    bench::check(cublasSetStream(handles[s], streams[s]), "cublasSetStream");
                    bench::check(cudaMalloc(&works[s], bytes), "cudaMalloc");
                    for (int t = 0; t < 2; ++t) {
                        bench::check(cudaMalloc(&tiles[2 * s + t], sizeof(double) * C.host.size()), "cudaMalloc");
                        bench::check(cudaMemcpy(tiles[2 * s + t], C.host.data(), sizeof(double) * C.host.size(),
                                                cudaMemcpyHostToDevice),
                                     "cudaMemcpy");
                    }
                }
                std::vector<double> runs;
                for (int r = 0; r < reps + 1; ++r) {
                    bench::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
                    const auto t0 = std::chrono::steady_clock::now();
                    for (int k = 0; k < kPerStream; ++k)
                        for (int s = 0; s < kStreams; ++s) {
                            const cuda::LuContext sc{handles[s], solver, params, streams[s], works[s], bytes};
                            const TileView<double> X{tiles[2 * s], nb, nb, nb}, Y{tiles[2 * s + 1], nb, nb, nb};
                            bench::check(cuda::ssssm<double>(sc, X, Y, Lv, A.cview(), tpiv, ib, inverse), "ssssm");
                        }
                    bench::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
                    if (r > 0)
                        runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
                }
                const double t = bench::median(runs) / (kStreams * kPerStream);
                point(kernel, t, 2 * n3);
                for (int s = 0; s < kStreams; ++s) {
                    cudaFree(tiles[2 * s]);
                    cudaFree(tiles[2 * s + 1]);
                    cudaFree(works[s]);
                    cublasDestroy(handles[s]);
                    cudaStreamDestroy(streams[s]);
                }
            };
            four_streams("ssssm_4_streams", as_const(Lplain), false);
            // The trtri + gemm variant on the same inputs: TSTRF also inverts its L1 blocks, SSSSM
            // multiplies by them.
            {
                matgen::uniform(nb, nb, 12, A.host.data(), nb);
                A.restore();
                const double t_tstrf_inv = bench::time_on_device(
                    reps, [&] { D.restore(), A.restore(); },
                    [&] {
                        bench::check(cuda::tstrf<double>(ctx, D.view(), A.view(), Linv, tpiv, dinfo, ib, true),
                                     "tstrf");
                    });
                point("tstrf_trtri", t_tstrf_inv, n3);
                A.keep();
                const double t_ssssm_inv = bench::time_on_device(
                    reps, [&] { C.restore(), C2.restore(); },
                    [&] {
                        bench::check(
                            cuda::ssssm<double>(ctx, C.view(), C2.view(), as_const(Linv), A.cview(), tpiv, ib, true),
                            "ssssm");
                    });
                point("ssssm_trtri", t_ssssm_inv, 2 * n3);
                four_streams("ssssm_trtri_4_streams", as_const(Linv), true);
            }
            D.restore();  // back to D factored (tstrf rewrote its U)
            A.restore();
            cudaFree(work);
            // Restore the original inputs for the next ib.
            matgen::uniform(nb, nb, 11, D.host.data(), nb);
            D.restore();
            matgen::uniform(nb, nb, 12, A.host.data(), nb);
            A.restore();
        }
        cudaFree(dinfo);
        cudaFree(tpiv);
        cudaFree(dipiv);
    }
    cusolverDnDestroyParams(params);
    cusolverDnDestroy(solver);
    cublasDestroy(blas);
    return 0;
}
