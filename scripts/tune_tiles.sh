#!/usr/bin/env bash
# The tuning sweep behind tile_algorithms/tile_sizes.cc: on the GPU machine, from the
# repository root with bundle/ carried, runs bench_potrf, bench_getrf and bench_geqrf over tile
# sizes (and inner blocks) at each order, starting from host memory with every worker StarPU
# finds, as the command line does, with cuSOLVER in the same process. JSON lines in $OUT/tune/,
# packed into $OUT/tune.tar.gz; scripts/tile_table.py turns them into the committed CSV and the
# table's rows.
# Environment (each a bench's options, defaults below): TUNE_POTRF, TUNE_GETRF, TUNE_GEQRF;
# TUNE_STEPS (default "potrf getrf geqrf"); TUNE_COMMON, the options every bench gets (default
# "--start host --workers all --warmup 1 --reps 3").
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/out}
dir=$out/tune
mkdir -p "$dir"
export LD_LIBRARY_PATH=$root/bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$(bash "$root/scripts/bundle_bin.sh")
export STARPU_HOME=${STARPU_HOME:-$(mktemp -d /tmp/starfact-tune.XXXXXX)}
export STARPU_SILENT=1
read -r -a common <<< "${TUNE_COMMON:---start host --workers all --warmup 1 --reps 3}"
potrf=${TUNE_POTRF:---sizes 8192,16384,32768,46000 --nb 1024,2048,4096}
getrf=${TUNE_GETRF:---sizes 8192,16384,32768 --nb 4096,8192,16384 --ib 1024 --trtri 1}
geqrf=${TUNE_GEQRF:---sizes 8192,16384,32768 --nb 2048,4096,8192 --ib 256 --tree auto}
{ date -u +%FT%TZ; cat "$root/bundle/commit.txt" 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; } \
    > "$dir/machine.txt" 2>&1
for step in ${TUNE_STEPS:-potrf getrf geqrf}; do
    args=${!step}
    # shellcheck disable=SC2086
    "$bin/bench_$step" "${common[@]}" $args --json "$dir/$step.jsonl" > "$dir/$step.txt" 2>&1
    echo "bench_$step rc=$?" >&2
    grep '"summary"' "$dir/$step.jsonl" >&2
done
tar czf "$out/tune.tar.gz" -C "$out" tune && rm -rf "$dir"
