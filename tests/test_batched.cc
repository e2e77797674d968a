// The batched module on the host: every API function against LAPACKE run matrix by
// matrix on the same data (bitwise where the arithmetic is the same), strided and pointer
// batches, planted failures with exact infos, a NaN matrix, every argument error, the StarPU
// path against the host path, and `starfact batched` (generated batches, .npy files, --sizes).
#include <cblas.h>
#include <gtest/gtest.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "batched/batched.hpp"
#include "batched/residuals.hpp"
#include "cli_runner.hpp"
#include "codelets/codelets.hpp"
#include "common/error.hpp"
#include "common/matgen.hpp"
#include "io/io.hpp"
#include "test_support.hpp"

namespace starfact::test {
namespace {
namespace bt = starfact::batched;

// ---- LAPACKE per matrix, the reference ----------------------------------------------------
int ref_getrf(int n, double* A, int lda, int* ipiv) { return LAPACKE_dgetrf(LAPACK_COL_MAJOR, n, n, A, lda, ipiv); }
int ref_getrf(int n, float* A, int lda, int* ipiv) { return LAPACKE_sgetrf(LAPACK_COL_MAJOR, n, n, A, lda, ipiv); }
int ref_getrs(int n, int r, const double* A, int lda, const int* p, double* B, int ldb) {
    return LAPACKE_dgetrs(LAPACK_COL_MAJOR, 'N', n, r, A, lda, p, B, ldb);
}
int ref_getrs(int n, int r, const float* A, int lda, const int* p, float* B, int ldb) {
    return LAPACKE_sgetrs(LAPACK_COL_MAJOR, 'N', n, r, A, lda, p, B, ldb);
}
int ref_potrf(char u, int n, double* A, int lda) { return LAPACKE_dpotrf(LAPACK_COL_MAJOR, u, n, A, lda); }
int ref_potrf(char u, int n, float* A, int lda) { return LAPACKE_spotrf(LAPACK_COL_MAJOR, u, n, A, lda); }
int ref_potrs(char u, int n, int r, const double* A, int lda, double* B, int ldb) {
    return LAPACKE_dpotrs(LAPACK_COL_MAJOR, u, n, r, A, lda, B, ldb);
}
int ref_potrs(char u, int n, int r, const float* A, int lda, float* B, int ldb) {
    return LAPACKE_spotrs(LAPACK_COL_MAJOR, u, n, r, A, lda, B, ldb);
}
int ref_geqrf(int m, int n, double* A, int lda, double* tau) {
    return LAPACKE_dgeqrf(LAPACK_COL_MAJOR, m, n, A, lda, tau);
}
int ref_geqrf(int m, int n, float* A, int lda, float* tau) {
    return LAPACKE_sgeqrf(LAPACK_COL_MAJOR, m, n, A, lda, tau);
}
int ref_gels(int m, int n, int r, double* A, int lda, double* B, int ldb) {
    return LAPACKE_dgels(LAPACK_COL_MAJOR, 'N', m, n, r, A, lda, B, ldb);
}
int ref_gels(int m, int n, int r, float* A, int lda, float* B, int ldb) {
    return LAPACKE_sgels(LAPACK_COL_MAJOR, 'N', m, n, r, A, lda, B, ldb);
}

/// A strided batch with NaN everywhere outside its matrices: padding rows (ld > rows) and a gap
/// between matrices (stride > ld * cols), so a routine that touches them shows.
template <class T>
struct Strided {
    int rows = 0, cols = 0, ld = 1, count = 0;
    long long stride = 0;
    std::vector<T> data;

