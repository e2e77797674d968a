// The variable-size batched LU at NMAX <= 32 (batched::cuda::vgetrf's one-pass register kernel,
// batched/cuda/lu_small.cuh, shared with the fixed-size getrf) against LAPACKE on the same
// matrices: every instance of the kernel (NMAX 1..32, groups of 4, 8, 16 and 32 lanes, so that
// matrices of different orders share a warp), orders 0 and 1 included, counts 1, 7, 300 and
// 10000 (each group then factors several matrices), lda[b] > n[b], zero pivots planted at
// count/4, count/2, count-1, a NaN in one matrix next to others in its warp, exact and near
// ties in the pivot search (ties go to the smallest row index, as LAPACK's idamax). Every info
// exact, pivots in range and equal to LAPACKE's (or departing first at a near tie rounded the
// other way, pivot_difference in vbatched_lu_support.hpp), residual below 30, the factor close
// to that of a host LU doing the warp kernel's operations in its order (getf2_reference; bit for
// bit on the tie cases; the half kernel, in double beyond one grid, rounds otherwise and is
// allowed up to kappa_1(A) / n times as far), padding and the pivots past n[b] untouched; SSDE
// and DSSE bitwise equal, and equal to the fixed-size getrf on a batch of one order. Every test
// skips, visibly, without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "batched/cuda/kernels.hpp"
#include "batched/cuda/vbatched_kernels.hpp"
#include "common/blas.hpp"
#include "common/checks.hpp"
#include "cuda_test_support.hpp"
#include "test_support.hpp"
#include "vbatched_cuda_support.hpp"
#include "vbatched_lu_support.hpp"

namespace starfact::test {
namespace {

namespace bc = starfact::batched::cuda;

/// LU with partial pivoting by rank-1 updates, as the register kernel computes it: the first
/// largest |a| (the smallest row index among equal ones), the multipliers a * (1 / piv) (a / piv
/// for a tiny pivot), each update one fused multiply-add. Bit for bit the kernel's result.
template <class T>
void getf2_reference(HostMatrix<T>& A, std::vector<int>& ipiv) {
    const int n = A.n;
    ipiv.assign(std::max(n, 1), -99);
    for (int j = 0; j < n; ++j) {
        int p = j;
        for (int i = j + 1; i < n; ++i)
            if (std::abs(A(i, j)) > std::abs(A(p, j))) p = i;
        ipiv[j] = p + 1;
        if (p != j)
            for (int c = 0; c < n; ++c) std::swap(A(j, c), A(p, c));
        const T piv = A(j, j);
        if (piv == T(0)) continue;
        const bool tiny = std::abs(piv) < std::numeric_limits<T>::min();
        const T r = T(1) / piv;
        for (int i = j + 1; i < n; ++i) {
            const T l = tiny ? A(i, j) / piv : A(i, j) * r;
            A(i, j) = l;
            for (int c = j + 1; c < n; ++c) A(i, c) = std::fma(-l, A(j, c), A(i, c));
        }
    }
}

class VBatchedLuSmallBase : public VBatchedCudaTest {
protected:
    VBatchedLuSmallBase() : VBatchedCudaTest("variable-size batched LU (NMAX <= 32)") {}

