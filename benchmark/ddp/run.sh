#!/usr/bin/env bash
# Data-parallel training benchmark: GPT tokens/s at 1 and N GPUs, torch-magpie (ddp-bench) and
# PyTorch DDP (torchrun) side by side on the same machine in one run.
#   bash benchmark/ddp/run.sh [N]            (N GPUs, default 2; extra arguments go to both sides)
# DDP_BENCH_BIN: a prebuilt ddp-bench (GPU machines have no Rust toolchain); otherwise built here.
# PYTHON: a Python with torch (default python3). Writes benchmark/ddp/results.md and all.jsonl.
# NCCL: cudarc loads libnccl.so; with only pip's libnccl.so.2, set MAGPIE_NCCL_LIB to it (the
# launcher links it), or put a folder with a libnccl.so link on LD_LIBRARY_PATH.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-2}; shift || true
PY=${PYTHON:-python3}
BIN=${DDP_BENCH_BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p magpie-bench-ddp
  BIN=${CARGO_TARGET_DIR:-target}/release/ddp-bench
fi
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
out=$(mktemp -d)
"$BIN" --nproc-per-node 1 "$@" | tee -a "$out/all.jsonl"
"$BIN" --nproc-per-node "$N" "$@" | tee -a "$out/all.jsonl"
$PY benchmark/ddp/train_ddp_torch.py "$@" | tee -a "$out/all.jsonl"
$PY -m torch.distributed.run --nproc-per-node "$N" --master-port 29520 benchmark/ddp/train_ddp_torch.py "$@" | tee -a "$out/all.jsonl"
$PY -m torch.distributed.run --nproc-per-node "$N" --master-port 29521 benchmark/ddp/allreduce_bw.py | tee "$out/allreduce.jsonl"
$PY benchmark/ddp/report.py "$out/all.jsonl" "$out/allreduce.jsonl" | tee benchmark/ddp/results.md
cp "$out/all.jsonl" "$out/allreduce.jsonl" benchmark/ddp/
