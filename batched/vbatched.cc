// Variable-size batches (issue 6): argument checks, the host path (LAPACKE per matrix over
// threads) and the direct GPU path (the kernels of batched/cuda/vbatched_kernels.hpp).
#include "batched/vbatched.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string>

#include <fmt/format.h>

#include "batched/detail.hpp"
#include "common/error.hpp"

#ifdef STARFACT_HAVE_CUDA
#include "batched/cuda/vbatched_kernels.hpp"
#endif

namespace starfact::batched {
namespace {

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

/// On the host, every matrix with n[b] > 0 needs its pointer.
template <class P>
void check_pointers(const P* array, const int* n, int count, const char* name) {
    for (int b = 0; b < count; ++b)
        require(n[b] == 0 || array[b] != nullptr, name,
                fmt::format("{}[{}] is null with n[{}] = {}", name, b, b, n[b]));
}

void check_nrhs(int nrhs) { require(nrhs >= 0, "nrhs", fmt::format("nrhs = {} is negative", nrhs)); }

}  // namespace

template <class T>
int vpotrf(Uplo uplo, const int* n, T* const* A, const int* lda, int* info, int count, const HostOptions& opt) {
    check_count(count);
    check_array(n, count, "n");
    check_array(lda, count, "lda");
    check_array(A, count, "A");
    check_array(info, count, "info");
    check_sizes(n, lda, count, "lda");
    check_pointers(A, n, count, "A");
    std::atomic<int> failed{0};
    detail::for_each_matrix(count, opt.threads, [&](int b) {
        info[b] = n[b] == 0 ? 0 : detail::potrf_one(uplo, n[b], A[b], lda[b]);
        if (info[b] != 0) ++failed;
    });
    return failed.load();
}

template <class T>
void vpotrs(Uplo uplo, const int* n, int nrhs, const T* const* A, const int* lda, T* const* B, const int* ldb,
            int count, const HostOptions& opt) {
    check_count(count);
    check_nrhs(nrhs);
    check_array(n, count, "n");
    check_array(lda, count, "lda");
    check_array(A, count, "A");
    check_array(B, count, "B");
    check_array(ldb, count, "ldb");
    check_sizes(n, lda, count, "lda");
    check_sizes(n, ldb, count, "ldb");
    check_pointers(A, n, count, "A");
    check_pointers(B, n, count, "B");
    if (nrhs == 0) return;
    detail::for_each_matrix(count, opt.threads, [&](int b) {
        if (n[b] > 0) detail::potrs_one(uplo, n[b], nrhs, A[b], lda[b], B[b], ldb[b]);
    });
}

template <class T>
int vgetrf(const int* n, T* const* A, const int* lda, int* const* ipiv, int* info, int count, const HostOptions& opt) {
    check_count(count);
    check_array(n, count, "n");
    check_array(lda, count, "lda");
    check_array(A, count, "A");
    check_array(ipiv, count, "ipiv");
    check_array(info, count, "info");
    check_sizes(n, lda, count, "lda");
    check_pointers(A, n, count, "A");
    check_pointers(ipiv, n, count, "ipiv");
    std::atomic<int> failed{0};
    detail::for_each_matrix(count, opt.threads, [&](int b) {
        info[b] = n[b] == 0 ? 0 : detail::getrf_one(n[b], A[b], lda[b], ipiv[b]);
        if (info[b] != 0) ++failed;
    });
    return failed.load();
}

template <class T>
void vgetrs(const int* n, int nrhs, const T* const* A, const int* lda, const int* const* ipiv, T* const* B,
            const int* ldb, int count, const HostOptions& opt) {
    check_count(count);
    check_nrhs(nrhs);
    check_array(n, count, "n");
    check_array(lda, count, "lda");
    check_array(A, count, "A");
    check_array(ipiv, count, "ipiv");
    check_array(B, count, "B");
    check_array(ldb, count, "ldb");
    check_sizes(n, lda, count, "lda");
    check_sizes(n, ldb, count, "ldb");
    check_pointers(A, n, count, "A");
    check_pointers(ipiv, n, count, "ipiv");
    check_pointers(B, n, count, "B");
    if (nrhs == 0) return;
    detail::for_each_matrix(count, opt.threads, [&](int b) {
        if (n[b] > 0) detail::getrs_one(n[b], nrhs, A[b], lda[b], ipiv[b], B[b], ldb[b]);
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

cuda::Uplo kernel_uplo(Uplo u) { return u == Uplo::upper ? cuda::Uplo::upper : cuda::Uplo::lower; }
cuda::Schedule kernel_schedule(Schedule s) { return s == Schedule::dsse ? cuda::Schedule::dsse : cuda::Schedule::ssde; }

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
    cuda::vpotrf<T>(l, kernel_uplo(uplo), kernel_schedule(schedule),
                    nmax, a_sizes.device_n, A, a_sizes.device_ld, info, count);
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
    cuda::vpotrs<T>(l, kernel_uplo(uplo), nmax, a_sizes.device_n, nrhs, A, a_sizes.device_ld, B, b_sizes.device_ld,
                    count);
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
    cuda::vgetrf<T>(l, kernel_schedule(schedule), nmax, a_sizes.device_n,
                    A, a_sizes.device_ld, ipiv, info, count);
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
