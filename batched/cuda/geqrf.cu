// Batched Householder QR: geqrf (LAPACK's V/tau layout) and the least-squares solve
// geqrs, on arrays of device matrices.
//
// Small matrices (m <= kQr.small_rows, n <= 32) take one pass over memory: C lanes of a warp per
// matrix (C the power of two >= n), lane c holding column c in registers (template <T, M, C>,
// rows m..M-1 kept as zeros, which change no norm or product); lane j computes reflector j
// (LAPACK's larfg: scaled norm, beta = -sign(alpha) ||(alpha, x)||, tau = 0 for x = 0, safmin
// rescaling) and the lanes right of it apply it to their own columns, no shuffle involved. The
// kernel takes its shapes from a policy (FixedShapes here; VarShapes, each matrix its own m, n
// and lda, for vgeqrf's batches that fit it, through vgeqrf_small).
//
// Larger ones are blocked twice. A panel of ib columns (16 for matrices of at most
// kQr.narrow_rows rows, else kQr.ib = 32) is factored by one thread block: in registers when it
// has at most 512 rows (W = 16, 8 or 4 warps by the panel's height, kRegPanelCols; warp w owns
// columns w, w + W, ...; lane l rows l, l + 32, ...; the reflector goes through a
// double-buffered shared vector, so one block barrier per column; the products that apply it
// also give G = V^T V, from which the kernel forms T, LAPACK's larft, a column a step behind),
// else in shared memory or in place in global memory (then G by a batched gemm and T by
// larft_kernel). The panel's V (unit lower, explicit zeros) goes to the workspace, and so does
// Y = V T: formed by the register kernel from V staged in shared memory, by a batched gemm after
// the other one. The outer block (kQr.nb columns) is factored recursively by halves: the right
// half is updated with C -= V_L (Y_L^T C) by the left half's block reflector, then its Y is
// merged with the left half's (Y_R <- Y_R - Y_L (V_L^T Y_R), which is V [T_L T_LR; 0 T_R]
// without forming T_LR), so the trailing matrix sees one block reflector of width nb: two
// large batched gemms per outer step.
//
// geqrs gives each (matrix, right-hand side) pair one warp: Q^T b by the reflectors in order,
// then back substitution with R, the column in shared memory when it fits.
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdlib>
#include <type_traits>
#include <utility>
#include <vector>

#include "batched/cuda/common.cuh"
#include "batched/cuda/householder.cuh"
#include "batched/cuda/vbatched_kernels.hpp"
#include "common/cuda_blas.hpp"

namespace starfact::batched::cuda {
namespace {
using namespace householder;

/// Size thresholds of the batched QR kernels.
struct QrTable {
    int small_rows;                ///< m up to this (and n <= 32): the register kernel
    int small_warps;               ///< warps per block of the register kernel
    int ib;                        ///< panel width factored by one thread block (<= 32)
    int nb;                        ///< outer block width: the trailing update's rank (multiple of ib)
    std::size_t panel_smem_bytes;  ///< a panel up to this size is factored in shared memory
    int panel_warps;               ///< warps of a panel thread block (>= ib / kMaxOwned)
    int panel_warps_tall;          ///< ... when the panel has at least panel_tall_rows rows
    int panel_tall_rows;
    std::size_t chunk_bytes;       ///< the batch runs in chunks whose workspace fits in this
    int geqrs_warps;               ///< warps (one right-hand side each) per geqrs thread block
    std::size_t geqrs_smem_bytes;  ///< geqrs keeps its columns in shared memory up to this
    int narrow_rows;               ///< m up to this: the blocked path's panels have 16 columns
};
/// The thresholds in use, field by field.
constexpr QrTable qr_table() {
    QrTable t{};
    t.small_rows = 64;
    t.small_warps = 4;
    t.ib = 32;
    // nb = 64 is faster than 32 and than 128 at 1000 x 256 and 2000 x 512 (a wider outer block
    // moves the same bytes).
    t.nb = 64;
    t.panel_smem_bytes = 200 * 1024;
    t.panel_warps = 8;
    t.panel_warps_tall = 16;
    t.panel_tall_rows = 256;
    t.chunk_bytes = std::size_t(2) << 30;
    t.geqrs_warps = 4;
    t.geqrs_smem_bytes = 96 * 1024;
    // Panels of 16 columns let two to four register-panel blocks share an SM instead of one or
    // two, which is faster for 64 x 64 and 128 x 128 and slower for 256 x 256 and 512 x 512, where
    // the extra GEMM launches cost more (docs/batched.md, "QR" and "Decisions, and what was tried
    // and dropped").
    t.narrow_rows = 128;
    return t;
}
constexpr QrTable kQr = qr_table();
/// Columns a warp of the panel kernel owns at most (its dot products run side by side).
constexpr int kMaxOwned = 4;
constexpr int kLdT = 32;  ///< leading dimension of the per-matrix G and T blocks
static_assert(kQr.ib <= 32 && kQr.nb % kQr.ib == 0, "one warp holds a column of the panel's T");
static_assert(kQr.panel_warps * kMaxOwned >= kQr.ib && kQr.panel_warps_tall * kMaxOwned >= kQr.ib,
              "every panel column has an owner");

/// The outer block width: kQr.nb, or $STARFACT_BATCHED_QR_NB (a multiple of ib) for tuning sweeps.
int outer_block() {
    static const int nb = [] {
        const char* s = std::getenv("STARFACT_BATCHED_QR_NB");
        const int v = s != nullptr ? std::atoi(s) : 0;
        return v >= kQr.ib && v % kQr.ib == 0 ? v : kQr.nb;
    }();
    return nb;
}

/// The panel width of the blocked path for m rows: 16 up to kQr.narrow_rows, else kQr.ib; or
/// $STARFACT_BATCHED_QR_IB (16 or 32) for tuning sweeps.
int panel_width(int m) {
    static const int forced = [] {
        const char* s = std::getenv("STARFACT_BATCHED_QR_IB");
        const int v = s != nullptr ? std::atoi(s) : 0;
        return v == 16 || v == 32 ? v : 0;
    }();
    if (forced != 0) return forced;
    return m <= kQr.narrow_rows ? 16 : kQr.ib;
}

/// One panel of every matrix of the batch: columns row0..row0+iw-1, rows row0..m-1. When V is
/// not null, also writes the panel's V explicitly: matrix b's at V + b * vstride (leading
/// dimension ldv), rows 0..above-1 zero, then the unit lower trapezoid.
template <class T>
__global__ void __launch_bounds__(512) panel_kernel(T* const* A, int lda, int m, int row0, int iw, T* tau, int ntau,
                                                    T* V, int ldv, long long vstride, int above, bool in_smem) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ T s_tau[32];
    const int b = blockIdx.x;
    const int mp = m - row0;
    T* Ag = A[b] + row0 + static_cast<long long>(row0) * lda;
    T* P = Ag;
    int ldp = lda;
    if (in_smem) {
        P = reinterpret_cast<T*>(smem_raw);
        ldp = mp | 1;
        for (int c = 0; c < iw; ++c)
            for (int r = threadIdx.x; r < mp; r += blockDim.x) P[r + c * ldp] = Ag[r + static_cast<long long>(c) * lda];
        __syncthreads();
    }
    factor_panel<T, kMaxOwned>(P, ldp, mp, iw, s_tau);
    if (static_cast<int>(threadIdx.x) < iw)
        tau[static_cast<long long>(b) * ntau + row0 + threadIdx.x] = s_tau[threadIdx.x];
    if (V != nullptr) {
        T* Vb = V + b * vstride;
        for (int c = 0; c < iw; ++c)
            for (int r = threadIdx.x; r < above + mp; r += blockDim.x) {
                const int rr = r - above;
                Vb[r + static_cast<long long>(c) * ldv] =
                    rr > c ? P[rr + static_cast<long long>(c) * ldp] : (rr == c ? T(1) : T(0));
            }
    }
    if (in_smem)
        for (int c = 0; c < iw; ++c)
            for (int r = threadIdx.x; r < mp; r += blockDim.x) Ag[r + static_cast<long long>(c) * lda] = P[r + c * ldp];
}

/// Column c of LAPACK's larft (forward, columnwise) by one warp, in place in sT (leading
/// dimension 33): on entry columns 0..c-1 hold T and column c's strict upper part G(0:c, c) =
/// V(:, 0:c)^T v_c; on return T(0:c, c) = -tau_c T(0:c, 0:c) G(0:c, c), T(c, c) = tau_c, zeros
/// below (and a zero column where tau_c = 0, whatever G holds).
template <class T>
__device__ void larft_column(T* sT, T tc, int c, int lane) {
    T t = 0;
    if (lane < c && tc != T(0))
        for (int l = lane; l < c; ++l) t += sT[lane + 33 * l] * sT[l + 33 * c];
    __syncwarp();
    sT[lane + 33 * c] = lane < c ? (tc != T(0) ? -tc * t : T(0)) : (lane == c ? tc : T(0));
    __syncwarp();
}

/// LAPACK's larft by one warp, in place in sT: the strict upper part holds G = V^T V on entry,
/// T on return, which also goes to out (iw columns, leading dimension kLdT).
template <class T>
__device__ void larft_in_place(T* sT, const T* s_tau, int iw, int lane, T* out) {
    for (int c = 0; c < iw; ++c) larft_column(sT, s_tau[c], c, lane);
    for (int c = 0; c < iw; ++c) out[lane + kLdT * c] = sT[lane + 33 * c];
}

/// LAPACK's larfg on a column spread over a warp's registers (lane l, slot r: row l + 32 r;
/// rows past the panel hold zeros): rows c+1.. are x, row c is alpha. On return they hold v
/// and beta; returns tau (0, column untouched, when x = 0). The column is one of a panel's, so
/// c < 32: alpha is slot 0 of lane c, and only slot 0 needs masking (slots 1.. are all in x),
/// which keeps this chain, on the panel's critical path, short (the generic form compiled to
/// some 580 instructions).
template <class T, int R>
__device__ T warp_larfg_regs(T (&x)[R], int c, int lane) {
    const bool below = lane > c;  // slot 0 is in x
    // Four partial sums: a shorter dependency chain.
    T part[4] = {below ? x[0] * x[0] : T(0), 0, 0, 0};
#pragma unroll
    for (int r = 1; r < R; ++r) part[r % 4] += x[r] * x[r];
    const T ssq = warp_sum((part[0] + part[1]) + (part[2] + part[3]));
    T alpha = __shfl_sync(kFull, x[0], c);
    auto scaled_norm = [&] {
        T scale = below ? fabs(x[0]) : T(0);  // a NaN stays: fabs keeps it, nan_max too
#pragma unroll
        for (int r = 1; r < R; ++r) scale = nan_max(scale, fabs(x[r]));
        scale = warp_nan_max(scale);
        if (scale == 0) return T(0);
        T s = below ? (x[0] / scale) * (x[0] / scale) : T(0);
#pragma unroll
        for (int r = 1; r < R; ++r) s += (x[r] / scale) * (x[r] / scale);
        return scale * sqrt(warp_sum(s));
    };
    // A plain sum of squares is at least ssq_low > 0: x is not zero, and beta takes one sqrt
    // (no hypot, no norm of x) unless alpha^2 + ssq overflows.
    const bool plain = ssq >= Safe<T>::ssq_low && ssq <= Safe<T>::max;
    T beta;
    if (plain) {
        const T sum = alpha * alpha + ssq;
        beta = -copysign(sum <= Safe<T>::max ? sqrt(sum) : hypot(alpha, sqrt(ssq)), alpha);
    } else {
        const T xnorm = scaled_norm();
        if (xnorm == 0) return 0;
        beta = -copysign(hypot(alpha, xnorm), alpha);
    }
    int knt = 0;
    if (fabs(beta) < Safe<T>::min) {
        const T rsafmn = T(1) / Safe<T>::min;
        do {
            ++knt;
            if (below) x[0] *= rsafmn;
#pragma unroll
            for (int r = 1; r < R; ++r) x[r] *= rsafmn;
            beta *= rsafmn;
            alpha *= rsafmn;
        } while (fabs(beta) < Safe<T>::min && knt < 20);
        beta = -copysign(hypot(alpha, scaled_norm()), alpha);
    }
    const T tau = (beta - alpha) / beta;
    const T scal = T(1) / (alpha - beta);
    for (int k = 0; k < knt; ++k) beta *= Safe<T>::min;
    x[0] = below ? x[0] * scal : (lane == c ? beta : x[0]);
#pragma unroll
    for (int r = 1; r < R; ++r) x[r] *= scal;
    return tau;
}

/// A variable-size batch's step for the register panel kernel (vgeqrf): matrix b is at column
/// block c0 = 32 j of its own (the schedule's step less its first step), the panel of its
/// min(32, k - c0) columns and m[b] - c0 rows; m null: the fixed-size panel of the arguments.
template <class T>
struct VarPanel {
    const int* m = nullptr;
    const int* n = nullptr;
    const int* lda = nullptr;
    T* const* tau = nullptr;
    Schedule s = Schedule::dsse;
    int kmax = 0, step = 0;
};

/// Leading dimension of the register panel's V staged in shared memory (32 R rows): 4 more than
/// a multiple of 16 entries, so that the 16 doubles a half warp reads for a tensor-core
/// fragment (4 rows of each of 4 columns) fall in distinct banks.
__host__ __device__ constexpr int reg_panel_ldv(int R) { return 32 * R + 4; }

/// D += A B for one 8 x 8 x 4 FP64 tensor-core product (mma m8n8k4): lane l holds A(l / 4,
/// l % 4), B(l % 4, l / 4) and D(l / 4, 2 (l % 4) + {0, 1}).
__device__ __forceinline__ void dmma_8x8x4(double (&d)[2], double a, double b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
                 : "+d"(d[0]), "+d"(d[1])
                 : "d"(a), "d"(b));
#else
    __trap();  // not built for such devices (sm_90 only); kept so that the code compiles
#endif
}

