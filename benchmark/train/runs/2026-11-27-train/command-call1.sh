#!/usr/bin/env bash
# call 1: baseline train-bench of main + ncu of one replayed GPT-2 small bf16 step
set -u
G=.gpu-train
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
gunzip -f $G/bin/*.gz; chmod +x $G/bin/*
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
timeout 90 $G/bin/train-bench-base --device cuda --cases gpt2-small,bert --dtypes bfloat16 --graph both --steps 20 > "$OUT/magpie-base.jsonl" 2>&1
el "bench rc=$?"; grep -h '"case"' "$OUT/magpie-base.jsonl" | cut -c1-300
timeout 150 ncu --clock-control none --csv --metrics gpu__time_duration.sum $G/bin/train-bench-base --device cuda --cases gpt2-small --dtypes bfloat16 --graph on --warmup 1 --steps 1 > "$OUT/ncu-gpt2.csv" 2> "$OUT/ncu-gpt2.err"
el "ncu rc=$?"
python3 $G/ncu_sum.py "$OUT/ncu-gpt2.csv" > "$OUT/ncu-summary-gpt2.txt" 2>&1; head -40 "$OUT/ncu-summary-gpt2.txt"
gzip -9 "$OUT/ncu-gpt2.csv"
