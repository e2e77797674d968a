// bench_batched_vpotrf: variable-size batched Cholesky on the same FP64 matrices, in
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
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "batched/cuda/kernels.hpp"
#include "batched/cuda/vbatched_kernels.hpp"
#include "batched/vbatched.hpp"
#include "bench/bench_common.hpp"
#include "bench/bench_vbatched_common.hpp"
#include "common/blas.hpp"
#include "common/checks.hpp"

namespace {
using namespace starfact;
namespace bc = starfact::batched::cuda;

using bench::vbatched::device_alloc;
using bench::vbatched::nonzero;

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"variable-size batched Cholesky (FP64): SSDE, DSSE, padded fixed-size, looped cuSOLVER, CPU"};
    bench::vbatched::Options o;
    bool loop = true, upper = false;
    o.add_to(app);
    app.add_option("--cusolver-loop", loop, "Run cuSOLVER potrf looped over the matrices");
    app.add_option("--upper", upper, "Also time our upper factorization (DSSE)");
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
            // Sources: SPD of order nmax, strictly diagonally dominant (any leading block is SPD).
            const auto src = bench::vbatched::sources(nmax, true);
            // Packed original and work copy on the device, pointer arrays, sizes.
            const bench::vbatched::PackedBatch a(bench::vbatched::draw_sizes(dist, nmax, count, 1000 + nmax), src,
                                                 nmax);
            const auto& n = a.n;
            const auto& ld = a.ld;
            double flops = 0, n3 = 0;
            for (int b = 0; b < count; ++b) {
                flops += double(n[b]) * n[b] * n[b] / 3.0;
                n3 += double(n[b]) * n[b] * n[b];
            }
            auto restore = [&] { a.restore(); };
            const int big = a.largest();  // for the residual check
            auto residual = [&](char uplo) {
                std::vector<double> f(a.off[big + 1] - a.off[big]);
                bench::check(
                    cudaMemcpy(f.data(), a.d_work + a.off[big], sizeof(double) * f.size(), cudaMemcpyDeviceToHost),
                    "cudaMemcpy");
                return checks::potrf_residual<double>(uplo, n[big], a.host.data() + a.off[big], ld[big], f.data(),
                                                      ld[big]);
            };
            bench::vbatched::Points pts(emit, "vpotrf", nmax, dist, count);

            bc::Launch launch{nullptr, blas, nullptr, 0};
            for (auto s : {bc::Schedule::ssde, bc::Schedule::dsse}) {
                const double t = bench::time_on_device(reps, restore, [&] {
                    bc::vpotrf<double>(launch, bc::Uplo::lower, s, nmax, a.d_n, a.d_ptrs, a.d_ld, a.d_info, count);
                });
                const int fail = a.failed();
                pts.record("vpotrf", s == bc::Schedule::ssde ? "starfact_ssde" : "starfact_dsse", t, flops,
                           {{"failed", fail}, {"residual_largest", residual('L')}});
            }
            if (upper) {  // the same matrices read as upper storage (symmetric sources)
                const double t = bench::time_on_device(reps, restore, [&] {
                    bc::vpotrf<double>(launch, bc::Uplo::upper, bc::Schedule::dsse, nmax, a.d_n, a.d_ptrs, a.d_ld,
                                       a.d_info, count);
                });
                pts.record("vpotrf", "starfact_dsse_upper", t, flops,
                           {{"failed", a.failed()}, {"residual_largest", residual('U')}});
            }

            // Padded to nmax (identity outside each matrix), fixed-size potrf.
            {
                const bench::vbatched::PaddedBatch pad(a, nmax);
                const std::size_t ws = bc::potrf_workspace<double>(nmax, count);
                void* d_ws = ws > 0 ? device_alloc<char>(ws) : nullptr;
                bc::Launch fl{nullptr, blas, d_ws, ws};
                auto pad_restore = [&] { pad.restore(); };
                const double tp = bench::time_on_device(reps, pad_restore, [&] {
                    bc::potrf<double>(fl, bc::Uplo::lower, nmax, pad.d_ptrs, nmax, a.d_info, count);
                });
                pts.record("vpotrf", "padded_fixed", tp, flops, {{"failed", a.failed()}});
                // Fixed-size on as many nmax matrices as carry the same flops.
                const int ceq =
                    std::max(1, std::min(count, static_cast<int>(std::lround(n3 / (double(nmax) * nmax * nmax)))));
                const double te = bench::time_on_device(reps, pad_restore, [&] {
                    bc::potrf<double>(fl, bc::Uplo::lower, nmax, pad.d_ptrs, nmax, a.d_info, ceq);
                });
                const double eq_flops = ceq * double(nmax) * nmax * nmax / 3.0;
                pts.record("vpotrf", "fixed_equal_flops", te, eq_flops, {{"fixed_count", ceq}});
                {  // the same count of matrices of one order n_eq (SameOrderBatch; SPD sources)
                    const bench::vbatched::SameOrderBatch eq(n, src, nmax);
                    const int neq = eq.order;
                    const std::size_t wse = bc::potrf_workspace<double>(neq, count);
                    void* d_wse = wse > 0 ? device_alloc<char>(wse) : nullptr;
                    bc::Launch el{nullptr, blas, d_wse, wse};
                    const double ts = bench::time_on_device(
                        reps, [&] { eq.restore(); },
                        [&] { bc::potrf<double>(el, bc::Uplo::lower, neq, eq.d_ptrs, neq, a.d_info, count); });
                    pts.record("vpotrf", "fixed_same_count", ts, count * double(neq) * neq * neq / 3.0,
                               {{"order", neq}, {"failed", a.failed()}});
                    cudaFree(d_wse);
                }
                cudaFree(d_ws);
            }

            if (loop) {  // cuSOLVER potrf per matrix, one stream
                int lwork = 0;
                bench::check(cusolverDnDpotrf_bufferSize(solver, CUBLAS_FILL_MODE_LOWER, nmax, a.d_work, nmax, &lwork),
                             "cusolverDnDpotrf_bufferSize");
                double* d_lw = device_alloc<double>(std::max(lwork, 1));
                const double tl = bench::time_on_device(std::max(1, reps / 2), restore, [&] {
                    for (int b = 0; b < count; ++b)
                        if (n[b] > 0)
                            bench::check(cusolverDnDpotrf(solver, CUBLAS_FILL_MODE_LOWER, n[b], a.p[b], ld[b], d_lw,
                                                          lwork, a.d_info + b),
                                         "cusolverDnDpotrf");
                });
                pts.record("vpotrf", "cusolver_loop", tl, flops, {{"failed", a.failed()}});
                cudaFree(d_lw);
            }

            if (o.cpu) {  // LAPACKE per matrix, one per core
                std::vector<double> work(a.total);
                std::vector<double*> hp(count);
                for (int b = 0; b < count; ++b) hp[b] = work.data() + a.off[b];
                std::vector<int> hinfo(count);
                const double t = bench::vbatched::time_on_host(reps, a, work, [&] {
                    batched::vpotrf<double>(batched::Uplo::lower, n.data(), hp.data(), ld.data(), hinfo.data(), count);
                });
                pts.record("vpotrf", "lapacke_per_core", t, flops, {{"failed", nonzero(hinfo)}});
            }

            pts.emit_summary(pts.print_table(flops, true));
        }
    cusolverDnDestroy(solver);
    cublasDestroy(blas);
    return 0;
}