    Strided(int r, int c, int cnt, int pad_rows = 2, int gap = 3)
        : rows(r), cols(c), ld(std::max(1, r + pad_rows)), count(cnt) {
        stride = static_cast<long long>(ld) * c + gap;
        data.assign(static_cast<std::size_t>(std::max(1LL, stride * cnt)), nan<T>());
    }
    T* at(int b) { return data.data() + b * stride; }
    const T* at(int b) const { return data.data() + b * stride; }
    T& operator()(int b, int i, int j) { return at(b)[i + static_cast<std::size_t>(j) * ld]; }
    /// Every byte equal (NaNs included): the same results, and nothing outside touched.
    bool same_bytes(const Strided& o) const {
        return data.size() == o.data.size() && std::memcmp(data.data(), o.data.data(), data.size() * sizeof(T)) == 0;
    }
    /// How many entries outside the matrices are not NaN.
    int touched_outside() const {
        int c = 0;
        for (long long k = 0; k < static_cast<long long>(data.size()); ++k) {
            const long long b = k / stride, off = k % stride, i = off % ld, j = off / ld;
            const bool inside = b < count && j < cols && i < rows;
            if (!inside && !std::isnan(data[static_cast<std::size_t>(k)])) ++c;
        }
        return c;
    }
};

template <class T>
void fill_uniform(Strided<T>& S, std::uint64_t seed) {
    for (int b = 0; b < S.count; ++b) matgen::uniform(S.rows, S.cols, seed + 7919ULL * b, S.at(b), S.ld);
}
template <class T>
void fill_spd(Strided<T>& S, std::uint64_t seed) {
    for (int b = 0; b < S.count; ++b) matgen::spd(S.cols, seed + 7919ULL * b, S.at(b), S.ld);
}

/// Pointer batch over a Strided batch's matrices, in a shuffled order (matrix b of the pointer
/// batch is matrix perm[b] of the storage), so that the order of the pointers is what counts.
template <class T>
std::vector<T*> shuffled_pointers(Strided<T>& S, std::vector<int>& perm, std::uint64_t seed) {
    perm.resize(static_cast<std::size_t>(S.count));
    std::iota(perm.begin(), perm.end(), 0);
    std::uint64_t x = seed | 1;
    for (int i = S.count - 1; i > 0; --i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::swap(perm[static_cast<std::size_t>(i)], perm[x % static_cast<std::uint64_t>(i + 1)]);
    }
    std::vector<T*> p;
    for (int b = 0; b < S.count; ++b) p.push_back(S.at(perm[static_cast<std::size_t>(b)]));
    return p;
}

/// Orders at and around the kernels' cuts (1-8, 16, 32, 64, 128), few enough to keep the suite short.
const std::vector<int> kSizes = {1, 2, 3, 4, 5, 6, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 128};

int count_for(int n) { return n <= 8 ? 300 : n <= 33 ? 7 : n < 128 ? 7 : 1; }

template <class T>
class BatchedHost : public SeededTest {
protected:
    void SetUp() override { openblas_set_num_threads(1); }  // the reference on one BLAS thread, as the path
};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(BatchedHost, Precisions);

// ---- every operation against LAPACKE ------------------------------------------------------

TYPED_TEST(BatchedHost, GetrfAndGetrsMatchLapackeBitwise) {
    using T = TypeParam;
    for (int n : kSizes) {
        const int count = count_for(n), nrhs = 3;
        SCOPED_TRACE(::testing::Message() << "n = " << n << ", count = " << count);
        Strided<T> A(n, n, count), B(n, nrhs, count);
        fill_uniform(A, this->seed() + n);
        fill_uniform(B, this->seed() + 1000 + n);
        Strided<T> refA = A, refB = B;
        std::vector<int> ipiv(count * n, -1), info(count, -1), ref_ipiv(count * n), ref_info(count);
        for (int b = 0; b < count; ++b) ref_info[b] = ref_getrf(n, refA.at(b), refA.ld, &ref_ipiv[b * n]);
        for (int b = 0; b < count; ++b) ref_getrs(n, nrhs, refA.at(b), refA.ld, &ref_ipiv[b * n], refB.at(b), refB.ld);

        EXPECT_EQ(bt::getrf(n, A.at(0), A.ld, A.stride, ipiv.data(), info.data(), count), 0);
        EXPECT_TRUE(A.same_bytes(refA));
        EXPECT_EQ(ipiv, ref_ipiv);
        EXPECT_EQ(info, ref_info);
        bt::getrs(n, nrhs, A.at(0), A.ld, A.stride, ipiv.data(), B.at(0), B.ld, B.stride, count);
        EXPECT_TRUE(B.same_bytes(refB));
        EXPECT_EQ(A.touched_outside(), 0);
        EXPECT_EQ(B.touched_outside(), 0);
        // The factors are good ones, not only LAPACK's: the residual of the first matrix.
        Strided<T> orig(n, n, 1);
        matgen::uniform(n, n, this->seed() + n, orig.at(0), orig.ld);
        EXPECT_PRED_FORMAT1(ResidualPasses, bt::residuals::getrf(n, orig.at(0), orig.ld, A.at(0), A.ld, ipiv.data()));
    }
}

TYPED_TEST(BatchedHost, PointerBatchesFollowThePointers) {
    using T = TypeParam;
    for (int n : {1, 5, 16, 33, 64}) {
        const int count = 7, nrhs = 2, m = 2 * n;
        SCOPED_TRACE(::testing::Message() << "n = " << n);
        std::vector<int> perm, permB;
        // getrf + getrs
        Strided<T> A(n, n, count), B(n, nrhs, count);
        fill_uniform(A, this->seed() + n);
        fill_uniform(B, this->seed() + 1 + n);
        Strided<T> refA = A, refB = B;
        const auto pa = shuffled_pointers(A, perm, this->seed());
        std::vector<T*> pb;
        for (int b = 0; b < count; ++b) pb.push_back(B.at(perm[b]));
        std::vector<int> ipiv(count * n), info(count, -1), ref_ipiv(count * n), ref_info(count);
        for (int b = 0; b < count; ++b) {
            ref_info[b] = ref_getrf(n, refA.at(perm[b]), refA.ld, &ref_ipiv[b * n]);
            ref_getrs(n, nrhs, refA.at(perm[b]), refA.ld, &ref_ipiv[b * n], refB.at(perm[b]), refB.ld);
        }
        bt::getrf(n, pa.data(), A.ld, ipiv.data(), info.data(), count);
        std::vector<const T*> cpa(pa.begin(), pa.end());
        bt::getrs(n, nrhs, cpa.data(), A.ld, ipiv.data(), pb.data(), B.ld, count);
        EXPECT_TRUE(A.same_bytes(refA));
        EXPECT_TRUE(B.same_bytes(refB));
        EXPECT_EQ(ipiv, ref_ipiv);
        EXPECT_EQ(info, ref_info);

        // potrf + potrs, upper
        Strided<T> S(n, n, count), C(n, nrhs, count);
        fill_spd(S, this->seed() + 2 + n);
        fill_uniform(C, this->seed() + 3 + n);
        Strided<T> refS = S, refC = C;
        const auto ps = shuffled_pointers(S, perm, this->seed() + 9);
        std::vector<T*> pc;
        for (int b = 0; b < count; ++b) pc.push_back(C.at(perm[b]));
        for (int b = 0; b < count; ++b) {
            ref_info[b] = ref_potrf('U', n, refS.at(perm[b]), refS.ld);
            ref_potrs('U', n, nrhs, refS.at(perm[b]), refS.ld, refC.at(perm[b]), refC.ld);
        }
        bt::potrf(bt::Uplo::upper, n, ps.data(), S.ld, info.data(), count);
        std::vector<const T*> cps(ps.begin(), ps.end());
        bt::potrs(bt::Uplo::upper, n, nrhs, cps.data(), S.ld, pc.data(), C.ld, count);
        EXPECT_TRUE(S.same_bytes(refS));
        EXPECT_TRUE(C.same_bytes(refC));
        EXPECT_EQ(info, ref_info);

        // geqrf (tall) and gels
        Strided<T> Q(m, n, count), G(m, n, count), D(m, nrhs, count);
        fill_uniform(Q, this->seed() + 4 + n);
        fill_uniform(G, this->seed() + 5 + n);
        fill_uniform(D, this->seed() + 6 + n);
        Strided<T> refQ = Q;
        std::vector<T> tau(count * n), ref_tau(count * n);
        const auto pq = shuffled_pointers(Q, perm, this->seed() + 11);
        for (int b = 0; b < count; ++b) ref_geqrf(m, n, refQ.at(perm[b]), refQ.ld, &ref_tau[b * n]);
        bt::geqrf(m, n, pq.data(), Q.ld, tau.data(), count);
        EXPECT_TRUE(Q.same_bytes(refQ));
        EXPECT_EQ(tau, ref_tau);
        // gels through pointers gives what the strided call gives on the same matrices.
        Strided<T> G2 = G, D2 = D;
        std::vector<int> info2(count);
        std::vector<T> tau2(count * n);
        const auto pg = shuffled_pointers(G, perm, this->seed() + 13);
        std::vector<T*> pd;
        for (int b = 0; b < count; ++b) pd.push_back(D.at(perm[b]));
        bt::gels(m, n, nrhs, pg.data(), G.ld, tau.data(), pd.data(), D.ld, info.data(), count);
        bt::gels(m, n, nrhs, G2.at(0), G2.ld, G2.stride, tau2.data(), D2.at(0), D2.ld, D2.stride, info2.data(), count);
        EXPECT_TRUE(G.same_bytes(G2));
        EXPECT_TRUE(D.same_bytes(D2));
        for (int b = 0; b < count; ++b) {
            EXPECT_EQ(info[b], 0);
            EXPECT_EQ(std::memcmp(&tau[b * n], &tau2[perm[b] * n], sizeof(T) * n), 0) << "matrix " << b;
        }
    }
}

TYPED_TEST(BatchedHost, PotrfAndPotrsMatchLapackeAndLeaveTheOtherTriangle) {
    using T = TypeParam;
    for (bt::Uplo uplo : {bt::Uplo::lower, bt::Uplo::upper}) {
        const char u = uplo == bt::Uplo::lower ? 'L' : 'U';
        for (int n : kSizes) {
            const int count = count_for(n), nrhs = 4;
            SCOPED_TRACE(::testing::Message() << "uplo " << u << ", n = " << n << ", count = " << count);
            Strided<T> A(n, n, count), B(n, nrhs, count), orig(n, n, count);
            fill_spd(orig, this->seed() + n);
            A = orig;
            // The other triangle is neither read nor written: poison it.
            for (int b = 0; b < count; ++b)
                for (int j = 0; j < n; ++j)
                    for (int i = 0; i < n; ++i)
                        if ((u == 'L' && i < j) || (u == 'U' && i > j)) A(b, i, j) = nan<T>();
            fill_uniform(B, this->seed() + 77 + n);
            Strided<T> refA = A, refB = B;
            std::vector<int> info(count, -1), ref_info(count);
            for (int b = 0; b < count; ++b) {
                ref_info[b] = ref_potrf(u, n, refA.at(b), refA.ld);
                ref_potrs(u, n, nrhs, refA.at(b), refA.ld, refB.at(b), refB.ld);
            }
            EXPECT_EQ(bt::potrf(uplo, n, A.at(0), A.ld, A.stride, info.data(), count), 0);
            bt::potrs(uplo, n, nrhs, A.at(0), A.ld, A.stride, B.at(0), B.ld, B.stride, count);
            EXPECT_TRUE(A.same_bytes(refA));  // includes the poisoned triangle: still NaN
            EXPECT_TRUE(B.same_bytes(refB));
            EXPECT_EQ(info, ref_info);
            EXPECT_PRED_FORMAT1(ResidualPasses,
                                bt::residuals::potrf(uplo, n, orig.at(count - 1), orig.ld, A.at(count - 1), A.ld));
            Strided<T> B0(n, nrhs, 1);
            matgen::uniform(n, nrhs, this->seed() + 77 + n, B0.at(0), B0.ld);
            EXPECT_PRED_FORMAT1(ResidualPasses,
                                bt::residuals::solve(n, nrhs, orig.at(0), orig.ld, B.at(0), B.ld, B0.at(0), B0.ld));
        }
    }
}

TYPED_TEST(BatchedHost, GeqrfMatchesLapackeAndGelsMatchesItsLeastSquares) {
    using T = TypeParam;
    for (int n : kSizes) {
        for (int m : {n, n + 3, 2 * n}) {
            const int count = count_for(n), nrhs = 2;
            SCOPED_TRACE(::testing::Message() << "m = " << m << ", n = " << n << ", count = " << count);
            Strided<T> A(m, n, count);
            fill_uniform(A, this->seed() + m * 131 + n);
            const Strided<T> orig = A;
            Strided<T> refA = A;
            std::vector<T> tau(count * n), ref_tau(count * n);
            for (int b = 0; b < count; ++b) ref_geqrf(m, n, refA.at(b), refA.ld, &ref_tau[b * n]);
            bt::geqrf(m, n, A.at(0), A.ld, A.stride, tau.data(), count);
            EXPECT_TRUE(A.same_bytes(refA));
            EXPECT_EQ(tau, ref_tau);
            EXPECT_PRED_FORMAT1(ResidualPasses,
                                bt::residuals::geqrf(m, n, orig.at(0), orig.ld, A.at(0), A.ld, tau.data()));
            if (m != 2 * n) continue;
            // gels on well-conditioned tall matrices: LAPACK's gels gives the same solution to
            // rounding, and the normal equations hold.
            Strided<T> G = orig, B(m, nrhs, count);
            fill_uniform(B, this->seed() + 5 + n);
            const Strided<T> B0 = B;
            Strided<T> refG = orig, refB = B;
            std::vector<int> info(count, -1);
            for (int b = 0; b < count; ++b)
                ASSERT_EQ(ref_gels(m, n, nrhs, refG.at(b), refG.ld, refB.at(b), refB.ld), 0);
            EXPECT_EQ(
                bt::gels(m, n, nrhs, G.at(0), G.ld, G.stride, tau.data(), B.at(0), B.ld, B.stride, info.data(), count),
                0);
            EXPECT_EQ(info, std::vector<int>(count, 0));
            EXPECT_TRUE(G.same_bytes(A));  // A holds geqrf's factors
            for (int b = 0; b < count; ++b) {
                double diff = 0, size = 0;
                for (int j = 0; j < nrhs; ++j)
                    for (int i = 0; i < m; ++i) {
                        diff = std::max(diff, std::abs(double(B(b, i, j)) - double(refB(b, i, j))));
                        size = std::max(size, std::abs(double(refB(b, i, j))));
                    }
                EXPECT_LE(diff, 100.0 * m * ScalarTraits<T>::eps * size) << "matrix " << b;
                EXPECT_PRED_FORMAT1(ResidualPasses, bt::residuals::least_squares(m, n, nrhs, orig.at(b), orig.ld,
                                                                                 B.at(b), B.ld, B0.at(b), B0.ld));
            }
            EXPECT_EQ(B.touched_outside(), 0);
        }
    }
}

TYPED_TEST(BatchedHost, ThreadCountDoesNotChangeResults) {
    using T = TypeParam;
    const int n = 20, count = 61;
    Strided<T> A(n, n, count);
    fill_uniform(A, this->seed());
    Strided<T> A1 = A, A3 = A;
    std::vector<int> p1(count * n), p3(count * n), i1(count), i3(count);
    bt::getrf(n, A1.at(0), A1.ld, A1.stride, p1.data(), i1.data(), count, bt::HostOptions{1});
    bt::getrf(n, A3.at(0), A3.ld, A3.stride, p3.data(), i3.data(), count, bt::HostOptions{3});
    EXPECT_TRUE(A1.same_bytes(A3));
    EXPECT_EQ(p1, p3);
    EXPECT_EQ(i1, i3);
    EXPECT_FALSE(A1.same_bytes(A));  // it did factor
}

// ---- planted failures, NaN ---------------------------------------------------------------

/// The planted matrices (count/4, count/2, count-1) and the failing column of each (1, n/2+1, n).
std::vector<std::pair<int, int>> planted(int count, int n) {
    return {{count / 4, 1}, {count / 2, n / 2 + 1}, {count - 1, n}};
}

TYPED_TEST(BatchedHost, PlantedFailuresAreAllReportedExactly) {
    using T = TypeParam;
    for (int count : {7, 300}) {
        for (int n : {1, 4, 17, 33}) {
            SCOPED_TRACE(::testing::Message() << "count = " << count << ", n = " << n);
            const auto plant = planted(count, n);
            // LU: a zero column k gives U(k,k) = 0 exactly, info = k.
            Strided<T> A(n, n, count);
            fill_uniform(A, this->seed() + n);
            for (auto [b, k] : plant)
                for (int i = 0; i < n; ++i) A(b, i, k - 1) = T(0);
            Strided<T> refA = A;
            std::vector<int> ipiv(count * n), info(count, -1), ref_ipiv(count * n), ref_info(count);
            for (int b = 0; b < count; ++b) ref_info[b] = ref_getrf(n, refA.at(b), refA.ld, &ref_ipiv[b * n]);
            const int failed = bt::getrf(n, A.at(0), A.ld, A.stride, ipiv.data(), info.data(), count);
            const auto f = bt::failures(info.data(), count);
            ASSERT_EQ(static_cast<int>(f.size()), failed);
            ASSERT_EQ(f.size(), plant.size());
            for (std::size_t i = 0; i < plant.size(); ++i) {
                EXPECT_EQ(f[i].index, plant[i].first);
                EXPECT_EQ(f[i].info, plant[i].second);
            }
            EXPECT_EQ(info, ref_info);
            EXPECT_TRUE(A.same_bytes(refA));

            // Cholesky: leading minor k not positive, info = k.
            for (bt::Uplo uplo : {bt::Uplo::lower, bt::Uplo::upper}) {
                Strided<T> S(n, n, count);
                fill_spd(S, this->seed() + 3 + n);
                for (auto [b, k] : plant) matgen::spd_failing_at(n, k, this->seed() + b, S.at(b), S.ld);
                Strided<T> refS = S;
                const char u = uplo == bt::Uplo::lower ? 'L' : 'U';
                for (int b = 0; b < count; ++b) ref_info[b] = ref_potrf(u, n, refS.at(b), refS.ld);
                EXPECT_EQ(bt::potrf(uplo, n, S.at(0), S.ld, S.stride, info.data(), count), 3);
                const auto fs = bt::failures(info.data(), count);
                ASSERT_EQ(fs.size(), 3u);
                for (std::size_t i = 0; i < plant.size(); ++i) {
                    EXPECT_EQ(fs[i].index, plant[i].first);
                    EXPECT_EQ(fs[i].info, plant[i].second);
                }
                EXPECT_EQ(info, ref_info);
                EXPECT_TRUE(S.same_bytes(refS));
            }

            // Least squares: a zero column k gives R(k,k) = 0 exactly; that matrix's B stays.
            const int m = n + 2, nrhs = 2;
            Strided<T> G(m, n, count), B(m, nrhs, count);
            fill_uniform(G, this->seed() + 5 + n);
            fill_uniform(B, this->seed() + 6 + n);
            for (auto [b, k] : plant)
                for (int i = 0; i < m; ++i) G(b, i, k - 1) = T(0);
            const Strided<T> B0 = B;
            std::vector<T> tau(count * n);
            EXPECT_EQ(
                bt::gels(m, n, nrhs, G.at(0), G.ld, G.stride, tau.data(), B.at(0), B.ld, B.stride, info.data(), count),
                3);
            const auto fg = bt::failures(info.data(), count);
            ASSERT_EQ(fg.size(), 3u);
            for (std::size_t i = 0; i < plant.size(); ++i) {
                EXPECT_EQ(fg[i].index, plant[i].first);
                EXPECT_EQ(fg[i].info, plant[i].second);
            }
            for (int b = 0; b < count; ++b) {
                const bool is_planted = info[b] != 0;
                bool unchanged = std::memcmp(B.at(b), B0.at(b), sizeof(T) * (B.ld * nrhs)) == 0;
                EXPECT_EQ(unchanged, is_planted) << "matrix " << b;
            }
        }
    }
}

TYPED_TEST(BatchedHost, ANanMatrixAffectsOnlyItself) {
    using T = TypeParam;
    const int count = 9, n = 12, bad = 4;
    Strided<T> A(n, n, count), S(n, n, count);
    fill_uniform(A, this->seed());
    fill_spd(S, this->seed() + 1);
    A(bad, 5, 3) = nan<T>();
    S(bad, 6, 6) = nan<T>();
    S(bad, 6, 2) = nan<T>();
    S(bad, 2, 6) = nan<T>();
    Strided<T> refA = A, refS = S;
    std::vector<int> ipiv(count * n), info(count, -1), ref_ipiv(count * n), ref_info(count);
    for (int b = 0; b < count; ++b) ref_info[b] = ref_getrf(n, refA.at(b), refA.ld, &ref_ipiv[b * n]);
    bt::getrf(n, A.at(0), A.ld, A.stride, ipiv.data(), info.data(), count);
    // The NaN matrix's pivots and info are OpenBLAS's choice (its vector idamax compares NaNs in
    // an order that depends on the data's alignment): only their range is promised.
    EXPECT_GE(info[bad], 0);
    EXPECT_LE(info[bad], n);
    for (int b = 0; b < count; ++b) {
        if (b == bad) continue;
        EXPECT_EQ(info[b], 0);
        EXPECT_EQ(info[b], ref_info[b]);
        EXPECT_TRUE(std::equal(&ipiv[b * n], &ipiv[b * n] + n, &ref_ipiv[b * n])) << "matrix " << b;
        EXPECT_EQ(std::memcmp(A.at(b), refA.at(b), sizeof(T) * A.ld * n), 0) << "matrix " << b;
    }
    for (int p : std::vector<int>(ipiv.begin() + bad * n, ipiv.begin() + (bad + 1) * n)) {
        EXPECT_GE(p, 1);
        EXPECT_LE(p, n);
    }
    for (int b = 0; b < count; ++b) ref_info[b] = ref_potrf('L', n, refS.at(b), refS.ld);
    EXPECT_EQ(bt::potrf(bt::Uplo::lower, n, S.at(0), S.ld, S.stride, info.data(), count), 1);
    // Cholesky reports the column of the first NaN pivot (LAPACK's reference does; OpenBLAS's
    // potrf may not, so that matrix is not compared with it).
    EXPECT_EQ(info[bad], 7);
    for (int b = 0; b < count; ++b) {
        if (b == bad) continue;
        EXPECT_EQ(info[b], 0);
        EXPECT_EQ(std::memcmp(S.at(b), refS.at(b), sizeof(T) * S.ld * n), 0) << "matrix " << b;
    }
}

// ---- argument errors and no-ops ----------------------------------------------------------

/// Calls `call`, expects ArgumentError naming `argument`, and that none of `data` changed.
template <class T>
void expect_argument_error(const char* argument, const std::function<void()>& call, const std::vector<T>& before,
                           const std::vector<T>& after, const std::vector<int>& ibefore,
                           const std::vector<int>& iafter) {
    try {
        call();
        ADD_FAILURE() << "no ArgumentError for '" << argument << "'";
    } catch (const ArgumentError& e) {
        EXPECT_EQ(e.argument(), argument) << e.what();
        EXPECT_NE(std::string(e.what()).find(argument), std::string::npos) << e.what();
    }
    EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * sizeof(T)), 0) << "data changed: " << argument;
    EXPECT_EQ(ibefore, iafter) << "ints changed: " << argument;
}

