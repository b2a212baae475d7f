"""Times PyTorch (Hugging Face transformers) on the model benchmark cases: prefill / forward (ms) and greedy
decoding (tok/s) of random-weight models whose configs this script makes (no hub, no network).

    python benchmark/models/transformers_bench.py [--impl eager|compile] [--cases gpt2,llama-3.2-1b,...]
        [--metrics prefill,decode,decode_steady,forward] [--warmup 2] [--reps 5] [--device cuda|cpu] [--tiny]
        [--config-out DIR] [--config-only]
    python benchmark/models/transformers_bench.py --floors [--device cuda|cpu] [--tiny]

`--impl eager` (default): transformers as shipped, `attn_implementation="sdpa"`, `generate()` with its
dynamic KV cache. `--impl compile`: a static-cache greedy loop in the style of gpt-fast, written here
(not through `generate`): a `transformers.StaticCache`, the prompt run eagerly into it, then a one-token
decode step under `torch.compile(mode="reduce-overhead", fullgraph=True)` (CUDA graphs), argmax on the
device. `--floors`: one line with the device's measured copy bandwidth and matmul peaks (what the report
turns into physical floors), then exit.

One JSON object per (case, metric) on stdout, with the keys the report joins on (case, metric, impl,
value, unit, peak_mem_bytes) and the workload (batch, prompt_tokens, new_tokens, dtype). A failure (out
of memory, a compile error) is a line with "error" instead of "value"; the run goes on. Progress goes to
stderr. `--config-out DIR` writes DIR/<case>/config.json (what the Rust side builds the same shape
from) and DIR/<case>/workload.json (dtype, token counts, the prompt ids or the formula that makes
them); `--config-only` writes them without building any model. README.md beside this file says what
each case and metric measures.
"""
import argparse
import gc
import inspect
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable, Optional

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
import transformers
from transformers import (AutoModel, AutoModelForCausalLM, BertConfig, GPT2Config, LlamaConfig, LogitsProcessor,
                          LogitsProcessorList)

MAJOR = int(transformers.__version__.split(".")[0])
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

# Prompt ids of the cases too long to list in workload.json: id[i] = (i * MUL + ADD) % vocab_size, i = 0..len-1.
PROMPT_MUL, PROMPT_ADD = 7919, 13


def gpt2_config(tiny):
    """GPT-2 (124M) widths with 6 layers; float32."""
    if tiny:
        return GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=256,
                          bos_token_id=999, eos_token_id=999, architectures=["GPT2LMHeadModel"])
    return GPT2Config(
        n_layer=6, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024,
        bos_token_id=50256, eos_token_id=50256, architectures=["GPT2LMHeadModel"],
    )


def llama_config(tiny):
    """Llama-3.2-1B: GQA 32/8 heads, llama3 rope scaling, tied embeddings; bfloat16."""
    rope_scaling = {
        "rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    shape = (
        dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             intermediate_size=128, vocab_size=1000)
        if tiny else
        dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
             intermediate_size=8192, vocab_size=128256)
    )
    # rope_theta + rope_scaling is the form both transformers 4.x and 5.x accept (5.x folds it into
    # rope_parameters).
    return LlamaConfig(
        **shape, max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0, rope_scaling=rope_scaling,
        tie_word_embeddings=True, hidden_act="silu", attention_bias=False, mlp_bias=False,
        bos_token_id=128000 if not tiny else 1, eos_token_id=128001 if not tiny else 2,
        architectures=["LlamaForCausalLM"],
    )


def bert_config(tiny):
    """BERT-base widths with 6 layers (768 wide, 12 heads, FFN 3072, vocab 30522); absolute positions."""
    if tiny:
        return BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                          vocab_size=1000, max_position_embeddings=512, architectures=["BertModel"])
    return BertConfig(num_hidden_layers=6, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                      vocab_size=30522, max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu",
                      layer_norm_eps=1e-12, architectures=["BertModel"])


