#!/usr/bin/env bash
# CPU benchmark: torch-magpie and PyTorch on the same cases, same machine, one run.
# Needs a Python with torch: set PYTHON (default: python3). Usage: run.sh [cases.json]; writes
# benchmark/cpu/results.md (or $RESULTS). BENCH_STAT=min reports the fastest run instead of the
# median (for a machine shared with other work), BENCH_MIN_SECS the time per case (default 1).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
THREADS=$(nproc)
cargo build --release -p magpie-bench
out=$(mktemp -d)
CASES=${1:-benchmark/cpu/cases.json}
RAYON_NUM_THREADS=$THREADS "${CARGO_TARGET_DIR:-target}/release/bench-cpu" "$CASES" > "$out/ours.jsonl"
OMP_NUM_THREADS=$THREADS $PY -c "import torch; torch.set_num_threads($THREADS); import runpy, sys; sys.argv=['torch_bench.py','$CASES']; runpy.run_path('benchmark/cpu/torch_bench.py', run_name='__main__')" > "$out/torch.jsonl"
ver=$($PY -c "import torch; print(torch.__version__)")
$PY benchmark/cpu/report.py "$out/ours.jsonl" "$out/torch.jsonl" "$ver" "$THREADS" | tee "${RESULTS:-benchmark/cpu/results.md}"
