// Tile QR: the elimination plan of each panel (flat chain or a tree of domains), right-looking
// submission of its GEQRT, UNMQR, TSQRT, TSMQR, TTQRT and TTMQR tasks (with copies of the tiles a
// GEQRT factored), the application of Q and Q^T, the explicit Q and the least-squares solve.
#include "tile_algorithms/qr.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

#include <fmt/format.h>

#include "codelets/codelets.hpp"
#include "common/error.hpp"
#include "common/kernel_error.hpp"
#include "tile_algorithms/priorities.hpp"

namespace starfact {
namespace {
using namespace codelets;

// Auto's rule (measured on the H100, docs/performance.md, "Tile QR against cuSOLVER"): a tree
// once the matrix has at least kAutoTreeRatio tile rows per tile column, with domains of
// mt / (kAutoDomainDivisor nt) tile rows (4 at 16 x 1 tiles, 2 at 8 x 1: best measured there).
constexpr int kAutoTreeRatio = 2;
constexpr int kAutoDomainDivisor = 4;

template <class T>
void check_factors(const TileMatrix<T>& A, const QrFactors<T>& F) {
    require(F.mt() == A.mt() && F.nt() == A.nt(), "F",
            fmt::format("was made for {} x {} tiles, A has {} x {}", F.mt(), F.nt(), A.mt(), A.nt()));
}

template <class T>
void check_rows(const TileMatrix<T>& A, const TileMatrix<T>& B, const char* name) {
    require(B.m() == A.m(), name, fmt::format("must have {} rows, got {}", A.m(), B.m()));
    require(B.nb() == A.nb(), name, fmt::format("must use the tile size of A ({}), got {}", A.nb(), B.nb()));
}

// Panel k's eliminations: domains of d rows from row k, a GEQRT on each domain's head and TSs of
// the other rows into it, then TTs merging the heads pairwise, level by level. Flat is one domain.
std::vector<QrStep> panel_steps(int k, int mt, const QrOptions& o) {
    const int d = o.tree == QrTree::Flat ? std::max(1, mt - k) : o.domain;
    std::vector<QrStep> steps;
    std::vector<int> heads;
    for (int h = k; h < mt; h += d) {
        heads.push_back(h);
        steps.push_back({QrStep::Kind::Geqrt, -1, h});
        for (int i = h + 1; i < std::min(mt, h + d); ++i) steps.push_back({QrStep::Kind::Ts, h, i});
    }
    // The pivot of a pair is its upper head, so the last tile row (the only one that may be
    // shorter than the panel is wide) is never a pivot, and the root is row k.
    for (std::size_t stride = 1; stride < heads.size(); stride *= 2)
        for (std::size_t a = 0; a + stride < heads.size(); a += 2 * stride)
            steps.push_back({QrStep::Kind::Tt, heads[a], heads[a + stride]});
    return steps;
}

// Right-looking tile QR: panel k's steps, each transformation applied to the tile row or tile
// pair of every column right of the panel.
template <class T>
void submit_factorization(TileMatrix<T>& A, const QrFactors<T>& F) {
    const int nt = A.nt(), ib = F.ib();
    const Priorities prio{nt};
    for (int k = 0; k < nt; ++k)
        for (const QrStep& s : F.steps(k)) {
            const int i = s.row, p = s.pivot;
            switch (s.kind) {
                case QrStep::Kind::Geqrt: {
                    submit_geqrt<T>(ib, A(i, k), F.Tf(i, k), prio.panel_factor(k));
                    if (k + 1 >= nt) break;
                    // The UNMQRs of row i read a copy: the TSs and TTs of the panel rewrite the
                    // tile's upper part but never its V, and without the copy every UNMQR would
                    // wait for all of them. No home node; unregistered once its readers are in.
                    starpu_data_handle_t copy = nullptr;
                    starpu_matrix_data_register(&copy, -1, 0, A.tile_m(i), A.tile_m(i), A.tile_n(k), sizeof(T));
                    submit_lacpy<T>(A(i, k), copy, prio.panel_factor(k));
                    for (int j = k + 1; j < nt; ++j)
                        submit_unmqr<T>('T', ib, copy, F.Tf(i, k), A(i, j), prio.update(k, j));
                    starpu_data_unregister_submit(copy);
                    break;
                }
                case QrStep::Kind::Ts:
                    submit_tsqrt<T>(ib, A(p, k), A(i, k), F.Tf(i, k), prio.panel_solve(k));
                    for (int j = k + 1; j < nt; ++j)
                        submit_tsmqr<T>('T', ib, A(p, j), A(i, j), A(i, k), F.Tf(i, k), prio.update(k, j));
                    break;
                case QrStep::Kind::Tt:
                    submit_ttqrt<T>(ib, A(p, k), A(i, k), F.Tt(i, k), prio.panel_solve(k));
                    for (int j = k + 1; j < nt; ++j)
                        submit_ttmqr<T>('T', ib, A(p, j), A(i, j), A(i, k), F.Tt(i, k), prio.update(k, j));
                    break;
            }
        }
}

// Column c of B by one step of panel k: op(Q_step) on its tile row or tile pair.
template <class T>
void submit_apply_step(char trans, const QrStep& s, int k, int c, const TileMatrix<T>& A, const QrFactors<T>& F,
                       TileMatrix<T>& B, int prio_factor, int prio_solve) {
    const int i = s.row, p = s.pivot, ib = F.ib();
    switch (s.kind) {
        case QrStep::Kind::Geqrt:
            submit_unmqr<T>(trans, ib, A(i, k), F.Tf(i, k), B(i, c), prio_factor);
            break;
        case QrStep::Kind::Ts:
            submit_tsmqr<T>(trans, ib, B(p, c), B(i, c), A(i, k), F.Tf(i, k), prio_solve);
            break;
        case QrStep::Kind::Tt:
            submit_ttmqr<T>(trans, ib, B(p, c), B(i, c), A(i, k), F.Tt(i, k), prio_solve);
            break;
    }
}

// B = Q^T B: the factorization's transformations in its order.
template <class T>
void submit_apply_qt(const TileMatrix<T>& A, const QrFactors<T>& F, TileMatrix<T>& B) {
    const int nt = A.nt();
    const Priorities prio{nt};
    for (int c = 0; c < B.nt(); ++c)
        for (int k = 0; k < nt; ++k)
            for (const QrStep& s : F.steps(k))
                submit_apply_step('T', s, k, c, A, F, B, prio.panel_factor(k), prio.panel_solve(k));
}

// B = Q B: the transposed transformations in reverse order. With skip_zero_columns, B starts as
// [I; 0] (tile-aligned), so tile column c is still zero in tile rows >= k when k > c, and the
// steps k > c (which touch tile rows >= k only) leave it alone.
template <class T>
void submit_apply_q(const TileMatrix<T>& A, const QrFactors<T>& F, TileMatrix<T>& B, bool skip_zero_columns) {
    const int nt = A.nt();
    const Priorities prio{nt};
    for (int c = 0; c < B.nt(); ++c)
        for (int k = nt - 1; k >= 0; --k) {
            if (skip_zero_columns && k > c) continue;
            const int step = nt - 1 - k;  // the order the steps run in, for the priorities
            const std::vector<QrStep>& steps = F.steps(k);
            for (auto s = steps.rbegin(); s != steps.rend(); ++s)
                submit_apply_step('N', *s, k, c, A, F, B, prio.panel_factor(step), prio.panel_solve(step));
        }
}

// Splits a matrix interface by rows: child 0 holds the first filter_arg rows, child 1 the rest.
void split_rows(void* father_interface, void* child_interface, starpu_data_filter* f, unsigned id, unsigned) {
    const auto* father = static_cast<const starpu_matrix_interface*>(father_interface);
    auto* child = static_cast<starpu_matrix_interface*>(child_interface);
    const std::uint32_t first = id == 0 ? 0 : f->filter_arg;
    const std::uint32_t rows = id == 0 ? f->filter_arg : father->nx - f->filter_arg;
    const std::size_t offset = static_cast<std::size_t>(first) * father->elemsize;
    child->id = father->id;
    child->nx = rows;
    child->ny = father->ny;
    child->elemsize = father->elemsize;
    child->allocsize = static_cast<std::size_t>(rows) * father->ny * father->elemsize;
    if (father->dev_handle) {
        if (father->ptr) child->ptr = father->ptr + offset;
        child->ld = father->ld;
        child->dev_handle = father->dev_handle;
        child->offset = father->offset + offset;
    }
}

// The top rows of B's tiles in tile row k (the rows of X = R^{-1} (Q^T B)(0:n)): B(k, c) itself,
// except when the last diagonal tile of A is taller than wide (m > n with mt == nt): its tile row
// of B is then split, for the duration of the solve, into the rows of X and those below.
template <class T>
class SolutionRows {
public:
    SolutionRows(const TileMatrix<T>& A, TileMatrix<T>& B) : B_(B), last_(A.nt() - 1) {
        if (last_ < 0 || A.tile_m(last_) == A.tile_n(last_)) return;
        starpu_data_filter f{};
        f.filter_func = split_rows;
        f.nchildren = 2;
        f.filter_arg = static_cast<unsigned>(A.tile_n(last_));
        split_.resize(static_cast<std::size_t>(B.nt()));
        for (int c = 0; c < B.nt(); ++c) {
            starpu_data_partition_plan(B(last_, c), &f, split_[c].data());
            starpu_data_partition_submit(B(last_, c), 2, split_[c].data());
        }
    }
    ~SolutionRows() {
        for (int c = 0; c < static_cast<int>(split_.size()); ++c) {
            starpu_data_unpartition_submit(B_(last_, c), 2, split_[c].data(), -1);
            starpu_data_partition_clean(B_(last_, c), 2, split_[c].data());
        }
    }
    SolutionRows(const SolutionRows&) = delete;
    SolutionRows& operator=(const SolutionRows&) = delete;
    starpu_data_handle_t operator()(int k, int c) const {
        return k == last_ && !split_.empty() ? split_[c][0] : B_(k, c);
    }

private:
    TileMatrix<T>& B_;
    int last_;
    std::vector<std::array<starpu_data_handle_t, 2>> split_;
};

// X = R^{-1} X by tile back substitution, R = the upper triangle of A's top n rows.
template <class T>
void submit_back_substitution(const TileMatrix<T>& A, TileMatrix<T>& B) {
    const int nt = A.nt();
    const Priorities prio{nt};
    const SolutionRows<T> X(A, B);
    for (int c = 0; c < B.nt(); ++c)
        for (int k = nt - 1; k >= 0; --k) {
            submit_trsm<T>('L', 'U', 'N', 'N', T(1), A(k, k), X(k, c), prio.panel_solve(nt - 1 - k));
            for (int i = 0; i < k; ++i)
                submit_gemm<T>('N', 'N', T(-1), A(i, k), X(k, c), T(1), X(i, c), prio.update(nt - 1 - k, nt - 1 - i));
        }
}

// Host access to tiles, outside the task flow: the matrix must have no task pending on it.
template <class T>
class HostTile {
public:
    HostTile(starpu_data_handle_t h, starpu_data_access_mode mode) : h_(h) {
        starpu_data_acquire_on_node(h_, STARPU_MAIN_RAM, mode);  // not the home: it may be a GPU
        data_ = reinterpret_cast<T*>(starpu_matrix_get_local_ptr(h_));
        ld_ = static_cast<int>(starpu_matrix_get_local_ld(h_));
    }
    ~HostTile() { starpu_data_release_on_node(h_, STARPU_MAIN_RAM); }
    HostTile(const HostTile&) = delete;
    HostTile& operator=(const HostTile&) = delete;
    T& operator()(int i, int j) const { return data_[i + static_cast<std::size_t>(j) * ld_]; }

private:
    starpu_data_handle_t h_;
    T* data_ = nullptr;
    int ld_ = 1;
};

// Q = [I; 0], tile by tile.
template <class T>
void set_identity(TileMatrix<T>& Q) {
    for (int c = 0; c < Q.nt(); ++c)
        for (int i = 0; i < Q.mt(); ++i) {
            const HostTile<T> t(Q(i, c), STARPU_W);
            for (int j = 0; j < Q.tile_n(c); ++j) {
                for (int r = 0; r < Q.tile_m(i); ++r) t(r, j) = T(0);
                if (i == c && j < Q.tile_m(i)) t(j, j) = T(1);
            }
        }
}

// 0, or the first global k (1-based) with R(k, k) exactly zero.
template <class T>
int first_zero_diagonal(const TileMatrix<T>& A) {
    for (int k = 0; k < A.nt(); ++k) {
        const HostTile<T> t(A(k, k), STARPU_R);
        for (int j = 0; j < A.tile_n(k); ++j)
            if (t(j, j) == T(0)) return k * A.nb() + j + 1;
    }
    return 0;
}
}  // namespace

QrOptions resolve_qr_options(QrOptions requested, int mt, int nt) {
    require(requested.domain >= 0, "domain", fmt::format("must be >= 0 (0 picks one), got {}", requested.domain));
    QrOptions o = requested;
    if (o.tree == QrTree::Auto) o.tree = mt >= kAutoTreeRatio * std::max(nt, 1) ? QrTree::Binary : QrTree::Flat;
    if (o.tree == QrTree::Flat)
        o.domain = std::max(mt, 1);
    else if (o.domain == 0)
        o.domain = std::max(1, mt / (kAutoDomainDivisor * std::max(nt, 1)));
    return o;
}

template <class T>
QrFactors<T>::QrFactors(const TileMatrix<T>& A, int ib, QrOptions options)
    : ib_(ib), mt_(A.mt()), nt_(A.nt()), options_(resolve_qr_options(options, A.mt(), A.nt())) {
    require(ib >= 1, "ib", fmt::format("must be >= 1, got {}", ib));
    require(A.m() >= A.n(), "A", fmt::format("must have m >= n, got {} x {}", A.m(), A.n()));
    T_.assign(static_cast<std::size_t>(mt_) * nt_, nullptr);
    TT_.assign(static_cast<std::size_t>(mt_) * nt_, nullptr);
    // The kernels clamp ib to the tile's reflector count K <= nb, so min(ib, nb) rows suffice.
    const int rows = std::min(ib, A.nb());
    for (int k = 0; k < nt_; ++k) {
        for (int i = k; i < mt_; ++i)
            starpu_matrix_data_register(&T_[static_cast<std::size_t>(k) * mt_ + i], -1, 0, rows, rows, A.tile_n(k),
                                        sizeof(T));
        steps_.push_back(panel_steps(k, mt_, options_));
        for (const QrStep& s : steps_.back())
            if (s.kind == QrStep::Kind::Tt)
                starpu_matrix_data_register(&TT_[static_cast<std::size_t>(k) * mt_ + s.row], -1, 0, rows, rows,
                                            A.tile_n(k), sizeof(T));
    }
}

template <class T>
QrFactors<T>::~QrFactors() {
    for (const auto* handles : {&T_, &TT_})
        for (starpu_data_handle_t h : *handles)
            if (h) starpu_data_unregister(h);
}

template <class T>
void geqrf(TileMatrix<T>& A, QrFactors<T>& F) {
    require(A.m() >= A.n(), "A", fmt::format("must have m >= n, got {} x {}", A.m(), A.n()));
    check_factors(A, F);
    submit_factorization(A, F);
    starpu_task_wait_for_all();
    throw_if_kernel_error();
}

template <class T>
void qr_apply(char trans, const TileMatrix<T>& A, const QrFactors<T>& F, TileMatrix<T>& B) {
    const bool transpose = trans == 'T' || trans == 't';
    require(transpose || trans == 'N' || trans == 'n', "trans", fmt::format("must be 'N' or 'T', got '{}'", trans));
    check_factors(A, F);
    check_rows(A, B, "B");
    if (transpose)
        submit_apply_qt(A, F, B);
    else
        submit_apply_q(A, F, B, false);
    starpu_task_wait_for_all();
    throw_if_kernel_error();
}

template <class T>
void orgqr(const TileMatrix<T>& A, const QrFactors<T>& F, TileMatrix<T>& Q) {
    check_factors(A, F);
    check_rows(A, Q, "Q");
    require(Q.n() <= A.m(), "Q", fmt::format("must have at most m = {} columns, got {}", A.m(), Q.n()));
    set_identity(Q);
    submit_apply_q(A, F, Q, true);
    starpu_task_wait_for_all();
    throw_if_kernel_error();
}

template <class T>
void geqrs(const TileMatrix<T>& A, const QrFactors<T>& F, TileMatrix<T>& B) {
    check_factors(A, F);
    check_rows(A, B, "B");
    submit_apply_qt(A, F, B);
    submit_back_substitution(A, B);
    starpu_task_wait_for_all();
    throw_if_kernel_error();
}

template <class T>
int gels(TileMatrix<T>& A, TileMatrix<T>& B, int ib, QrOptions options) {
    require(A.m() >= A.n(), "A", fmt::format("must have m >= n, got {} x {}", A.m(), A.n()));
    check_rows(A, B, "B");
    QrFactors<T> F(A, ib, options);
    geqrf(A, F);
    const int info = first_zero_diagonal(A);
    if (info == 0) geqrs(A, F, B);
    return info;
}

template class QrFactors<float>;
template class QrFactors<double>;
template void geqrf<float>(TileMatrix<float>&, QrFactors<float>&);
template void geqrf<double>(TileMatrix<double>&, QrFactors<double>&);
template void qr_apply<float>(char, const TileMatrix<float>&, const QrFactors<float>&, TileMatrix<float>&);
template void qr_apply<double>(char, const TileMatrix<double>&, const QrFactors<double>&, TileMatrix<double>&);
template void orgqr<float>(const TileMatrix<float>&, const QrFactors<float>&, TileMatrix<float>&);
template void orgqr<double>(const TileMatrix<double>&, const QrFactors<double>&, TileMatrix<double>&);
template void geqrs<float>(const TileMatrix<float>&, const QrFactors<float>&, TileMatrix<float>&);
template void geqrs<double>(const TileMatrix<double>&, const QrFactors<double>&, TileMatrix<double>&);
template int gels<float>(TileMatrix<float>&, TileMatrix<float>&, int, QrOptions);
template int gels<double>(TileMatrix<double>&, TileMatrix<double>&, int, QrOptions);

}  // namespace starfact