TYPED_TEST(BatchedHost, ArgumentErrorsNameTheArgumentAndTouchNothing) {
    using T = TypeParam;
    const int n = 6, count = 5, nrhs = 2, m = 9;
    std::vector<T> A(static_cast<std::size_t>(m) * n * count), B(static_cast<std::size_t>(m) * nrhs * count),
        tau(n * count);
    matgen::uniform(m, n * count, this->seed(), A.data(), m);
    matgen::uniform(m, nrhs * count, this->seed() + 1, B.data(), m);
    std::vector<int> ipiv(n * count, 5), info(count, 5);
    const std::vector<T> A0 = A;
    const std::vector<int> I0 = ipiv, F0 = info;
    auto ints = [&] {
        std::vector<int> v = ipiv;
        v.insert(v.end(), info.begin(), info.end());
        return v;
    };
    std::vector<int> ints0 = I0;
    ints0.insert(ints0.end(), F0.begin(), F0.end());
    T* a = A.data();
    T* b = B.data();
    const long long sa = static_cast<long long>(n) * n, sb = static_cast<long long>(n) * nrhs;
    std::vector<T*> pa(count, a);
    auto check = [&](const char* arg, const std::function<void()>& f) {
        expect_argument_error<T>(arg, f, A0, A, ints0, ints());
    };

    check("n", [&] { bt::getrf(-1, a, n, sa, ipiv.data(), info.data(), count); });
    check("count", [&] { bt::getrf(n, a, n, sa, ipiv.data(), info.data(), -1); });
    check("lda", [&] { bt::getrf(n, a, n - 1, sa, ipiv.data(), info.data(), count); });
    check("lda", [&] { bt::getrf(0, a, 0, 1, ipiv.data(), info.data(), count); });  // lda >= max(1, n)
    check("strideA", [&] { bt::getrf(n, a, n, sa - 1, ipiv.data(), info.data(), count); });
    check("A", [&] { bt::getrf<T>(n, static_cast<T*>(nullptr), n, sa, ipiv.data(), info.data(), count); });
    check("ipiv", [&] { bt::getrf(n, a, n, sa, nullptr, info.data(), count); });
    check("info", [&] { bt::getrf(n, a, n, sa, ipiv.data(), nullptr, count); });
    check("A", [&] { bt::getrf<T>(n, static_cast<T* const*>(nullptr), n, ipiv.data(), info.data(), count); });
    pa[3] = nullptr;
    check("A", [&] { bt::getrf(n, pa.data(), n, ipiv.data(), info.data(), count); });  // a null entry
    pa[3] = a;
    check("nrhs", [&] { bt::getrs(n, -1, a, n, sa, ipiv.data(), b, n, sb, count); });
    check("ldb", [&] { bt::getrs(n, nrhs, a, n, sa, ipiv.data(), b, n - 1, sb, count); });
    check("strideB", [&] { bt::getrs(n, nrhs, a, n, sa, ipiv.data(), b, n, sb - 1, count); });
    check("B", [&] { bt::getrs<T>(n, nrhs, a, n, sa, ipiv.data(), nullptr, n, sb, count); });
    check("ipiv", [&] { bt::getrs(n, nrhs, a, n, sa, nullptr, b, n, sb, count); });
    check("n", [&] { bt::potrf(bt::Uplo::lower, -3, a, n, sa, info.data(), count); });
    check("lda", [&] { bt::potrf(bt::Uplo::upper, n, a, 1, sa, info.data(), count); });
    check("info", [&] { bt::potrf(bt::Uplo::upper, n, a, n, sa, nullptr, count); });
    check("ldb", [&] { bt::potrs(bt::Uplo::lower, n, nrhs, a, n, sa, b, 0, sb, count); });
    check("count", [&] { bt::potrs(bt::Uplo::lower, n, nrhs, a, n, sa, b, n, sb, -2); });
    const long long sqa = static_cast<long long>(m) * n, sqb = static_cast<long long>(m) * nrhs;
    check("m", [&] { bt::geqrf(-1, n, a, m, sqa, tau.data(), count); });
    check("m", [&] { bt::geqrf(n - 1, n, a, m, sqa, tau.data(), count); });  // wide
    check("lda", [&] { bt::geqrf(m, n, a, m - 1, sqa, tau.data(), count); });
    check("tau", [&] { bt::geqrf<T>(m, n, a, m, sqa, nullptr, count); });
    check("strideA", [&] { bt::geqrf(m, n, a, m, sqa - 1, tau.data(), count); });
    check("m", [&] { bt::gels(n - 1, n, nrhs, a, m, sqa, tau.data(), b, m, sqb, info.data(), count); });
    check("ldb", [&] { bt::gels(m, n, nrhs, a, m, sqa, tau.data(), b, m - 1, sqb, info.data(), count); });  // ldb >= m
    check("strideB", [&] { bt::gels(m, n, nrhs, a, m, sqa, tau.data(), b, m, sqb - 1, info.data(), count); });
    check("info", [&] { bt::gels(m, n, nrhs, a, m, sqa, tau.data(), b, m, sqb, nullptr, count); });
    // The StarPU path checks the same way, before it needs a runtime.
    check("lda", [&] { bt::tasks::getrf(n, a, n - 1, sa, ipiv.data(), info.data(), count); });
    check("m", [&] { bt::tasks::gels(n - 1, n, nrhs, a, m, sqa, tau.data(), b, m, sqb, info.data(), count); });
    check("ldb", [&] { bt::tasks::potrs(bt::Uplo::lower, n, nrhs, a, n, sa, b, n - 1, sb, count); });
    check("slices", [&] { bt::tasks::getrf(n, a, n, sa, ipiv.data(), info.data(), count, {-1}); });
}

