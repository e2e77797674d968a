#!/usr/bin/env bash
# Sets everything up (Debian packages, StarPU) and builds starfact with CMake into build/
# (or $STARFACT_BUILD_DIR). Extra arguments go to the CMake configure step.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=$(bash "$root/scripts/install_deps.sh")
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PATH=$PATH:/usr/local/cuda/bin
build=${STARFACT_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >&2
cmake --build "$build" -j"$(nproc)" >&2
echo "$build"
