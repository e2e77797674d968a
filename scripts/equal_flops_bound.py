#!/usr/bin/env python3
"""Upper bound on the "equal flops" ratio for a uniform size distribution.

The yardstick (docs/batched.md, "Variable sizes") divides the throughput of a variable-size
batch by that of the fixed-size path on matrices of order NMAX carrying the same flops. Suppose
a variable-size method were perfect in the sense that every matrix of order n ran at the
fixed-size path's own throughput at order n (measured on large batches of that order). Its time
is then sum_n flops(n) / E(n), and the ratio it reaches is at most

    bound = (sum_n flops(n) / E(NMAX)) / (sum_n flops(n) / E(n)),

which is below 1 because E grows with n: a uniform batch is mostly small matrices in count and
their flops run slower than those of order NMAX. E(n) comes from the fixed-size benchmarks
(log-log interpolation between the measured orders, constant below the smallest).

Usage: scripts/equal_flops_bound.py [--nmax 128,256,512] [--json FILE]
  --json: a file of {"op": {"n": [count, seconds], ...}, ...} to use instead of the built-in
  figures (H100, FP64; the numbers docs/batched.md, "The ceiling of the equal-flops yardstick",
  quotes).
"""
import argparse
import json
import math

# Fixed-size batched times on the H100 (FP64, medians of bench_batched_getrf, _potrf, _geqrf;
# for LU at 32 and QR from 64 up, times of kernels before the current ones, which the table of
# docs/batched.md, "Fixed sizes against the vendor libraries", shows faster): order -> (count,
# seconds).
H100 = {
    "getrf": {32: (10000, 110.5e-6), 64: (10000, 0.86e-3), 128: (5000, 2.24e-3),
              256: (2000, 4.70e-3), 512: (2000, 26.6e-3)},
    "potrf": {32: (10000, 83.4e-6), 64: (10000, 0.397e-3), 128: (5000, 0.93e-3),
              256: (2000, 1.89e-3), 512: (2000, 8.62e-3)},
    "geqrf": {32: (10000, 0.651e-3), 64: (10000, 2.71e-3), 128: (5000, 4.50e-3),
              256: (1000, 3.56e-3), 512: (2000, 32.9e-3)},
}

FLOPS = {
    "getrf": lambda n: 2.0 / 3.0 * n ** 3,
    "potrf": lambda n: n ** 3 / 3.0,
    "geqrf": lambda n: 4.0 / 3.0 * n ** 3,
}


def throughput_curve(points, flops):
    """(orders, log throughputs) of the measured points, in increasing order."""
    orders = sorted(points)
    logs = [math.log(points[n][0] * flops(n) / points[n][1]) for n in orders]
    return orders, logs


def throughput_at(n, orders, logs):
    """Log-log interpolation; constant outside the measured orders."""
    if n <= orders[0]:
        return math.exp(logs[0])
    if n >= orders[-1]:
        return math.exp(logs[-1])
    for k in range(1, len(orders)):
        if n <= orders[k]:
            lo, hi = math.log(orders[k - 1]), math.log(orders[k])
            w = (math.log(n) - lo) / (hi - lo)
            return math.exp(logs[k - 1] + w * (logs[k] - logs[k - 1]))
    raise AssertionError("unreachable")


def bound(op, points, nmax):
    flops = FLOPS[op]
    orders, logs = throughput_curve(points, flops)
    if nmax not in points:
        raise SystemExit(f"{op}: no measured fixed-size point at NMAX = {nmax}")
    total = sum(flops(n) for n in range(1, nmax + 1))
    ideal = sum(flops(n) / throughput_at(n, orders, logs) for n in range(1, nmax + 1))
    return (total / throughput_at(nmax, orders, logs)) / ideal


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nmax", default="128,256,512")
    ap.add_argument("--json")
    args = ap.parse_args()
    data = H100
    if args.json:
        with open(args.json) as f:
            raw = json.load(f)
        data = {op: {int(n): tuple(v) for n, v in pts.items()} for op, pts in raw.items()}
    nmaxes = [int(x) for x in args.nmax.split(",")]
    print("op     " + "".join(f"  NMAX {m:>4}" for m in nmaxes))
    for op, points in data.items():
        print(f"{op:7s}" + "".join(f"  {bound(op, points, m):9.2f}" for m in nmaxes))


if __name__ == "__main__":
    main()
