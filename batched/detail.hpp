// Internal pieces shared by the batched module's three paths (host, StarPU tasks, Context):
// the argument checks and the per-matrix host kernels. Not installed.
#pragma once

#include <algorithm>
#include <cstddef>

#include "batched/batched.hpp"
#include "common/parallel.hpp"

namespace starfact::batched::detail {

enum class Op { getrf, getrs, potrf, potrs, geqrf, gels };

const char* op_name(Op op);

/// Everything a call is about; arrays as void pointers so one check serves every form.
struct Problem {
    Op op;
    int m = 0, n = 0, nrhs = 0, count = 0;
    int lda = 1, ldb = 1;
    bool strided = true;
    long long strideA = 0, strideB = 0;
    const void* A = nullptr;  ///< the array (strided) or the pointer array
    const void* B = nullptr;
    const void* ipiv = nullptr;
    const void* tau = nullptr;
    const void* info = nullptr;
};

/// The Problem of one call (its data pointers are set by the caller where needed).
inline Problem problem(Op op, int m, int n, int nrhs, int count, int lda, int ldb, bool strided) {
    Problem p;
    p.op = op;
    p.m = m;
    p.n = n;
    p.nrhs = nrhs;
    p.count = count;
    p.lda = lda;
    p.ldb = ldb;
    p.strided = strided;
    return p;
}

/// LAPACK-style argument checks: throws ArgumentError naming the first bad argument. Pointer
/// entries of a pointer batch are not looked at (they may be device pointers).
void check(const Problem& p);

/// The host path also checks that no entry of a pointer batch is null (for n > 0).
void check_host_pointers(const void* const* array, int count, const char* name);

/// True when the call has nothing to compute (count 0, n 0, or no right-hand side).
bool nothing_to_do(const Problem& p);

/// Sets info[0..count) to 0 (host) when the call has nothing to compute but writes infos.
void zero_info(int* info, int count);

/// The number of failing matrices: entries of info[0..count) that are not 0 (host array).
inline int count_failures(const int* info, int count) {
    return static_cast<int>(std::count_if(info, info + count, [](int i) { return i != 0; }));
}

/// bytes rounded up to a multiple of 256, the alignment of each part of a device workspace.
constexpr std::size_t round256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// ---- per-matrix host kernels (LAPACKE, the calling thread's OpenBLAS) -----------------------

template <class T>
int getrf_one(int n, T* A, int lda, int* ipiv);
template <class T>
void getrs_one(int n, int nrhs, const T* A, int lda, const int* ipiv, T* B, int ldb);
template <class T>
int potrf_one(Uplo uplo, int n, T* A, int lda);
template <class T>
void potrs_one(Uplo uplo, int n, int nrhs, const T* A, int lda, T* B, int ldb);
template <class T>
void geqrf_one(int m, int n, T* A, int lda, T* tau);
/// geqrf, then LAPACK's trtrs test on R's diagonal before B is touched, then Q^T B and R^{-1}.
template <class T>
int gels_one(int m, int n, int nrhs, T* A, int lda, T* tau, T* B, int ldb);

/// Holds OpenBLAS to one thread while it lives (each matrix is one thread's work), then
/// restores the previous setting.
class OneBlasThread {
public:
    OneBlasThread();
    ~OneBlasThread();
    OneBlasThread(const OneBlasThread&) = delete;
    OneBlasThread& operator=(const OneBlasThread&) = delete;

private:
    int previous_;
};

/// Runs body(b) for b in [0, count) on `threads` threads (0: every core), one BLAS thread each.
template <class F>
void for_each_matrix(int count, unsigned threads, F body) {
    const OneBlasThread one;
    parallel_for(count, body, threads);
}

char uplo_char(Uplo uplo);

}  // namespace starfact::batched::detail
