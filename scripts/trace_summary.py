#!/usr/bin/env python3
"""Summarise a task trace written by `bench_getrf --trace` / `bench_geqrf --trace`.

Usage: scripts/trace_summary.py TRACE.csv

For every point (the columns before `task`) it prints the makespan, per task kind the count,
total, median, min and max duration, how long 0, 1, 2, ... tasks ran at once, and how long at
least one panel task (getrf, tstrf, geqrt, tsqrt, potrf) was running.
"""
import collections
import csv
import statistics
import sys

PANEL = ("getrf", "tstrf", "geqrt", "tsqrt", "potrf")


def summarise(rows):
    ends = [float(r["end_s"]) for r in rows]
    print(f"  makespan {max(ends):.4f} s, {len(rows)} tasks")
    by_kind = collections.defaultdict(list)
    for r in rows:
        by_kind[r["task"]].append(float(r["end_s"]) - float(r["start_s"]))
    for kind, d in sorted(by_kind.items()):
        print(f"  {kind:10s} {len(d):6d}  sum {sum(d):8.4f}  median {statistics.median(d):.5f}"
              f"  min {min(d):.5f}  max {max(d):.5f}")
    events = []
    for r in rows:
        panel = r["task"].startswith(PANEL)
        events.append((float(r["start_s"]), 1, panel))
        events.append((float(r["end_s"]), -1, panel))
    events.sort()
    running, panels, last = 0, 0, 0.0
    at_once = collections.Counter()
    panel_time = 0.0
    for t, delta, panel in events:
        at_once[running] += t - last
        if panels > 0:
            panel_time += t - last
        last = t
        running += delta
        if panel:
            panels += delta
    print("  time with k tasks running: " + ", ".join(f"{k}: {v:.4f}" for k, v in sorted(at_once.items())))
    print(f"  time with a panel task running: {panel_time:.4f} s")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], newline="") as f:
        reader = csv.DictReader(f)
        key_fields = reader.fieldnames[: reader.fieldnames.index("task")]
        points = collections.defaultdict(list)
        for r in reader:
            points[tuple(r[k] for k in key_fields)].append(r)
    for key, rows in points.items():
        print(", ".join(f"{k}={v}" for k, v in zip(key_fields, key)))
        summarise(rows)


if __name__ == "__main__":
    main()
