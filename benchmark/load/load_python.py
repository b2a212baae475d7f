"""Open-to-tensors (and, for transformers, to the first forward) with the Python loaders: one
variant per process, one JSON line on stdout (times measured inside the process, after the
imports, as load-bench measures its own).

    python3 load_python.py VARIANT PATH

Variants: st_load_file, st_safe_open (safetensors), gguf_reader (gguf-py GGUFReader, every
tensor as a torch tensor over the mapped bytes), gguf_reader_dequant (the same, dequantized to
float32 with gguf-py), torch_load, torch_load_mmap (torch.load(weights_only=True) without and
with mmap=True), hf_forward (transformers from_pretrained on the folder + one forward of one
token, float32, as load-bench's `st`).
"""
import json
import resource
import sys
import time

import torch


def main():
    variant, path = sys.argv[1], sys.argv[2]
    torch.set_grad_enabled(False)
    forward_ms = None
    if variant == "st_load_file":
        from safetensors.torch import load_file
        t0 = time.perf_counter()
        tensors = load_file(path)
    elif variant == "st_safe_open":
        from safetensors import safe_open
        t0 = time.perf_counter()
        with safe_open(path, framework="pt") as f:
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    elif variant in ("gguf_reader", "gguf_reader_dequant"):
        import numpy as np
        from gguf import GGUFReader
        from gguf.quants import dequantize
        t0 = time.perf_counter()
        r = GGUFReader(path)
        if variant == "gguf_reader":
            tensors = {t.name: torch.from_numpy(np.asarray(t.data)) for t in r.tensors}
        else:
            tensors = {t.name: torch.from_numpy(dequantize(t.data, t.tensor_type)) for t in r.tensors}
    elif variant in ("torch_load", "torch_load_mmap"):
        t0 = time.perf_counter()
        tensors = torch.load(path, weights_only=True, mmap=variant == "torch_load_mmap")
    elif variant == "hf_forward":
        from transformers import AutoModelForCausalLM
        t0 = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        t1 = time.perf_counter()
        logits = model(torch.tensor([[1]])).logits
        assert torch.isfinite(logits).all()
        forward_ms = (time.perf_counter() - t1) * 1e3
        tensors = model
    else:
        raise SystemExit(f"unknown variant {variant}")
    total = (time.perf_counter() - t0) * 1e3
    open_ms = total - (forward_ms or 0.0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"loader": variant, "open_ms": open_ms, "forward_ms": forward_ms, "total_ms": total, "peak_rss_mb": rss}))
    del tensors


if __name__ == "__main__":
    main()
