#!/usr/bin/env python3
"""Draw a task trace as a Gantt chart per worker, coloured by kernel, and the scheduler's
predicted time against the measured one for every task.

Usage: scripts/plot_trace.py TRACE.csv [--out PREFIX] [--point K] [--title TEXT]

TRACE.csv comes from `starfact potrf|posv|getrf|gesv|geqrf|gels ... --trace FILE` (columns iter,
task, worker, arch, start_s, end_s, predicted_s, model_s, model, footprint, tiles) or from
`bench_getrf --trace` / `bench_geqrf --trace` (no arch or predictions). The columns before
`task` identify a run (the iteration, or a benchmark point); the last run is drawn unless
--point picks another (0-based, in file order). Writes PREFIX-gantt.png and, when the trace has
predictions, PREFIX-predicted.png (PREFIX defaults to the trace's name without .csv).
"""
import argparse
import collections
import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Panel kernels first, so they keep the same colours in every chart.
ORDER = ["potrf", "getrf", "geqrt", "tstrf", "tsqrt", "lacpy", "trsm", "gessm", "unmqr", "syrk", "gemm", "ssssm",
         "tsmqr"]


def kernel(name):
    """'ssssm_d' -> 'ssssm'."""
    return name.rsplit("_", 1)[0] if name.endswith(("_s", "_d")) else name


def read_runs(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None or "task" not in reader.fieldnames:
            sys.exit(f"{path}: not a trace (no 'task' column)")
        keys = reader.fieldnames[: reader.fieldnames.index("task")]
        runs = collections.OrderedDict()
        for row in reader:
            runs.setdefault(tuple(row[k] for k in keys), []).append(row)
    return keys, runs


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def colours(kernels):
    ordered = [k for k in ORDER if k in kernels] + sorted(k for k in kernels if k not in ORDER)
    cmap = plt.get_cmap("tab20")
    return {k: cmap(i % 20) for i, k in enumerate(ordered)}


def gantt(rows, title, out):
    workers = sorted({int(r["worker"]) for r in rows})
    arch = {int(r["worker"]): r.get("arch") or "" for r in rows}
    col = colours({kernel(r["task"]) for r in rows})
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(workers) + 2.0))
    for r in rows:
        start, end = float(r["start_s"]), float(r["end_s"])
        ax.broken_barh([(start, max(end - start, 1e-9))], (workers.index(int(r["worker"])) - 0.4, 0.8),
                       facecolors=col[kernel(r["task"])], edgecolors="none")
    ax.set_yticks(range(len(workers)))
    ax.set_yticklabels([f"{w} {arch[w]}".strip() for w in workers])
    ax.set_ylabel("worker")
    ax.set_xlabel("time (s)")
    ax.set_ylim(-0.6, len(workers) - 0.4)
    makespan = max(float(r["end_s"]) for r in rows)
    ax.set_xlim(0, makespan)
    ax.invert_yaxis()
    handles = [matplotlib.patches.Patch(color=c, label=k) for k, c in col.items()]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", title="kernel")
    ax.set_title(f"{title}: {len(rows)} tasks, makespan {makespan:.4g} s")
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)


def predicted(rows, title, out):
    pts = collections.defaultdict(list)
    missing = 0
    for r in rows:
        p = number(r.get("predicted_s"))
        measured = float(r["end_s"]) - float(r["start_s"])
        if math.isnan(p) or p <= 0 or measured <= 0:
            missing += 1
            continue
        pts[kernel(r["task"])].append((p, measured))
    if not pts:
        return False
    col = colours(set(pts))
    fig, ax = plt.subplots(figsize=(7, 6))
    lo = min(min(p, m) for v in pts.values() for p, m in v)
    hi = max(max(p, m) for v in pts.values() for p, m in v)
    for k, v in pts.items():
        ratios = sorted(m / p for p, m in v)
        ax.scatter([p for p, _ in v], [m for _, m in v], s=10, color=col[k],
                   label=f"{k} (median measured/predicted {ratios[len(ratios) // 2]:.2f})")
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8, label="measured = predicted")
    ax.plot([lo, hi], [2 * lo, 2 * hi], color="grey", linewidth=0.5, linestyle="--", label="2x")
    ax.plot([lo, hi], [lo / 2, hi / 2], color="grey", linewidth=0.5, linestyle="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted by the scheduler (s)")
    ax.set_ylabel("measured (s)")
    ax.set_title(f"{title}: {sum(len(v) for v in pts.values())} tasks with a prediction, {missing} without")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--out", help="prefix of the PNG files (default: the trace's name without .csv)")
    ap.add_argument("--point", type=int, default=-1, help="which run to draw, 0-based (default: the last)")
    ap.add_argument("--title", help="chart title (default: the run's key columns)")
    args = ap.parse_args()
    keys, runs = read_runs(args.trace)
    if not runs:
        sys.exit(f"{args.trace}: no tasks")
    key = list(runs)[args.point]
    rows = runs[key]
    title = args.title or (", ".join(f"{k}={v}" for k, v in zip(keys, key)) or os.path.basename(args.trace))
    prefix = args.out or os.path.splitext(args.trace)[0]
    gantt(rows, title, prefix + "-gantt.png")
    print(prefix + "-gantt.png")
    if predicted(rows, title, prefix + "-predicted.png"):
        print(prefix + "-predicted.png")
    else:
        print("no predictions in this trace (a scheduler that does not predict, or no calibrated model): "
              "no predicted-vs-measured chart", file=sys.stderr)


if __name__ == "__main__":
    main()
