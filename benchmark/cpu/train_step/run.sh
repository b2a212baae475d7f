#!/usr/bin/env bash
# Tiny-GPT training step, torch-magpie vs PyTorch, same shapes, same optimizer, same batch, 2 threads.
# THREADS (default 2) sets the threads of both sides. ROUNDS (default 5) alternates the two sides that
# many times (STEPS, default 30, timed steps each): this machine's speed drifts by tens of percent over seconds
# (other tenants), so the table reports the median over rounds and the median of the per-round ratios.
# Needs a Python with torch: set PYTHON (default: /work/venv-torch/bin/python if present, else python3).
# Extra arguments (e.g. --steps 20 --n-embd 256) go to both sides. Writes benchmark/cpu/train_step/results.md.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PYTHON:-$( [ -x /work/venv-torch/bin/python ] && echo /work/venv-torch/bin/python || echo python3 )}
TARGET=${CARGO_TARGET_DIR:-target}
THREADS=${THREADS:-2}
cargo build --release -q -p magpie-bench-train-step
out=$(mktemp -d)
ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-30}
for r in $(seq "$ROUNDS"); do
  RAYON_NUM_THREADS=$THREADS "$TARGET/release/train-step" --steps "$STEPS" "$@" >> "$out/ours.json"
  OMP_NUM_THREADS=$THREADS $PY benchmark/cpu/train_step/train_step.py --threads $THREADS --steps "$STEPS" "$@" >> "$out/torch.json"
done
shape="batch 16 x block 64, 2 layers, 4 heads, n_embd 128, vocab 101"
[ $# -gt 0 ] && shape="defaults overridden by: $*"
$PY benchmark/cpu/train_step/report.py "$out/ours.json" "$out/torch.json" "$shape" "$THREADS" "$(cut -d' ' -f1-3 /proc/loadavg)" | tee benchmark/cpu/train_step/results.md
