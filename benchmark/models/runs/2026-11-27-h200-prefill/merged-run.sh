#!/usr/bin/env bash
# The merged-tree device run of 2026-11-27 (137f646): staged in .gpu-b/ were the test binaries of
# magpie-models (fused, fused_lt, fused_short_attn, cuda_graph_train, cuda_bert_train, as
# ../shared/tools/gpu-stage stages them, xz-compressed), the merged bench-models and main's (e37a644).
# merged tree: the models' GPU tests, then the prefill rows (main's bench-models of e37a644 beside the merged one)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
# decompress every .xz under the given folders (xz if present, else python's lzma)
unxz_all() { for f in $(find "$@" -name '*.xz'); do if command -v xz >/dev/null; then xz -df "$f"; else python3 -c "import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[1][:-3],'wb'))" "$f" && rm -f "$f"; fi; chmod +x "${f%.xz}"; done; }
rm -rf .gpu && cp -r .gpu-b .gpu && unxz_all .gpu/bin .gpu && gunzip -f .gpu/bench-models-main.gz && chmod +x .gpu/bench-models*
T0=$SECONDS; el() { echo "[$((SECONDS-T0)) s] $*"; }
OUT=$OUT timeout 330 bash .gpu/run.sh > $OUT/tests-b.txt 2>&1; el "tests rc=$?"
grep -E "^===|^test result|FAILED|panicked|^tests:|passed," $OUT/tests-b.txt | tail -30
cfg="--configs benchmark/models/configs"; b=$OUT/bench.txt
run() { local name=$1 bin=$2; shift 2; env "$@" timeout 60 "$bin" $cfg --path fused --metrics prefill --reps 5 --cases gpt2,llama-3.2-1b 2>> $OUT/bench.err | sed "s/^/$name /" >> $b; el "$name rc=${PIPESTATUS[0]}"; }
run main .gpu/bench-models-main
run new .gpu/bench-models MAGPIE_FUSED_LT_LOG=1
run lt0 .gpu/bench-models MAGPIE_FUSED_LT=0
run sa0 .gpu/bench-models MAGPIE_FUSED_SHORT_ATTN=0
run main2 .gpu/bench-models-main
run new2 .gpu/bench-models
timeout 100 python3 benchmark/models/transformers_bench.py --impl eager --cases gpt2,llama-3.2-1b --metrics prefill --reps 5 2>> $OUT/bench.err | sed "s/^/eager /" >> $b; el "eager rc=${PIPESTATUS[0]}"
cut -c1-300 $b
