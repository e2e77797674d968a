// Internal pieces of the variable-size batched module shared by its host path
// (vbatched.cc) and its StarPU path (vtasks.cc): one argument check for every operation.
// Not installed.
#pragma once

#include "batched/detail.hpp"
#include "batched/vbatched.hpp"
#ifdef STARFACT_HAVE_CUDA
#include "batched/cuda/vbatched_kernels.hpp"
#endif

namespace starfact::batched::vdetail {

/// Everything a variable-size call is about. Square operations (potrf, potrs, getrf, getrs)
/// leave m null: their rows are n. Pointer arrays as void pointers so that one check serves
/// every precision (T* const* and const T* const* have the representation of void* const*).
struct VProblem {
    detail::Op op;
    int count = 0;
    int nrhs = 0;
    const int* m = nullptr;  ///< rows (geqrf, gels); null: n
    const int* n = nullptr;
    const int* lda = nullptr;
    const int* ldb = nullptr;
    const void* const* A = nullptr;
    const void* const* B = nullptr;
    const void* const* ipiv = nullptr;
    const void* const* tau = nullptr;
    const int* info = nullptr;
};

template <class P>
const void* const* erase(P* const* p) {
    return reinterpret_cast<const void* const*>(p);
}

/// LAPACK-style checks of every argument the operation takes, before anything is read or
/// written: throws ArgumentError naming the first bad one (with its index).
void check(const VProblem& p);

/// Rows of matrix b: m[b], or n[b] for the square operations.
inline int rows(const VProblem& p, int b) { return p.m != nullptr ? p.m[b] : p.n[b]; }

#ifdef STARFACT_HAVE_CUDA
/// The kernels' Schedule (batched/cuda/vbatched_kernels.hpp) for the API's.
inline cuda::Schedule kernel_schedule(Schedule s) {
    return s == Schedule::dsse ? cuda::Schedule::dsse : cuda::Schedule::ssde;
}
#endif

}  // namespace starfact::batched::vdetail
