"""PyTorch's side of crates/magpie-core/examples/flash_bench.rs (prefill part): the causal bf16
forward of F.scaled_dot_product_attention at the same shapes (32 query / 8 kv heads, head_dim 64 and
128, 4k-100k tokens, and a 4096-query chunk at the end of 98,304 keys with the bottom-right causal
mask), ms and TFLOP/s over the visible (query, key) pairs, as the Rust side counts them.

Prints which backend PyTorch picks by itself (torch._fused_sdp_choice) for the GQA call
(enable_gqa=True, k/v of 8 heads) and for k/v expanded to 32 heads (what transformers passes when it
repeats the kv heads), then times the default choice of each, and cuDNN and flash forced alone for the GQA call.

    python3 benchmark/flash/sdpa_fwd_torch.py [--seqs 4096,16384,32768,100000]
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

ap = argparse.ArgumentParser()
ap.add_argument("--seqs", default="4096,16384,32768,100000")
args = ap.parse_args()
seqs = [int(s) for s in args.seqs.split(",")]
H, KVH = 32, 8
print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
names = {int(v.value): k for k, v in SDPBackend.__members__.items()}


def bench(fn, flops):
    fn()
    torch.cuda.synchronize()
    iters = max(3, min(20, int(2e13 / flops)))
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / iters
    return ms, flops / ms / 1e9


for d in (64, 128):
    shapes = [(s, s) for s in seqs] + [(4096, 98304)]
    for lq, lk in shapes:
        q = torch.randn(1, H, lq, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(1, KVH, lk, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(1, KVH, lk, d, device="cuda", dtype=torch.bfloat16)
        off = lk - lq
        # visible pairs: row i sees min(i + off + 1, lk) keys
        pairs = sum(min(i + off + 1, lk) for i in range(lq))
        flops = 4.0 * pairs * H * d
        if lq == lk:
            mask, causal = None, True
        else:
            # bottom-right causal: SDPA's is_causal is top-left, so pass the mask as a tensor (as
            # transformers does for a chunk after a cache); torch.nn.attention.bias.causal_lower_right
            # is the other way
            from torch.nn.attention.bias import causal_lower_right
            mask, causal = causal_lower_right(lq, lk), False
        ke, ve = k.repeat_interleave(H // KVH, dim=1), v.repeat_interleave(H // KVH, dim=1)
        for gqa in (True, False):
            kk, vv = (k, v) if gqa else (ke, ve)
            call = lambda: F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask, is_causal=causal, enable_gqa=gqa)
            try:
                if mask is None:
                    choice = names.get(int(torch._fused_sdp_choice(q, kk, vv, None, 0.0, causal, enable_gqa=gqa)), "?")
                else:
                    choice = "(mask object: picked inside)"
            except Exception as e:  # the private helper's signature moves between releases
                choice = f"? ({type(e).__name__})"
            label = f"d={d} q={lq} kv={lk} {'gqa' if gqa else 'expanded kv'}"
            # each backend forced alone for the GQA call; the expanded call at PyTorch's own choice only
            for be in (None, SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION) if gqa else (None,):
                try:
                    if be is None:
                        ms, tf = bench(call, flops)
                        tag = f"default (picks {choice})"
                    else:
                        with sdpa_kernel([be]):
                            ms, tf = bench(call, flops)
                        tag = be.name
                    print(f"torch sdpa {label} [{tag}]: {ms:.3f} ms, {tf:.1f} TFLOP/s", flush=True)
                except Exception as e:
                    print(f"torch sdpa {label} [{be.name if be else 'default'}]: not run ({str(e).splitlines()[0][:100]})", flush=True)
        del q, k, v, ke, ve
        torch.cuda.empty_cache()