@dataclass
class Case:
    make: Callable
    model: str  # "causal-lm" (AutoModelForCausalLM) or "encoder" (AutoModel, no head)
    dtype: str
    batch: int
    prompt: int
    new: int
    tiny_prompt: int
    tiny_new: int
    metrics: tuple
    formula: bool = False  # prompt ids from the formula above instead of torch.randint
    max_warmup: Optional[int] = None  # caps on --warmup / --reps for the long cases
    max_reps: Optional[int] = None


DECODE = ("prefill", "decode", "decode_steady")
CASES = {
    "gpt2": Case(gpt2_config, "causal-lm", "float32", 1, 128, 128, 16, 12, DECODE),
    "llama-3.2-1b": Case(llama_config, "causal-lm", "bfloat16", 1, 32, 256, 8, 16, DECODE),
    "llama-3.2-1b-prefill-100k": Case(llama_config, "causal-lm", "bfloat16", 1, 100_000, 0, 256, 0, ("prefill",),
                                      formula=True, max_warmup=1, max_reps=2),
    "llama-3.2-1b-b16": Case(llama_config, "causal-lm", "bfloat16", 16, 32, 256, 8, 16, DECODE, max_reps=3),
    "llama-3.2-1b-b64": Case(llama_config, "causal-lm", "bfloat16", 64, 32, 256, 8, 16, DECODE, max_reps=3),
    "bert": Case(bert_config, "encoder", "float32", 4, 128, 0, 16, 0, ("forward",)),
    "bert-bf16": Case(bert_config, "encoder", "bfloat16", 4, 128, 0, 16, 0, ("forward",)),
}
METRICS = ("prefill", "decode", "decode_steady", "forward")
# What the compile impl runs when --metrics is not given: the static-cache decode (the gpt-fast
# comparison) and BERT's forward. Its prefill (a compiled forward of the prompt, dynamic=False) runs
# only when asked for with --metrics; it costs one more compilation per case.
COMPILE_DEFAULT = ("decode", "decode_steady", "forward")


class StepClock(LogitsProcessor):
    """Records when each generation step's logits are ready (after a device sync): the first call
    follows the prefill, each later one a single-token decode step."""

    def __init__(self, sync):
        self.sync, self.stamps = sync, []

    def __call__(self, input_ids, scores):
        self.sync()
        self.stamps.append(time.perf_counter())
        return scores


def config_dict(cfg, dtype):
    """The config as save_pretrained writes it, with the dtype the case runs in."""
    d = json.loads(cfg.to_json_string())
    d["dtype" if MAJOR >= 5 else "torch_dtype"] = dtype
    return d


def build(case, cfg, device):
    """A random-weight model made directly on the device, eval mode, SDPA attention."""
    kw = {"dtype" if MAJOR >= 5 else "torch_dtype": DTYPES[case.dtype], "attn_implementation": "sdpa"}
    auto = AutoModelForCausalLM if case.model == "causal-lm" else AutoModel
    with torch.device(device):
        model = auto.from_config(cfg, **kw)
    return model.to(device).eval()


def prompt_ids(case, cfg, t_prompt, seed):
    """(batch, t_prompt) int64 ids on the CPU, and what workload.json records of them."""
    if case.formula:
        i = torch.arange(t_prompt, dtype=torch.int64)
        ids = ((i * PROMPT_MUL + PROMPT_ADD) % cfg.vocab_size).expand(case.batch, -1).contiguous()
        return ids, {"prompt_len": t_prompt, "prompt_formula": f"(i * {PROMPT_MUL} + {PROMPT_ADD}) % {cfg.vocab_size}",
                     "prompt_mul": PROMPT_MUL, "prompt_add": PROMPT_ADD, "prompt_mod": cfg.vocab_size}
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, cfg.vocab_size, (case.batch, t_prompt), generator=gen)
    return ids, {"prompt_ids": ids[0].tolist() if case.batch == 1 else ids.tolist()}


