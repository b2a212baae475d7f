#!/usr/bin/env bash
# On the GPU machine, from the repo root: main's bench-models beside this branch's (the K-split
# rule by load rounds and the halving remainder batches of the fused GEMV), the old split rule with
# the new remainder batches, the fused tests, and an ncu count of GPT-2's prefill kernels.
# Everything to $OUT. Expects in $G/bin: bench-models-base (main, commit c366847), bench-models and
# `fused` (the test binary) of the commit under test, gzipped, built on another machine.
set -uo pipefail
G=${G:-.gpu-decode}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export CUDA_HOME=/usr/local/cuda CUDA_PATH=/usr/local/cuda
gunzip -f $G/bin/*.gz; chmod +x $G/bin/*
root=$(pwd)
# the test binary finds its fixtures under the path it was built in
[ -e /work/wt-decode ] || { mkdir -p /work && ln -s "$root" /work/wt-decode; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
T0=$SECONDS
A="--configs benchmark/models/configs --metrics decode,decode_steady --reps 3 --path fused"
v() { local name=$1 cases=$2 bin=$3; shift 3; echo "# $name"; timeout 90 env "$@" $G/bin/$bin --cases $cases $A; echo "## $name rc=$? done at $((SECONDS-T0)) s" >&2; }
{
v base gpt2,llama-3.2-1b bench-models-base
v new gpt2,llama-3.2-1b bench-models
v new-rule0 gpt2,llama-3.2-1b bench-models MAGPIE_FUSED_SPLIT_RULE=0
v base-again llama-3.2-1b bench-models-base
} > $OUT/variants.jsonl 2> $OUT/variants.err
cat $OUT/variants.err
# the fused tests (GPU required); fixtures from this checkout
(cd crates/magpie-models && MAGPIE_REQUIRE_CUDA=1 RUST_BACKTRACE=1 timeout 120 $root/$G/bin/fused --test-threads=1) > $OUT/tests.txt 2>&1; echo "tests rc=$? $((SECONDS-T0)) s"; grep -E "^test |test result" $OUT/tests.txt
# GPT-2 prefill of 128 tokens: every kernel's time (isolated) against the 0.89 ms wall time
if [ $((SECONDS-T0)) -lt 200 ]; then
  timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum --csv $G/bin/bench-models --configs benchmark/models/configs --cases gpt2 --metrics prefill --path fused --reps 1 --warmup 0 > $OUT/ncu-prefill.csv 2> $OUT/ncu-prefill.err
  echo "ncu rc=$? $((SECONDS-T0)) s"
fi
