#!/usr/bin/env python3
"""Plots a `starfact accuracy --csv FILE` result as PNG files: the paper's Figure 8 and more.

  <out>/<prefix>-ratio-<prec>-<kind>.png    residual of tile LU / residual of LAPACK (`ratio`, log)
                                             against tiles per row t (log), one curve per order N
  <out>/<prefix>-growth-<prec>-<kind>.png   growth factor max|U|/max|A| of tile LU against t, one
                                             curve per N, partial pivoting's on the same matrix dashed
  <out>/<prefix>-refine-<prec>-<kind>.png   backward error (exact residual) of the tile LU solution and
                                             after iterative refinement, against t, for a few orders

Needs matplotlib (pip install matplotlib); the starfact command line does not.
Usage: python3 scripts/plot_accuracy.py results.csv [--out docs/img] [--prefix accuracy]
                                        [--prec d] [--kind uniform] [--title-note TEXT]
"""
import argparse
import collections
import csv
import os
import sys


def read_rows(path):
    with open(path, newline="") as f:
        lines = [line for line in f if line.strip() and not line.startswith("#")]
    return list(csv.DictReader(lines))


def curves(rows, key):
    """{(N, matrix): [(t, value), ...]} sorted by t."""
    out = collections.defaultdict(list)
    for r in rows:
        out[(int(r["N"]), int(r["matrix"]))].append((int(r["t"]), float(r[key])))
    return {k: sorted(v) for k, v in sorted(out.items())}


def label(n, matrix, matrices):
    return f"N = {n}" + (f" #{matrix}" if matrices > 1 else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--out", default="docs/img")
    ap.add_argument("--prefix", default="accuracy")
    ap.add_argument("--prec", default="d", choices=["d", "s"])
    ap.add_argument("--kind", default="uniform")
    ap.add_argument("--title-note", default="", help="appended to the titles (e.g. the machine)")
    args = ap.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_accuracy.py needs matplotlib: pip install matplotlib")

    rows = [r for r in read_rows(args.csv) if r["prec"] == args.prec and r["kind"] == args.kind]
    if not rows:
        sys.exit(f"no rows with prec={args.prec} and kind={args.kind} in {args.csv}")
    os.makedirs(args.out, exist_ok=True)
    precision = {"d": "double", "s": "single"}[args.prec]
    note = f", {args.title_note}" if args.title_note else ""
    matrices = len({r["matrix"] for r in rows})
    cmap = plt.get_cmap("viridis")
    orders = sorted({int(r["N"]) for r in rows})
    color = {n: cmap(i / max(1, len(orders) - 1)) for i, n in enumerate(orders)}
    tmax = max(int(r["t"]) for r in rows)
    written = []

    # Figure 8: the ratio of residuals (evaluated in working precision; ratio_exact is the same to a few
    # parts in a thousand on these matrices).
    fig, ax = plt.subplots(figsize=(7, 4.8))
    for (n, m), pts in curves(rows, "ratio").items():
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", ms=3, color=color[n], label=label(n, m, matrices))
    for level in (10, 100):
        ax.axhline(level, color="grey", lw=0.6, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(0.8, tmax * 1.25)
    ax.set_xlabel("tiles per row t")
    ax.set_ylabel(r"$\|Ax-b\|_\infty$ of tile LU / that of LAPACK")
    ax.set_title(f"Tile LU residual relative to partial pivoting (the paper's Figure 8)\n{args.kind}, {precision}{note}",
                 fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    fig.tight_layout()
    path = os.path.join(args.out, f"{args.prefix}-ratio-{args.prec}-{args.kind}.png")
    fig.savefig(path, dpi=110)
    written.append(path)
    plt.close(fig)

    # Growth factor: tile LU against partial pivoting on the same matrix.
    fig, ax = plt.subplots(figsize=(7, 4.8))
    pp = {(int(r["N"]), int(r["matrix"])): float(r["growth_pp"]) for r in rows}
    for (n, m), pts in curves(rows, "growth").items():
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", ms=3, color=color[n], label=label(n, m, matrices))
        ax.plot([1, tmax], [pp[(n, m)]] * 2, "--", lw=0.8, color=color[n])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tiles per row t")
    ax.set_ylabel("growth max|U| / max|A|")
    ax.set_title(f"Growth factor, tile LU (solid) and partial pivoting (dashed)\n{args.kind}, {precision}{note}",
                 fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = os.path.join(args.out, f"{args.prefix}-growth-{args.prec}-{args.kind}.png")
    fig.savefig(path, dpi=110)
    written.append(path)
    plt.close(fig)

    # Refinement: backward errors before and after, for the smallest, a middle and the largest order.
    picked = sorted({orders[0], orders[len(orders) // 2], orders[-1]})
    fig, ax = plt.subplots(figsize=(10, 4.8))
    steps = rows[0]["refine_steps"]
    for key, style, what in (("backward_error_exact", "o-", "tile LU"),
                             ("backward_error_after_refine", "s--", f"+ {steps} steps, working-precision residual"),
                             ("backward_error_after_refine_x", "^:", f"+ {steps} steps, extended residual")):
        for (n, m), pts in curves([r for r in rows if int(r["N"]) in picked], key).items():
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, ms=3, color=color[n],
                    label=f"{label(n, m, matrices)}: {what}")
    pp_be = {int(r["N"]): float(r["backward_error_exact_pp"]) for r in rows if int(r["N"]) in picked}
    for n, v in sorted(pp_be.items()):
        ax.axhline(v, color=color[n], lw=0.6, alpha=0.6)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tiles per row t")
    ax.set_ylabel(r"$\|b-Ax\|_\infty / ((\|A\|\|x\|+\|b\|)\, N \varepsilon)$")
    ax.set_title(f"Backward error and iterative refinement (thin lines: LAPACK)\n{args.kind}, {precision}{note}",
                 fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    path = os.path.join(args.out, f"{args.prefix}-refine-{args.prec}-{args.kind}.png")
    fig.savefig(path, dpi=110)
    written.append(path)
    plt.close(fig)
    for p in written:
        print(p)


if __name__ == "__main__":
    main()
