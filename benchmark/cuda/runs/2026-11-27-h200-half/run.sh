#!/usr/bin/env bash
# 976eaac (half inputs in float32 on CUDA) beside main at 23cc581, one call on an NVIDIA H200
# (2026-11-27). Staged in .gpu-half/: this branch's release magpie-conformance (bin/), main's
# (main/), and the CUDA test binary half_precision (magpie-core), stripped and xz-compressed, with
# a run.sh as ../shared/tools/gpu-stage writes it and a decompressing helper (unxz.sh).
# Outputs (in half-run.tar.gz): cuda-conf.txt, cuda-conf-half.txt, main-conf-half.txt,
# fallback.txt, fallback-half.txt, tests.txt, gpu-tests.log, rc.txt, *.json.gz.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
source .gpu-half/unxz.sh
rm -rf .gpu && cp -r .gpu-half .gpu && unxz_all .gpu/bin .gpu/main
O=/tmp/o; mkdir -p $O
T0=$SECONDS
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $O/gpu.txt
C=tests/conformance
( MAGPIE_FALLBACK_LOG=$O/fallback.txt timeout 280 .gpu/bin/magpie-conformance --cases $C/opinfo-float32 --cases $C/opinfo-int64 --device cuda --json $O/cuda.json --must-be-native $C/cuda_must_be_native.txt > $O/cuda-conf.txt 2>&1; echo "conf rc=$? at $((SECONDS-T0)) s" >> $O/rc.txt ) &
( MAGPIE_FALLBACK_LOG=$O/fallback-half.txt timeout 280 .gpu/bin/magpie-conformance --cases $C/opinfo-bfloat16 --cases $C/opinfo-float16 --device cuda --json $O/cuda-half.json > $O/cuda-conf-half.txt 2>&1; echo "half rc=$? at $((SECONDS-T0)) s" >> $O/rc.txt ) &
( timeout 280 .gpu/main/magpie-conformance --cases $C/opinfo-bfloat16 --cases $C/opinfo-float16 --device cuda --json $O/main-cuda-half.json > $O/main-conf-half.txt 2>&1; echo "main half rc=$? at $((SECONDS-T0)) s" >> $O/rc.txt ) &
MAGPIE_REQUIRE_CUDA=1 OUT=$O timeout 280 bash .gpu/run.sh > $O/tests.txt 2>&1; echo "tests rc=$? at $((SECONDS-T0)) s" >> $O/rc.txt
wait
gzip -9 $O/*.json
tar -czf $OUT/half-run.tar.gz -C $O .
cat $O/rc.txt
echo "== this branch, float32/int64"; tail -14 $O/cuda-conf.txt
echo "== this branch, half"; grep -A4 totals $O/cuda-conf-half.txt
echo "== main, half"; grep -A4 totals $O/main-conf-half.txt
grep -E "^===|^test result|FAILED|panicked|^tests:|passed," $O/tests.txt | tail -20
