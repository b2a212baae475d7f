#!/usr/bin/env bash
# On an H100/H200: the Hopper flash attention forward (MAGPIE_FLASH_D64 variants 7-12) beside the
# mma.sync kernel (variant 3) and PyTorch's SDPA, then the 100k Llama-3.2-1B prefill with the
# fastest Hopper variant and with variant 3 (same binary), and ncu of one launch.
#
#   BIN=target/release OUT=dir bash benchmark/flash/sm90_run.sh
#
# BIN holds `examples/flash_bench` (cargo build --release -p magpie-core --example flash_bench) and
# `bench-models` (cargo build --release -p magpie-bench-models). BEST (the variant used for the
# prefill and ncu) is the fastest Hopper variant at d = 64, 100k tokens, in this run.
set -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BIN:-$root/target/release}
OUT=${OUT:-.}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
L=$OUT/sm90.log
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$L"
timeout 150 "$BIN/examples/flash_bench" --prefill-only --variants 3,7,8,9,10,11,12 2>&1 | tee -a "$L"
BEST=$(grep "d=64 .*q=100000 kv=100000 variant" "$L" | grep flash_sm90 | sed 's/.*variant \([0-9]*\) .*, \([0-9.]*\) TFLOP.*/\2 \1/' | sort -g | tail -1 | cut -d' ' -f2)
echo "== BEST=$BEST" | tee -a "$L"
timeout 100 python3 "$here/sdpa_fwd_torch.py" 2>&1 | tee -a "$L"
mkdir -p "$OUT/m"
MAGPIE_FLASH_D64=$BEST SKIP="floors compile module" BENCH_BIN=$BIN/bench-models OUT=$OUT/m STEP_TIMEOUT=150 \
  bash "$root/benchmark/models/run.sh" --cases llama-3.2-1b-prefill-100k 2>&1 | tail -15 | tee -a "$L"
MAGPIE_FLASH_D64=3 timeout 100 "$BIN/bench-models" --configs "$root/benchmark/models/configs" \
  --cases llama-3.2-1b-prefill-100k --path fused 2>>"$L" | tee "$OUT/m/variant3.jsonl" | tee -a "$L"
MAGPIE_FLASH_D64=$BEST timeout 100 ncu --launch-count 1 -k regex:flash_sm90 --section SpeedOfLight \
  --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats \
  "$BIN/examples/flash_bench" --prefill-only --variants "$BEST" --seqs 16384 > "$OUT/ncu.txt" 2>&1
echo "== ncu rc=$?" | tee -a "$L"
