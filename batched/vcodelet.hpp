// The variable-size batched codelet (vcodelet.cc) as its submission side (vtasks.cc) sees it:
// a packed slice's entries, the argument block of a task, the buffers of each operation and
// the codelet of each operation and precision. Not installed.
#pragma once

#include <starpu.h>

#include <vector>

#include "batched/detail.hpp"
#include "batched/slice_codelet.hpp"
#include "batched/vbatched.hpp"

namespace starfact::batched::vdetail {

/// One matrix of a packed slice: its shape (square operations: m = n) and where its A, B and
/// pivots or tau start in the slice's buffers, in elements. Leading dimensions are max(1, m).
struct Entry {
    int m, n;
    long long a, b, p;
};

/// What a task needs besides its buffers: the operation, the slice's matrix count and the
/// bounds its kernels are sized for, and its flops (the model's size).
struct VSliceArgs {
    detail::Op op;
    Uplo uplo;
    Schedule schedule;
    int nrhs;
    int count;
    int mmax, nmax, kmax, mexcess, nexcess;
    double flops;
};

/// Buffer positions per operation (0 is always the entries).
struct Layout {
    int A = 1, P = -1, B = -1, info = -1;
};
inline Layout layout(detail::Op op) {
    using detail::Op;
    switch (op) {
        case Op::potrf:
            return {1, -1, -1, 2};
        case Op::potrs:
            return {1, -1, 2, -1};
        case Op::getrf:
            return {1, 2, -1, 3};
        case Op::getrs:
            return {1, 2, 3, -1};
        case Op::geqrf:
            return {1, 2, -1, -1};
        case Op::gels:
            return {1, 2, 3, 4};
    }
    return {};
}

/// The access modes of the buffers, in layout() order.
inline std::vector<starpu_data_access_mode> modes(detail::Op op) {
    using detail::Op;
    switch (op) {
        case Op::potrf:
            return {STARPU_R, STARPU_RW, STARPU_W};  // entries, A, info
        case Op::potrs:
            return {STARPU_R, STARPU_R, STARPU_RW};  // entries, A, B
        case Op::getrf:
            return {STARPU_R, STARPU_RW, STARPU_W, STARPU_W};  // entries, A, ipiv, info
        case Op::getrs:
            return {STARPU_R, STARPU_R, STARPU_R, STARPU_RW};  // entries, A, ipiv, B
        case Op::geqrf:
            return {STARPU_R, STARPU_RW, STARPU_W};  // entries, A, tau
        case Op::gels:
            return {STARPU_R, STARPU_RW, STARPU_W, STARPU_RW, STARPU_W};  // entries, A, tau, B, info
    }
    return {};
}

/// The variable-size codelet of one operation and precision, model "starfact_vbatched_<op>_<s|d>"
/// (regression on the slice's flops with the per-footprint history, detail::SliceCodelet).
/// Instantiated for float and double.
template <class T>
detail::SliceCodelet& codelet(detail::Op op);

}  // namespace starfact::batched::vdetail
