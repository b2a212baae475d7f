"""PyTorch's side of benchmark/train (`train-bench` is torch-magpie's): the same cases, the same
fixed batches and optimizer settings, timed the same way (warmup, then a synchronised step each:
the loss is read back). Modes: eager (float32), compile (torch.compile of the model, float32),
autocast-bf16 (eager under torch.autocast("cuda", torch.bfloat16)), compile-autocast-bf16 (both).
One JSON line per (case, mode).

- gpt: benchmark/cpu/train_step/train_step.py's GPT (the model of `magpie train`) with 6 layers,
  6 heads, n_embd 384, context 256, batch 64, vocab 96; AdamW (0.9/0.95, wd 0.1 on matrices, lr 1e-3),
  clip_grad_norm_ 1.0.
- bert: transformers' BertForMaskedLM (6 layers, 768, 12 heads, vocab 30522, dropout 0, sdpa),
  batch 4 x 128, the MLM loss over every position, AdamW (lr 1e-4, wd 0.01).
- gpt2-small: the same GPT class at 12 layers / 768 / context 1024 / batch 8 / vocab 50257
  (the autocast modes only).
"""
import argparse, json, os, statistics, sys, time  # noqa: E401

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu", "train_step"))
from train_step import GPT  # noqa: E402

DEV = "cuda"


def fixed(b, t, v, shift):
    k = torch.arange(b * t)
    return ((7 * (k // t) + 3 * (k % t) + shift) % v).view(b, t).to(DEV)


class GPTCuda(GPT):
    def loss(s, idx, tgt):  # the parent builds positions on the CPU
        t = idx.shape[1]
        x = s.wte(idx) + s.wpe(torch.arange(t, device=idx.device))
        for blk in s.h:
            x = blk(x)
        logits = F.linear(s.ln_f(x), s.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), tgt.view(-1))


def timed(step, warmup, steps):
    loss = None
    for _ in range(warmup):
        loss = step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    ms = []
    for _ in range(steps):
        t0 = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms), torch.cuda.max_memory_allocated(), loss


def gpt_case(name, layers, heads, embd, block, batch, vocab, mode, warmup, steps):
    torch.manual_seed(0)
    m = GPTCuda(vocab, block, layers, heads, embd).to(DEV)
    decay = [p for p in m.parameters() if p.dim() >= 2]
    no_decay = [p for p in m.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-3, betas=(0.9, 0.95))
    x, y = fixed(batch, block, vocab, 0), fixed(batch, block, vocab, 3)
    fn = torch.compile(m.loss) if "compile" in mode else m.loss
    amp = "bf16" in mode

    def step():
        with torch.autocast("cuda", torch.bfloat16, enabled=amp):
            loss = fn(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        return loss.item()

    ms, mem, loss = timed(step, warmup, steps)
    n = sum(p.numel() for p in m.parameters())
    tok = batch * block
    # training FLOPs: 6 per parameter per token + attention (12 * layers * block * embd per token, causal halves it)
    flops = 6 * n * tok + 6 * layers * block * embd * tok
    return {"case": name, "mode": mode, "step_ms": ms, "tokens_per_s": tok / ms * 1e3, "peak_mem_bytes": mem, "params": n, "loss": loss, "train_flops": flops}


def bert_case(mode, warmup, steps):
    from transformers import BertConfig, BertForMaskedLM
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=6, num_attention_heads=12, intermediate_size=3072,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation="sdpa")
    m = BertForMaskedLM(cfg).to(DEV).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01)
    b, t, v = 4, 128, 30522
    x, y = fixed(b, t, v, 0), fixed(b, t, v, 3)
    fwd = torch.compile(m) if "compile" in mode else m
    amp = "bf16" in mode

    def step():
        # the masked-LM loss inside the model (labels=), as transformers trains it; under autocast
        # cross_entropy runs in float32 on the bf16 logits (autocast's fp32 list)
        with torch.autocast("cuda", torch.bfloat16, enabled=amp):
            loss = fwd(input_ids=x, labels=y).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    ms, mem, loss = timed(step, warmup, steps)
    return {"case": "bert", "mode": mode, "step_ms": ms, "tokens_per_s": b * t / ms * 1e3, "peak_mem_bytes": mem,
            "params": sum(p.numel() for p in m.parameters()), "loss": loss}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="gpt,bert,gpt2-small")
    ap.add_argument("--modes", default="eager,compile,autocast-bf16,compile-autocast-bf16")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    modes = a.modes.split(",")
    for case in a.cases.split(","):
        for mode in modes:
            if case == "gpt2-small" and "bf16" not in mode:
                continue
            if case == "gpt":
                r = gpt_case("gpt", 6, 6, 384, 256, 64, 96, mode, a.warmup, a.steps)
            elif case == "gpt2-small":
                r = gpt_case("gpt2-small", 12, 12, 768, 1024, 8, 50257, mode, a.warmup, a.steps)
            else:
                r = bert_case(mode, a.warmup, a.steps)
            r["impl"] = f"PyTorch {torch.__version__}"
            r["gpu"] = torch.cuda.get_device_name()
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
