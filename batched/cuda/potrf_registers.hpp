// The register Cholesky kernel of potrf.cu (orders up to 32, one pass over memory) as used by
// vpotrf.cu for variable-size batches whose largest order is at most kVPotrfRegisterMax: the
// same kernel, instantiated to read each matrix's own order and leading dimension (not installed).
#pragma once

#include "batched/cuda/kernels.hpp"

namespace starfact::batched::cuda {

/// The largest nmax that vpotrf hands to vpotrf_registers (potrf.cu's register bound).
constexpr int kVPotrfRegisterMax = 32;

/// vpotrf's contract (vbatched_kernels.hpp) for nmax <= kVPotrfRegisterMax, in one launch: a
/// group of lanes per matrix (sized for nmax), which stops after its own matrix's last column or
/// first failing pivot. info[b] is written for every b < count.
template <class T>
void vpotrf_registers(const Launch& launch, Uplo uplo, int nmax, const int* n, T* const* A, const int* lda, int* info,
                      int count);

}  // namespace starfact::batched::cuda