TYPED_TEST(BatchedHost, EmptyBatchesAreNoOpsWithZeroInfo) {
    using T = TypeParam;
    std::vector<int> info(4, 9);
    std::vector<T> A(16, nan<T>());
    std::vector<int> ipiv(4, 9);
    // count 0: nothing is touched, null arrays allowed.
    EXPECT_EQ(bt::getrf<T>(4, static_cast<T*>(nullptr), 4, 16, nullptr, nullptr, 0), 0);
    EXPECT_EQ(bt::potrf<T>(bt::Uplo::lower, 4, static_cast<T*>(nullptr), 4, 16, nullptr, 0), 0);
    bt::geqrf<T>(4, 4, static_cast<T*>(nullptr), 4, 16, nullptr, 0);
    // n 0: every info written as 0, nothing else touched.
    EXPECT_EQ(bt::getrf(0, A.data(), 1, 0, ipiv.data(), info.data(), 4), 0);
    EXPECT_EQ(info, std::vector<int>(4, 0));
    EXPECT_EQ(ipiv, std::vector<int>(4, 9));
    info.assign(4, 9);
    EXPECT_EQ(bt::gels(3, 0, 1, A.data(), 3, 0, static_cast<T*>(nullptr), A.data(), 3, 3, info.data(), 4), 0);
    EXPECT_EQ(info, std::vector<int>(4, 0));
    for (T v : A) EXPECT_TRUE(std::isnan(v));
    // nrhs 0: a solve does nothing.
    bt::getrs(4, 0, A.data(), 4, 16, ipiv.data(), static_cast<T*>(nullptr), 4, 0, 1);
}