/// One panel (mp = m - row0 <= 32 R rows, iw <= 32 columns) of every matrix, held in registers:
/// warp w owns columns w, w + W, ... (at most K), lane l rows l, l + 32, .... The owner of
/// column c computes its reflector into a double-buffered shared vector (so one barrier per
/// column suffices), the others apply it to their columns with the products of all their
/// columns side by side. Tau and V (when not null) as panel_kernel; with Tm, T (LAPACK's
/// larft) there, its column c formed at step c + 1 by the owner of column c (off the path of
/// the next reflector) from the G(0:c, c) that step c's products left; with Y too (V and Tm
/// not null; dynamic shared memory for reg_panel_ldv(R) x NCOL entries, and 2 x 32 x 36 more
/// with mergeV), Y = V T in V's layout (rows 0..above-1 zero), on the tensor cores in double (V
/// staged in shared memory), a row per thread in float; with mergeV and mergeY (double, NCOL
/// 32), Y merged with the left half's, rows 0..above-1 included (see the epilogue). NCOL / K
/// warps; the first stagger_blocks blocks, odd ones, start stagger_ns late.
template <class T, int R, int K, int NCOL>
__global__ void __launch_bounds__(32 * NCOL / K, NCOL == 32 ? K / 2 : 2 * K)  // 128 or 64 registers
    reg_panel_kernel(T* const* A, int lda, int m, int row0, int iw, T* tau, int ntau, T* V, int ldv, long long vstride,
                     int above, T* Tm, long long tstride, T* Y, const T* mergeV, const T* mergeY, int stagger_ns,
                     int stagger_blocks, VarPanel<T> var) {
    static_assert(R % 2 == 0, "the products run in pairs of rows");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ T vbuf[2][32 * R];
    __shared__ T s_tau[32];
    __shared__ T sT[32 * 33];  // G = V^T V (strict upper), then T in place
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    constexpr int W = NCOL / K;             // warps, as launched: c % W and c / W are then a mask and a shift
    constexpr int kLdV = reg_panel_ldv(R);  // V staged for Y = V T
    static_assert(NCOL == 16 || NCOL == 32, "panels of at most 16 or 32 columns");
    // With 64 registers (NCOL 16) the reflector is read from shared memory where it is used.
    constexpr bool kKeepV = NCOL == 32;
    // Every other block of the first wave starts stagger_ns late. With one block per SM, all of
    // the same length, the waves would otherwise start together and so load their panels and
    // store A, V and Y together, the memory idle in between; staggered, one half's loads and
    // stores overlap the other half's columns.
    if (var.m == nullptr && static_cast<int>(blockIdx.x) < stagger_blocks && (blockIdx.x & 1))
        for (int t = 0; t < stagger_ns; t += 1000) __nanosleep(1000);
    for (int i = threadIdx.x; i < 32 * 33; i += blockDim.x) sT[i] = 0;
    const int b = blockIdx.x;
    T* tau_b = nullptr;
    if (var.m != nullptr) {  // this matrix's panel at the step, if any (uniform over the block)
        m = var.m[b];
        if (!vqr_panel_at(var.s, var.kmax, var.step, m, var.n[b], row0, iw)) return;
        lda = var.lda[b];
        tau_b = var.tau[b] + row0;
    } else {
        tau_b = tau + static_cast<long long>(b) * ntau + row0;
    }
    const int mp = m - row0;
    T* Ag = A[b] + row0 + static_cast<long long>(row0) * lda;
    T a[K][R];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int cc = warp + k * W;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int row = lane + 32 * r;
            a[k][r] = cc < iw && row < mp ? Ag[row + static_cast<long long>(cc) * lda] : T(0);
        }
    }
    // Reflector c (tau t, v in vbuf[c & 1]) applied by this warp to its columns; for a finished
    // column cc < c the same product is G(cc, c) = v_cc^T v_c (v_c is 0 above row c and 1 at it,
    // where cc's registers hold R and beta), which T needs.
    auto apply_reflector = [&](int c, T t) {
        const T* v = vbuf[c & 1];
        T vr[kKeepV ? R : 1] = {};
        auto vrow = [&](int r) { return kKeepV ? vr[kKeepV ? r : 0] : v[lane + 32 * r]; };
        if constexpr (kKeepV) {
#pragma unroll
            for (int r = 0; r < R; ++r) vr[r] = v[lane + 32 * r];
        }
        T s[K];
#pragma unroll
        for (int k = 0; k < K; ++k) {
            // Two partial sums whatever R, so that vgeqrf's schedules, whose steps may take
            // instances of different R for the same matrix, give the same bits.
            constexpr int P = 2;
            T ps[P] = {};
            const int cc = warp + k * W;
            if (cc != c && cc < iw)
#pragma unroll
                for (int r = 0; r < R; ++r) ps[r % P] += vrow(r) * a[k][r];
            s[k] = ps[0] + ps[1];
        }
        for (int o = 16; o > 0; o /= 2)
#pragma unroll
            for (int k = 0; k < K; ++k) s[k] += __shfl_xor_sync(kFull, s[k], o);
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int cc = warp + k * W;
            if (cc < c && lane == 0) sT[cc + 33 * c] = s[k];
            if (cc > c && cc < iw) {
                const T f = t * s[k];
#pragma unroll
                for (int r = 0; r < R; ++r) a[k][r] -= f * vrow(r);
            }
        }
    };
    // (The owner of column c + 1 updating that column first and forming its reflector before
    // its other columns is slower: more barrier wait, not less.)
    for (int c = 0; c < iw; ++c) {
        T* v = vbuf[c & 1];
        if (warp == c % W) {
            const int kc = c / W;
#pragma unroll
            for (int k = 0; k < K; ++k)
                if (k == kc) {
                    const T t = warp_larfg_regs(a[k], c, lane);
                    v[lane] = lane > c ? a[k][0] : (lane == c ? T(1) : T(0));  // c < 32: slot 0 only
#pragma unroll
                    for (int r = 1; r < R; ++r) v[lane + 32 * r] = a[k][r];
                    if (lane == 0) s_tau[c] = t;
                }
        }
        __syncthreads();
        const T t = s_tau[c];
        if (t != T(0)) apply_reflector(c, t);  // else H = I, as LAPACK's larf
        // T's column c-1 (G(0:c-1, c-1) complete since the barrier above, columns 0..c-2 formed
        // before) by the owner of column c-1 after its own updates, while the owner of column
        // c+1 forms that reflector: off the critical path, which the larft had lengthened.
        if (Tm != nullptr && c > 0 && warp == (c - 1) % W) larft_column(sT, s_tau[c - 1], c - 1, lane);
    }
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < iw) tau_b[threadIdx.x] = s_tau[threadIdx.x];
    if (Tm != nullptr && warp == (iw - 1) % W) {
        larft_column(sT, s_tau[iw - 1], iw - 1, lane);
        T* out = Tm + b * tstride;
        for (int c = 0; c < iw; ++c) out[lane + kLdT * c] = sT[lane + 33 * c];
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int cc = warp + k * W;
        if (cc >= iw) continue;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int row = lane + 32 * r;
            if (row < mp) Ag[row + static_cast<long long>(cc) * lda] = a[k][r];
        }
        if (V != nullptr) {
            T* Vc = V + b * vstride + static_cast<long long>(cc) * ldv;
            for (int i = lane; i < above; i += 32) Vc[i] = 0;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int row = lane + 32 * r;
                const T vr = row < mp ? (row > cc ? a[k][r] : (row == cc ? T(1) : T(0))) : T(0);
                if (row < mp) Vc[above + row] = vr;
                if (Y != nullptr) reinterpret_cast<T*>(smem_raw)[row + kLdV * cc] = vr;
            }
        }
    }
    if (Y == nullptr) return;
    const T* sV = reinterpret_cast<const T*>(smem_raw);
    T* Yb = Y + b * vstride;
    const bool merging = mergeV != nullptr;  // (double, NCOL 32 only: see below)
    if (!merging)
        for (int i = threadIdx.x; i < above * iw; i += blockDim.x)
            Yb[i % above + static_cast<long long>(i / above) * ldv] = 0;
    // T row-major with leading dimension 36 (for the fragments' banks, as kLdV) or 32.
    constexpr bool kTensor = std::is_same<T, double>::value;
    constexpr int kLdTr = kTensor ? 36 : 32;
    __shared__ __align__(16) T sTr[32 * kLdTr];
    __syncthreads();  // V staged, T complete in sT
    for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x)
        sTr[(i >> 5) * kLdTr + (i & 31)] = sT[(i >> 5) + 33 * (i & 31)];
    __syncthreads();
    if constexpr (kTensor) {
        // Y = V T on the tensor cores: warp w takes RF row tiles of 8 (rows 8 RF w .. < 32 R), every
        // tile column j of T's NCOL / 8, and only the k-steps (4 rows of T) where T(:, 8j..8j+7)
        // is not zero (upper triangular: rows up to 8j + 7). V's columns past the panel were not
        // staged: read as zeros.
        constexpr int RF = (4 * R + W - 1) / W, CF = NCOL / 8;  // the last warps may have fewer
        const int g = lane >> 2, q = lane & 3;
        const int r0 = 8 * RF * warp;
        // With mergeV and mergeY (the left half's V_L and Y_L, 32 columns, rows from the outer
        // block's top, where this panel's row p is row above + p), Y becomes the merged block
        // reflector's right half, Y_R - Y_L (V_L^T Y_R) = V_R T_R - Y_L (X T_R) with X = V_L^T V_R,
        // in place of two batched gemms after the kernel: X by tiles of 8 x 8, a warp each, over
        // all of the panel's rows; Z = X T_R, negated, in shared memory after V (kLdTr = 36 both).
        double* sX = reinterpret_cast<double*>(smem_raw) + kLdV * NCOL;
        double* sZ = sX + 32 * 36;
        if constexpr (NCOL == 32) {
            if (merging) {
                const double* VL = mergeV + b * vstride + above;  // VL[p + l ldv] = V_L(panel row p, l)
                for (int t = warp; t < 16; t += W) {
                    const int ti = t >> 2, tj = t & 3;
                    const bool col_ok = 8 * tj + g < iw;  // V_R's columns past the panel: not staged
                    const double* vl = VL + static_cast<long long>(8 * ti + g) * ldv;
                    const double* vr = sV + kLdV * (8 * tj + g);
                    double x0[2] = {0, 0}, x1[2] = {0, 0};  // two chains
                    int p0 = 0;
                    for (; p0 + 8 <= mp; p0 += 8) {
                        const double a0 = vl[p0 + q], a1 = vl[p0 + 4 + q];
                        const double b0 = col_ok ? vr[p0 + q] : 0.0, b1 = col_ok ? vr[p0 + 4 + q] : 0.0;
                        dmma_8x8x4(x0, a0, b0);
                        dmma_8x8x4(x1, a1, b1);
                    }
                    for (; p0 < mp; p0 += 4) {
                        const int p = p0 + q;
                        const double a0 = p < mp ? vl[p] : 0.0;
                        const double b0 = p < mp && col_ok ? vr[p] : 0.0;
                        dmma_8x8x4(x0, a0, b0);
                    }
#pragma unroll
                    for (int e = 0; e < 2; ++e) sX[(8 * ti + g) * 36 + 8 * tj + 2 * q + e] = x0[e] + x1[e];
                }
                __syncthreads();
                for (int t = warp; t < 16; t += W) {
                    const int ti = t >> 2, tj = t & 3;
                    double z[2] = {0, 0};
#pragma unroll
                    for (int kk = 0; kk < 8; ++kk) {
                        if (kk > 2 * tj + 1) break;  // T(4kk.., 8tj..) = 0
                        dmma_8x8x4(z, sX[(8 * ti + g) * 36 + 4 * kk + q], sTr[(4 * kk + q) * kLdTr + 8 * tj + g]);
                    }
#pragma unroll
                    for (int e = 0; e < 2; ++e) sZ[(8 * ti + g) * 36 + 8 * tj + 2 * q + e] = -z[e];
                }
                __syncthreads();
                // Rows above the panel (above is a multiple of 8): Y_R there is -Y_L Z alone.
                const double* YL = mergeY + b * vstride;
                for (int t = warp; t < (above / 8) * CF; t += W) {
                    const int ti = t / CF, tj = t % CF;
                    double y2[2] = {0, 0};
#pragma unroll
                    for (int kk = 0; kk < 8; ++kk)
                        dmma_8x8x4(y2, YL[8 * ti + g + static_cast<long long>(4 * kk + q) * ldv],
                                   sZ[(4 * kk + q) * 36 + 8 * tj + g]);
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int cc = 8 * tj + 2 * q + e;
                        if (cc < iw) Yb[8 * ti + g + static_cast<long long>(cc) * ldv] = y2[e];
                    }
                }
            }
        }
        double acc[RF][CF][2];
