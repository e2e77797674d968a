// Codelets never throw: a failing CUDA, cuBLAS, cuSOLVER or allocation call inside a task is
// recorded here, and the algorithm reports it as a RuntimeError once its tasks complete.
#pragma once

#include <string>

namespace starfact {

void record_kernel_error(const char* what, long code);
/// The first error recorded since the last call ("" when none); clears it.
std::string take_kernel_error();
/// Throws RuntimeError if a kernel error was recorded.
void throw_if_kernel_error();

}  // namespace starfact
