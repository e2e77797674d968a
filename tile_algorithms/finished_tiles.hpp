// Out-of-core hints for tile Cholesky: once the matrix is larger than the memory
// StarPU may use on the GPUs, each tile is announced finished (starpu_data_wont_use) right after
// its last task of the factorization is submitted. StarPU then writes it back when the bus is
// idle and evicts it first. Without the hint its eviction order is least recently used, which
// in a right-looking factorization picks the trailing tiles the next step reads, ahead of the
// panel tiles that step k just used and that no task reads again.
#pragma once

#include <starpu.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/runtime.hpp"

namespace starfact::detail {

class FinishedTiles {
public:
    /// On when `bytes` (what the factorization keeps on the GPUs) exceeds the memory StarPU may
    /// use there (Runtime::cuda_memory_bytes: every GPU's, or STARPU_LIMIT_CUDA_MEM); off
    /// without a GPU, and off when STARFACT_OOC_HINTS=0.
    explicit FinishedTiles(std::int64_t bytes) {
        const char* env = std::getenv("STARFACT_OOC_HINTS");
        if (env != nullptr && std::strcmp(env, "0") == 0) return;
        const std::int64_t gpu = Runtime::cuda_memory_bytes();
        on_ = gpu > 0 && bytes > gpu;
    }
    /// The tasks submitted so far are the last to use h in this factorization.
    void done(starpu_data_handle_t h) const {
        if (on_) starpu_data_wont_use(h);
    }

private:
    bool on_ = false;
};

}  // namespace starfact::detail
