#!/usr/bin/env python3
"""Per-kernel tables of a GPT-2 prefill and of Llama decode steps from Nsight Compute CSVs.

    python3 benchmark/models/profile_ncu.py --floors floors.jsonl --prefill ncu-prefill.csv \
        --decode ncu-decode.csv --times prefill.jsonl decode.jsonl

`benchmark/models/profile_prefill_decode.sh` makes the inputs (ncu --csv --print-units base, one row
per kernel and metric). The prefill is the process's last run of kernels that starts with
`fused_embed` (the engine's first prefill kernel). The decode window holds several replayed steps:
its period (kernels per step) is the smallest shift under which the kernel names repeat, and every
table is per step. ncu replays each kernel alone with flushed caches and no launch overlap, so the
sums are more than the times inside the process; the split between kernels is what they show.
"""
import argparse
import collections
import csv
import json
import re

SCALE = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "byte": 1.0, "Kbyte": 1e3,
         "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}


def load(path):
    rows = {}
    try:
        lines = [l for l in open(path, errors="replace") if l.startswith('"')]
    except OSError as e:
        print(f"{path}: {e}")
        return []
    for r in csv.DictReader(lines):
        try:
            v = float(r["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        d = rows.setdefault(r["ID"], {"name": r["Kernel Name"], "grid": r.get("Grid Size", ""), "block": r.get("Block Size", "")})
        d[r["Metric Name"]] = v * SCALE.get(r.get("Metric Unit", ""), 1.0)
    return [rows[k] for k in sorted(rows, key=int)]


def short(name):
    m = re.match(r"sm\d+_xmma_gemm_(\w+?)_(tn|nt|nn|tt)_n_tilesize(\w+?)_.*?execute_(split_k_)?kernel", name)
    if m:
        # cuBLAS's xmma GEMMs: `execute_kernel` computes K slices (grid z) into a workspace,
        # `execute_split_k_kernel` sums the slices (its bytes are slices x M x N x 4)
        return f"cuBLAS sgemm {m.group(3)} " + ("split-K sum" if m.group(4) else "(z = K slices)")
    n = re.sub(r"^void ", "", name)
    n = n.split("(")[0]
    return n if len(n) <= 56 else n[:53] + "..."


def kind(name):
    n = name.lower()
    if re.search(r"gemm|cutlass|xmma|sgemm|cublas|gemv|sm90_", n) and not n.startswith("fused_"):
        return "cuBLAS GEMM"
    if re.search(r"attn|attention|flash|fa32_", n):
        return "attention"
    if n.startswith("fused_gemv"):
        return "fused GEMV"
    return "other"


def t_us(k):
    return k.get("gpu__time_duration.sum", 0.0) * 1e6


def nbytes(k):
    return k.get("dram__bytes_read.sum", 0.0) + k.get("dram__bytes_write.sum", 0.0)


def table(ks, per, copy_gbps, title, extra=None):
    """Rows per (kernel, grid): launches, us, us each, bytes, GB/s, % of the copy rate."""
    agg = collections.OrderedDict()
    for k in ks:
        a = agg.setdefault((short(k["name"]), k["grid"]), {"n": 0, "t": 0.0, "b": 0.0, "rd": 0.0, "w": [], "sm": [], "name": k["name"]})
        a["n"] += 1
        a["t"] += t_us(k)
        a["b"] += nbytes(k)
        a["rd"] += k.get("dram__bytes_read.sum", 0.0)
        if "launch__waves_per_multiprocessor" in k:
            a["w"].append(k["launch__waves_per_multiprocessor"])
        if "sm__throughput.avg.pct_of_peak_sustained_elapsed" in k:
            a["sm"].append(k["sm__throughput.avg.pct_of_peak_sustained_elapsed"])
    total = sum(a["t"] for a in agg.values())
    print(f"\n### {title}\n")
    hdr = "| kernel | grid | launches | us | % | us each | MB read+written | GB/s | % of copy rate |"
    sep = "|---|---|---:|---:|---:|---:|---:|---:|---:|"
    if any(a["w"] for a in agg.values()):
        hdr += " waves | SM throughput % |"
        sep += "---:|---:|"
    print(hdr)
    print(sep)
    for (name, grid), a in sorted(agg.items(), key=lambda x: -x[1]["t"]):
        gbs = a["b"] / (a["t"] * 1e-6) / 1e9 if a["t"] else 0.0
        line = (f"| `{name}` | {grid} | {a['n'] / per:g} | {a['t'] / per:.1f} | {100 * a['t'] / total:.1f} | {a['t'] / a['n']:.2f} | "
                f"{a['b'] / per / 1e6:.2f} | {gbs:.0f} | {100 * gbs / copy_gbps:.0f} |")
        if a["w"] or a["sm"]:
            w = sum(a["w"]) / len(a["w"]) if a["w"] else 0
            s = sum(a["sm"]) / len(a["sm"]) if a["sm"] else 0
            line += f" {w:.2f} | {s:.0f} |"
        print(line)
    by = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for k in ks:
        b = by[kind(k["name"])]
        b[0] += 1
        b[1] += t_us(k)
        b[2] += nbytes(k)
    print("\n| group | launches | us | % | MB |")
    print("|---|---:|---:|---:|---:|")
    for g, (n, t, b) in sorted(by.items(), key=lambda x: -x[1][1]):
        print(f"| {g} | {n / per:g} | {t / per:.1f} | {100 * t / total:.1f} | {b / per / 1e6:.1f} |")
    print(f"| all | {len(ks) / per:g} | {total / per:.1f} | 100 | {sum(nbytes(k) for k in ks) / per / 1e6:.1f} |")
    return total / per, by


def prefill(path, floors, gflop):
    ks = load(path)
    starts = [i for i, k in enumerate(ks) if k["name"].startswith("fused_embed")]
    if not starts:
        print(f"{path}: no fused_embed kernel ({len(ks)} kernels)")
        return
    last = ks[starts[-1]:]
    prev = ks[starts[-2]:starts[-1]] if len(starts) > 1 else []
    print(f"\n## GPT-2 6/768 f32 prefill, 128 tokens: {len(last)} kernels in the last prefill "
          f"({len(prev)} in the one before, {len(ks)} profiled in all)")
    total, by = table(last, 1, floors["copy_GBps"], "One prefill, per (kernel, grid), ncu (cold caches, one kernel at a time)")
    g = by.get("cuBLAS GEMM")
    if g and g[1]:
        tf = gflop / (g[1] * 1e-6) / 1e3
        print(f"\nGEMM FLOPs of the 6 blocks at M = 128 ({gflop:.2f} GFLOP) over the cuBLAS kernels' {g[1]:.1f} us: "
              f"{tf:.1f} TFLOP/s, {100 * tf / floors['f32_tflops']:.0f}% of the measured f32 peak "
              f"({floors['f32_tflops']:.1f} TFLOP/s); at the peak: {gflop / floors['f32_tflops'] * 1e3:.0f} us")
    print("\nThe prefill's kernels in launch order (us, grid, waves):\n")
    print("```")
    for k in last:
        print(f"{t_us(k):8.2f}  {k['grid']:>14s}  {k.get('launch__waves_per_multiprocessor', 0):5.2f}  {short(k['name'])}")
    print("```")


def period(names, lo=20):
    for p in range(lo, len(names) // 2 + 1):
        same = sum(names[i] == names[i + p] for i in range(len(names) - p))
        if same >= 0.99 * (len(names) - p):
            return p
    return 0


def decode(path, floors, weight_bytes):
    ks = load(path)
    names = [k["name"] for k in ks]
    p = period(names)
    if not p:
        print(f"{path}: no repeating step in {len(ks)} kernels")
        return
    n = len(ks) // p
    win = ks[:n * p]
    print(f"\n## Llama-3.2-1B bf16 decode, batch 1: {p} kernels per step, {n} whole steps of {len(ks)} profiled kernels")
    total, by = table(win, n, floors["copy_GBps"], "One decode step, per (kernel, grid), ncu (cold caches, one kernel at a time, no PDL overlap)")
    moved = sum(nbytes(k) for k in win) / n
    print(f"\nPer step: {total:.1f} us of kernel time, {moved / 1e9:.3f} GB moved (weights {weight_bytes / 1e9:.3f} GB); "
          f"at the copy rate ({floors['copy_GBps']:.0f} GB/s) the moved bytes take {moved / floors['copy_GBps'] / 1e3:.1f} us, "
          f"the weights {weight_bytes / floors['copy_GBps'] / 1e3:.1f} us")


def times(paths):
    print("\n## Row times (bench-models, this run)\n")
    for p in paths:
        try:
            for line in open(p):
                if line.startswith("{"):
                    r = json.loads(line)
                    extra = f" (step {1e6 / r['value']:.1f} us)" if r["unit"] == "tok/s" else ""
                    print(f"- {r['case']} {r['metric']}: {r['value']:.4g} {r['unit']}{extra}, times_ms {r['times_ms']}")
        except OSError as e:
            print(f"- {p}: {e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--floors")
    ap.add_argument("--prefill")
    ap.add_argument("--decode")
    ap.add_argument("--times", nargs="*", default=[])
    # 2 * 128 * 768 * (2304 + 768 + 3072 + 3072) * 6: q|k|v, o, fc, proj of six blocks
    ap.add_argument("--prefill-gflop", type=float, default=2 * 128 * 768 * (2304 + 768 + 3072 + 3072) * 6 / 1e9)
    # Llama-3.2-1B bf16 weights read per step (blocks + tied LM head), from NOTES
    ap.add_argument("--decode-weight-bytes", type=float, default=2.47e9)
    a = ap.parse_args()
    floors = {"copy_GBps": 4239.0, "f32_tflops": 51.15, "bf16_tflops": 660.9, "src": "earlier run (2026-11-27 decode split)"}
    if a.floors:
        try:
            for line in open(a.floors):
                if line.startswith("{"):
                    floors = json.loads(line)
                    floors["src"] = "this run"
        except OSError:
            pass
    print(f"floors ({floors['src']}): copy {floors['copy_GBps']:.0f} GB/s, f32 {floors['f32_tflops']:.1f} TFLOP/s, bf16 {floors['bf16_tflops']:.1f} TFLOP/s")
    times(a.times)
    if a.prefill:
        prefill(a.prefill, floors, a.prefill_gflop)
    if a.decode:
        decode(a.decode, floors, a.decode_weight_bytes)


if __name__ == "__main__":
    main()
