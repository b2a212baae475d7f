#!/usr/bin/env bash
# The short second run of fused_quant_fold_gpu.sh (same layout of D and OUT), after x coded by the
# block became the default of the folded Q4_K GEMV: the folded step's GPU tests but the long
# module-path comparison, the decode speeds again (default, --lane-coding, --unfolded, main's
# build), the folded Q4_K GEMV per shape beside the core's, an ncu split of the default step,
# and the core's Q4_K GEMV bench as time allows.
#     D=.gpu-quant OUT=/tmp/out bash benchmark/load/fused_quant_fold_gpu_short.sh
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
[ -f "$D/root" ] && orig=$(cat "$D/root") && [ ! -e "$orig" ] && mkdir -p "$(dirname "$orig")" && ln -s "$root" "$orig"
B="$D/bin"
M=/tmp/m
mkdir -p "$M"
timeout 150 "$B/load-bench" make "$M" --only gguf > /dev/null 2>&1 &
make_pid=$!
{
  (cd crates/magpie-models && timeout 40 "$(ls $B/fused_quant_fold-* | head -1)" --test-threads 1); el "fused_quant_fold rc=$?"
  (cd crates/magpie-models && timeout 60 "$(ls $B/fused_quant-* | head -1)" --test-threads 1 --nocapture folded_quantized_step quantized_graph_replay); el "fused_quant (2 tests) rc=$?"
} 2>&1 | grep -E "^test |test result|rc=|within|part" | tee "$OUT/tests.txt"
wait $make_pid; el "make rc=$?"
F="$M/model-Q4_K.gguf"
{
  for c in "--path fused" "--path fused --lane-coding" "--path fused --unfolded" "MAIN --path fused" "--path fused"; do
    set -- $c
    if [ "$1" = MAIN ]; then shift; bin="$B/load-bench-main"; else bin="$B/load-bench"; fi
    timeout 60 "$bin" decode "$F" --new 128 "$@"; el "decode $c rc=$?"
  done
} 2>&1 | tee "$OUT/decode.txt"
timeout 60 "$B/quant_fold_bench" 2>&1 | tee "$OUT/fold-bench.txt"; el "quant_fold_bench rc=$?"
timeout 80 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv \
  "$B/load-bench" decode "$F" --new 3 --path fused > "$OUT/ncu.csv" 2> /dev/null; el "ncu rc=$?"
python3 "$D/ncu_decode_steps.py" "$OUT/ncu.csv" > "$OUT/ncu-steps.txt" 2>&1
head -30 "$OUT/ncu-steps.txt"
gzip -9 -f "$OUT/ncu.csv"
left=$(( 240 - ($(date +%s) - t0) ))
[ $left -gt 30 ] && [ -x "$B/quant_gemv_bench" ] && { timeout $left "$B/quant_gemv_bench" > "$OUT/gemv-bench.txt" 2>&1; el "quant_gemv_bench rc=$?"; }
el done
