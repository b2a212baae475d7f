#!/usr/bin/env bash
# Host-to-device bandwidth, pageable vs pinned, torch-magpie then PyTorch on the same GPU.
#   bash benchmark/pinned/run.sh [path/to/pinned_bandwidth]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-}
if [ -z "$bin" ]; then
    cargo build --release -p magpie-core --example pinned_bandwidth
    bin=${CARGO_TARGET_DIR:-target}/release/examples/pinned_bandwidth
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
echo "## torch-magpie"
"$bin"
echo "## PyTorch"
python3 benchmark/pinned/torch_h2d.py