def model_stats(model, cfg, case):
    """Parameter counts the report's floors need: all, embeddings (lookups, not matmuls), the LM head
    (tied or not), the matmul width of attention and the layer count."""
    params = sum(p.numel() for p in model.parameters())
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    emb = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding))
    head, tied = 0, False
    if case.model == "causal-lm" and model.get_output_embeddings() is not None:
        w = model.get_output_embeddings().weight
        head = w.numel()
        tied = w is model.get_input_embeddings().weight
    layers = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer")
    heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head")
    width = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd")
    head_dim = getattr(cfg, "head_dim", None) or width // heads
    return {"params": params, "param_bytes": param_bytes, "embedding_params": emb, "lm_head_params": head,
            "lm_head_tied": tied, "layers": layers, "attn_width": heads * head_dim}


def forward_flops(st, case, batch, t):
    """Matmul FLOPs of one forward over `t` tokens per sequence: 2 x (weights used per token) x tokens,
    the LM head on the last position only (as prefill computes it), plus attention's QK^T and PV
    (4 x layers x width x t^2, halved for causal)."""
    body = st["params"] - st["embedding_params"] - (0 if st["lm_head_tied"] else st["lm_head_params"])
    attn = 4 * st["layers"] * st["attn_width"] * t * t * (0.5 if case.model == "causal-lm" else 1.0)
    return int(batch * (2 * body * t + 2 * st["lm_head_params"] + attn))


def measure_floors(device, tiny, sync):
    """Device copy bandwidth (bytes read + written per second of y.copy_(x)) and bf16 / f32 matmul peaks
    (f32 without TF32), each the median of several timed samples."""
    nbytes = (64 << 20) if tiny else (1 << 30)
    n = 256 if tiny else 8192
    x = torch.ones(nbytes, dtype=torch.uint8, device=device)
    y = torch.empty_like(x)

    def timed(fn, inner, samples=7):
        fn()
        sync()
        ts = []
        for _ in range(samples):
            sync()
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            sync()
            ts.append((time.perf_counter() - t0) / inner)
        return statistics.median(ts)

    copy_s = timed(lambda: y.copy_(x), 10)
    del x, y
    out = {"metric": "floors", "impl": "floors", "copy_GBps": 2 * nbytes / copy_s / 1e9, "copy_bytes": nbytes,
           "matmul_n": n}
    prec = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")  # no TF32
        for name, dt, inner in (("bf16_tflops", torch.bfloat16, 20), ("f32_tflops", torch.float32, 5)):
            a = torch.randn(n, n, device=device, dtype=dt)
            b = torch.randn(n, n, device=device, dtype=dt)
            c = torch.empty(n, n, device=device, dtype=dt)
            out[name] = 2 * n ** 3 / timed(lambda: torch.matmul(a, b, out=c), inner) / 1e12
            del a, b, c
    finally:
        torch.set_float32_matmul_precision(prec)
    return out


def call_kwargs(model, cache, positions, batch, keep):
    """forward() keyword arguments for a step into `cache` at `positions` (a 1-D device tensor), across
    transformers versions: the cache argument is `past_key_values` (4.x, 5.0-5.2x) or `cache` (later),
    and `cache_position` exists only in some versions."""
    params = inspect.signature(model.forward).parameters
    kw = {"use_cache": True, "position_ids": positions.unsqueeze(0).expand(batch, -1), **keep}
    kw["past_key_values" if "past_key_values" in params else "cache"] = cache
    if "cache_position" in params:
        kw["cache_position"] = positions
    return kw


