#!/usr/bin/env bash
# Dynamic int8 Linear: torch-magpie (int8 per kernel, and its float32 Linear) against PyTorch
# (quantize_dynamic's Linear, and float32 nn.Linear), same shapes, same machine, in one run.
# The two sides alternate for ROUNDS rounds (default 3) because a shared machine's speed drifts;
# the table keeps each variant's best round. Needs python3 with torch (PYTHON to override).
# Usage: [THREADS=n] benchmark/quant/run.sh [secs per case, default 0.5]; writes
# benchmark/quant/results-<THREADS>t.md (or $RESULTS).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
THREADS=${THREADS:-$(nproc)}
ROUNDS=${ROUNDS:-3}
SECS=${1:-0.5}
cargo build --release -p magpie-quant --example bench_int8_linear
out=$(mktemp -d)
load=$(cut -d" " -f1-3 /proc/loadavg)
for r in $(seq "$ROUNDS"); do
  RAYON_NUM_THREADS=$THREADS "${CARGO_TARGET_DIR:-target}/release/examples/bench_int8_linear" "$SECS" >> "$out/all.jsonl"
  OMP_NUM_THREADS=$THREADS $PY -c "import torch, runpy, sys; torch.set_num_threads($THREADS); sys.argv=['x','$SECS']; runpy.run_path('benchmark/quant/torch_int8_linear.py', run_name='__main__')" >> "$out/all.jsonl"
done
$PY - "$out/all.jsonl" "$THREADS" "$ROUNDS" "$load" <<'PYEOF' | tee "${RESULTS:-benchmark/quant/results-${THREADS}t.md}"
import json, sys, platform, subprocess, datetime
import torch
rows = [json.loads(l) for l in open(sys.argv[1])]
best = {}
for r in rows:
    key = (r["m"], r["k"], r["n"], r["side"], r["variant"])
    best[key] = min(best.get(key, 1e18), r["ms"])
shapes = sorted({(m, k, n) for (m, k, n, _, _) in best}, key=lambda s: (s[1], s[2], s[0]))
kernels = sorted({v for (_, _, _, s, v) in best if s == "magpie" and v.startswith("int8_")})
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
print(f"# Dynamic int8 Linear vs float32 and vs PyTorch\n")
print(f"`benchmark/quant/run.sh`, {datetime.date.today()}, {cpu}, {sys.argv[2]} thread(s), torch {torch.__version__} "
      f"(quantized engine x86), best of {sys.argv[3]} alternating rounds of median ms per call; load average at the start: {sys.argv[4]}.\n")
hdr = "| batch x in -> out | magpie f32 | " + " | ".join(f"magpie {k}" for k in kernels) + " | torch f32 | torch int8 | magpie int8 / f32 speedup | torch int8 / magpie int8 |"
print(hdr)
print("|" + "---|" * (hdr.count("|") - 1))
for (m, k, n) in shapes:
    g = lambda s, v: best.get((m, k, n, s, v))
    ours = [g("magpie", kk) for kk in kernels]
    fastest = min(x for x in ours if x)
    cells = [f"{m} x {k} -> {n}", f"{g('magpie', 'f32'):.3f}"] + [f"{x:.3f}" for x in ours] + [f"{g('torch', 'f32'):.3f}", f"{g('torch', 'int8'):.3f}",
             f"{g('magpie', 'f32') / fastest:.2f}x", f"{g('torch', 'int8') / fastest:.2f}x"]
    print("| " + " | ".join(cells) + " |")
print("\nLast two columns: above 1 means the int8 layer is faster than our f32 Linear / than PyTorch's int8 layer.")
PYEOF