    /// Every matrix of r against LAPACKE on a copy of c (see the file's head).
    template <class T>
    void check(const LuCase<T>& c, const LuResult<T>& r, const std::string& what) {
        const int count = static_cast<int>(c.A.size());
        const double eps = ScalarTraits<T>::eps;
        BatchReport<T> report(cat(what, ", count ", count, ", "), c.A, true);
        for (int b = 0; b < count; ++b) {
            const auto& A = c.A[b];
            const int nb = A.n;
            const auto v = check_lu_matrix(c, r, b, true);
            if (report_all(v.failures, b, report)) return;
            if (!v.compare) continue;
            const auto& lpiv = v.lpiv;
            if (nb > 0 && !std::equal(lpiv.begin(), lpiv.begin() + nb, r.ipiv[b].begin())) {
                const std::string why = pivot_difference(v.L, lpiv, r.ipiv[b].data(), nb);
                if (!why.empty() && report(b, "against LAPACKE: " + why)) return;
            }
            // The factor against getf2_reference, the warp kernel's operations in its order
            // (LAPACKE's recursive getrf2 rounds otherwise, by as much as the matrix's conditioning
            // allows: in float beyond 100 n eps on one matrix in 10000).
            HostMatrix<T> G = A;
            std::vector<int> gpiv;
            getf2_reference(G, gpiv);
            if (nb > 0 && !std::equal(gpiv.begin(), gpiv.begin() + nb, r.ipiv[b].begin())) {
                const std::string why = pivot_difference(G, gpiv, r.ipiv[b].data(), nb);
                if (!why.empty() && report(b, "against getf2_reference: " + why)) return;
                continue;
            }
            const double diff = max_abs_diff(r.F[b], G);
            double tol = 16.0 * std::max(nb, 1) * eps * std::max(1.0, max_abs(G));
            if (!(diff <= tol)) {
                // The half kernel (double, more matrices than one grid) applies the pivots four at
                // a time (w V, w = l L^-1) and parts from getf2's order by as much as A's
                // conditioning allows (1.1 times 16 n eps on one matrix of order 19 among 10000):
                // allowed up to kappa_1(A) / n times the tolerance, at most 100 times.
                tol *= std::clamp(condition_1(A, G) / std::max(nb, 1), 1.0, 100.0);
            }
            if (!(diff <= tol)) {
                std::ostringstream m;
                m << "max |F - F_reference| = " << diff << " > " << tol;
                if (report(b, m.str())) return;
            }
        }
    }

