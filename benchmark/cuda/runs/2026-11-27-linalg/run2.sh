#!/usr/bin/env bash
# Second GPU-machine call of the linalg branch (2026-11-27, NVIDIA H200): the branch's magpie-conformance
# (staged gunzipped in .gpu-linalg/bin) on the CPU and on CUDA with --must-be-native (the branch's list),
# the fallback log, and scripts/gpu/compare.py over the two. Outputs to $OUT.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:$LD_LIBRARY_PATH
gunzip -f .gpu-linalg/bin/*.gz; chmod +x .gpu-linalg/bin/*
cp .gpu-linalg/cuda_must_be_native.txt tests/conformance/cuda_must_be_native.txt
C="--cases tests/conformance/opinfo-float32 --cases tests/conformance/opinfo-int64"
T0=$SECONDS; el() { echo "[$((SECONDS-T0)) s] $*"; }
MAGPIE_FALLBACK_LOG=$OUT/fallback.txt timeout 240 .gpu-linalg/bin/magpie-conformance $C --device cuda --json $OUT/cuda.json --must-be-native tests/conformance/cuda_must_be_native.txt > $OUT/cuda-conf.txt 2>&1; el "cuda conf rc=$?"
tail -14 $OUT/cuda-conf.txt
timeout 240 .gpu-linalg/bin/magpie-conformance $C --json $OUT/cpu.json --baseline tests/conformance/baseline.json > $OUT/cpu-conf.txt 2>&1; el "cpu conf rc=$?"
tail -8 $OUT/cpu-conf.txt
python3 scripts/gpu/compare.py $OUT/cpu.json $OUT/cuda.json $OUT/fallback.txt > $OUT/compare.txt 2>&1; cat $OUT/compare.txt | cut -c1-400
gzip -9 $OUT/cuda.json $OUT/cpu.json
