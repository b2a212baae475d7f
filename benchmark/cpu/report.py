"""Joins bench-cpu's and torch_bench.py's JSON lines into a Markdown table of ratios."""
import json, sys, platform, os

def load(p):
    return {d["name"]: d for d in (json.loads(l) for l in open(p) if l.strip())}

def flops(name):
    # GFLOP/s for matmul cases: 2*m*n*k
    import re
    m = re.match(r"matmul (\d+)x(\d+)@(\d+)x(\d+)", name)
    if m:
        a, k, _, b = map(int, m.groups()); return 2 * a * k * b
    m = re.match(r"matmul (\d+)$", name)
    if m:
        n = int(m.group(1)); return 2 * n ** 3
    return None

ours, theirs = load(sys.argv[1]), load(sys.argv[2])
torch_version, threads = sys.argv[3], sys.argv[4]
cpu = "unknown CPU"
try:
    for l in open("/proc/cpuinfo"):
        if l.startswith("model name"):
            cpu = l.split(":", 1)[1].strip(); break
except OSError:
    pass
print(f"CPU benchmark: torch-magpie vs PyTorch {torch_version} on {cpu}, {os.cpu_count()} cores, {threads} threads each, float32, median wall time.")
print("Ratio > 1 means torch-magpie is faster. Produced by `bash benchmark/cpu/run.sh`.\n")
print("| case | torch-magpie | PyTorch | speed ratio | peak MB (ours / PyTorch) |")
print("|---|---|---|---|---|")
for name, t in theirs.items():
    o = ours.get(name, {})
    if "error" in o or "seconds" not in o:
        print(f"| {name} | n/a ({o.get('error', 'missing')[:60]}) | {t['seconds']*1e3:.2f} ms | - | - |")
        continue
    fl = flops(name)
    if fl:
        a, b = f"{fl / o['seconds'] / 1e9:.1f} GFLOP/s", f"{fl / t['seconds'] / 1e9:.1f} GFLOP/s"
    else:
        a, b = f"{o['seconds']*1e3:.2f} ms", f"{t['seconds']*1e3:.2f} ms"
    print(f"| {name} | {a} | {b} | {t['seconds']/o['seconds']:.2f}x | {o['peak_bytes']/1e6:.1f} / {t['peak_bytes']/1e6:.1f} |")
