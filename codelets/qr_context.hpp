// The CUDA QR kernels' context for the calling worker: its handles, stream and workspace.
#pragma once

#include "codelets/cuda/qr_kernels.hpp"
#include "common/cuda_workers.hpp"

namespace starfact::codelets::detail {

/// Builds the calling CUDA worker's QrContext with a workspace for m x n tiles and inner
/// block ib; work is nullptr when the workspace could not be allocated.
template <class T>
cuda::QrContext qr_context(int m, int n, int ib, cudaStream_t stream = cuda::stream()) {
    cuda::QrContext c{cuda::blas_handle(), cuda::solver_handle(), cuda::solver_params(), stream, nullptr, 0};
    c.work_bytes = cuda::qr_workspace_bytes<T>(c.solver, c.params, m, n, ib);
    c.work = cuda::workspace(c.work_bytes);
    return c;
}

}  // namespace starfact::codelets::detail
