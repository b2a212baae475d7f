#!/usr/bin/env bash
# Open-to-first-forward of a Llama-3.2-1B-shaped model with random weights, torch-magpie vs the
# Python loaders, in one run on one machine; writes benchmark/load/results.md and deletes the
# model files (~2.5 GB each) afterwards.
#
#   bash benchmark/load/run.sh [--reps 3]   # LOAD_DIR=/tmp/magpie-load, BENCH_BIN=<prebuilt load-bench>, REUSE=1
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=3
[ "${1:-}" = "--reps" ] && reps=$2
dir=${LOAD_DIR:-/tmp/magpie-load}
bin=${BENCH_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release -p magpie-bench-load >&2
  bin=${CARGO_TARGET_DIR:-target}/release/load-bench
fi
trap 'rm -rf "$dir"' EXIT
if [ -z "${REUSE:-}" ]; then   # REUSE=1: the files of an earlier `load-bench make $LOAD_DIR` (+ model.pt)
  rm -rf "$dir" && mkdir -p "$dir"
  "$bin" make "$dir"
fi
[ -f "$dir/model.pt" ] || python3 - "$dir" <<'PY'
import sys, torch
from safetensors.torch import load_file
d = sys.argv[1]
torch.save(load_file(f"{d}/hf/model.safetensors"), f"{d}/model.pt")
PY
ls -l "$dir" "$dir/hf" >&2
st=$dir/hf/model.safetensors; gg=$dir/model-Q4_K.gguf; pt=$dir/model.pt
cases=(
  "$bin time st $dir/hf"
  "$bin time gguf $gg"
  "$bin time st-tensors $st"
  "$bin time pt $pt"
  "python3 benchmark/load/load_python.py st_load_file $st"
  "python3 benchmark/load/load_python.py st_safe_open $st"
  "python3 benchmark/load/load_python.py gguf_reader $gg"
  "python3 benchmark/load/load_python.py gguf_reader_dequant $gg"
  "python3 benchmark/load/load_python.py torch_load $pt"
  "python3 benchmark/load/load_python.py torch_load_mmap $pt"
  "python3 benchmark/load/load_python.py hf_forward $dir/hf"
)
log=$(mktemp)
for c in "${cases[@]}"; do
  for r in $(seq "$reps"); do
    t0=$(date +%s%N)
    # a loader that cannot run here (e.g. the gguf package missing) is reported and skipped
    if ! out=$($c | tail -n 1) || [ "${out:0:1}" != "{" ]; then
      echo "skipped: $c" | tee -a "$log.skipped" >&2
      break
    fi
    wall=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "$out" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['process_s']=float(sys.argv[1])/1e3; print(json.dumps(d))" "$wall" | tee -a "$log" >&2
  done
done
python3 - "$log" "$reps" "$st" "$gg" "$pt" > benchmark/load/results.md <<'PY'
import json, os, statistics, sys, platform, subprocess, datetime
rows = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    rows.setdefault(d["loader"], []).append(d)
def med(v): return statistics.median(v) if v else None
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
import os
print("# Open to first forward: Llama-3.2-1B-shaped random weights (`bash benchmark/load/run.sh`)\n")
print(f"{datetime.date.today()}, {cpu}, {os.cpu_count()} cores; commit {os.environ.get('COMMIT') or subprocess.run(['git','rev-parse','--short','HEAD'],capture_output=True,text=True).stdout.strip()}; "
      f"median of {sys.argv[2]} runs, each in a fresh process, page cache warm (the files were just written).")
gb = [os.path.getsize(p) / 1e9 for p in sys.argv[3:6]]
print(f"Files: safetensors bf16 ({gb[0]:.2f} GB), GGUF with every 2-D weight Q4_K ({gb[1]:.2f} GB, our writer and quantizer), "
      f".pt zip bf16 ({gb[2]:.2f} GB, torch.save of the same state dict). `open` = file to model / tensors in memory, "
      "`forward` = the first forward of one token on the CPU in float32, `process` = the whole process "
      "(interpreter start and imports included).\n")
print("| loader | open ms | first forward ms | open + forward ms | process s | peak RSS MB |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for k, v in rows.items():
    f = [x["forward_ms"] for x in v if x["forward_ms"] is not None]
    fm = f"{med(f):.0f}" if f else "-"
    print(f"| {k} | {med([x['open_ms'] for x in v]):.0f} | {fm} | {med([x['total_ms'] for x in v]):.0f} | {med([x['process_s'] for x in v]):.2f} | {med([x['peak_rss_mb'] for x in v]):.0f} |")
if os.path.exists(sys.argv[1] + ".skipped"):
    print("\nNot run on this machine (the command failed): " + "; ".join(f"`{l.strip().split('load_python.py ')[-1]}`" for l in open(sys.argv[1] + ".skipped")))
PY
cat benchmark/load/results.md
