#!/usr/bin/env bash
# Sets everything up, builds, and runs the whole test suite with CTest (CUDA tests skip
# visibly where there is no GPU; scripts/gpu_run.sh runs them on the GPU machine), then builds and
# runs examples/ against an installed package (scripts/build_examples.sh). Then builds
# the CPU suite with AddressSanitizer + UndefinedBehaviorSanitizer into build-asan/ and runs
# it too, unless STARFACT_SKIP_SANITIZERS=1. Leak detection is off: LeakSanitizer reports
# allocations StarPU's runtime keeps until exit (no starfact frame in them).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(bash "$root/scripts/build.sh")
# Several tests compare a task path with a host path (or with LAPACK) bit for bit. On CPUs with
# AVX-512, OpenBLAS's runtime-selected kernels round differently in threaded and unthreaded
# calls, so the suite pins one x86-64 kernel family (unless the caller chose one).
if [ "$(uname -m)" = x86_64 ]; then export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}; fi
(cd "$build" && ctest --output-on-failure -j2 --timeout 900)
# The examples, built against an installed package (not the build tree) and run.
bash "$root/scripts/build_examples.sh" "$build"
if [ "${STARFACT_SKIP_SANITIZERS:-0}" != 1 ]; then
    asan=$(STARFACT_BUILD_DIR="$root/build-asan" bash "$root/scripts/build.sh" -DCMAKE_BUILD_TYPE=Debug \
           -DSTARFACT_CUDA=OFF -DSTARFACT_SANITIZE=ON)
    (cd "$asan" && ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
        ctest --output-on-failure -j2 --timeout 900)
fi
