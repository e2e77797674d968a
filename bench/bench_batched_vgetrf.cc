// bench_batched_vgetrf: variable-size batched LU with partial pivoting on the same
// FP64 matrices, in one process: our vgetrf with the SSDE and DSSE schedules, every matrix
// padded to NMAX (identity below and right of it) and factored by the fixed-size
// batched::cuda::getrf and by cuBLAS getrfBatched, cuSOLVER getrf looped over the matrices on one
// stream, and the CPU baseline (LAPACKE, one matrix per core, single-threaded OpenBLAS: the host
// path of batched/vbatched.hpp). Orders: uniform in [1, NMAX] or the paper's skewed distribution
// (1% NMAX, the rest in [1, NMAX/10]). Rates count the useful flops, the sum of 2n^3/3;
// "fixed_equal_flops" is the fixed-size getrf on as many NMAX matrices as carry the same flops,
// "fixed_same_count" the fixed-size getrf on the same count of matrices of order
// n_eq = round((mean of n^3)^(1/3)) (same count, same flops up to the rounding of n_eq).
// Also our vgetrs (DSSE factors, nrhs 1) against the host path. GPU times: CUDA events, warm-up,
// median of --reps, the input restored (untimed) before each run.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "batched/cuda/kernels.hpp"
#include "batched/cuda/vbatched_kernels.hpp"
#include "batched/residuals.hpp"
#include "batched/vbatched.hpp"
#include "bench/bench_common.hpp"
#include "bench/bench_vbatched_common.hpp"
#include "common/parallel.hpp"

