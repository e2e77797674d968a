// Tile LU with incremental pivoting: right-looking submission of GETRF, GESSM, TSTRF and
// SSSSM tasks (with the diagonal-tile copy), and the solve.
#include "tile_algorithms/lu.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>

#include "codelets/codelets.hpp"
#include "common/error.hpp"
#include "common/kernel_error.hpp"
#include "common/runtime.hpp"
#include "tile_algorithms/diagonal_copies.hpp"
#include "tile_algorithms/priorities.hpp"

namespace starfact {
namespace {
using namespace codelets;

template <class T>
void check_factors(const TileMatrix<T>& A, const LuFactors<T>& F) {
    require(F.mt() == A.mt() && F.nt() == A.nt(), "F",
            fmt::format("was made for {} x {} tiles, A has {} x {}", F.mt(), F.nt(), A.mt(), A.nt()));
}

template <class T>
void check_rhs(const TileMatrix<T>& A, const TileMatrix<T>& B) {
    require(B.m() == A.m(), "B", fmt::format("must have {} rows, got {}", A.m(), B.m()));
    require(B.nb() == A.nb(), "B", fmt::format("must use the tile size of A ({}), got {}", A.nb(), B.nb()));
}

using starfact::detail::DiagonalCopies;

// The four kinds of task of one factorization, each placed by the schedule: pinned to the owner
// of the tile column it writes (static) or left to StarPU (dynamic).
template <class T>
class LuTasks {
public:
    /// block_width > 0: the priorities of submit_block_left_looking (every task writing a tile
    /// column of block J = column / block_width ahead of every task of block J + 1; inside a
    /// block, the right-looking priorities).
    LuTasks(TileMatrix<T>& A, const LuFactors<T>& F, const InfoVector& info, const DiagonalCopies<T>& D,
            LuSchedule schedule, int block_width = 0)
        : A_(A), F_(F), info_(info), D_(D), prio_{A.nt()}, schedule_(schedule), workers_(eligible_workers()),
          block_width_(block_width) {
        if (schedule_ != LuSchedule::Dynamic && workers_.empty())
            throw RuntimeError("no worker can run the LU codelets (forced implementation or no such worker)");
    }