    /// Both schedules, each checked; they must agree bitwise.
    template <class T>
    void check_both(const LuCase<T>& c, const std::string& what) {
        const auto r1 = run_vgetrf(c.A, bc::Schedule::ssde);
        check(c, r1, what + ", ssde");
        const auto r2 = run_vgetrf(c.A, bc::Schedule::dsse);
        check(c, r2, what + ", dsse");
        ASSERT_EQ(r1.info, r2.info) << what;
        for (std::size_t b = 0; b < c.A.size(); ++b) {
            ASSERT_EQ(r1.ipiv[b], r2.ipiv[b]) << what << ", matrix " << b << ": SSDE and DSSE pivots differ";
            ASSERT_EQ(std::memcmp(r1.F[b].ptr(), r2.F[b].ptr(), r1.F[b].data.size() * sizeof(T)), 0)
                << what << ", matrix " << b << ": SSDE and DSSE factors differ";
        }
    }
};

template <class T>
class VBatchedLuSmallCuda : public VBatchedLuSmallBase {};

TYPED_TEST_SUITE(VBatchedLuSmallCuda, Precisions);

// Every kernel instance (NMAX 1..32 across the 4/8/16/32-lane groups and their edges), counts 1,
// 7 and 300, uniform and skewed orders with 0 and 1 among them, planted zero pivots.
TYPED_TEST(VBatchedLuSmallCuda, EveryInstanceAgainstLapack) {
    using T = TypeParam;
    for (int nmax : {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 24, 31, 32})
        for (int count : {1, 7, 300})
            for (bool skewed : {false, true}) {
                std::ostringstream what;
                what << "nmax " << nmax << ", count " << count << (skewed ? ", skewed" : ", uniform");
                const std::uint64_t s = this->seed() + 1009ULL * nmax + 31ULL * count + (skewed ? 7 : 0);
                this->check_both(make_lu_case<T>(draw_sizes(skewed, nmax, count, s), true, s), what.str());
                if (this->HasFailure()) return;
            }
}

// 10000 matrices: every group factors several in turn (the next one copied in meanwhile).
TYPED_TEST(VBatchedLuSmallCuda, LargeCounts) {
    using T = TypeParam;
    for (int nmax : {8, 32})
        for (bool skewed : {false, true}) {
            std::ostringstream what;
            what << "nmax " << nmax << ", count 10000" << (skewed ? ", skewed" : ", uniform");
            const std::uint64_t s = this->seed() + 17ULL * nmax + (skewed ? 3 : 0);
            this->check_both(make_lu_case<T>(draw_sizes(skewed, nmax, 10000, s), true, s), what.str());
            if (this->HasFailure()) return;
        }
}

// Orders 0 only; a single matrix of order 0, of order 1 (0 and not), singular ones; count 0.
TYPED_TEST(VBatchedLuSmallCuda, OrdersZeroAndOne) {
    using T = TypeParam;
    this->check_both(make_lu_case<T>(std::vector<int>(9, 0), false, this->seed()), "orders 0");
    this->check_both(make_lu_case<T>({1}, false, this->seed() + 1), "one matrix of order 1");
    this->check_both(make_lu_case<T>({1}, true, this->seed() + 2), "one zero matrix of order 1");
    this->check_both(make_lu_case<T>({0, 1, 0, 1, 1, 0, 1}, true, this->seed() + 3), "orders 0 and 1");
    this->check_both(make_lu_case<T>({32, 0, 1, 31, 2, 0, 17, 1}, true, this->seed() + 4), "mixed");
    bc::vgetrf<T>(this->launch(), bc::Schedule::dsse, 8, nullptr, nullptr, nullptr, nullptr, nullptr, 0);
    ASSERT_TRUE(this->sync());
}

// A NaN in one matrix, sharing its warp with others: its pivots in range and info in [0, n];
// every other matrix exact.
TYPED_TEST(VBatchedLuSmallCuda, NanInOneMatrix) {
    using T = TypeParam;
    std::mt19937_64 rng(this->seed());
    for (int nmax : {4, 8, 16, 32})
        for (int nbad : {1, nmax / 2 + 1, nmax}) {
            std::ostringstream what;
            what << "nmax " << nmax << ", NaN in a matrix of order " << nbad;
            auto sizes = draw_sizes(false, nmax, 37, this->seed() + 5ULL * nmax + nbad);
            sizes[5] = nbad;
            auto c = make_lu_case<T>(sizes, true, this->seed() + 3ULL * nbad);
            c.A[5](static_cast<int>(rng() % nbad), static_cast<int>(rng() % nbad)) = nan<T>();
            c.nan_at = 5;
            this->check_both(c, what.str());
            if (this->HasFailure()) return;
        }
}

// Ties. Kind 0: A = P L U with L unit lower of entries +-1 and +-1/2 and U upper with entries
// and diagonal small powers of two: the first steps meet equal magnitudes (the +-1 rows), later
// ones often. Kind 1 (double): a first column of +-(1 + k 2^-40), equal in the high 32 bits of
// the pivot key, different below. The pivots and factors must be bit for bit those of
// getf2_reference (ties to the smallest index), the first pivot LAPACKE's, info LAPACKE's and the
// residual below 30; the fixed-size getrf (the same kernel) gives the same bits.
TYPED_TEST(VBatchedLuSmallCuda, TiesTakeTheSmallestIndex) {
    using T = TypeParam;
    for (int n : {3, 8, 13, 16, 32})
        for (int kind : {0, 1}) {
            if (kind == 1 && sizeof(T) != sizeof(double)) continue;
            std::ostringstream what;
            what << "n " << n << (kind == 0 ? ", exact ties at every step" : ", near ties in column 1");
            std::mt19937_64 rng(this->seed() + 97ULL * n + kind);
            auto pick = [&](std::initializer_list<double> v) { return *(v.begin() + rng() % v.size()); };
            LuCase<T> c;
            const int count = 200;
            for (int b = 0; b < count; ++b) {
                HostMatrix<T> A = random_matrix<T>(n, n, n, this->seed() + 131ULL * b + n);
                if (kind == 0) {
                    std::vector<double> L(static_cast<std::size_t>(n) * n, 0.0), U(L.size(), 0.0);
                    for (int j = 0; j < n; ++j) {
                        L[j + static_cast<std::size_t>(j) * n] = 1.0;
                        for (int i = j + 1; i < n; ++i)
                            L[i + static_cast<std::size_t>(j) * n] = pick({1, -1, 0.5, -0.5, 1, -1});
                        for (int i = 0; i < j; ++i) U[i + static_cast<std::size_t>(j) * n] = pick({-2, -1, 0, 1, 2});
                        U[j + static_cast<std::size_t>(j) * n] = pick({1, -1, 2, -2, 0.5, -0.5});
                    }
                    std::vector<int> perm(n);
                    for (int i = 0; i < n; ++i) perm[i] = i;
                    std::shuffle(perm.begin(), perm.end(), rng);
                    for (int j = 0; j < n; ++j)
                        for (int i = 0; i < n; ++i) {
                            double v = 0.0;
                            for (int k = 0; k <= std::min(i, j); ++k)
                                v += L[i + static_cast<std::size_t>(k) * n] * U[k + static_cast<std::size_t>(j) * n];
                            A(perm[i], j) = static_cast<T>(v);
                        }
                } else {
                    for (int i = 0; i < n; ++i)
                        A(i, 0) =
                            static_cast<T>(pick({1, -1}) * (1.0 + std::ldexp(static_cast<double>(rng() % 3), -40)));
                }
                c.A.push_back(A);
                c.expected.push_back(0);
            }
            const auto r = this->run_vgetrf(c.A, bc::Schedule::dsse);
            for (int b = 0; b < count; ++b) {
                HostMatrix<T> L = c.A[b], G = c.A[b];
                std::vector<int> lpiv(n), gpiv;
                const int linfo = blas::getrf(n, n, L.ptr(), L.ld, lpiv.data());
                getf2_reference(G, gpiv);
                ASSERT_EQ(r.ipiv[b], gpiv) << what.str() << ", matrix " << b << ": the pivots";
                ASSERT_EQ(std::memcmp(r.F[b].ptr(), G.ptr(), G.data.size() * sizeof(T)), 0)
                    << what.str() << ", matrix " << b << ": the factors";
                ASSERT_EQ(r.ipiv[b][0], lpiv[0]) << what.str() << ", matrix " << b << ": LAPACKE's first pivot";
                ASSERT_EQ(r.info[b], linfo) << what.str() << ", matrix " << b;
                const double res = lu_residual_ratio(c.A[b], r.F[b], r.ipiv[b].data());
                ASSERT_TRUE(checks::passes(res) && res >= 0) << what.str() << ", matrix " << b << ": residual " << res;
            }
            // The fixed-size path on the same batch (one order, lda n).
            DeviceVBatch<T> d(c.A);
            DeviceBuffer<int> ipiv(static_cast<std::size_t>(n) * count), info(count);
            bc::getrf<T>(this->launch(), n, d.ptrs.get(), n, ipiv.get(), info.get(), count);
            ASSERT_TRUE(this->sync());
            const auto F = d.download(c.A);
            const auto hp = download_ints(ipiv), hi = download_ints(info);
            for (int b = 0; b < count; ++b) {
                ASSERT_EQ(hi[b], r.info[b]) << what.str() << ", matrix " << b;
                ASSERT_TRUE(std::equal(hp.begin() + static_cast<long>(n) * b,
                                       hp.begin() + static_cast<long>(n) * (b + 1), r.ipiv[b].begin()))
                    << what.str() << ", matrix " << b << ": getrf and vgetrf pivots differ";
                ASSERT_EQ(std::memcmp(F[b].ptr(), r.F[b].ptr(), static_cast<std::size_t>(n) * n * sizeof(T)), 0)
                    << what.str() << ", matrix " << b << ": getrf and vgetrf factors differ";
            }
        }
}

}  // namespace
}  // namespace starfact::test
