// The device side of the variable-size codelet (batched/vcodelet.cc): from a packed slice's
// entries, the per-matrix sizes and pointer arrays that the variable-size kernels take.
#include <cuda_runtime.h>

#include "batched/cuda/common.cuh"
#include "batched/cuda/vbatched_kernels.hpp"

namespace starfact::batched::cuda {
namespace {

__global__ void vslice_kernel(const VSliceEntry* e, int count, char* A, char* B, std::size_t a_elem, char* P,
                              std::size_t p_elem, int* m, int* n, int* ld, void** pa, void** pb, void** pp) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= count) return;
    const VSliceEntry x = e[b];
    if (m != nullptr) m[b] = x.m;
    if (n != nullptr) n[b] = x.n;
    if (ld != nullptr) ld[b] = x.m > 1 ? x.m : 1;
    if (pa != nullptr) pa[b] = A + x.a * static_cast<long long>(a_elem);
    if (pb != nullptr) pb[b] = B + x.b * static_cast<long long>(a_elem);
    if (pp != nullptr) pp[b] = P + x.p * static_cast<long long>(p_elem);
}

}  // namespace

void vslice_arrays(const VSliceEntry* entries, int count, char* A, char* B, std::size_t a_elem, char* P,
                   std::size_t p_elem, int* m, int* n, int* ld, void** pa, void** pb, void** pp, cudaStream_t stream) {
    if (count <= 0) return;
    vslice_kernel<<<static_cast<unsigned>(detail::ceil_div(count, 128)), 128, 0, stream>>>(
        entries, count, A, B, a_elem, P, p_elem, m, n, ld, pa, pb, pp);
    detail::check_launch("vslice_arrays");
}

}  // namespace starfact::batched::cuda
