// Residual checks; they use every core while the runtime is idle: OpenBLAS with all threads for
// the O(n^3) products, and our own passes over the matrices (parallel_for) for the O(n^2) work,
// since LAPACK's norms are single-threaded and a matrix of tens of GiB takes seconds per pass.
#include "common/checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/blas.hpp"
#include "common/matgen.hpp"
#include "common/parallel.hpp"
#include "common/runtime.hpp"
#include "common/scalar_traits.hpp"

namespace starfact::checks {
namespace {
// StarPU's CPU workers run single-threaded BLAS; a check runs between factorizations, with
// the workers paused.
class AllThreads {
public:
    AllThreads() : previous_(openblas_get_num_threads()) { openblas_set_num_threads(static_cast<int>(all_cores())); }
    ~AllThreads() { openblas_set_num_threads(previous_); }
    AllThreads(const AllThreads&) = delete;
    AllThreads& operator=(const AllThreads&) = delete;

private:
    int previous_;
    PausedWorkers paused_;  // the cores are the check's, not the polling workers'
};

using Index = std::int64_t;

// Below this many entries a pass runs on one thread: starting threads would cost more.
constexpr Index kSerialEntries = Index(1) << 18;

unsigned threads_for(Index entries) { return entries < kSerialEntries ? 1u : 0u; }

// max that keeps a NaN: a NaN anywhere must reach the ratio and fail it.
double nan_max(double a, double b) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    return std::max(a, b);
}

double ratio_or_inf(double num, double den) { return den > 0 ? num / den : (num == 0 ? 0.0 : INFINITY); }

// Rows of column j that a pass reads: the whole column, the lower triangle (i >= j) or the
// upper one (i <= j), cut to the m rows.
enum class Part { All, Lower, Upper };
std::pair<Index, Index> rows_of(Part part, Index m, Index j) {
    switch (part) {
        case Part::Lower:
            return {std::min(j, m), m};
        case Part::Upper:
            return {0, std::min(j + 1, m)};
        default:
            return {0, m};
    }
}

/// y = sum_j A(rows(j), j) x_j (when x is given) and a(i) = sum_j |A(i, j)| over the same
/// entries (when a is given), y and a of m entries. The columns are split into one contiguous
/// range per thread with equal entries, each thread adds into its own partial vectors, which
/// are then summed: every thread streams through contiguous memory.
template <class T>
void column_pass(Part part, Index m, Index n, const T* A, Index lda, const double* x, double* y, double* a) {
    if (y) std::fill(y, y + m, 0.0);
    if (a) std::fill(a, a + m, 0.0);
    if (m == 0 || n == 0) return;
    const auto len = [&](Index j) {
        const auto r = rows_of(part, m, j);
        return r.second - r.first;
    };
    Index total = 0;
    for (Index j = 0; j < n; ++j) total += len(j);
    const unsigned threads = threads_for(total) == 1 ? 1u : static_cast<unsigned>(std::min<Index>(all_cores(), n));
    std::vector<Index> first(threads + 1, n);
    first[0] = 0;
    {
        Index done = 0, j = 0;
        for (unsigned t = 1; t < threads; ++t) {
            const Index target = total / threads * t;
            while (j < n && done < target) done += len(j++);
            first[t] = j;
        }
    }
    std::vector<std::vector<double>> py(threads), pa(threads);
    parallel_team(
        [&](unsigned t, unsigned) {
            double* yt = nullptr;
            double* at = nullptr;
            if (x) {
                py[t].assign(static_cast<std::size_t>(m), 0.0);
                yt = py[t].data();
            }
            if (a) {
                pa[t].assign(static_cast<std::size_t>(m), 0.0);
                at = pa[t].data();
            }
            for (Index j = first[t]; j < first[t + 1]; ++j) {
                const auto [i0, i1] = rows_of(part, m, j);
                const T* col = A + j * lda;
                if (yt) {
                    const double xj = x[j];
                    for (Index i = i0; i < i1; ++i) yt[i] += static_cast<double>(col[i]) * xj;
                }
                if (at)
                    for (Index i = i0; i < i1; ++i) at[i] += std::abs(static_cast<double>(col[i]));
            }
        },
        threads);
    parallel_ranges(
        m, 4096,
        [&](Index lo, Index hi) {
            for (unsigned t = 0; t < threads; ++t)
                for (Index i = lo; i < hi; ++i) {
                    if (y) y[i] += py[t][i];
                    if (a) a[i] += pa[t][i];
                }
        },
        threads == 1 ? 1u : 0u);
}

/// y_j = sum over i in rows(j) of A(i, j) x_i for the n columns: one dot product per column.
template <class T>
void column_dots(Part part, Index m, Index n, const T* A, Index lda, const double* x, double* y) {
    parallel_for64(
        n,
        [&](Index j) {
            const auto [i0, i1] = rows_of(part, m, j);
            const T* col = A + j * lda;
            double s = 0.0;
            for (Index i = i0; i < i1; ++i) s += static_cast<double>(col[i]) * x[i];
            y[j] = s;
        },
        threads_for(m * n));
}

/// Per column j of the m x n A: f(column pointer, j) -> double, reduced with nan_max.
template <class T, class F>
double max_over_columns(Index m, Index n, const T* A, Index lda, F f) {
    std::vector<double> per(static_cast<std::size_t>(std::max<Index>(n, 0)));
    parallel_for64(
        n, [&](Index j) { per[j] = f(A + j * lda, j); }, threads_for(m * n));
    double r = 0.0;
    for (double v : per) r = nan_max(r, v);
    return r;
}

/// ||A||_inf = max_i sum_j |A(i, j)|.
template <class T>
double norm_inf(Index m, Index n, const T* A, Index lda) {
    std::vector<double> a(static_cast<std::size_t>(m));
    column_pass<T>(Part::All, m, n, A, lda, nullptr, nullptr, a.data());
    double r = 0.0;
    for (double v : a) r = nan_max(r, v);
    return r;
}

/// ||A||_1 = max_j sum_i |A(i, j)|.
template <class T>
double norm_one(Index m, Index n, const T* A, Index lda) {
    return max_over_columns(m, n, A, lda, [m](const T* col, Index) {
        double s = 0.0;
        for (Index i = 0; i < m; ++i) s += std::abs(static_cast<double>(col[i]));
        return s;
    });
}

/// ||A||_F, scaled per column as LAPACK's lassq so that large entries do not overflow.
template <class T>
double norm_frobenius(Index m, Index n, const T* A, Index lda) {
    std::vector<std::pair<double, double>> per(static_cast<std::size_t>(std::max<Index>(n, 0)));
    parallel_for64(
        n,
        [&](Index j) {
            const T* col = A + j * lda;
            double scale = 0.0, ssq = 1.0;
            for (Index i = 0; i < m; ++i) {
                const double v = std::abs(static_cast<double>(col[i]));
                if (std::isnan(v)) {
                    scale = v;
                    break;
                }
                if (v == 0.0) continue;
                if (scale < v) {
                    ssq = 1.0 + ssq * (scale / v) * (scale / v);
                    scale = v;
                } else {
                    ssq += (v / scale) * (v / scale);
                }
            }
            per[j] = {scale, ssq};
        },
        threads_for(m * n));
    double scale = 0.0, ssq = 1.0;
    for (const auto& [s, q] : per) {
        if (std::isnan(s)) return s;
        if (s == 0.0) continue;
        if (scale < s) {
            ssq = q + ssq * (scale / s) * (scale / s);
            scale = s;
        } else {
            ssq += q * (s / scale) * (s / scale);
        }
    }
    return scale * std::sqrt(ssq);
}

double vector_norm_inf(const std::vector<double>& v) {
    double r = 0.0;
    for (double e : v) r = nan_max(r, std::abs(e));
    return r;
}

/// The probes' random vector: entries of random sign and magnitude in [0.5, 1), so that an error
/// in any one column of a factor is multiplied by at least 1/2 (uniform entries near zero would
/// hide it).
template <class T>
std::vector<T> probe_vector(Index n, unsigned long long seed) {
    std::vector<T> x(static_cast<std::size_t>(n));
    if (n > 0) matgen::uniform(static_cast<int>(n), 1, seed, x.data(), static_cast<int>(n));
    for (T& e : x) e = std::copysign(T(0.5) + T(0.5) * std::abs(e), e);
    return x;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }
std::vector<double> widen(const std::vector<double>& v) { return v; }

int lapack_gels(int m, int n, int nrhs, double* A, int lda, double* B, int ldb) {
    return LAPACKE_dgels(LAPACK_COL_MAJOR, 'N', m, n, nrhs, A, lda, B, ldb);
}
int lapack_gels(int m, int n, int nrhs, float* A, int lda, float* B, int ldb) {
    return LAPACKE_sgels(LAPACK_COL_MAJOR, 'N', m, n, nrhs, A, lda, B, ldb);
}

/// A copy of the m x n A (leading dimension lda) with leading dimension m, filled in parallel.
template <class T>
std::vector<T> copy_matrix(Index m, Index n, const T* A, Index lda) {
    std::vector<T> C(static_cast<std::size_t>(m * n));
    parallel_for64(
        n, [&](Index j) { std::copy(A + j * lda, A + j * lda + m, C.begin() + j * m); }, threads_for(m * n));
    return C;
}
}  // namespace

