"""Writes the CUDA ops ratio table (markdown) from the two JSON-lines files of run.sh.

    python3 report.py cases.json ours.jsonl torch.jsonl "<gpu>" "<torch version>"
"""
import json
import sys


def load(p):
    out = {}
    for line in open(p):
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            out[r["name"]] = r
    return out


def main():
    cases = json.load(open(sys.argv[1]))
    ours, theirs = load(sys.argv[2]), load(sys.argv[3])
    gpu, ver = sys.argv[4], sys.argv[5]
    copy = next((c for c in cases if c["op"] == "copy"), None)
    copy_bw = None
    if copy and copy["name"] in theirs:
        copy_bw = copy["bytes"] / (theirs[copy["name"]]["ms"] * 1e-3) / 1e9
    print(f"GPU: {gpu}; PyTorch {ver}; CUDA-event medians after warm-up.")
    if copy_bw:
        print(f"Measured device-to-device copy bandwidth (PyTorch copy_, bytes read + written): {copy_bw:.0f} GB/s.")
    print()
    print("| case | torch-magpie | PyTorch | speed vs PyTorch | torch-magpie rate | % of copy BW | peak MiB (magpie / torch) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for c in cases:
        n = c["name"]
        o, t = ours.get(n), theirs.get(n)
        unit = "us" if c["op"] == "overhead" else "ms"
        k = 1e3 if unit == "us" else 1.0
        fmt = lambda r: (f"{r['ms'] * k:.3f} {unit}" if r and r.get("ms") is not None else ("error: " + r.get("error", "")[:60] if r else "-"))
        ratio = f"{t['ms'] / o['ms']:.2f}x" if o and t and o.get("ms") and t.get("ms") else "-"
        rate, pct = "-", "-"
        if o and o.get("ms"):
            s = o["ms"] * 1e-3
            if "bytes" in c:
                gbs = c["bytes"] / s / 1e9
                rate = f"{gbs:.0f} GB/s"
                if copy_bw:
                    pct = f"{100 * gbs / copy_bw:.0f}%"
            elif "flops" in c:
                rate = f"{c['flops'] / s / 1e12:.0f} TFLOP/s"
        mib = lambda r: f"{r['peak_bytes'] / 2**20:.0f}" if r and r.get("peak_bytes") is not None else "-"
        print(f"| {n} | {fmt(o)} | {fmt(t)} | {ratio} | {rate} | {pct} | {mib(o)} / {mib(t)} |")


if __name__ == "__main__":
    main()
