#!/usr/bin/env bash
# The fused engine on quantized GGUF weights, on the GPU machine, in one run: the GPU tests, the
# decode speed of the Llama-3.2-1B-shaped Q4_K file (fused engine, module path, the module path of
# an older build beside it, and the same file dequantized to bf16 on the fused engine), and an ncu
# split of the fused engine's decode steps. Run from the repo root with D naming a folder that
# holds bin/ (test binaries fused_quant-*, fused-*; load-bench; optionally load-bench-base, the
# older build), and OUT a folder for the logs:
#     D=.gpu-quant OUT=/tmp/out bash benchmark/load/fused_quant_gpu.sh
set -u
D=$(cd "${D:-.gpu-quant}" && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export MAGPIE_REQUIRE_CUDA=1 RUST_BACKTRACE=1
root=$(pwd)
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$OUT/log.txt"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/log.txt"
# test binaries resolve fixtures through the build machine's CARGO_MANIFEST_DIR
[ -f "$D/root" ] && orig=$(cat "$D/root") && [ ! -e "$orig" ] && mkdir -p "$(dirname "$orig")" && ln -s "$root" "$orig"
LB="$D/bin/load-bench"
M=/tmp/m
mkdir -p "$M"
timeout 120 "$LB" make "$M" --only gguf > "$OUT/make.txt" 2>&1; el "make rc=$?"
F="$M/model-Q4_K.gguf"
# 1. the quantized fused engine's tests
(cd crates/magpie-models && timeout 200 "$(ls $D/bin/fused_quant-* | head -1)" --test-threads 1) > "$OUT/tests.txt" 2>&1; el "fused_quant tests rc=$?"
grep -E "^test |test result" "$OUT/tests.txt" | tee -a "$OUT/log.txt"
# 2. decode speed, greedy, 128 new tokens, bf16 activations
{
  for c in "fused" "module" "fused --dense"; do
    set -- $c
    timeout 90 "$LB" decode "$F" --new 128 --path $1 ${2:-}; el "decode $c rc=$?"
  done
  [ -x "$D/bin/load-bench-base" ] && { timeout 90 "$D/bin/load-bench-base" decode "$F" --new 128; el "base module decode rc=$?"; }
  timeout 90 "$LB" decode "$F" --new 128 --path fused; el "decode fused (again) rc=$?"
} 2>&1 | tee "$OUT/decode.txt"
# 3. where a fused quantized decode step's time goes (each kernel alone, cold caches)
if [ $(( $(date +%s) - t0 )) -lt 400 ]; then
  timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv \
    "$LB" decode "$F" --new 3 --path fused > "$OUT/ncu.csv" 2> "$OUT/ncu.err"; el "ncu rc=$?"
  # the summarizer beside this script (the checkout there may be older than this one)
  python3 "$(dirname "$0")/ncu_decode_steps.py" "$OUT/ncu.csv" > "$OUT/ncu-steps.txt" 2>&1
  head -40 "$OUT/ncu-steps.txt"
  gzip -9 -f "$OUT/ncu.csv"
fi
# 4. the dense engine's tests (regression of the shared code), as time allows
left=$(( 560 - ($(date +%s) - t0) ))
if [ $left -gt 40 ]; then
  (cd crates/magpie-models && timeout $left "$(ls $D/bin/fused-* | head -1)" --test-threads 1 float32_greedy prefill_and_decode graph_replay fused_decode_step batches_of bad_inputs sampling_on) > "$OUT/tests-dense.txt" 2>&1; el "fused (dense) tests rc=$?"
  grep -E "^test |test result" "$OUT/tests-dense.txt" | tee -a "$OUT/log.txt"
fi
el done