template <class T>
std::vector<double> probe_x(std::int64_t n, unsigned long long seed) {
    return widen(probe_vector<T>(n, seed));
}

bool passes(double ratio) { return std::isfinite(ratio) && ratio >= 0.0 && ratio < kThreshold; }

CheckKind check_kind(long long m, long long n) {
    return static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(n) <= kFullCheckWork
               ? CheckKind::Full
               : CheckKind::Probe;
}

const char* check_kind_name(CheckKind kind) { return kind == CheckKind::Full ? "full" : "probe"; }

template <class T>
double potrf_residual(char uplo, int n, const T* A, int lda, const T* F, int ldf) {
    if (n == 0) return 0.0;
    AllThreads threads;
    const bool lower = uplo == 'L' || uplo == 'l';
    const Index nn = n;
    // R = A (uplo triangle) ; W = the triangular factor with the other triangle zeroed.
    std::vector<T> R(static_cast<std::size_t>(nn * nn)), W(static_cast<std::size_t>(nn * nn));
    parallel_for64(
        nn,
        [&](Index j) {
            const auto [i0, i1] = rows_of(lower ? Part::Lower : Part::Upper, nn, j);
            for (Index i = 0; i < nn; ++i) {
                const bool in = i >= i0 && i < i1;
                R[i + j * nn] = in ? A[i + j * lda] : T(0);
                W[i + j * nn] = in ? F[i + j * ldf] : T(0);
            }
        },
        threads_for(nn * nn));
    const double anorm = blas::lansy('1', lower ? 'L' : 'U', n, R.data(), n);
    // Lower: R -= W W^T. Upper: R -= W^T W. Only the uplo triangle of R is formed.
    blas::syrk(lower ? 'L' : 'U', lower ? 'N' : 'T', n, n, T(-1), W.data(), n, T(1), R.data(), n);
    const double rnorm = blas::lansy('1', lower ? 'L' : 'U', n, R.data(), n);
    if (anorm == 0.0) return rnorm == 0.0 ? 0.0 : INFINITY;
    return rnorm / (n * anorm * ScalarTraits<T>::eps);
}

