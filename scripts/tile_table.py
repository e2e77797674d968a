#!/usr/bin/env python3
"""Turns the JSON lines of scripts/tune_tiles.sh into one CSV row per (operation, order, tile
sizes): median time, TFLOP/s, cuSOLVER's TFLOP/s on the same matrix, and whether it was the best
at that order. Usage: scripts/tile_table.py DIR_OR_JSONL... --date D --machine M --commit C
--command "..." > bench/results/<date>-<machine>-tile-sweep.csv"""
import argparse
import glob
import json
import os
import sys

p = argparse.ArgumentParser()
p.add_argument("inputs", nargs="+")
p.add_argument("--date", required=True)
p.add_argument("--machine", required=True)
p.add_argument("--commit", required=True)
p.add_argument("--command", required=True)
a = p.parse_args()
files = []
for i in a.inputs:
    files += sorted(glob.glob(os.path.join(i, "*.jsonl"))) if os.path.isdir(i) else [i]
print("date,machine,commit,command,op,m,n,nb,ib,workers,start,median_s,tflops,cusolver_tflops,ratio,best")
for f in files:
    op = os.path.basename(f).split(".")[0]
    rows = [json.loads(l) for l in open(f) if l.startswith("{")]
    cus = {(r.get("m", r["n"]), r["n"]): r["tflops"] for r in rows if r.get("impl") == "cusolver"}
    pts = [r for r in rows if r.get("impl") == "starfact"]
    best = {}
    for r in pts:
        k = (r.get("m", r["n"]), r["n"])
        if k not in best or r["time_s"] < best[k]["time_s"]:
            best[k] = r
    for r in pts:
        k = (r.get("m", r["n"]), r["n"])
        c = cus.get(k, float("nan"))
        print(f'{a.date},{a.machine},{a.commit},"{a.command}",{op},{k[0]},{k[1]},{r["nb"]},{r.get("ib", "")},'
              f'{r.get("workers", "")},{r.get("start", "")},{r["time_s"]:.6f},{r["tflops"]:.2f},{c:.2f},'
              f'{r["tflops"] / c:.3f},{int(best[k] is r)}')
