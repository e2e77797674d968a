// Tile LU with incremental pivoting (getrf, getrs, gesv, lu_apply_forward) through StarPU:
// backward errors around nb and for m > n, exact info for planted zero columns, NaN input,
// argument errors, and the CUDA path against the CPU path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "codelets/codelets.hpp"
#include "codelets/trace.hpp"
#include "common/checks.hpp"
#include "common/error.hpp"
#include "test_support.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

namespace starfact::test {
namespace {

template <class T>
class Lu : public RuntimeTest {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Lu, Precisions);

// Factors A (m x n) with tile LU; returns info and fills the factor and the transformation
// residual ||L~^{-1} P~ A - [U; 0]|| / (n ||A|| eps).
template <class T>
int factor_and_transform(const HostMatrix<T>& A, int nb, int ib, double* transform_residual) {
    TileMatrix<T> tA(A.m, A.n, nb);
    tA.from_lapack(A.ptr(), A.ld);
    LuFactors<T> F(tA, ib);
    const int info = getrf(tA, F);
    HostMatrix<T> Fa(A.m, A.n, A.ld), G(A.m, A.n, A.ld);
    tA.to_lapack(Fa.ptr(), Fa.ld);
    TileMatrix<T> tG(A.m, A.n, nb);
    tG.from_lapack(A.ptr(), A.ld);
    lu_apply_forward(tA, F, tG);
    tG.to_lapack(G.ptr(), G.ld);
    *transform_residual = checks::lu_transform_residual(A.m, A.n, A.ptr(), A.ld, G.ptr(), G.ld, Fa.ptr(), Fa.ld);
    return info;
}

// gesv on an n x n random system with nrhs right-hand sides; returns the backward error.
template <class T>
double gesv_backward_error(const HostMatrix<T>& A, const HostMatrix<T>& B, int nb, int ib, int* info,
                           LuSchedule schedule = LuSchedule::Dynamic, bool trtri = false) {
    TileMatrix<T> tA(A.m, A.n, nb), tB(B.m, B.n, nb);
    tA.from_lapack(A.ptr(), A.ld);
    tB.from_lapack(B.ptr(), B.ld);
    *info = gesv(tA, tB, ib, schedule, trtri);
    HostMatrix<T> X(B.m, B.n, B.ld);
    tB.to_lapack(X.ptr(), X.ld);
    return solve_residual(A, X, B);
}

TYPED_TEST(Lu, GesvBackwardErrorAroundNb) {
    using T = TypeParam;
    for (int nb : {7, 8}) {
        for (int ib : {1, 3, nb}) {
            for (int n : {1, 2, 3, nb - 1, nb, nb + 1, 2 * nb + 1, 3 * nb + 7}) {
                SCOPED_TRACE(::testing::Message() << "n=" << n << " nb=" << nb << " ib=" << ib);
                const auto A = random_matrix<T>(n, n, n + 2, this->seed() + n);
                const auto B = random_matrix<T>(n, 3, n + 1, this->seed() + 7 * n);
                int info = -1;
                const double res = gesv_backward_error(A, B, nb, ib, &info);
                EXPECT_EQ(info, 0);
                EXPECT_TRUE(checks::passes(res)) << "backward error " << res;
            }
        }
    }
}

TYPED_TEST(Lu, TallAndSquareTransformResidual) {
    using T = TypeParam;
    const int nb = 9;
    for (auto [m, n] : {std::pair{9, 9}, {20, 20}, {40, 17}, {31, 9}, {50, 30}, {64, 64}}) {
        SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n);
        const auto A = random_matrix<T>(m, n, m + 1, this->seed() + m * 100 + n);
        double res = -1;
        EXPECT_EQ(factor_and_transform(A, nb, 4, &res), 0);
        EXPECT_TRUE(checks::passes(res)) << "transform residual " << res;
    }
}

TYPED_TEST(Lu, TraceRecordsEveryTask) {
    using T = TypeParam;
    const int n = 40, nb = 10;  // 4 x 4 tiles
    const auto A = random_matrix<T>(n, n, n, this->seed());
    TileMatrix<T> tA(n, n, nb);
    tA.from_lapack(A.ptr(), A.ld);
    LuFactors<T> F(tA, 4);
    codelets::start_trace();
    EXPECT_EQ(getrf(tA, F), 0);
    const std::vector<codelets::TaskRecord> trace = codelets::stop_trace();
    // GETRF and the diagonal copy per step, GESSM and TSTRF per tile of its row and column,
    // SSSSM per trailing tile: 4 + 3 lacpy (the last step has no row to update) + 2 (3 + 2 + 1)
    // + (9 + 4 + 1), whatever the schedule.
    std::map<std::string, int> count;
    for (const auto& t : trace) {
        ++count[t.name.substr(0, t.name.find('_'))];
        EXPECT_LE(t.start_s, t.end_s) << t.name;
        EXPECT_GE(t.start_s, 0.0) << t.name;
        EXPECT_GE(t.worker, 0) << t.name;
    }
    EXPECT_EQ(count["getrf"], 4);
    EXPECT_EQ(count["gessm"], 6);
    EXPECT_EQ(count["tstrf"], 6);
    EXPECT_EQ(count["ssssm"], 14);
    // Nothing is recorded once the trace is off.
    tA.from_lapack(A.ptr(), A.ld);
    EXPECT_EQ(getrf(tA, F), 0);
    EXPECT_TRUE(codelets::stop_trace().empty());
}

TYPED_TEST(Lu, ZeroSizeIsANoOp) {
    using T = TypeParam;
    TileMatrix<T> A(0, 0, 4), B(0, 2, 4);
    EXPECT_EQ(gesv(A, B, 2), 0);
}

TYPED_TEST(Lu, PlantedZeroColumnGivesExactInfo) {
    using T = TypeParam;
    const int nb = 8;
    for (int n : {8, 21, 33}) {
        for (int k : {1, n / 2 + 1, n}) {
            SCOPED_TRACE(::testing::Message() << "n=" << n << " zero column k=" << k);
            auto A = random_matrix<T>(n, n, n, this->seed() + 31 * n + k);
            for (int i = 0; i < n; ++i) A(i, k - 1) = T(0);
            TileMatrix<T> tA(n, n, nb);
            tA.from_lapack(A.ptr(), A.ld);
            LuFactors<T> F(tA, 3);
            EXPECT_EQ(getrf(tA, F), k);
            // gesv reports the same and leaves B alone.
            const auto B = random_matrix<T>(n, 2, n, this->seed() + 5);
            TileMatrix<T> tA2(n, n, nb), tB(n, 2, nb);
            tA2.from_lapack(A.ptr(), A.ld);
            tB.from_lapack(B.ptr(), B.ld);
            EXPECT_EQ(gesv(tA2, tB, 3), k);
            HostMatrix<T> X(n, 2, n);
            tB.to_lapack(X.ptr(), X.ld);
            EXPECT_EQ(std::memcmp(X.ptr(), B.ptr(), sizeof(T) * B.data.size()), 0);
        }
    }
}

// NaN in one tile: no crash, no hang, the factorization completes. What info says depends on
// where the NaN spreads (NaN pivots are not "exactly zero"), so it is only required to be in
// range: 0 <= info <= n.
TYPED_TEST(Lu, NaNInOneTileCompletes) {
    using T = TypeParam;
    const int n = 30, nb = 8;
    auto A = random_matrix<T>(n, n, n, this->seed());
    A(17, 9) = nan<T>();
    TileMatrix<T> tA(n, n, nb);
    tA.from_lapack(A.ptr(), A.ld);
    LuFactors<T> F(tA, 4);
    const int info = getrf(tA, F);
    EXPECT_GE(info, 0);
    EXPECT_LE(info, n);
}

TYPED_TEST(Lu, ArgumentErrorsComeBeforeAnyTask) {
    using T = TypeParam;
    TileMatrix<T> wide(8, 12, 4), sq(12, 12, 4), other_nb(12, 1, 6), short_b(8, 1, 4);
    EXPECT_THROW(LuFactors<T>(sq, 0), ArgumentError);
    starpu_task_wait_for_all();
    auto expect_arg = [](const char* name, auto call) {
        try {
            call();
            ADD_FAILURE() << "no ArgumentError for " << name;
        } catch (const ArgumentError& e) {
            EXPECT_EQ(e.argument(), name) << e.what();
        }
        EXPECT_EQ(starpu_task_nsubmitted(), 0);
    };
    expect_arg("A", [&] {
        LuFactors<T> F(wide, 2);
        getrf(wide, F);
    });
    expect_arg("B", [&] { gesv(sq, other_nb, 2); });
    expect_arg("B", [&] { gesv(sq, short_b, 2); });
    LuFactors<T> Fsq(sq, 2);
    TileMatrix<T> sq2(16, 16, 4);
    expect_arg("F", [&] { getrf(sq2, Fsq); });
}

// The static schedules and the dynamic schedule's block order only pin and reorder tasks: every tile sees the same kernels on the same
// data in the same order, so on CPU workers the factors are bitwise equal, and so is the info.
TYPED_TEST(Lu, EverySchedulePinsAndReordersWithoutChangingTheResult) {
    using T = TypeParam;
    codelets::ScopedImpl cpu(codelets::Impl::Cpu);
    const int m = 47, n = 37, nb = 8, ib = 3;
    auto A = random_matrix<T>(m, n, m, this->seed());
    for (bool singular : {false, true}) {
        if (singular)
            for (int i = 0; i < m; ++i) A(i, 20) = T(0);
        std::vector<HostMatrix<T>> factors;
        std::vector<int> infos;
        for (LuSchedule s : {LuSchedule::Dynamic, LuSchedule::StaticRightLooking, LuSchedule::StaticLeftLooking,
                             LuSchedule::StaticBreadthFirstLeftLooking}) {
            SCOPED_TRACE(lu_schedule_name(s));
            TileMatrix<T> tA(m, n, nb);
            tA.from_lapack(A.ptr(), A.ld);
            LuFactors<T> F(tA, ib);
            infos.push_back(getrf(tA, F, s));
            HostMatrix<T> Fa(m, n, m);
            tA.to_lapack(Fa.ptr(), Fa.ld);
            factors.push_back(Fa);
            EXPECT_EQ(parse_lu_schedule(lu_schedule_name(s)), s);
        }
        // The dynamic schedule's out-of-core order, forced: blocks of 1, 2 and 4 tile columns
        // (the last block of 4 is cut short by the 5 tile columns).
        for (const char* width : {"1", "2", "4"}) {
            SCOPED_TRACE(::testing::Message() << "block width " << width);
            const ScopedEnv env("STARFACT_LU_OOC_WIDTH", std::string(width));
            TileMatrix<T> tA(m, n, nb);
            tA.from_lapack(A.ptr(), A.ld);
            LuFactors<T> F(tA, ib);
            infos.push_back(getrf(tA, F));
            HostMatrix<T> Fa(m, n, m);
            tA.to_lapack(Fa.ptr(), Fa.ld);
            factors.push_back(Fa);
        }
        for (std::size_t t = 1; t < factors.size(); ++t) {
            EXPECT_EQ(infos[t], infos[0]);
            EXPECT_EQ(std::memcmp(factors[t].ptr(), factors[0].ptr(), sizeof(T) * factors[0].data.size()), 0)
                << "schedule " << t << " changed the factor";
        }
        EXPECT_EQ(infos[0], singular ? 21 : 0);
    }
    EXPECT_THROW(parse_lu_schedule("static-xx"), ArgumentError);
    {
        const ScopedEnv env("STARFACT_LU_OOC_WIDTH", std::string("two"));
        TileMatrix<T> tA(m, n, nb);
        tA.from_lapack(A.ptr(), A.ld);
        LuFactors<T> F(tA, ib);
        EXPECT_THROW(getrf(tA, F), ArgumentError);
    }
}

// On CPU workers the variant changes only how GESSM applies L^{-1} (a triangular product with
// the stored inverse instead of a solve): the factors agree up to rounding and solve as well.
TYPED_TEST(Lu, TrtriVariantOnCpuGivesTheSameFactorsUpToRounding) {
    using T = TypeParam;
    codelets::ScopedImpl cpu(codelets::Impl::Cpu);
    for (auto [m, n, nb, ib] : {std::tuple{40, 40, 8, 3}, {53, 37, 9, 4}, {30, 30, 30, 30}}) {
        SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " nb=" << nb << " ib=" << ib);
        const auto A = random_matrix<T>(m, n, m, this->seed() + m);
        std::vector<HostMatrix<T>> factors;
        for (bool trtri : {false, true}) {
            TileMatrix<T> tA(m, n, nb);
            tA.from_lapack(A.ptr(), A.ld);
            LuFactors<T> F(tA, ib, trtri);
            EXPECT_EQ(F.trtri(), trtri);
            EXPECT_EQ(getrf(tA, F), 0);
            factors.emplace_back(m, n, m);
            tA.to_lapack(factors.back().ptr(), m);
        }
        double diff = 0, scale = 0;
        for (std::size_t e = 0; e < factors[0].data.size(); ++e) {
            diff = std::max(diff, std::abs(static_cast<double>(factors[0].data[e]) - factors[1].data[e]));
            scale = std::max(scale, std::abs(static_cast<double>(factors[0].data[e])));
        }
        EXPECT_LE(diff, 1000.0 * n * std::numeric_limits<T>::epsilon() * scale) << "factors differ beyond rounding";
        if (m == n) {
            const auto B = random_matrix<T>(n, 2, n, this->seed() + 3);
            int info = -1;
            EXPECT_TRUE(checks::passes(gesv_backward_error(A, B, nb, ib, &info, LuSchedule::Dynamic, true)));
            EXPECT_EQ(info, 0);
        }
    }
}

