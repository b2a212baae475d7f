"""The tiny-GPT training step of benchmark/cpu/train_step in PyTorch: the same model as
crates/magpie-models/src/gpt.rs (GPT-2 style, pre-LN, causal SDPA, tanh GELU, tied head), the same
shapes, AdamW (betas 0.9/0.95, weight decay 0.1 on matrices only, lr 1e-3), gradient clipping at
1.0, and the same fixed batch. Prints one JSON line like the Rust side (`train-step`)."""
import argparse, json, math, resource, statistics, time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attn(nn.Module):
    def __init__(s, c, h):
        super().__init__()
        s.c_attn, s.c_proj, s.h = nn.Linear(c, 3 * c), nn.Linear(c, c), h

    def forward(s, x):
        b, t, c = x.shape
        q, k, v = s.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, s.h, c // s.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return s.c_proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(s, c, h):
        super().__init__()
        s.ln_1, s.attn, s.ln_2 = nn.LayerNorm(c), Attn(c, h), nn.LayerNorm(c)
        s.c_fc, s.c_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(s, x):
        x = x + s.attn(s.ln_1(x))
        return x + s.c_proj(F.gelu(s.c_fc(s.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(s, v, t, l, h, c):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(v, c), nn.Embedding(t, c)
        s.h = nn.ModuleList(Block(c, h) for _ in range(l))
        s.ln_f = nn.LayerNorm(c)
        for n, p in s.named_parameters():
            if n.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln" in n:
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * l) if n.endswith("c_proj.weight") else 0.02)

    def loss(s, idx, tgt):
        t = idx.shape[1]
        x = s.wte(idx) + s.wpe(torch.arange(t))
        for blk in s.h:
            x = blk(x)
        logits = F.linear(s.ln_f(x), s.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.view(-1))


def main():
    ap = argparse.ArgumentParser()
    for k, d in [("warmup", 3), ("steps", 10), ("batch", 16), ("block", 64), ("n-layer", 2), ("n-head", 4), ("n-embd", 128), ("vocab", 101), ("threads", 2)]:
        ap.add_argument("--" + k, type=int, default=d)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    m = GPT(a.vocab, a.block, a.n_layer, a.n_head, a.n_embd)
    decay = [p for p in m.parameters() if p.dim() >= 2]
    no_decay = [p for p in m.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-3, betas=(0.9, 0.95))
    b, t, v = a.batch, a.block, a.vocab
    x = torch.tensor([(7 * (k // t) + 3 * (k % t)) % v for k in range(b * t)]).view(b, t)
    y = torch.tensor([(7 * (k // t) + 3 * (k % t) + 3) % v for k in range(b * t)]).view(b, t)
    tot, fw, bw, op = [], [], [], []
    loss = None
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        loss = m.loss(x, y)
        t1 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        t3 = time.perf_counter()
        if i >= a.warmup:
            tot.append((t3 - t0) * 1e3); fw.append((t1 - t0) * 1e3); bw.append((t2 - t1) * 1e3); op.append((t3 - t2) * 1e3)
    med = statistics.median
    print(json.dumps({
        "impl": "PyTorch " + torch.__version__,
        "step_ms": med(tot), "forward_ms": med(fw), "backward_ms": med(bw), "optimizer_ms": med(op),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "params": sum(p.numel() for p in m.parameters()),
        "final_loss": loss.item(),
    }))


if __name__ == "__main__":
    main()