#pragma unroll
        for (int i = 0; i < RF; ++i)
#pragma unroll
            for (int j = 0; j < CF; ++j) acc[i][j][0] = acc[i][j][1] = 0;
#pragma unroll
        for (int kk = 0; kk < NCOL / 4; ++kk) {
            const int l = 4 * kk + q;  // this lane's column of V, row of T
            double va[RF];
#pragma unroll
            for (int i = 0; i < RF; ++i) va[i] = l < iw && r0 + 8 * i < 32 * R ? sV[r0 + 8 * i + g + kLdV * l] : 0.0;
#pragma unroll
            for (int j = 0; j < CF; ++j) {
                if (kk > 2 * j + 1) continue;  // T(4kk.., 8j..) = 0
                const double tb = sTr[l * kLdTr + 8 * j + g];
#pragma unroll
                for (int i = 0; i < RF; ++i) dmma_8x8x4(acc[i][j], va[i], tb);
            }
        }
        if constexpr (NCOL == 32) {
            if (merging) {
                const double* YL = mergeY + b * vstride + above;  // YL[p + l ldv] = Y_L(panel row p, l)
#pragma unroll
                for (int kk = 0; kk < 8; ++kk) {
                    const int l = 4 * kk + q;
                    double ya[RF];
#pragma unroll
                    for (int i = 0; i < RF; ++i) {
                        const int row = r0 + 8 * i + g;
                        ya[i] = r0 + 8 * i < 32 * R && row < mp ? YL[row + static_cast<long long>(l) * ldv] : 0.0;
                    }
#pragma unroll
                    for (int j = 0; j < CF; ++j) {
                        const double bz = sZ[l * 36 + 8 * j + g];
#pragma unroll
                        for (int i = 0; i < RF; ++i) dmma_8x8x4(acc[i][j], ya[i], bz);
                    }
                }
            }
        }
