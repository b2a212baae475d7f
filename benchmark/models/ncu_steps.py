#!/usr/bin/env python3
"""Per-kernel time of fused decode steps from an Nsight Compute CSV.

    ncu --clock-control none --kernel-name regex:'fused_|decode_' --launch-skip 300 --launch-count 330 \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv \
        bench-models --configs benchmark/models/configs --cases llama-3.2-1b --metrics decode --reps 1 --warmup 0 > steps.csv
    python3 benchmark/models/ncu_steps.py steps.csv

Cuts the profiled kernels into decode steps (each starts with `fused_embed`), keeps the complete
steps and prints, per (kernel, grid), the launches per step, the time per step and per launch, and
the DRAM bytes moved per second. ncu runs each kernel alone with cold caches, so a step's sum is
more than its time inside a CUDA graph; the split between kernels is what it shows.
"""
import collections
import csv
import sys


def load(path):
    rows = {}
    lines = [l for l in open(path) if l.startswith('"')]
    for r in csv.DictReader(lines):
        d = rows.setdefault(r["ID"], {"name": r["Kernel Name"], "grid": r["Grid Size"]})
        d[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    return [rows[k] for k in sorted(rows, key=int)]


def summarize(path):
    ks = load(path)
    starts = [i for i, k in enumerate(ks) if k["name"].startswith("fused_embed")]
    steps = [ks[a:b] for a, b in zip(starts, starts[1:])]
    if not steps:
        print(f"{path}: no complete decode step")
        return
    n = len(steps)
    agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for s in steps:
        for k in s:
            a = agg[(k["name"], k["grid"])]
            a[0] += 1
            a[1] += k["gpu__time_duration.sum"]
            a[2] += k.get("dram__bytes_read.sum", 0) + k.get("dram__bytes_write.sum", 0)
    total = sum(a[1] for a in agg.values()) / n
    print(f"{path}: {n} steps of {len(steps[0])} kernels, {total / 1000:.1f} us of kernel time per step")
    for (name, grid), (c, t, b) in sorted(agg.items(), key=lambda x: -x[1][1]):
        print(f"  {name:36s} {grid:14s} {c / n:5.1f}/step {t / n / 1000:8.1f} us/step {t / c / 1000:7.2f} us each {b / t if t else 0:7.0f} GB/s")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        summarize(p)
