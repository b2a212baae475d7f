"""PyTorch's side of spmm_bench.rs: torch.sparse.mm (COO, coalesced) and the dense matmul, same
shapes and densities, median ms, on the CPU and (if present) CUDA.

    python3 crates/magpie-sparse/examples/spmm_torch.py
"""
import time
import torch

def median_ms(dev, reps, f):
    f()
    ts = []
    for _ in range(reps):
        if dev == "cuda":
            torch.cuda.synchronize()
        s = time.perf_counter()
        f()
        if dev == "cuda":
            torch.cuda.synchronize()
        ts.append((time.perf_counter() - s) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]

print("torch", torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
devs = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
for dev in devs:
    for m, k, n, density in [(4096, 4096, 128, 0.01), (4096, 4096, 128, 0.001), (16384, 16384, 64, 0.001)]:
        nnz = int(m * k * density)
        g = torch.Generator().manual_seed(42)
        idx = torch.stack([torch.randint(0, m, (nnz,), generator=g), torch.randint(0, k, (nnz,), generator=g)])
        s = torch.sparse_coo_tensor(idx, torch.rand(nnz, generator=g) * 2 - 1, (m, k)).coalesce().to(dev)
        d = (torch.arange(k * n) % 7 - 3.0).reshape(k, n).to(dev)
        dense = s.to_dense()
        reps = 5 if dev == "cpu" else 20
        ts = median_ms(dev, reps, lambda: torch.sparse.mm(s, d))
        sc = s.to_sparse_csr()
        tc = median_ms(dev, reps, lambda: torch.sparse.mm(sc, d))
        td = median_ms(dev, reps, lambda: dense @ d)
        print(f"{dev:<7} {m} x {k} @ {k} x {n}  {density:<8} {s._nnz():<9} coo {ts:.3}  csr {tc:.3}  dense {td:.3}")