def make_static_cache(model, batch, max_len, device, dtype):
    """A StaticCache for `batch` sequences of up to `max_len` tokens (5.x infers batch, device and dtype
    at the first update; 4.x wants them up front)."""
    from transformers import StaticCache
    params = inspect.signature(StaticCache.__init__).parameters
    kw = {"config": model.config, "max_cache_len": max_len}
    if "max_batch_size" in params:
        kw["max_batch_size"] = batch
    elif "batch_size" in params:
        kw["batch_size"] = batch
    if "device" in params:
        kw["device"] = device
    if "dtype" in params:
        kw["dtype"] = dtype
    return StaticCache(**kw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impl", choices=("eager", "compile"), default="eager",
                    help="eager: transformers generate() with sdpa (default); compile: static cache + torch.compile")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from {list(CASES)}")
    ap.add_argument("--metrics", default=None,
                    help=f"comma-separated, from {list(METRICS)} (default: all a case has; for --impl compile {list(COMPILE_DEFAULT)})")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs before each metric (default 2)")
    ap.add_argument("--reps", type=int, default=5, help="timed runs per metric; the median is reported (default 5)")
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes and token counts (to check the script on a CPU)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads on CPU (0: leave as is)")
    ap.add_argument("--floors", action="store_true", help="print the device's copy bandwidth and matmul peaks, then exit")
    ap.add_argument("--config-out", metavar="DIR", help="write DIR/<case>/config.json and workload.json")
    ap.add_argument("--config-only", action="store_true", help="with --config-out: write the files and exit")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    cases = [c for c in args.cases.split(",") if c]
    metrics = [m for m in (args.metrics or ",".join(COMPILE_DEFAULT if args.impl == "compile" else METRICS)).split(",") if m]
    bad = [c for c in cases if c not in CASES] + [m for m in metrics if m not in METRICS]
    if bad or args.reps < 1 or args.warmup < 0:
        ap.error(f"unknown case/metric {bad} (cases {list(CASES)}, metrics {list(METRICS)}), or reps < 1 / warmup < 0")
    if args.config_only and not args.config_out:
        ap.error("--config-only needs --config-out")
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and not args.config_only and not torch.cuda.is_available():
        sys.exit("transformers_bench: CUDA is not available (use --device cpu --tiny to check the script on a CPU)")
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    device_name = (torch.cuda.get_device_name(device) if cuda and torch.cuda.is_available()
                   else f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)")
    if args.floors:
        row = measure_floors(device, args.tiny, sync)
        row.update(device=device_name, torch=torch.__version__, tiny=args.tiny)
        print(json.dumps(row), flush=True)
        print(f"[floors] copy {row['copy_GBps']:.0f} GB/s, bf16 {row['bf16_tflops']:.1f} TFLOP/s, "
              f"f32 {row['f32_tflops']:.1f} TFLOP/s", file=sys.stderr)
        return

    env = {
        "impl": "transformers" if args.impl == "eager" else "torch.compile",
        "device": device_name,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "attn_implementation": "sdpa",
        "tiny": args.tiny,
    }

    for name in cases:
        case = CASES[name]
        t_prompt, t_new = (case.tiny_prompt, case.tiny_new) if args.tiny else (case.prompt, case.new)
        cfg = case.make(args.tiny)
        prompt, recorded = prompt_ids(case, cfg, t_prompt, args.seed)
        workload = {"case": name, "dtype": case.dtype, "batch": case.batch, "prompt_tokens": t_prompt,
                    "new_tokens": t_new, "tiny": args.tiny}
        if args.config_out:
            d = os.path.join(args.config_out, name)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(config_dict(cfg, case.dtype), f, indent=2, sort_keys=True)
                f.write("\n")
            with open(os.path.join(d, "workload.json"), "w") as f:
                json.dump({**workload, "model": case.model, "metrics": list(case.metrics), **recorded}, f)
                f.write("\n")
            print(f"[{name}] wrote {d}/config.json, workload.json", file=sys.stderr)
        if args.config_only:
            continue
        case_metrics = [m for m in metrics if m in case.metrics]
        if not case_metrics:
            continue
        if args.impl == "compile" and case.formula:
            print(f"[{name}] skipped: the compile impl does not run the long-prompt prefill", file=sys.stderr)
            continue
        warmup = min(args.warmup, case.max_warmup) if case.max_warmup is not None else args.warmup
        reps = min(args.reps, case.max_reps) if case.max_reps is not None else args.reps
        if args.impl == "compile":
            warmup = max(warmup, 1)  # the first run compiles and records the CUDA graphs

        def error_row(metric, e):
            print(json.dumps({"case": name, "metric": metric, "error": f"{type(e).__name__}: {e}"[:2000], **workload,
                              **env}), flush=True)
            print(f"[{name}] {metric}: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr)

        torch.manual_seed(args.seed)
        try:
            model = build(case, cfg, device)
        except Exception as e:  # e.g. out of memory: report the case as failed and go on
            for m in case_metrics:
                error_row(m, e)
            continue
        stats = model_stats(model, cfg, case)
        weights_bytes = torch.cuda.memory_allocated(device) if cuda else None
        print(f"[{name}] {stats['params'] / 1e6:.1f}M parameters, {case.dtype}, batch {case.batch}, {env['impl']}, "
              f"{env['device']}", file=sys.stderr)
        # prefill_flops: matmul FLOPs of one forward of the whole prompt batch (the report's prefill floor).
        extra = {"weights_bytes": weights_bytes, **stats,
                 "prefill_flops": forward_flops(stats, case, case.batch, t_prompt) if t_prompt else None}
        ids = prompt.to(device)

        def emit(metric, value, unit, peak, times, **more):
            row = {"case": name, "metric": metric, "value": value, "unit": unit, "peak_mem_bytes": peak,
                   **workload, **extra, **more, "warmup": warmup, "reps": len(times), "times_ms": times, **env}
            print(json.dumps(row), flush=True)
            print(f"[{name}] {metric}: {value:.4g} {unit} (median of {len(times)})", file=sys.stderr)

        def reset_peak():
            sync()
            if cuda:
                gc.collect()
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)

        def peak():
            return torch.cuda.max_memory_allocated(device) if cuda else None

        def emit_decode(peak_b, total_ms, steady_ms, **more):
            """decode: batch x new tokens / median end-to-end time; decode_steady: batch x (new - 1) tokens
            / median time from the first token to the last."""
            med = statistics.median(total_ms)
            if "decode" in case_metrics:
                emit("decode", case.batch * t_new / (med * 1e-3), "tok/s", peak_b, total_ms, generate_ms=med, **more)
            if "decode_steady" in case_metrics and t_new > 1:
                st = statistics.median(steady_ms)
                emit("decode_steady", case.batch * (t_new - 1) / (st * 1e-3), "tok/s", peak_b, total_ms,
                     steady_ms=steady_ms, **more)

        if args.impl == "eager":
            run_eager(model, case, cfg, ids, t_prompt, t_new, case_metrics, warmup, reps, sync, reset_peak, peak,
                      emit, emit_decode, error_row)
        else:
            run_compiled(model, case, ids, t_prompt, t_new, case_metrics, warmup, reps, sync, reset_peak, peak,
                         emit, emit_decode, error_row, device)
        del model
        gc.collect()
        if args.impl == "compile":
            torch._dynamo.reset()
            try:
                from torch._dynamo.utils import counters
                counters.clear()
            except Exception:
                pass
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)


