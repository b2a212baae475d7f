#!/usr/bin/env bash
# Final call, from the repo root of main's checkout on the GPU machine (no Rust there), with
# prebuilt binaries (stripped, xz -9) in $G/bin: train-bench of this branch (new) and of main at
# 98e300f (base); this branch's GPU test binaries in $G/tests (shared/tools/gpu-stage); this
# folder's unxz.py. Writes to $OUT.
set -u
G=${G:-.gpu-train}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 "$G/unxz.py" "$G"/bin/*.xz "$G"/tests/bin/*.xz; chmod +x "$G"/bin/* "$G"/tests/bin/* 2>/dev/null
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
# 1. train-bench, graphed steps: this branch's binary and main's in the same run
for impl in new base; do
  bin=$G/bin/train-bench; [ $impl = base ] && bin=$G/bin/train-bench-base
  timeout 90 $bin --device cuda --cases gpt2-small,bert --dtypes bfloat16 --graph on --steps 20 > "$OUT/magpie-$impl.jsonl" 2>&1
  el "train-bench $impl rc=$?"
done
grep -h '"case"' "$OUT"/magpie-*.jsonl | cut -c1-330
# 2. GPU tests (MAGPIE_REQUIRE_CUDA=1 in run.sh)
rm -rf .gpu && cp -r "$G/tests" .gpu && mkdir -p "$OUT/tests" && OUT="$OUT/tests" timeout 150 bash .gpu/run.sh > "$OUT/tests.out" 2>&1
el "tests rc=$?"; grep -E "FAILED|panicked|test result|passed," "$OUT/tests.out" | head -30
# 3. PyTorch: GPT-2 small under autocast, eager and torch.compile
timeout 150 python3 benchmark/train/train_torch.py --cases gpt2-small --modes autocast-bf16,compile-autocast-bf16 --steps 20 > "$OUT/torch.jsonl" 2> "$OUT/torch.err"
el "torch rc=$?"; cut -c1-300 "$OUT/torch.jsonl"
# 4. each GPT-2 small graphed step again, if time is left
if [ $(( $(date +%s) - t0 )) -lt 300 ]; then
  for impl in new base; do
    bin=$G/bin/train-bench; [ $impl = base ] && bin=$G/bin/train-bench-base
    timeout 40 $bin --device cuda --cases gpt2-small --dtypes bfloat16 --graph on --steps 20 > "$OUT/magpie-$impl-again.jsonl" 2>&1
  done
  el "again"; grep -h '"case"' "$OUT"/magpie-*-again.jsonl | cut -c1-330
fi
# few files come back: the logs in one archive, the summaries beside it
(cd "$OUT" && tar czf /tmp/all.tgz . && find . -mindepth 1 -maxdepth 1 ! -name "ncu-*" ! -name "magpie-*.jsonl" ! -name torch.jsonl ! -name gpu.txt -exec rm -rf {} + && mv /tmp/all.tgz .)
