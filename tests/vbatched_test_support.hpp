// Helpers of the variable-size batched suites (test_vbatched and the test_vbatched_*cuda ones),
// host only: order and shape draws, the planted failures, SPD batches, leading blocks, the
// LAPACKE QR reference, argument-error checks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <lapacke.h>

#include "common/error.hpp"
#include "test_support.hpp"

namespace starfact::test {

using Precisions = ::testing::Types<float, double>;

inline char other(char uplo) { return uplo == 'L' ? 'U' : 'L'; }

/// Orders of a batch: uniform in [0, nmax], or skewed (1% nmax, the rest in [1, max(1, nmax/10)]);
/// with_nmax: the largest order is always there, at count/3.
inline std::vector<int> draw_sizes(bool skewed, int nmax, int count, std::uint64_t seed, bool with_nmax = true) {
    std::mt19937_64 rng(seed);
    std::vector<int> n(count);
    for (int b = 0; b < count; ++b)
        n[b] = skewed ? (rng() % 100 == 0 ? nmax : 1 + static_cast<int>(rng() % std::max(1, nmax / 10)))
                      : static_cast<int>(rng() % (nmax + 1));
    if (with_nmax && count > 0) n[count / 3] = nmax;
    return n;
}

/// The orders of a batch and where its failures are planted: with plant, at matrices count/4,
/// count/2 and count-1 (each once, order raised to 1 there) at minors (columns) 1, n/2+1, n;
/// expected[b] is that minor, 0 elsewhere.
struct PlantedOrders {
    std::vector<int> n, expected;
};

inline PlantedOrders plant_failures(std::vector<int> n, bool plant) {
    const int count = static_cast<int>(n.size());
    PlantedOrders p{std::move(n), std::vector<int>(count, 0)};
    if (!plant || count == 0) return p;
    const int at[3] = {count / 4, count / 2, count - 1};
    for (int b : at) p.n[b] = std::max(p.n[b], 1);
    std::set<int> seen;
    for (int f = 0; f < 3; ++f) {
        const int b = at[f];
        if (seen.insert(b).second) p.expected[b] = f == 0 ? 1 : f == 1 ? p.n[b] / 2 + 1 : p.n[b];
    }
    return p;
}

/// A with its other triangle filled from the stored one (both triangles, for residuals).
template <class T>
HostMatrix<T> symmetric(const HostMatrix<T>& A, char uplo) {
    HostMatrix<T> S = A;
    for (int j = 0; j < A.n; ++j)
        for (int i = 0; i < j; ++i) {
            if (uplo == 'L')
                S(i, j) = A(j, i);
            else
                S(j, i) = A(i, j);
        }
    return S;
}

/// Sets entry (i, j) of the lower view (i >= j) to NaN in the stored `uplo` triangle of A.
template <class T>
void plant_nan(HostMatrix<T>& A, char uplo, int i, int j) {
    if (uplo == 'L')
        A(i, j) = nan<T>();
    else
        A(j, i) = nan<T>();
}

/// A Cholesky batch: the matrices (the uplo triangle stored, the other NaN) and LAPACK's info on
/// each; nan[b]: a NaN planted (LAPACKE's potrf is then no reference: it may refuse NaN input).
template <class T>
struct SpdCase {
    char uplo = 'L';
    std::vector<HostMatrix<T>> A;
    std::vector<int> expected;
    std::vector<bool> nan;
};

/// SPD matrices of orders n, lda[b] = max(min_ld, n[b] + b % 3), failures planted as in
/// plant_failures; nans: (matrix, row, column) of planted NaNs (indices of the lower view), after
/// which every info is the reference's (dpotf2's NaN test).
template <class T>
SpdCase<T> make_spd_case(char uplo, std::vector<int> n, bool plant, std::uint64_t seed,
                         const std::vector<std::array<int, 3>>& nans = {}, int min_ld = 1) {
    const PlantedOrders p = plant_failures(std::move(n), plant);
    const int count = static_cast<int>(p.n.size());
    SpdCase<T> c;
    c.uplo = uplo;
    c.expected = p.expected;
    c.nan.assign(count, false);
    for (int b = 0; b < count; ++b) {
        const int nb = p.n[b], ld = std::max(min_ld, nb + b % 3);
        const std::uint64_t s = seed + 7919ULL * b;
        c.A.push_back(p.expected[b] != 0 ? spd_failing_at<T>(nb, p.expected[b], ld, s) : random_spd<T>(nb, ld, s));
    }
    for (const auto& [b, i, j] : nans) {
        c.nan[b] = true;
        plant_nan(c.A[b], uplo, i, j);
    }
    for (int b = 0; b < count; ++b) {
        poison_strict_triangle(c.A[b], other(uplo));
        if (!nans.empty()) c.expected[b] = reference_potrf_info(uplo, c.A[b]);
    }
    return c;
}

/// Matrix b: m[b] x n[b], lda max(1, m[b] + b % 3), uniform [-1, 1) entries times scale.
template <class T>
std::vector<HostMatrix<T>> random_batch(const std::vector<int>& m, const std::vector<int>& n, std::uint64_t seed,
                                        double scale = 1.0) {
    std::vector<HostMatrix<T>> A;
    for (std::size_t b = 0; b < m.size(); ++b) {
        A.push_back(random_matrix<T>(m[b], n[b], std::max(1, m[b] + static_cast<int>(b % 3)), seed + 7919ULL * b));
        if (scale == 1.0) continue;
        for (int j = 0; j < n[b]; ++j)
            for (int i = 0; i < m[b]; ++i) A.back()(i, j) = static_cast<T>(A.back()(i, j) * scale);
    }
    return A;
}

/// The matrices' data pointers.
template <class T>
std::vector<T*> pointers_of(std::vector<HostMatrix<T>>& v) {
    std::vector<T*> p;
    for (auto& M : v) p.push_back(M.ptr());
    return p;
}

inline int lapacke_geqrf(int m, int n, float* a, int lda, float* tau) {
    return LAPACKE_sgeqrf(LAPACK_COL_MAJOR, m, n, a, lda, tau);
}
inline int lapacke_geqrf(int m, int n, double* a, int lda, double* tau) {
    return LAPACKE_dgeqrf(LAPACK_COL_MAJOR, m, n, a, lda, tau);
}

/// The arguments written one after the other.
template <class... Args>
std::string cat(const Args&... args) {
    std::ostringstream o;
    (o << ... << args);
    return o.str();
}

/// Reports the failures of one batch A, each as "<context>matrix b (<shape>, lda <ld>): <failure>"
/// (shape "n <n>" for a batch of square matrices, "<m> x <n>" otherwise); says to stop at the fifth.
template <class T>
class BatchReport {
public:
    BatchReport(std::string context, const std::vector<HostMatrix<T>>& A, bool square)
        : context_(std::move(context)), A_(A), square_(square) {}
    bool operator()(int b, const std::string& failure) {
        const auto& M = A_[b];
        ADD_FAILURE() << context_ << "matrix " << b << " (" << (square_ ? cat("n ", M.n) : cat(M.m, " x ", M.n))
                      << ", lda " << M.ld << "): " << failure;
        return ++reported_ >= 5;
    }

private:
    std::string context_;
    const std::vector<HostMatrix<T>>& A_;
    bool square_;
    int reported_ = 0;
};

/// Passes each failure to report(b, failure) until report says to stop; whether it did.
template <class Report>
bool report_all(const std::vector<std::string>& failures, int b, Report&& report) {
    for (const auto& f : failures)
        if (report(b, f)) return true;
    return false;
}

/// What the first checks of one matrix found, and whether to go on comparing it.
struct MatrixCheck {
    std::vector<std::string> failures;
    bool compare = false;
};

/// The first checks of F = the factor of c.A[b] with info got: info LAPACK's (nothing more to
/// compare when not), the other triangle and the padding still NaN.
template <class T>
MatrixCheck check_spd_matrix(const SpdCase<T>& c, const HostMatrix<T>& F, int got, int b) {
    MatrixCheck v{{}, got == c.expected[b]};
    if (!v.compare) {
        std::ostringstream m;
        m << "info " << got << ", LAPACK's " << c.expected[b];
        v.failures.push_back(m.str());
        return v;
    }
    if (non_nan_in_strict_triangle(F, other(c.uplo)) != 0) v.failures.push_back("the other triangle was written");
    if (non_nan_in_padding(F) != 0) v.failures.push_back("the padding was written");
    return v;
}

/// The first checks of (F, tau) = vgeqrf(A) on one matrix: the padding untouched; an empty one
/// (min(m, n) = 0) has A and tau untouched and nothing more to compare; else LAPACKE's geqrf on a
/// copy of A (R, rtau) to compare with.
template <class T>
struct QrMatrixCheck {
    std::vector<std::string> failures;
    bool compare = false;
    HostMatrix<T> R;
    std::vector<T> rtau;
};

template <class T>
QrMatrixCheck<T> check_qr_matrix(const HostMatrix<T>& A, const HostMatrix<T>& F, const std::vector<T>& tau) {
    const int k = std::min(A.m, A.n);
    QrMatrixCheck<T> v{{}, k > 0, A, std::vector<T>(std::max(k, 0))};
    if (non_nan_in_padding(F) != 0) v.failures.push_back("the padding was written");
    if (k == 0) {
        if (std::memcmp(F.ptr(), A.ptr(), A.data.size() * sizeof(T)) != 0) v.failures.push_back("A written");
        if (!std::isnan(tau[0])) v.failures.push_back("tau written");
        return v;
    }
    if (lapacke_geqrf(A.m, A.n, v.R.ptr(), v.R.ld, v.rtau.data()) != 0) v.failures.push_back("LAPACKE failed");
    return v;
}

/// call() must throw an ArgumentError naming `arg`.
template <class Call>
void expect_named(const std::string& arg, Call&& call) {
    try {
        call();
        ADD_FAILURE() << "no ArgumentError for '" << arg << "'";
    } catch (const ArgumentError& e) {
        EXPECT_EQ(e.argument(), arg) << e.what();
    }
}

}  // namespace starfact::test
