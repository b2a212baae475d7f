#!/usr/bin/env bash
# The run of this folder, on the GPU machine (no Rust there): from the repo root, with the
# prebuilt binaries in $G/bin (train-bench of this branch, train-bench-base of main 4299c8b) and
# the staged GPU tests in $G/tests (see /work/shared/tools/gpu-stage). Writes everything to $OUT.
set -u
G=${G:-.gpu-bert}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
gunzip -f "$G"/bin/*.gz "$G"/tests/bin/*.gz 2>/dev/null; chmod +x "$G"/bin/* "$G"/tests/bin/* 2>/dev/null
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
# 1. GPU tests
rm -rf .gpu && cp -r "$G/tests" .gpu && bash .gpu/run.sh > "$OUT/tests.out" 2>&1; el "tests rc=$?"; tail -2 "$OUT/tests.out"
# 2. the float32 GEMM ceiling without TF32 (PyTorch keeps TF32 off by default), and bf16's
python3 - > "$OUT/gemm_peak.txt" 2>&1 <<'PY'
import torch
torch.backends.cuda.matmul.allow_tf32 = False
for dt, n in ((torch.float32, 8192), (torch.bfloat16, 8192), (torch.float32, 768)):
    a, b = torch.randn(n, n, device="cuda", dtype=dt), torch.randn(n, n, device="cuda", dtype=dt)
    for _ in range(3): a @ b
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps = 10 if n > 4096 else 200
    s.record()
    for _ in range(reps): a @ b
    e.record(); torch.cuda.synchronize()
    ms = s.elapsed_time(e) / reps
    print(f"{dt} {n}^3: {ms:.3f} ms, {2 * n**3 / ms / 1e9:.1f} TFLOP/s")
PY
el "gemm peak"; cat "$OUT/gemm_peak.txt"
# 3. train-bench: main's binary and this branch's, same run; the new one's pieces switched off one at a time
for impl in base new; do
  bin=$G/bin/train-bench; [ $impl = base ] && bin=$G/bin/train-bench-base
  $bin --device cuda --cases bert --dtypes float32,bfloat16 --graph both --steps 20 > "$OUT/magpie-$impl.jsonl" 2>&1
  $bin --device cuda --cases gpt2-small --dtypes bfloat16 --graph both --steps 20 >> "$OUT/magpie-$impl.jsonl" 2>&1
done
$G/bin/train-bench --device cuda --cases bert --dtypes bfloat16 --graph both --steps 20 --cache-casts off > "$OUT/magpie-new-nocache.jsonl" 2>&1
$G/bin/train-bench --device cuda --cases bert --dtypes bfloat16 --graph both --steps 20 --bert-loss logits > "$OUT/magpie-new-logits.jsonl" 2>&1
# the base binary again after the new one (run-to-run spread)
$G/bin/train-bench-base --device cuda --cases bert --dtypes bfloat16 --graph on --steps 20 > "$OUT/magpie-base-again.jsonl" 2>&1
el "train-bench"; cat "$OUT"/magpie-*.jsonl
# 4. PyTorch, same cases (this branch's train_torch.py: BERT's loss inside the model, labels=)
cp "$G/train_torch.py" benchmark/train/train_torch.py
python3 benchmark/train/train_torch.py --cases bert --steps 20 > "$OUT/torch.jsonl" 2> "$OUT/torch.err"
el "torch"; cat "$OUT/torch.jsonl"
python3 benchmark/train/report.py "$OUT/magpie-new.jsonl" "$OUT/torch.jsonl" > "$OUT/results.md" 2>&1
# 5. kernels of one replayed bf16 step (ncu times each kernel node of the replay)
for impl in new; do
  bin=$G/bin/train-bench; [ $impl = base ] && bin=$G/bin/train-bench-base
  timeout 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum $bin --device cuda --cases bert --dtypes bfloat16 --graph on --warmup 1 --steps 1 > "$OUT/ncu-$impl.csv" 2> "$OUT/ncu-$impl.err"
  el "ncu $impl rc=$?"
done
gzip -9 "$OUT"/ncu-*.csv
