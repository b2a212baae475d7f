#!/usr/bin/env bash
# One GPU run for the float32 flash attention (Issue 14): its tests, the attention micro-benchmark
# (ours, a baseline build's and PyTorch's SDPA at the same shapes), the float32 GPT training step
# (ours, the baseline's and PyTorch eager / torch.compile) and an ncu profile of the attention
# kernels. The GPU machine has no Rust: binaries are built elsewhere and passed in.
#   bash benchmark/train/gpu_flash32.sh DIR
# DIR holds train-bench and sdpa_train_bench (this build), base-train-bench and
# base-sdpa_train_bench (the baseline build); test binaries staged by gpu-stage in .gpu/ run first
# when present. Logs go to $OUT (default /tmp/flash32).
set -uo pipefail
cd "$(dirname "$0")/../.."
D=$1
OUT=${OUT:-/tmp/flash32}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
date -u | tee -a "$OUT/gpu.txt"
if [ -f .gpu/run.sh ]; then
  t0=$(date +%s); bash .gpu/run.sh > "$OUT/tests.txt" 2>&1; echo "tests rc $? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/tests.txt"; tail -4 "$OUT/tests.txt"
fi
"$D/sdpa_train_bench" > "$OUT/sdpa_new.jsonl" 2>&1
"$D/base-sdpa_train_bench" > "$OUT/sdpa_base.jsonl" 2>&1
python3 benchmark/train/sdpa_torch.py > "$OUT/sdpa_torch.jsonl" 2>&1
cat "$OUT/sdpa_new.jsonl" "$OUT/sdpa_base.jsonl" "$OUT/sdpa_torch.jsonl" | grep float32
for i in 1 2; do
  "$D/base-train-bench" --device cuda --cases gpt --dtypes float32 --steps 20 > "$OUT/train_base_$i.jsonl" 2>&1
  "$D/train-bench" --device cuda --cases gpt --dtypes float32 --steps 20 > "$OUT/train_new_$i.jsonl" 2>&1
done
python3 benchmark/train/train_torch.py --cases gpt --modes eager,compile --steps 20 > "$OUT/train_torch.jsonl" 2>&1
python3 benchmark/train/report.py "$OUT/train_new_2.jsonl" "$OUT/train_torch.jsonl" > "$OUT/results_new.md" 2>&1
python3 benchmark/train/report.py "$OUT/train_base_2.jsonl" "$OUT/train_torch.jsonl" > "$OUT/results_base.md" 2>&1
grep -h "gpt" "$OUT"/results_*.md
# the attention kernels of the GPT shape (the example's first case): time, FMA pipe and occupancy
timeout 120 ncu --metrics gpu__time_duration.sum,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active \
  -k regex:fa32 -c 8 "$D/sdpa_train_bench" > "$OUT/ncu_fa32.txt" 2>&1
grep -E "fa32_|duration|pct" "$OUT/ncu_fa32.txt" | head -40
