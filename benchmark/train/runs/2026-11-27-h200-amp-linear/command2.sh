#!/usr/bin/env bash
# Second run: the GPU tests of magpie-core after commit a2a38ae, and ncu's kernel times of one
# replayed bf16 BERT step for this branch's train-bench (the binary of the first run) and main's.
set -u
G=${G:-.gpu-bert}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
gunzip -f "$G"/bin/*.gz "$G"/tests/bin/*.gz 2>/dev/null; chmod +x "$G"/bin/* "$G"/tests/bin/* 2>/dev/null
rm -rf .gpu && cp -r "$G/tests" .gpu && bash .gpu/run.sh > /tmp/tests.out 2>&1; echo "tests rc=$?"; tail -2 /tmp/tests.out
mkdir -p /tmp/ncu
for impl in new base; do
  bin=$G/bin/train-bench; [ $impl = base ] && bin=$G/bin/train-bench-base
  timeout 150 ncu --clock-control none --csv --metrics gpu__time_duration.sum $bin --device cuda --cases bert --dtypes bfloat16 --graph on --warmup 1 --steps 1 > /tmp/ncu/ncu-$impl.csv 2> /tmp/ncu/ncu-$impl.err
  echo "ncu $impl rc=$? lines $(wc -l < /tmp/ncu/ncu-$impl.csv)"; tail -3 /tmp/ncu/ncu-$impl.err
done
tar czf "$OUT/ncu.tgz" -C /tmp/ncu .
