#!/usr/bin/env python3
"""Batched LU through torch on the GPU machine: MAGMA's batched getrf and torch's default
(cuSOLVER/cuBLAS) path, on the same FP64 batches, for docs/batched.md's comparison table
("Fixed sizes against the vendor libraries").

torch.linalg.lu_factor copies its input before factoring it, so each timed call is measured
next to a clone of the same batch and the clone's time is subtracted (reported apart as
copy_s). Timing: CUDA events around one call, after a warm-up, median over --reps runs, a fresh
random batch per size. Output: one JSON object per line with the keys of our C++ benches
(record, op, impl, n, count, time_s, tflops, floor_s) plus copy_s, gross_s, residual and
torch/MAGMA versions.

Usage (GPU machine):  python3 scripts/bench_batched_magma.py --out results.jsonl
"""
import argparse
import json
import statistics
import sys

BANDWIDTH = 3.0e12  # H100 device copy, bytes/s read + written (measured)


def getrf_flops(n):
    """LAPACK's dgetrf count (LAWN 41, multiplications + additions), as bench_batched_getrf."""
    return 2.0 / 3.0 * n ** 3 - 0.5 * n ** 2 + 5.0 / 6.0 * n


def default_count(n):
    return 10000 if n <= 64 else 2000


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="8,16,32,64,128,256,512", help="comma-separated orders")
    p.add_argument("--count", type=int, default=0, help="matrices per batch (0: 10000 for n <= 64, else 2000)")
    p.add_argument("--reps", type=int, default=10, help="timed runs per point (median)")
    p.add_argument("--seed", type=int, default=1, help="random seed of the batches")
    p.add_argument("--impls", default="magma,default", help="magma, default (torch's cuSOLVER/cuBLAS path)")
    p.add_argument("--out", default="", help="also append the JSON lines to this file")
    return p.parse_args()


def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("bench_batched_magma: torch is not installed here (it is on the GPU machine)")
    if not torch.cuda.is_available():
        sys.exit("bench_batched_magma: no CUDA device visible to torch")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    impls = [s for s in args.impls.split(",") if s]
    out = open(args.out, "a") if args.out else None
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)

    def emit(rec):
        line = json.dumps(rec)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    def event_time(fn):
        """Seconds of fn() on the current stream, by CUDA events."""
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    emit({"record": "config", "torch": torch.__version__, "cuda": torch.version.cuda,
          "device": torch.cuda.get_device_name(0), "reps": args.reps, "seed": args.seed,
          "copy": "lu_factor's input copy estimated by a clone of the batch, timed apart and subtracted"})

    for n in sizes:
        count = args.count or default_count(n)
        A = torch.rand((count, n, n), dtype=torch.float64, device=dev, generator=gen) * 2 - 1
        flops = getrf_flops(n) * count
        floor = 2.0 * count * n * n * 8 / BANDWIDTH  # each matrix read and written once
        for impl in impls:
            backend = "magma" if impl == "magma" else "default"
            torch.backends.cuda.preferred_linalg_library(backend)
            # Warm-up: MAGMA's first call initialises its queues, cuSOLVER its handles.
            torch.linalg.lu_factor(A)
            torch.cuda.synchronize()
            gross, copy = [], []
            for _ in range(args.reps):
                copy.append(event_time(lambda: A.clone()))
                gross.append(event_time(lambda: torch.linalg.lu_factor(A)))
            g, c = statistics.median(gross), statistics.median(copy)
            net = max(g - c, 1e-9)
            # A sampled residual ||P A - L U||_1 / (n ||A||_1 eps) on a few matrices.
            LU, piv = torch.linalg.lu_factor(A[:16])
            P, L, U = torch.lu_unpack(LU, piv)
            R = P @ L @ U - A[:16]
            norm1 = lambda M: M.abs().sum(dim=-2).amax(dim=-1)
            eps = torch.finfo(torch.float64).eps / 2
            residual = (norm1(R) / (n * norm1(A[:16]) * eps)).max().item()
            emit({"record": "point", "op": "getrf", "impl": "torch_" + impl, "n": n, "count": count,
                  "time_s": net, "tflops": flops / net / 1e12, "floor_s": floor, "gross_s": g, "copy_s": c,
                  "residual_max_sampled": residual})
        del A
        torch.cuda.empty_cache()
    torch.backends.cuda.preferred_linalg_library("default")
    if out:
        out.close()


if __name__ == "__main__":
    main()
