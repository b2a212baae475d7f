#!/usr/bin/env bash
# The run of this folder, on the GPU machine (no Rust there): from the repo root, with the
# prebuilt binaries in $G/bin (train-bench of this branch at fce715b, train-bench-base: main's release
# build of 2026-11-27 12:47, whose training path is that of c9d4f74), the
# staged GPU tests in $G/tests (as ../shared/tools/gpu-stage stages them: gzipped test binaries,
# a manifest, run.sh) and ncu_sum.py of runs/2026-11-27-h200-amp-linear. Writes to $OUT.
set -u
G=${G:-.gpu-bert}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
gunzip -f "$G"/bin/*.gz "$G"/tests/bin/*.gz 2>/dev/null; chmod +x "$G"/bin/* "$G"/tests/bin/* 2>/dev/null
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
# 1. train-bench: main's binary and this branch's in the same run, then each BERT bf16 graphed again
for impl in base new; do
  bin=$G/bin/train-bench; [ $impl = base ] && bin=$G/bin/train-bench-base
  timeout 60 $bin --device cuda --cases bert --dtypes bfloat16,float32 --graph both --steps 20 > "$OUT/magpie-$impl.jsonl" 2>&1
  el "train-bench $impl rc=$?"
done
timeout 30 $G/bin/train-bench-base --device cuda --cases bert --dtypes bfloat16 --graph on --steps 20 > "$OUT/magpie-base-again.jsonl" 2>&1
timeout 30 $G/bin/train-bench --device cuda --cases bert --dtypes bfloat16 --graph on --steps 20 > "$OUT/magpie-new-again.jsonl" 2>&1
el "train-bench again"; grep -h '"case"' "$OUT"/magpie-*.jsonl | cut -c1-400
# 2. GPU tests (MAGPIE_REQUIRE_CUDA=1 in run.sh): the changed kernels against their composites,
#    eager and replayed training steps bit for bit, the BERT training losses
rm -rf .gpu && cp -r "$G/tests" .gpu && mkdir -p "$OUT/tests" && OUT="$OUT/tests" timeout 170 bash .gpu/run.sh > "$OUT/tests.out" 2>&1
el "tests rc=$?"; grep -E "FAILED|panicked|test result|passed," "$OUT/tests.out" | head -20
# 3. kernels of one replayed bf16 step (ncu times each kernel node of the replay)
for impl in new base; do
  [ $impl = base ] && [ $(( $(date +%s) - t0 )) -gt 330 ] && { el "ncu base skipped (time)"; continue; }
  bin=$G/bin/train-bench; [ $impl = base ] && bin=$G/bin/train-bench-base
  timeout 60 ncu --clock-control none --csv --metrics gpu__time_duration.sum $bin --device cuda --cases bert --dtypes bfloat16 --graph on --warmup 1 --steps 1 > "$OUT/ncu-$impl.csv" 2> "$OUT/ncu-$impl.err"
  el "ncu $impl rc=$?"
  python3 benchmark/train/runs/2026-11-27-h200-amp-linear/ncu_sum.py "$OUT/ncu-$impl.csv" > "$OUT/ncu-summary-$impl.txt" 2>&1; head -32 "$OUT/ncu-summary-$impl.txt"
  gzip -9 "$OUT/ncu-$impl.csv"
done
# 4. PyTorch, same BERT case (eager float32 and bf16 autocast)
[ $(( $(date +%s) - t0 )) -lt 400 ] && timeout 50 python3 benchmark/train/train_torch.py --cases bert --modes eager,autocast-bf16 --steps 20 > "$OUT/torch.jsonl" 2> "$OUT/torch.err"
el "torch rc=$?"; cat "$OUT/torch.jsonl" 2>/dev/null
# at most 8 files come back: everything in one archive, the summaries beside it
(cd "$OUT" && tar czf /tmp/all.tgz --exclude=all.tgz . && find . -mindepth 1 -maxdepth 1 ! -name "ncu-summary-*" ! -name "magpie-*.jsonl" ! -name torch.jsonl -exec rm -rf {} + && mv /tmp/all.tgz .)
