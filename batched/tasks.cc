// The tasks:: API of batched/batched.hpp: checks a call, cuts its host batch into slices of
// consecutive matrices, registers each slice with StarPU (pinning the host memory for the time
// of the call when CUDA workers exist) and submits one task of the batched codelet
// (codelet.cc) per slice, then waits for them all.
#include <starpu.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "batched/batched.hpp"
#include "batched/codelet.hpp"
#include "batched/detail.hpp"
#include "batched/slice_codelet.hpp"
#include "common/error.hpp"
#include "common/kernel_error.hpp"
#include "common/runtime.hpp"
#ifdef STARFACT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace starfact::batched {
namespace {
using detail::codelet;
using detail::Op;
using Args = detail::SliceArgs;

void submit(detail::SliceCodelet& cl, const std::vector<starpu_data_handle_t>& handles, const Args& args,
            double flops) {
    detail::submit_slice(cl, handles, &args, sizeof(Args), flops);
}

// ---- slices of a host batch as StarPU data -----------------------------------------------------

/// How `count` matrices are cut into `slices` runs of consecutive matrices (sizes differ by
/// at most one).
struct Plan {
    int count, slices;
    int first(int s) const { return s * (count / slices) + std::min(s, count % slices); }
    int size(int s) const { return first(s + 1) - first(s); }
    int nominal() const { return (count + slices - 1) / slices; }
};

/// One array of a batch: `elements` per matrix, matrix b at base + b * stride (in elements).
struct Array {
    void* base;
    long long stride;
    long long elements;
    std::size_t elem_size;
    std::size_t span_bytes(int count) const {
        return static_cast<std::size_t>((count > 1 ? (count - 1) * stride : 0) + elements) * elem_size;
    }
};

/// An array registered as one StarPU matrix per slice (nx = the elements of one matrix, ny = its
/// matrices, ld = the stride); unregistered (the data back home) on destruction.
class SliceHandles {
public:
    SliceHandles(const Array& a, const Plan& plan) {
        handles_.reserve(static_cast<std::size_t>(plan.slices));
        for (int s = 0; s < plan.slices; ++s) {
            const int ny = plan.size(s);
            const long long ld = ny > 1 ? a.stride : a.elements;
            const long long offset =
                static_cast<long long>(plan.first(s)) * a.stride * static_cast<long long>(a.elem_size);
            starpu_data_handle_t h = nullptr;
            starpu_matrix_data_register(
                &h, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(static_cast<char*>(a.base) + offset),
                static_cast<uint32_t>(ld), static_cast<uint32_t>(a.elements), static_cast<uint32_t>(ny), a.elem_size);
            handles_.push_back(h);
        }
    }
    ~SliceHandles() {
        for (starpu_data_handle_t h : handles_) starpu_data_unregister(h);
    }
    SliceHandles(const SliceHandles&) = delete;
    SliceHandles& operator=(const SliceHandles&) = delete;
    starpu_data_handle_t operator[](int s) const { return handles_[static_cast<std::size_t>(s)]; }

private:
    std::vector<starpu_data_handle_t> handles_;
};

/// Pins a host range for the time of a call when CUDA workers exist and it is not pinned yet,
/// so that StarPU's transfers are asynchronous; a range that cannot be pinned stays pageable
/// (slower transfers, same results).
class Pinned {
public:
    Pinned(const void* base, std::size_t bytes) {
#ifdef STARFACT_HAVE_CUDA
        if (base == nullptr || bytes == 0 || starpu_cuda_worker_get_count() == 0) return;
        cudaPointerAttributes attr{};
        if (cudaPointerGetAttributes(&attr, base) == cudaSuccess && attr.type != cudaMemoryTypeUnregistered) return;
        cudaGetLastError();
        if (starpu_memory_pin(const_cast<void*>(base), bytes) == 0) {
            base_ = const_cast<void*>(base);
            bytes_ = bytes;
        } else {
            cudaGetLastError();
        }
#else
        (void)base;
        (void)bytes;
#endif
    }
    ~Pinned() {
        if (base_ != nullptr) starpu_memory_unpin(base_, bytes_);
    }
    Pinned(const Pinned&) = delete;
    Pinned& operator=(const Pinned&) = delete;

private:
    void* base_ = nullptr;
    std::size_t bytes_ = 0;
};

constexpr long long kMaxSliceElements = std::numeric_limits<int>::max();

int choose_slices(const detail::Problem& p, const tasks::TaskOptions& opt, long long largest_matrix) {
    require(opt.slices >= 0, "slices", fmt::format("must be >= 0 (0: the default), got {}", opt.slices));
    require(largest_matrix <= kMaxSliceElements, p.ldb > 1 && p.nrhs > 0 ? "ldb" : "lda",
            fmt::format("one matrix of {} elements is beyond StarPU's 32-bit sizes", largest_matrix));
    require(!p.strided || p.count <= 1 || p.strideA <= std::numeric_limits<std::uint32_t>::max(), "strideA",
            "is beyond StarPU's 32-bit leading dimensions");
    require(!p.strided || p.count <= 1 || p.strideB <= std::numeric_limits<std::uint32_t>::max(), "strideB",
            "is beyond StarPU's 32-bit leading dimensions");
    int s = opt.slices > 0 ? opt.slices : tasks::default_slices(p.count, largest_matrix);
    s = std::min(s, p.count);
    // Every slice stays below 2^31 elements (StarPU computes sizes in 32 bits).
    const long long per_slice = std::max(1LL, kMaxSliceElements / std::max(1LL, largest_matrix));
    const long long least = (p.count + per_slice - 1) / per_slice;
    return static_cast<int>(std::max<long long>(s, least));
}

/// Runs one call: registers the arrays' slices, submits a task per slice, waits (unregistering
/// brings the data home) and reports a kernel failure as RuntimeError.
template <class T>
void run_tasks(Op op, const detail::Problem& p, const tasks::TaskOptions& opt, const std::vector<Array>& arrays,
               double flops_per_matrix, Uplo uplo = Uplo::lower) {
    long long largest = 1;
    for (const Array& a : arrays) largest = std::max(largest, a.elements);
    const Plan plan{p.count, choose_slices(p, opt, largest)};
    detail::require_runtime();
    std::vector<std::unique_ptr<Pinned>> pins;
    for (const Array& a : arrays) pins.push_back(std::make_unique<Pinned>(a.base, a.span_bytes(p.count)));
    {
        std::vector<std::unique_ptr<SliceHandles>> handles;
        for (const Array& a : arrays) handles.push_back(std::make_unique<SliceHandles>(a, plan));
        const Args args{p.m, p.n, p.nrhs, p.lda, p.ldb, uplo, plan.nominal(), flops_per_matrix};
        for (int s = 0; s < plan.slices; ++s) {
            std::vector<starpu_data_handle_t> h;
            for (const auto& sh : handles) h.push_back((*sh)[s]);
            submit(codelet<T>(op), h, args, flops_per_matrix * plan.size(s));
        }
    }  // unregistering waits for the tasks and brings every slice home
    throw_if_kernel_error();
}

template <class E>
Array array(const E* base, long long stride, long long elements) {
    return {const_cast<E*>(base), stride, elements, sizeof(E)};
}

}  // namespace

