#!/usr/bin/env bash
# 650edf4 on an NVIDIA H200 (2026-11-27), second call: the CUDA test binaries near the changed paths
# (half_precision, cuda_amp_linear, cuda_kernels, cuda_composites, cuda_train_ops of magpie-core),
# stripped and xz-compressed in .gpu-half/ with gpu-stage's run.sh. Output: tests-b.txt.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
source .gpu-half/unxz.sh
rm -rf .gpu && cp -r .gpu-half .gpu && unxz_all .gpu/bin
MAGPIE_REQUIRE_CUDA=1 OUT=/tmp timeout 300 bash .gpu/run.sh > $OUT/tests-b.txt 2>&1; echo "tests rc=$?"
grep -E "^===|^test result|FAILED|panicked|^tests:|passed," $OUT/tests-b.txt | tail -30
