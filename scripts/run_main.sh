#!/usr/bin/env bash
# The main job: set everything up, build, then solve a random SPD system by tile Cholesky on
# every CPU core and GPU StarPU finds, with its check. Extra arguments go to `starfact posv`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(bash "$root/scripts/build.sh")
n=4096
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then n=16384; fi
"$build/bin/starfact" info
exec "$build/bin/starfact" posv -n "$n" --nrhs 16 --check --niter 3 "$@"
