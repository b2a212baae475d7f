#!/usr/bin/env bash
# A/B of two settings of torch-magpie's train-step on a machine whose speed drifts: runs variant A,
# then B, ROUNDS times, and prints each pair's step times and the ratio B/A (< 1: B is faster).
# usage: benchmark/cpu/train_step/ab.sh ROUNDS "ENV=.. for A" "ENV=.. for B" [train-step args]
# e.g.:  benchmark/cpu/train_step/ab.sh 8 "RAYON_NUM_THREADS=2 MAGPIE_MAIN_THREAD_WORKER=0" "RAYON_NUM_THREADS=2" --steps 30
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds=$1; a=$2; b=$3; shift 3
TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p magpie-bench-train-step
step() { env $1 "$TARGET/release/train-step" "${@:2}" | python3 -c "import json,sys; print(json.load(sys.stdin)['step_ms'])"; }
for _ in $(seq "$rounds"); do
  ta=$(step "$a" "$@"); tb=$(step "$b" "$@")
  python3 -c "print(f'A {$ta:7.2f} ms   B {$tb:7.2f} ms   B/A {$tb/$ta:.3f}')"
done
