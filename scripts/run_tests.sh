#!/usr/bin/env bash
# Sets everything up, builds, and runs the whole test suite with CTest (CUDA tests skip
# visibly where there is no GPU; scripts/gpu_run.sh runs them on the GPU machine).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(bash "$root/scripts/build.sh")
(cd "$build" && ctest --output-on-failure -j2 --timeout 900)