    // Factor the diagonal tile and copy it for GESSM (whose readers then need not wait for the
    // TSTRFs that rewrite its U part).
    void panel(int k) {
        const int p = prio(prio_.panel_factor(k), k);
        submit_getrf<T>(F_.ib(), A_(k, k), F_.diag_pivots(k), info_[k], p, owner(k));
        if (k + 1 < A_.nt()) submit_lacpy<T>(A_(k, k), D_[k], p, owner(k));
    }
    void row_update(int k, int j) {
        submit_gessm<T>(F_.ib(), F_.diag_pivots(k), D_[k], A_(k, j), prio(prio_.update(k, j), j), owner(j));
    }
    // Eliminate tile (i, k) pairwise against the diagonal tile.
    void eliminate(int k, int i) {
        submit_tstrf<T>(F_.ib(), A_(k, k), A_(i, k), F_.L(i, k), F_.pivots(i, k), info_[k],
                        prio(prio_.panel_solve(k), k), owner(k));
    }
    void pair_update(int k, int i, int j) {
        submit_ssssm<T>(F_.ib(), A_(k, j), A_(i, j), F_.L(i, k), A_(i, k), F_.pivots(i, k),
                        prio(prio_.update(k, j), j), owner(j));
    }

private:
    int owner(int column) const {
        return schedule_ == LuSchedule::Dynamic ? -1 : workers_[static_cast<std::size_t>(column) % workers_.size()];
    }
    // The right-looking priority `base` (at most 4 nt + 3) of a task writing tile column
    // `column`, raised by a whole band per block still to come after this one.
    int prio(int base, int column) const {
        if (block_width_ <= 0) return base;
        const int blocks = (A_.nt() + block_width_ - 1) / block_width_;
        return base + (blocks - 1 - column / block_width_) * (4 * A_.nt() + 4);
    }
    TileMatrix<T>& A_;
    const LuFactors<T>& F_;
    const InfoVector& info_;
    const DiagonalCopies<T>& D_;
    Priorities prio_;
    LuSchedule schedule_;
    std::vector<int> workers_;  ///< where static schedules put tile columns, cyclically
    int block_width_;
};

// Right-looking: panel k, its row, then every tile below with its pair updates.
template <class T>
void submit_right_looking(LuTasks<T>& t, int mt, int nt) {
    for (int k = 0; k < nt; ++k) {
        t.panel(k);
        for (int j = k + 1; j < nt; ++j) t.row_update(k, j);
        for (int i = k + 1; i < mt; ++i) {
            t.eliminate(k, i);
            for (int j = k + 1; j < nt; ++j) t.pair_update(k, i, j);
        }
    }
}

// Block left-looking, for matrices larger than the GPU memory StarPU may use: blocks of
// `width` tile columns, one after the other; each block receives the updates of every panel
// left of it (a panel column's tiles are read once per block, while the block's tiles stay on
// the GPU), then is factored right-looking inside. Right-looking order instead reads and writes
// the whole trailing matrix at every step. The dependencies are the same; the order and the
// priorities (LuTasks' block_width) decide what StarPU runs, and so what it keeps, first.
template <class T>
void submit_block_left_looking(LuTasks<T>& t, int mt, int nt, int width) {
    for (int j0 = 0; j0 < nt; j0 += width) {
        const int j1 = std::min(nt, j0 + width);
        for (int k = 0; k < j1; ++k) {
            if (k >= j0) {
                t.panel(k);
                for (int i = k + 1; i < mt; ++i) t.eliminate(k, i);
            }
            const int first = std::max(j0, k + 1);
            for (int j = first; j < j1; ++j) t.row_update(k, j);
            for (int i = k + 1; i < mt; ++i)
                for (int j = first; j < j1; ++j) t.pair_update(k, i, j);
        }
    }
}

// The block width for getrf's dynamic schedule: 0 (right-looking) while the matrix fits the
// memory StarPU may use on the GPUs; beyond, as many tile columns as fill half of it (at least
// one), so that the panel tiles streamed through have the other half.
// STARFACT_LU_OOC_WIDTH=w forces w (0: right-looking).
template <class T>
int lu_block_width(const TileMatrix<T>& A) {
    if (const char* env = std::getenv("STARFACT_LU_OOC_WIDTH"); env != nullptr && *env != '\0') {
        char* end = nullptr;
        const long w = std::strtol(env, &end, 10);
        require(end != env && *end == '\0' && w >= 0, "STARFACT_LU_OOC_WIDTH",
                fmt::format("must be an integer >= 0, got '{}'", env));
        return static_cast<int>(std::min<long>(w, A.nt()));
    }
    const std::int64_t gpu = Runtime::cuda_memory_bytes();
    const std::int64_t column = static_cast<std::int64_t>(A.m()) * std::min(A.nb(), A.n()) * sizeof(T);
    const std::int64_t matrix = static_cast<std::int64_t>(A.m()) * A.n() * sizeof(T);
    if (gpu <= 0 || column <= 0 || matrix <= gpu) return 0;
    return static_cast<int>(std::clamp<std::int64_t>(gpu / 2 / column, 1, A.nt()));
}

// Left-looking: column j receives every update of the panels left of it, then is factored.
template <class T>
void submit_left_looking(LuTasks<T>& t, int mt, int nt) {
    for (int j = 0; j < nt; ++j) {
        for (int k = 0; k < j; ++k) {
            t.row_update(k, j);
            for (int i = k + 1; i < mt; ++i) t.pair_update(k, i, j);
        }
        t.panel(j);
        for (int i = j + 1; i < mt; ++i) t.eliminate(j, i);
    }
}

// Breadth-first left-looking: column j tile by tile from the top; tile (i, j) gets the pair
// updates of every panel k < min(i, j), then its own step: GESSM above the diagonal, the panel
// on it, TSTRF below. Each pair update also needs the top tile (k, j), finished earlier in
// this loop.
template <class T>
void submit_breadth_first_left_looking(LuTasks<T>& t, int mt, int nt) {
    for (int j = 0; j < nt; ++j)
        for (int i = 0; i < mt; ++i) {
            for (int k = 0; k < std::min(i, j); ++k) t.pair_update(k, i, j);
            if (i < j)
                t.row_update(i, j);
            else if (i == j)
                t.panel(j);
            else
                t.eliminate(j, i);
        }
}

// B = L~^{-1} P~ B: the same sequence of GESSM and SSSSM the factorization applied to its
// trailing columns, now on every tile column of B.
template <class T>
void submit_forward(const TileMatrix<T>& A, const LuFactors<T>& F, TileMatrix<T>& B) {
    const int mt = A.mt(), nt = A.nt(), ib = F.ib();
    const Priorities prio{nt};
    for (int c = 0; c < B.nt(); ++c)
        for (int k = 0; k < nt; ++k) {
            submit_gessm<T>(ib, F.diag_pivots(k), A(k, k), B(k, c), prio.panel_factor(k));
            for (int i = k + 1; i < mt; ++i)
                submit_ssssm<T>(ib, B(k, c), B(i, c), F.L(i, k), A(i, k), F.pivots(i, k), prio.panel_solve(k));
        }
}

// B = U^{-1} B by tile back substitution.
template <class T>
void submit_backward(const TileMatrix<T>& A, TileMatrix<T>& B) {
    const int nt = A.nt();
    const Priorities prio{nt};
    for (int c = 0; c < B.nt(); ++c)
        for (int k = nt - 1; k >= 0; --k) {
            submit_trsm<T>('L', 'U', 'N', 'N', T(1), A(k, k), B(k, c), prio.panel_solve(nt - 1 - k));
            for (int i = 0; i < k; ++i)
                submit_gemm<T>('N', 'N', T(-1), A(i, k), B(k, c), T(1), B(i, c), prio.update(nt - 1 - k, nt - 1 - i));
        }
}
}  // namespace

template <class T>
LuFactors<T>::LuFactors(const TileMatrix<T>& A, int ib, bool trtri)
    : ib_(ib), trtri_(trtri), mt_(A.mt()), nt_(A.nt()) {
    require(ib >= 1, "ib", fmt::format("must be >= 1, got {}", ib));
    require(A.m() >= A.n(), "A", fmt::format("must have m >= n, got {} x {}", A.m(), A.n()));
    diag_pivots_.resize(static_cast<std::size_t>(nt_));
    pivots_.assign(static_cast<std::size_t>(mt_) * nt_, nullptr);
    L_.assign(static_cast<std::size_t>(mt_) * nt_, nullptr);
    for (int k = 0; k < nt_; ++k) {
        const int K = A.tile_n(k);
        starpu_vector_data_register(&diag_pivots_[k], -1, 0, static_cast<uint32_t>(std::min(A.tile_m(k), K)),
                                    sizeof(int));
        for (int i = k + 1; i < mt_; ++i) {
            starpu_vector_data_register(&pivots_[index(i, k)], -1, 0, static_cast<uint32_t>(K), sizeof(int));
            const int rows = trtri ? 2 * ib : ib;  // the codelets read the variant from this shape
            starpu_matrix_data_register(&L_[index(i, k)], -1, 0, rows, rows, K, sizeof(T));
        }
    }
}

template <class T>
LuFactors<T>::~LuFactors() {
    for (auto* v : {&diag_pivots_, &pivots_, &L_})
        for (starpu_data_handle_t h : *v)
            if (h) starpu_data_unregister(h);
}

LuSchedule parse_lu_schedule(const std::string& name) {
    for (LuSchedule s : {LuSchedule::Dynamic, LuSchedule::StaticRightLooking, LuSchedule::StaticLeftLooking,
                         LuSchedule::StaticBreadthFirstLeftLooking})
        if (name == lu_schedule_name(s)) return s;
    throw ArgumentError("schedule", fmt::format("must be dynamic, static-rl, static-ll or static-bfll, got '{}'", name));
}

const char* lu_schedule_name(LuSchedule s) {
    switch (s) {
        case LuSchedule::StaticRightLooking: return "static-rl";
        case LuSchedule::StaticLeftLooking: return "static-ll";
        case LuSchedule::StaticBreadthFirstLeftLooking: return "static-bfll";
        case LuSchedule::Dynamic: break;
    }
    return "dynamic";
}

template <class T>
int getrf(TileMatrix<T>& A, LuFactors<T>& F, LuSchedule schedule) {
    require(A.m() >= A.n(), "A", fmt::format("must have m >= n, got {} x {}", A.m(), A.n()));
    check_factors(A, F);
    InfoVector info(A.nt());
    {
        DiagonalCopies<T> D(A);
        const int width = schedule == LuSchedule::Dynamic ? lu_block_width(A) : 0;
        LuTasks<T> tasks(A, F, info, D, schedule, width);
        switch (schedule) {
            case LuSchedule::StaticLeftLooking: submit_left_looking(tasks, A.mt(), A.nt()); break;
            case LuSchedule::StaticBreadthFirstLeftLooking:
                submit_breadth_first_left_looking(tasks, A.mt(), A.nt());
                break;
            case LuSchedule::Dynamic:
                if (width > 0) {
                    submit_block_left_looking(tasks, A.mt(), A.nt(), width);
                    break;
                }
                submit_right_looking(tasks, A.mt(), A.nt());
                break;
            case LuSchedule::StaticRightLooking: submit_right_looking(tasks, A.mt(), A.nt()); break;
        }
    }
    starpu_task_wait_for_all();
    throw_if_kernel_error();
    return info.global_info(A.nb());
}

template <class T>
void lu_apply_forward(const TileMatrix<T>& A, const LuFactors<T>& F, TileMatrix<T>& B) {
    check_factors(A, F);
    check_rhs(A, B);
    submit_forward(A, F, B);
    starpu_task_wait_for_all();
    throw_if_kernel_error();
}

template <class T>
void getrs(const TileMatrix<T>& A, const LuFactors<T>& F, TileMatrix<T>& B) {
    require(A.m() == A.n(), "A", fmt::format("must be square, got {} x {}", A.m(), A.n()));
    check_factors(A, F);
    check_rhs(A, B);
    submit_forward(A, F, B);
    submit_backward(A, B);
    starpu_task_wait_for_all();
    throw_if_kernel_error();
}

template <class T>
int gesv(TileMatrix<T>& A, TileMatrix<T>& B, int ib, LuSchedule schedule, bool trtri) {
    require(A.m() == A.n(), "A", fmt::format("must be square, got {} x {}", A.m(), A.n()));
    check_rhs(A, B);
    LuFactors<T> F(A, ib, trtri);
    const int info = getrf(A, F, schedule);
    if (info == 0) getrs(A, F, B);
    return info;
}

template class LuFactors<float>;
template class LuFactors<double>;
template int getrf<float>(TileMatrix<float>&, LuFactors<float>&, LuSchedule);
template int getrf<double>(TileMatrix<double>&, LuFactors<double>&, LuSchedule);
template void lu_apply_forward<float>(const TileMatrix<float>&, const LuFactors<float>&, TileMatrix<float>&);
template void lu_apply_forward<double>(const TileMatrix<double>&, const LuFactors<double>&, TileMatrix<double>&);
template void getrs<float>(const TileMatrix<float>&, const LuFactors<float>&, TileMatrix<float>&);
template void getrs<double>(const TileMatrix<double>&, const LuFactors<double>&, TileMatrix<double>&);
template int gesv<float>(TileMatrix<float>&, TileMatrix<float>&, int, LuSchedule, bool);
template int gesv<double>(TileMatrix<double>&, TileMatrix<double>&, int, LuSchedule, bool);

}  // namespace starfact
