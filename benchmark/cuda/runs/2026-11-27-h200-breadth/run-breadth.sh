#!/usr/bin/env bash
# The fallback change's tree on one GPU (2026-11-27). Staged in .gpu-breadth/ from a release build of the branch:
# magpie-conformance and the magpie-core test binary cuda_special_stats (stripped, gzip -9), the branch's
# cuda_must_be_native.txt. CUDA conformance of the four OpInfo case sets with fallback counting (as the
# 6682a50 run-a.sh) beside the GPU unit tests.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
rm -rf .gpu && cp -r .gpu-breadth .gpu && gunzip -f .gpu/bin/*.gz && chmod +x .gpu/bin/*
T0=$SECONDS; el() { echo "[$((SECONDS-T0)) s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
C=tests/conformance
( MAGPIE_FALLBACK_LOG=$OUT/fallback.txt timeout 120 .gpu/bin/magpie-conformance --cases $C/opinfo-float32 --cases $C/opinfo-int64 --device cuda --json $OUT/cuda.json --must-be-native .gpu/cuda_must_be_native.txt > $OUT/cuda-conf.txt 2>&1; echo "conf rc=$? at $((SECONDS-T0)) s" > $OUT/conf-rc.txt
  MAGPIE_FALLBACK_LOG=$OUT/fallback-half.txt timeout 90 .gpu/bin/magpie-conformance --cases $C/opinfo-bfloat16 --cases $C/opinfo-float16 --device cuda --json $OUT/cuda-half.json > $OUT/cuda-conf-half.txt 2>&1; echo "half rc=$? at $((SECONDS-T0)) s" >> $OUT/conf-rc.txt ) &
MAGPIE_REQUIRE_CUDA=1 OUT=$OUT timeout 150 bash .gpu/run.sh > $OUT/tests.txt 2>&1; el "tests rc=$?"
wait; cat $OUT/conf-rc.txt; tail -14 $OUT/cuda-conf.txt; grep -A4 totals $OUT/cuda-conf-half.txt; gzip -9 $OUT/cuda.json $OUT/cuda-half.json
grep -E "^===|^test |^test result|FAILED|panicked|^tests:|passed," $OUT/tests.txt | tail -40
