#!/usr/bin/env bash
# torch-magpie vs PyTorch on the same GPU in one run: the index / mask / search cases of
# crates/magpie-core/examples/index_bench.rs and benchmark/cuda/index_torch.py.
# BENCH_BIN: the built example (default: target/release/examples/index_bench).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${BENCH_BIN:-target/release/examples/index_bench}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
m=$(mktemp); t=$(mktemp)
"$bin" > "$m"
python3 "$here/index_torch.py" > "$t"
echo "| case | torch-magpie ms | PyTorch ms | PyTorch / torch-magpie |"
echo "|---|---:|---:|---:|"
join -t $'\t' <(sort "$m") <(sort "$t") | while IFS=$'\t' read -r name a b; do
    printf '| %s | %.4f | %.4f | %.2fx |\n' "$name" "$a" "$b" "$(python3 -c "print($b / $a)")"
done
rm -f "$m" "$t"
