"""The cases of crates/magpie-core/examples/sort_scan_bench.rs in PyTorch: float32 on cuda:0,
CUDA-event times of repeated calls after a warm-up. Prints one `case<TAB>ms` line per case."""
import torch

def time(f, iters=20):
    for _ in range(3):
        f()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        f()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / iters

cases = [
    ("sort 4096x1024 dim -1", (4096, 1024), lambda t: torch.sort(t, -1)),
    ("sort 16384x128 dim -1", (16384, 128), lambda t: torch.sort(t, -1)),
    ("sort 1x1048576", (1, 1 << 20), lambda t: torch.sort(t, -1)),
    ("sort 64x32000 descending", (64, 32000), lambda t: torch.sort(t, -1, descending=True)),
    ("topk k=50 64x32000", (64, 32000), lambda t: torch.topk(t, 50, -1)),
    ("topk k=8 4096x1024", (4096, 1024), lambda t: torch.topk(t, 8, -1)),
    ("cumsum 4096x4096 dim -1", (4096, 4096), lambda t: torch.cumsum(t, -1)),
    ("cumsum 4096x4096 dim 0", (4096, 4096), lambda t: torch.cumsum(t, 0)),
    ("cumsum 1x16777216", (1, 1 << 24), lambda t: torch.cumsum(t, -1)),
    ("cummax 4096x4096 dim -1", (4096, 4096), lambda t: torch.cummax(t, -1)),
]
with torch.no_grad():
    for name, shape, f in cases:
        t = torch.randn(shape, device="cuda")
        print(f"{name}\t{time(lambda: f(t)):.4f}")
