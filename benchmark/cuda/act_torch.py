"""The cases of crates/magpie-core/examples/act_bench.rs in PyTorch (float32 4096x4096 on
cuda:0, CUDA events around 20 calls after 3 warm-up ones); prints `case<TAB>ms` lines."""
import torch
import torch.nn.functional as F

x = torch.randn(4096, 4096, device="cuda")
g = torch.randn(4096, 4096, device="cuda")


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


cases = {
    "relu": lambda t: F.relu(t),
    "relu masked_fill": lambda t: t.masked_fill(t <= 0, 0.0),
    "leaky_relu": lambda t: F.leaky_relu(t, 0.01),
    "elu": lambda t: F.elu(t, 1.0),
    "hardtanh": lambda t: F.hardtanh(t, -1.0, 1.0),
    "hardswish": lambda t: F.hardswish(t),
    "softplus": lambda t: F.softplus(t, 1.0, 20.0),
    "mish": lambda t: F.mish(t),
    "logsigmoid": lambda t: F.logsigmoid(t),
    "isnan": lambda t: torch.isnan(t),
    "nan_to_num": lambda t: torch.nan_to_num(t),
}
with torch.no_grad():
    for name, f in cases.items():
        print(f"{name}\t{time(lambda: f(x)):.4f}")
for name, key in [("elu fwd+bwd", "elu"), ("mish fwd+bwd", "mish")]:
    def step(f=cases[key]):
        xr = x.detach().requires_grad_(True)
        f(xr).backward(g)
    print(f"{name}\t{time(step):.4f}")
