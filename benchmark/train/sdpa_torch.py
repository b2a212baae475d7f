"""PyTorch's side of crates/magpie-core/examples/sdpa_train_bench.rs: F.scaled_dot_product_attention
forward + backward (PyTorch picks its backend: flash / efficient / math) at the same shapes, ms per
forward+backward as JSON lines."""
import time
import torch
import torch.nn.functional as F

CASES = [("gpt 6x384 ctx256 b64", 64, 6, 256, 64, True), ("bert 768 b4x128", 4, 12, 128, 64, False), ("gpt2-small ctx1024 b8", 8, 12, 1024, 64, True)]
for label, b, h, l, d, causal in CASES:
    for dt in (torch.float32, torch.bfloat16):
        q, k, v = (torch.randn(b, h, l, d, device="cuda", dtype=dt, requires_grad=True) for _ in range(3))
        go = torch.randn(b, h, l, d, device="cuda", dtype=dt)

        def step():
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            y.backward(go)

        for _ in range(3):
            step()
        torch.cuda.synchronize()
        reps = 20
        t0 = time.perf_counter()
        for _ in range(reps):
            step()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3 / reps
        name = "float32" if dt == torch.float32 else "bfloat16"
        print(f'{{"case": "{label}", "dtype": "{name}", "impl": "torch", "ms": {ms:.4f}}}')
