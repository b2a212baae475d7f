"""PyTorch side of the CUDA ops benchmark: the cases of cases.json, each timed with CUDA events
after warm-up (median of repeats), with the peak memory the case allocated. One JSON line per case.

    python3 benchmark/cuda/torch_ops.py benchmark/cuda/cases.json > torch.jsonl
"""
import json
import statistics
import sys
import time

import torch

WARMUP, REPS = 5, 30
DT = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def build(c, dev):
    dt = DT[c["dtype"]]
    g = torch.Generator(device=dev).manual_seed(0)
    rnd = lambda s: torch.randn(*s, generator=g, device=dev, dtype=torch.float32).to(dt)
    op = c["op"]
    if op == "copy":
        x = rnd(c["shape"]); y = torch.empty_like(x)
        return lambda: y.copy_(x)
    if op in ("add", "mul"):
        a, b = rnd(c["shape"]), rnd(c["shape"])
        f = torch.add if op == "add" else torch.mul
        return lambda: f(a, b)
    if op == "sum_rows":
        x = rnd(c["shape"])
        return lambda: x.sum(dim=1)
    if op == "sum_cols":
        x = rnd(c["shape"])
        return lambda: x.sum(dim=0)
    if op == "softmax":
        x = rnd(c["shape"])
        return lambda: torch.softmax(x, dim=-1)
    if op == "layer_norm":
        x = rnd(c["shape"]); n = c["shape"][-1]
        w, b = rnd([n]), rnd([n])
        return lambda: torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5)
    if op == "mm":
        a, b = rnd(c["a"]), rnd(c["b"])
        return lambda: a @ b
    if op == "mm_ta":
        a, b = rnd(c["a"]), rnd(c["b"])
        return lambda: a.t() @ b
    if op == "bmm":
        a, b = rnd(c["a"]), rnd(c["b"])
        return lambda: torch.bmm(a, b)
    raise ValueError(op)


def time_case(fn):
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(REPS)]
    for s, e in ev:
        s.record(); fn(); e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in ev)


def overhead(c, dev):
    """Host time of one small eager op, launch included: a loop of n ops, then one sync."""
    a = torch.randn(*c["shape"], device=dev); b = torch.randn(*c["shape"], device=dev)
    for _ in range(100):
        torch.add(a, b)
    torch.cuda.synchronize()
    res = []
    for _ in range(5):
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            torch.add(a, b)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        res.append((t1 - t0) / n * 1e3)
    return statistics.median(res)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    for c in json.load(open(sys.argv[1])):
        torch.cuda.empty_cache()
        if c["op"] == "overhead":
            ms, peak = overhead(c, dev), 0
        else:
            fn = build(c, dev)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            ms = time_case(fn)
            peak = torch.cuda.max_memory_allocated()
            del fn
        print(json.dumps({"name": c["name"], "ms": ms, "peak_bytes": peak}), flush=True)


if __name__ == "__main__":
    main()