// ---- the StarPU path --------------------------------------------------------------------------

template <class T>
class BatchedTasks : public RuntimeTest {
protected:
    void SetUp() override {
        RuntimeTest::SetUp();
        openblas_set_num_threads(1);
    }
};
TYPED_TEST_SUITE(BatchedTasks, Precisions);

TYPED_TEST(BatchedTasks, SlicesGiveTheHostPathsResults) {
    using T = TypeParam;
    const int count = 37, n = 17, m = 23, nrhs = 3;
    // CPU workers give the host path's bits; CUDA workers are compared in test_batched_api_cuda.
    const codelets::ScopedImpl cpu_only(codelets::Impl::Cpu);
    for (int slices : {0, 1, 3, 7, 37}) {
        SCOPED_TRACE(::testing::Message() << "slices = " << slices);
        const bt::tasks::TaskOptions opt{slices};
        // LU with two planted failures, then the solve.
        Strided<T> A(n, n, count), B(n, nrhs, count);
        fill_uniform(A, this->seed());
        fill_uniform(B, this->seed() + 1);
        for (int i = 0; i < n; ++i) A(5, i, 2) = A(count - 1, i, n - 1) = T(0);
        Strided<T> hA = A, hB = B;
        std::vector<int> ipiv(count * n, -7), info(count, -7), hipiv(count * n), hinfo(count);
        EXPECT_EQ(bt::tasks::getrf(n, A.at(0), A.ld, A.stride, ipiv.data(), info.data(), count, opt), 2);
        bt::getrf(n, hA.at(0), hA.ld, hA.stride, hipiv.data(), hinfo.data(), count);
        EXPECT_TRUE(A.same_bytes(hA));
        EXPECT_EQ(ipiv, hipiv);
        EXPECT_EQ(info, hinfo);
        EXPECT_EQ(info[5], 3);
        EXPECT_EQ(info[count - 1], n);
        bt::tasks::getrs(n, nrhs, A.at(0), A.ld, A.stride, ipiv.data(), B.at(0), B.ld, B.stride, count, opt);
        bt::getrs(n, nrhs, hA.at(0), hA.ld, hA.stride, hipiv.data(), hB.at(0), hB.ld, hB.stride, count);
        EXPECT_TRUE(B.same_bytes(hB));

        // Cholesky, upper, with one planted failure, then the solve.
        Strided<T> S(n, n, count), C(n, nrhs, count);
        fill_spd(S, this->seed() + 2);
        matgen::spd_failing_at(n, 9, this->seed() + 3, S.at(count / 2), S.ld);
        fill_uniform(C, this->seed() + 4);
        Strided<T> hS = S, hC = C;
        EXPECT_EQ(bt::tasks::potrf(bt::Uplo::upper, n, S.at(0), S.ld, S.stride, info.data(), count, opt), 1);
        bt::potrf(bt::Uplo::upper, n, hS.at(0), hS.ld, hS.stride, hinfo.data(), count);
        EXPECT_TRUE(S.same_bytes(hS));
        EXPECT_EQ(info, hinfo);
        EXPECT_EQ(info[count / 2], 9);
        bt::tasks::potrs(bt::Uplo::upper, n, nrhs, S.at(0), S.ld, S.stride, C.at(0), C.ld, C.stride, count, opt);
        bt::potrs(bt::Uplo::upper, n, nrhs, hS.at(0), hS.ld, hS.stride, hC.at(0), hC.ld, hC.stride, count);
        EXPECT_TRUE(C.same_bytes(hC));

        // QR and least squares (tall), one rank-deficient matrix.
        Strided<T> Q(m, n, count), G(m, n, count), D(m, nrhs, count);
        fill_uniform(Q, this->seed() + 5);
        fill_uniform(G, this->seed() + 6);
        fill_uniform(D, this->seed() + 7);
        for (int i = 0; i < m; ++i) G(count / 4, i, 4) = T(0);
        Strided<T> hQ = Q, hG = G, hD = D;
        std::vector<T> tau(count * n), htau(count * n);
        bt::tasks::geqrf(m, n, Q.at(0), Q.ld, Q.stride, tau.data(), count, opt);
        bt::geqrf(m, n, hQ.at(0), hQ.ld, hQ.stride, htau.data(), count);
        EXPECT_TRUE(Q.same_bytes(hQ));
        EXPECT_EQ(tau, htau);
        EXPECT_EQ(bt::tasks::gels(m, n, nrhs, G.at(0), G.ld, G.stride, tau.data(), D.at(0), D.ld, D.stride, info.data(),
                                  count, opt),
                  1);
        bt::gels(m, n, nrhs, hG.at(0), hG.ld, hG.stride, htau.data(), hD.at(0), hD.ld, hD.stride, hinfo.data(), count);
        EXPECT_TRUE(G.same_bytes(hG));
        EXPECT_TRUE(D.same_bytes(hD));
        EXPECT_EQ(tau, htau);
        EXPECT_EQ(info, hinfo);
        EXPECT_EQ(info[count / 4], 5);
    }
}

