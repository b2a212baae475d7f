#!/usr/bin/env python3
"""Per-kernel time of the fused engine's one-row decode steps from an Nsight Compute CSV.

    ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv \
        load-bench decode FILE.gguf --new 3 --path fused > steps.csv
    python3 benchmark/load/ncu_decode_steps.py steps.csv

As `benchmark/models/ncu_steps.py` (whose CSV reader it uses), but keeps only decode steps of one
row: a step starts at a `fused_embed` of grid (1, 1, 1) and ends before the next `fused_embed`
(prefill passes embed all prompt tokens in one launch, so their grids differ). ncu runs each
kernel alone with cold caches: a step's sum exceeds its time inside the CUDA graph; the split
between kernels is what it shows.
"""
import collections
import os
import sys

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"), os.path.join(os.getcwd(), "benchmark", "models")]
from ncu_steps import load  # noqa: E402


def summarize(path):
    ks = load(path)
    starts = [i for i, k in enumerate(ks) if k["name"].startswith("fused_embed")]
    steps = [ks[a:b] for a, b in zip(starts, starts[1:] + [len(ks)]) if ks[a]["grid"] == "(1, 1, 1)"]
    # the last step may be cut off by the profile's end
    steps = [s for s in steps if s[-1]["name"].startswith("fused_select")]
    if not steps:
        print(f"{path}: no complete one-row decode step")
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
    moved = sum(a[2] for a in agg.values()) / n
    print(f"{path}: {n} decode steps of {len(steps[0])} kernels, {total / 1000:.1f} us of kernel time and {moved / 1e6:.1f} MB of DRAM traffic per step")
    for (name, grid), (c, t, b) in sorted(agg.items(), key=lambda x: -x[1][1]):
        print(f"  {name:40s} {grid:14s} {c / n:5.1f}/step {t / n / 1000:8.1f} us/step {t / c / 1000:7.2f} us each {b / t if t else 0:7.0f} GB/s")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        summarize(p)
