#!/usr/bin/env bash
# First GPU-machine call of the linalg branch (2026-11-27, NVIDIA H200): the cuda_linalg test binary
# (staged gunzipped in .gpu-linalg/bin), its ignored timing test, PyTorch's timings of the same cases.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:$LD_LIBRARY_PATH
gunzip -f .gpu-linalg/bin/*.gz; chmod +x .gpu-linalg/bin/*
cd crates/magpie-core
MAGPIE_REQUIRE_CUDA=1 timeout 200 ../../.gpu-linalg/bin/cuda_linalg-* --test-threads 2 > $OUT/tests.txt 2>&1
MAGPIE_REQUIRE_CUDA=1 timeout 90 ../../.gpu-linalg/bin/cuda_linalg-* --ignored --nocapture bench_linalg > $OUT/bench.txt 2>&1
cd ../..; timeout 60 python3 .gpu-linalg/linalg_torch.py > $OUT/bench-torch.txt 2>&1
