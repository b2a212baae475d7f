#!/usr/bin/env bash
# On the GPU machine, from the repo root: benchmark (main's binary beside this branch's, variants),
# the fused tests, torch.compile beside, an ncu profile. Everything to $OUT.
# Expects in .gpu-decode/bin: bench-models-base (commit 4299c8b), bench-models and the fused test
# binary of the commit under test (gzipped), built on another machine. This is run 2's variant list;
# run 1 (commit 25e00f5) ran: base, new, MAGPIE_FUSED_PF_MB=0, =0 with MAGPIE_FUSED_ARGMAX=0, =12,
# =36 (the last three on llama-3.2-1b only), and ncu with --launch-count 100.
set -uo pipefail
G=.gpu-decode
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export CUDA_HOME=/usr/local/cuda CUDA_PATH=/usr/local/cuda
gunzip -f $G/bin/*.gz; chmod +x $G/bin/*
root=$(pwd)
[ -e /work/wt-decode ] || { mkdir -p /work && ln -s "$root" /work/wt-decode; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
T0=$SECONDS
A="--configs benchmark/models/configs --metrics decode,decode_steady --reps 3 --path fused"
v() { local name=$1 cases=$2 bin=$3; shift 3; echo "# $name"; env "$@" $G/bin/$bin --cases $cases $A; echo "## $name done at $((SECONDS-T0)) s" >&2; }
{
v base gpt2,llama-3.2-1b bench-models-base
v new gpt2,llama-3.2-1b bench-models
v new-argmax0 gpt2,llama-3.2-1b bench-models MAGPIE_FUSED_ARGMAX=0
v new-pf12 llama-3.2-1b bench-models MAGPIE_FUSED_PF_MB=12
v new-pf24 gpt2,llama-3.2-1b bench-models MAGPIE_FUSED_PF_MB=24
v base-again llama-3.2-1b bench-models-base
} > $OUT/variants.jsonl 2> $OUT/variants.err
echo "bench done $((SECONDS-T0)) s"
# the fused tests (GPU required)
(cd crates/magpie-models && MAGPIE_REQUIRE_CUDA=1 RUST_BACKTRACE=1 CARGO_MANIFEST_DIR=/work/wt-decode/crates/magpie-models $root/$G/bin/fused --test-threads=1) > $OUT/tests.txt 2>&1; echo "tests rc=$? $((SECONDS-T0)) s"; grep -E "^test |test result" $OUT/tests.txt
# torch.compile and the floors beside the new binary (the fused rows again)
OUT=$OUT/bench SKIP="eager module" BENCH_BIN=$G/bin/bench-models STEP_TIMEOUT=200 bash benchmark/models/run.sh --cases gpt2,llama-3.2-1b --metrics decode,decode_steady --reps 3 > $OUT/run.txt 2>&1
echo "run.sh done $((SECONDS-T0)) s"; tail -12 $OUT/run.txt
# ncu: the kernels of a few decode steps (isolated, cold caches)
timeout 100 ncu --clock-control none --kernel-name regex:'fused_|decode_' --launch-skip 300 --launch-count 170 --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active --csv $G/bin/bench-models --cases llama-3.2-1b $A --reps 1 --warmup 0 > $OUT/ncu.csv 2> $OUT/ncu.err
echo "ncu rc=$? $((SECONDS-T0)) s"
python3 benchmark/models/ncu_steps.py $OUT/ncu.csv > $OUT/ncu-steps.txt 2>&1; cat $OUT/ncu-steps.txt | head -20
