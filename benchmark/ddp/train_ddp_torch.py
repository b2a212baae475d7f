"""PyTorch's side of benchmark/ddp (`ddp-bench` is torch-magpie's): the gpt case of
benchmark/train (6 layers, 6 heads, n_embd 384, context 256, vocab 96, AdamW 0.9/0.95 with weight
decay 0.1 on matrices, lr 1e-3, clip_grad_norm_ 1.0), --batch rows per GPU, the same fixed batches
per rank, timed the same way (warmup, then steps each ended by reading the loss back; median).

    python3 train_ddp_torch.py                      # one GPU, no DDP (the baseline)
    torchrun --nproc-per-node 2 train_ddp_torch.py  # DistributedDataParallel, NCCL, default 25 MB buckets

Rank 0 prints one JSON line per dtype (float32, bfloat16 = float32 parameters under autocast).
"""
import argparse, json, os, statistics, sys, time  # noqa: E401

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "train"))
from train_torch import GPTCuda as TrainGPT  # noqa: E402  (the model of benchmark/train)


class GPTCuda(TrainGPT):
    # DDP wraps forward: the loss is the forward
    def forward(s, idx, tgt):
        return s.loss(idx, tgt)


def fixed(b, t, v, shift, rank, dev):
    k = torch.arange(b * t)
    return ((7 * (k // t) + 3 * (k % t) + 11 * rank + shift) % v).view(b, t).to(dev)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("nccl")
        rank, world, local = dist.get_rank(), dist.get_world_size(), int(os.environ["LOCAL_RANK"])
    else:
        rank, world, local = 0, 1, 0
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    layers, heads, embd, block, vocab = 6, 6, 384, 256, 96
    for dtype in a.dtypes.split(","):
        torch.manual_seed(0)
        m = GPTCuda(vocab, block, layers, heads, embd).to(dev)
        model = torch.nn.parallel.DistributedDataParallel(m, device_ids=[local]) if distributed else m
        decay = [p for p in m.parameters() if p.dim() >= 2]
        no_decay = [p for p in m.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-3, betas=(0.9, 0.95))
        x, y = fixed(a.batch, block, vocab, 0, rank, dev), fixed(a.batch, block, vocab, 3, rank, dev)
        amp = dtype == "bfloat16"

        def step():
            with torch.autocast("cuda", torch.bfloat16, enabled=amp):
                loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            return loss.item()

        loss = None
        for _ in range(a.warmup):
            loss = step()
        torch.cuda.synchronize()
        ms = []
        for _ in range(a.steps):
            t0 = time.perf_counter()
            loss = step()
            torch.cuda.synchronize()
            ms.append((time.perf_counter() - t0) * 1e3)
        med = statistics.median(ms)
        if rank == 0:
            n = sum(p.numel() for p in m.parameters())
            print(json.dumps({"impl": f"PyTorch {torch.__version__}", "case": "gpt", "dtype": dtype, "world_size": world,
                              "batch_per_gpu": a.batch, "step_ms": med, "tokens_per_s": a.batch * block * world / med * 1e3,
                              "params": n, "loss": loss, "gpu": torch.cuda.get_device_name(),
                              "nccl": ".".join(map(str, torch.cuda.nccl.version())) if distributed else ""}), flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
