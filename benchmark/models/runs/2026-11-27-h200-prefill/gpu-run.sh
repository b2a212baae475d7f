#!/usr/bin/env bash
# The device run of benchmark/NOTES.md "2026-11-27: prefill products through cuBLASLt, short
# attention". From the repo root on the GPU machine, with the staged files in $G:
#   $G/gpu/            the test binaries (../shared/tools/gpu-stage -p magpie-models --test fused
#                      --test fused_lt --test fused_short_attn), gzipped
#   $G/bench-models    this branch's release binary; $G/bench-models-main: main's, beside it
#   G=.gpu-prefill OUT=dir bash benchmark/models/runs/2026-11-27-h200-prefill/gpu-run.sh
# 1. the tests; 2. GPT-2 prefill 128 and Llama-3.2-1B prefill 32 for main's binary and each
# variant of the branch's (MAGPIE_FUSED_LT, MAGPIE_FUSED_SHORT_ATTN), the cuBLASLt choices logged;
# 3. the 100k-token prefill, main and branch; 4. transformers eager beside; 5. ncu over one GPT-2
# prefill of the branch (profile_ncu.py's prefill table).
set -uo pipefail
G=${G:-.gpu-prefill}
out=${OUT:-/tmp/prefill-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
cfg="--configs benchmark/models/configs"
new=$G/bench-models
old=$G/bench-models-main
gunzip -f "$new.gz" "$old.gz" 2>/dev/null; chmod +x "$new" "$old"
T0=$SECONDS
log=$out/log.txt
t() { echo "## $1 rc=$2 at $((SECONDS - T0)) s" | tee -a "$log"; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$log"
# 1. tests (gpu-tests.log comes back in $OUT)
if [ -d "$G/gpu" ]; then
  rm -rf .gpu && cp -r "$G/gpu" .gpu && gunzip -f .gpu/bin/*.gz
  timeout ${TEST_S:-200} bash .gpu/run.sh --nocapture >> "$log" 2>&1; t tests $?
fi
# 2. short prefill rows, every variant in this one process order, lines prefixed with the variant
b=$out/bench.txt
run() {  # run NAME BIN [ENV...] -- ARGS
  local name=$1 bin=$2; shift 2
  env "$@" timeout 120 "$bin" $cfg --path fused --metrics prefill --reps ${REPS:-5} --cases ${CASES:-gpt2,llama-3.2-1b} 2>> "$log" | sed "s/^/$name /" >> "$b"
  t "$name" "${PIPESTATUS[0]}"
}
run main "$old"
run new "$new" MAGPIE_FUSED_LT_LOG=1
run lt0 "$new" MAGPIE_FUSED_LT=0
run sa0 "$new" MAGPIE_FUSED_SHORT_ATTN=0
# 3. the 100k prefill (one warm-up, one timed run)
for v in main new; do
  bin=$old; [ $v = new ] && bin=$new
  timeout 150 "$bin" $cfg --path fused --metrics prefill --warmup 1 --reps 1 --cases llama-3.2-1b-prefill-100k 2>> "$log" | sed "s/^/$v-100k /" >> "$b"; t "$v-100k" "${PIPESTATUS[0]}"
done
# 4. PyTorch beside (transformers eager, sdpa)
timeout 150 python3 benchmark/models/transformers_bench.py --impl eager --cases gpt2,llama-3.2-1b --metrics prefill --reps 5 2>> "$log" | sed "s/^/eager /" >> "$b"; t eager "${PIPESTATUS[0]}"
# 5. ncu over one GPT-2 prefill of the branch
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__waves_per_multiprocessor,sm__throughput.avg.pct_of_peak_sustained_elapsed
timeout ${NCU_S:-75} "$ncu" --clock-control none --print-units base --launch-count 1500 --metrics $M --csv \
  "$new" $cfg --cases gpt2 --metrics prefill --warmup 1 --reps 1 --path fused > "$out/ncu-prefill.csv" 2>> "$log"; t ncu $?
python3 benchmark/models/profile_ncu.py --prefill "$out/ncu-prefill.csv" > "$out/profile.md" 2>> "$log"; t report $?
gzip -9f "$out/ncu-prefill.csv"
t total 0
