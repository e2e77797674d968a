// The codelets layer's public header: task submission for every tile kernel, and a switch
// that forces the CPU or the CUDA implementation (used by tests and benchmarks).
#pragma once

#include <starpu.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/matgen.hpp"

namespace starfact::codelets {

enum class Impl { Any, Cpu, Cuda };

/// Restricts every codelet to one kind of worker from now on (Impl::Any lifts it).
/// Submitting while no worker of the forced kind exists throws RuntimeError.
void force_impl(Impl impl);
Impl forced_impl();

/// Forces an implementation for the lifetime of the object.
class ScopedImpl {
public:
    explicit ScopedImpl(Impl impl) : previous_(forced_impl()) { force_impl(impl); }
    ~ScopedImpl() { force_impl(previous_); }
    ScopedImpl(const ScopedImpl&) = delete;
    ScopedImpl& operator=(const ScopedImpl&) = delete;

private:
    Impl previous_;
};

/// The workers a task may run on under the current force_impl() (all of them for Impl::Any);
/// static schedules distribute tile columns over these.
std::vector<int> eligible_workers();

/// The performance-model symbols of every codelet, e.g. "starfact_potrf_d".
std::vector<std::string> perfmodel_symbols();

// Each submit_* inserts one task; handles are StarPU matrix handles of tiles except `info`,
// a variable handle holding one int. Access modes are fixed by the codelet. LAPACK argument
// characters throughout. Throws RuntimeError if StarPU refuses the task.

/// POTRF: A = L L^T ('L') or U^T U ('U') in place; writes LAPACK's local info to `info`.
template <class T>
void submit_potrf(char uplo, starpu_data_handle_t A, starpu_data_handle_t info, int priority);

/// TRSM: B = alpha op(A)^{-1} B (side 'L') or alpha B op(A)^{-1} (side 'R').
template <class T>
void submit_trsm(char side, char uplo, char transa, char diag, T alpha, starpu_data_handle_t A,
                 starpu_data_handle_t B, int priority);

/// SYRK: C = alpha A A^T + beta C ('N') or alpha A^T A + beta C ('T'), uplo triangle of C.
template <class T>
void submit_syrk(char uplo, char trans, T alpha, starpu_data_handle_t A, T beta, starpu_data_handle_t C,
                 int priority);

/// GEMM: C = alpha op(A) op(B) + beta C.
template <class T>
void submit_gemm(char transa, char transb, T alpha, starpu_data_handle_t A, starpu_data_handle_t B, T beta,
                 starpu_data_handle_t C, int priority);

// ---- tile LU with incremental pivoting (see codelets/cpu/lu_kernels.hpp for the maths) -------
// ipiv handles are StarPU vectors of int; L handles ib x K matrices; info a one-int variable.
// `worker` >= 0 pins the task to that worker (the static schedules); -1 lets StarPU decide.

/// GETRF: LU with partial pivoting of a diagonal tile; writes its pivots and local info.
template <class T>
void submit_getrf(int ib, starpu_data_handle_t A, starpu_data_handle_t ipiv, starpu_data_handle_t info, int priority,
                  int worker = -1);

/// LACPY: dst = src (same shape), e.g. the copy of a factored diagonal tile that GESSM reads
/// so that it need not wait for the TSTRFs that rewrite the U part.
template <class T>
void submit_lacpy(starpu_data_handle_t src, starpu_data_handle_t dst, int priority, int worker = -1);

/// GENERATE: tile A = the block at rows i0.., columns j0.. of matgen's matrix `kind` (n: spd's
/// order), written in place where the task runs (on a GPU: in device memory, never copied
/// over the bus); the same bits on every kind of worker.
template <class T>
void submit_generate(matgen::Kind kind, std::uint64_t seed, int n, int i0, int j0, starpu_data_handle_t A,
                     int priority, int worker = -1);

/// GESSM: A = L^{-1} P A with D's unit lower L and GETRF's pivots, by a triangular solve (also
/// in the trtri + gemm variant: docs/design.md says why).
template <class T>
void submit_gessm(int ib, starpu_data_handle_t ipiv, starpu_data_handle_t D, starpu_data_handle_t A, int priority,
                  int worker = -1);

/// TSTRF: LU of [U; A] (U the diagonal tile's upper triangle); writes L, pivots and local info.
template <class T>
void submit_tstrf(int ib, starpu_data_handle_t U, starpu_data_handle_t A, starpu_data_handle_t L,
                  starpu_data_handle_t ipiv, starpu_data_handle_t info, int priority, int worker = -1);

/// SSSSM: applies TSTRF's transformations (L, AL = the factored tile, ipiv) to [A1; A2].
template <class T>
void submit_ssssm(int ib, starpu_data_handle_t A1, starpu_data_handle_t A2, starpu_data_handle_t L,
                  starpu_data_handle_t AL, starpu_data_handle_t ipiv, int priority, int worker = -1);

// ---- tile QR (see codelets/cpu/qr_kernels.hpp for the maths and the storage) ----------------
// Tf handles are ib x K matrices of T factors (K: the reflectors of the tile they belong to);
// trans is 'T' (apply Q^T, as the factorization does) or 'N' (apply Q).

/// GEQRT: Householder QR of a tile, A = Q R; R above the diagonal, V below, T factors to Tf.
template <class T>
void submit_geqrt(int ib, starpu_data_handle_t A, starpu_data_handle_t Tf, int priority, int worker = -1);

/// UNMQR: C = op(Q) C with Q from GEQRT of V (the diagonal tile or its copy; only its strict
/// lower part is read) and its Tf.
template <class T>
void submit_unmqr(char trans, int ib, starpu_data_handle_t V, starpu_data_handle_t Tf, starpu_data_handle_t C,
                  int priority, int worker = -1);

/// TSQRT: QR of [R; A] (R the diagonal tile's upper triangle, A the tile below); A becomes V2.
template <class T>
void submit_tsqrt(int ib, starpu_data_handle_t R, starpu_data_handle_t A, starpu_data_handle_t Tf, int priority,
                  int worker = -1);

/// TSMQR: [A1; A2] = op(Q) [A1; A2] with Q from TSQRT (V2 = the factored tile, Tf).
template <class T>
void submit_tsmqr(char trans, int ib, starpu_data_handle_t A1, starpu_data_handle_t A2, starpu_data_handle_t V2,
                  starpu_data_handle_t Tf, int priority, int worker = -1);

/// TTQRT: QR of [R1; R2] (R1 the pivot tile's upper triangle, R2 that of the tile A below, a
/// tile row head factored by GEQRT); R2's upper part becomes V2, its strict lower part (GEQRT's
/// V) is kept.
template <class T>
void submit_ttqrt(int ib, starpu_data_handle_t R, starpu_data_handle_t A, starpu_data_handle_t Tf, int priority,
                  int worker = -1);

/// TTMQR: [A1; A2] = op(Q) [A1; A2] with Q from TTQRT (V2 = the upper part of the factored
/// tile, Tf).
template <class T>
void submit_ttmqr(char trans, int ib, starpu_data_handle_t A1, starpu_data_handle_t A2, starpu_data_handle_t V2,
                  starpu_data_handle_t Tf, int priority, int worker = -1);

}  // namespace starfact::codelets
