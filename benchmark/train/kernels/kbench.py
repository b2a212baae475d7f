#!/usr/bin/env python3
"""Standalone timing and checking of the training kernels (flash attention backward, add + LayerNorm
forward) outside the Rust build: the .cu sources are compiled with NVRTC as kern.rs does (preamble,
kcommon.cuh, `#define T`, the file), launched through the CUDA driver with ctypes, on PyTorch tensors,
and checked against PyTorch float32 math.

  compile: python3 kbench.py compile OUTDIR NAME=SRC_DIR[=FILE.DTYPE,...] ...  (needs NVRTC: here via
           the `cuda-bindings` package; writes OUTDIR/NAME.<file>.<dtype>.cubin for sm_90; the
           optional list limits what is compiled)
  run:     python3 kbench.py run OUTDIR NAME [NAME ...]                       (on the GPU machine)

Each NAME is a copy of crates/magpie-core/src/backend/cuda/kernels (e.g. main's and a branch's), so
both run in the same process on the same GPU.
"""
import ctypes as C
import json
import math
import os
import sys

FILES = {
    "attention_bwd": ["attention_common.cuh", "attention_bwd.cu"],
    "add_norm": ["add_norm.cu"],
}
DTYPES = {"bf16": "bf16_t", "f16": "half_t", "f32": "float"}


def source(kdir, file, ct):
    rd = lambda f: open(os.path.join(kdir, f)).read()
    pre = rd("preamble.cu") + rd("scalar_ops.cu")
    return f"{pre}\n{rd('kcommon.cuh')}\n#define T {ct}\n" + "".join(rd(f) for f in FILES[file])


