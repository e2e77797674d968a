// Task priorities for right-looking tile factorizations: the panel of step k (the critical
// path) first, then the update that feeds the next panel, then the rest of the trailing matrix.
#pragma once

namespace starfact {

struct Priorities {
    int nt;  ///< tile columns
    /// Factorization of the diagonal tile at step k: the head of the critical path.
    int panel_factor(int k) const { return 4 * (nt - k) + 3; }
    /// Panel solves (TRSM) at step k.
    int panel_solve(int k) const { return 4 * (nt - k) + 2; }
    /// Update of tile column j at step k: column k+1 becomes the next panel, so it goes first;
    /// the farther a column is from the panel, the later it is needed.
    int update(int k, int j) const { return j == k + 1 ? 4 * (nt - k) + 1 : 4 * (nt - k) - (j - k); }
};

}  // namespace starfact
