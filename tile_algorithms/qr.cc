// Tile QR: right-looking submission of GEQRT, UNMQR, TSQRT and TSMQR tasks (with the
// diagonal-tile copy), the application of Q and Q^T, the explicit Q and the least-squares solve.
#include "tile_algorithms/qr.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

#include <fmt/format.h>

#include "codelets/codelets.hpp"
#include "common/error.hpp"
#include "common/kernel_error.hpp"
#include "tile_algorithms/diagonal_copies.hpp"
#include "tile_algorithms/priorities.hpp"

namespace starfact {
namespace {
using namespace codelets;

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

using starfact::detail::DiagonalCopies;

// Right-looking tile QR: panel k (GEQRT, then a TSQRT per tile below), each transformation
// applied to the tile row or tile pair of every column right of the panel.
template <class T>
void submit_factorization(TileMatrix<T>& A, const QrFactors<T>& F, const DiagonalCopies<T>& D) {
    const int mt = A.mt(), nt = A.nt(), ib = F.ib();
    const Priorities prio{nt};
    for (int k = 0; k < nt; ++k) {
        submit_geqrt<T>(ib, A(k, k), F.Tf(k, k), prio.panel_factor(k));
        // The UNMQRs of row k read the copy: the TSQRTs below rewrite the R part of A(k, k) but
        // never its V part, and without the copy every UNMQR would wait for all of them.
        if (k + 1 < nt) submit_lacpy<T>(A(k, k), D[k], prio.panel_factor(k));
        for (int j = k + 1; j < nt; ++j) submit_unmqr<T>('T', ib, D[k], F.Tf(k, k), A(k, j), prio.update(k, j));
        for (int i = k + 1; i < mt; ++i) {
            submit_tsqrt<T>(ib, A(k, k), A(i, k), F.Tf(i, k), prio.panel_solve(k));
            for (int j = k + 1; j < nt; ++j)
                submit_tsmqr<T>('T', ib, A(k, j), A(i, j), A(i, k), F.Tf(i, k), prio.update(k, j));
        }
    }
}

// B = Q^T B: the factorization's transformations in its order.
template <class T>
void submit_apply_qt(const TileMatrix<T>& A, const QrFactors<T>& F, TileMatrix<T>& B) {
    const int mt = A.mt(), nt = A.nt(), ib = F.ib();
    const Priorities prio{nt};
    for (int c = 0; c < B.nt(); ++c)
        for (int k = 0; k < nt; ++k) {
            submit_unmqr<T>('T', ib, A(k, k), F.Tf(k, k), B(k, c), prio.panel_factor(k));
            for (int i = k + 1; i < mt; ++i)
                submit_tsmqr<T>('T', ib, B(k, c), B(i, c), A(i, k), F.Tf(i, k), prio.panel_solve(k));
        }
}

// B = Q B: the transposed transformations in reverse order. With skip_zero_columns, B starts as
// [I; 0] (tile-aligned), so tile column c is still zero in tile rows >= k when k > c, and the
// steps k > c leave it alone.
template <class T>
void submit_apply_q(const TileMatrix<T>& A, const QrFactors<T>& F, TileMatrix<T>& B, bool skip_zero_columns) {
    const int mt = A.mt(), nt = A.nt(), ib = F.ib();
    const Priorities prio{nt};
    for (int c = 0; c < B.nt(); ++c)
        for (int k = nt - 1; k >= 0; --k) {
            if (skip_zero_columns && k > c) continue;
            const int step = nt - 1 - k;  // the order the steps run in, for the priorities
            for (int i = mt - 1; i > k; --i)
                submit_tsmqr<T>('N', ib, B(k, c), B(i, c), A(i, k), F.Tf(i, k), prio.panel_solve(step));
            submit_unmqr<T>('N', ib, A(k, k), F.Tf(k, k), B(k, c), prio.panel_factor(step));
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
        starpu_data_acquire(h_, mode);
        data_ = reinterpret_cast<T*>(starpu_matrix_get_local_ptr(h_));
        ld_ = static_cast<int>(starpu_matrix_get_local_ld(h_));
    }
    ~HostTile() { starpu_data_release(h_); }
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

template <class T>
QrFactors<T>::QrFactors(const TileMatrix<T>& A, int ib) : ib_(ib), mt_(A.mt()), nt_(A.nt()) {
    require(ib >= 1, "ib", fmt::format("must be >= 1, got {}", ib));
    require(A.m() >= A.n(), "A", fmt::format("must have m >= n, got {} x {}", A.m(), A.n()));
    T_.assign(static_cast<std::size_t>(mt_) * nt_, nullptr);
    // The kernels clamp ib to the tile's reflector count K <= nb, so min(ib, nb) rows suffice.
    const int rows = std::min(ib, A.nb());
    for (int k = 0; k < nt_; ++k)
        for (int i = k; i < mt_; ++i)
            starpu_matrix_data_register(&T_[static_cast<std::size_t>(k) * mt_ + i], -1, 0, rows, rows, A.tile_n(k),
                                        sizeof(T));
}

template <class T>
QrFactors<T>::~QrFactors() {
    for (starpu_data_handle_t h : T_)
        if (h) starpu_data_unregister(h);
}

template <class T>
void geqrf(TileMatrix<T>& A, QrFactors<T>& F) {
    require(A.m() >= A.n(), "A", fmt::format("must have m >= n, got {} x {}", A.m(), A.n()));
    check_factors(A, F);
    {
        DiagonalCopies<T> D(A);
        submit_factorization(A, F, D);
    }
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
int gels(TileMatrix<T>& A, TileMatrix<T>& B, int ib) {
    require(A.m() >= A.n(), "A", fmt::format("must have m >= n, got {} x {}", A.m(), A.n()));
    check_rows(A, B, "B");
    QrFactors<T> F(A, ib);
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
template int gels<float>(TileMatrix<float>&, TileMatrix<float>&, int);
template int gels<double>(TileMatrix<double>&, TileMatrix<double>&, int);

}  // namespace starfact