def logits_keep(model):
    """Generation computes only the last position's logits in prefill; prefill here does the same."""
    fwd_params = inspect.signature(model.forward).parameters
    return {"logits_to_keep": 1} if "logits_to_keep" in fwd_params else (
        {"num_logits_to_keep": 1} if "num_logits_to_keep" in fwd_params else {})


def run_eager(model, case, cfg, ids, t_prompt, t_new, metrics, warmup, reps, sync, reset_peak, peak, emit,
              emit_decode, error_row):
    """transformers as shipped: prefill / forward as one call, decoding through generate()."""
    mask = torch.ones_like(ids)
    batch = ids.shape[0]
    if case.model == "causal-lm":
        keep = logits_keep(model)
        gen_kw = dict(attention_mask=mask, max_new_tokens=t_new, min_new_tokens=t_new, do_sample=False,
                      use_cache=True, num_beams=1, pad_token_id=cfg.eos_token_id)

    def prefill():
        return model(input_ids=ids, attention_mask=mask, use_cache=True, **keep).logits

    def forward():
        return model(input_ids=ids).last_hidden_state

    def generate(clock):
        out = model.generate(ids, logits_processor=LogitsProcessorList([clock]), **gen_kw)
        if out.shape != (batch, t_prompt + t_new):
            raise RuntimeError(f"generate returned shape {tuple(out.shape)}, expected {(batch, t_prompt + t_new)}")
        if len(clock.stamps) != t_new:
            raise RuntimeError(f"{len(clock.stamps)} generation steps seen, expected {t_new}")

    for metric in [m for m in metrics if m in ("prefill", "forward")]:
        try:
            with torch.inference_mode():
                fn = prefill if metric == "prefill" else forward
                for _ in range(warmup):
                    fn()
                reset_peak()
                times = []
                for _ in range(reps):
                    sync()
                    t0 = time.perf_counter()
                    fn()
                    sync()
                    times.append((time.perf_counter() - t0) * 1e3)
                med = statistics.median(times)
                emit(metric, med, "ms", peak(), times, tok_per_s=batch * t_prompt / (med * 1e-3))
        except Exception as e:  # one failing metric (e.g. OOM) must not hide the others
            error_row(metric, e)
    # decode and decode_steady come from the same runs: each step's logits are stamped after a sync
    # (generate() syncs every step anyway, to check for finished sequences).
    dm = [m for m in metrics if m in ("decode", "decode_steady")]
    if dm:
        try:
            with torch.inference_mode():
                for _ in range(warmup):
                    generate(StepClock(sync))
                reset_peak()
                total, steady = [], []
                for _ in range(reps):
                    clock = StepClock(sync)
                    sync()
                    t0 = time.perf_counter()
                    generate(clock)
                    sync()
                    total.append((time.perf_counter() - t0) * 1e3)
                    steady.append((clock.stamps[-1] - clock.stamps[0]) * 1e3)
                emit_decode(peak(), total, steady)
        except Exception as e:
            for m in dm:
                error_row(m, e)