TYPED_TEST(BatchedTasks, ForcedCpuWorkersAndDefaultSlices) {
    using T = TypeParam;
    const int count = 300, n = 8;
    const codelets::ScopedImpl cpu_only(codelets::Impl::Cpu);
    Strided<T> A(n, n, count);
    fill_uniform(A, this->seed());
    Strided<T> hA = A;
    std::vector<int> ipiv(count * n), info(count, -1), hipiv(count * n), hinfo(count);
    const int slices = bt::tasks::default_slices(count, static_cast<long long>(A.ld) * n);
    EXPECT_GE(slices, 1);
    EXPECT_LE(slices, count);
    EXPECT_EQ(bt::tasks::getrf(n, A.at(0), A.ld, A.stride, ipiv.data(), info.data(), count), 0);
    bt::getrf(n, hA.at(0), hA.ld, hA.stride, hipiv.data(), hinfo.data(), count);
    EXPECT_TRUE(A.same_bytes(hA));
    EXPECT_EQ(ipiv, hipiv);
    EXPECT_EQ(info, std::vector<int>(count, 0));
}

TEST(BatchedTasksNoRuntime, RefusesWithoutARuntime) {
    std::vector<double> A(4, 1.0);
    std::vector<int> ipiv(2), info(1, 5);
    EXPECT_THROW(bt::tasks::getrf(2, A.data(), 2, 4, ipiv.data(), info.data(), 1), RuntimeError);
    EXPECT_EQ(A, std::vector<double>(4, 1.0));
}

// ---- the command line ----------------------------------------------------------------------

TEST(BatchedCli, EveryOperationPassesItsCheck) {
    // Every operation, the precisions alternating.
    const std::vector<std::pair<const char*, const char*>> runs = {{"getrf", "s"}, {"potrf", "d"}, {"geqrf", "s"},
                                                                   {"getrs", "d"}, {"potrs", "s"}, {"gels", "d"}};
    for (const auto& [op, prec] : runs) {
        {
            std::vector<std::string> args = {"batched",  "--op",   op,       "--count",  "50", "-n",
                                             "9",        "--prec", prec,     "--slices", "4",  "--check",
                                             "--format", "json",   "--seed", "12345"};
            if (std::string(op) == "geqrf" || std::string(op) == "gels") args.insert(args.end(), {"-m", "14"});
            if (std::string(op) == "potrs" || std::string(op) == "potrf") args.insert(args.end(), {"--uplo", "upper"});
            const auto r = cli::run(args, {"STARPU_NCPU=2"});
            ASSERT_EQ(r.code, 0) << cli::command_line(args) << "\n" << r.describe();
            bool found = false;
            std::istringstream lines(r.out);
            for (std::string line; std::getline(lines, line);) {
                const auto j = nlohmann::json::parse(line);
                if (j.value("record", "") != "result") continue;
                found = true;
                EXPECT_EQ(j.at("op"), op);
                EXPECT_EQ(j.at("count"), 50);
                EXPECT_EQ(j.at("failed"), 0);
                EXPECT_EQ(j.at("status"), "ok");
                EXPECT_TRUE(j.at("residual").is_number());
                EXPECT_LT(j.at("residual").get<double>(), 30.0);
                EXPECT_GT(j.at("time_s").get<double>(), 0.0);
            }
            EXPECT_TRUE(found) << r.out;
        }
    }
}

TEST(BatchedCli, BadInputExitsTwoNamingTheOption) {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"batched", "--count", "-1"}, "--count"},
        {{"batched", "-n", "-4"}, "-n"},
        {{"batched", "--op", "getri"}, "--op"},
        {{"batched", "--op", "geqrf", "-n", "8", "-m", "5"}, "-m"},
        {{"batched", "--op", "getrf", "-n", "8", "-m", "12"}, "-m"},
        {{"batched", "--uplo", "L"}, "--uplo"},
        {{"batched", "--slices", "-2"}, "--slices"},
        {{"batched", "--prec", "z"}, "--prec"},
        {{"batched", "--count", "2000000000", "-n", "512"}, "--count"},
        {{"batched", "--nrhs", "x"}, "--nrhs"},
    };
    for (const auto& [args, option] : cases) {
        const auto r = cli::run(args);
        EXPECT_EQ(r.code, 2) << cli::command_line(args) << "\n" << r.describe();
        EXPECT_NE(r.err.find(option), std::string::npos) << cli::command_line(args) << "\n" << r.describe();
        EXPECT_TRUE(r.home_untouched) << cli::command_line(args) << ": StarPU started";
    }
}

TEST(BatchedCli, EmptyBatchAndTableOutput) {
    const auto r = cli::run({"batched", "--op", "potrf", "--count", "0", "-n", "5", "--check"}, {"STARPU_NCPU=1"});
    EXPECT_EQ(r.code, 0) << r.describe();
    EXPECT_NE(r.out.find("potrf"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" ok"), std::string::npos) << r.out;
}

// ---- the command line on files (--input, --rhs, --output) and variable sizes (--sizes) -----------

/// Writes count column-major m x n float64 matrices as a C-order .npy of shape (count, m, n), as
/// NumPy's np.save of a C-contiguous array does (io writes Fortran order only).
void write_c_order(const std::string& path, int count, int m, int n, const std::vector<double>& colmajor) {
    std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::to_string(count) + ", " +
                       std::to_string(m) + ", " + std::to_string(n) + "), }";
    dict.append((64 - (10 + dict.size() + 1) % 64) % 64, ' ');
    dict.push_back('\n');
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes.push_back(static_cast<char>(dict.size() & 0xff));
    bytes.push_back(static_cast<char>(dict.size() >> 8));
    bytes += dict;
    std::vector<double> c;
    for (int b = 0; b < count; ++b)
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) c.push_back(colmajor[static_cast<std::size_t>(b) * m * n + i + j * m]);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fwrite(c.data(), sizeof(double), c.size(), f);
    std::fclose(f);
}

