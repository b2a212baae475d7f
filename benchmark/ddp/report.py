"""Markdown table of benchmark/ddp: tokens/s at 1 and N GPUs, torch-magpie (ddp-bench) and
PyTorch DDP (train_ddp_torch.py under torchrun), from the same run on the same machine, with the
scaling efficiency (N-GPU tokens/s over N x 1-GPU tokens/s), and NCCL's all-reduce bandwidth.
Usage: report.py ALL.jsonl [ALLREDUCE.jsonl]"""
import json, sys


def load(p):
    with open(p) as f:
        return [json.loads(l) for l in f if l.strip().startswith("{")]


rows = load(sys.argv[1])
bw = load(sys.argv[2]) if len(sys.argv) > 2 else []
gpu = next((r.get("gpu") for r in rows if r.get("gpu")), "unknown GPU")
torch_ver = next((r["impl"] for r in rows if r["impl"].startswith("PyTorch")), "PyTorch")
nccl = next((r.get("nccl") for r in rows if r.get("nccl")), "?")
worlds = sorted({r["world_size"] for r in rows})
big = max(worlds)
get = lambda impl, dt, w: next((r for r in rows if r["impl"].startswith(impl) and r["dtype"] == dt and r["world_size"] == w), None)
print(f"GPU: {gpu}; {torch_ver}; NCCL {nccl}. GPT (6 layers, n_embd 384, context 256, vocab 96), "
      f"{rows[0]['batch_per_gpu']} sequences per GPU; median step, each ended by reading the loss back.\n")
print(f"| dtype | impl | 1 GPU tokens/s | {big} GPUs tokens/s | scaling efficiency | {big}-GPU step | vs PyTorch DDP |")
print("|---|---|---:|---:|---:|---:|---:|")
for dt in ("float32", "bfloat16"):
    for impl in ("torch-magpie", "PyTorch"):
        one, n = get(impl, dt, 1), get(impl, dt, big)
        if not one and not n:
            continue
        eff = f"{n['tokens_per_s'] / (big * one['tokens_per_s']) * 100:.1f}%" if (one and n) else "–"
        tp = lambda r: f"{r['tokens_per_s']:,.0f}" if r else "–"
        ms = f"{n['step_ms']:.2f} ms" if n else "–"
        vs = "–"
        if impl == "torch-magpie":
            t = get("PyTorch", dt, big)
            vs = f"{n['tokens_per_s'] / t['tokens_per_s']:.2f}x" if (n and t) else "–"
        print(f"| {dt} | {impl} | {tp(one)} | {tp(n)} | {eff} | {ms} | {vs} |")
print("\n1 GPU: plain training, no distributed code (the baseline). "
      f"{big} GPUs: DistributedDataParallel over NCCL, 25 MB buckets, all-reduce overlapped with backward, "
      "each rank its own batch. bfloat16: float32 parameters, forward under autocast.")
for r in rows:
    if r["impl"] == "torch-magpie" and r["world_size"] == big:
        print(f"\n- torch-magpie {r['dtype']}: {r['params']} parameters = {r['grad_bytes'] / 1e6:.1f} MB of float32 gradients "
              f"all-reduced per step in {r['buckets']} buckets")
if bw:
    print("\nNCCL all-reduce between the GPUs (float32, median of 20, through PyTorch):\n")
    print("| size | time | algorithm bandwidth | bus bandwidth |")
    print("|---:|---:|---:|---:|")
    for r in bw:
        print(f"| {r['allreduce_mib']} MiB | {r['ms']:.3f} ms | {r['algbw_gbps']:.0f} GB/s | {r['busbw_gbps']:.0f} GB/s |")
