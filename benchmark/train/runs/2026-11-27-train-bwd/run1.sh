#!/usr/bin/env bash
# First call (early check): kbench.py (benchmark/train/kernels/) runs main's kernels (base) and this
# branch's (lpt: blocks longest first only; new: also 3 blocks an SM at d64, 16-byte row sums,
# add_ln_fwd_v4), compiled here by `kbench.py compile` into $G/kb, checks them against PyTorch
# float32 math and times them; then ncu of one launch of each at the GPT-2 small shapes.
set -u
G=${G:-.gpu-train}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
timeout 120 python3 $G/kbench.py run $G/kb base lpt new > "$OUT/kbench.jsonl" 2> "$OUT/kbench.err"
el "kbench rc=$?"; cat "$OUT/kbench.jsonl"; tail -5 "$OUT/kbench.err"
KB_NCU=1 timeout 150 ncu --csv --kernel-name regex:"flash_bwd|add_ln_fwd" --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section ComputeWorkloadAnalysis python3 $G/kbench.py run $G/kb base lpt new > "$OUT/ncu-kbench.csv" 2> "$OUT/ncu-kbench.err"
el "ncu rc=$?"; tail -3 "$OUT/ncu-kbench.err"
python3 - "$OUT/ncu-kbench.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ix = {h: i for i, h in enumerate(hdr)}
keep = ("Duration", "Registers Per Thread", "Achieved Occupancy", "Theoretical Occupancy", "Compute (SM) Throughput", "Memory Throughput",
        "Block Limit Registers", "Block Limit Shared Mem", "Issue Slots Busy", "Warp Cycles Per Issued Instruction", "Executed Ipc Active", "DRAM Throughput")
for r in rows[1:]:
    if r[ix["Metric Name"]] in keep:
        print(r[ix["ID"]], r[ix["Kernel Name"]][:22], r[ix["Metric Name"]], r[ix["Metric Value"]], r[ix["Metric Unit"]])
PY
