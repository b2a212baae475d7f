#!/usr/bin/env bash
# Check of main at 2d03f82 on the GPU machine (no Rust there), run from the repo root: the model
# crate's CUDA tests, the conformance cases on CUDA with the must-be-native list, and the training
# and decode benchmarks of that tree. Expects .gpu-b/ built elsewhere from that tree: bin/ with the
# gzipped, stripped test binaries of magpie-models (fused, cuda_graph_train, cuda_bert_train) plus
# magpie-conformance, train-bench and bench-models; manifest, run.sh and root as scripts/gpu/pass.sh
# stages them. The core crate's CUDA tests ran the same way in a call before this one.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
rm -rf .gpu && cp -r .gpu-b .gpu && gunzip -f .gpu/bin/*.gz && chmod +x .gpu/bin/*
T0=$SECONDS; el() { echo "[$((SECONDS-T0)) s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout 220 bash .gpu/run.sh > $OUT/tests-b.txt 2>&1; el "tests rc=$?"
grep -E "^===|^test result|FAILED|panicked|^tests:|passed," $OUT/tests-b.txt | tail -20
MAGPIE_FALLBACK_LOG=$OUT/fallback.txt timeout 170 .gpu/bin/magpie-conformance --cases tests/conformance/opinfo-float32 --cases tests/conformance/opinfo-int64 --device cuda --must-be-native tests/conformance/cuda_must_be_native.txt > $OUT/cuda-conf.txt 2>&1; el "conf rc=$?"; tail -12 $OUT/cuda-conf.txt
timeout 70 .gpu/bin/train-bench --device cuda --cases bert --dtypes bfloat16,float32 --graph on --steps 20 > $OUT/train.jsonl 2>&1; el "train bert rc=$?"
timeout 60 .gpu/bin/train-bench --device cuda --cases gpt --dtypes float32 --graph both --steps 20 >> $OUT/train.jsonl 2>&1; el "train gpt rc=$?"
grep -h '"case"' $OUT/train.jsonl | cut -c1-300
timeout 80 .gpu/bin/bench-models --configs benchmark/models/configs --cases gpt2,llama-3.2-1b --metrics decode,decode_steady --reps 3 --path fused > $OUT/decode.jsonl 2>&1; el "decode rc=$?"
cut -c1-300 $OUT/decode.jsonl | tail -8
