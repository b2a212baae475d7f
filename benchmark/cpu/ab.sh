#!/usr/bin/env bash
# Ours vs PyTorch, alternating, for a machine whose speed drifts: for each case of cases.json whose
# name contains one of the given strings, runs torch-magpie's bench-cpu on that case alone, then
# PyTorch's, ROUNDS times (default 5), and prints each pair's times, the ratio PyTorch/ours (> 1: we
# are faster) and the 1-minute load average; then the median ratio per case.
# usage: THREADS=1 BENCH_STAT=min benchmark/cpu/ab.sh [ROUNDS] "sum rows" "mul 16M" ...
# BASE_BIN=path/to/another/bench-cpu adds that build (e.g. main's) to each round, before ours,
# and its ratio PyTorch/base.
# (no names: every case; CASES=file for another case list). Needs bench-cpu built (`cargo build --release -p magpie-bench`).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
THREADS=${THREADS:-1}
ROUNDS=5
if [[ ${1:-} =~ ^[0-9]+$ ]]; then ROUNDS=$1; shift; fi
BIN="${CARGO_TARGET_DIR:-target}/release/bench-cpu"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$PY - "$tmp" "$@" <<'PYEOF'
import json, os, sys
out, pats = sys.argv[1], sys.argv[2:]
cases = json.load(open(os.environ.get("CASES", "benchmark/cpu/cases.json")))["cases"]
sel = [c for c in cases if not pats or any(p in c["name"] for p in pats)]
for i, c in enumerate(sel):
    json.dump({"cases": [c]}, open(f"{out}/{i:02d}.json", "w"))
PYEOF
for f in "$tmp"/[0-9]*.json; do
  name=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['cases'][0]['name'])" "$f")
  ratios=()
  bratios=()
  for r in $(seq "$ROUNDS"); do
    base=""
    if [[ -n ${BASE_BIN:-} ]]; then
      base=$(RAYON_NUM_THREADS=$THREADS "$BASE_BIN" "$f" | $PY -c "import json,sys; print(json.loads(sys.stdin.readline())['seconds'])")
    fi
    ours=$(RAYON_NUM_THREADS=$THREADS "$BIN" "$f" | $PY -c "import json,sys; print(json.loads(sys.stdin.readline())['seconds'])")
    theirs=$(OMP_NUM_THREADS=$THREADS $PY -c "import torch; torch.set_num_threads($THREADS); import runpy, sys; sys.argv=['torch_bench.py','$f']; runpy.run_path('benchmark/cpu/torch_bench.py', run_name='__main__')" | $PY -c "import json,sys; print(json.loads(sys.stdin.readline())['seconds'])")
    load=$(cut -d' ' -f1 /proc/loadavg)
    ratio=$($PY -c "print(f'{$theirs/$ours:.3f}')")
    ratios+=("$ratio")
    extra=""
    if [[ -n $base ]]; then
      bratio=$($PY -c "print(f'{$theirs/$base:.3f}')")
      bratios+=("$bratio")
      extra=$($PY -c "print(f'  base {$base*1e3:9.3f} ms  base ratio {$bratio}')")
    fi
    $PY -c "print(f'{\"$name\":36s} round $r  ours {$ours*1e3:9.3f} ms  PyTorch {$theirs*1e3:9.3f} ms  ratio {$ratio}  load $load$extra')"
  done
  if [[ ${#bratios[@]} -gt 0 ]]; then
    $PY -c "import statistics,sys; r=[float(x) for x in sys.argv[1:]]; print(f'{\"$name\":36s} base median ratio {statistics.median(r):.3f} (min {min(r):.3f}, max {max(r):.3f})')" "${bratios[@]}"
  fi
  $PY -c "import statistics,sys; r=[float(x) for x in sys.argv[1:]]; print(f'{\"$name\":36s} median ratio {statistics.median(r):.3f} (min {min(r):.3f}, max {max(r):.3f}, {len(r)} rounds)')" "${ratios[@]}"
done
