#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with bundle/ carried: the GPU test suite,
# a CLI check and the Cholesky benchmark against cuSOLVER. Results go to $OUT (or out/).
# Usage: bash scripts/gpu_run.sh [tests] [cli] [bench] [bench-cpu] [bench-lu] [bench-args...]
#   (default: tests cli bench). bench: Cholesky, GPU workers only (STARPU_NCPU=0), with
#   bench-args; bench-cpu: every CPU core as a worker too, at n = 40000; bench-lu: tile LU,
#   GPU workers only, with the arguments in $BENCH_LU_ARGS (and a task trace of each point's
#   last run in trace_getrf.csv when BENCH_LU_TRACE=1); bench-kernels: the CUDA LU kernels
#   one at a time (bench_lu_kernels) with $BENCH_KERNEL_ARGS; bench-qr: tile QR, GPU workers
#   only, with $BENCH_QR_ARGS; batched: the batched benchmarks (bench_batched_getrf, _potrf,
#   _geqrf, each with $BENCH_BATCHED_ARGS) and MAGMA's batched LU through torch
#   (scripts/bench_batched_magma.py); accuracy: the tile-LU accuracy study on the GPU with
#   $ACCURACY_ARGS (CSV per precision); batched-models: calibrates the batched codelets' models
#   into $OUT/h100 and runs batched potrf/getrf/geqrf on every worker with them and without
#   (traces and JSON in $OUT).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$root/bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$(bash "$root/scripts/bundle_bin.sh")
steps=()
bench_args=()
for a in "$@"; do
    case "$a" in tests|cli|bench|bench-cpu|bench-lu|bench-kernels|bench-qr|batched|batched-models|accuracy) steps+=("$a") ;;
    *) bench_args+=("$a") ;; esac
