#!/usr/bin/env bash
# On the GPU machine, one command for the whole model benchmark, one step after the other on the same GPU:
#   1. the device floors (copy bandwidth, bf16 / f32 matmul peaks)       -> floors.jsonl
#   2. PyTorch: transformers eager (sdpa, generate())                    -> transformers.jsonl
#   3. PyTorch: static cache + torch.compile(mode="reduce-overhead")     -> compile.jsonl
#   4. torch-magpie's bench-models, fused engine (--path fused)          -> magpie.jsonl
#   5. torch-magpie's bench-models, module path (--path module)          -> magpie-module.jsonl
#   6. the table                                                         -> results.md (and stdout)
#
#   BENCH_BIN=path/to/bench-models OUT=results-dir bash benchmark/models/run.sh [--reps N] [--cases a,b,...]
#
# Other arguments (--cases, --reps, --warmup, --metrics) go to steps 2-5 alike. Without --cases every
# case runs. A failing or timed-out step (STEP_TIMEOUT seconds, default 600) leaves what it wrote and the
# others still run; the report shows what is there. SKIP="compile module" (any of floors eager compile
# fused module) leaves steps out.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-.}
bin=${BENCH_BIN:-target/release/bench-models}
step_timeout=${STEP_TIMEOUT:-600}
skip=" ${SKIP:-} "
all_cases=gpt2,llama-3.2-1b,llama-3.2-1b-prefill-100k,llama-3.2-1b-b16,llama-3.2-1b-b64,bert,bert-bf16
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}

args=("$@")
case " $* " in
  *" --cases "*|*" --cases="*) ;;
  *) args=(--cases "$all_cases" "${args[@]}") ;;
esac

start=$SECONDS
step() {  # step NAME OUTFILE COMMAND...: runs unless skipped, stdout to OUTFILE, reports rc and seconds
  local name=$1 file=$2; shift 2
  if [[ $skip == *" $name "* ]]; then echo "== $name: skipped"; return; fi
  local t0=$SECONDS
  echo "== $name -> $file"
  timeout "$step_timeout" "$@" > "$file"
  echo "== $name rc=$? ($((SECONDS - t0)) s)"
}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
step floors "$out/floors.jsonl" python3 "$here/transformers_bench.py" --floors
step eager "$out/transformers.jsonl" python3 "$here/transformers_bench.py" --impl eager "${args[@]}"
step compile "$out/compile.jsonl" python3 "$here/transformers_bench.py" --impl compile "${args[@]}"
if [[ -x $bin ]]; then
  step fused "$out/magpie.jsonl" "$bin" --configs "$here/configs" "${args[@]}" --path fused
  step module "$out/magpie-module.jsonl" "$bin" --configs "$here/configs" "${args[@]}" --path module
else
  echo "== torch-magpie: no binary at $bin (set BENCH_BIN), its columns stay empty"
fi
files=()
for f in floors transformers compile magpie magpie-module; do
  [[ -s $out/$f.jsonl ]] && files+=("$out/$f.jsonl")
done
python3 "$here/report.py" "${files[@]}" | tee "$out/results.md"
echo "== total $((SECONDS - start)) s"
