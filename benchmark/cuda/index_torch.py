"""The cases of crates/magpie-core/examples/index_bench.rs in PyTorch: float32 on cuda:0,
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

def row(name, f):
    print(f"{name}\t{time(f):.4f}")

with torch.no_grad():
    dev = "cuda"
    x = torch.randn(100_000, 128, device=dev)
    rows = torch.randint(0, 100_000, (50_000,), device=dev)
    row("index rows 100000x128 [50000]", lambda: x[rows])
    v = torch.randn(50_000, 128, device=dev)
    row("index_put accumulate 100000x128 [50000]", lambda: x.index_put((rows,), v, accumulate=True))
    dst = torch.randn(10_000, 128, device=dev)
    gi = torch.randint(0, 10_000, (100_000, 128), device=dev)
    src = torch.randn(100_000, 128, device=dev)
    row("scatter_reduce sum 10000x128 <- 100000x128", lambda: dst.scatter_reduce(0, gi, src, "sum"))
    row("scatter_reduce amax 10000x128 <- 100000x128", lambda: dst.scatter_reduce(0, gi, src, "amax"))
    big = torch.randn(1 << 24, device=dev)
    mask = big > 0
    row("nonzero 16M", lambda: mask.nonzero())
    row("masked_select 16M", lambda: big.masked_select(mask))
    seq = torch.randn(100_000, device=dev).sort().values
    probe = torch.randn(1 << 20, device=dev)
    row("searchsorted 1M in 100000", lambda: torch.searchsorted(seq, probe))
    p = torch.rand(64, 50_000, device=dev)
    row("multinomial 64x50000 1 draw", lambda: torch.multinomial(p, 1, True))
    row("multinomial 64x50000 16 without replacement", lambda: torch.multinomial(p, 16, False))
    sq = torch.randn(4096, 4096, device=dev)
    row("any 4096x4096 dim 1", lambda: sq.any(1))
    row("flip 4096x4096 dim 0", lambda: sq.flip(0))
