// Tile Cholesky: right-looking submission of POTRF, TRSM, SYRK and GEMM tasks, and the solve.
#include "tile_algorithms/cholesky.hpp"

#include <fmt/format.h>

#include "codelets/codelets.hpp"
#include "common/error.hpp"
#include "common/kernel_error.hpp"
#include "tile_algorithms/finished_tiles.hpp"
#include "tile_algorithms/priorities.hpp"

namespace starfact {
namespace {
using namespace codelets;

bool is_lower(char uplo) { return uplo == 'L' || uplo == 'l'; }

void check_uplo(char uplo) {
    require(uplo == 'L' || uplo == 'l' || uplo == 'U' || uplo == 'u', "uplo",
            fmt::format("must be 'L' or 'U', got '{}'", uplo));
}

template <class T>
void check_square(const TileMatrix<T>& A) {
    require(A.m() == A.n(), "A", fmt::format("must be square, got {} x {}", A.m(), A.n()));
}

// A = L L^T: at step k factor A(k,k), solve the tiles below it, update the trailing lower triangle.
template <class T>
void submit_potrf_lower(TileMatrix<T>& A, const InfoVector& info, const detail::FinishedTiles& finished) {
    const int nt = A.nt();
    const Priorities prio{nt};
    for (int k = 0; k < nt; ++k) {
        submit_potrf<T>('L', A(k, k), info[k], prio.panel_factor(k));
        for (int i = k + 1; i < nt; ++i) submit_trsm<T>('R', 'L', 'T', 'N', T(1), A(k, k), A(i, k), prio.panel_solve(k));
        for (int j = k + 1; j < nt; ++j) {
            submit_syrk<T>('L', 'N', T(-1), A(j, k), T(1), A(j, j), prio.update(k, j));
            for (int i = j + 1; i < nt; ++i)
                submit_gemm<T>('N', 'T', T(-1), A(i, k), A(j, k), T(1), A(i, j), prio.update(k, j));
        }
        for (int i = k; i < nt; ++i) finished.done(A(i, k));  // tile column k of L
    }
}

// A = U^T U: the transpose of the lower loop, on the upper triangle.
template <class T>
void submit_potrf_upper(TileMatrix<T>& A, const InfoVector& info, const detail::FinishedTiles& finished) {
    const int nt = A.nt();
    const Priorities prio{nt};
    for (int k = 0; k < nt; ++k) {
        submit_potrf<T>('U', A(k, k), info[k], prio.panel_factor(k));
        for (int j = k + 1; j < nt; ++j) submit_trsm<T>('L', 'U', 'T', 'N', T(1), A(k, k), A(k, j), prio.panel_solve(k));
        for (int i = k + 1; i < nt; ++i) {
            submit_syrk<T>('U', 'T', T(-1), A(k, i), T(1), A(i, i), prio.update(k, i));
            for (int j = i + 1; j < nt; ++j)
                submit_gemm<T>('T', 'N', T(-1), A(k, i), A(k, j), T(1), A(i, j), prio.update(k, j));
        }
        for (int j = k; j < nt; ++j) finished.done(A(k, j));  // tile row k of U
    }
}

// Forward then backward substitution with the tile factor, one tile column of B at a time.
// op_fwd is the transpose flag that makes the forward sweep use L (lower) or U^T (upper).
template <class T>
void submit_potrs(char uplo, const TileMatrix<T>& A, TileMatrix<T>& B) {
    const int nt = A.nt();
    const bool lower = is_lower(uplo);
    const char u = lower ? 'L' : 'U';
    const char fwd = lower ? 'N' : 'T';
    const char bwd = lower ? 'T' : 'N';
    // Tile (r, c) of the factor as it appears in L: A(r, c) when lower, A(c, r) when upper.
    auto Lt = [&](int r, int c) { return lower ? A(r, c) : A(c, r); };
    const Priorities prio{nt};
    for (int c = 0; c < B.nt(); ++c) {
        for (int k = 0; k < nt; ++k) {
            submit_trsm<T>('L', u, fwd, 'N', T(1), A(k, k), B(k, c), prio.panel_solve(k));
            for (int i = k + 1; i < nt; ++i)
                submit_gemm<T>(lower ? 'N' : 'T', 'N', T(-1), Lt(i, k), B(k, c), T(1), B(i, c), prio.update(k, i));
        }
        for (int k = nt - 1; k >= 0; --k) {
            submit_trsm<T>('L', u, bwd, 'N', T(1), A(k, k), B(k, c), prio.panel_solve(nt - 1 - k));
            for (int i = 0; i < k; ++i)
                submit_gemm<T>(lower ? 'T' : 'N', 'N', T(-1), Lt(k, i), B(k, c), T(1), B(i, c),
                               prio.update(nt - 1 - k, nt - 1 - i));
        }
    }
}
}  // namespace

template <class T>
int potrf(char uplo, TileMatrix<T>& A) {
    check_uplo(uplo);
    check_square(A);
    InfoVector info(A.nt());
    // The triangle's tiles stay on the GPUs while the factorization runs.
    const detail::FinishedTiles finished(static_cast<std::int64_t>(A.nt()) * (A.nt() + 1) / 2 * A.nb() *
                                         std::int64_t(A.nb()) * static_cast<std::int64_t>(sizeof(T)));
    if (is_lower(uplo))
        submit_potrf_lower(A, info, finished);
    else
        submit_potrf_upper(A, info, finished);
    starpu_task_wait_for_all();
    throw_if_kernel_error();
    return info.global_info(A.nb());
}

template <class T>
void potrs(char uplo, const TileMatrix<T>& A, TileMatrix<T>& B) {
    check_uplo(uplo);
    check_square(A);
    require(B.m() == A.n(), "B", fmt::format("must have n = {} rows, got {}", A.n(), B.m()));
    require(B.nb() == A.nb(), "B", fmt::format("must use the tile size of A ({}), got {}", A.nb(), B.nb()));
    submit_potrs(uplo, A, B);
    starpu_task_wait_for_all();
    throw_if_kernel_error();
}

template <class T>
int posv(char uplo, TileMatrix<T>& A, TileMatrix<T>& B) {
    check_uplo(uplo);
    check_square(A);
    require(B.m() == A.n(), "B", fmt::format("must have n = {} rows, got {}", A.n(), B.m()));
    require(B.nb() == A.nb(), "B", fmt::format("must use the tile size of A ({}), got {}", A.nb(), B.nb()));
    const int info = potrf(uplo, A);
    if (info == 0) potrs(uplo, A, B);
    return info;
}

template int potrf<float>(char, TileMatrix<float>&);
template int potrf<double>(char, TileMatrix<double>&);
template void potrs<float>(char, const TileMatrix<float>&, TileMatrix<float>&);
template void potrs<double>(char, const TileMatrix<double>&, TileMatrix<double>&);
template int posv<float>(char, TileMatrix<float>&, TileMatrix<float>&);
template int posv<double>(char, TileMatrix<double>&, TileMatrix<double>&);

}  // namespace starfact
