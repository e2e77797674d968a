// bench_batched_vgeqrf: variable-size batched Householder QR of square FP64 matrices, in
// one process: our vgeqrf with the SSDE and DSSE schedules, every matrix padded to NMAX (identity
// outside it) and factored by the fixed-size batched::cuda::geqrf, cuSOLVER geqrf looped over the
// matrices on one stream, the fixed-size geqrf on as many NMAX matrices as carry the same flops
// ("fixed_equal_flops") and on as many matrices of one order n_eq = round(cbrt(mean n^3))
// ("fixed_same_count"), and the CPU baseline (LAPACKE, one matrix per core: the host path of
// batched/vbatched.hpp). Orders uniform in [1, NMAX] or skewed (1% NMAX, the rest in [1,
// NMAX/10]). Rates count the useful flops (LAPACK's geqrf counts, 4n^3/3 for a square matrix).
// Also our vgeqrs (nrhs 1) after the DSSE factors. GPU times: CUDA events, warm-up, median of
// --reps, the input restored (untimed) before each run.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "batched/batched.hpp"
#include "batched/cuda/kernels.hpp"
#include "batched/cuda/vbatched_kernels.hpp"
#include "batched/residuals.hpp"
#include "batched/vbatched.hpp"
#include "bench/bench_common.hpp"
#include "bench/bench_vbatched_common.hpp"