template <class T>
double solve_residual(int n, int nrhs, const T* A, int lda, const T* X, int ldx, const T* B, int ldb) {
    if (n == 0 || nrhs == 0) return 0.0;
    AllThreads threads;
    const double anorm = norm_inf<T>(n, n, A, lda);
    // R = B - A X for every column at once: one pass over A instead of one per column.
    std::vector<T> R = copy_matrix<T>(n, nrhs, B, ldb);
    blas::gemm('N', 'N', n, nrhs, n, T(-1), A, lda, X, ldx, T(1), R.data(), n);
    double worst = 0.0;
    for (int c = 0; c < nrhs; ++c) {
        const Index off = static_cast<Index>(c);
        const double rnorm = norm_inf<T>(n, 1, R.data() + off * n, n);
        const double xnorm = norm_inf<T>(n, 1, X + off * ldx, ldx);
        const double bnorm = norm_inf<T>(n, 1, B + off * ldb, ldb);
        const double ratio = ratio_or_inf(rnorm, (anorm * xnorm + bnorm) * n * ScalarTraits<T>::eps);
        if (std::isnan(ratio)) return ratio;
        worst = std::max(worst, ratio);
    }
    return worst;
}

template <class T>
double potrf_probe_residual(char uplo, int n, const T* A, int lda, const T* F, int ldf, unsigned long long seed) {
    if (n == 0) return 0.0;
    const bool lower = uplo == 'L' || uplo == 'l';
    const Index nn = n;
    const std::vector<double> x = widen(probe_vector<T>(nn, seed));
    std::vector<double> ax(x.size()), rowabs(x.size()), y(x.size()), z(x.size());
    // A x and ||A||_inf in one pass over A.
    column_pass<T>(Part::All, nn, nn, A, lda, x.data(), ax.data(), rowabs.data());
    if (lower) {
        column_dots<T>(Part::Lower, nn, nn, F, ldf, x.data(), y.data());           // y = L^T x
        column_pass<T>(Part::Lower, nn, nn, F, ldf, y.data(), z.data(), nullptr);  // z = L y
    } else {
        column_pass<T>(Part::Upper, nn, nn, F, ldf, x.data(), y.data(), nullptr);  // y = U x
        column_dots<T>(Part::Upper, nn, nn, F, ldf, y.data(), z.data());           // z = U^T y
    }
    double rnorm = 0.0, anorm = 0.0;
    for (Index i = 0; i < nn; ++i) {
        rnorm = nan_max(rnorm, std::abs(ax[i] - z[i]));
        anorm = nan_max(anorm, rowabs[i]);
    }
    return ratio_or_inf(rnorm, anorm * vector_norm_inf(x) * n * ScalarTraits<T>::eps);
}

