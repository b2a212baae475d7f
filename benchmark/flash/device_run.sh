#!/usr/bin/env bash
# One device run for the flash-attention forward work (benchmark/NOTES.md, Issue 13, "long prefill"):
# the GPU tests, flash_bench beside PyTorch SDPA, the 100k prefill (transformers eager beside; the fused
# engine at the old and the fastest variant), ncu of both; logs to $OUT. $STAGE (default .gpu-flash)
# holds what was built elsewhere: bin/flash_bench, bin/bench-models, gpu/ (the GPU test binaries and
# run.sh of shared/tools/gpu-stage), sdpa_fwd_torch.py; files may be gzipped.
set -u
G=${STAGE:-.gpu-flash}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PATH=$PATH:/usr/local/cuda/bin
gunzip -f $G/bin/*.gz $G/gpu/bin/*.gz 2>/dev/null
chmod +x $G/bin/* $G/gpu/bin/*
t0=$SECONDS
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
echo "== tests"
rm -rf .gpu && cp -r $G/gpu .gpu && timeout 200 bash .gpu/run.sh --nocapture > $OUT/tests.log 2>&1
grep -E "test result|passed|FAILED|panicked" $OUT/tests.log | tail -8
cp $OUT/gpu-tests.log $OUT/gpu-tests-copy.log 2>/dev/null
echo "== flash_bench ($((SECONDS - t0)) s)"
timeout 120 $G/bin/flash_bench --prefill-only > $OUT/flash_bench.txt 2>&1; echo rc=$?
grep -E "q=(16384|100000|4096 kv=98304)" $OUT/flash_bench.txt | sed 's/prefill //'
echo "== torch sdpa ($((SECONDS - t0)) s)"
timeout 150 python3 $G/sdpa_fwd_torch.py > $OUT/sdpa_torch.txt 2>&1; echo rc=$?
grep -E "torch |q=(16384|100000|4096 kv=98304).*(default|CUDNN|FLASH_)" $OUT/sdpa_torch.txt | grep -v "expanded" | head -24
best=$(grep "d=64 .*q=4096 kv=98304" $OUT/flash_bench.txt | sed -E 's/.*variant ([0-9]+).* ([0-9.]+) TFLOP\/s/\2 \1/' | sort -n | tail -1 | cut -d' ' -f2)
best=${best:-2}
echo "best d64 variant on the 100k chunk: $best"
echo "== 100k prefill, variant 2 + eager ($((SECONDS - t0)) s)"
MAGPIE_FLASH_D64=2 OUT=$OUT/p100k-v2 BENCH_BIN=$G/bin/bench-models SKIP="floors compile module" STEP_TIMEOUT=150 \
  timeout 320 bash benchmark/models/run.sh --cases llama-3.2-1b-prefill-100k > $OUT/p100k-v2.log 2>&1
grep -E "== |100k" $OUT/p100k-v2.log | tail -8
if [ "$best" != 2 ]; then
  echo "== 100k prefill, variant $best ($((SECONDS - t0)) s)"
  MAGPIE_FLASH_D64=$best OUT=$OUT/p100k-v$best BENCH_BIN=$G/bin/bench-models SKIP="floors eager compile module" STEP_TIMEOUT=120 \
    timeout 130 bash benchmark/models/run.sh --cases llama-3.2-1b-prefill-100k > $OUT/p100k-v$best.log 2>&1
  grep -E "== |100k" $OUT/p100k-v$best.log | tail -5
fi
echo "== ncu ($((SECONDS - t0)) s)"
for v in 2 $best; do
  timeout 60 ncu --kernel-name regex:flash_tc --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats \
    --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active \
    $G/bin/flash_bench --prefill-only --variants $v --seqs 16384 > $OUT/ncu-v$v.txt 2>&1
  echo "ncu v$v rc=$?"; grep -E "hmma|pipe_xu|pipe_fma|pipe_alu|Registers Per|Achieved Occupancy|Theoretical Occupancy|Duration|Compute \(SM\) Throughput" $OUT/ncu-v$v.txt | head -12
  [ "$best" = 2 ] && break
done
echo "== total $((SECONDS - t0)) s"