/// A batch of count m x n matrices, packed (ld = m, stride m * n), uniform or SPD.
std::vector<double> packed_batch(int count, int m, int n, bool spd, std::uint64_t seed) {
    std::vector<double> a(static_cast<std::size_t>(count) * m * n);
    for (int b = 0; b < count; ++b) {
        double* p = a.data() + static_cast<std::size_t>(b) * m * n;
        if (spd)
            matgen::spd(n, seed + 31ULL * b, p, m);
        else
            matgen::uniform(m, n, seed + 31ULL * b, p, m);
    }
    return a;
}

class BatchedCliFiles : public SeededTest {
protected:
    void SetUp() override { openblas_set_num_threads(1); }
    std::string file(const std::string& name) const { return dir_.path() + "/" + name; }
    TempDir dir_;
};

TEST_F(BatchedCliFiles, EveryOperationWritesWhatTheHostApiComputesOnTheSameData) {
    const int count = 9, n = 7, m = 11, nrhs = 3;
    for (const char* op : {"getrf", "potrf", "geqrf", "getrs", "potrs", "gels"}) {
        SCOPED_TRACE(op);
        const std::string o(op);
        const bool qr = o == "geqrf" || o == "gels", solve = o == "getrs" || o == "potrs" || o == "gels";
        const int rows = qr ? m : n;
        std::vector<double> A = packed_batch(count, rows, n, o == "potrf" || o == "potrs", seed());
        std::vector<double> B = packed_batch(count, rows, nrhs, false, seed() + 1);
        // C order for half of the operations (as np.save writes), Fortran order (io's) for the others.
        const bool c_order = o == "getrf" || o == "geqrf" || o == "potrs";
        if (c_order) {
            write_c_order(file("A.npy"), count, rows, n, A);
            write_c_order(file("B.npy"), count, rows, nrhs, B);
        } else {
            io::write_npy_batch(file("A.npy"), count, rows, n, A.data());
            io::write_npy_batch(file("B.npy"), count, rows, nrhs, B.data());
        }
        std::vector<std::string> args = {"batched", "--op",     op,     "--input", file("A.npy"), "--output",
                                         file("X.npy"), "--check", "--format", "json", "--slices", "3"};
        if (solve) args.insert(args.end(), {"--rhs", file("B.npy")});
        if (o == "potrf") args.insert(args.end(), {"--uplo", "upper"});
        // CPU workers only (STARPU_NCUDA=0): they run the same LAPACKE calls as the host API, so
        // the bits agree; GPU workers would round differently.
        const auto r = cli::run(args, {"STARPU_NCPU=2", "STARPU_NCUDA=0"});
        ASSERT_EQ(r.code, 0) << cli::command_line(args) << "\n" << r.describe();
        EXPECT_NE(r.out.find("\"residual\""), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find("\"failure\""), std::string::npos) << r.out;

        // The host API on the same matrices: CPU workers run the same LAPACKE calls, so the bits agree.
        std::vector<int> ipiv(count * n), info(count);
        std::vector<double> tau(count * n);
        const long long sA = static_cast<long long>(rows) * n, sB = static_cast<long long>(rows) * nrhs;
        if (o == "getrf" || o == "getrs") bt::getrf(n, A.data(), n, sA, ipiv.data(), info.data(), count);
        if (o == "potrf") bt::potrf(bt::Uplo::upper, n, A.data(), n, sA, info.data(), count);
        if (o == "potrs") bt::potrf(bt::Uplo::lower, n, A.data(), n, sA, info.data(), count);
        if (o == "geqrf") bt::geqrf(m, n, A.data(), m, sA, tau.data(), count);
        if (o == "getrs") bt::getrs(n, nrhs, A.data(), n, sA, ipiv.data(), B.data(), n, sB, count);
        if (o == "potrs") bt::potrs(bt::Uplo::lower, n, nrhs, A.data(), n, sA, B.data(), n, sB, count);
        if (o == "gels") bt::gels(m, n, nrhs, A.data(), m, sA, tau.data(), B.data(), m, sB, info.data(), count);
        EXPECT_EQ(info, std::vector<int>(count, 0));
        const auto X = io::read_npy<double>(file("X.npy"));
        EXPECT_EQ(X.ndim, 3);
        EXPECT_EQ(X.count, count);
        if (!solve) {
            EXPECT_EQ(X.m, rows);
            EXPECT_EQ(X.n, n);
            EXPECT_EQ(X.data, A);
        } else {
            EXPECT_EQ(X.m, n);
            EXPECT_EQ(X.n, nrhs);
            std::vector<double> expect;  // the first n rows of each B
            for (int b = 0; b < count; ++b)
                for (int j = 0; j < nrhs; ++j)
                    for (int i = 0; i < n; ++i) expect.push_back(B[b * sB + i + static_cast<long long>(j) * rows]);
            EXPECT_EQ(X.data, expect);
        }
        std::filesystem::remove(file("X.npy"));
    }
}

TEST_F(BatchedCliFiles, ATwoDimensionalFileIsABatchOfOne) {
    std::vector<double> A = packed_batch(1, 6, 6, true, seed());
    io::write_npy(file("S.npy"), 6, 6, A.data(), 6);
    // CPU workers only: the factor is compared bitwise with the host path's (LAPACKE's); a CUDA
    // worker rounds differently.
    const auto r = cli::run({"batched", "--op", "potrf", "--input", file("S.npy"), "--output", file("L.npy"), "--check"},
                            {"STARPU_NCPU=1", "STARPU_NCUDA=0"});
    ASSERT_EQ(r.code, 0) << r.describe();
    std::vector<int> info(1);
    bt::potrf(bt::Uplo::lower, 6, A.data(), 6, 36, info.data(), 1);
    const auto L = io::read_npy<double>(file("L.npy"));
    EXPECT_EQ(L.ndim, 3);
    EXPECT_EQ(L.count, 1);
    EXPECT_EQ(L.data, A);
}