template <class T>
double lu_probe_residual(int m, int n, const T* A, int lda, const T* F, int ldf, const LuForward<T>& forward,
                         unsigned long long seed) {
    if (m == 0 || n == 0) return 0.0;
    const Index mm = m, nn = n;
    const std::vector<double> x = widen(probe_vector<T>(nn, seed));
    std::vector<double> ax(static_cast<std::size_t>(mm)), rowabs(ax.size()), ux(ax.size());
    column_pass<T>(Part::All, mm, nn, A, lda, x.data(), ax.data(), rowabs.data());
    column_pass<T>(Part::Upper, mm, nn, F, ldf, x.data(), ux.data(), nullptr);  // [U; 0] x
    std::vector<T> v(ax.begin(), ax.end());
    forward(v.data());  // L~^{-1} P~ (A x)
    double rnorm = 0.0, anorm = 0.0;
    for (Index i = 0; i < mm; ++i) {
        rnorm = nan_max(rnorm, std::abs(static_cast<double>(v[i]) - ux[i]));
        anorm = nan_max(anorm, rowabs[i]);
    }
    return ratio_or_inf(rnorm, anorm * vector_norm_inf(x) * n * ScalarTraits<T>::eps);
}

template <class T>
QrProbe qr_probe_residuals(int m, int n, const T* A, int lda, const T* F, int ldf, const QApply<T>& apply_q,
                           unsigned long long seed) {
    if (m == 0 || n == 0) return {0.0, 0.0};
    const Index mm = m, nn = n;
    const double eps = ScalarTraits<T>::eps;
    const std::vector<double> x = widen(probe_vector<T>(nn, seed));
    std::vector<double> ax(static_cast<std::size_t>(mm)), rowabs(ax.size()), rx(ax.size());
    column_pass<T>(Part::All, mm, nn, A, lda, x.data(), ax.data(), rowabs.data());
    column_pass<T>(Part::Upper, mm, nn, F, ldf, x.data(), rx.data(), nullptr);  // y = [R x; 0]
    const std::vector<T> y(rx.begin(), rx.end());
    std::vector<T> z = y;
    apply_q('N', z.data());  // Q y
    std::vector<T> w = z;
    apply_q('T', w.data());  // Q^T Q y
    double rnorm = 0.0, anorm = 0.0, onorm = 0.0, ynorm = 0.0;
    for (Index i = 0; i < mm; ++i) {
        rnorm = nan_max(rnorm, std::abs(ax[i] - static_cast<double>(z[i])));
        anorm = nan_max(anorm, rowabs[i]);
        onorm = nan_max(onorm, std::abs(static_cast<double>(w[i]) - static_cast<double>(y[i])));
        ynorm = nan_max(ynorm, std::abs(static_cast<double>(y[i])));
    }
    return {ratio_or_inf(rnorm, anorm * vector_norm_inf(x) * m * eps), ratio_or_inf(onorm, ynorm * m * eps)};
}

