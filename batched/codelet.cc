// The batched codelet: one task factors (or solves with) a slice of a strided batch. Its CPU
// implementation runs LAPACKE over the slice, its CUDA implementation our batched kernels on
// the worker's stream. The tasks:: API that cuts a batch into slices and submits them is in
// tasks.cc.
#include <starpu.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "batched/batched.hpp"
#include "batched/codelet.hpp"
#include "batched/detail.hpp"
#include "batched/slice_codelet.hpp"
#include "common/kernel_error.hpp"
#include "common/scalar_traits.hpp"
#ifdef STARFACT_HAVE_CUDA
#include <starpu_cublas_v2.h>

#include "batched/cuda/kernels.hpp"
#include "common/cuda_workers.hpp"
#endif

namespace starfact::batched {
namespace {
using detail::Op;
using Args = detail::SliceArgs;

Args unpack(const void* cl_arg) { return detail::unpack_args<Args>(cl_arg); }

/// The footprint: the shape of the problem and the slice's size, never the data's addresses.
std::uint32_t footprint(starpu_task* task) {
    const Args a = unpack(task->cl_arg);
    return detail::hash_values({static_cast<std::uint32_t>(a.m), static_cast<std::uint32_t>(a.n),
                                static_cast<std::uint32_t>(a.nrhs), static_cast<std::uint32_t>(a.uplo == Uplo::upper),
                                static_cast<std::uint32_t>(a.nominal)});
}

/// The regression's size: the flops of a nominal slice (the flops of one matrix, LAPACK's
/// counts, times the slice's matrices), so one curve a * flops^b + c covers every shape and
/// slice size of an operation. Equal for every task of one footprint.
size_t regression_size(starpu_task* task, unsigned) {
    const Args a = unpack(task->cl_arg);
    const double flops = a.flops_per_matrix * a.nominal;
    return flops < 1 ? 1 : static_cast<size_t>(std::llround(flops));
}

/// One buffer of a task: a slice of matrices (columns of a StarPU matrix of nx = one matrix's
/// storage, ny = matrices, ld = the stride between them).
template <class E>
struct Slice {
    E* base;
    int count;
    long long stride;
    E* operator[](int b) const { return base + static_cast<long long>(b) * stride; }
};

template <class E>
Slice<E> slice(void* buffer) {
    return {reinterpret_cast<E*>(STARPU_MATRIX_GET_PTR(buffer)), static_cast<int>(STARPU_MATRIX_GET_NY(buffer)),
            static_cast<long long>(STARPU_MATRIX_GET_LD(buffer))};
}

// ---- CPU implementations: LAPACKE over the slice (StarPU's CPU workers run one BLAS thread) --

template <class T>
void getrf_cpu(void* buffers[], void* cl_arg) noexcept {
    const Args a = unpack(cl_arg);
    const auto A = slice<T>(buffers[0]);
    const auto ipiv = slice<int>(buffers[1]);
    const auto info = slice<int>(buffers[2]);
    for (int b = 0; b < A.count; ++b) *info[b] = detail::getrf_one(a.n, A[b], a.lda, ipiv[b]);
}

template <class T>
void getrs_cpu(void* buffers[], void* cl_arg) noexcept {
    const Args a = unpack(cl_arg);
    const auto A = slice<T>(buffers[0]);
    const auto ipiv = slice<int>(buffers[1]);
    const auto B = slice<T>(buffers[2]);
    for (int b = 0; b < A.count; ++b) detail::getrs_one<T>(a.n, a.nrhs, A[b], a.lda, ipiv[b], B[b], a.ldb);
}

template <class T>
void potrf_cpu(void* buffers[], void* cl_arg) noexcept {
    const Args a = unpack(cl_arg);
    const auto A = slice<T>(buffers[0]);
    const auto info = slice<int>(buffers[1]);
    for (int b = 0; b < A.count; ++b) *info[b] = detail::potrf_one(a.uplo, a.n, A[b], a.lda);
}

template <class T>
void potrs_cpu(void* buffers[], void* cl_arg) noexcept {
    const Args a = unpack(cl_arg);
    const auto A = slice<T>(buffers[0]);
    const auto B = slice<T>(buffers[1]);
    for (int b = 0; b < A.count; ++b) detail::potrs_one<T>(a.uplo, a.n, a.nrhs, A[b], a.lda, B[b], a.ldb);
}

template <class T>
void geqrf_cpu(void* buffers[], void* cl_arg) noexcept {
    const Args a = unpack(cl_arg);
    const auto A = slice<T>(buffers[0]);
    const auto tau = slice<T>(buffers[1]);
    for (int b = 0; b < A.count; ++b) detail::geqrf_one(a.m, a.n, A[b], a.lda, tau[b]);
}

template <class T>
void gels_cpu(void* buffers[], void* cl_arg) noexcept {
    const Args a = unpack(cl_arg);
    const auto A = slice<T>(buffers[0]);
    const auto tau = slice<T>(buffers[1]);
    const auto B = slice<T>(buffers[2]);
    const auto info = slice<int>(buffers[3]);
    for (int b = 0; b < A.count; ++b) *info[b] = detail::gels_one(a.m, a.n, a.nrhs, A[b], a.lda, tau[b], B[b], a.ldb);
}

// ---- CUDA implementations: the batched kernels on the worker's stream -------------------------

#ifdef STARFACT_HAVE_CUDA
/// The worker's stream, cuBLAS handle and a workspace holding `arrays` pointer arrays of
/// `count` entries followed by `kernel_bytes` for the kernel; null workspace when allocation failed.
struct CudaTask {
    cuda::Launch launch;
    void* arrays = nullptr;
    std::size_t array_bytes = 0;
    bool ok = false;

