// Variable-size batches: argument checks, the host path (LAPACKE per matrix over
// threads) and the direct GPU path (the kernels of batched/cuda/vbatched_kernels.hpp).
#include "batched/vbatched.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string>

#include <fmt/format.h>

#include "batched/detail.hpp"
#include "batched/vdetail.hpp"
#include "common/error.hpp"

#ifdef STARFACT_HAVE_CUDA
#include "batched/cuda/vbatched_kernels.hpp"
#endif

namespace starfact::batched {
namespace {

using detail::Op;

void check_count(int count) { require(count >= 0, "count", fmt::format("count = {} is negative", count)); }

void check_array(const void* p, int count, const char* name) {
    require(count == 0 || p != nullptr, name, fmt::format("null array with count = {}", count));
}

/// Orders not negative, leading dimensions at least max(1, n[b]); returns the largest order.
int check_sizes(const int* n, const int* ld, int count, const char* ld_name) {
    int nmax = 0;
    for (int b = 0; b < count; ++b) {
        require(n[b] >= 0, "n", fmt::format("n[{}] = {} is negative", b, n[b]));
        require(ld[b] >= std::max(1, n[b]), ld_name,
                fmt::format("{}[{}] = {} is less than max(1, n[{}]) = {}", ld_name, b, ld[b], b, std::max(1, n[b])));
        nmax = std::max(nmax, n[b]);
    }
    return nmax;
}

void check_nrhs(int nrhs) { require(nrhs >= 0, "nrhs", fmt::format("nrhs = {} is negative", nrhs)); }

/// Rectangular shapes: m[b], n[b] not negative, ld[b] >= max(1, m[b]); with tall, m[b] >= n[b].
void check_shapes(const int* m, const int* n, const int* ld, int count, const char* ld_name, bool tall) {
    for (int b = 0; b < count; ++b) {
        require(m[b] >= 0, "m", fmt::format("m[{}] = {} is negative", b, m[b]));
        require(n[b] >= 0, "n", fmt::format("n[{}] = {} is negative", b, n[b]));
        require(!tall || m[b] >= n[b], "m",
                fmt::format("m[{}] = {} is less than n[{}] = {} (least squares needs m >= n)", b, m[b], b, n[b]));
        require(ld[b] >= std::max(1, m[b]), ld_name,
                fmt::format("{}[{}] = {} is less than max(1, m[{}]) = {}", ld_name, b, ld[b], b, std::max(1, m[b])));
    }
}

/// The right-hand sides of matrix b have rows[b] rows: ldb[b] >= max(1, rows[b]).
void check_rhs_ld(const int* rows, const int* ldb, int count) {
    for (int b = 0; b < count; ++b)
        require(ldb[b] >= std::max(1, rows[b]), "ldb",
                fmt::format("ldb[{}] = {} is less than max(1, m[{}]) = {}", b, ldb[b], b, std::max(1, rows[b])));
}

bool is_qr(Op op) { return op == Op::geqrf || op == Op::gels; }
bool is_solve(Op op) { return op == Op::getrs || op == Op::potrs || op == Op::gels; }

}  // namespace

namespace vdetail {

void check(const VProblem& p) {
    const Op op = p.op;
    const int count = p.count;
    check_count(count);
    if (is_solve(op)) check_nrhs(p.nrhs);
    if (is_qr(op)) check_array(p.m, count, "m");
    check_array(p.n, count, "n");
    check_array(p.lda, count, "lda");
    check_array(p.A, count, "A");
    if (op == Op::getrf || op == Op::getrs) check_array(p.ipiv, count, "ipiv");
    if (is_qr(op)) check_array(p.tau, count, "tau");
    if (is_solve(op)) {
        check_array(p.B, count, "B");
        check_array(p.ldb, count, "ldb");
    }
    if (op == Op::potrf || op == Op::getrf || op == Op::gels) check_array(p.info, count, "info");
    if (is_qr(op)) {
        check_shapes(p.m, p.n, p.lda, count, "lda", op == Op::gels);
        if (op == Op::gels) check_rhs_ld(p.m, p.ldb, count);
        const int* m = p.m;
        const int* n = p.n;
        for (int b = 0; b < count; ++b) {
            const std::string why = fmt::format("m[{}] = {}, n[{}] = {}", b, m[b], b, n[b]);
            require(m[b] == 0 || n[b] == 0 || p.A[b] != nullptr, "A", fmt::format("A[{}] is null with {}", b, why));
            require(m[b] == 0 || n[b] == 0 || p.tau[b] != nullptr, "tau",
                    fmt::format("tau[{}] is null with {}", b, why));
            if (op == Op::gels)
                require(m[b] == 0 || p.B[b] != nullptr, "B", fmt::format("B[{}] is null with {}", b, why));
        }
        return;
    }
    check_sizes(p.n, p.lda, count, "lda");
    if (is_solve(op)) check_sizes(p.n, p.ldb, count, "ldb");
    for (int b = 0; b < count; ++b) {
        const int n = p.n[b];
        if (n == 0) continue;
        const auto why = [&] { return fmt::format("n[{}] = {}", b, n); };
        require(p.A[b] != nullptr, "A", fmt::format("A[{}] is null with {}", b, why()));
        if (op == Op::getrf || op == Op::getrs)
            require(p.ipiv[b] != nullptr, "ipiv", fmt::format("ipiv[{}] is null with {}", b, why()));
        if (is_solve(op)) require(p.B[b] != nullptr, "B", fmt::format("B[{}] is null with {}", b, why()));
    }
}

}  // namespace vdetail

namespace {

/// Runs body(b) over the batch on the host and counts the matrices whose info is not 0.
template <class F>
int run_host(int count, const HostOptions& opt, int* info, F body) {
    std::atomic<int> failed{0};
    detail::for_each_matrix(count, opt.threads, [&](int b) {
        const int i = body(b);
        if (info != nullptr) {
            info[b] = i;
            if (i != 0) ++failed;
        }
    });
    return failed.load();
}

}  // namespace

template <class T>
int vpotrf(Uplo uplo, const int* n, T* const* A, const int* lda, int* info, int count, const HostOptions& opt) {
    vdetail::check({Op::potrf, count, 0, nullptr, n, lda, nullptr, vdetail::erase(A), nullptr, nullptr, nullptr, info});
    return run_host(count, opt, info,
                    [&](int b) { return n[b] == 0 ? 0 : detail::potrf_one(uplo, n[b], A[b], lda[b]); });
}

template <class T>
void vpotrs(Uplo uplo, const int* n, int nrhs, const T* const* A, const int* lda, T* const* B, const int* ldb,
            int count, const HostOptions& opt) {
    vdetail::check({Op::potrs, count, nrhs, nullptr, n, lda, ldb, vdetail::erase(A), vdetail::erase(B)});
    if (nrhs == 0) return;
    run_host(count, opt, nullptr, [&](int b) {
        if (n[b] > 0) detail::potrs_one(uplo, n[b], nrhs, A[b], lda[b], B[b], ldb[b]);
        return 0;
    });
}

template <class T>
int vgetrf(const int* n, T* const* A, const int* lda, int* const* ipiv, int* info, int count, const HostOptions& opt) {
    vdetail::check({Op::getrf, count, 0, nullptr, n, lda, nullptr, vdetail::erase(A), nullptr, vdetail::erase(ipiv),
                    nullptr, info});
    return run_host(count, opt, info,
                    [&](int b) { return n[b] == 0 ? 0 : detail::getrf_one(n[b], A[b], lda[b], ipiv[b]); });
}

template <class T>
void vgetrs(const int* n, int nrhs, const T* const* A, const int* lda, const int* const* ipiv, T* const* B,
            const int* ldb, int count, const HostOptions& opt) {
    vdetail::check(
        {Op::getrs, count, nrhs, nullptr, n, lda, ldb, vdetail::erase(A), vdetail::erase(B), vdetail::erase(ipiv)});
    if (nrhs == 0) return;
    run_host(count, opt, nullptr, [&](int b) {
        if (n[b] > 0) detail::getrs_one(n[b], nrhs, A[b], lda[b], ipiv[b], B[b], ldb[b]);
        return 0;
    });
}

template <class T>
void vgeqrf(const int* m, const int* n, T* const* A, const int* lda, T* const* tau, int count, const HostOptions& opt) {
    vdetail::check({Op::geqrf, count, 0, m, n, lda, nullptr, vdetail::erase(A), nullptr, nullptr, vdetail::erase(tau)});
    run_host(count, opt, nullptr, [&](int b) {
        if (m[b] > 0 && n[b] > 0) detail::geqrf_one(m[b], n[b], A[b], lda[b], tau[b]);
        return 0;
    });
}

template <class T>
int vgels(const int* m, const int* n, int nrhs, T* const* A, const int* lda, T* const* tau, T* const* B, const int* ldb,
          int* info, int count, const HostOptions& opt) {
    vdetail::check({Op::gels, count, nrhs, m, n, lda, ldb, vdetail::erase(A), vdetail::erase(B), nullptr,
                    vdetail::erase(tau), info});
    return run_host(count, opt, info, [&](int b) {
        return m[b] > 0 && n[b] > 0 ? detail::gels_one(m[b], n[b], nrhs, A[b], lda[b], tau[b], B[b], ldb[b]) : 0;
    });
}

#ifdef STARFACT_HAVE_CUDA
namespace {

/// Checks both halves of a VSizes and returns the largest order.
int check_vsizes(const VSizes& s, int count, const char* ld_name, const char* device_ld_name) {
    check_array(s.n, count, "n");
    check_array(s.ld, count, ld_name);
    check_array(s.device_n, count, "device_n");
    check_array(s.device_ld, count, device_ld_name);
    return check_sizes(s.n, s.ld, count, ld_name);
}

/// The context's stream and handle, with `workspace_bytes` of its workspace reserved (none for 0).
cuda::Launch launch_of(Context& ctx, std::size_t workspace_bytes) {
    cuda::Launch l;
    l.stream = ctx.stream();
    l.cublas = ctx.cublas();
    if (workspace_bytes > 0) {
        l.workspace = ctx.reserve(workspace_bytes);
        l.workspace_bytes = workspace_bytes;
    }
    return l;
}

/// The right-hand sides of matrix b have A's order n[b].
void check_same_orders(const VSizes& a_sizes, const VSizes& b_sizes, int count) {
    for (int b = 0; b < count; ++b)
        require(b_sizes.n[b] == a_sizes.n[b], "n",
                fmt::format("B's n[{}] = {} differs from A's {}", b, b_sizes.n[b], a_sizes.n[b]));
}

}  // namespace

template <class T>
void vpotrf(Context& ctx, Uplo uplo, Schedule schedule, const VSizes& a_sizes, T* const* A, int* info, int count) {
    check_count(count);
    const int nmax = check_vsizes(a_sizes, count, "lda", "device_lda");
    check_array(A, count, "A");
    check_array(info, count, "info");
    if (count == 0) return;
    const cuda::Launch l = launch_of(ctx, cuda::vpotrf_workspace<T>(nmax, count));
    cuda::vpotrf<T>(l, uplo, vdetail::kernel_schedule(schedule), nmax, a_sizes.device_n, A, a_sizes.device_ld, info,
                    count);
}

template <class T>
void vpotrs(Context& ctx, Uplo uplo, const VSizes& a_sizes, int nrhs, const T* const* A, const VSizes& b_sizes,
            T* const* B, int count) {
    check_count(count);
    check_nrhs(nrhs);
    const int nmax = check_vsizes(a_sizes, count, "lda", "device_lda");
    check_vsizes(b_sizes, count, "ldb", "device_ldb");
    check_same_orders(a_sizes, b_sizes, count);
    check_array(A, count, "A");
    check_array(B, count, "B");
    if (count == 0 || nrhs == 0) return;
    const cuda::Launch l = launch_of(ctx, cuda::vpotrs_workspace<T>(nmax, nrhs, count));
    cuda::vpotrs<T>(l, uplo, nmax, a_sizes.device_n, nrhs, A, a_sizes.device_ld, B, b_sizes.device_ld, count);
}

template <class T>
void vgetrf(Context& ctx, Schedule schedule, const VSizes& a_sizes, T* const* A, int* const* ipiv, int* info,
            int count) {
    check_count(count);
    const int nmax = check_vsizes(a_sizes, count, "lda", "device_lda");
    check_array(A, count, "A");
    check_array(ipiv, count, "ipiv");
    check_array(info, count, "info");
    if (count == 0) return;
    const cuda::Launch l = launch_of(ctx, cuda::vgetrf_workspace<T>(nmax, count));
    cuda::vgetrf<T>(l, vdetail::kernel_schedule(schedule), nmax, a_sizes.device_n, A, a_sizes.device_ld, ipiv, info,
                    count);
}

template <class T>
void vgetrs(Context& ctx, const VSizes& a_sizes, int nrhs, const T* const* A, const int* const* ipiv,
            const VSizes& b_sizes, T* const* B, int count) {
    check_count(count);
    check_nrhs(nrhs);
    const int nmax = check_vsizes(a_sizes, count, "lda", "device_lda");
    check_vsizes(b_sizes, count, "ldb", "device_ldb");
    check_same_orders(a_sizes, b_sizes, count);
    check_array(A, count, "A");
    check_array(ipiv, count, "ipiv");
    check_array(B, count, "B");
    if (count == 0 || nrhs == 0) return;
    const cuda::Launch l = launch_of(ctx, cuda::vgetrs_workspace<T>(nmax, nrhs, count));
    cuda::vgetrs<T>(l, nmax, a_sizes.device_n, nrhs, A, a_sizes.device_ld, ipiv, B, b_sizes.device_ld, count);
}

namespace {
/// The Context path's checks of the QR shapes: every array given, and the shapes valid
/// (tall: m >= n for each matrix, as gels needs).
void check_qr_shapes(const VShapes& a, int count, bool tall) {
    check_array(a.m, count, "m");
    check_array(a.n, count, "n");
    check_array(a.ld, count, "lda");
    check_array(a.device_m, count, "device_m");
    check_array(a.device_n, count, "device_n");
    check_array(a.device_ld, count, "device_lda");
    check_shapes(a.m, a.n, a.ld, count, "lda", tall);
}
}  // namespace

template <class T>
void vgeqrf(Context& ctx, Schedule schedule, const VShapes& a, T* const* A, T* const* tau, int count) {
    check_count(count);
    check_qr_shapes(a, count, false);
    check_array(A, count, "A");
    check_array(tau, count, "tau");
    if (count == 0) return;
    const cuda::VQrBounds bounds = cuda::vqr_bounds(a.m, a.n, count);
    const cuda::Launch l = launch_of(ctx, cuda::vgeqrf_workspace<T>(count));
    cuda::vgeqrf<T>(l, vdetail::kernel_schedule(schedule), bounds, a.device_m, a.device_n, A, a.device_ld, tau, count);
}

template <class T>
void vgels(Context& ctx, Schedule schedule, const VShapes& a, int nrhs, T* const* A, T* const* tau,
           const VSizes& b_sizes, T* const* B, int* info, int count) {
    check_count(count);
    check_nrhs(nrhs);
    check_qr_shapes(a, count, true);
    check_array(b_sizes.n, count, "n");
    check_array(b_sizes.ld, count, "ldb");
    check_array(b_sizes.device_ld, count, "device_ldb");
    for (int b = 0; b < count; ++b)
        require(b_sizes.n[b] == a.m[b], "n",
                fmt::format("B's rows[{}] = {} differ from A's m[{}] = {}", b, b_sizes.n[b], b, a.m[b]));
    check_rhs_ld(a.m, b_sizes.ld, count);
    check_array(A, count, "A");
    check_array(tau, count, "tau");
    check_array(B, count, "B");
    check_array(info, count, "info");
    if (count == 0) return;
    const cuda::VQrBounds bounds = cuda::vqr_bounds(a.m, a.n, count);
    const cuda::Launch l = launch_of(ctx, cuda::vgeqrf_workspace<T>(count));
    cuda::vgeqrf<T>(l, vdetail::kernel_schedule(schedule), bounds, a.device_m, a.device_n, A, a.device_ld, tau, count);
    cuda::vgeqrs<T>(l, bounds, a.device_m, a.device_n, nrhs, A, a.device_ld, tau, B, b_sizes.device_ld, info, count);
}

template void vgeqrf<float>(Context&, Schedule, const VShapes&, float* const*, float* const*, int);
template void vgeqrf<double>(Context&, Schedule, const VShapes&, double* const*, double* const*, int);
template void vgels<float>(Context&, Schedule, const VShapes&, int, float* const*, float* const*, const VSizes&,
                           float* const*, int*, int);
template void vgels<double>(Context&, Schedule, const VShapes&, int, double* const*, double* const*, const VSizes&,
                            double* const*, int*, int);
template void vgetrf<float>(Context&, Schedule, const VSizes&, float* const*, int* const*, int*, int);
template void vgetrf<double>(Context&, Schedule, const VSizes&, double* const*, int* const*, int*, int);
template void vgetrs<float>(Context&, const VSizes&, int, const float* const*, const int* const*, const VSizes&,
                            float* const*, int);
template void vgetrs<double>(Context&, const VSizes&, int, const double* const*, const int* const*, const VSizes&,
                             double* const*, int);
template void vpotrf<float>(Context&, Uplo, Schedule, const VSizes&, float* const*, int*, int);
template void vpotrf<double>(Context&, Uplo, Schedule, const VSizes&, double* const*, int*, int);
template void vpotrs<float>(Context&, Uplo, const VSizes&, int, const float* const*, const VSizes&, float* const*, int);
template void vpotrs<double>(Context&, Uplo, const VSizes&, int, const double* const*, const VSizes&, double* const*,
                             int);
#endif

template void vgeqrf<float>(const int*, const int*, float* const*, const int*, float* const*, int, const HostOptions&);
template void vgeqrf<double>(const int*, const int*, double* const*, const int*, double* const*, int,
                             const HostOptions&);
template int vgels<float>(const int*, const int*, int, float* const*, const int*, float* const*, float* const*,
                          const int*, int*, int, const HostOptions&);
template int vgels<double>(const int*, const int*, int, double* const*, const int*, double* const*, double* const*,
                           const int*, int*, int, const HostOptions&);
template int vgetrf<float>(const int*, float* const*, const int*, int* const*, int*, int, const HostOptions&);
template int vgetrf<double>(const int*, double* const*, const int*, int* const*, int*, int, const HostOptions&);
template void vgetrs<float>(const int*, int, const float* const*, const int*, const int* const*, float* const*,
                            const int*, int, const HostOptions&);
template void vgetrs<double>(const int*, int, const double* const*, const int*, const int* const*, double* const*,
                             const int*, int, const HostOptions&);
template int vpotrf<float>(Uplo, const int*, float* const*, const int*, int*, int, const HostOptions&);
template int vpotrf<double>(Uplo, const int*, double* const*, const int*, int*, int, const HostOptions&);
template void vpotrs<float>(Uplo, const int*, int, const float* const*, const int*, float* const*, const int*, int,
                            const HostOptions&);
template void vpotrs<double>(Uplo, const int*, int, const double* const*, const int*, double* const*, const int*, int,
                             const HostOptions&);

}  // namespace starfact::batched