#pragma unroll
        for (int i = 0; i < RF; ++i) {
            const int row = r0 + 8 * i + g;
            if (row >= mp) continue;
            T* Yr = Yb + above + row;
#pragma unroll
            for (int j = 0; j < CF; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int cc = 8 * j + 2 * q + e;
                    if (cc < iw) Yr[static_cast<long long>(cc) * ldv] = acc[i][j][e];
                }
        }
    } else {
        // By rows: a thread per row of the panel, T read row by row (two entries a load, the
        // same address across the warp), V's row once.
        using Pair = typename std::conditional<sizeof(T) == 8, double2, float2>::type;
        static_assert(R <= W, "a thread per row of the panel");
        const int row = threadIdx.x;
        if (row < mp) {
            T y[NCOL];
#pragma unroll
            for (int cc = 0; cc < NCOL; ++cc) y[cc] = 0;
#pragma unroll
            for (int l = 0; l < NCOL; ++l) {
                const T vl = l < iw ? sV[row + kLdV * l] : T(0);  // columns past the panel: not staged
                // T is upper triangular: columns from l (from l - 1 for an aligned pair: T(l, l-1) = 0).
#pragma unroll
                for (int cc = l & ~1; cc < NCOL; cc += 2) {
                    const Pair t = *reinterpret_cast<const Pair*>(sTr + kLdTr * l + cc);
                    y[cc] += vl * t.x;
                    y[cc + 1] += vl * t.y;
                }
            }
            T* Yr = Yb + above + row;
#pragma unroll
            for (int cc = 0; cc < NCOL; ++cc)
                if (cc < iw) Yr[static_cast<long long>(cc) * ldv] = y[cc];
        }
    }
}

/// LAPACK's larft (forward, columnwise) from the Gram matrix G = V^T V of a panel: T(0:c, c) =
/// -tau_c T(0:c, 0:c) G(0:c, c), T(c, c) = tau_c, zeros below. One warp per matrix; G and T
/// are iw x iw blocks with leading dimension kLdT at b * stride.
template <class T>
__global__ void larft_kernel(const T* G, T* Tm, long long stride, const T* tau, int ntau, int col0, int iw, int count) {
    __shared__ T s[4][32 * 33];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long b = static_cast<long long>(blockIdx.x) * 4 + warp;
    if (b >= count) return;  // whole warps only: no block barrier below
    T* sT = s[warp];
    const T* g = G + b * stride;
    for (int c = 0; c < iw; ++c) sT[lane + 33 * c] = lane < iw ? g[lane + kLdT * c] : T(0);
    __shared__ T s_tau[4][32];
    if (lane < iw) s_tau[warp][lane] = tau[b * ntau + col0 + lane];
    __syncwarp();
    larft_in_place(sT, s_tau[warp], iw, lane, Tm + b * stride);
}

/// LAPACK's larfg on the column a (rows j..m-1; rows m..M-1 are zeros) held by one lane.
template <class T, int M>
__device__ T lane_larfg(T (&a)[M], int j) {
    T alpha = 0, ssq = 0;
#pragma unroll
    for (int i = 0; i < M; ++i) {
        if (i == j) alpha = a[i];
        if (i > j) ssq += a[i] * a[i];
    }
    auto scaled_norm = [&] {
        T scale = 0;
#pragma unroll
        for (int i = 0; i < M; ++i)
            if (i > j) scale = nan_max(scale, fabs(a[i]));
        if (scale == 0) return T(0);
        T s = 0;
#pragma unroll
        for (int i = 0; i < M; ++i)
            if (i > j) s += (a[i] / scale) * (a[i] / scale);
        return scale * sqrt(s);
    };
    T xnorm = ssq >= Safe<T>::ssq_low && ssq <= Safe<T>::max ? sqrt(ssq) : scaled_norm();
    if (xnorm == 0) return 0;
    T beta = -copysign(hypot(alpha, xnorm), alpha);
    int knt = 0;
    if (fabs(beta) < Safe<T>::min) {
        const T rsafmn = T(1) / Safe<T>::min;
        do {
            ++knt;
#pragma unroll
            for (int i = 0; i < M; ++i)
                if (i > j) a[i] *= rsafmn;
            beta *= rsafmn;
            alpha *= rsafmn;
        } while (fabs(beta) < Safe<T>::min && knt < 20);
        xnorm = scaled_norm();
        beta = -copysign(hypot(alpha, xnorm), alpha);
    }
    const T tau = (beta - alpha) / beta;
    const T scal = T(1) / (alpha - beta);
    for (int k = 0; k < knt; ++k) beta *= Safe<T>::min;
#pragma unroll
    for (int i = 0; i < M; ++i) {
        if (i > j) a[i] *= scal;
        if (i == j) a[i] = beta;
    }
    return tau;
}

/// The shapes of a fixed-size batch for small_kernel: every matrix m x n (m >= n), leading
/// dimension lda, matrix b's tau at tau + b * n.
template <class T>
struct FixedShapes {
    int m, n, lda;
    T* tau;
    __device__ int rows(long long) const { return m; }
    __device__ int cols(long long) const { return n; }
    __device__ int ld(long long) const { return lda; }
    __device__ T* tau_of(long long b) const { return tau + b * n; }
};

