// The fixed-size batched codelet (codelet.cc) as its submission side (tasks.cc) sees it: the
// argument block that every task of a call shares and the codelet of each operation and
// precision. Not installed.
#pragma once

#include "batched/batched.hpp"
#include "batched/detail.hpp"
#include "batched/slice_codelet.hpp"

namespace starfact::batched::detail {

/// What every task of a call shares. `nominal` is the largest slice of the call, so that the
/// slices of one call (which differ by at most one matrix) share one performance-model entry;
/// `flops_per_matrix` gives the regression its size.
struct SliceArgs {
    int m, n, nrhs, lda, ldb;
    Uplo uplo;
    int nominal;
    double flops_per_matrix;
};

/// The codelet of one operation and precision, "batched_<op>" with its model
/// "starfact_batched_<op>_<s|d>"; its buffers, in order, are those of codelet.cc's *_cpu
/// functions. Instantiated for float and double.
template <class T>
SliceCodelet& codelet(Op op);

}  // namespace starfact::batched::detail
