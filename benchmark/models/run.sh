#!/usr/bin/env bash
# On the GPU machine: the transformers side and torch-magpie's side of the model benchmark, one after
# the other on the same GPU, then the ratio table.
#   BENCH_BIN=path/to/bench-models bash benchmark/models/run.sh [--reps N] [--cases gpt2,llama-3.2-1b]
# Writes transformers.jsonl, magpie.jsonl and results.md to ${OUT:-.}.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-.}
bin=${BENCH_BIN:-target/release/bench-models}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
python3 "$here/transformers_bench.py" "$@" > "$out/transformers.jsonl"; echo "transformers rc=$?"
"$bin" --configs "$here/configs" "$@" > "$out/magpie.jsonl"; echo "torch-magpie rc=$?"
python3 "$here/report.py" "$out/transformers.jsonl" "$out/magpie.jsonl" | tee "$out/results.md"
