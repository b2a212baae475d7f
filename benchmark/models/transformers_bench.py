"""Times Hugging Face transformers on the model benchmark cases: prefill (ms) and greedy decoding (tok/s)
of random-weight models whose configs this script makes (no hub, no network).

    python benchmark/models/transformers_bench.py [--cases gpt2,llama-3.2-1b] [--metrics prefill,decode,decode_steady]
        [--warmup 2] [--reps 5] [--device cuda|cpu] [--tiny] [--config-out DIR] [--config-only]

One JSON object per (case, metric) on stdout, with the keys the report joins on (case, metric, value,
unit, peak_mem_bytes) and the workload (batch, prompt_tokens, new_tokens, dtype). Progress goes to
stderr. `--config-out DIR` writes DIR/<case>/config.json (what the Rust side builds the same shape
from) and DIR/<case>/workload.json (dtype, token counts, the prompt ids); `--config-only` writes them
without building any model. README.md beside this file says what each metric measures.
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

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
import transformers
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig, LogitsProcessor, LogitsProcessorList

MAJOR = int(transformers.__version__.split(".")[0])
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


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


# name -> (config maker, dtype, prompt tokens, new tokens, tiny prompt, tiny new)
CASES = {
    "gpt2": (gpt2_config, "float32", 128, 128, 16, 12),
    "llama-3.2-1b": (llama_config, "bfloat16", 32, 256, 8, 16),
}
METRICS = ("prefill", "decode", "decode_steady")


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


def build(cfg, dtype, device):
    """A random-weight model made directly on the device, eval mode, SDPA attention."""
    kw = {"dtype" if MAJOR >= 5 else "torch_dtype": DTYPES[dtype], "attn_implementation": "sdpa"}
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, **kw)
    return model.to(device).eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from {list(CASES)}")
    ap.add_argument("--metrics", default=",".join(METRICS), help=f"comma-separated, from {list(METRICS)}")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs before each metric (default 2)")
    ap.add_argument("--reps", type=int, default=5, help="timed runs per metric; the median is reported (default 5)")
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes and token counts (to check the script on a CPU)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads on CPU (0: leave as is)")
    ap.add_argument("--config-out", metavar="DIR", help="write DIR/<case>/config.json and workload.json")
    ap.add_argument("--config-only", action="store_true", help="with --config-out: write the files and exit")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    cases = [c for c in args.cases.split(",") if c]
    metrics = [m for m in args.metrics.split(",") if m]
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

    env = {
        "impl": "transformers",
        "device": torch.cuda.get_device_name(device) if cuda and torch.cuda.is_available() else f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "attn_implementation": "sdpa",
        "tiny": args.tiny,
    }

    for name in cases:
        make, dtype, t_prompt, t_new, tiny_prompt, tiny_new = CASES[name]
        if args.tiny:
            t_prompt, t_new = tiny_prompt, tiny_new
        cfg = make(args.tiny)
        gen = torch.Generator().manual_seed(args.seed)
        prompt = torch.randint(0, cfg.vocab_size, (1, t_prompt), generator=gen)
        workload = {"case": name, "dtype": dtype, "batch": 1, "prompt_tokens": t_prompt, "new_tokens": t_new, "tiny": args.tiny}
        if args.config_out:
            d = os.path.join(args.config_out, name)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(config_dict(cfg, dtype), f, indent=2, sort_keys=True)
                f.write("\n")
            with open(os.path.join(d, "workload.json"), "w") as f:
                json.dump({**workload, "prompt_ids": prompt[0].tolist()}, f)
                f.write("\n")
            print(f"[{name}] wrote {d}/config.json, workload.json", file=sys.stderr)
        if args.config_only:
            continue

        def emit(metric, value, unit, peak, times, **extra):
            row = {"case": name, "metric": metric, "value": value, "unit": unit, "peak_mem_bytes": peak,
                   **workload, **extra, "warmup": args.warmup, "reps": len(times), "times_ms": times, **env}
            print(json.dumps(row), flush=True)

        torch.manual_seed(args.seed)
        try:
            model = build(cfg, dtype, device)
        except Exception as e:  # e.g. out of memory: report the case as failed and go on
            for m in metrics:
                print(json.dumps({"case": name, "metric": m, "error": f"{type(e).__name__}: {e}", **workload, **env}), flush=True)
            continue
        n_params = sum(p.numel() for p in model.parameters())
        weights_bytes = torch.cuda.memory_allocated(device) if cuda else None
        print(f"[{name}] {n_params / 1e6:.1f}M parameters, {dtype}, {env['device']}", file=sys.stderr)
        ids = prompt.to(device)
        mask = torch.ones_like(ids)
        fwd_params = inspect.signature(model.forward).parameters
        # Generation computes only the last position's logits in prefill; do the same.
        keep = {"logits_to_keep": 1} if "logits_to_keep" in fwd_params else (
            {"num_logits_to_keep": 1} if "num_logits_to_keep" in fwd_params else {})
        gen_kw = dict(attention_mask=mask, max_new_tokens=t_new, min_new_tokens=t_new, do_sample=False,
                      use_cache=True, num_beams=1, pad_token_id=cfg.eos_token_id)

        def prefill():
            return model(input_ids=ids, attention_mask=mask, use_cache=True, **keep).logits

        def generate(clock=None):
            out = model.generate(ids, logits_processor=LogitsProcessorList([clock] if clock else []), **gen_kw)
            if out.shape[1] != t_prompt + t_new:
                raise RuntimeError(f"generate returned {out.shape[1] - t_prompt} new tokens, expected {t_new}")
            return out

        for metric in metrics:
            try:
                with torch.inference_mode():
                    fn = prefill if metric == "prefill" else generate
                    for _ in range(args.warmup):
                        fn()
                    sync()
                    if cuda:
                        gc.collect()
                        torch.cuda.empty_cache()
                        torch.cuda.reset_peak_memory_stats(device)
                    times, steady = [], []
                    for _ in range(args.reps):
                        clock = StepClock(sync) if metric == "decode_steady" else None
                        sync()
                        t0 = time.perf_counter()
                        fn(clock) if clock else fn()
                        sync()
                        times.append((time.perf_counter() - t0) * 1e3)
                        if clock:
                            if len(clock.stamps) != t_new:
                                raise RuntimeError(f"{len(clock.stamps)} generation steps seen, expected {t_new}")
                            steady.append((clock.stamps[-1] - clock.stamps[0]) * 1e3)
                    peak = torch.cuda.max_memory_allocated(device) if cuda else None
                med = statistics.median(times)
                extra = {"weights_bytes": weights_bytes, "params": n_params}
                if metric == "prefill":
                    emit("prefill", med, "ms", peak, times, **extra)
                elif metric == "decode":
                    emit("decode", t_new / (med * 1e-3), "tok/s", peak, times, generate_ms=med, **extra)
                else:
                    st = statistics.median(steady)
                    emit("decode_steady", (t_new - 1) / (st * 1e-3), "tok/s", peak, times, steady_ms=steady, **extra)
                print(f"[{name}] {metric}: median {med:.2f} ms over {len(times)} runs", file=sys.stderr)
            except Exception as e:  # one failing metric (e.g. OOM) must not hide the others
                print(json.dumps({"case": name, "metric": metric, "error": f"{type(e).__name__}: {e}", **workload, **env}), flush=True)
        del model
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)


if __name__ == "__main__":
    main()