def compile_all(outdir, specs):
    from cuda.bindings import nvrtc

    os.makedirs(outdir, exist_ok=True)
    for spec in specs:
        name, kdir, *only = spec.split("=")
        for file in FILES:
            for dt, ct in DTYPES.items():
                if only and f"{file}.{dt}" not in only[0].split(","):
                    continue
                src = source(kdir, file, ct)
                _, prog = nvrtc.nvrtcCreateProgram(src.encode(), f"{file}.cu".encode(), 0, [], [])
                opts = [b"--gpu-architecture=sm_90", b"--std=c++17", b"-default-device"]
                (r,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
                if r != nvrtc.nvrtcResult.NVRTC_SUCCESS:
                    _, n = nvrtc.nvrtcGetProgramLogSize(prog)
                    log = b" " * n
                    nvrtc.nvrtcGetProgramLog(prog, log)
                    sys.exit(f"{name} {file} {dt}: {log.decode(errors='replace')}")
                _, n = nvrtc.nvrtcGetCUBINSize(prog)
                buf = b" " * n
                nvrtc.nvrtcGetCUBIN(prog, buf)
                open(os.path.join(outdir, f"{name}.{file}.{dt}.cubin"), "wb").write(buf)
        print("compiled", name, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
class Opnd(C.Structure):
    _fields_ = [("ptr", C.c_uint64), ("sb", C.c_int64), ("sh", C.c_int64), ("ss", C.c_int64)]


class FbParams(C.Structure):
    _fields_ = [(n, C.c_int) for n in ("batch", "n_heads", "n_kv_heads", "head_dim", "q_len", "kv_len", "causal")] + [
        ("scale_log2", C.c_float)
    ] + [(n, Opnd) for n in ("q", "k", "v", "o", "dout", "dq", "dk", "dv")] + [
        ("lse", C.c_uint64),
        ("delta", C.c_uint64),
        ("scale", C.c_float),
        ("pad", C.c_int),
    ]


class Driver:
    def __init__(self, outdir):
        import torch

        self.torch = torch
        self.cu = C.CDLL("libcuda.so.1")
        torch.zeros(1, device="cuda")
        self.outdir = outdir
        self.mods = {}

    def ck(self, r, what):
        if r != 0:
            raise RuntimeError(f"{what}: CUresult {r}")

    def func(self, name, file, dt, kernel, smem=0):
        key = (name, file, dt)
        if key not in self.mods:
            data = open(os.path.join(self.outdir, f"{name}.{file}.{dt}.cubin"), "rb").read()
            m = C.c_void_p()
            self.ck(self.cu.cuModuleLoadData(C.byref(m), C.c_char_p(data)), "cuModuleLoadData")
            self.mods[key] = (m, data)
        f = C.c_void_p()
        self.ck(self.cu.cuModuleGetFunction(C.byref(f), self.mods[key][0], kernel.encode()), f"get {kernel}")
        if smem > 48 * 1024:
            self.ck(self.cu.cuFuncSetAttribute(f, 8, smem), "smem attribute")
        return f

    def launch(self, f, grid, block, smem, args):
        ptrs = (C.c_void_p * len(args))(*[C.cast(C.pointer(a), C.c_void_p) for a in args])
        stream = C.c_void_p(self.torch.cuda.current_stream().cuda_stream)
        self.ck(self.cu.cuLaunchKernel(f, *grid, *block, smem, stream, ptrs, None), "cuLaunchKernel")


def opnd(t):
    return Opnd(t.data_ptr(), t.stride(0), t.stride(1), t.stride(2))


def time_ms(torch, fn, reps=20):
    """Median device time of `fn`'s launches: a sleep kernel holds the stream while the host queues
    every repetition, so the events see no host (ctypes launch) time between them."""
    fn()
    torch.cuda.synchronize()
    evs = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    torch.cuda._sleep(100_000_000)
    evs[0].record()
    for i in range(reps):
        fn()
        evs[i + 1].record()
    torch.cuda.synchronize()
    ts = sorted(evs[i].elapsed_time(evs[i + 1]) for i in range(reps))
    return ts[len(ts) // 2]


# flash attention backward ------------------------------------------------------------------------
def flash_case(drv, names, B, H, KVH, TQ, TK, D, causal, dt, timing):
    torch = drv.torch
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[dt]
    g = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(B, H, TQ, D, device="cuda", generator=g).to(tdt)
    k = torch.randn(B, KVH, TK, D, device="cuda", generator=g).to(tdt)
    v = torch.randn(B, KVH, TK, D, device="cuda", generator=g).to(tdt)
    do = torch.randn(B, H, TQ, D, device="cuda", generator=g).to(tdt)
    scale = 1.0 / math.sqrt(D)
    qf, kf, vf = (t.float().requires_grad_() for t in (q, k, v))
    rep = H // KVH
    s = qf @ kf.repeat_interleave(rep, 1).transpose(-1, -2) * scale
    if causal:
        off = TK - TQ if causal == 2 else 0
        i = torch.arange(TQ, device="cuda")[:, None]
        j = torch.arange(TK, device="cuda")[None, :]
        s = s.masked_fill(j > i + off, float("-inf"))
    lse = torch.logsumexp(s, -1)
    o = torch.softmax(s, -1).nan_to_num(0.0) @ vf.repeat_interleave(rep, 1)
    o.backward(do.float())
    lse2 = torch.where(torch.isfinite(lse), lse * (1 / math.log(2)), torch.full_like(lse, float("inf"))).contiguous()
    ob = o.detach().to(tdt).contiguous()
    ref = {"dq": qf.grad, "dk": kf.grad, "dv": vf.grad}
    res = {"case": f"B{B} H{H}/{KVH} Tq{TQ} Tk{TK} d{D} causal{causal} {dt}"}
    outs = {}
    for name in names:
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        delta = torch.empty(B * H * TQ, device="cuda")
        p = FbParams(B, H, KVH, D, TQ, TK, causal, scale / math.log(2), opnd(q), opnd(k), opnd(v), opnd(ob), opnd(do), opnd(dq), opnd(dk), opnd(dv), lse2.data_ptr(), delta.data_ptr(), scale, 0)
        stream = 64 if D == 64 else 32
        kv_smem = (2 * 64 * D + 4 * stream * D) * 2 + 4 * stream * 4
        q_smem = (2 * 64 * D + 4 * stream * D) * 2
        fns = []
        rows = B * H * TQ
        try:
            fdel = drv.func(name, "attention_bwd", dt, f"flash_bwd_delta_d{D}")
            per = 256 // (D // 8)
            fns.append(("delta", lambda: drv.launch(fdel, ((rows + per - 1) // per, 1, 1), (256, 1, 1), 0, [p])))
        except RuntimeError:
            fdel = drv.func(name, "attention_bwd", dt, "flash_bwd_delta")
            fns.append(("delta", lambda: drv.launch(fdel, ((rows + 7) // 8, 1, 1), (256, 1, 1), 0, [p])))
        fkv = drv.func(name, "attention_bwd", dt, f"flash_bwd_kv_tc_d{D}", kv_smem)
        fq = drv.func(name, "attention_bwd", dt, f"flash_bwd_q_tc_d{D}", q_smem)
        fns.append(("kv", lambda: drv.launch(fkv, ((TK + 63) // 64, KVH, B), (128, 1, 1), kv_smem, [p])))
        fns.append(("q", lambda: drv.launch(fq, ((TQ + 63) // 64, H, B), (128, 1, 1), q_smem, [p])))
        for _, fn in fns:
            fn()
        torch.cuda.synchronize()
        err = {}
        for key, got in (("dq", dq), ("dk", dk), ("dv", dv)):
            r = ref[key]
            err[key] = float((got.float() - r).abs().max() / r.abs().max().clamp_min(1e-6))
        outs[name] = (dq, dk, dv)
        res[f"{name}_relerr"] = err
        if timing:
            for kname, fn in fns:
                res[f"{name}_{kname}_us"] = round(1000 * time_ms(torch, fn), 1)
            res[f"{name}_all_us"] = round(1000 * time_ms(torch, lambda: [fn() for _, fn in fns]), 1)
    if len(names) > 1:
        a, b = outs[names[0]], outs[names[-1]]
        res["maxdiff_first_last"] = [float((x.float() - y.float()).abs().max()) for x, y in zip(a, b)]
    return res


# add + LayerNorm forward ---------------------------------------------------------------------------
def add_ln_case(drv, names, rows, n, xdt, rdt, T, timing):
    torch = drv.torch
    tmap = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
    codes = {"f32": 0, "bf16": 1, "f16": 2}
    g = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randn(rows, n, device="cuda", generator=g).to(tmap[xdt])
    r = torch.randn(rows, n, device="cuda", generator=g).to(tmap[rdt])
    bias = torch.randn(n, device="cuda", generator=g).to(tmap[T])
    w = torch.randn(n, device="cuda", generator=g).to(tmap[T])
    lb = torch.randn(n, device="cuda", generator=g).to(tmap[T])
    # the composite: h = (x + bias) + residual in PyTorch's promotion, layer norm in T
    xb = x + bias
    hh = (xb + r).to(tmap[T])
    ref = torch.nn.functional.layer_norm(hh.float(), (n,), w.float(), lb.float(), 1e-5)
    res = {"case": f"add_ln_fwd {rows}x{n} x {xdt} res {rdt} T {T}"}
    for name in names:
        h = torch.empty(rows, n, device="cuda", dtype=tmap[T])
        y = torch.empty_like(h)
        mean = torch.empty(rows, device="cuda", dtype=tmap[T])
        rstd = torch.empty_like(mean)
        try:
            f = drv.func(name, "add_norm", T, "add_ln_fwd")
        except FileNotFoundError:
            continue
        args = [C.c_uint64(x.data_ptr()), C.c_int(codes[xdt]), C.c_uint64(r.data_ptr()), C.c_int(codes[rdt]), C.c_uint64(bias.data_ptr()), C.c_int(codes[T]),
                C.c_int(codes[str(xb.dtype).split(".")[-1].replace("bfloat16", "bf16").replace("float32", "f32").replace("float16", "f16")]), C.c_int(codes[T]),
                C.c_uint64(w.data_ptr()), C.c_uint64(lb.data_ptr()), C.c_uint64(h.data_ptr()), C.c_uint64(y.data_ptr()), C.c_uint64(mean.data_ptr()),
                C.c_uint64(rstd.data_ptr()), C.c_int64(n), C.c_double(1e-5)]
        vec = False
        try:
            fv = drv.func(name, "add_norm", T, "add_ln_fwd_v4")
            vec = n % 4 == 0
        except RuntimeError:
            pass
        if vec:
            thr = min(1024, max(32, ((n // 4 + 1) // 2 + 31) // 32 * 32))
            fn = lambda: drv.launch(fv, (rows, 1, 1), (thr, 1, 1), 0, args)
        else:
            thr = min(1024, max(32, ((n + 3) // 4 + 31) // 32 * 32))
            fn = lambda: drv.launch(f, (rows, 1, 1), (thr, 1, 1), 0, args)
        fn()
        torch.cuda.synchronize()
        res[f"{name}_y_err"] = float((y.float() - ref).abs().max())
        res[f"{name}_h_err"] = float((h.float() - hh.float()).abs().max())
        if timing:
            res[f"{name}_us"] = round(1000 * time_ms(torch, fn), 1)
    return res


def run(outdir, names):
    drv = Driver(outdir)
    print(json.dumps({"gpu": drv.torch.cuda.get_device_name(), "torch": drv.torch.__version__}), flush=True)
    cases = [
        (8, 12, 12, 1024, 1024, 64, 1, "bf16", True),   # GPT-2 small
        (8, 6, 6, 1024, 1024, 128, 1, "bf16", True),
        (4, 8, 2, 1024, 1024, 64, 0, "bf16", True),
        (2, 4, 2, 333, 333, 64, 1, "bf16", False),
        (1, 3, 3, 200, 257, 128, 0, "f16", False),
        (2, 4, 1, 100, 300, 64, 2, "bf16", False),
        (1, 2, 2, 77, 45, 128, 2, "f16", False),
    ]
    ln_cases = [(8192, 768, "bf16", "f32", "f32", True), (8192, 768, "f32", "f32", "f32", True), (4096, 768, "bf16", "bf16", "bf16", True),
                (300, 1000, "bf16", "f32", "f32", False), (17, 4100, "f16", "f16", "f16", False), (33, 6, "bf16", "f32", "f32", False)]
    if os.environ.get("KB_NCU"):
        # under ncu: one launch of each kernel of the GPT-2 shapes, untimed
        cases, ln_cases = [cases[0][:-1] + (False,)], [ln_cases[0][:-1] + (False,)]
    for c in cases:
        print(json.dumps(flash_case(drv, names, *c)), flush=True)
    for c in ln_cases:
        print(json.dumps(add_ln_case(drv, names, *c)), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "compile":
        compile_all(sys.argv[2], sys.argv[3:])
    else:
        run(sys.argv[2], sys.argv[3:])
