// The variable-size batched codelet: one task factors (or solves with) a slice of a
// variable-size batch, packed into contiguous buffers. Its CPU implementation runs LAPACKE
// per matrix, its CUDA implementation the SSDE/DSSE kernels of batched/cuda/vbatched_kernels.hpp
// on the worker's stream. Also the tasks:: API of batched/vbatched.hpp, which checks a host
// batch, cuts it into slices of about equal flops, packs them, submits one task per slice and
// unpacks the results.
#include <starpu.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "batched/batched.hpp"
#include "batched/detail.hpp"
#include "batched/slice_codelet.hpp"
#include "batched/vbatched.hpp"
#include "batched/vdetail.hpp"
#include "codelets/codelet.hpp"
#include "codelets/trace.hpp"
#include "common/error.hpp"
#include "common/host_pool.hpp"
#include "common/kernel_error.hpp"
#include "common/parallel.hpp"
#include "common/runtime.hpp"
#include "common/scalar_traits.hpp"
#ifdef STARFACT_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <starpu_cublas_v2.h>

#include "batched/cuda/vbatched_kernels.hpp"
#include "common/cuda_workers.hpp"
#endif

namespace starfact::batched {
namespace {
using detail::Op;

/// One matrix of a packed slice: its shape (square operations: m = n) and where its A, B and
/// pivots or tau start in the slice's buffers, in elements. Leading dimensions are max(1, m).
struct Entry {
    int m, n;
    long long a, b, p;
};
#ifdef STARFACT_HAVE_CUDA
static_assert(sizeof(Entry) == sizeof(cuda::VSliceEntry) && offsetof(Entry, p) == offsetof(cuda::VSliceEntry, p),
              "the device reads the entries as cuda::VSliceEntry");
#endif

/// What a task needs besides its buffers: the operation, the slice's matrix count and the
/// bounds its kernels are sized for, and its flops (the model's size).
struct Args {
    Op op;
    Uplo uplo;
    Schedule schedule;
    int nrhs;
    int count;
    int mmax, nmax, kmax, mexcess, nexcess;
    double flops;
};

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

/// Buffer positions per operation (0 is always the entries).
struct Layout {
    int A = 1, P = -1, B = -1, info = -1;
};
Layout layout(Op op) {
    switch (op) {
        case Op::potrf:
            return {1, -1, -1, 2};
        case Op::potrs:
            return {1, -1, 2, -1};
        case Op::getrf:
            return {1, 2, -1, 3};
        case Op::getrs:
            return {1, 2, 3, -1};
        case Op::geqrf:
            return {1, 2, -1, -1};
        case Op::gels:
            return {1, 2, 3, 4};
    }
    return {};
}

std::vector<starpu_data_access_mode> modes(Op op) {
    switch (op) {
        case Op::potrf:
            return {STARPU_R, STARPU_RW, STARPU_W};  // entries, A, info
        case Op::potrs:
            return {STARPU_R, STARPU_R, STARPU_RW};  // entries, A, B
        case Op::getrf:
            return {STARPU_R, STARPU_RW, STARPU_W, STARPU_W};  // entries, A, ipiv, info
        case Op::getrs:
            return {STARPU_R, STARPU_R, STARPU_R, STARPU_RW};  // entries, A, ipiv, B
        case Op::geqrf:
            return {STARPU_R, STARPU_RW, STARPU_W};  // entries, A, tau
        case Op::gels:
            return {STARPU_R, STARPU_RW, STARPU_W, STARPU_RW, STARPU_W};  // entries, A, tau, B, info
    }
    return {};
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

// ---- the codelets and their models ----------------------------------------------------------

/// The variable-size codelet of one operation and precision, model "starfact_vbatched_<op>_<s|d>"
/// (regression on the slice's flops with the per-footprint history, detail::SliceCodelet).
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

void submit(detail::SliceCodelet& cl, const std::vector<starpu_data_handle_t>& handles, const Args& args) {
    detail::submit_slice(cl, handles, &args, sizeof(Args), args.flops);
}

// ---- a host batch packed into slices ----------------------------------------------------------

/// Vector handles, unregistered (the data back home, the tasks waited for) on destruction.
class Handles {
public:
    ~Handles() {
        for (starpu_data_handle_t h : h_) starpu_data_unregister(h);
    }
    starpu_data_handle_t add(void* p, std::size_t elements, std::size_t elem_size) {
        starpu_data_handle_t h = nullptr;
        starpu_vector_data_register(&h, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(p),
                                    static_cast<uint32_t>(std::max<std::size_t>(elements, 1)), elem_size);
        h_.push_back(h);
        return h;
    }

private:
    std::vector<starpu_data_handle_t> h_;
};

/// LAPACK's geqrf flop count for any shape (batched::geqrf_flops is for m >= n: negative for
/// wide matrices; LAPACK's dopla gives m < n its own formula).
double qr_flops(int m, int n) {
    if (m >= n) return geqrf_flops(m, n);
    const double dm = m, dn = n;
    const double mults = dm * (dm * (0.5 - dm / 3.0 + dn) + dn + 23.0 / 6.0);
    const double adds = dm * (dm * (0.5 - dm / 3.0 + dn) + 5.0 / 6.0);
    return mults + adds;
}

/// The flops of one matrix (never negative: StarPU's history asserts on negative flops).
double flops_of(Op op, int m, int n, int nrhs) {
    if (m == 0 || n == 0) return 0;
    switch (op) {
        case Op::potrf:
            return potrf_flops(n);
        case Op::potrs:
            return potrs_flops(n, nrhs);
        case Op::getrf:
            return getrf_flops(n);
        case Op::getrs:
            return getrs_flops(n, nrhs);
        case Op::geqrf:
            return std::max(0.0, qr_flops(m, n));
        case Op::gels:
            return std::max(0.0, gels_flops(m, n, nrhs));
    }
    return 0;
}

/// Copies the rows x cols matrix src (leading dimension lds) to dst (ldd); with a triangle
/// ('L' or 'U'), only that triangle of the leading min(rows, cols) columns is copied.
template <class E>
void copy_matrix(int rows, int cols, const E* src, long long lds, E* dst, long long ldd, char tri = 0) {
    for (int j = 0; j < cols; ++j) {
        const int lo = tri == 'L' ? j : 0;
        const int hi = tri == 'U' ? std::min(rows, j + 1) : rows;
        if (lo < hi) std::memcpy(dst + lo + j * ldd, src + lo + j * lds, sizeof(E) * static_cast<std::size_t>(hi - lo));
    }
}

/// Largest number of elements of one packed slice (StarPU's vector sizes are 32-bit).
constexpr long long kMaxSliceElements = std::numeric_limits<int>::max() / 8;

/// Runs a checked call as tasks: slices by flops, packing, one task per slice, unpacking.
/// P: ipiv (getrf, getrs) or tau (geqrf, gels) entries as void pointers.
template <class T>
int run(Op op, Uplo uplo, int count, int nrhs, const int* m_in, const int* n, const int* lda, const int* ldb,
        T* const* A, T* const* B, void* const* P, int* info, const tasks::VTaskOptions& opt) {
    require(opt.slices >= 0, "slices", fmt::format("must be >= 0 (0: the default), got {}", opt.slices));
    if (count == 0) return 0;
    detail::require_runtime();
    const bool solve = op == Op::potrs || op == Op::getrs || op == Op::gels;
    const bool pivots = op == Op::getrf || op == Op::getrs;
    const bool has_p = pivots || op == Op::geqrf || op == Op::gels;
    const bool has_info = op == Op::potrf || op == Op::getrf || op == Op::gels;
    const bool a_out = op == Op::potrf || op == Op::getrf || op == Op::geqrf || op == Op::gels;
    const auto rows = [&](int b) { return m_in != nullptr ? m_in[b] : n[b]; };
    if ((op == Op::potrs || op == Op::getrs) && nrhs == 0) return 0;

    // Per-matrix flops and packed lengths; slices by flops, split further where too long.
    std::vector<double> flops(static_cast<std::size_t>(count));
    std::vector<long long> alen(flops.size()), blen(flops.size()), plen(flops.size());
    for (int b = 0; b < count; ++b) {
        const int mb = rows(b), nb = n[b];
        flops[b] = flops_of(op, mb, nb, nrhs);
        alen[b] = static_cast<long long>(std::max(1, mb)) * nb;
        blen[b] = solve ? static_cast<long long>(std::max(1, mb)) * nrhs : 0;
        plen[b] = pivots ? nb : has_p ? std::min(mb, nb) : 0;
    }
    const int wanted = opt.slices > 0 ? opt.slices : tasks::default_slices(count, 0);
    const std::vector<int> cut = tasks::vslice_bounds(flops, wanted);
    std::vector<int> bounds{0};
    for (std::size_t s = 1; s < cut.size(); ++s) {
        long long a = 0, bb = 0;
        for (int b = cut[s - 1]; b < cut[s]; ++b) {
            if (b > bounds.back() && (a + alen[b] > kMaxSliceElements || bb + blen[b] > kMaxSliceElements)) {
                bounds.push_back(b);
                a = bb = 0;
            }
            a += alen[b];
            bb += blen[b];
        }
        bounds.push_back(cut[s]);
    }
    const int slices = static_cast<int>(bounds.size()) - 1;

    // Offsets: every slice's area starts at its own base and holds at least one element.
    std::vector<Entry> entries(flops.size());
    std::vector<long long> abase(slices + 1, 0), bbase(slices + 1, 0), pbase(slices + 1, 0);
    for (int s = 0; s < slices; ++s) {
        long long a = 0, bb = 0, p = 0;
        for (int b = bounds[s]; b < bounds[s + 1]; ++b) {
            entries[b] = {rows(b), n[b], a, bb, p};
            a += alen[b];
            bb += blen[b];
            p += plen[b];
        }
        abase[s + 1] = abase[s] + std::max(1LL, a);
        bbase[s + 1] = bbase[s] + std::max(1LL, bb);
        pbase[s + 1] = pbase[s] + std::max(1LL, p);
    }
    // Pinned buffers from the pool (pinning costs more than the copies; repeated calls reuse them).
    const std::size_t pelem = pivots ? sizeof(int) : sizeof(T);
    using host_pool::Buffer;
    Buffer hE(sizeof(Entry) * entries.size()), hA(sizeof(T) * abase[slices]), hB(solve ? sizeof(T) * bbase[slices] : 1),
        hP(has_p ? pelem * pbase[slices] : 1), hI(has_info ? sizeof(int) * entries.size() : 1);
    std::memcpy(hE.as<Entry>(), entries.data(), sizeof(Entry) * entries.size());
    std::vector<int> slice_of(flops.size());
    for (int s = 0; s < slices; ++s)
        for (int b = bounds[s]; b < bounds[s + 1]; ++b) slice_of[b] = s;
    const auto packedA = [&](int b) { return hA.as<T>() + abase[slice_of[b]] + entries[b].a; };
    const auto packedB = [&](int b) { return hB.as<T>() + bbase[slice_of[b]] + entries[b].b; };
    const auto packedP = [&](int b) { return hP.as<char>() + pelem * (pbase[slice_of[b]] + entries[b].p); };
    const char tri = op == Op::potrf ? (uplo == Uplo::lower ? 'L' : 'U') : 0;

    const std::vector<starpu_data_access_mode> m = modes(op);
    const Layout L = layout(op);
    {
        // Each slice is submitted as soon as it is packed: its transfer and kernels overlap the
        // packing of the next ones.
        Handles handles;
        for (int s = 0; s < slices; ++s) {
            const int lo = bounds[s], cnt = bounds[s + 1] - bounds[s];
            parallel_for(cnt, [&](int i) {
                const int b = lo + i, mb = rows(b), nb = n[b], ld = std::max(1, mb);
                if (mb > 0 && nb > 0) copy_matrix(mb, nb, A[b], lda[b], packedA(b), ld, tri);
                if (solve && mb > 0 && nrhs > 0) copy_matrix(mb, nrhs, B[b], ldb[b], packedB(b), ld);
                if (op == Op::getrs && nb > 0) std::memcpy(packedP(b), P[b], sizeof(int) * static_cast<std::size_t>(nb));
            });
            std::vector<starpu_data_handle_t> h(m.size());
            h[0] = handles.add(hE.as<Entry>() + lo, static_cast<std::size_t>(cnt), sizeof(Entry));
            h[L.A] = handles.add(hA.as<T>() + abase[s], static_cast<std::size_t>(abase[s + 1] - abase[s]), sizeof(T));
            if (L.B >= 0)
                h[L.B] =
                    handles.add(hB.as<T>() + bbase[s], static_cast<std::size_t>(bbase[s + 1] - bbase[s]), sizeof(T));
            if (L.P >= 0)
                h[L.P] = handles.add(hP.as<char>() + pelem * pbase[s],
                                     static_cast<std::size_t>(pbase[s + 1] - pbase[s]), pelem);
            if (L.info >= 0) h[L.info] = handles.add(hI.as<int>() + lo, static_cast<std::size_t>(cnt), sizeof(int));
            Args args{op, uplo, opt.schedule, nrhs, cnt, 0, 0, 0, 0, 0, 0.0};
            for (int b = lo; b < lo + cnt; ++b) {
                const int mb = rows(b), nb = n[b], kb = std::min(mb, nb);
                args.mmax = std::max(args.mmax, mb);
                args.nmax = std::max(args.nmax, nb);
                args.kmax = std::max(args.kmax, kb);
                args.mexcess = std::max(args.mexcess, mb - kb);
                args.nexcess = std::max(args.nexcess, nb - kb);
                args.flops += flops[b];
            }
            submit(codelet<T>(op), h, args);
        }
    }  // unregistering waits for the tasks and brings every slice home
    throw_if_kernel_error();

    if (has_info) std::memcpy(info, hI.as<int>(), sizeof(int) * entries.size());
    parallel_for(count, [&](int b) {
        const int mb = rows(b), nb = n[b], ld = std::max(1, mb);
        if (a_out && mb > 0 && nb > 0) copy_matrix(mb, nb, packedA(b), ld, A[b], lda[b], tri);
        if (solve && mb > 0 && nrhs > 0 && (!has_info || info[b] == 0))
            copy_matrix(mb, nrhs, packedB(b), ld, B[b], ldb[b]);
        if (has_p && op != Op::getrs && plen[b] > 0)
            std::memcpy(P[b], packedP(b), pelem * static_cast<std::size_t>(plen[b]));
    });
    return has_info ? detail::count_failures(info, count) : 0;
}

template <class P>
void* const* erase_mut(P* const* p) {
    // Only read through for getrs (whose pivots are const); the pointer representation is void*'s.
    return const_cast<void* const*>(reinterpret_cast<const void* const*>(p));
}

}  // namespace

namespace tasks {

std::vector<int> vslice_bounds(const std::vector<double>& flops, int slices) {
    const int count = static_cast<int>(flops.size());
    std::vector<int> bounds{0};
    if (count == 0) return bounds;
    slices = std::max(1, std::min(slices, count));
    double total = 0;
    for (double f : flops) total += std::max(0.0, f);
    double acc = 0;
    int next = 1;
    for (int b = 0; b < count && next < slices; ++b) {
        acc += total > 0 ? std::max(0.0, flops[b]) : 1.0;
        const double whole = total > 0 ? total : count;
        while (next < slices && acc >= whole * next / slices) {
            if (b + 1 > bounds.back() && b + 1 < count) bounds.push_back(b + 1);
            ++next;
        }
    }
    bounds.push_back(count);
    return bounds;
}

std::vector<std::string> vperfmodel_symbols() {
    std::vector<std::string> out;
    for (const char* op : {"getrf", "getrs", "potrf", "potrs", "geqrf", "gels"})
        for (char precision : {'s', 'd'}) out.push_back(fmt::format("starfact_vbatched_{}_{}", op, precision));
    return out;
}

template <class T>
int vpotrf(Uplo uplo, const int* n, T* const* A, const int* lda, int* info, int count, const VTaskOptions& opt) {
    vdetail::check({Op::potrf, count, 0, nullptr, n, lda, nullptr, vdetail::erase(A), nullptr, nullptr, nullptr, info});
    return run<T>(Op::potrf, uplo, count, 0, nullptr, n, lda, nullptr, A, nullptr, nullptr, info, opt);
}

template <class T>
void vpotrs(Uplo uplo, const int* n, int nrhs, const T* const* A, const int* lda, T* const* B, const int* ldb,
            int count, const VTaskOptions& opt) {
    vdetail::check({Op::potrs, count, nrhs, nullptr, n, lda, ldb, vdetail::erase(A), vdetail::erase(B)});
    run<T>(Op::potrs, uplo, count, nrhs, nullptr, n, lda, ldb, const_cast<T* const*>(A), B, nullptr, nullptr, opt);
}

template <class T>
int vgetrf(const int* n, T* const* A, const int* lda, int* const* ipiv, int* info, int count, const VTaskOptions& opt) {
    vdetail::check({Op::getrf, count, 0, nullptr, n, lda, nullptr, vdetail::erase(A), nullptr, vdetail::erase(ipiv),
                    nullptr, info});
    return run<T>(Op::getrf, Uplo::lower, count, 0, nullptr, n, lda, nullptr, A, nullptr, erase_mut(ipiv), info, opt);
}

template <class T>
void vgetrs(const int* n, int nrhs, const T* const* A, const int* lda, const int* const* ipiv, T* const* B,
            const int* ldb, int count, const VTaskOptions& opt) {
    vdetail::check(
        {Op::getrs, count, nrhs, nullptr, n, lda, ldb, vdetail::erase(A), vdetail::erase(B), vdetail::erase(ipiv)});
    run<T>(Op::getrs, Uplo::lower, count, nrhs, nullptr, n, lda, ldb, const_cast<T* const*>(A), B, erase_mut(ipiv),
           nullptr, opt);
}

template <class T>
void vgeqrf(const int* m, const int* n, T* const* A, const int* lda, T* const* tau, int count,
            const VTaskOptions& opt) {
    vdetail::check({Op::geqrf, count, 0, m, n, lda, nullptr, vdetail::erase(A), nullptr, nullptr, vdetail::erase(tau)});
    run<T>(Op::geqrf, Uplo::lower, count, 0, m, n, lda, nullptr, A, nullptr, erase_mut(tau), nullptr, opt);
}

template <class T>
int vgels(const int* m, const int* n, int nrhs, T* const* A, const int* lda, T* const* tau, T* const* B, const int* ldb,
          int* info, int count, const VTaskOptions& opt) {
    vdetail::check({Op::gels, count, nrhs, m, n, lda, ldb, vdetail::erase(A), vdetail::erase(B), nullptr,
                    vdetail::erase(tau), info});
    return run<T>(Op::gels, Uplo::lower, count, nrhs, m, n, lda, ldb, A, B, erase_mut(tau), info, opt);
}

#define STARFACT_VTASKS(T)                                                                                            \
    template int vpotrf<T>(Uplo, const int*, T* const*, const int*, int*, int, const VTaskOptions&);                  \
    template void vpotrs<T>(Uplo, const int*, int, const T* const*, const int*, T* const*, const int*, int,           \
                            const VTaskOptions&);                                                                     \
    template int vgetrf<T>(const int*, T* const*, const int*, int* const*, int*, int, const VTaskOptions&);           \
    template void vgetrs<T>(const int*, int, const T* const*, const int*, const int* const*, T* const*, const int*,   \
                            int, const VTaskOptions&);                                                                \
    template void vgeqrf<T>(const int*, const int*, T* const*, const int*, T* const*, int, const VTaskOptions&);      \
    template int vgels<T>(const int*, const int*, int, T* const*, const int*, T* const*, T* const*, const int*, int*, \
                          int, const VTaskOptions&);
STARFACT_VTASKS(float)
STARFACT_VTASKS(double)
#undef STARFACT_VTASKS

}  // namespace tasks
}  // namespace starfact::batched
