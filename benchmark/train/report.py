"""Markdown table of benchmark/train: torch-magpie's train-bench lines against PyTorch's
(train_torch.py) from the same run. Usage: report.py MAGPIE.jsonl TORCH.jsonl"""
import json, sys

# issue 14's targets, as ratios to PyTorch in the same run (H200 absolute targets: BERT f32 <= 2.5 ms)
TARGETS = {("gpt", "float32"): "≥ 1.5x eager, ≥ torch.compile", ("bert", "float32"): "≤ 2.5 ms (H200), ≥ 4x eager",
           ("bert", "bfloat16"): "≤ 2.0 ms (H200)", ("gpt2-small", "bfloat16"): "≥ 1.2x torch.compile"}


def load(p):
    with open(p) as f:
        return [json.loads(l) for l in f if l.strip().startswith("{")]


ours, theirs = load(sys.argv[1]), load(sys.argv[2])
gpu = next((r.get("gpu") for r in theirs if r.get("gpu")), "unknown GPU")
ver = next((r.get("impl") for r in theirs), "PyTorch")
print(f"GPU: {gpu}; {ver}. Median of the timed steps (each synchronised: the loss is read back).\n")
print("| case | dtype | torch-magpie | torch-magpie CUDA graph | PyTorch eager | torch.compile | vs eager | vs compile | graph vs eager | graph vs compile | peak MiB (magpie / graph / eager) | target |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
by = {(r["case"], r["mode"]): r for r in theirs}
cases = sorted({r["case"] for r in ours} | {r["case"] for r in theirs})
for case in cases:
    for dt in ("float32", "bfloat16"):
        m = next((r for r in ours if r["case"] == case and r["dtype"] == dt and not r.get("graph")), None)
        mg = next((r for r in ours if r["case"] == case and r["dtype"] == dt and r.get("graph")), None)
        eager = by.get((case, "eager" if dt == "float32" else "autocast-bf16"))
        comp = by.get((case, "compile" if dt == "float32" else "compile-autocast-bf16"))
        if m is None and mg is None and eager is None and comp is None:
            continue
        f = lambda r: f"{r['step_ms']:.2f} ms" if r else "–"
        ratio = lambda r, x: f"{r['step_ms'] / x['step_ms']:.2f}x" if (r and x) else "–"
        mib = lambda r: f"{r['peak_mem_bytes'] / 2**20:.0f}" if r else "–"
        mem = f"{mib(m)} / {mib(mg)} / {mib(eager)}"
        print(f"| {case} | {dt} | {f(m)} | {f(mg)} | {f(eager)} | {f(comp)} | {ratio(eager, m)} | {ratio(comp, m)} | {ratio(eager, mg)} | {ratio(comp, mg)} | {mem} | {TARGETS.get((case, dt), '')} |")
print("\nbfloat16 rows: float32 parameters, forward under autocast to bfloat16 on both sides. CUDA graph: the whole step")
print("(forward, backward, clipping, AdamW) captured once and replayed; each timed replay also writes AdamW's step scalars and reads the loss back.")
print()
for r in ours + theirs:
    if "tokens_per_s" in r:
        g = " (CUDA graph)" if r.get("graph") else ""
        print(f"- {r['impl']}{g} {r['case']} {r.get('mode', r.get('dtype'))}: {r['tokens_per_s']:.0f} tokens/s, loss {r['loss']:.4f}")
