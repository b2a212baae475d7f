"""Times each case of cases.json in PyTorch on the CPU (median wall time after warm-up) and
its peak CPU memory (torch.profiler's self memory of the call). One JSON object per line."""
import json, os, sys, time
import torch
import torch.nn.functional as F

def resolve(op):
    obj = torch
    for part in op.split("."):
        obj = getattr(obj, part)
    return obj

def stat(times):
    """The median of sorted times, or the fastest with BENCH_STAT=min (robust on a shared machine)."""
    return times[0] if os.environ.get("BENCH_STAT") == "min" else times[len(times) // 2]

def time_backward(name, f, xs, args, kw, min_secs):
    """Forward + backward with a fixed random output gradient; peak memory is the running sum of
    the profiler's allocations and frees in time order (the backward frees as it goes)."""
    g = torch.randn_like(f(*args, **kw))
    def once():
        o = f(*args, **kw)
        o.backward(g)
        for x in xs:
            x.grad = None
        return o
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        out = once()
    cur = peak = 0
    evs = sorted((e for e in prof.events() if e.self_cpu_memory_usage != 0), key=lambda e: e.time_range.start)
    for e in evs:
        cur += e.self_cpu_memory_usage
        peak = max(peak, cur)
    del out
    once()
    times = []
    start = time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < min_secs and len(times) < 200):
        t0 = time.perf_counter()
        o = once()
        times.append(time.perf_counter() - t0)
        del o
    times.sort()
    return {"name": name, "seconds": stat(times), "peak_bytes": peak, "reps": len(times)}

def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "benchmark/cpu/cases.json"
    min_secs = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    torch.manual_seed(0)
    for c in json.load(open(path))["cases"]:
        f = resolve(c["op"])
        xs = [torch.randn(*s) for s in c["inputs"]]
        if c.get("transpose"):
            xs = [x.t() for x in xs]
        kwt = {k: torch.randn(*s) for k, s in c.get("kwarg_inputs", {}).items()}
        back = c.get("backward", False)
        if back:
            xs = [x.requires_grad_() for x in xs]
            for t in kwt.values():
                t.requires_grad_()
        ints = [torch.randint(0, s["high"], s["shape"]) for s in c.get("int_inputs", [])]
        args = xs + ints + [tuple(a) if isinstance(a, list) else a for a in c.get("args", [])]
        kw = dict(c.get("kwargs", {}), **kwt)
        if back:
            print(json.dumps(time_backward(c["name"], f, xs + list(kwt.values()), args, kw, min_secs)), flush=True)
            continue
        with torch.no_grad():
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
                out = f(*args, **kw)
            peak = max(0, sum(e.self_cpu_memory_usage for e in prof.events() if e.self_cpu_memory_usage > 0))
            del out
            f(*args, **kw)
            times = []
            start = time.perf_counter()
            while len(times) < 5 or (time.perf_counter() - start < min_secs and len(times) < 200):
                t0 = time.perf_counter()
                o = f(*args, **kw)
                times.append(time.perf_counter() - t0)
                del o
        times.sort()
        print(json.dumps({"name": c["name"], "seconds": stat(times), "peak_bytes": peak, "reps": len(times)}), flush=True)

if __name__ == "__main__":
    main()
