#!/usr/bin/env bash
# The second call of this folder (GPU machine, from the repo root): main's train-bench
# (train-bench-base), fce715b's (train-bench) and d8b4ddf's (train-bench-new2: add_ln_bwd_fin a
# thread per sum and column, the bias sums back to one launch) in one run; d8b4ddf's GPU tests in
# $G/tests; ncu of one replayed bf16 step of d8b4ddf. Writes to $OUT.
set -u
G=${G:-.gpu-bert}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
gunzip -f "$G"/bin/*.gz "$G"/tests/bin/*.gz 2>/dev/null; chmod +x "$G"/bin/* "$G"/tests/bin/* 2>/dev/null
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
for impl in base new new2; do
  bin=$G/bin/train-bench-$impl; [ $impl = new ] && bin=$G/bin/train-bench
  timeout 60 $bin --device cuda --cases bert --dtypes bfloat16,float32 --graph both --steps 20 > "$OUT/magpie-$impl.jsonl" 2>&1
  el "train-bench $impl rc=$?"
done
for impl in base new new2; do
  bin=$G/bin/train-bench-$impl; [ $impl = new ] && bin=$G/bin/train-bench
  timeout 30 $bin --device cuda --cases bert --dtypes bfloat16 --graph on --steps 20 >> "$OUT/magpie-$impl.jsonl" 2>&1
done
el "train-bench again"; grep -H '"case"' "$OUT"/magpie-*.jsonl | cut -c1-300
rm -rf .gpu && cp -r "$G/tests" .gpu && mkdir -p "$OUT/tests" && OUT="$OUT/tests" timeout 200 bash .gpu/run.sh > "$OUT/tests.out" 2>&1
el "tests rc=$?"; grep -E "FAILED|panicked|test result|passed," "$OUT/tests.out" | head -20
timeout 60 ncu --clock-control none --csv --metrics gpu__time_duration.sum $G/bin/train-bench-new2 --device cuda --cases bert --dtypes bfloat16 --graph on --warmup 1 --steps 1 > "$OUT/ncu-new2.csv" 2> "$OUT/ncu-new2.err"
el "ncu new2 rc=$?"
python3 benchmark/train/runs/2026-11-27-h200-amp-linear/ncu_sum.py "$OUT/ncu-new2.csv" > "$OUT/ncu-summary-new2.txt" 2>&1; head -32 "$OUT/ncu-summary-new2.txt"
gzip -9 "$OUT/ncu-new2.csv"
(cd "$OUT" && tar czf /tmp/all.tgz --exclude=all.tgz . && find . -mindepth 1 -maxdepth 1 ! -name "ncu-summary-*" ! -name "magpie-*.jsonl" -exec rm -rf {} + && mv /tmp/all.tgz .)
