// Batched potrf kernels (issue 5): being written.
#include "batched/cuda/common.cuh"
