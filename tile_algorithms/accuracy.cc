// The accuracy study's pieces: generators, compensated residuals, swap counts, the LAPACK
// reference, one tile LU point and iterative refinement on its factors.
#include "tile_algorithms/accuracy.hpp"

#include <lapacke.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <limits>
#include <thread>

#include <fmt/format.h>

#include "common/blas.hpp"
#include "common/checks.hpp"
#include "common/error.hpp"
#include "common/matgen.hpp"
#include "common/parallel.hpp"
#include "common/scalar_traits.hpp"

namespace starfact::accuracy {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// StarPU's CPU workers run single-threaded BLAS; the host-side work here runs between
// factorizations and may use every core (threads = 0), or one thread where it must round
// exactly as a CPU worker does.
class BlasThreads {
public:
    explicit BlasThreads(unsigned threads = 0) : previous_(openblas_get_num_threads()) {
        if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
        openblas_set_num_threads(static_cast<int>(threads));
    }
    ~BlasThreads() { openblas_set_num_threads(previous_); }
    BlasThreads(const BlasThreads&) = delete;
    BlasThreads& operator=(const BlasThreads&) = delete;

private:
    int previous_;
};

// Row interchanges of getrf's pivots on a column vector (the _work entry point: no NaN scan).
void laswp(int n, double* x, const int* ipiv) { LAPACKE_dlaswp_work(LAPACK_COL_MAJOR, 1, x, n, 1, n, ipiv, 1); }
void laswp(int n, float* x, const int* ipiv) { LAPACKE_slaswp_work(LAPACK_COL_MAJOR, 1, x, n, 1, n, ipiv, 1); }

std::uint64_t derive(std::uint64_t seed, std::uint64_t salt) {
    std::uint64_t x = seed ^ (salt * 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

std::size_t at(int i, int j, int ld) { return static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * ld; }

// Column j of an entrywise kind, from uniforms of its own seed (columns are independent, so
// they can be made in parallel and in any order).
void entrywise_column(MatrixKind kind, int n, std::uint64_t seed, int j, double* col) {
    std::vector<double> u(static_cast<std::size_t>(n));
    matgen::uniform(n, 1, derive(seed, 2 * static_cast<std::uint64_t>(j) + 1), u.data(), std::max(1, n));
    if (kind == MatrixKind::Normal) {
        std::vector<double> v(static_cast<std::size_t>(n));
        matgen::uniform(n, 1, derive(seed, 2 * static_cast<std::uint64_t>(j) + 2), v.data(), std::max(1, n));
        const double two_pi = 2.0 * std::acos(-1.0);
        for (int i = 0; i < n; ++i) {
            const double r = 0.5 * (1.0 - u[i]);  // (0, 1]: the logarithm stays finite
            col[i] = std::sqrt(-2.0 * std::log(r)) * std::cos(two_pi * 0.5 * (v[i] + 1.0));
        }
    } else {  // Antitriangular
        const double scale = 1.0 / std::sqrt(static_cast<double>(n));
        for (int i = 0; i < n; ++i) col[i] = i + j < n - 1 ? scale * u[i] : (i + j == n - 1 ? 1.0 : 0.0);
    }
}

// Q1 diag(sigma) Q2^T in double, Q from the QR of normal matrices (Householder form, applied
// with dormqr, never formed).
void ill_conditioned(int n, std::uint64_t seed, double cond, std::vector<double>& M) {
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    std::vector<double> G1(nn), G2(nn), tau1(static_cast<std::size_t>(n)), tau2(static_cast<std::size_t>(n));
    parallel_for(n, [&](int j) {
        entrywise_column(MatrixKind::Normal, n, derive(seed, 11), j, &G1[at(0, j, n)]);
        entrywise_column(MatrixKind::Normal, n, derive(seed, 12), j, &G2[at(0, j, n)]);
    });
    M.assign(nn, 0.0);
    for (int k = 0; k < n; ++k) M[at(k, k, n)] = n > 1 ? std::pow(cond, -static_cast<double>(k) / (n - 1)) : 1.0;
    BlasThreads threads;
    int info = LAPACKE_dgeqrf(LAPACK_COL_MAJOR, n, n, G1.data(), n, tau1.data());
    info |= LAPACKE_dgeqrf(LAPACK_COL_MAJOR, n, n, G2.data(), n, tau2.data());
    info |= LAPACKE_dormqr(LAPACK_COL_MAJOR, 'R', 'T', n, n, n, G2.data(), n, tau2.data(), M.data(), n);
    info |= LAPACKE_dormqr(LAPACK_COL_MAJOR, 'L', 'N', n, n, n, G1.data(), n, tau1.data(), M.data(), n);
    if (info != 0)
        throw RuntimeError(fmt::format("LAPACK failed while generating an ill-conditioned matrix ({})", info));
}

// Error-free transformations: a + b = s + e and a * b = p + e exactly.
inline void two_sum(double a, double b, double& s, double& e) {
    s = a + b;
    const double z = s - a;
    e = (a - (s - z)) + (b - z);
}

// r = b - A x accurately (double data): per row, the sum and the product errors are carried
// in a second accumulator (Ogita, Rump and Oishi's Dot2). Rows are split in blocks over threads;
// each block streams A column by column.
void residual_compensated(int n, const double* A, int lda, const double* x, const double* b, double* r) {
    constexpr int kRows = 512;
    const int blocks = (n + kRows - 1) / kRows;
    parallel_for(blocks, [=](int blk) {
        const int i0 = blk * kRows, rows = std::min(kRows, n - i0);
        std::vector<double> s(b + i0, b + i0 + rows), c(static_cast<std::size_t>(rows), 0.0);
        for (int j = 0; j < n; ++j) {
            const double xj = x[j];
            const double* a = A + at(i0, j, lda);
            for (int i = 0; i < rows; ++i) {
                const double p = a[i] * xj;
                const double pe = std::fma(a[i], xj, -p);
                double t, se;
                two_sum(s[i], -p, t, se);
                s[i] = t;
                c[i] += se - pe;
            }
        }
        for (int i = 0; i < rows; ++i) r[i0 + i] = s[i] + c[i];
    });
}

// r = b - A x for float data in double: every product is exact, the sums carry double rounding.
void residual_in_double(int n, const float* A, int lda, const float* x, const float* b, double* r) {
    constexpr int kRows = 512;
    const int blocks = (n + kRows - 1) / kRows;
    parallel_for(blocks, [=](int blk) {
        const int i0 = blk * kRows, rows = std::min(kRows, n - i0);
        for (int i = 0; i < rows; ++i) r[i0 + i] = b[i0 + i];
        for (int j = 0; j < n; ++j) {
            const double xj = x[j];
            const float* a = A + at(i0, j, lda);
            for (int i = 0; i < rows; ++i) r[i0 + i] -= static_cast<double>(a[i]) * xj;
        }
    });
}

void residual_extended(int n, const double* A, int lda, const double* x, const double* b, double* r) {
    residual_compensated(n, A, lda, x, b, r);
}
void residual_extended(int n, const float* A, int lda, const float* x, const float* b, double* r) {
    residual_in_double(n, A, lda, x, b, r);
}

double inf_norm(const std::vector<double>& v) {
    double m = 0.0;
    for (double e : v) {
        if (std::isnan(e)) return e;
        m = std::max(m, std::abs(e));
    }
    return m;
}

template <class T>
double inf_norm(int n, const T* v) {
    double m = 0.0;
    for (int i = 0; i < n; ++i) {
        const double e = std::abs(static_cast<double>(v[i]));
        if (std::isnan(e)) return e;
        m = std::max(m, e);
    }
    return m;
}

// Solves A d = r with the tile LU factors; r and d are host vectors of n entries.
template <class T>
void tile_solve(const TileMatrix<T>& LU, const LuFactors<T>& F, std::vector<T>& rhs) {
    const int n = LU.n();
    TileMatrix<T> B(n, 1, LU.nb());
    B.from_lapack(rhs.data(), std::max(1, n));
    getrs(LU, F, B);
    B.to_lapack(rhs.data(), std::max(1, n));
}

SolveQuality failed_quality() {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    return {nan, nan, nan, nan};
}
}  // namespace

MatrixKind parse_matrix_kind(const std::string& name) {
    for (MatrixKind k :
         {MatrixKind::Uniform, MatrixKind::Normal, MatrixKind::IllConditioned, MatrixKind::Antitriangular})
        if (name == matrix_kind_name(k)) return k;
    throw ArgumentError("kind", fmt::format("must be uniform, normal, illcond or antitriangular, got '{}'", name));
}

const char* matrix_kind_name(MatrixKind kind) {
    switch (kind) {
        case MatrixKind::Normal: return "normal";
        case MatrixKind::IllConditioned: return "illcond";
        case MatrixKind::Antitriangular: return "antitriangular";
        case MatrixKind::Uniform: break;
    }
    return "uniform";
}

std::vector<std::string> matrix_kind_names() { return {"uniform", "normal", "illcond", "antitriangular"}; }

template <>
double ill_conditioned_cond<double>() {
    return 1e8;
}
template <>
double ill_conditioned_cond<float>() {
    return 1e4;
}

template <class T>
void generate(MatrixKind kind, int n, std::uint64_t seed, T* A, int lda) {
    require(n >= 0, "n", fmt::format("must be >= 0, got {}", n));
    require(lda >= std::max(1, n), "lda", fmt::format("must be >= max(1, n) = {}, got {}", std::max(1, n), lda));
    if (n == 0) return;
    switch (kind) {
        case MatrixKind::Uniform: matgen::uniform(n, n, seed, A, lda); return;
        case MatrixKind::IllConditioned: {
            std::vector<double> M;
            ill_conditioned(n, seed, ill_conditioned_cond<T>(), M);
            parallel_for(n, [&](int j) {
                for (int i = 0; i < n; ++i) A[at(i, j, lda)] = static_cast<T>(M[at(i, j, n)]);
            });
            return;
        }
        case MatrixKind::Normal:
        case MatrixKind::Antitriangular:
            parallel_for(n, [&](int j) {
                std::vector<double> col(static_cast<std::size_t>(n));
                entrywise_column(kind, n, seed, j, col.data());
                for (int i = 0; i < n; ++i) A[at(i, j, lda)] = static_cast<T>(col[i]);
            });
            return;
    }
}

template <class T>
void residual(ResidualPrecision precision, int n, const T* A, int lda, const T* x, const T* b, double* r) {
    if (n == 0) return;
    if (precision == ResidualPrecision::Extended) {
        residual_extended(n, A, lda, x, b, r);
        return;
    }
    BlasThreads threads;
    std::vector<T> w(b, b + n);
    blas::gemm('N', 'N', n, 1, n, T(-1), A, lda, x, n, T(1), w.data(), n);
    for (int i = 0; i < n; ++i) r[i] = static_cast<double>(w[i]);
}

template <class T>
SolveQuality solve_quality(int n, const T* A, int lda, const T* x, const T* b, double anorm_inf) {
    if (n == 0) return {};
    const double denom = (anorm_inf * inf_norm(n, x) + inf_norm(n, b)) * n * ScalarTraits<T>::eps;
    auto normalized = [denom](double rnorm) { return denom > 0 ? rnorm / denom : (rnorm == 0 ? 0.0 : INFINITY); };
    std::vector<double> r(static_cast<std::size_t>(n));
    SolveQuality q;
    residual(ResidualPrecision::Working, n, A, lda, x, b, r.data());
    q.residual = inf_norm(r);
    q.backward_error = normalized(q.residual);
    residual(ResidualPrecision::Extended, n, A, lda, x, b, r.data());
    q.residual_exact = inf_norm(r);
    q.backward_error_exact = normalized(q.residual_exact);
    return q;
}

long count_row_swaps(const int* ipiv, int k) {
    long swaps = 0;
    for (int j = 0; j < k; ++j) swaps += ipiv[j] != j + 1;
    return swaps;
}

std::vector<int> read_pivots(starpu_data_handle_t pivots) {
    // The pivot handles have no home node; acquiring them in read mode brings a copy to main
    // memory (from a GPU when a CUDA worker wrote them).
    if (starpu_data_acquire(pivots, STARPU_R) != 0) throw RuntimeError("cannot acquire a pivot vector");
    const int k = static_cast<int>(starpu_vector_get_nx(pivots));
    const int* p = reinterpret_cast<const int*>(starpu_vector_get_local_ptr(pivots));
    std::vector<int> v(p, p + k);
    starpu_data_release(pivots);
    return v;
}

template <class T>
long count_row_swaps(const LuFactors<T>& F) {
    long swaps = 0;
    for (int k = 0; k < F.nt(); ++k) {
        const std::vector<int> d = read_pivots(F.diag_pivots(k));
        swaps += count_row_swaps(d.data(), static_cast<int>(d.size()));
        for (int i = k + 1; i < F.mt(); ++i) {
            const std::vector<int> p = read_pivots(F.pivots(i, k));
            swaps += count_row_swaps(p.data(), static_cast<int>(p.size()));
        }
    }
    return swaps;
}

template <class T>
PartialPivotingSolve<T> partial_pivoting_solve(int n, const T* A, int lda, const T* b) {
    PartialPivotingSolve<T> s;
    if (n == 0) return s;
    // One thread, and the solve as reference LAPACK's getrs (laswp, two trsm): with one tile, tile
    // LU runs this same getrf on a CPU worker and its solve is this same sequence, so both round
    // alike and t = 1 reproduces this solution exactly (multi-threaded getrf rounds differently).
    BlasThreads threads(1);
    std::vector<T> F(static_cast<std::size_t>(n) * n);
    for (int j = 0; j < n; ++j) std::copy(A + at(0, j, lda), A + at(0, j, lda) + n, F.begin() + at(0, j, n));
    s.x.assign(b, b + n);
    s.ipiv.assign(static_cast<std::size_t>(n), 0);
    const auto t0 = Clock::now();
    s.info = blas::getrf(n, n, F.data(), n, s.ipiv.data());
    s.factor_s = seconds_since(t0);
    s.growth = checks::growth_factor(n, n, A, lda, F.data(), n);
    s.swaps = count_row_swaps(s.ipiv.data(), n);
    if (s.info == 0) {
        laswp(n, s.x.data(), s.ipiv.data());
        blas::trsm('L', 'L', 'N', 'U', n, 1, T(1), F.data(), n, s.x.data(), n);
        blas::trsm('L', 'U', 'N', 'N', n, 1, T(1), F.data(), n, s.x.data(), n);
    } else {
        std::fill(s.x.begin(), s.x.end(), std::numeric_limits<T>::quiet_NaN());
    }
    return s;
}

template <class T>
Refinement refine(const TileMatrix<T>& LU, const LuFactors<T>& F, const T* A, int lda, const T* b, T* x, int steps,
                  ResidualPrecision precision, double anorm_inf) {
    const int n = LU.n();
    require(steps >= 0, "steps", fmt::format("must be >= 0, got {}", steps));
    Refinement out;
    out.quality.push_back(solve_quality(n, A, lda, x, b, anorm_inf));
    std::vector<double> r(static_cast<std::size_t>(n));
    std::vector<T> d(static_cast<std::size_t>(n));
    for (int k = 0; k < steps; ++k) {
        const auto t0 = Clock::now();
        residual(precision, n, A, lda, x, b, r.data());
        for (int i = 0; i < n; ++i) d[i] = static_cast<T>(r[i]);
        tile_solve(LU, F, d);
        for (int i = 0; i < n; ++i) x[i] += d[i];
        out.seconds += seconds_since(t0);
        out.quality.push_back(solve_quality(n, A, lda, x, b, anorm_inf));
    }
    return out;
}

template <class T>
PointResult tile_lu_point(int n, const T* A, int lda, const T* b, double anorm_inf, const PointOptions& o) {
    require(n >= 1, "n", fmt::format("must be >= 1, got {}", n));
    require(o.nb >= 1, "nb", fmt::format("must be >= 1, got {}", o.nb));
    PointResult p;
    TileMatrix<T> LU(n, n, o.nb);
    LU.from_lapack(A, lda);
    LuFactors<T> F(LU, o.ib);
    p.tiles = LU.nt();
    auto t0 = Clock::now();
    p.info = getrf(LU, F, o.schedule);
    p.factor_s = seconds_since(t0);
    p.swaps = count_row_swaps(F);
    {
        std::vector<T> U(static_cast<std::size_t>(n) * n);
        LU.to_lapack(U.data(), n);
        p.growth = checks::growth_factor(n, n, A, lda, U.data(), n);
    }
    if (p.info != 0) {
        p.quality = failed_quality();
        p.refined.quality.assign(static_cast<std::size_t>(o.refine_steps) + 1, failed_quality());
        p.refined_x.quality = p.refined.quality;
        return p;
    }
    std::vector<T> x(b, b + n);
    t0 = Clock::now();
    tile_solve(LU, F, x);
    p.solve_s = seconds_since(t0);
    std::vector<T> xw(x);
    p.refined = refine(LU, F, A, lda, b, xw.data(), o.refine_steps, ResidualPrecision::Working, anorm_inf);
    p.quality = p.refined.quality.front();
    p.refined_x = refine(LU, F, A, lda, b, x.data(), o.refine_steps, ResidualPrecision::Extended, anorm_inf);
    return p;
}

template void generate<float>(MatrixKind, int, std::uint64_t, float*, int);
template void residual<float>(ResidualPrecision, int, const float*, int, const float*, const float*, double*);
template SolveQuality solve_quality<float>(int, const float*, int, const float*, const float*, double);
template long count_row_swaps<float>(const LuFactors<float>&);
template PartialPivotingSolve<float> partial_pivoting_solve<float>(int, const float*, int, const float*);
template Refinement refine<float>(const TileMatrix<float>&, const LuFactors<float>&, const float*, int, const float*,
                                  float*, int, ResidualPrecision, double);
template PointResult tile_lu_point<float>(int, const float*, int, const float*, double, const PointOptions&);
template void generate<double>(MatrixKind, int, std::uint64_t, double*, int);
template void residual<double>(ResidualPrecision, int, const double*, int, const double*, const double*, double*);
template SolveQuality solve_quality<double>(int, const double*, int, const double*, const double*, double);
template long count_row_swaps<double>(const LuFactors<double>&);
template PartialPivotingSolve<double> partial_pivoting_solve<double>(int, const double*, int, const double*);
template Refinement refine<double>(const TileMatrix<double>&, const LuFactors<double>&, const double*, int,
                                   const double*, double*, int, ResidualPrecision, double);
template PointResult tile_lu_point<double>(int, const double*, int, const double*, double, const PointOptions&);

}  // namespace starfact::accuracy
