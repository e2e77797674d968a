// Tile LU with incremental pivoting (GETRF, GESSM, TSTRF, SSSSM), its solve and GESV.
#pragma once

#include <starpu.h>

#include <string>
#include <vector>

#include "tile_algorithms/tile_matrix.hpp"

namespace starfact {

/// What tile LU produces besides the overwritten A and what its solve needs: the pivots of
/// every diagonal tile's GETRF and of every TSTRF, and the TSTRFs' inner L factors (ib x nb
/// each). All are StarPU data, allocated where they are first written.
template <class T>
class LuFactors {
public:
    /// Factors for an m x n TileMatrix (m >= n) with tile size nb and inner block ib >= 1.
    /// trtri: the paper's trtri + gemm variant: every TSTRF also stores the inverses of its
    /// unit lower L1 blocks (L tiles of 2 ib x nb), the diagonal tile's copy for GESSM holds
    /// L^{-1}, and the kernels apply these by products instead of triangular solves (GEMMs on
    /// GPUs, several times faster than cuBLAS's trsm there; the CPU SSSSM keeps its solve). The
    /// factorization is the same up to rounding; with very large tiles (nb = 8192) the inverted
    /// diagonal L costs about one digit of backward error (docs/performance.md).
    LuFactors(const TileMatrix<T>& A, int ib, bool trtri = false);
    ~LuFactors();
    LuFactors(const LuFactors&) = delete;
    LuFactors& operator=(const LuFactors&) = delete;

    int ib() const { return ib_; }
    bool trtri() const { return trtri_; }
    int mt() const { return mt_; }
    int nt() const { return nt_; }
    starpu_data_handle_t diag_pivots(int k) const { return diag_pivots_[k]; }
    starpu_data_handle_t pivots(int i, int k) const { return pivots_[index(i, k)]; }
    starpu_data_handle_t L(int i, int k) const { return L_[index(i, k)]; }

private:
    std::size_t index(int i, int k) const { return static_cast<std::size_t>(k) * mt_ + i; }
    int ib_;
    bool trtri_;
    int mt_, nt_;
    std::vector<starpu_data_handle_t> diag_pivots_, pivots_, L_;
};

/// How getrf's tasks are placed and ordered. Dynamic: StarPU's scheduler (STARPU_SCHED, dmdas
/// by default) places tasks submitted in right-looking order. The static schedules of Agullo et
/// al. (docs/design.md, "References") pin every task that writes tile column j to
/// worker j mod W (the W workers codelets::eligible_workers() allows) and submit in right-looking (RL),
/// left-looking (LL: all updates of a column, then its panel) or breadth-first left-looking
/// order (BF-LL: a column tile by tile, each tile receiving all its updates and then its panel
/// or row operation before the tile below). All give the same factorization.
enum class LuSchedule { Dynamic, StaticRightLooking, StaticLeftLooking, StaticBreadthFirstLeftLooking };

/// "dynamic", "static-rl", "static-ll", "static-bfll"; throws ArgumentError("schedule") otherwise.
LuSchedule parse_lu_schedule(const std::string& name);
const char* lu_schedule_name(LuSchedule s);

/// Tile LU with incremental pivoting of the m x n matrix A (m >= n), in place: the upper
/// trapezoid of A becomes U; the strictly lower parts of the diagonal tiles hold their GETRF
/// L factors and the tiles below the diagonal the TSTRF multipliers, which with F define the
/// transformation (not a single L: pivoting is pairwise between tiles; docs/design.md, "Tile LU
/// with incremental pivoting").
/// Returns LAPACK's info: 0, or the global index k (1-based) of the first exactly zero
/// pivot U(k, k); the factorization still completes. Throws ArgumentError before any task
/// when m < n or F was made for another shape.
template <class T>
int getrf(TileMatrix<T>& A, LuFactors<T>& F, LuSchedule schedule = LuSchedule::Dynamic);

/// Applies the transformations of getrf(A, F) to B (m rows, same nb as A): B = L~^{-1} P~ B.
/// On the original A this yields U above zeros; getrs uses it for the forward solve.
template <class T>
void lu_apply_forward(const TileMatrix<T>& A, const LuFactors<T>& F, TileMatrix<T>& B);

/// Solves A X = B (A square n x n factored by getrf, B n x nrhs, same nb); B becomes X.
template <class T>
void getrs(const TileMatrix<T>& A, const LuFactors<T>& F, TileMatrix<T>& B);

/// getrf then getrs with inner block ib (and the trtri variant of LuFactors when asked).
/// Returns getrf's info; B is not touched when the matrix is singular (info > 0), as LAPACK's gesv.
template <class T>
int gesv(TileMatrix<T>& A, TileMatrix<T>& B, int ib, LuSchedule schedule = LuSchedule::Dynamic, bool trtri = false);

}  // namespace starfact
