#!/usr/bin/env bash
# One GPU-machine pass: CUDA test binaries, conformance --device cuda, the CUDA ops benchmark.
# Stage on the build machine (release builds; the carry limit is 64 MiB, hence gzip):
#   ../shared/tools/gpu-stage -p magpie-core --features cuda      # keep only the cuda_* binaries in .gpu/
#   mkdir -p .gpu-final && cp scripts/gpu/pass.sh scripts/gpu/compare.py .gpu-final/
#   cp target/release/{magpie-conformance,bench-cuda} .gpu-final/ && strip .gpu-final/{magpie-conformance,bench-cuda}
#   gzip -9 .gpu/bin/* .gpu-final/magpie-conformance .gpu-final/bench-cuda
# then on the GPU machine (device tool, carry [".gpu", ".gpu-final"]): bash .gpu-final/pass.sh
# Compare with the CPU column here: magpie-conformance ... --json cpu.json, then
#   python3 scripts/gpu/compare.py cpu.json $OUT/cuda.json $OUT/fallback.txt
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
gunzip -f .gpu/bin/*.gz $here/*.gz; chmod +x .gpu/bin/* $here/magpie-conformance $here/bench-cuda
echo "=== tests"; date +%T
timeout 200 bash .gpu/run.sh > $OUT/tests.txt 2>&1; echo "tests rc=$?"; grep -E "^test result|FAILED|panicked|passed," $OUT/tests.txt | tail -25
echo "=== conformance cuda"; date +%T
chmod +x $here/magpie-conformance
C="--cases tests/conformance/opinfo-float32 --cases tests/conformance/opinfo-int64"
MAGPIE_FALLBACK_LOG=$OUT/fallback.txt timeout 240 $here/magpie-conformance $C --device cuda --json $OUT/cuda.json > $OUT/cuda.txt 2>&1; echo "conf rc=$?"
tail -12 $OUT/cuda.txt
echo "=== bench"; date +%T
chmod +x $here/bench-cuda
BENCH_BIN=$here/bench-cuda timeout 130 bash benchmark/cuda/run.sh 2>&1 | tail -30
date +%T