/// The shapes of a variable-size batch (vgeqrf): matrix b is m[b] x n[b] (any shape), leading
/// dimension lda[b], its min(m[b], n[b]) tau at tau[b].
template <class T>
struct VarShapes {
    const int* m;
    const int* n;
    const int* lda;
    T* const* tau;
    __device__ int rows(long long b) const { return m[b]; }
    __device__ int cols(long long b) const { return n[b]; }
    __device__ int ld(long long b) const { return lda[b]; }
    __device__ T* tau_of(long long b) const { return tau[b]; }
};

/// Whole small matrices (m <= M, n <= C, each its own shape from `sh`): C lanes per matrix,
/// 32 / C matrices per warp, lane c of a group holding column c in registers; staged through
/// shared memory so that global memory is read and written once, coalesced. Matrix b gets
/// min(m, n) reflectors (LAPACK's geqr2: the last one of a matrix with m <= n has tau = 0).
template <class T, int M, int C, class Shapes>
__global__ void __launch_bounds__(128) small_kernel(T* const* A, Shapes sh, int count) {
    constexpr int G = 32 / C;  // matrices per warp
    constexpr int LD = M + 1;  // odd: lanes reading different columns hit different banks
    constexpr int kWarpElems = G * C * LD + G * (M + 1);
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    T* stage = reinterpret_cast<T*>(smem_raw) + warp * kWarpElems;
    const int g = lane / C, c = lane % C;
    T* v = stage + G * C * LD + g * (M + 1);  // this group's reflector; v[M] holds tau
    const long long first = (static_cast<long long>(blockIdx.x) * (blockDim.x >> 5) + warp) * G;
    for (int q = 0; q < G && first + q < count; ++q) {
        const int mq = sh.rows(first + q), mn = mq * sh.cols(first + q), ldq = sh.ld(first + q);
        const T* src = A[first + q];
        for (int e = lane; e < mn; e += 32) {
            const int i = e % mq, j = e / mq;
            stage[q * C * LD + j * LD + i] = src[i + static_cast<long long>(j) * ldq];
        }
    }
    __syncwarp();
    const long long b = first + g;
    const int mb = b < count ? sh.rows(b) : 0, nb = b < count ? sh.cols(b) : 0, kb = min(mb, nb);
    const bool active = c < nb;
    T a[M];
#pragma unroll
    for (int i = 0; i < M; ++i) a[i] = active && i < mb ? stage[(g * C + c) * LD + i] : T(0);
    int steps = kb;  // the warp's most reflectors
    for (int o = 16; o > 0; o /= 2) steps = max(steps, __shfl_xor_sync(kFull, steps, o));
    T my_tau = 0;
    for (int j = 0; j < steps; ++j) {
        if (active && c == j && j < kb) {
            my_tau = lane_larfg(a, j);
#pragma unroll
            for (int i = 0; i < M; ++i) v[i] = i > j ? a[i] : (i == j ? T(1) : T(0));
            v[M] = my_tau;
        }
        __syncwarp();
        if (active && c > j && j < kb) {
            const T t = v[M];
            if (t != T(0)) {
                T s0 = 0, s1 = 0;
#pragma unroll
                for (int i = 0; i < M; i += 2) {
                    if (i >= j) s0 += v[i] * a[i];
                    if (i + 1 >= j && i + 1 < M) s1 += v[i + 1] * a[i + 1];
                }
                const T s = t * (s0 + s1);
#pragma unroll
                for (int i = 0; i < M; ++i)
                    if (i >= j) a[i] -= s * v[i];
            }
        }
        __syncwarp();
    }
    if (active) {
#pragma unroll
        for (int i = 0; i < M; ++i)
            if (i < mb) stage[(g * C + c) * LD + i] = a[i];
        if (c < kb) sh.tau_of(b)[c] = my_tau;
    }
    __syncwarp();
    for (int q = 0; q < G && first + q < count; ++q) {
        const int mq = sh.rows(first + q), mn = mq * sh.cols(first + q), ldq = sh.ld(first + q);
        T* dst = A[first + q];
        for (int e = lane; e < mn; e += 32) {
            const int i = e % mq, j = e / mq;
            dst[i + static_cast<long long>(j) * ldq] = stage[q * C * LD + j * LD + i];
        }
    }
}

/// One warp per (matrix, right-hand side): info from R's diagonal, then Q^T b and R^{-1}.
template <class T>
__global__ void geqrs_kernel(int m, int n, int nrhs, const T* const* A, int lda, const T* tau, T* const* B, int ldb,
                             int* info, int count, bool in_smem) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int ncols = max(nrhs, 1);
    const long long g = static_cast<long long>(blockIdx.x) * (blockDim.x >> 5) + warp;
    if (g >= static_cast<long long>(count) * ncols) return;  // whole warps only: no block barrier below
    const int b = static_cast<int>(g / ncols), col = static_cast<int>(g % ncols);
    const T* Ab = A[b];
    int first = INT_MAX;
    for (int j = lane; j < n; j += 32)
        if (Ab[j + static_cast<long long>(j) * lda] == T(0)) {
            first = j + 1;
            break;
        }
    for (int o = 16; o > 0; o /= 2) first = min(first, __shfl_xor_sync(kFull, first, o));
    if (col == 0 && lane == 0) info[b] = first == INT_MAX ? 0 : first;
    if (first != INT_MAX || col >= nrhs) return;
    T* Bg = B[b] + static_cast<long long>(col) * ldb;
    T* x = Bg;
    if (in_smem) {
        x = reinterpret_cast<T*>(smem_raw) + static_cast<long long>(warp) * m;
        for (int i = lane; i < m; i += 32) x[i] = Bg[i];
        __syncwarp();
    }
    const T* tb = tau + static_cast<long long>(b) * n;
    for (int j = 0; j < n; ++j) {
        const T t = tb[j];
        if (t == T(0)) continue;
        warp_apply(Ab + static_cast<long long>(j) * lda, t, x, j, m, lane);
    }
    for (int j = n - 1; j >= 0; --j) {
        const T* r = Ab + static_cast<long long>(j) * lda;
        const T xj = x[j] / r[j];
        __syncwarp();
        if (lane == 0) x[j] = xj;
        for (int i = lane; i < j; i += 32) x[i] -= xj * r[i];
        __syncwarp();
    }
    if (in_smem)
        for (int i = lane; i < m; i += 32) Bg[i] = x[i];
}

// cuBLAS's batched GEMMs with alpha and beta by value (host pointer mode, see HostPointerMode).
template <class T>
cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, T alpha,
                            const T* const* A, int lda, const T* const* B, int ldb, T beta, T* const* C, int ldc,
                            int count) {
    return cublas::gemm_batched(h, ta, tb, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc, count);
}

/// Host pointer mode for our alpha/beta while the call runs; the caller's mode afterwards.
class HostPointerMode {
public:
    explicit HostPointerMode(cublasHandle_t h) : h_(h) {
        detail::check(cublasGetPointerMode(h_, &saved_), "cublasGetPointerMode");
        detail::check(cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
    }
    ~HostPointerMode() { cublasSetPointerMode(h_, saved_); }
    HostPointerMode(const HostPointerMode&) = delete;
    HostPointerMode& operator=(const HostPointerMode&) = delete;

private:
    cublasHandle_t h_;
    cublasPointerMode_t saved_ = CUBLAS_POINTER_MODE_HOST;
};

template <class T>
cublasStatus_t gemm_strided(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, T alpha,
                            const T* A, int lda, long long sa, const T* B, int ldb, long long sb, T beta, T* C, int ldc,
                            long long sc, int count) {
    return cublas::gemm_strided_batched(h, ta, tb, m, n, k, &alpha, A, lda, sa, B, ldb, sb, &beta, C, ldc, sc, count);
}

constexpr int kSmallRowsMax = 64;  // the largest row bound M of small_kernel's instantiations
static_assert(kQr.small_rows <= kSmallRowsMax, "small_kernel has no instantiation for these rows");

/// How geqrf runs a given problem: which path, the outer block, and how many matrices go
/// through the workspace at once.
struct QrPlan {
    enum class Path { small, panel, blocked };
    Path path = Path::small;
    int nb = 0;
    int ib = kQr.ib;  ///< panel width
    int chunk = 0;
    int arrays = 0;                                     ///< pointer arrays of `chunk` entries
    int c_arrays = 0;                                   ///< of which for the sub-blocks of A the gemms update, at most
    std::size_t v_elems = 0, w_elems = 0, t_elems = 0;  ///< per matrix: V (= Y), W, G (= T)

