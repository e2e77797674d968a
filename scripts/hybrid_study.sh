#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with bundle/ carried: the command line as
# a user runs it (defaults, every worker StarPU finds) against the GPU workers alone
# (STARPU_NCPU=0), for each operation, precision and order given, first with no performance
# models (a fresh STARPU_HOME holding only the bus calibration) and then again in the same home
# with the models the first run calibrated. Every iteration's row is kept (JSON lines).
# Usage: bash scripts/hybrid_study.sh OP:PREC:N[:EXTRA] ...   e.g. potrf:d:32768 posv:d:16384:--nrhs=16
#   (EXTRA: options, '=' standing for spaces; '@' for this run's trace file, e.g. potrf:d:32768:--trace=@)
# Environment: HYBRID_NITER (default 4), HYBRID_TIMEOUT (seconds per command, default 150),
# HYBRID_VARIANTS (space-separated "label=ENV=VALUE,ENV=VALUE" lists; default: "all= gpu=STARPU_NCPU=0"),
# HYBRID_TAG (default hybrid). Results: $OUT/$HYBRID_TAG/<op>-<prec>-<n>-<variant>-<fresh|calibrated>.jsonl
# (+ .err, .trace.csv), packed into $OUT/$HYBRID_TAG.tar.gz, with a summary table in $OUT/$HYBRID_TAG.txt.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/out}
tag=${HYBRID_TAG:-hybrid}
dir=$out/$tag
mkdir -p "$dir"
export LD_LIBRARY_PATH=$root/bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$(bash "$root/scripts/bundle_bin.sh")
niter=${HYBRID_NITER:-4}
limit=${HYBRID_TIMEOUT:-150}
read -r -a variants <<< "${HYBRID_VARIANTS:-all= gpu=STARPU_NCPU=0}"

# One bus calibration for every home.
bus=$(mktemp -d /tmp/starfact-bus.XXXXXX)
STARPU_HOME=$bus "$bin/starfact" info > "$dir/info.txt" 2>&1
{ date -u +%FT%TZ; cat "$root/bundle/commit.txt" 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; } \
    > "$dir/machine.txt" 2>&1

for spec in "$@"; do
    IFS=: read -r op prec n extra <<< "$spec"
    for v in "${variants[@]}"; do
        label=${v%%=*}
        envs=${v#*=}
        home=$(mktemp -d /tmp/starfact-home.XXXXXX)
        cp -r "$bus/.starpu" "$home/" 2>/dev/null
        rm -rf "$home/.starpu/sampling/codelets"
        for phase in fresh calibrated; do
            name=$op-$prec-$n-$label-$phase
            args=${extra//=/ }
            args=${args//@/$dir/$name.trace.csv}
            start=$(date +%s%N)
            # shellcheck disable=SC2086
            env STARPU_HOME="$home" STARPU_SILENT=1 ${envs//,/ } timeout "$limit" \
                "$bin/starfact" "$op" -n "$n" --prec "$prec" --niter "$niter" --format json $args \
                > "$dir/$name.jsonl" 2> "$dir/$name.err"
            rc=$?
            wall=$(( ($(date +%s%N) - start) / 1000000 ))
            echo "{\"record\": \"wall\", \"rc\": $rc, \"wall_s\": $wall.0e-3}" >> "$dir/$name.jsonl"
            echo "$name rc=$rc wall=${wall} ms" >&2
        done
        rm -rf "$home"
    done
done

python3 - "$dir" > "$out/$tag.txt" <<'EOF'
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    rows = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    its = [r for r in rows if r.get("record") == "result" and r.get("iter") != "median"]
    wall = [r for r in rows if r.get("record") == "wall"]
    cfg = [r for r in rows if r.get("record") == "config"]
    g = " ".join(f"{r['gflops'] / 1000:.1f}" for r in its)
    nb = cfg[0].get("nb") if cfg else "?"
    w = wall[0] if wall else {}
    print(f"{os.path.basename(path)[:-6]:40s} nb {nb!s:6s} TFLOP/s per iter: {g:40s} rc {w.get('rc')} wall {w.get('wall_s', 0):.1f} s")
EOF
cat "$out/$tag.txt"
tar czf "$out/$tag.tar.gz" -C "$out" "$tag" && rm -rf "$dir"
