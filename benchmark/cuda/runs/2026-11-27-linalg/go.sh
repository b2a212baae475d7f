#!/usr/bin/env bash
# One GPU-machine pass for the CUDA linalg branch, from the repo root, with the staged folder .gpu-linalg
# (bin/: gzipped stripped cuda_linalg test binary and magpie-conformance; manifest, run.sh, root as
# ../shared/tools/gpu-stage writes them; the branch's cuda_must_be_native.txt and linalg_torch.py):
# tests, the CUDA conformance with --must-be-native, the linalg timings of ours and PyTorch's. Outputs to $OUT.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
rm -rf .gpu && cp -r .gpu-linalg .gpu && gunzip -f .gpu/bin/*.gz && chmod +x .gpu/bin/*
cp .gpu/cuda_must_be_native.txt tests/conformance/cuda_must_be_native.txt
T0=$SECONDS; el() { echo "[$((SECONDS-T0)) s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout 150 bash .gpu/run.sh > $OUT/tests.txt 2>&1; el "tests rc=$?"
grep -E "^test |^test result|FAILED|panicked|passed," $OUT/tests.txt | tail -30
MAGPIE_FALLBACK_LOG=$OUT/fallback.txt timeout 200 .gpu/bin/magpie-conformance --cases tests/conformance/opinfo-float32 --cases tests/conformance/opinfo-int64 --device cuda --json $OUT/cuda.json --must-be-native tests/conformance/cuda_must_be_native.txt > $OUT/cuda-conf.txt 2>&1; el "conf rc=$?"
tail -14 $OUT/cuda-conf.txt; gzip -9 $OUT/cuda.json
( cd crates/magpie-core && MAGPIE_REQUIRE_CUDA=1 timeout 60 ../../.gpu/bin/cuda_linalg-* --ignored --nocapture bench_linalg ) > $OUT/bench.txt 2>&1; el "bench rc=$?"
timeout 60 python3 .gpu/linalg_torch.py > $OUT/bench-torch.txt 2>&1; el "torch rc=$?"
grep bench $OUT/bench.txt; cat $OUT/bench-torch.txt
