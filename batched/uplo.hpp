// The triangle that Cholesky reads and writes, one type for the whole batched module: the
// public API (batched/batched.hpp, batched/vbatched.hpp) and the CUDA kernels below it
// (batched/cuda/kernels.hpp), which include this header rather than the public one.
#pragma once

namespace starfact::batched {

enum class Uplo { lower, upper };

}  // namespace starfact::batched
