#!/usr/bin/env bash
# On the GPU machine, from the repo root: times and profiles the two fused-engine rows of issue 13
# that miss their targets, GPT-2 6/768 f32 prefill of 128 tokens and Llama-3.2-1B bf16 batch-1 decode.
#
#   BENCH_BIN=path/to/bench-models OUT=results-dir bash benchmark/models/profile_prefill_decode.sh
#
# 1. bench-models --metrics prefill (GPT-2), --reps 3: the row's time (the run also compiles the
#    engine's f32 kernels into the on-disk cache the later steps use)
# 2. ncu over one GPT-2 prefill (warmup 1, reps 1: every kernel of the process is profiled, the
#    last prefill is cut out by profile_ncu.py from its first kernel, fused_embed, to the end)
# 3. ncu over ~3 replayed Llama decode steps (graph nodes profiled one by one), after skipping the
#    build, the prefill and the first steps
# 4. bench-models --metrics decode,decode_steady (Llama), --reps 3: the row's time
# 5. with FLOORS=1 the device floors (copy rate, f32 / bf16 matmul peaks, PyTorch); the tables
# ncu replays each kernel alone with its caches flushed (--cache-control all, the default) and
# without PDL overlap, so a step's kernel sum is more than its time in the CUDA graph; the split
# between kernels is what it shows. --clock-control none leaves the clocks as they run.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-.}
bin=${BENCH_BIN:-target/release/bench-models}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
models=benchmark/models  # run from the repo root: the configs and transformers_bench.py of the checkout
cfg="--configs $models/configs"
T0=$SECONDS
t() { echo "## $1 rc=$2 at $((SECONDS - T0)) s" | tee -a "$out/steps.txt"; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"

M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__waves_per_multiprocessor,sm__throughput.avg.pct_of_peak_sustained_elapsed
# GPT-2 first (its first run compiles the f32 kernels), then Llama (its ncu run compiles the bf16 ones)
timeout 150 "$bin" $cfg --cases gpt2 --metrics prefill --reps 3 --path fused > "$out/prefill.jsonl"; t prefill $?
timeout ${NCU_PREFILL_S:-90} "$ncu" --clock-control none --print-units base --launch-count ${PREFILL_LAUNCHES:-1500} --metrics $M --csv \
  "$bin" $cfg --cases gpt2 --metrics prefill --warmup 1 --reps 1 --path fused > "$out/ncu-prefill.csv" 2> "$out/ncu-prefill.err"; t ncu-prefill $?
timeout ${NCU_DECODE_S:-150} "$ncu" --clock-control none --print-units base --launch-skip ${DECODE_SKIP:-2500} --launch-count ${DECODE_LAUNCHES:-330} \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv \
  "$bin" $cfg --cases llama-3.2-1b --metrics decode --warmup 0 --reps 1 --path fused > "$out/ncu-decode.csv" 2> "$out/ncu-decode.err"; t ncu-decode $?
timeout 90 "$bin" $cfg --cases llama-3.2-1b --metrics decode,decode_steady --warmup 1 --reps 3 --path fused > "$out/decode.jsonl"; t decode $?
# FLOORS=1: the copy rate and matmul peaks measured here too (PyTorch); otherwise profile_ncu.py
# takes them from the last run that measured them (benchmark/models/runs/2026-11-27-h200-decode-split)
fl=()
if [ "${FLOORS:-0}" = 1 ]; then timeout 60 python3 "$models/transformers_bench.py" --floors > "$out/floors.jsonl"; t floors $?; fl=(--floors "$out/floors.jsonl"); fi
python3 "$here/profile_ncu.py" "${fl[@]}" --prefill "$out/ncu-prefill.csv" --decode "$out/ncu-decode.csv" \
  --times "$out/prefill.jsonl" "$out/decode.jsonl" > "$out/profile.md"; t report $?
# the CSVs are large: keep them gzipped
gzip -9f "$out"/ncu-*.csv
t total 0
