// The variable-size batched codelet: one task factors (or solves with) a slice of a
// variable-size batch, packed into contiguous buffers. Its CPU implementation runs LAPACKE
// per matrix, its CUDA implementation the SSDE/DSSE kernels of batched/cuda/vbatched_kernels.hpp
// on the worker's stream. The tasks:: API of batched/vbatched.hpp, which packs the slices and
// submits them, is in vtasks.cc.
#include <starpu.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "batched/detail.hpp"
#include "batched/slice_codelet.hpp"
#include "batched/vbatched.hpp"
#include "batched/vcodelet.hpp"
#include "batched/vdetail.hpp"
#include "common/kernel_error.hpp"
#include "common/scalar_traits.hpp"
#ifdef STARFACT_HAVE_CUDA
#include <starpu_cublas_v2.h>

#include "batched/cuda/vbatched_kernels.hpp"
#include "common/cuda_workers.hpp"
#endif

namespace starfact::batched {
namespace {
using detail::Op;
using vdetail::Entry;
using vdetail::Layout;
using vdetail::layout;
using Args = vdetail::VSliceArgs;

#ifdef STARFACT_HAVE_CUDA
static_assert(sizeof(Entry) == sizeof(cuda::VSliceEntry) && offsetof(Entry, p) == offsetof(cuda::VSliceEntry, p),
              "the device reads the entries as cuda::VSliceEntry");
#endif

Args unpack(const void* cl_arg) { return detail::unpack_args<Args>(cl_arg); }

/// The footprint: the operation's parameters, the slice's matrix count and its exact flops
/// (StarPU's history wants one flop count per footprint: slices of about equal flops would
/// otherwise share an entry with different counts, which it reports as incoherent). The
/// regression on the flops is what predicts unseen slices.
std::uint32_t footprint(starpu_task* task) {
    const Args a = unpack(task->cl_arg);
    const unsigned long long f = static_cast<unsigned long long>(std::llround(std::max(0.0, a.flops)));
    return detail::hash_values({static_cast<std::uint32_t>(a.nrhs), static_cast<std::uint32_t>(a.uplo == Uplo::upper),
                                static_cast<std::uint32_t>(a.schedule == Schedule::dsse),
                                static_cast<std::uint32_t>(a.count), static_cast<std::uint32_t>(f & 0xffffffffULL),
                                static_cast<std::uint32_t>(f >> 32)});
}

size_t regression_size(starpu_task* task, unsigned) {
    const Args a = unpack(task->cl_arg);
    return a.flops < 1 ? 1 : static_cast<size_t>(std::llround(a.flops));
}

char* buffer(void* buffers[], int i) {
    return i < 0 ? nullptr : reinterpret_cast<char*>(STARPU_VECTOR_GET_PTR(buffers[i]));
}

// ---- CPU implementation: LAPACKE per matrix (StarPU's CPU workers run one BLAS thread) -------

template <class T>
void cpu_impl(void* buffers[], void* cl_arg) noexcept {
    const Args a = unpack(cl_arg);
    const Layout L = layout(a.op);
    const auto* e = reinterpret_cast<const Entry*>(buffer(buffers, 0));
    T* A = reinterpret_cast<T*>(buffer(buffers, L.A));
    T* B = reinterpret_cast<T*>(buffer(buffers, L.B));
    char* P = buffer(buffers, L.P);
    int* info = reinterpret_cast<int*>(buffer(buffers, L.info));
    for (int b = 0; b < a.count; ++b) {
        const int m = e[b].m, n = e[b].n, ld = std::max(1, m);
        T* Ab = A + e[b].a;
        T* Bb = B != nullptr ? B + e[b].b : nullptr;
        int* ipiv = reinterpret_cast<int*>(P) + (P != nullptr ? e[b].p : 0);
        T* tau = reinterpret_cast<T*>(P) + (P != nullptr ? e[b].p : 0);
        switch (a.op) {
            case Op::potrf:
                info[b] = n == 0 ? 0 : detail::potrf_one(a.uplo, n, Ab, ld);
                break;
            case Op::potrs:
                if (n > 0 && a.nrhs > 0) detail::potrs_one<T>(a.uplo, n, a.nrhs, Ab, ld, Bb, ld);
                break;
            case Op::getrf:
                info[b] = n == 0 ? 0 : detail::getrf_one(n, Ab, ld, ipiv);
                break;
            case Op::getrs:
                if (n > 0 && a.nrhs > 0) detail::getrs_one<T>(n, a.nrhs, Ab, ld, ipiv, Bb, ld);
                break;
            case Op::geqrf:
                if (m > 0 && n > 0) detail::geqrf_one(m, n, Ab, ld, tau);
                break;
            case Op::gels:
                info[b] = m > 0 && n > 0 ? detail::gels_one(m, n, a.nrhs, Ab, ld, tau, Bb, ld) : 0;
                break;
        }
    }
}

// ---- CUDA implementation: the variable-size kernels on the worker's stream ------------------

#ifdef STARFACT_HAVE_CUDA
template <class T>
std::size_t kernel_workspace(const Args& a) {
    switch (a.op) {
        case Op::potrf:
            return cuda::vpotrf_workspace<T>(a.nmax, a.count);
        case Op::potrs:
            return cuda::vpotrs_workspace<T>(a.nmax, a.nrhs, a.count);
        case Op::getrf:
            return cuda::vgetrf_workspace<T>(a.nmax, a.count);
        case Op::getrs:
            return cuda::vgetrs_workspace<T>(a.nmax, a.nrhs, a.count);
        case Op::geqrf:
        case Op::gels:
            return cuda::vgeqrf_workspace<T>(a.count);
    }
    return 0;
}

template <class T>
void cuda_impl(void* buffers[], void* cl_arg) noexcept {
    detail::guarded("vbatched", "codelet", [&] {
        const Args a = unpack(cl_arg);
        if ((a.op == Op::potrs || a.op == Op::getrs) && a.nrhs == 0) return;
        const Layout L = layout(a.op);
        const int count = a.count;
        const std::size_t ints = detail::round256(3 * sizeof(int) * static_cast<std::size_t>(count));
        const std::size_t ptrs = detail::round256(sizeof(void*) * static_cast<std::size_t>(count));
        const std::size_t kernel = kernel_workspace<T>(a);
        const std::size_t total = ints + 3 * ptrs + kernel;
        char* ws = static_cast<char*>(starfact::cuda::workspace(total));
        if (ws == nullptr) {
            record_kernel_error("vbatched codelet: workspace allocation", static_cast<long>(total));
            return;
        }
        int* dm = reinterpret_cast<int*>(ws);
        int* dn = dm + count;
        int* dld = dn + count;
        void** pa = reinterpret_cast<void**>(ws + ints);
        void** pb = reinterpret_cast<void**>(ws + ints + ptrs);
        void** pp = reinterpret_cast<void**>(ws + ints + 2 * ptrs);
        cuda::Launch l;
        l.stream = starpu_cuda_get_local_stream();
        l.cublas = starpu_cublas_get_local_handle();
        l.workspace = kernel > 0 ? ws + ints + 3 * ptrs : nullptr;
        l.workspace_bytes = kernel;
        char* P = buffer(buffers, L.P);
        char* B = buffer(buffers, L.B);
        int* info = reinterpret_cast<int*>(buffer(buffers, L.info));
        const bool pivots = a.op == Op::getrf || a.op == Op::getrs;
        cuda::vslice_arrays(reinterpret_cast<const cuda::VSliceEntry*>(buffer(buffers, 0)), count, buffer(buffers, L.A),
                            B, sizeof(T), P, pivots ? sizeof(int) : sizeof(T), dm, dn, dld, pa,
                            B != nullptr ? pb : nullptr, P != nullptr ? pp : nullptr, l.stream);
        T* const* A = reinterpret_cast<T* const*>(pa);
        T* const* Bp = reinterpret_cast<T* const*>(pb);
        const cuda::Schedule s = vdetail::kernel_schedule(a.schedule);
        const cuda::VQrBounds q{a.mmax, a.nmax, a.kmax, a.mexcess, a.nexcess};
        switch (a.op) {
            case Op::potrf:
                cuda::vpotrf<T>(l, a.uplo, s, a.nmax, dn, A, dld, info, count);
                break;
            case Op::potrs:
                cuda::vpotrs<T>(l, a.uplo, a.nmax, dn, a.nrhs, A, dld, Bp, dld, count);
                break;
            case Op::getrf:
                cuda::vgetrf<T>(l, s, a.nmax, dn, A, dld, reinterpret_cast<int* const*>(pp), info, count);
                break;
            case Op::getrs:
                cuda::vgetrs<T>(l, a.nmax, dn, a.nrhs, A, dld, reinterpret_cast<const int* const*>(pp), Bp, dld, count);
                break;
            case Op::geqrf:
                cuda::vgeqrf<T>(l, s, q, dm, dn, A, dld, reinterpret_cast<T* const*>(pp), count);
                break;
            case Op::gels:
                cuda::vgeqrf<T>(l, s, q, dm, dn, A, dld, reinterpret_cast<T* const*>(pp), count);
                cuda::vgeqrs<T>(l, q, dm, dn, a.nrhs, A, dld, reinterpret_cast<const T* const*>(pp), Bp, dld, info,
                                count);
                break;
        }
    });
}
#endif

}  // namespace

// ---- the codelets and their models ----------------------------------------------------------

namespace vdetail {
using detail::Op;

template <class T>
detail::SliceCodelet& codelet(Op op) {
#ifdef STARFACT_HAVE_CUDA
    const detail::SliceKernel gpu = cuda_impl<T>;
#else
    const detail::SliceKernel gpu = nullptr;
#endif
    auto make = [gpu](Op o) {
        return std::make_unique<detail::SliceCodelet>(fmt::format("vbatched_{}", detail::op_name(o)),
                                                      ScalarTraits<T>::letter, cpu_impl<T>, gpu, modes(o), footprint,
                                                      regression_size);
    };
    static const std::unique_ptr<detail::SliceCodelet> cls[] = {make(Op::getrf), make(Op::getrs), make(Op::potrf),
                                                                make(Op::potrs), make(Op::geqrf), make(Op::gels)};
    return *cls[static_cast<int>(op)];
}

template detail::SliceCodelet& codelet<float>(Op op);
template detail::SliceCodelet& codelet<double>(Op op);

}  // namespace vdetail
}  // namespace starfact::batched