namespace tasks {

int default_slices(int count, long long elements_per_matrix) {
    (void)elements_per_matrix;
    const int workers = Runtime::active() ? static_cast<int>(starpu_worker_get_count()) : 1;
    return std::max(1, std::min(count, 2 * std::max(1, workers)));
}

std::vector<std::string> perfmodel_symbols() {
    std::vector<std::string> out;
    for (const char* op : {"getrf", "getrs", "potrf", "potrs", "geqrf", "gels"})
        for (char precision : {'s', 'd'}) out.push_back(fmt::format("starfact_batched_{}_{}", op, precision));
    return out;
}

namespace {
detail::Problem problem(Op op, int m, int n, int nrhs, int count, int lda, int ldb, long long strideA,
                        long long strideB) {
    detail::Problem p;
    p.op = op;
    p.m = m;
    p.n = n;
    p.nrhs = nrhs;
    p.count = count;
    p.lda = lda;
    p.ldb = ldb;
    p.strideA = strideA;
    p.strideB = strideB;
    return p;
}
long long elements(int ld, int cols) { return static_cast<long long>(ld) * cols; }
}  // namespace

template <class T>
int getrf(int n, T* A, int lda, long long strideA, int* ipiv, int* info, int count, const TaskOptions& opt) {
    detail::Problem p = problem(Op::getrf, n, n, 0, count, lda, 1, strideA, 0);
    p.A = A;
    p.ipiv = ipiv;
    p.info = info;
    detail::check(p);
    if (detail::nothing_to_do(p)) {
        detail::zero_info(info, count);
        return 0;
    }
    run_tasks<T>(Op::getrf, p, opt, {array(A, strideA, elements(lda, n)), array(ipiv, n, n), array(info, 1, 1)},
                 getrf_flops(n));
    return detail::count_failures(info, count);
}

template <class T>
void getrs(int n, int nrhs, const T* A, int lda, long long strideA, const int* ipiv, T* B, int ldb, long long strideB,
           int count, const TaskOptions& opt) {
    detail::Problem p = problem(Op::getrs, n, n, nrhs, count, lda, ldb, strideA, strideB);
    p.A = A;
    p.B = B;
    p.ipiv = ipiv;
    detail::check(p);
    if (detail::nothing_to_do(p)) return;
    run_tasks<T>(Op::getrs, p, opt,
                 {array(A, strideA, elements(lda, n)), array(ipiv, n, n), array(B, strideB, elements(ldb, nrhs))},
                 getrs_flops(n, nrhs));
}

template <class T>
int potrf(Uplo uplo, int n, T* A, int lda, long long strideA, int* info, int count, const TaskOptions& opt) {
    detail::Problem p = problem(Op::potrf, n, n, 0, count, lda, 1, strideA, 0);
    p.A = A;
    p.info = info;
    detail::check(p);
    if (detail::nothing_to_do(p)) {
        detail::zero_info(info, count);
        return 0;
    }
    run_tasks<T>(Op::potrf, p, opt, {array(A, strideA, elements(lda, n)), array(info, 1, 1)}, potrf_flops(n), uplo);
    return detail::count_failures(info, count);
}

template <class T>
void potrs(Uplo uplo, int n, int nrhs, const T* A, int lda, long long strideA, T* B, int ldb, long long strideB,
           int count, const TaskOptions& opt) {
    detail::Problem p = problem(Op::potrs, n, n, nrhs, count, lda, ldb, strideA, strideB);
    p.A = A;
    p.B = B;
    detail::check(p);
    if (detail::nothing_to_do(p)) return;
    run_tasks<T>(Op::potrs, p, opt, {array(A, strideA, elements(lda, n)), array(B, strideB, elements(ldb, nrhs))},
                 potrs_flops(n, nrhs), uplo);
}

template <class T>
void geqrf(int m, int n, T* A, int lda, long long strideA, T* tau, int count, const TaskOptions& opt) {
    detail::Problem p = problem(Op::geqrf, m, n, 0, count, lda, 1, strideA, 0);
    p.A = A;
    p.tau = tau;
    detail::check(p);
    if (detail::nothing_to_do(p)) return;
    run_tasks<T>(Op::geqrf, p, opt, {array(A, strideA, elements(lda, n)), array(tau, n, n)}, geqrf_flops(m, n));
}

template <class T>
int gels(int m, int n, int nrhs, T* A, int lda, long long strideA, T* tau, T* B, int ldb, long long strideB, int* info,
         int count, const TaskOptions& opt) {
    detail::Problem p = problem(Op::gels, m, n, nrhs, count, lda, ldb, strideA, strideB);
    p.A = A;
    p.B = B;
    p.tau = tau;
    p.info = info;
    detail::check(p);
    if (detail::nothing_to_do(p)) {
        detail::zero_info(info, count);
        return 0;
    }
    run_tasks<T>(Op::gels, p, opt,
                 {array(A, strideA, elements(lda, n)), array(tau, n, n), array(B, strideB, elements(ldb, nrhs)),
                  array(info, 1, 1)},
                 gels_flops(m, n, nrhs));
    return detail::count_failures(info, count);
}

template int getrf<float>(int, float*, int, long long, int*, int*, int, const TaskOptions&);
template int getrf<double>(int, double*, int, long long, int*, int*, int, const TaskOptions&);
template void getrs<float>(int, int, const float*, int, long long, const int*, float*, int, long long, int,
                           const TaskOptions&);
template void getrs<double>(int, int, const double*, int, long long, const int*, double*, int, long long, int,
                            const TaskOptions&);
template int potrf<float>(Uplo, int, float*, int, long long, int*, int, const TaskOptions&);
template int potrf<double>(Uplo, int, double*, int, long long, int*, int, const TaskOptions&);
template void potrs<float>(Uplo, int, int, const float*, int, long long, float*, int, long long, int,
                           const TaskOptions&);
template void potrs<double>(Uplo, int, int, const double*, int, long long, double*, int, long long, int,
                            const TaskOptions&);
template void geqrf<float>(int, int, float*, int, long long, float*, int, const TaskOptions&);
template void geqrf<double>(int, int, double*, int, long long, double*, int, const TaskOptions&);
template int gels<float>(int, int, int, float*, int, long long, float*, float*, int, long long, int*, int,
                         const TaskOptions&);
template int gels<double>(int, int, int, double*, int, long long, double*, double*, int, long long, int*, int,
                          const TaskOptions&);

}  // namespace tasks
}  // namespace starfact::batched
