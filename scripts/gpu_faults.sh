#!/usr/bin/env bash
# The GPU-side faults of docs/testing.md ("Faults"), on the GPU machine, from the repository
# root with bundle/ carried (see scripts/gpu_run.sh):
#   1. GPU memory far below the matrix: STARPU_LIMIT_CUDA_MEM=256 (MiB) with a 2 GiB matrix
#      (n = 16384, double) for potrf, getrf and geqrf, GPU workers only (STARPU_NCPU=0), checked;
#      the same run without the limit gives the time it is compared with.
#   2. No GPU visible (CUDA_VISIBLE_DEVICES=) and STARPU_NCUDA=0: the CPU path, checked, ncuda 0.
#   3. The CLI fault suite (bundle/bin/test_faults: no worker, no GPU, SIGINT/SIGKILL) on this
#      machine.
# Prints one line per check (PASS, FAIL or SKIP with the numbers) and a summary; logs and
# faults_summary.txt go to $OUT (or out/). Exit code: the number of FAILs.
# Environment: FAULTS_N (default 16384), FAULTS_NB (default 1024), FAULTS_LIMIT_MIB (default 256).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$root/bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$(bash "$root/scripts/bundle_bin.sh")
n=${FAULTS_N:-16384}
nb=${FAULTS_NB:-1024}
limit=${FAULTS_LIMIT_MIB:-256}
summary=$out/faults_summary.txt
export STARPU_HOME=$(mktemp -d /tmp/starfact-faults.XXXXXX)
{
    echo "# GPU faults: $(date -u +%FT%TZ), commit $(cat "$root/bundle/commit.txt" 2>/dev/null || echo unknown)"
    echo "# gpu: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"
} > "$summary"
fails=0
line() {  # status text
    echo "$1 $2" | tee -a "$summary"
    [ "$1" = FAIL ] && fails=$((fails + 1))
}

# The last result record of a JSON-lines log as "time_s residual status ncuda info" (or "" if none).
fields() {
    python3 - "$1" <<'EOF'
import json, sys
rows = []
for line in open(sys.argv[1], errors="replace"):
    line = line.strip()
    if line.startswith("{"):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("record") == "result" and j.get("iter") != "median":
            rows.append(j)
if rows:
    r = rows[-1]
    print(r.get("time_s"), r.get("residual"), r.get("status"), r.get("ncuda"), r.get("info"))
EOF
}

# run NAME ENV... -- ARGS...: runs starfact with --check --format json; sets rc and f (fields).
run() {
    local name=$1
    shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" timeout 600 "$bin/starfact" "$@" --check --format json > "$out/faults_$name.log" 2>&1
    rc=$?
    f=$(fields "$out/faults_$name.log")
}

if [ ! -x "$bin/starfact" ]; then
    line SKIP "everything: $bin/starfact not found (run scripts/make_bundle.sh and carry bundle/)"
    exit 1
fi
"$bin/starfact" info > "$out/faults_info.txt" 2>&1

# 1. GPU memory limited far below the matrix.
bytes=$((n * n * 8))
for op in potrf getrf geqrf; do
    run "${op}_unlimited" STARPU_NCPU=0 -- "$op" -n "$n" --nb "$nb" --seed 7
    read -r t0 r0 s0 c0 i0 <<< "$f"
    run "${op}_limit${limit}" STARPU_NCPU=0 STARPU_LIMIT_CUDA_MEM="$limit" -- "$op" -n "$n" --nb "$nb" --seed 7
    read -r t1 r1 s1 c1 i1 <<< "$f"
    what="$op n=$n nb=$nb ($((bytes >> 20)) MiB) with STARPU_LIMIT_CUDA_MEM=$limit"
    if [ $rc -eq 0 ] && [ "${s1:-}" = ok ] && [ "${c1:-0}" != 0 ]; then
        ratio=$(python3 -c "print(f'{$t1 / $t0:.2f}')" 2>/dev/null || echo "?")
        line PASS "$what: time ${t1}s (unlimited ${t0:-?}s, x$ratio), residual $r1, info $i1, ncuda $c1"
    else
        line FAIL "$what: rc $rc, status ${s1:-none}, residual ${r1:-none}, ncuda ${c1:-none}, time ${t1:-none}s (see faults_${op}_limit${limit}.log)"
    fi
done

# 2. No GPU visible, or no CUDA worker: the CPU path.
for setting in "CUDA_VISIBLE_DEVICES=" "STARPU_NCUDA=0"; do
    for op in potrf getrf geqrf; do
        tag=$(echo "$setting" | tr -d '=' | tr 'A-Z' 'a-z')
        run "${op}_${tag}" "$setting" -- "$op" -n 3000 --nb 256 --seed 7
        read -r t s_res st c i <<< "$f"
        if [ $rc -eq 0 ] && [ "${st:-}" = ok ] && [ "${c:-x}" = 0 ]; then
            line PASS "$op n=3000 with $setting: CPU path, time ${t}s, residual $s_res"
        else
            line FAIL "$op n=3000 with $setting: rc $rc, status ${st:-none}, ncuda ${c:-none} (see faults_${op}_${tag}.log)"
        fi
    done
done
# A GPU-only operation must refuse clearly without a GPU: add its command line here when one exists,
# e.g. gpu_only=("batched ..."); each must exit nonzero, by its own message, not by a signal.
gpu_only=()
for cmd in "${gpu_only[@]}"; do
    # shellcheck disable=SC2086
    CUDA_VISIBLE_DEVICES= timeout 120 "$bin/starfact" $cmd > "$out/faults_gpu_only.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ -s "$out/faults_gpu_only.log" ]; then
        line PASS "'$cmd' without a GPU: exit $rc, $(tail -n 1 "$out/faults_gpu_only.log")"
    else
        line FAIL "'$cmd' without a GPU: exit $rc"
    fi
done

# 3. The CLI fault suite on this machine.
if [ -x "$bin/test_faults" ]; then
    export STARFACT_TEST_BUS_SEED=$STARPU_HOME/.starpu
    "$bin/test_faults" > "$out/faults_test_faults.log" 2>&1
    rc=$?
    counts=$(grep -E "^\[  (PASSED  |FAILED  |SKIPPED )\]" "$out/faults_test_faults.log" | grep -v "listed below" | tr '\n' ' ')
    if [ $rc -eq 0 ]; then line PASS "test_faults: $counts"; else line FAIL "test_faults: rc $rc, $counts"; fi
else
    line SKIP "test_faults: not in $bin"
fi

echo "summary: $fails FAIL ($summary)" | tee -a "$summary"
exit $fails
