#!/usr/bin/env python3
"""Registers and spills of the fused engine's kernels, compiled here with NVRTC for sm_90 (no GPU).

    python3 benchmark/models/fused_regs.py [--dtype bf16_t|float|half_t] [--out float] [--filter gemvx1]

Builds the module source as `Kernels::new` does (the core's preamble, the typedefs, kernels.cu)
and prints ptxas's per-kernel line (registers, spill stores/loads). Needs libnvrtc (the CUDA
toolkit, or the `nvidia-cuda-nvrtc` wheel) on the loader path or in NVRTC_LIB.
"""
import argparse, ctypes, glob, os, re, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def nvrtc():
    cands = [os.environ.get("NVRTC_LIB", "")] + glob.glob("/usr/local/cuda*/lib64/libnvrtc.so*")
    for p in sys.path:
        cands += glob.glob(os.path.join(p, "nvidia", "*", "lib", "libnvrtc.so*"))
    for c in cands:
        if c and "builtins" not in c and os.path.exists(c):
            return ctypes.CDLL(c)
    sys.exit("libnvrtc not found (set NVRTC_LIB)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="bf16_t")
    ap.add_argument("--out", default=None, help="OT (default: the storage type)")
    ap.add_argument("--filter", default="gemvx")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--src", default=os.path.join(ROOT, "crates/magpie-models/src/fused/kernels.cu"))
    ap.add_argument("-D", action="append", default=[], help="a macro for the compilation (NAME or NAME=VALUE)")
    args = ap.parse_args()
    core = os.path.join(ROOT, "crates/magpie-core/src/backend/cuda/kernels")
    pre = open(os.path.join(core, "preamble.cu")).read() + open(os.path.join(core, "scalar_ops.cu")).read()
    src = open(args.src).read()
    ot = args.out or args.dtype
    full = f"{pre}\ntypedef {args.dtype} T;\ntypedef {ot} OT;\n#define MP_SUFFIX _x\n{src}"
    lib = nvrtc()
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), full.encode(), b"fused.cu", 0, None, None) != 0:
        sys.exit("nvrtcCreateProgram failed")
    opts = [f"--gpu-architecture={args.arch}", "--std=c++17", "-default-device", "-Xptxas", "-v"] + [f"-D{d}" for d in args.D]
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, buf)
    log = buf.value.decode(errors="replace")
    if rc != 0:
        print(log)
        sys.exit(f"compile failed ({rc})")
    name = None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            name = m.group(1)
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and name and args.filter in name:
            spill = f"spills {m.group(1)}/{m.group(2)} B"
        m2 = re.search(r"Used (\d+) registers", line)
        if m2 and name and args.filter in name:
            print(f"{name:40s} {m2.group(1):>4s} registers  {spill}")
            name = None


if __name__ == "__main__":
    main()
