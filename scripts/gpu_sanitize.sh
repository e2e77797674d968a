#!/usr/bin/env bash
# compute-sanitizer over the GPU test binaries, on the GPU machine, from the repository root with
# bundle/ carried (binaries in bundle/bin, libraries in bundle/lib; see scripts/gpu_run.sh). Each
# (tool, binary) runs the binary's GPU tests at small sizes (a gtest filter per binary) under
#   compute-sanitizer --tool TOOL --error-exitcode=1
# and gets one status, never "PASSED" for a tool that did not run:
#   PASSED   the sanitizer ran, reported 0 errors, and at least one test ran and passed;
#   FAILED   sanitizer errors (its ERROR SUMMARY), failed tests, or a crash;
#   TIMEOUT  the run exceeded SANITIZE_TIMEOUT seconds (its errors so far are in the log);
#   SKIPPED  the binary is not in the bundle, compute-sanitizer is missing, no test matched the
#            filter, or every test skipped itself (no CUDA device or worker): nothing was checked.
# Logs and sanitize_summary.txt go to $OUT (or out/). Exit code: the number of FAILED and TIMEOUT.
# Usage: bash scripts/gpu_sanitize.sh [TOOL...]   (default: memcheck racecheck synccheck)
# Environment:
#   SANITIZE_TIMEOUT   seconds per (tool, binary), default 600
#   SANITIZE_ONLY      a regular expression: only binaries whose name matches it
#   SANITIZE_ALL=1     racecheck and synccheck over the StarPU-level suites too (by default they
#                      run over the kernel-level suites only: the StarPU-level ones call the same
#                      kernels through codelets, are several times slower under these tools, and
#                      memcheck covers them)
#   SANITIZE_FULL=1    racecheck and synccheck with memcheck's filter (whole suites) instead of the
#                      narrower one of the table
#   SANITIZE_API_ERRORS  compute-sanitizer's --report-api-errors (default: explicit; "no" if
#                      StarPU's device probing is reported as errors; the summary shows them)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$root/bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$(bash "$root/scripts/bundle_bin.sh")
tools=("$@")
[ ${#tools[@]} -eq 0 ] && tools=(memcheck racecheck synccheck)
timeout_s=${SANITIZE_TIMEOUT:-600}
api_errors=${SANITIZE_API_ERRORS:-explicit}

# binary | gtest filter (small sizes) | level: kernel (no StarPU) or starpu | the narrower filter
# racecheck and synccheck use (they instrument every shared-memory access and barrier, and whole
# suites ran past a 60 s limit under racecheck: one precision and the tests that reach every
# kernel of ours with shared memory or barriers; SANITIZE_FULL=1 uses the first filter instead).
# Under racecheck on the H100 TstrfMatchesCpu takes 82 s, the batched LU
# SizesAndRightHandSides over 100 s, the batched QR FactorsLikeLapack and NanOrInf tests over 90 s,
# the tile QR kernel tests over 100 s: those are left to memcheck, and the tests below (3-73 s each;
# TstrfNanInput runs the TSTRF panel kernel, the 3 x 3 tile QR grid every QR kernel) reach every
# kernel of ours that uses shared memory or barriers.
# To add a suite, add a line; a binary that is absent is SKIPPED.
table="
test_lu_cuda|*|kernel|*/1.TstrfNanInput*:*/1.GessmMatchesCpu:*/1.SsssmMatchesCpu:*/1.GessmOnTall*
test_qr_cuda|*|kernel|*/1.TileQrOnA3x3GridMatchesCpu
test_batched_lu_cuda|*-*TenThousand*:*LargerThan512*|kernel|*/1.SmallSizesMatchLapack:*/1.BlockedSizesMatchLapack:*/1.NonFinite*:BatchedLuSolve/1.AfterOurFactorization
test_batched_potrf_cuda|*-*TenThousand*|kernel|*/1.SizesAgainstLapack:*/1.NanInOneMatrix:*/1.FactorThenSolve
test_batched_qr_cuda|*|kernel|*/1.Counts
test_vbatched_cuda|*|kernel|*/1.MixedSizesAgainstLapack:*/1.SolvesAgainstLapack
test_batched_api_cuda|*|starpu|*
test_cholesky|*Cuda*|starpu|*Cuda*
test_lu|*CudaForced*|starpu|*CudaForced*
test_qr|*Cuda*|starpu|*Cuda*
test_codelets|*Cuda*|starpu|*Cuda*
test_matrix_kinds|*Cuda|starpu|*Cuda
test_tile_host|*Cuda*:*Gpu*|starpu|*Cuda*:*Gpu*
"

sanitizer=$(command -v compute-sanitizer || true)
[ -z "$sanitizer" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && sanitizer=/usr/local/cuda/bin/compute-sanitizer

# One StarPU home for the run; its bus calibration seeds every test's own home (as gpu_run.sh).
export STARPU_HOME=$(mktemp -d /tmp/starfact-sanitize.XXXXXX)
[ -x "$bin/starfact" ] && "$bin/starfact" info > "$out/sanitize_info.txt" 2>&1
export STARFACT_TEST_BUS_SEED=$STARPU_HOME/.starpu
export STARPU_SILENT=1

summary=$out/sanitize_summary.txt
{
    echo "# compute-sanitizer over the GPU tests: $(date -u +%FT%TZ)"
    echo "# commit: $(cat "$root/bundle/commit.txt" 2>/dev/null || echo unknown)"
    echo "# sanitizer: ${sanitizer:-not found} $([ -n "$sanitizer" ] && "$sanitizer" --version 2>/dev/null | tail -n 1)"
    echo "# gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
    printf "%-10s %-26s %-8s %s\n" tool binary status detail
} > "$summary"

bad=0
report() {  # tool binary status detail
    printf "%-10s %-26s %-8s %s\n" "$1" "$2" "$3" "$4" | tee -a "$summary"
    case "$3" in FAILED|TIMEOUT) bad=$((bad + 1)) ;; esac
}

for tool in "${tools[@]}"; do
    while IFS='|' read -r name filter level narrow; do
        [ -z "$name" ] && continue
        if [ "$tool" != memcheck ] && [ "${SANITIZE_FULL:-0}" != 1 ] && [ -n "$narrow" ]; then filter=$narrow; fi
        if [ -n "${SANITIZE_ONLY:-}" ] && ! [[ $name =~ $SANITIZE_ONLY ]]; then continue; fi
        if [ "$tool" != memcheck ] && [ "$level" = starpu ] && [ "${SANITIZE_ALL:-0}" != 1 ]; then
            report "$tool" "$name" SKIPPED "StarPU-level suite: memcheck only unless SANITIZE_ALL=1"
            continue
        fi
        if [ ! -x "$bin/$name" ]; then
            report "$tool" "$name" SKIPPED "not in $bin"
            continue
        fi
        if [ -z "$sanitizer" ]; then
            report "$tool" "$name" SKIPPED "compute-sanitizer not found"
            continue
        fi
        log=$out/sanitize_${tool}_${name}.log
        start=$(date +%s)
        timeout --signal=KILL "$timeout_s" "$sanitizer" --tool "$tool" --error-exitcode=1 \
            --report-api-errors "$api_errors" --print-limit 20 \
            "$bin/$name" --gtest_filter="$filter" --gtest_brief=0 > "$log" 2>&1
        rc=$?
        secs=$(($(date +%s) - start))
        # memcheck and synccheck end with "ERROR SUMMARY: N errors"; racecheck may only print
        # "RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)". Neither: the tool did not run.
        errors=$(grep -oE "ERROR SUMMARY: [0-9]+ error" "$log" | tail -n 1 | grep -oE "[0-9]+")
        [ -z "$errors" ] && errors=$(grep -oE "RACECHECK SUMMARY: .*\([0-9]+ error" "$log" | tail -n 1 |
                                     grep -oE "\([0-9]+" | tr -d '(')
        passed=$(grep -oE "^\[  PASSED  \] [0-9]+ test" "$log" | grep -oE "[0-9]+" | tail -n 1)
        failed=$(grep -oE "^\[  FAILED  \] [0-9]+ test" "$log" | grep -oE "[0-9]+" | tail -n 1)
        skipped=$(grep -oE "^\[  SKIPPED \] [0-9]+ test" "$log" | grep -oE "[0-9]+" | tail -n 1)
        ran=$(grep -oE "^\[==========\] [0-9]+ tests? from [0-9]+ test suites? ran" "$log" | grep -oE "^\[==========\] [0-9]+" | grep -oE "[0-9]+$" | tail -n 1)
        detail="${secs}s, tests: ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped; sanitizer errors: ${errors:-no summary in the log, so the tool did not finish}"
        first_error=$(grep -m 1 -E "^========= (Invalid|Program hit|Race|Barrier|Error|ERROR|Uninitialized)" "$log")
        if [ $rc -eq 137 ] || [ $rc -eq 124 ]; then
            report "$tool" "$name" TIMEOUT "$detail (limit ${timeout_s}s)"
        elif [ "${ran:-0}" = 0 ]; then
            report "$tool" "$name" SKIPPED "no test matched '$filter' ($detail)"
        elif [ $rc -eq 0 ] && [ "${errors:-x}" = 0 ] && [ "${passed:-0}" -gt 0 ]; then
            report "$tool" "$name" PASSED "$detail"
        elif [ $rc -eq 0 ] && [ "${passed:-0}" = 0 ] && [ "${skipped:-0}" -gt 0 ]; then
            report "$tool" "$name" SKIPPED "every test skipped itself (no GPU?): $detail"
        else
            report "$tool" "$name" FAILED "rc $rc, $detail${first_error:+; first: $first_error}"
        fi
    done <<< "$table"
done
echo "summary: $summary ($bad FAILED or TIMEOUT)"
exit $bad