namespace {
using namespace starfact;
namespace bc = starfact::batched::cuda;
using bench::vbatched::device_alloc;
using bench::vbatched::upload;

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"variable-size batched QR (FP64): SSDE, DSSE, padded fixed-size, looped cuSOLVER, CPU"};
    bench::vbatched::Options o;
    bool loop = true;
    o.add_to(app);
    app.add_option("--cusolver-loop", loop, "Run cuSOLVER geqrf looped over the matrices");
    CLI11_PARSE(app, argc, argv);
    const int count = o.count, reps = o.reps;

    bench::Emitter emit(o.out_path);
    bench::vbatched::emit_config(emit, reps);
    cublasHandle_t blas;
    cusolverDnHandle_t solver;
    bench::check(cublasCreate(&blas), "cublasCreate");
    bench::check(cusolverDnCreate(&solver), "cusolverDnCreate");

    for (const auto& dist : o.dists)
        for (int nmax : o.nmaxes) {
            const auto src = bench::vbatched::sources(nmax, false);
            const bench::vbatched::PackedBatch a(bench::vbatched::draw_sizes(dist, nmax, count, 1000 + nmax), src,
                                                 nmax);
            const auto& n = a.n;
            const auto& ld = a.ld;
            double flops = 0;
            for (int b = 0; b < count; ++b) flops += batched::geqrf_flops(n[b], n[b]);
            const bench::vbatched::PerMatrix<double> tau_v(n);
            double* const d_tau = tau_v.d_data;
            double** const d_tptrs = tau_v.d_ptrs;
            const auto& toff = tau_v.off;
            auto restore = [&] { a.restore(); };
            // The residual of the largest matrix and the largest over a sample of 64 others.
            auto residual = [&] {
                const auto f = a.download_work();
                std::vector<double> tau(toff[count]);
                bench::check(cudaMemcpy(tau.data(), d_tau, sizeof(double) * tau.size(), cudaMemcpyDeviceToHost),
                             "cudaMemcpy");
                return bench::vbatched::sampled_residual(a, [&](int b) {
                    return batched::residuals::geqrf<double>(n[b], n[b], a.host.data() + a.off[b], ld[b],
                                                             f.data() + a.off[b], ld[b], tau.data() + toff[b]);
                });
            };
            bench::vbatched::Points pts(emit, "vgeqrf", nmax, dist, count);

            const bc::VQrBounds bounds = bc::vqr_bounds(n.data(), n.data(), count);
            const std::size_t vws = bc::vgeqrf_workspace<double>(count);
            void* d_vws = device_alloc<char>(vws);
            bc::Launch launch{nullptr, blas, d_vws, vws};
            for (auto s : {bc::Schedule::ssde, bc::Schedule::dsse}) {
                const double t = bench::time_on_device(reps, restore, [&] {
                    bc::vgeqrf<double>(launch, s, bounds, a.d_n, a.d_n, a.d_ptrs, a.d_ld, d_tptrs, count);
                });
                pts.record("vgeqrf", s == bc::Schedule::ssde ? "starfact_ssde" : "starfact_dsse", t, flops,
                           {{"residual_max_sampled", residual()}});
            }
            {  // vgeqrs, nrhs = 1, from the DSSE factors now in the work copy
                const bench::vbatched::PerMatrix<double> rhs(n);
                const std::vector<double> hb(rhs.total(), 1.0);
                double rflops = 0;
                for (int b = 0; b < count; ++b)
                    rflops += batched::gels_flops(n[b], n[b], 1) - batched::geqrf_flops(n[b], n[b]);
                const double t = bench::time_on_device(
                    reps, [&] { upload(rhs.d_data, hb); },
                    [&] {
                        bc::vgeqrs<double>(launch, bounds, a.d_n, a.d_n, 1, a.d_ptrs, a.d_ld, d_tptrs, rhs.d_ptrs,
                                           a.d_ld, a.d_info, count);
                    });
                pts.record("vgeqrs", "starfact", t, rflops, {{"nrhs", 1}});
            }
            {  // padded to nmax (identity outside each matrix): the fixed-size geqrf
                const bench::vbatched::PaddedBatch pad(a, nmax);
                double* d_pad_tau = device_alloc<double>(std::size_t(nmax) * count);
                const std::size_t ws = bc::geqrf_workspace<double>(nmax, nmax, count);
                void* d_ws = ws > 0 ? device_alloc<char>(ws) : nullptr;
                bc::Launch fl{nullptr, blas, d_ws, ws};
                auto pad_restore = [&] { pad.restore(); };
                const double tp = bench::time_on_device(
                    reps, pad_restore, [&] { bc::geqrf<double>(fl, nmax, nmax, pad.d_ptrs, nmax, d_pad_tau, count); });
                pts.record("vgeqrf", "padded_fixed", tp, flops);
                const double per_flops = batched::geqrf_flops(nmax, nmax);
                const int ceq = std::max(1, std::min(count, static_cast<int>(std::lround(flops / per_flops))));
                const double te = bench::time_on_device(
                    reps, pad_restore, [&] { bc::geqrf<double>(fl, nmax, nmax, pad.d_ptrs, nmax, d_pad_tau, ceq); });
                pts.record("vgeqrf", "fixed_equal_flops", te, ceq * per_flops, {{"fixed_count", ceq}});
                {  // the same count of matrices of one order n_eq (SameOrderBatch)
                    const bench::vbatched::SameOrderBatch eq(n, src, nmax);
                    const int neq = eq.order;
                    const std::size_t wse = bc::geqrf_workspace<double>(neq, neq, count);
                    void* d_wse = wse > 0 ? device_alloc<char>(wse) : nullptr;
                    bc::Launch el{nullptr, blas, d_wse, wse};
                    const double ts = bench::time_on_device(
                        reps, [&] { eq.restore(); },
                        [&] { bc::geqrf<double>(el, neq, neq, eq.d_ptrs, neq, d_pad_tau, count); });
                    pts.record("vgeqrf", "fixed_same_count", ts, count * batched::geqrf_flops(neq, neq),
                               {{"fixed_order", neq}});
                    cudaFree(d_wse);
                }
                cudaFree(d_ws);
                cudaFree(d_pad_tau);
            }
            if (loop) {  // cuSOLVER geqrf per matrix, one stream
                int lwork = 0;
                bench::check(cusolverDnDgeqrf_bufferSize(solver, nmax, nmax, a.d_work, nmax, &lwork),
                             "cusolverDnDgeqrf_bufferSize");
                double* d_lw = device_alloc<double>(std::max(lwork, 1));
                const double tl = bench::time_on_device(std::max(1, reps / 2), restore, [&] {
                    for (int b = 0; b < count; ++b)
                        if (n[b] > 0)
                            bench::check(cusolverDnDgeqrf(solver, n[b], n[b], a.p[b], ld[b], d_tau + toff[b], d_lw,
                                                          lwork, a.d_info + b),
                                         "cusolverDnDgeqrf");
                });
                pts.record("vgeqrf", "cusolver_loop", tl, flops);
                cudaFree(d_lw);
            }
            if (o.cpu) {  // LAPACKE per matrix, one per core
                std::vector<double> work(a.total), htau(toff[count]);
                std::vector<double*> hp(count), ht(count);
                for (int b = 0; b < count; ++b) {
                    hp[b] = work.data() + a.off[b];
                    ht[b] = htau.data() + toff[b];
                }
                const double t = bench::vbatched::time_on_host(reps, a, work, [&] {
                    batched::vgeqrf<double>(n.data(), n.data(), hp.data(), ld.data(), ht.data(), count);
                });
                pts.record("vgeqrf", "lapacke_per_core", t, flops);
            }
            pts.emit_summary(pts.print_table(flops, false));
            cudaFree(d_vws);
        }
    cusolverDnDestroy(solver);
    cublasDestroy(blas);
    return 0;
}