    template <class T>
    static QrPlan make(int m, int n, int count) {
        QrPlan p;
        p.chunk = count;
        if (m <= kQr.small_rows && n <= 32) return p;
        p.path = n <= kQr.ib ? Path::panel : Path::blocked;
        if (p.path == Path::panel || count <= 0) return p;
        p.ib = panel_width(m);
        p.nb = std::min(outer_block(), n);
        p.v_elems = static_cast<std::size_t>(m) * p.nb;
        p.w_elems = static_cast<std::size_t>(p.nb) * n;
        p.t_elems = static_cast<std::size_t>(kLdT) * kLdT;
        int top = p.ib;  // the outer block's recursion: top / ib panels, fewer updates
        while (top < p.nb) top *= 2;
        p.c_arrays = detail::ceil_div(n, p.nb) * (top / p.ib);
        p.arrays = 4 + 2 * detail::ceil_div(p.nb, p.ib) + p.c_arrays;
        const std::size_t per = (2 * p.v_elems + p.w_elems + 2 * p.t_elems) * sizeof(T) + p.arrays * sizeof(T*);
        p.chunk = static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(count, kQr.chunk_bytes / per)));
        return p;
    }
    template <class T>
    std::size_t bytes() const {
        if (path != Path::blocked) return 0;
        const std::size_t c = static_cast<std::size_t>(chunk);
        auto r = [](std::size_t b) { return detail::WorkspaceCarver::round(b); };
        return 2 * r(c * v_elems * sizeof(T)) + r(c * w_elems * sizeof(T)) + 2 * r(c * t_elems * sizeof(T)) +
               r(c * arrays * sizeof(T*));
    }
};

constexpr int kRegPanelSlots = 16;  ///< rows per lane of the register panel kernel at most (mp <= 512)
/// Columns per warp (32 / K warps) of the register panel kernel for R = 2, 4, 8 (and 6), 16 (and
/// 10, 12, 14) rows per lane: fewer warps for short panels, so that more blocks share a multiprocessor.
/// R = 6, 10, 12 and 14 (panels of 129-192, 257-320, 321-384 and 385-448 rows) cut the rows of
/// zeros a panel carries, a little faster at 2000 x 512 and 1000 x 256; their products keep two
/// partial sums like the others (see the kernel: vgeqrf's schedules need the same bits). Of the
/// counts tried at n = 64, 128, 256 and 512 (16 warps everywhere, {4, 4, 4, 2}, {8, 8, 4, 2},
/// {4, 4, 2, 2}), {8, 4, 4, 2} is the fastest or within noise of it at every order.
constexpr int kRegPanelCols[4] = {8, 4, 4, 2};
static_assert(kQr.ib <= 32, "every panel column has an owner");

/// One register panel launch on the host side: reg_panel_kernel's arguments but the first
/// wave's stagger, which launch_reg_panel adds.
template <class T>
struct RegPanelArgs {
    T* const* A = nullptr;
    int lda = 0, m = 0, row0 = 0, iw = 0;
    T* tau = nullptr;
    int ntau = 0;
    T* V = nullptr;
    int ldv = 0;
    long long vstride = 0;
    int above = 0;
    T* Tm = nullptr;
    long long tstride = 0;
    T* Y = nullptr;
    const T* mergeV = nullptr;
    const T* mergeY = nullptr;
    VarPanel<T> var;
};

template <class T, int R, int K, int NCOL>
void launch_reg_panel(const Launch& launch, const RegPanelArgs<T>& p, int count) {
    // The first wave's stagger, for the instances that run one block per SM (512 threads, 128
    // registers): 1500 ns per row per lane (for 512 rows, about a third of a block's time), or
    // $STARFACT_BATCHED_QR_STAGGER_NS for tuning. At 2000 x 512 that is faster than a shorter
    // stagger and than none: the blocks' loads and stores stop coinciding.
    static const int stagger_ns = [] {
        const char* e = std::getenv("STARFACT_BATCHED_QR_STAGGER_NS");
        const bool one_per_sm = NCOL == 32 && K == 2;
        const int ns = e != nullptr ? std::atoi(e) : 1500 * R;
        return one_per_sm ? std::max(0, ns) : 0;
    }();
    int sms = 0, dev = 0;  // the current device's, read at every launch (several GPUs may differ)
    detail::check(cudaGetDevice(&dev), "geqrf register panel (device)");
    detail::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "geqrf register panel (SMs)");
    const std::pair<int, int> stagger{stagger_ns, sms};
    // V staged for Y, and X and Z of the merge after it.
    const std::size_t smem =
        p.Y != nullptr ? sizeof(T) * (reg_panel_ldv(R) * NCOL + (p.mergeV != nullptr ? 2 * 32 * 36 : 0)) : 0;
    // With the static arrays (sTr among them) the total passes 48 KiB already at R = 4 in double.
    if (smem > 0) detail::opt_in_shared(reg_panel_kernel<T, R, K, NCOL>, "geqrf register panel shared memory");
    reg_panel_kernel<T, R, K, NCOL><<<count, 32 * (NCOL / K), smem, launch.stream>>>(
        p.A, p.lda, p.m, p.row0, p.iw, p.tau, p.ntau, p.V, p.ldv, p.vstride, p.above, p.Tm, p.tstride, p.Y, p.mergeV,
        p.mergeY, stagger.first, stagger.second, p.var);
    detail::check_launch("geqrf register panel");
}

/// Rows per lane R of the register panel by the panel's height: the smallest R that holds it
/// (R even, the products running in pairs of rows), with the warps of kRegPanelCols[cols].
struct RegPanelRows {
    int max_rows;  ///< panels of up to this many rows (32 R)
    int R;         ///< rows per lane
    int cols;      ///< index into kRegPanelCols
};
constexpr RegPanelRows kRegPanelRows[] = {
    {64, 2, 0}, {128, 4, 1}, {192, 6, 2}, {256, 8, 2}, {320, 10, 3}, {384, 12, 3}, {448, 14, 3}, {512, 16, 3},
};
constexpr int kRegPanelRowCount = static_cast<int>(sizeof(kRegPanelRows) / sizeof(kRegPanelRows[0]));
static_assert(kRegPanelRows[kRegPanelRowCount - 1].max_rows == 32 * kRegPanelSlots, "the last row covers the slots");

/// The register panel for mp <= 32 kRegPanelSlots rows and NCOL (16 or 32) >= iw columns: the
/// first row I.. of kRegPanelRows that holds the panel (the last one for any taller panel).
template <class T, int NCOL, int I = 0>
void launch_reg_panel_rows(const Launch& launch, const RegPanelArgs<T>& p, int count) {
    constexpr int D = 32 / NCOL;  // NCOL 16: the same warps, each with half the columns
    constexpr RegPanelRows rows = kRegPanelRows[I];
    if constexpr (I + 1 < kRegPanelRowCount) {
        if (p.m - p.row0 > rows.max_rows) {
            launch_reg_panel_rows<T, NCOL, I + 1>(launch, p, count);
            return;
        }
    }
    launch_reg_panel<T, rows.R, kRegPanelCols[rows.cols] / D, NCOL>(launch, p, count);
}

/// Factors one panel of every matrix; with V, also writes V, and T and Y = V T too when it
/// returns true (the register kernel forms them itself; the other one leaves T to G = V^T V and
/// larft_kernel, Y to a gemm).
/// With mergeV and mergeY (the left half's V_L and Y_L of a block of two 32-column panels, this
/// panel being the right half) and merged, the register kernel may also merge Y (see
/// reg_panel_kernel): then *merged is set and the caller skips Y_R -= Y_L (V_L^T Y_R).
template <class T>
bool launch_panel(const Launch& launch, T* const* A, int lda, int m, int row0, int iw, T* tau, int ntau, T* V, int ldv,
                  long long vstride, int above, T* Tm, long long tstride, T* Y, int count, const T* mergeV = nullptr,
                  const T* mergeY = nullptr, bool* merged = nullptr) {
    const int mp = m - row0;
    if (merged != nullptr) *merged = false;
    if (mp <= 32 * kRegPanelSlots) {
        if (V == nullptr || Tm == nullptr) Y = nullptr;
        RegPanelArgs<T> p;
        p.A = A;
        p.lda = lda;
        p.m = m;
        p.row0 = row0;
        p.iw = iw;
        p.tau = tau;
        p.ntau = ntau;
        p.V = V;
        p.ldv = ldv;
        p.vstride = vstride;
        p.above = above;
        p.Tm = Tm;
        p.tstride = tstride;
        p.Y = Y;
        if (iw <= 16) {
            launch_reg_panel_rows<T, 16>(launch, p, count);
        } else {
            // The merge runs on the tensor cores (double), for a left half of 32 columns.
            const bool merge = std::is_same<T, double>::value && Y != nullptr && mergeV != nullptr &&
                               mergeY != nullptr && merged != nullptr && above % 8 == 0;
            p.mergeV = merge ? mergeV : nullptr;
            p.mergeY = merge ? mergeY : nullptr;
            launch_reg_panel_rows<T, 32>(launch, p, count);
            if (merge) *merged = true;
        }
        return Y != nullptr;
    }
    const std::size_t bytes = static_cast<std::size_t>(mp | 1) * iw * sizeof(T);
    const bool in_smem = bytes <= kQr.panel_smem_bytes;
    const std::size_t smem = in_smem ? bytes : 0;
    if (smem > 48 * 1024) detail::opt_in_shared(panel_kernel<T>, "geqrf panel shared memory");
    const int warps = mp >= kQr.panel_tall_rows ? kQr.panel_warps_tall : kQr.panel_warps;
    panel_kernel<T>
        <<<count, 32 * warps, smem, launch.stream>>>(A, lda, m, row0, iw, tau, ntau, V, ldv, vstride, above, in_smem);
    detail::check_launch("geqrf panel");
    return false;
}