namespace {
using namespace starfact;
namespace bc = starfact::batched::cuda;

using bench::vbatched::device_alloc;
using bench::vbatched::nonzero;
using bench::vbatched::upload;

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"variable-size batched LU (FP64): SSDE, DSSE, padded fixed-size, cuBLAS, looped cuSOLVER, CPU"};
    bench::vbatched::Options o;
    bool loop = true;
    o.add_to(app);
    app.add_option("--cusolver-loop", loop, "Run cuSOLVER getrf looped over the matrices");
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
            double flops = 0, n3 = 0;
            for (int b = 0; b < count; ++b) {
                flops += 2.0 * n[b] * n[b] * n[b] / 3.0;
                n3 += double(n[b]) * n[b] * n[b];
            }
            const bench::vbatched::PerMatrix<int> piv_v(n);
            int* const d_piv = piv_v.d_data;
            int** const d_pptrs = piv_v.d_ptrs;
            const auto& poff = piv_v.off;
            auto restore = [&] { a.restore(); };
            // The residual of the largest matrix and the largest over a sample of 64 others.
            auto residual = [&] {
                const auto f = a.download_work();
                const auto piv = bench::vbatched::download(d_piv, poff[count]);
                return bench::vbatched::sampled_residual(a, [&](int b) {
                    return batched::residuals::getrf<double>(n[b], a.host.data() + a.off[b], ld[b], f.data() + a.off[b],
                                                             ld[b], piv.data() + poff[b]);
                });
            };
            bench::vbatched::Points pts(emit, "vgetrf", nmax, dist, count);

            const std::size_t vws = bc::vgetrf_workspace<double>(nmax, count);
            void* d_vws = vws > 0 ? device_alloc<char>(vws) : nullptr;
            bc::Launch launch{nullptr, blas, d_vws, vws};
            for (auto s : {bc::Schedule::ssde, bc::Schedule::dsse}) {
                const double t = bench::time_on_device(reps, restore, [&] {
                    bc::vgetrf<double>(launch, s, nmax, a.d_n, a.d_ptrs, a.d_ld, d_pptrs, a.d_info, count);
                });
                const int fail = a.failed();
                pts.record("vgetrf", s == bc::Schedule::ssde ? "starfact_ssde" : "starfact_dsse", t, flops,
                           {{"failed", fail}, {"residual_max_sampled", residual()}});
            }
            {  // vgetrs, nrhs = 1, from the DSSE factors now in the work copy
                const bench::vbatched::PerMatrix<double> rhs(n);
                const std::vector<double> hb(rhs.total(), 1.0);
                double rflops = 0;
                for (int b = 0; b < count; ++b) rflops += 2.0 * n[b] * n[b];
                const double t = bench::time_on_device(
                    reps, [&] { upload(rhs.d_data, hb); },
                    [&] {
                        bc::vgetrs<double>(launch, nmax, a.d_n, 1, a.d_ptrs, a.d_ld, d_pptrs, rhs.d_ptrs, a.d_ld,
                                           count);
                    });
                pts.record("vgetrs", "starfact", t, rflops, {{"nrhs", 1}});
            }

            // Padded to nmax (identity outside each matrix): the fixed-size getrf and cuBLAS's.
            {
                const bench::vbatched::PaddedBatch pad(a, nmax);
                int* d_pad_piv = device_alloc<int>(std::size_t(nmax) * count);
                const std::size_t ws = bc::getrf_workspace<double>(nmax, count);
                void* d_ws = ws > 0 ? device_alloc<char>(ws) : nullptr;
                bc::Launch fl{nullptr, blas, d_ws, ws};
                auto pad_restore = [&] { pad.restore(); };
                const double tp = bench::time_on_device(reps, pad_restore, [&] {
                    bc::getrf<double>(fl, nmax, pad.d_ptrs, nmax, d_pad_piv, a.d_info, count);
                });
                pts.record("vgetrf", "padded_fixed", tp, flops, {{"failed", a.failed()}});
                const double tc = bench::time_on_device(reps, pad_restore, [&] {
                    bench::check(cublasDgetrfBatched(blas, nmax, pad.d_ptrs, nmax, d_pad_piv, a.d_info, count),
                                 "cublasDgetrfBatched");
                });
                pts.record("vgetrf", "padded_cublas", tc, flops, {{"failed", a.failed()}});
                const int ceq =
                    std::max(1, std::min(count, static_cast<int>(std::lround(n3 / (double(nmax) * nmax * nmax)))));
                const double te = bench::time_on_device(reps, pad_restore, [&] {
                    bc::getrf<double>(fl, nmax, pad.d_ptrs, nmax, d_pad_piv, a.d_info, ceq);
                });
                pts.record("vgetrf", "fixed_equal_flops", te, ceq * 2.0 * nmax * nmax * nmax / 3.0,
                           {{"fixed_count", ceq}});
                {  // the same count of matrices of one order n_eq (SameOrderBatch)
                    const bench::vbatched::SameOrderBatch eq(n, src, nmax);
                    const int neq = eq.order;
                    const std::size_t wse = bc::getrf_workspace<double>(neq, count);
                    void* d_wse = wse > 0 ? device_alloc<char>(wse) : nullptr;
                    bc::Launch el{nullptr, blas, d_wse, wse};
                    const double tq = bench::time_on_device(
                        reps, [&] { eq.restore(); },
                        [&] { bc::getrf<double>(el, neq, eq.d_ptrs, neq, d_pad_piv, a.d_info, count); });
                    pts.record("vgetrf", "fixed_same_count", tq, count * 2.0 * neq * neq * neq / 3.0,
                               {{"fixed_order", neq}});
                    cudaFree(d_wse);
                }
                cudaFree(d_ws);
                cudaFree(d_pad_piv);
            }

            if (loop) {  // cuSOLVER getrf per matrix, one stream
                int lwork = 0;
                bench::check(cusolverDnDgetrf_bufferSize(solver, nmax, nmax, a.d_work, nmax, &lwork),
                             "cusolverDnDgetrf_bufferSize");
                double* d_lw = device_alloc<double>(std::max(lwork, 1));
                const double tl = bench::time_on_device(std::max(1, reps / 2), restore, [&] {
                    for (int b = 0; b < count; ++b)
                        bench::check(
                            cusolverDnDgetrf(solver, n[b], n[b], a.p[b], ld[b], d_lw, d_piv + poff[b], a.d_info + b),
                            "cusolverDnDgetrf");
                });
                pts.record("vgetrf", "cusolver_loop", tl, flops, {{"failed", a.failed()}});
                cudaFree(d_lw);
            }

            if (o.cpu) {  // LAPACKE per matrix, one per core
                std::vector<double> work(a.total);
                std::vector<int> hpiv(poff[count]);
                std::vector<double*> hp(count);
                std::vector<int*> hpp(count);
                for (int b = 0; b < count; ++b) {
                    hp[b] = work.data() + a.off[b];
                    hpp[b] = hpiv.data() + poff[b];
                }
                std::vector<int> hinfo(count);
                const double t = bench::vbatched::time_on_host(reps, a, work, [&] {
                    batched::vgetrf<double>(n.data(), hp.data(), ld.data(), hpp.data(), hinfo.data(), count);
                });
                pts.record("vgetrf", "lapacke_per_core", t, flops, {{"failed", nonzero(hinfo)}});
            }

            pts.emit_summary(pts.print_table(flops, true));

            cudaFree(d_vws);
        }
    cusolverDnDestroy(solver);
    cublasDestroy(blas);
    return 0;
}
