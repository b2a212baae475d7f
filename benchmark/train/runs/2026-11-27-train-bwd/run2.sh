#!/usr/bin/env bash
# Second call: kbench.py (benchmark/train/kernels/) with main's kernels (base), this branch's as
# built for train-bench (new: blocks longest first, 3 blocks an SM for the d64 dQ kernel, 16-byte
# row sums, add_ln_fwd_v4) and a variant (kreg: the d64 dK/dV kernel keeping its K and V
# fragments in registers), compiled here by `kbench.py compile` into $G/kb, timed with the stream
# held (no host time between launches); then ncu (its default locked clocks) of one launch of each.
set -u
G=${G:-.gpu-train}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
timeout 120 python3 $G/kbench.py run $G/kb base new kreg > "$OUT/kbench.jsonl" 2> "$OUT/kbench.err"
el "kbench rc=$?"; cat "$OUT/kbench.jsonl"; tail -5 "$OUT/kbench.err"
KB_NCU=1 timeout 150 ncu --csv --kernel-name regex:"flash_bwd|add_ln_fwd" --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section WarpStateStats --section ComputeWorkloadAnalysis python3 $G/kbench.py run $G/kb base new kreg > "$OUT/ncu-kbench.csv" 2> "$OUT/ncu-kbench.err"
el "ncu rc=$?"; tail -3 "$OUT/ncu-kbench.err"
python3 - "$OUT/ncu-kbench.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10 and (r[0] == "ID" or r[0].isdigit())]
ix = {h: i for i, h in enumerate(rows[0])}
keep = ("Duration", "Registers Per Thread", "Achieved Occupancy", "Compute (SM) Throughput", "DRAM Throughput", "Issue Slots Busy")
cur = None
for r in rows[1:]:
    if r[ix["Metric Name"]] in keep:
        k = (r[ix["ID"]], r[ix["Kernel Name"]][:22])
        if k != cur:
            print(); print(*k, end=": "); cur = k
        print(f'{r[ix["Metric Name"]]}={r[ix["Metric Value"]]}{r[ix["Metric Unit"]]}', end="; ")
print()
PY
