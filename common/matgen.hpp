// Deterministic test matrices (column-major, host): uniform random, SPD, SPD with a planted
// non-positive leading minor. The same seed gives the same matrix on every machine.
#pragma once

#include <cstdint>

namespace starfact::matgen {

/// The generated matrices a tile can be generated from in place, on a CPU or a GPU
/// (codelets::submit_generate): uniform(., ., seed) and spd(n, seed).
enum class Kind : std::int32_t { Uniform = 0, Spd = 1 };

/// A(i, j) uniform in [-1, 1), a counter-based function of (seed, i, j): order-independent.
template <class T>
void uniform(int m, int n, std::uint64_t seed, T* A, int lda);

/// A random symmetric positive definite matrix: B + B^T + (2n+1) I with B uniform in [-1, 1),
/// both triangles filled. Every row is strictly diagonally dominant (diagonal >= 2n - 1,
/// off-diagonal row sum <= 2n - 2), so it is SPD with a small condition number.
template <class T>
void spd(int n, std::uint64_t seed, T* A, int lda);

/// The rows x cols block of uniform(., ., seed) at (i0, j0) into B (leading dimension ldb):
/// the same bits as the whole matrix holds there. One thread; callers spread blocks over cores,
/// e.g. to generate a matrix straight into its tiles without a column-major copy.
template <class T>
void uniform_block(std::uint64_t seed, int i0, int j0, int rows, int cols, T* B, int ldb);

/// The rows x cols block of spd(n, seed) at (i0, j0) into B (leading dimension ldb), the same
/// bits as spd writes there (each entry costs two hashes here, one in spd). One thread.
template <class T>
void spd_block(int n, std::uint64_t seed, int i0, int j0, int rows, int cols, T* B, int ldb);

/// A symmetric matrix whose leading minors 1..k-1 are positive and minor k is negative, so
/// Cholesky fails with info = k exactly (1 <= k <= n). Built as L D L^T with L unit lower
/// triangular with small random entries and D = diag(1 + u_i) except D(k-1) = -1.
template <class T>
void spd_failing_at(int n, int k, std::uint64_t seed, T* A, int lda);

}  // namespace starfact::matgen
