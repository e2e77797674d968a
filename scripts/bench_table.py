#!/usr/bin/env python3
"""Turns benchmark JSON lines (bench_potrf, bench_getrf) from a GPU run into a committed results file.

Usage: scripts/bench_table.py RUN_DIR OUT_PREFIX "COMMAND"
RUN_DIR holds machine.txt and bench_*.jsonl (what scripts/gpu_run.sh writes);
OUT_PREFIX.csv gets one row per measured point with the date, machine, commit and command,
and a Markdown table of the best tile size per order is printed for docs/.
"""
import csv
import json
import pathlib
import sys


def main():
    run, prefix, command = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    meta = {}
    lines = (run / "machine.txt").read_text().splitlines()
    for line in lines:
        if ":" in line and line.split(":", 1)[0] in ("date", "commit"):
            key, value = line.split(":", 1)
            meta[key] = value.strip()
    meta["machine"] = next((l for l in lines if "NVIDIA" in l), "unknown").split(",")[0]
    rows, summaries = [], []
    for path in sorted(run.glob("bench_*.jsonl")):
        config = {}
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec["record"] == "config":
                config = rec
            elif rec["record"] == "point":
                rows.append({
                    "date": meta.get("date"), "machine": meta["machine"], "commit": meta.get("commit"),
                    "command": command, "file": path.name, "bench": config.get("bench", "potrf"),
                    "sched": config.get("sched"),
                    "ncpu": config.get("ncpu"), "ncuda": config.get("ncuda"), "impl": rec["impl"],
                    "n": rec["n"], "nb": rec.get("nb", ""), "ib": rec.get("ib", ""),
                    "schedule": rec.get("schedule", ""), "time_s": f'{rec["time_s"]:.6f}',
                    "tflops": f'{rec["tflops"]:.2f}', "info": rec["info"],
                    "residual": rec.get("probe_residual", rec.get("backward_error", "")),
                })
            elif rec["record"] == "summary":
                summaries.append((path.name, config, rec))
    with open(prefix + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        writer.writerows(rows)
    print(f"{meta['machine']}, {meta.get('date')}, commit {meta.get('commit', '')[:10]}")
    print("| bench | workers | n | best nb | best ib | starfact TFLOP/s | cuSOLVER TFLOP/s | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name, config, s in summaries:
        workers = f'{config.get("ncpu")} CPU + {config.get("ncuda")} CUDA'
        print(f'| {config.get("bench", "potrf")} | {workers} | {s["n"]} | {s["best_nb"]} | {s.get("best_ib", "")} | '
              f'{s["starfact_tflops"]:.1f} | '
              f'{s["cusolver_tflops"]:.1f} | {s["ratio"]:.2f} |')


if __name__ == "__main__":
    main()
