#!/usr/bin/env bash
# GPU training benchmark, torch-magpie and PyTorch side by side on one GPU in one run (issue 14's table).
#   bash benchmark/train/run.sh [--steps N]
# BENCH_BIN: a prebuilt train-bench (the GPU machine has no Rust toolchain); otherwise it is built here.
# PYTHON: a Python with torch and transformers (default python3). Writes benchmark/train/results.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
BIN=${BENCH_BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p magpie-bench-train
  BIN=${CARGO_TARGET_DIR:-target}/release/train-bench
fi
out=$(mktemp -d)
"$BIN" --device cuda "$@" | tee "$out/magpie.jsonl"
$PY benchmark/train/train_torch.py "$@" | tee "$out/torch.jsonl"
$PY benchmark/train/report.py "$out/magpie.jsonl" "$out/torch.jsonl" | tee benchmark/train/results.md
cp "$out/magpie.jsonl" "$out/torch.jsonl" benchmark/train/