done
[ ${#steps[@]} -eq 0 ] && steps=(tests cli bench)

# One StarPU home for the run; its bus calibration seeds every test's own home.
export STARPU_HOME=$(mktemp -d /tmp/starfact-home.XXXXXX)
{
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $(cat "$root/bundle/commit.txt" 2>/dev/null)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nproc
    ldd "$bin/starfact" | grep -E "not found|starpu|openblas|lapacke|hwloc|fmt|cublas|cusolver"
} > "$out/machine.txt" 2>&1
"$bin/starfact" info > "$out/info.txt" 2>&1
export STARFACT_TEST_BUS_SEED=$STARPU_HOME/.starpu

status=0
for step in "${steps[@]}"; do
    case "$step" in
    tests)
        for t in "$bin"/test_*; do
            name=$(basename "$t")
            echo "== $name" | tee -a "$out/tests.txt"
            "$t" --gtest_brief=0 > "$out/$name.log" 2>&1
            rc=$?
            tail -n 5 "$out/$name.log" | tee -a "$out/tests.txt"
            grep -E "^\[  SKIPPED \]|^\[  FAILED  \]" "$out/$name.log" | sort | uniq -c | tee -a "$out/tests.txt"
            [ $rc -ne 0 ] && status=1
        done
        ;;
    cli)
        "$bin/starfact" potrf -n 8192 --nb 1024 --check --niter 3 > "$out/cli_potrf.txt" 2>&1 || status=1
        "$bin/starfact" posv -n 8192 --nb 1024 --nrhs 16 --check --format json > "$out/cli_posv.json" 2>&1 || status=1
        "$bin/starfact" potrf -n 4096 --nb 512 --uplo U --prec s --check > "$out/cli_potrf_s_upper.txt" 2>&1 || status=1
        "$bin/starfact" gesv -n 8192 --nb 1024 --nrhs 4 --check --niter 2 > "$out/cli_gesv.txt" 2>&1 || status=1
        "$bin/starfact" getrf -m 12000 -n 6000 --nb 1024 --check > "$out/cli_getrf_tall.txt" 2>&1 || status=1
        ;;
    bench)
        STARPU_NCPU=0 "$bin/bench_potrf" --json "$out/bench_potrf.jsonl" "${bench_args[@]}" \
            > "$out/bench_potrf.txt" 2>&1 || status=1
        ;;
    bench-lu)
        # shellcheck disable=SC2086
        trace_args=()
        [ "${BENCH_LU_TRACE:-0}" = 1 ] && trace_args=(--trace "$out/trace_getrf.csv")
        STARPU_NCPU=0 "$bin/bench_getrf" --json "$out/bench_getrf.jsonl" ${BENCH_LU_ARGS:-} "${trace_args[@]}" \
            > "$out/bench_getrf.txt" 2>&1 || status=1
        ;;
    bench-kernels)
        # shellcheck disable=SC2086
        "$bin/bench_lu_kernels" --json "$out/bench_lu_kernels.jsonl" ${BENCH_KERNEL_ARGS:-} \
            > "$out/bench_lu_kernels.txt" 2>&1 || status=1
        ;;
    bench-qr)
        # shellcheck disable=SC2086
        STARPU_NCPU=0 "$bin/bench_geqrf" --json "$out/bench_geqrf.jsonl" ${BENCH_QR_ARGS:-} \
            > "$out/bench_geqrf.txt" 2>&1 || status=1
        ;;
    batched)
        for op in getrf potrf geqrf; do
            [ -x "$bin/bench_batched_$op" ] || { echo "bench_batched_$op: not in the bundle" >> "$out/batched.txt"; continue; }
            # shellcheck disable=SC2086
            "$bin/bench_batched_$op" --json "$out/bench_batched_$op.jsonl" ${BENCH_BATCHED_ARGS:-} \
                > "$out/bench_batched_$op.txt" 2>&1 || status=1
        done
        python3 "$root/scripts/bench_batched_magma.py" --out "$out/bench_batched_magma.jsonl" \
            > "$out/bench_batched_magma.txt" 2>&1 || status=1
        ;;
    accuracy)
        for p in d s; do
            # shellcheck disable=SC2086
            STARPU_NCPU=0 "$bin/starfact" accuracy --prec $p --seed 2026 ${ACCURACY_ARGS:-} \
                --csv "$out/accuracy-gpu-$p.csv" > "$out/accuracy-gpu-$p.txt" 2>&1 || status=1
        done
        ;;
    batched-models)
        # The batched codelets' models (docs/perfmodels.md), CPU and GPU workers, host name fixed
        # to h100 as perfmodels/h100; then the same batches with those models and with none (an empty home),
        # every worker on, traced: which slices went to the GPU and which to CPU cores.
        home=$out/h100
        STARPU_HOSTNAME=h100 timeout "${CALIBRATE_TIMEOUT:-240}" "$bin/starfact" calibrate --home "$home" \
            --ops batched-getrf,batched-potrf,batched-geqrf --batch-n ${BATCHED_MODEL_N:-16,32,64,128} \
            --batch-count ${BATCHED_MODEL_COUNT:-512} --prec d > "$out/calibrate_batched.txt" 2>&1
        echo "exit $?" >> "$out/calibrate_batched.txt"
        none=$(mktemp -d /tmp/starfact-none.XXXXXX)
        cp -r "$STARPU_HOME/.starpu" "$none/" 2>/dev/null && rm -rf "$none/.starpu/sampling/codelets"
        for spec in "potrf 64 20000" "getrf 128 5000" "geqrf 128 5000"; do
            set -- $spec
            for models in calibrated none; do
                h=$home
                [ $models = none ] && h=$none
                STARPU_HOME=$h STARPU_HOSTNAME=h100 STARPU_SCHED=dmda "$bin/starfact" batched --op "$1" -n "$2" \
                    --count "$3" --niter 3 --format json --trace "$out/trace_batched_${1}_$models.csv" \
                    > "$out/batched_${1}_$models.json" 2>&1 || status=1
            done
        done
        ;;
    bench-cpu)
        "$bin/bench_potrf" --sizes 40000 --nb 2048 --warmup 6 --json "$out/bench_potrf_cpu.jsonl" \
            > "$out/bench_potrf_cpu.txt" 2>&1 || status=1
        ;;
    esac
done
cp -r "$STARPU_HOME/.starpu/sampling/codelets" "$out/perfmodels" 2>/dev/null
exit $status
