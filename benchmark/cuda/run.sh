#!/usr/bin/env bash
# CUDA ops benchmark: torch-magpie and PyTorch on the same cases, same GPU, one run.
# On the GPU machine:   bash benchmark/cuda/run.sh      (BENCH_BIN: a prebuilt bench-cuda;
# otherwise it is built with cargo). PYTHON: a python3 with CUDA torch (default python3).
# Writes benchmark/cuda/results.md (and $OUT/results.md when OUT is set).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
BIN=${BENCH_BIN:-}
if [ -z "$BIN" ]; then
  (cd "$here/../.." && cargo build --release -p magpie-bench-cuda)
  BIN=$(cd "$here/../.." && pwd)/target/release/bench-cuda
fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
tmp=$(mktemp -d)
gpu=$(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | head -1)
ver=$($PY -c "import torch; print(torch.__version__)")
"$BIN" "$here/cases.json" > "$tmp/ours.jsonl" || echo "bench-cuda exited with $?" >&2
$PY "$here/torch_ops.py" "$here/cases.json" > "$tmp/torch.jsonl"
$PY "$here/report.py" "$here/cases.json" "$tmp/ours.jsonl" "$tmp/torch.jsonl" "$gpu" "$ver" | tee "$here/results.md"
if [ -n "${OUT:-}" ]; then cp "$here/results.md" "$tmp/ours.jsonl" "$tmp/torch.jsonl" "$OUT/" 2>/dev/null || true; fi
