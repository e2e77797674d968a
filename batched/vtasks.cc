// The tasks:: API of batched/vbatched.hpp: checks a host batch, cuts it into slices of about
// equal flops, packs each slice into contiguous pinned buffers, submits one task of the
// variable-size codelet (vcodelet.cc) per slice as soon as it is packed, and unpacks the
// results after the wait.
#include <starpu.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "batched/batched.hpp"
#include "batched/detail.hpp"
#include "batched/slice_codelet.hpp"
#include "batched/vbatched.hpp"
#include "batched/vcodelet.hpp"
#include "batched/vdetail.hpp"
#include "common/error.hpp"
#include "common/host_pool.hpp"
#include "common/kernel_error.hpp"
#include "common/parallel.hpp"
#include "common/runtime.hpp"

namespace starfact::batched {
namespace {
using detail::Op;
using vdetail::codelet;
using vdetail::Entry;
using vdetail::Layout;
using vdetail::layout;
using vdetail::modes;
using Args = vdetail::VSliceArgs;

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