template <class T, int M, int C, class Shapes>
void launch_small_mc(const Launch& launch, T* const* A, const Shapes& sh, int count) {
    constexpr int G = 32 / C;
    const int warps = kQr.small_warps;
    const std::size_t smem = static_cast<std::size_t>(warps) * (G * C * (M + 1) + G * (M + 1)) * sizeof(T);
    if (smem > 48 * 1024)
        detail::check(cudaFuncSetAttribute(small_kernel<T, M, C, Shapes>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem)),
                      "geqrf small shared memory");
    const int per_block = warps * G;
    small_kernel<T, M, C, Shapes>
        <<<detail::ceil_div(count, per_block), 32 * warps, smem, launch.stream>>>(A, sh, count);
    detail::check_launch("geqrf small");
}

/// The smallest row bound M >= mmax (M, 2M, ... up to kSmallRowsMax) for C columns.
template <class T, int M, int C, class Shapes>
void launch_small_rows(const Launch& launch, T* const* A, const Shapes& sh, int mmax, int count) {
    if constexpr (M < kSmallRowsMax) {
        if (mmax > M) {
            launch_small_rows<T, 2 * M, C>(launch, A, sh, mmax, count);
            return;
        }
    }
    launch_small_mc<T, M, C>(launch, A, sh, count);
}

/// small_kernel for a batch whose matrices have at most mmax <= kSmallRowsMax rows and nmax
/// <= 32 columns: C the power of two (8, 16, 32) that holds nmax.
template <class T, class Shapes>
void launch_small(const Launch& launch, T* const* A, const Shapes& sh, int mmax, int nmax, int count) {
    if (nmax <= 8)
        launch_small_rows<T, 8, 8>(launch, A, sh, mmax, count);
    else if (nmax <= 16)
        launch_small_rows<T, 16, 16>(launch, A, sh, mmax, count);
    else
        launch_small_rows<T, 32, 32>(launch, A, sh, mmax, count);
}

/// The workspace of the blocked path, carved as the plan says.
template <class T>
struct QrWork {
    T *V, *Y, *W, *G, *Tm;
    T** ptrs;
    int chunk;
    T** array(int q) const { return ptrs + static_cast<std::size_t>(q) * chunk; }
};

/// Blocked geqrf of `count` (<= plan.chunk) matrices.
template <class T>
void geqrf_chunk(const Launch& launch, const QrPlan& plan, int m, int n, T* const* A, int lda, T* tau, int count,
                 const QrWork<T>& ws) {
    cudaStream_t s = launch.stream;
    cublasHandle_t h = launch.cublas;
    const int ib = plan.ib, nb = plan.nb;
    const long long vs = static_cast<long long>(plan.v_elems), wst = static_cast<long long>(plan.w_elems),
                    ts = static_cast<long long>(plan.t_elems);
    const cublasOperation_t N = CUBLAS_OP_N, Tr = CUBLAS_OP_T;
    T* V = ws.V;
    T* Y = ws.Y;
    T* W = ws.W;
    // Pointer arrays of the workspace blocks the pointer-array gemms (those that touch A) use:
    // the same in every outer step, since V and Y rows count from the step's first row.
    T** Wp = ws.array(0);
    T** V0p = ws.array(1);
    T** Y0p = ws.array(2);
    auto Vjp = [&](int j) { return ws.array(4 + 2 * (j / ib)); };
    auto Yjp = [&](int j) { return ws.array(5 + 2 * (j / ib)); };
    strided_pointers(Wp, W, wst, count, s);
    strided_pointers(V0p, V, vs, count, s);
    strided_pointers(Y0p, Y, vs, count, s);
    for (int j = 0; j < nb; j += ib) {
        strided_pointers(Vjp(j), V + j + static_cast<long long>(j) * m, vs, count, s);
        strided_pointers(Yjp(j), Y + j + static_cast<long long>(j) * m, vs, count, s);
    }
    int top = ib;
    while (top < nb) top *= 2;
    // The sub-blocks of A that the gemms update, in the order of the walk below (each outer
    // step's recursion in order, then its trailing matrix), all formed by one launch per 64
    // rather than one each on the way (2000 x 512: 15 launches fewer).
    std::vector<long long> c_offsets;
    for (int k = 0; k < n; k += nb) {
        const int w = std::min(nb, n - k);
        auto walk = [&](auto&& self, int j, int len) -> void {
            if (j >= w || len == ib) return;
            const int r0 = j + len / 2;
            self(self, j, len / 2);
            if (r0 >= w) return;
            c_offsets.push_back((k + j) + static_cast<long long>(k + r0) * lda);
            self(self, r0, len / 2);
        };
        walk(walk, 0, top);
        if (k + w < n) c_offsets.push_back(k + static_cast<long long>(k + w) * lda);
    }
    if (static_cast<int>(c_offsets.size()) > plan.c_arrays)
        throw RuntimeError("batched geqrf: sub-block pointer arrays miscounted (internal)");
    T** c_base = ws.array(4 + 2 * detail::ceil_div(nb, ib));
    detail::offset_pointers(c_base, A, c_offsets.data(), static_cast<int>(c_offsets.size()), count, s);
    std::size_t c_next = 0;
    auto next_c = [&](long long offset) {
        if (c_next >= c_offsets.size() || c_offsets[c_next] != offset)
            throw RuntimeError("batched geqrf: sub-block pointer arrays out of order (internal)");
        return c_base + static_cast<long long>(c_next++) * count;
    };
    for (int k = 0; k < n; k += nb) {
        const int w = std::min(nb, n - k), mp = m - k;
        const bool trailing = k + w < n;
        // Columns j..j+len-1 of the outer block (len = ib times a power of two), recursively:
        // the left half, the right half updated by the left half's block reflector, the right
        // half, then the right half's Y merged so that Y(:, j:j+len) is the block reflector of
        // all len columns (Y_R <- Y_R - Y_L (V_L^T Y_R), which is V [T_L T_LR; 0 T_R] without
        // forming T_LR). The outer block's Y is needed only when a trailing matrix follows.
        // A panel given merge_from (>= 0) is the right half of a block whose left half (columns
        // merge_from.., 32 of them) is done, and may merge its Y itself: it then returns true.
        auto factor = [&](auto&& self, int j, int len, bool need_y, int merge_from) -> bool {
            if (j >= w) return false;
            if (len == ib) {
                const int iw = std::min(ib, w - j);
                const bool right = k + j + iw < n;
                T* Vj = V + static_cast<long long>(j) * m;  // column j of V, row 0
                T* Yj = Y + static_cast<long long>(j) * m;
                bool merged = false;
                const T* mV = merge_from >= 0 ? V + static_cast<long long>(merge_from) * m : nullptr;
                const T* mY = merge_from >= 0 ? Y + static_cast<long long>(merge_from) * m : nullptr;
                const bool have_y =
                    launch_panel<T>(launch, A, lda, m, k + j, iw, tau, n, right ? Vj : nullptr, m, vs, j, ws.Tm, ts,
                                    right ? Yj : nullptr, count, mV, mY, right && merge_from >= 0 ? &merged : nullptr);
                if (right && !have_y) {
                    // T of the panel from G = V_j^T V_j.
                    detail::check(gemm_strided(h, Tr, N, iw, iw, mp - j, T(1), Vj + j, m, vs, Vj + j, m, vs, T(0), ws.G,
                                               kLdT, ts, count),
                                  "geqrf gemm G = V^T V");
                    larft_kernel<T>
                        <<<detail::ceil_div(count, 4), 128, 0, s>>>(ws.G, ws.Tm, ts, tau, n, k + j, iw, count);
                    detail::check_launch("geqrf larft");
                    // Y_j = V_j T_j (V_j's rows above j are zero, so Y_j's are too).
                    detail::check(
                        gemm_strided(h, N, N, mp, iw, iw, T(1), Vj, m, vs, ws.Tm, kLdT, ts, T(0), Yj, m, vs, count),
                        "geqrf gemm Y = V T");
                }
                return merged;
            }
            const int half = len / 2, r0 = j + half;
            self(self, j, half, true, -1);
            if (r0 >= w) return false;
            const int lw = half;  // the left half is whole: r0 < w
            const int nc = std::min(w, j + len) - r0;
            // Columns r0..r0+nc-1 of the outer block: C -= V_L (Y_L^T C).
            T** Cp = next_c((k + j) + static_cast<long long>(k + r0) * lda);
            detail::check(gemm_batched(h, Tr, N, lw, nc, mp - j, T(1), Yjp(j), m, Cp, lda, T(0), Wp, lw, count),
                          "geqrf gemm W = Y^T C");
            detail::check(gemm_batched(h, N, N, mp - j, nc, lw, T(-1), Vjp(j), m, Wp, lw, T(1), Cp, lda, count),
                          "geqrf gemm C -= V W");
            const bool merged = self(self, r0, half, need_y, need_y && half == 32 ? j : -1);
            if (!need_y || merged) return false;
            // Y_R -= Y_L (V_L^T Y_R): rows from r0 for the product (Y_R is zero above r0),
            // from j for the update (Y_L is zero above j).
            T* YR = Y + static_cast<long long>(r0) * m;
            detail::check(gemm_strided(h, Tr, N, lw, nc, mp - r0, T(1), V + r0 + static_cast<long long>(j) * m, m, vs,
                                       YR + r0, m, vs, T(0), W, nb, wst, count),
                          "geqrf gemm Z = V^T Y");
            detail::check(gemm_strided(h, N, N, mp - j, nc, lw, T(-1), Y + j + static_cast<long long>(j) * m, m, vs, W,
                                       nb, wst, T(1), YR + j, m, vs, count),
                          "geqrf gemm Y -= Y Z");
            return false;
        };
        factor(factor, 0, top, trailing, -1);
        if (trailing) {
            const int nc = n - k - w;
            T** Cp = next_c(k + static_cast<long long>(k + w) * lda);
            // W^T = C^T Y, then C -= V (W^T)^T: cuBLAS picks faster kernels for these shapes than
            // for W = Y^T C, C -= V W (at 2000 x 512 and 256 x 1000). The same change in the
            // panels' own updates and merges measured within noise.
            detail::check(gemm_batched(h, Tr, N, nc, w, mp, T(1), Cp, lda, Y0p, m, T(0), Wp, nc, count),
                          "geqrf trailing gemm W^T = C^T Y");
            detail::check(gemm_batched(h, N, Tr, mp, nc, w, T(-1), V0p, m, Wp, nc, T(1), Cp, lda, count),
                          "geqrf trailing gemm C -= V W");
        }
    }
}

}  // namespace

