#!/usr/bin/env bash
# The folded quantized decode step of the fused engine, on the GPU machine, in one run: its GPU
# tests, the decode speed of the Llama-3.2-1B-shaped Q4_K file (folded step with x coded per lane
# and by the block, the unfolded step, main's build, the module path), the folded Q4_K GEMV per
# layer shape, an ncu split of one decode step, the core's Q4_K GEMV per shape, and `magpie
# generate` on a small GGUF file. Run from the repo root with D naming a folder that holds bin/
# (test binaries fused_quant_fold-*, fused_quant-*, optionally fused-*; load-bench; load-bench-main,
# main's build; quant_fold_bench; optionally quant_gemv_bench; magpie) and OUT a folder for the logs:
#     D=.gpu-quant OUT=/tmp/out bash benchmark/load/fused_quant_fold_gpu.sh
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
B="$D/bin"
M=/tmp/m
mkdir -p "$M"
timeout 150 "$B/load-bench" make "$M" --only gguf > "$OUT/make.txt" 2>&1 &
make_pid=$!
# 1. tests: the folded kernel against its reference, the quantized engine against the module path
# and the unfolded step, the dense engine (shared code)
{
  (cd crates/magpie-models && timeout 60 "$(ls $B/fused_quant_fold-* | head -1)" --test-threads 1); el "fused_quant_fold rc=$?"
  (cd crates/magpie-models && timeout 150 "$(ls $B/fused_quant-* | head -1)" --test-threads 1 --nocapture); el "fused_quant rc=$?"
  if ls $B/fused-* > /dev/null 2>&1; then
    (cd crates/magpie-models && timeout 60 "$(ls $B/fused-* | head -1)" --test-threads 1 graph_replay fused_decode_step batches_of bad_inputs); el "fused (dense) rc=$?"
  fi
} > "$OUT/tests.txt" 2>&1
grep -E "^test |test result|rc=|within" "$OUT/tests.txt" | tee -a "$OUT/log.txt"
wait $make_pid; el "make rc=$?"
F="$M/model-Q4_K.gguf"
# 2. decode speed, greedy, 128 new tokens, bf16 activations
{
  for c in "--path fused" "--path fused --block-coding" "--path fused --unfolded" "MAIN --path fused" "--path module" "--path fused"; do
    set -- $c
    if [ "$1" = MAIN ]; then shift; bin="$B/load-bench-main"; else bin="$B/load-bench"; fi
    timeout 60 "$bin" decode "$F" --new 128 "$@"; el "decode $c rc=$?"
  done
} 2>&1 | tee "$OUT/decode.txt"
# 3. the folded Q4_K GEMV per layer shape and as the 16-layer chain
timeout 60 "$B/quant_fold_bench" 2>&1 | tee "$OUT/fold-bench.txt"; el "quant_fold_bench rc=$?"
# 4. where a folded decode step's time goes (each kernel alone, cold caches)
timeout 100 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv \
  "$B/load-bench" decode "$F" --new 3 --path fused > "$OUT/ncu.csv" 2> "$OUT/ncu.err"; el "ncu rc=$?"
python3 "$D/ncu_decode_steps.py" "$OUT/ncu.csv" > "$OUT/ncu-steps.txt" 2>&1
head -30 "$OUT/ncu-steps.txt"
gzip -9 -f "$OUT/ncu.csv"
# 5. magpie generate on a small GGUF file (the tiny Q4_K fixture), fused (the default) and module
G=crates/magpie-io/tests/fixtures/gguf/tiny-llama-Q4_K.gguf
for p in fused module; do
  timeout 30 "$B/magpie" generate --model $G --device cuda --dtype bfloat16 --path $p --input-ids 1,20,30 --max-new-tokens 8 --print-ids 2>&1 | tail -3; el "magpie generate --path $p rc=$?"
done | tee "$OUT/generate.txt"
# 6. the core's Q4_K GEMV per shape, as time allows
left=$(( 360 - ($(date +%s) - t0) ))
[ $left -gt 30 ] && [ -x "$B/quant_gemv_bench" ] && { timeout $left "$B/quant_gemv_bench" > "$OUT/gemv-bench.txt" 2>&1; el "quant_gemv_bench rc=$?"; }
el done