TEST_F(BatchedCliFiles, PlantedFailuresAreEachReportedWithTheirInfo) {
    const int count = 12, n = 6;
    std::vector<double> A = packed_batch(count, n, n, false, seed());
    std::vector<double> S = packed_batch(count, n, n, true, seed() + 1);
    for (int i = 0; i < n; ++i) {
        A[3 * n * n + i + 2 * n] = 0.0;            // matrix 3: zero column 3, U(3,3) = 0
        A[(count - 1) * n * n + i + (n - 1) * n] = 0.0;  // the last: zero last column
    }
    matgen::spd_failing_at(n, 4, seed() + 2, S.data() + count / 2 * n * n, n);
    io::write_npy_batch(file("A.npy"), count, n, n, A.data());
    io::write_npy_batch(file("S.npy"), count, n, n, S.data());
    {
        const auto r = cli::run({"batched", "--op", "getrf", "--input", file("A.npy"), "--output", file("F.npy"),
                                 "--format", "json"},
                                {"STARPU_NCPU=2"});
        EXPECT_EQ(r.code, 1) << r.describe();
        EXPECT_NE(r.out.find(R"({"record":"failure","op":"getrf","index":3,"info":3})"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find(R"({"record":"failure","op":"getrf","index":11,"info":6})"), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find(R"("index":0,)"), std::string::npos) << r.out;
        EXPECT_TRUE(std::filesystem::exists(file("F.npy")));  // the others' factors are still written
    }
    {
        const auto r = cli::run({"batched", "--op", "potrf", "--input", file("S.npy"), "--check"}, {"STARPU_NCPU=2"});
        EXPECT_EQ(r.code, 1) << r.describe();
        EXPECT_NE(r.out.find("# failure: matrix 6 info 4"), std::string::npos) << r.out;
    }
}

TEST_F(BatchedCliFiles, BadFilesExitTwoNamingTheFileAndWriteNothing) {
    const int count = 4, n = 5;
    std::vector<double> S = packed_batch(count, n, n, true, seed());
    io::write_npy_batch(file("S.npy"), count, n, n, S.data());
    io::write_npy_batch(file("T.npy"), count, n + 2, n, packed_batch(count, n + 2, n, false, seed()).data());
    io::write_npy_batch(file("B.npy"), count, n, 2, packed_batch(count, n, 2, false, seed()).data());
    io::write_npy_batch(file("B3.npy"), 3, n, 2, packed_batch(3, n, 2, false, seed()).data());
    io::write_npy_batch(file("Brows.npy"), count, n + 1, 2, packed_batch(count, n + 1, 2, false, seed()).data());
    io::write_npy(file("v.npy"), n, 1, S.data(), n);
    {
        // A 1-D file: write_npy gives (n, 1); rewrite the header's shape as (5,) with the same length.
        std::string text = cli::slurp(file("v.npy"));
        const std::size_t at = text.find("(5, 1)");
        ASSERT_NE(at, std::string::npos);
        text.replace(at, 6, "(5,)  ");
        std::FILE* f = std::fopen(file("v.npy").c_str(), "wb");
        std::fwrite(text.data(), 1, text.size(), f);
        std::fclose(f);
    }
    std::string full = cli::slurp(file("S.npy"));
    {
        std::FILE* f = std::fopen(file("cut.npy").c_str(), "wb");
        std::fwrite(full.data(), 1, full.size() - 8, f);
        std::fclose(f);
        std::string i4 = full;
        i4.replace(i4.find("<f8"), 3, "<i8");
        f = std::fopen(file("int.npy").c_str(), "wb");
        std::fwrite(i4.data(), 1, i4.size(), f);
        std::fclose(f);
    }
    struct Case {
        std::vector<std::string> args;
        std::string option, named;
    };
    const std::string out = file("out.npy");
    const std::vector<Case> cases = {
        {{"--op", "potrf", "--input", file("cut.npy")}, "--input", "truncated"},
        {{"--op", "potrf", "--input", file("int.npy")}, "--input", "dtype"},
        {{"--op", "potrf", "--input", file("T.npy")}, "--input", "not square"},
        {{"--op", "getrf", "--input", file("v.npy")}, "--input", "1-D"},
        {{"--op", "getrf", "--input", file("missing.npy")}, "--input", "missing.npy"},
        {{"--op", "potrs", "--input", file("S.npy"), "--rhs", file("B3.npy")}, "--rhs", "B3.npy"},
        {{"--op", "getrs", "--input", file("S.npy"), "--rhs", file("Brows.npy")}, "--rhs", "Brows.npy"},
        {{"--op", "gels", "--input", file("S.npy"), "--rhs", file("cut.npy")}, "--rhs", "truncated"},
        {{"--op", "getrs", "--input", file("S.npy")}, "--rhs", "--rhs FILE"},
        {{"--op", "potrf", "--input", file("S.npy"), "--rhs", file("B.npy")}, "--rhs", "B.npy"},
        {{"--op", "potrf", "--input", file("S.npy"), "-n", "5"}, "-n", "S.npy"},
        {{"--op", "potrf", "--rhs", file("B.npy")}, "--rhs", "B.npy"},
        {{"--op", "potrf", "--input", file("S.npy"), "--output", file("out.mtx")}, "--output", ".npy"},
        {{"--op", "potrf", "--input", file("S.npy"), "--output", file("no/such/dir/out.npy")}, "--output", "no/such"},
    };
    for (const Case& c : cases) {
        std::vector<std::string> args = {"batched"};
        args.insert(args.end(), c.args.begin(), c.args.end());
        if (std::find(args.begin(), args.end(), "--output") == args.end()) args.insert(args.end(), {"--output", out});
        const auto r = cli::run(args);
        EXPECT_EQ(r.code, 2) << cli::command_line(args) << "\n" << r.describe();
        EXPECT_NE(r.err.find("'" + c.option + "'"), std::string::npos) << cli::command_line(args) << "\n" << r.err;
        EXPECT_NE(r.err.find(c.named), std::string::npos) << cli::command_line(args) << "\n" << r.err;
        EXPECT_TRUE(r.home_untouched) << cli::command_line(args) << ": StarPU started";
        EXPECT_FALSE(std::filesystem::exists(out)) << cli::command_line(args);
        EXPECT_FALSE(std::filesystem::exists(file("out.mtx"))) << cli::command_line(args);
    }
    // Nothing but the inputs in the directory: no temporary file left behind either.
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_.path())) files += e.is_regular_file();
    EXPECT_EQ(files, 8);
}

TEST_F(BatchedCliFiles, VariableSizesPassTheirChecks) {
    for (const std::string sizes : {"uniform:40", "skewed:120"})
        for (const char* op : {"potrf", "potrs", "getrf", "getrs"}) {
            const std::vector<std::string> args = {"batched", "--op",     op,     "--sizes", sizes,  "--count",
                                                   "150",     "--nrhs",   "2",    "--check", "--format", "json",
                                                   "--uplo",  "upper",    "--prec", "s"};
            const auto r = cli::run(args);
            ASSERT_EQ(r.code, 0) << cli::command_line(args) << "\n" << r.describe();
            bool found = false;
            std::istringstream lines(r.out);
            for (std::string line; std::getline(lines, line);) {
                const auto j = nlohmann::json::parse(line);
                if (j.value("record", "") != "result") continue;
                found = true;
                EXPECT_EQ(j.at("count"), 150);
                EXPECT_EQ(j.at("failed"), 0);
                EXPECT_LT(j.at("residual").get<double>(), 30.0);
                EXPECT_LE(j.at("nmax").get<int>(), std::stoi(sizes.substr(sizes.find(':') + 1)));
            }
            EXPECT_TRUE(found) << r.out;
        }
    // Orders from a file, 0 and 1 included: the count is the file's.
    {
        std::FILE* f = std::fopen(file("sizes.txt").c_str(), "w");
        std::fputs("3\n0\n1\n\n33\n17\n", f);
        std::fclose(f);
        const auto r = cli::run({"batched", "--op", "potrs", "--sizes", "file:" + file("sizes.txt"), "--check",
                                 "--format", "json"});
        ASSERT_EQ(r.code, 0) << r.describe();
        EXPECT_NE(r.out.find(R"("count":5)"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find(R"("nmax":33)"), std::string::npos) << r.out;
    }
    // Bad --sizes values: exit 2 naming the option, StarPU never started.
    std::FILE* f = std::fopen(file("bad.txt").c_str(), "w");
    std::fputs("4\n-2\n", f);
    std::fclose(f);
    const std::vector<std::vector<std::string>> bad = {
        {"--op", "potrf", "--sizes", "uniform:0"},
        {"--op", "potrf", "--sizes", "normal:10"},
        {"--op", "potrf", "--sizes", "file:" + file("bad.txt")},
        {"--op", "potrf", "--sizes", "file:" + file("none.txt")},
        {"--op", "potrf", "--sizes", "uniform:10", "--aspect", "2"},
        {"--op", "potrf", "--sizes", "uniform:10", "-n", "4"},
    };
    for (const auto& extra : bad) {
        std::vector<std::string> args = {"batched"};
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = cli::run(args);
        EXPECT_EQ(r.code, 2) << cli::command_line(args) << "\n" << r.describe();
        EXPECT_TRUE(r.err.find("--sizes") != std::string::npos || r.err.find("'-n'") != std::string::npos)
            << cli::command_line(args) << "\n" << r.err;
        EXPECT_TRUE(r.home_untouched);
    }
}

}  // namespace
}  // namespace starfact::test
