# PyTorch's times for the cases of `bench_linalg` in crates/magpie-core/tests/cuda_linalg.rs
# (float32 on cuda:0, ms per call after one warm-up, the device synchronized around the loop):
#   python3 benchmark/cuda/linalg_torch.py
import time
import torch

dev = "cuda"
torch.manual_seed(1)


def timed(f, reps=5):
    f()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        f()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e3 / reps


for batch, n in [((), 64), ((), 256), ((64,), 16)]:
    a = torch.rand(*batch, n, n, device=dev) * 2 - 1
    r = torch.rand(*batch, n, n, device=dev) * 2 - 1
    s = r @ r.mT / n + torch.eye(n, device=dev)
    b = torch.rand(*batch, n, 1, device=dev) * 2 - 1
    cases = [
        ("linalg.cholesky", lambda: torch.linalg.cholesky(s)),
        ("linalg.solve", lambda: torch.linalg.solve(a, b)),
        ("linalg.inv", lambda: torch.linalg.inv(a)),
        ("linalg.det", lambda: torch.linalg.det(a)),
        ("linalg.lu_factor", lambda: torch.linalg.lu_factor(a)),
        ("linalg.qr", lambda: torch.linalg.qr(a)),
        ("linalg.eigh", lambda: torch.linalg.eigh(s)),
        ("linalg.svd", lambda: torch.linalg.svd(a)),
    ]
    for op, f in cases:
        print(f"torch {op:<18} batch={list(batch)} n={n:<4} float32: {timed(f):9.3f} ms  ({torch.__version__}, {torch.cuda.get_device_name()})")