def dynamo_counters():
    """How many graphs Dynamo compiled and how many times Inductor fell back from CUDA graphs so far in
    this case (0 skips expected on a GPU; a skip means the decode step ran without CUDA graphs)."""
    try:
        from torch._dynamo.utils import counters
        return {"dynamo_graphs": counters["stats"].get("unique_graphs", 0),
                "cudagraph_skips": counters["inductor"].get("cudagraph_skips", 0)}
    except Exception:  # internal counters: absent in some versions
        return {}


def run_compiled(model, case, ids, t_prompt, t_new, metrics, warmup, reps, sync, reset_peak, peak, emit,
                 emit_decode, error_row, device):
    """gpt-fast style: a StaticCache, the prompt run eagerly into it, then a compiled (CUDA-graphed)
    one-token step in a Python loop, greedy argmax on the device; BERT's forward compiled the same way."""
    import torch._dynamo
    batch = ids.shape[0]
    if case.model == "encoder":
        if "forward" not in metrics:
            return
        try:
            with torch.no_grad():
                fwd = torch.compile(lambda x: model(input_ids=x).last_hidden_state, mode="reduce-overhead",
                                    fullgraph=True)

                def forward():
                    torch.compiler.cudagraph_mark_step_begin()
                    fwd(ids)

                t0 = time.perf_counter()
                forward()
                sync()
                compile_s = time.perf_counter() - t0
                for _ in range(warmup):
                    forward()
                reset_peak()
                times = []
                for _ in range(reps):
                    sync()
                    t0 = time.perf_counter()
                    forward()
                    sync()
                    times.append((time.perf_counter() - t0) * 1e3)
                med = statistics.median(times)
                emit("forward", med, "ms", peak(), times, compile_s=compile_s, tok_per_s=batch * t_prompt / (med * 1e-3),
                     compile_mode="reduce-overhead", **dynamo_counters())
        except Exception as e:
            error_row("forward", e)
        return

    keep = logits_keep(model)
    dtype = next(model.parameters()).dtype
    try:
        with torch.no_grad():
            cache = make_static_cache(model, batch, t_prompt + t_new, device, dtype)

            def step(tok, positions):
                logits = model(input_ids=tok, **call_kwargs(model, cache, positions, batch, keep)).logits
                return torch.argmax(logits[:, -1], dim=-1, keepdim=True)

            decode_one = torch.compile(step, mode="reduce-overhead", fullgraph=True)
            prompt_pos = torch.arange(t_prompt, device=device)
            out = torch.empty(batch, t_new, dtype=torch.long, device=device)

            def generate():
                """Greedy generation of t_new tokens: (total ms, ms from the first new token to the last)."""
                cache.reset()
                pos = torch.tensor([t_prompt], device=device)
                sync()
                t0 = time.perf_counter()
                tok = step(ids, prompt_pos)  # prefill, eager (the first call also allocates the cache)
                out[:, 0:1].copy_(tok)
                sync()
                t1 = time.perf_counter()
                for i in range(1, t_new):
                    torch.compiler.cudagraph_mark_step_begin()
                    tok = decode_one(tok, pos).clone()
                    out[:, i:i + 1].copy_(tok)
                    pos += 1
                sync()
                t2 = time.perf_counter()
                return (t2 - t0) * 1e3, (t2 - t1) * 1e3
    except Exception as e:
        for m in metrics:
            error_row(m, e)
        return

    if "prefill" in metrics:
        try:
            with torch.no_grad():
                def prefill_step(tok, positions):  # its own code object: compiled apart from decode_one
                    return step(tok, positions)

                prefill_c = torch.compile(prefill_step, fullgraph=True, dynamic=False)
                cache.reset()
                step(ids, prompt_pos)  # allocates the cache eagerly first (static addresses for the graphs)
                t0 = time.perf_counter()
                cache.reset()
                prefill_c(ids, prompt_pos)
                sync()
                compile_s = time.perf_counter() - t0
                for _ in range(warmup):
                    cache.reset()
                    prefill_c(ids, prompt_pos)
                reset_peak()
                times = []
                for _ in range(reps):
                    cache.reset()
                    sync()
                    t0 = time.perf_counter()
                    prefill_c(ids, prompt_pos)
                    sync()
                    times.append((time.perf_counter() - t0) * 1e3)
                med = statistics.median(times)
                emit("prefill", med, "ms", peak(), times, compile_s=compile_s, tok_per_s=batch * t_prompt / (med * 1e-3),
                     compile_mode="default, dynamic=False", cache="static")
        except Exception as e:
            error_row("prefill", e)
    dm = [m for m in metrics if m in ("decode", "decode_steady")]
    if dm:
        try:
            with torch.no_grad():
                t0 = time.perf_counter()
                generate()  # compiles the step, records its CUDA graph
                compile_s = time.perf_counter() - t0
                for _ in range(warmup - 1):
                    generate()
                reset_peak()
                total, steady = [], []
                for _ in range(reps):
                    a, b = generate()
                    total.append(a)
                    steady.append(b)
                emit_decode(peak(), total, steady, compile_s=compile_s, compile_mode="reduce-overhead", cache="static",
                            first_tokens=out[0, :8].tolist(), **dynamo_counters())
        except Exception as e:
            for m in dm:
                error_row(m, e)


if __name__ == "__main__":
    main()
