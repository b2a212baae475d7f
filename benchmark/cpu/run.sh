#!/usr/bin/env bash
# CPU benchmark: torch-magpie and PyTorch on the same cases, same machine, one run.
# Needs a Python with torch: set PYTHON (default: python3). Writes benchmark/cpu/results.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
THREADS=$(nproc)
cargo build --release -p magpie-bench
out=$(mktemp -d)
RAYON_NUM_THREADS=$THREADS ./target/release/bench-cpu benchmark/cpu/cases.json > "$out/ours.jsonl"
OMP_NUM_THREADS=$THREADS $PY -c "import torch; torch.set_num_threads($THREADS); import runpy, sys; sys.argv=['torch_bench.py','benchmark/cpu/cases.json']; runpy.run_path('benchmark/cpu/torch_bench.py', run_name='__main__')" > "$out/torch.jsonl"
ver=$($PY -c "import torch; print(torch.__version__)")
$PY benchmark/cpu/report.py "$out/ours.jsonl" "$out/torch.jsonl" "$ver" "$THREADS" | tee benchmark/cpu/results.md
