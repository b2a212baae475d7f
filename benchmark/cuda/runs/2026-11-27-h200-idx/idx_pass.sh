#!/usr/bin/env bash
# One GPU-machine pass for the CUDA index ops (docs/cuda-index-ops.md), from the repo root with the
# staged folder $S (default .gpu-idx): $S/gpu (gpu-stage output: cuda_index_ops, cuda_core,
# cuda_sort_scan), $S/conf-main and $S/conf-branch (magpie-conformance of main and of this branch,
# gzipped), $S/index_bench, $S/cuda_must_be_native.txt and benchmark/cuda/index*. Runs both
# conformance binaries side by side with --device cuda (fallback logs), the tests meanwhile, then
# the benchmark alone. Outputs to $OUT.
S=${S:-.gpu-idx}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
rm -rf .gpu && cp -r $S/gpu .gpu && gunzip -f .gpu/bin/*.gz $S/*.gz && chmod +x .gpu/bin/* $S/conf-main $S/conf-branch $S/index_bench
T0=$SECONDS; el() { echo "[$((SECONDS-T0)) s] $*"; }
C="--cases tests/conformance/opinfo-float32 --cases tests/conformance/opinfo-int64 --device cuda"
MAGPIE_FALLBACK_LOG=$OUT/fallback-main.txt timeout 280 $S/conf-main $C --json $OUT/cuda-main.json > $OUT/conf-main.txt 2>&1 &
MAGPIE_FALLBACK_LOG=$OUT/fallback-branch.txt timeout 280 $S/conf-branch $C --json $OUT/cuda-branch.json --must-be-native $S/cuda_must_be_native.txt > $OUT/conf-branch.txt 2>&1 &
timeout 200 bash .gpu/run.sh > $OUT/tests.txt 2>&1; el "tests rc=$?"
grep -E "^===|^test |^test result|FAILED|panicked|passed," $OUT/tests.txt | tail -40
wait; el "conformance done"
tail -6 $OUT/conf-main.txt; tail -8 $OUT/conf-branch.txt
python3 scripts/gpu/compare.py $OUT/cuda-main.json $OUT/cuda-branch.json $OUT/fallback-branch.txt > $OUT/compare.txt 2>&1
head -30 $OUT/compare.txt
BENCH_BIN=$S/index_bench timeout 120 bash $S/index.sh > $OUT/bench.txt 2>&1; el "bench rc=$?"; cat $OUT/bench.txt
gzip -9 $OUT/*.json
