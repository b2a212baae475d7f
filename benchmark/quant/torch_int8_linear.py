"""PyTorch's side of benchmark/quant/run.sh: float32 nn.Linear and the dynamic int8 Linear that
torch.ao.quantization.quantize_dynamic makes (x86 engine), median ms per call, one JSON line each."""
import json
import sys
import time
import warnings

import torch

warnings.filterwarnings("ignore")
SHAPES = [(1, 768, 3072), (16, 768, 3072), (128, 768, 3072), (128, 1024, 1024), (32, 4096, 4096)]


def median_ms(secs, f):
    for _ in range(3):
        f()
    times = []
    start = time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < secs and len(times) < 2000):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 0.5
    torch.backends.quantized.engine = "x86"
    with torch.inference_mode():
        for m, k, n in SHAPES:
            lin = torch.nn.Linear(k, n)
            x = torch.randn(m, k)
            ms = median_ms(secs, lambda: lin(x))
            print(json.dumps({"side": "torch", "m": m, "k": k, "n": n, "variant": "f32", "ms": ms}))
            q = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear}, dtype=torch.qint8)
            ms = median_ms(secs, lambda: q(x))
            print(json.dumps({"side": "torch", "m": m, "k": k, "n": n, "variant": "int8", "ms": ms}))


if __name__ == "__main__":
    main()
