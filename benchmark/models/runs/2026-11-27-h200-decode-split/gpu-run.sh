#!/usr/bin/env bash
# On the GPU machine, from the repo root: main's bench-models beside this branch's (the K-split
# rule by load rounds and the halving remainder batches of the fused GEMV), the old split rule with
# the new remainder batches, and the fused tests.
# Everything to $OUT. Expects in $G/bin: bench-models-base (main, commit c366847), bench-models and
# `fused` (the test binary) of the commit under test, gzipped, built on another machine.
set -uo pipefail
G=${G:-.gpu-decode}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export CUDA_HOME=/usr/local/cuda CUDA_PATH=/usr/local/cuda
gunzip -f $G/bin/*.gz; chmod +x $G/bin/*
root=$(pwd)
# the test binary finds its fixtures under the checkout path it was built in: name it in BUILD_ROOT
if [ -n "${BUILD_ROOT:-}" ] && [ ! -e "$BUILD_ROOT" ]; then mkdir -p "$(dirname "$BUILD_ROOT")" && ln -s "$root" "$BUILD_ROOT"; fi
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
T0=$SECONDS
A="--configs benchmark/models/configs --metrics decode,decode_steady --reps 3 --path fused"
v() { local name=$1 cases=$2 bin=$3; shift 3; echo "# $name"; timeout ${VT:-90} env "$@" $G/bin/$bin --cases $cases $A; echo "## $name rc=$? done at $((SECONDS-T0)) s" >&2; }
# run 4 (RUN=4, commit of the least-gain rule): the least gain of a split 2 (default), 1 (run 1's
# rule), 3, 0 (the old rule), no split; the tests; torch.compile and the floors beside
if [ "${RUN:-1}" = 4 ]; then
{
VT=150 v base gpt2,llama-3.2-1b bench-models-base
v gain2 gpt2,llama-3.2-1b bench-models
v gain1 gpt2,llama-3.2-1b bench-models MAGPIE_FUSED_SPLIT_GAIN=1
v gain3 gpt2,llama-3.2-1b bench-models MAGPIE_FUSED_SPLIT_GAIN=3
v gain0 gpt2,llama-3.2-1b bench-models MAGPIE_FUSED_SPLIT_GAIN=0
v split1 gpt2,llama-3.2-1b bench-models MAGPIE_FUSED_SPLIT=1
v base-again gpt2,llama-3.2-1b bench-models-base
v gain2-again gpt2,llama-3.2-1b bench-models
} > $OUT/variants.jsonl 2> $OUT/variants.err
cat $OUT/variants.err
(cd crates/magpie-models && MAGPIE_REQUIRE_CUDA=1 RUST_BACKTRACE=1 timeout 120 $root/$G/bin/fused --test-threads=1) > $OUT/tests.txt 2>&1; echo "tests rc=$? $((SECONDS-T0)) s"; grep -E "^test |test result" $OUT/tests.txt
OUT=$OUT/bench SKIP="eager module" BENCH_BIN=$G/bin/bench-models STEP_TIMEOUT=150 timeout 200 bash benchmark/models/run.sh --cases gpt2,llama-3.2-1b --metrics decode,decode_steady --reps 3 > $OUT/run.txt 2>&1
echo "run.sh rc=$? $((SECONDS-T0)) s"; tail -8 $OUT/run.txt
exit 0
fi
# run 2 (RUN=2): the same binaries; the first variant compiles the kernels, so it gets 150 s
if [ "${RUN:-1}" = 2 ]; then
{
VT=150 v base gpt2,llama-3.2-1b bench-models-base
v new gpt2,llama-3.2-1b bench-models
v new-rule0 gpt2,llama-3.2-1b bench-models MAGPIE_FUSED_SPLIT_RULE=0
v new-split1 gpt2 bench-models MAGPIE_FUSED_SPLIT=1
v new-split2 gpt2 bench-models MAGPIE_FUSED_SPLIT=2
v new-split4 gpt2 bench-models MAGPIE_FUSED_SPLIT=4
v base-again gpt2,llama-3.2-1b bench-models-base
v new-again gpt2,llama-3.2-1b bench-models
} > $OUT/variants.jsonl 2> $OUT/variants.err
cat $OUT/variants.err
exit 0
fi
{
v base gpt2,llama-3.2-1b bench-models-base
v new gpt2,llama-3.2-1b bench-models
v new-rule0 gpt2,llama-3.2-1b bench-models MAGPIE_FUSED_SPLIT_RULE=0
v base-again llama-3.2-1b bench-models-base
} > $OUT/variants.jsonl 2> $OUT/variants.err
cat $OUT/variants.err
# the fused tests (GPU required); fixtures from this checkout
(cd crates/magpie-models && MAGPIE_REQUIRE_CUDA=1 RUST_BACKTRACE=1 timeout 120 $root/$G/bin/fused --test-threads=1) > $OUT/tests.txt 2>&1; echo "tests rc=$? $((SECONDS-T0)) s"; grep -E "^test |test result" $OUT/tests.txt