TYPED_TEST(Lu, CudaForcedMatchesCpu) {
    using T = TypeParam;
    STARFACT_REQUIRE_CUDA_WORKER(this->ncuda());
    for (auto [n, nb, ib] : {std::tuple{64, 16, 4}, {100, 32, 8}, {257, 64, 32}, {300, 128, 128}}) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " nb=" << nb << " ib=" << ib);
        const auto A = random_matrix<T>(n, n, n, this->seed() + n);
        const auto B = random_matrix<T>(n, 4, n, this->seed() + 2 * n);
        int info_cpu = -1, info_gpu = -1;
        double res_cpu, res_gpu;
        {
            codelets::ScopedImpl cpu(codelets::Impl::Cpu);
            res_cpu = gesv_backward_error(A, B, nb, ib, &info_cpu);
        }
        {
            codelets::ScopedImpl gpu(codelets::Impl::Cuda);
            res_gpu = gesv_backward_error(A, B, nb, ib, &info_gpu);
        }
        int info_trtri = -1;
        double res_trtri;
        {
            // The trtri + gemm variant: SSSSM and TSTRF multiply by the stored inverses.
            codelets::ScopedImpl gpu(codelets::Impl::Cuda);
            res_trtri = gesv_backward_error(A, B, nb, ib, &info_trtri, LuSchedule::Dynamic, true);
        }
        EXPECT_EQ(info_trtri, 0);
        EXPECT_TRUE(checks::passes(res_trtri)) << res_trtri;
        int info_static = -1;
        double res_static;
        {
            // A static schedule over the CUDA workers (tile columns cyclically on the streams).
            codelets::ScopedImpl gpu(codelets::Impl::Cuda);
            res_static = gesv_backward_error(A, B, nb, ib, &info_static, LuSchedule::StaticBreadthFirstLeftLooking);
        }
        EXPECT_EQ(info_cpu, 0);
        EXPECT_EQ(info_gpu, 0);
        EXPECT_EQ(info_static, 0);
        EXPECT_TRUE(checks::passes(res_cpu)) << res_cpu;
        EXPECT_TRUE(checks::passes(res_gpu)) << res_gpu;
        EXPECT_TRUE(checks::passes(res_static)) << res_static;
    }
    // A planted zero column gives the same exact info on the GPU.
    const int n = 70;
    auto A = random_matrix<T>(n, n, n, this->seed());
    for (int i = 0; i < n; ++i) A(i, 36) = T(0);
    codelets::ScopedImpl gpu(codelets::Impl::Cuda);
    TileMatrix<T> tA(n, n, 16);
    tA.from_lapack(A.ptr(), A.ld);
    LuFactors<T> F(tA, 4);
    EXPECT_EQ(getrf(tA, F), 37);
}

}  // namespace
}  // namespace starfact::test
