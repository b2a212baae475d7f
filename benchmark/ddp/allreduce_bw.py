"""NCCL all-reduce bandwidth between the GPUs of this machine (the floor of benchmark/ddp's
gradient averaging), through PyTorch's NCCL: for each size, the median of 20 timed float32
all-reduces after 5 warm-ups; algorithm bandwidth = bytes / time, bus bandwidth = algbw x 2(n-1)/n
(nccl-tests' convention). Run with torchrun --nproc-per-node N; rank 0 prints JSON lines."""
import json, os, statistics, time  # noqa: E401

import torch
import torch.distributed as dist

dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
for mb in (1, 8, 43, 256):
    t = torch.ones(mb * 2**20 // 4, device="cuda")
    for _ in range(5):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    ts = []
    for _ in range(20):
        dist.barrier()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        dist.all_reduce(t)
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    s = statistics.median(ts)
    alg = t.numel() * 4 / s / 1e9
    if rank == 0:
        print(json.dumps({"allreduce_mib": mb, "world_size": world, "ms": s * 1e3, "algbw_gbps": alg, "busbw_gbps": alg * 2 * (world - 1) / world}), flush=True)
dist.destroy_process_group()