    CudaTask(int count, int arrays_wanted, std::size_t kernel_bytes) {
        array_bytes = detail::round256(static_cast<std::size_t>(count) * sizeof(void*));
        const std::size_t total = array_bytes * arrays_wanted + kernel_bytes;
        void* ws = starfact::cuda::workspace(total);
        if (ws == nullptr && total > 0) {
            record_kernel_error("batched codelet: workspace allocation", static_cast<long>(total));
            return;
        }
        arrays = ws;
        launch.stream = starpu_cuda_get_local_stream();
        launch.cublas = starpu_cublas_get_local_handle();
        launch.workspace = kernel_bytes > 0 ? static_cast<char*>(ws) + array_bytes * arrays_wanted : nullptr;
        launch.workspace_bytes = kernel_bytes;
        ok = true;
    }
    /// Pointer array i, filled with the slice's matrices.
    template <class T>
    T** pointers(int i, const Slice<T>& s) const {
        T** out = reinterpret_cast<T**>(static_cast<char*>(arrays) + array_bytes * i);
        cuda::strided_pointers<T>(out, s.base, s.stride, s.count, launch.stream);
        return out;
    }
};

template <class T>
void getrf_cuda(void* buffers[], void* cl_arg) noexcept {
    detail::guarded("batched", "getrf", [&] {
        const Args a = unpack(cl_arg);
        const auto A = slice<T>(buffers[0]);
        const CudaTask t(A.count, 1, cuda::getrf_workspace<T>(a.n, A.count));
        if (!t.ok) return;
        cuda::getrf<T>(t.launch, a.n, t.pointers(0, A), a.lda, slice<int>(buffers[1]).base, slice<int>(buffers[2]).base,
                       A.count);
    });
}

template <class T>
void getrs_cuda(void* buffers[], void* cl_arg) noexcept {
    detail::guarded("batched", "getrs", [&] {
        const Args a = unpack(cl_arg);
        const auto A = slice<T>(buffers[0]);
        const auto B = slice<T>(buffers[2]);
        const CudaTask t(A.count, 2, cuda::getrs_workspace<T>(a.n, a.nrhs, A.count));
        if (!t.ok) return;
        cuda::getrs<T>(t.launch, a.n, a.nrhs, t.pointers(0, A), a.lda, slice<int>(buffers[1]).base, t.pointers(1, B),
                       a.ldb, A.count);
    });
}

template <class T>
void potrf_cuda(void* buffers[], void* cl_arg) noexcept {
    detail::guarded("batched", "potrf", [&] {
        const Args a = unpack(cl_arg);
        const auto A = slice<T>(buffers[0]);
        const CudaTask t(A.count, 1, cuda::potrf_workspace<T>(a.n, A.count));
        if (!t.ok) return;
        // The slice is one array at a fixed stride: the recursion's single gemms go strided.
        cuda::potrf_strided<T>(t.launch, a.uplo, a.n, t.pointers(0, A), A.base, A.stride, a.lda,
                               slice<int>(buffers[1]).base, A.count);
    });
}

template <class T>
void potrs_cuda(void* buffers[], void* cl_arg) noexcept {
    detail::guarded("batched", "potrs", [&] {
        const Args a = unpack(cl_arg);
        const auto A = slice<T>(buffers[0]);
        const auto B = slice<T>(buffers[1]);
        const CudaTask t(A.count, 2, cuda::potrs_workspace<T>(a.n, a.nrhs, A.count));
        if (!t.ok) return;
        cuda::potrs<T>(t.launch, a.uplo, a.n, a.nrhs, t.pointers(0, A), a.lda, t.pointers(1, B), a.ldb, A.count);
    });
}

template <class T>
void geqrf_cuda(void* buffers[], void* cl_arg) noexcept {
    detail::guarded("batched", "geqrf", [&] {
        const Args a = unpack(cl_arg);
        const auto A = slice<T>(buffers[0]);
        const CudaTask t(A.count, 1, cuda::geqrf_workspace<T>(a.m, a.n, A.count));
        if (!t.ok) return;
        cuda::geqrf<T>(t.launch, a.m, a.n, t.pointers(0, A), a.lda, slice<T>(buffers[1]).base, A.count);
    });
}

template <class T>
void gels_cuda(void* buffers[], void* cl_arg) noexcept {
    detail::guarded("batched", "gels", [&] {
        const Args a = unpack(cl_arg);
        const auto A = slice<T>(buffers[0]);
        const auto B = slice<T>(buffers[2]);
        const std::size_t bytes =
            std::max(cuda::geqrf_workspace<T>(a.m, a.n, A.count), cuda::geqrs_workspace<T>(a.m, a.n, a.nrhs, A.count));
        const CudaTask t(A.count, 2, bytes);
        if (!t.ok) return;
        T** pa = t.pointers(0, A);
        T* tau = slice<T>(buffers[1]).base;
        cuda::geqrf<T>(t.launch, a.m, a.n, pa, a.lda, tau, A.count);
        cuda::geqrs<T>(t.launch, a.m, a.n, a.nrhs, pa, a.lda, tau, t.pointers(1, B), a.ldb, slice<int>(buffers[3]).base,
                       A.count);
    });
}
#endif

// ---- the codelets and their models --------------------------------------------------------

using KernelFn = void (*)(void* buffers[], void* cl_arg);

struct Kernels {
    KernelFn cpu;
    KernelFn cuda;
};

template <class T>
Kernels kernels(Op op) {
#ifdef STARFACT_HAVE_CUDA
    switch (op) {
        case Op::getrf:
            return {getrf_cpu<T>, getrf_cuda<T>};
        case Op::getrs:
            return {getrs_cpu<T>, getrs_cuda<T>};
        case Op::potrf:
            return {potrf_cpu<T>, potrf_cuda<T>};
        case Op::potrs:
            return {potrs_cpu<T>, potrs_cuda<T>};
        case Op::geqrf:
            return {geqrf_cpu<T>, geqrf_cuda<T>};
        case Op::gels:
            return {gels_cpu<T>, gels_cuda<T>};
    }
#else
    switch (op) {
        case Op::getrf:
            return {getrf_cpu<T>, nullptr};
        case Op::getrs:
            return {getrs_cpu<T>, nullptr};
        case Op::potrf:
            return {potrf_cpu<T>, nullptr};
        case Op::potrs:
            return {potrs_cpu<T>, nullptr};
        case Op::geqrf:
            return {geqrf_cpu<T>, nullptr};
        case Op::gels:
            return {gels_cpu<T>, nullptr};
    }
#endif
    return {nullptr, nullptr};
}

/// Access modes per operation, in buffer order (see the *_cpu functions).
std::vector<starpu_data_access_mode> modes(Op op) {
    switch (op) {
        case Op::getrf:
            return {STARPU_RW, STARPU_W, STARPU_W};  // A, ipiv, info
        case Op::getrs:
            return {STARPU_R, STARPU_R, STARPU_RW};  // A, ipiv, B
        case Op::potrf:
            return {STARPU_RW, STARPU_W};  // A, info
        case Op::potrs:
            return {STARPU_R, STARPU_RW};  // A, B
        case Op::geqrf:
            return {STARPU_RW, STARPU_W};  // A, tau
        case Op::gels:
            return {STARPU_RW, STARPU_W, STARPU_RW, STARPU_W};  // A, tau, B, info
    }
    return {};
}

}  // namespace

namespace detail {

template <class T>
SliceCodelet& codelet(Op op) {
    auto make = [](Op o) {
        return std::make_unique<detail::SliceCodelet>(fmt::format("batched_{}", detail::op_name(o)),
                                                      ScalarTraits<T>::letter, kernels<T>(o).cpu, kernels<T>(o).cuda,
                                                      modes(o), footprint, regression_size);
    };
    static const std::unique_ptr<detail::SliceCodelet> cls[] = {make(Op::getrf), make(Op::getrs), make(Op::potrf),
                                                                make(Op::potrs), make(Op::geqrf), make(Op::gels)};
    return *cls[static_cast<int>(op)];
}

template SliceCodelet& codelet<float>(Op op);
template SliceCodelet& codelet<double>(Op op);

}  // namespace detail
}  // namespace starfact::batched
