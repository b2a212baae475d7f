"""PyTorch's host-to-device copy bandwidth, measured as crates/magpie-core/examples/pinned_bandwidth.rs
measures torch-magpie's: pageable `x.to('cuda')` and pinned `x.to('cuda', non_blocking=True)` from
`torch.empty(..., pin_memory=True)`, at 1, 16 and 256 MiB (float32), one synchronization per run."""
import time

import torch


def per_copy(x, non_blocking, iters):
    for _ in range(3):
        x.to("cuda", non_blocking=non_blocking)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        x.to("cuda", non_blocking=non_blocking)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters


print(f"# torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
print("size_mib,kind,gb_per_s")
for mib, iters in [(1, 200), (16, 50), (256, 10)]:
    n = mib << 18
    pageable = (torch.arange(n, dtype=torch.float32) % 1024)
    pinned = torch.empty(n, dtype=torch.float32, pin_memory=True)
    pinned.copy_(pageable)
    b = n * 4
    print(f"{mib},pageable,{b / per_copy(pageable, False, iters) / 1e9:.2f}")
    print(f"{mib},pinned non_blocking,{b / per_copy(pinned, True, iters) / 1e9:.2f}")