template <class T>
LapackLuReference lapack_lu_reference(int n, int nrhs, const T* A, int lda, const T* B, int ldb) {
    if (n == 0) return {0.0, 1.0, 0};
    AllThreads threads;
    std::vector<T> F = copy_matrix<T>(n, n, A, lda), X = copy_matrix<T>(n, nrhs, B, ldb);
    std::vector<int> ipiv(static_cast<std::size_t>(n));
    const int info = blas::getrf(n, n, F.data(), n, ipiv.data());
    const double growth = growth_factor(n, n, A, lda, F.data(), n);
    if (info != 0) return {INFINITY, growth, info};
    blas::getrs('N', n, nrhs, F.data(), n, ipiv.data(), X.data(), n);
    return {solve_residual(n, nrhs, A, lda, X.data(), n, B, ldb), growth, 0};
}

template <class T>
double growth_factor(int m, int n, const T* A, int lda, const T* F, int ldf) {
    const Index mm = m;
    const double amax = max_over_columns<T>(mm, n, A, lda, [mm](const T* col, Index) {
        double r = 0.0;
        for (Index i = 0; i < mm; ++i) r = nan_max(r, std::abs(static_cast<double>(col[i])));
        return r;
    });
    const double umax = max_over_columns<T>(mm, n, F, ldf, [mm](const T* col, Index j) {
        double r = 0.0;
        for (Index i = 0; i < std::min(j + 1, mm); ++i) r = nan_max(r, std::abs(static_cast<double>(col[i])));
        return r;
    });
    return amax > 0 ? umax / amax : (umax == 0 ? 1.0 : INFINITY);
}

template <class T>
double lu_transform_residual(int m, int n, const T* A, int lda, const T* G, int ldg, const T* F, int ldf) {
    if (m == 0 || n == 0) return 0.0;
    const Index mm = m;
    // ||G - [U; 0]||_1 column by column, without forming the difference.
    const double rnorm = max_over_columns<T>(mm, n, G, ldg, [&](const T* g, Index j) {
        const T* f = F + j * ldf;
        double s = 0.0;
        for (Index i = 0; i < mm; ++i) {
            const T u = i <= j ? f[i] : T(0);
            s += std::abs(static_cast<double>(g[i] - u));
        }
        return s;
    });
    const double anorm = norm_one<T>(mm, n, A, lda);
    if (anorm == 0.0) return rnorm == 0.0 ? 0.0 : INFINITY;
    return rnorm / (n * anorm * ScalarTraits<T>::eps);
}

template <class T>
QrResiduals qr_residuals(int m, int n, const T* A, int lda, const T* Q, int ldq, const T* F, int ldf) {
    if (m == 0 || n == 0) return {0.0, 0.0};
    AllThreads threads;
    const double eps = ScalarTraits<T>::eps;
    const Index mm = m, nn = n;
    std::vector<T> W = copy_matrix<T>(mm, nn, Q, ldq);
    blas::trmm('R', 'U', 'N', 'N', m, n, T(1), F, ldf, W.data(), m);  // W = Q R
    parallel_for64(
        nn,
        [&](Index j) {
            for (Index i = 0; i < mm; ++i) W[i + j * mm] -= A[i + j * lda];
        },
        threads_for(mm * nn));
    const double anorm = norm_one<T>(mm, nn, A, lda);
    const double rnorm = norm_one<T>(mm, nn, W.data(), mm);
    const double residual = ratio_or_inf(rnorm, m * anorm * eps);
    std::vector<T> G(static_cast<std::size_t>(nn * nn), T(0));
    for (Index j = 0; j < nn; ++j) G[j + j * nn] = T(1);
    blas::syrk('U', 'T', n, m, T(-1), Q, ldq, T(1), G.data(), n);  // I - Q^T Q, upper triangle
    const double orthogonality = blas::lansy('1', 'U', n, G.data(), n) / (m * eps);
    return {residual, orthogonality};
}

