#!/usr/bin/env bash
# On the GPU machine, from the repo root: the fused tests of this branch (the persistent chain
# against one kernel per product), then main's bench-models beside this branch's with the chain off
# (the default) and on (MAGPIE_FUSED_CHAIN=1), Llama-3.2-1B bf16 b1 and GPT-2 6/768 f32 decode, each
# twice in alternation; then Llama b16 and b64 (no chain there: it serves batches of 1-4).
# Everything to $OUT. Expects in $G/bin: bench-models-base (main), bench-models and `fused` (the
# test binary) of the commit under test, gzipped, built on another machine.
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
# the tests first: they also compile this branch's kernels into the on-disk cache the benchmark reads
[ -x $G/bin/fused ] && (cd crates/magpie-models && MAGPIE_REQUIRE_CUDA=1 RUST_BACKTRACE=1 timeout ${TT:-170} $root/$G/bin/fused --test-threads=1 ${TESTS:-}) > $OUT/tests.txt 2>&1
echo "tests rc=$? $((SECONDS-T0)) s"; grep -E "^test |test result|panicked" $OUT/tests.txt | head -20
A="--configs benchmark/models/configs --metrics decode,decode_steady --reps 3 --path fused"
v() { local name=$1 cases=$2 bin=$3; shift 3; echo "# $name"; timeout ${VT:-60} env "$@" $G/bin/$bin --cases $cases $A; echo "## $name rc=$? done at $((SECONDS-T0)) s" >&2; }
# BENCH=2: this branch's binary alone, chain off and on (after the tests filled the kernel cache)
[ "${BENCH:-1}" = 2 ] && {
v new gpt2,llama-3.2-1b bench-models
v chain gpt2,llama-3.2-1b bench-models MAGPIE_FUSED_CHAIN=1
v new-again gpt2,llama-3.2-1b bench-models
v chain-again gpt2,llama-3.2-1b bench-models MAGPIE_FUSED_CHAIN=1
} > $OUT/variants.jsonl 2> $OUT/variants.err
[ "${BENCH:-1}" = 1 ] && {
VT=110 v base gpt2,llama-3.2-1b bench-models-base
VT=110 v new gpt2,llama-3.2-1b bench-models
v chain gpt2,llama-3.2-1b bench-models MAGPIE_FUSED_CHAIN=1
v base-again gpt2,llama-3.2-1b bench-models-base
v chain-again gpt2,llama-3.2-1b bench-models MAGPIE_FUSED_CHAIN=1
[ "${BATCHED:-0}" = 1 ] && VT=90 v new-batched llama-3.2-1b-b16,llama-3.2-1b-b64 bench-models
} > $OUT/variants.jsonl 2> $OUT/variants.err
[ "${BENCH:-1}" != 0 ] && cat $OUT/variants.err && python3 - $OUT/variants.jsonl <<'PY'
import json, sys
name = None
for line in open(sys.argv[1]):
    if line.startswith("# "):
        name = line[2:].strip(); continue
    try: r = json.loads(line)
    except ValueError: continue
    print(f"{name:12s} {r['case']:20s} {r['metric']:14s} {r['value']:10.1f} {r['unit']}")
PY
echo "total $((SECONDS-T0)) s"