template <class T>
std::size_t geqrf_workspace(int m, int n, int count) {
    if (count <= 0 || n <= 0) return 0;
    return QrPlan::make<T>(m, n, count).template bytes<T>();
}

template <class T>
void geqrf(const Launch& launch, int m, int n, T* const* A, int lda, T* tau, int count) {
    if (count <= 0 || n <= 0) return;
    const QrPlan plan = QrPlan::make<T>(m, n, count);
    if (plan.path == QrPlan::Path::small) {
        launch_small<T>(launch, A, FixedShapes<T>{m, n, lda, tau}, m, n, count);
        return;
    }
    if (plan.path == QrPlan::Path::panel) {
        launch_panel<T>(launch, A, lda, m, 0, n, tau, n, nullptr, m, 0, 0, nullptr, 0, nullptr, count);
        return;
    }
    detail::WorkspaceCarver carve(launch);
    const std::size_t c = static_cast<std::size_t>(plan.chunk);
    QrWork<T> ws{};
    ws.V = carve.take<T>(c * plan.v_elems);
    ws.Y = carve.take<T>(c * plan.v_elems);
    ws.W = carve.take<T>(c * plan.w_elems);
    ws.G = carve.take<T>(c * plan.t_elems);
    ws.Tm = carve.take<T>(c * plan.t_elems);
    ws.ptrs = carve.take<T*>(c * plan.arrays);
    ws.chunk = plan.chunk;
    HostPointerMode mode(launch.cublas);
    for (int first = 0; first < count; first += plan.chunk) {
        const int cnt = std::min(plan.chunk, count - first);
        geqrf_chunk<T>(launch, plan, m, n, A + first, lda, tau + static_cast<long long>(first) * n, cnt, ws);
    }
}

template <class T>
bool vgeqrf_small(const Launch& launch, int mmax, int nmax, const int* m, const int* n, T* const* A, const int* lda,
                  T* const* tau, int count) {
    if (mmax > kQr.small_rows || nmax > 32) return false;
    launch_small<T>(launch, A, VarShapes<T>{m, n, lda, tau}, mmax, nmax, count);
    return true;
}

template <class T>
bool vgeqrf_reg_panel(const Launch& launch, int rows, const int* m, const int* n, const int* lda, T* const* A,
                      T* const* tau, T* Tws, Schedule s, int kmax, int step, int count) {
    if (rows > 32 * kRegPanelSlots || count <= 0) return false;
    RegPanelArgs<T> p;
    p.A = A;
    p.m = rows;
    p.iw = kVBlock;
    p.Tm = Tws;
    p.tstride = kVBlock * kVBlock;
    p.var.m = m;
    p.var.n = n;
    p.var.lda = lda;
    p.var.tau = tau;
    p.var.s = s;
    p.var.kmax = kmax;
    p.var.step = step;
    // The kernel reads each matrix's shape; rows (the step's bound) picks the instance.
    launch_reg_panel_rows<T, 32>(launch, p, count);
    return true;
}

template <class T>
std::size_t geqrs_workspace(int, int, int, int) {
    return 0;
}

template <class T>
void geqrs(const Launch& launch, int m, int n, int nrhs, const T* const* A, int lda, const T* tau, T* const* B, int ldb,
           int* info, int count) {
    if (count <= 0) return;
    const int warps = kQr.geqrs_warps;
    const std::size_t bytes = static_cast<std::size_t>(warps) * m * sizeof(T);
    const bool in_smem = bytes <= kQr.geqrs_smem_bytes;
    const std::size_t smem = in_smem ? bytes : 0;
    if (smem > 48 * 1024) detail::opt_in_shared(geqrs_kernel<T>, "geqrs shared memory");
    const long long pairs = static_cast<long long>(count) * std::max(nrhs, 1);
    const long long blocks = (pairs + warps - 1) / warps;
    geqrs_kernel<T><<<static_cast<unsigned>(blocks), 32 * warps, smem, launch.stream>>>(m, n, nrhs, A, lda, tau, B, ldb,
                                                                                        info, count, in_smem);
    detail::check_launch("geqrs");
}

template std::size_t geqrf_workspace<float>(int, int, int);
template std::size_t geqrf_workspace<double>(int, int, int);
template void geqrf<float>(const Launch&, int, int, float* const*, int, float*, int);
template void geqrf<double>(const Launch&, int, int, double* const*, int, double*, int);
template bool vgeqrf_small<float>(const Launch&, int, int, const int*, const int*, float* const*, const int*,
                                  float* const*, int);
template bool vgeqrf_reg_panel<float>(const Launch&, int, const int*, const int*, const int*, float* const*,
                                      float* const*, float*, Schedule, int, int, int);
template bool vgeqrf_reg_panel<double>(const Launch&, int, const int*, const int*, const int*, double* const*,
                                       double* const*, double*, Schedule, int, int, int);
template bool vgeqrf_small<double>(const Launch&, int, int, const int*, const int*, double* const*, const int*,
                                   double* const*, int);
template std::size_t geqrs_workspace<float>(int, int, int, int);
template std::size_t geqrs_workspace<double>(int, int, int, int);
template void geqrs<float>(const Launch&, int, int, int, const float* const*, int, const float*, float* const*, int,
                           int*, int);
template void geqrs<double>(const Launch&, int, int, int, const double* const*, int, const double*, double* const*, int,
                            int*, int);

}  // namespace starfact::batched::cuda