template <class T>
double ls_residual(int m, int n, int nrhs, const T* A, int lda, const T* X, int ldx, const T* B, int ldb) {
    if (m == 0 || n == 0 || nrhs == 0) return 0.0;
    AllThreads threads;
    const double anorm = norm_frobenius<T>(m, n, A, lda);
    // R = B - A X and W = A^T R for all the columns at once: two passes over A.
    std::vector<T> R = copy_matrix<T>(m, nrhs, B, ldb), W(static_cast<std::size_t>(n) * nrhs);
    blas::gemm('N', 'N', m, nrhs, n, T(-1), A, lda, X, ldx, T(1), R.data(), m);
    blas::gemm('T', 'N', n, nrhs, m, T(1), A, lda, R.data(), m, T(0), W.data(), n);
    double worst = 0.0;
    for (int c = 0; c < nrhs; ++c) {
        const Index off = c;
        const double num = norm_frobenius<T>(n, 1, W.data() + off * n, n);
        const double den =
            anorm *
            (anorm * norm_frobenius<T>(n, 1, X + off * ldx, ldx) + norm_frobenius<T>(m, 1, B + off * ldb, ldb)) *
            std::max(m, n) * ScalarTraits<T>::eps;
        const double ratio = ratio_or_inf(num, den);
        if (std::isnan(ratio)) return ratio;
        worst = std::max(worst, ratio);
    }
    return worst;
}

template <class T>
double lapack_ls_residual(int m, int n, int nrhs, const T* A, int lda, const T* B, int ldb) {
    if (m == 0 || n == 0 || nrhs == 0) return 0.0;
    AllThreads threads;
    std::vector<T> F = copy_matrix<T>(m, n, A, lda), X = copy_matrix<T>(m, nrhs, B, ldb);
    if (lapack_gels(m, n, nrhs, F.data(), m, X.data(), m) != 0) return INFINITY;
    return ls_residual(m, n, nrhs, A, lda, X.data(), m, B, ldb);
}

template double potrf_residual<float>(char, int, const float*, int, const float*, int);
template double solve_residual<float>(int, int, const float*, int, const float*, int, const float*, int);
template std::vector<double> probe_x<float>(std::int64_t, unsigned long long);
template std::vector<double> probe_x<double>(std::int64_t, unsigned long long);
template double potrf_probe_residual<float>(char, int, const float*, int, const float*, int, unsigned long long);
template double lu_probe_residual<float>(int, int, const float*, int, const float*, int, const LuForward<float>&,
                                         unsigned long long);
template QrProbe qr_probe_residuals<float>(int, int, const float*, int, const float*, int, const QApply<float>&,
                                           unsigned long long);
template LapackLuReference lapack_lu_reference<float>(int, int, const float*, int, const float*, int);
template double growth_factor<float>(int, int, const float*, int, const float*, int);
template double lu_transform_residual<float>(int, int, const float*, int, const float*, int, const float*, int);
template QrResiduals qr_residuals<float>(int, int, const float*, int, const float*, int, const float*, int);
template double ls_residual<float>(int, int, int, const float*, int, const float*, int, const float*, int);
template double lapack_ls_residual<float>(int, int, int, const float*, int, const float*, int);
template double potrf_residual<double>(char, int, const double*, int, const double*, int);
template double solve_residual<double>(int, int, const double*, int, const double*, int, const double*, int);
template double potrf_probe_residual<double>(char, int, const double*, int, const double*, int, unsigned long long);
template double lu_probe_residual<double>(int, int, const double*, int, const double*, int, const LuForward<double>&,
                                          unsigned long long);
template QrProbe qr_probe_residuals<double>(int, int, const double*, int, const double*, int, const QApply<double>&,
                                            unsigned long long);
template LapackLuReference lapack_lu_reference<double>(int, int, const double*, int, const double*, int);
template double growth_factor<double>(int, int, const double*, int, const double*, int);
template double lu_transform_residual<double>(int, int, const double*, int, const double*, int, const double*, int);
template QrResiduals qr_residuals<double>(int, int, const double*, int, const double*, int, const double*, int);
template double ls_residual<double>(int, int, int, const double*, int, const double*, int, const double*, int);
template double lapack_ls_residual<double>(int, int, int, const double*, int, const double*, int);

}  // namespace starfact::checks
