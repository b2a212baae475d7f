"""Joins the model benchmark's JSON lines (torch-magpie, transformers eager, torch.compile, device floors)
into a markdown table.

    python benchmark/models/report.py floors.jsonl transformers.jsonl compile.jsonl magpie.jsonl > results.md

Any number of files, in any order: each line is sorted by its "impl" ("transformers": eager;
"torch.compile"; "torch-magpie ..." with "module" in it: the module path, otherwise the fused engine)
or, for a line without one (an error line), by the impl most lines of its file have; the line with
"metric": "floors" gives the device's copy bandwidth and matmul peaks. Lines that are not JSON objects
with a case and a metric are skipped; a line with "error" instead of a value is shown as the error, and a
line with "metric": "all" stands for every metric of its case. Rows are joined on (case, metric).

Ratios are > 1 when torch-magpie is faster: ours/theirs for rates (tok/s), theirs/ours for times (ms).
The floor is what the device's measured limits allow: decode, batch x copy bandwidth / weight bytes
(tok/s; every step reads all the weights once); prefill and forward, matmul FLOPs / measured matmul peak
of the dtype (ms). "of floor" is the fraction of it reached. Targets are the project's: absolute on an
H200, and on any other GPU the same as a ratio to PyTorch in the same run (the H200 numbers of PyTorch
they were set against are in TARGETS). A row whose workloads differ (batch, prompt_tokens, new_tokens,
dtype, when both sides give them) or whose units differ gets no ratio and a note.
"""
import json
import sys
from collections import Counter

WORKLOAD = ("batch", "prompt_tokens", "new_tokens", "dtype")
TIME_UNITS = {"ms": 1.0, "s": 1e3, "us": 1e-3}
RATE_UNITS = {"tok/s"}
IMPLS = ("fused", "module", "eager", "compile")
GiB = 2 ** 30

# (case, metric) -> target. "abs": the value to reach on an H200 (in the metric's unit: tok/s, or ms);
# "ref"/"ref_h200": the PyTorch implementation and its H200 value the absolute target was set against, so
# that elsewhere the target is the same ratio to that implementation in the same run; "ratio": a ratio to
# "ref" on every GPU; "max_peak": a peak memory bound in bytes, on every GPU.
TARGETS = {
    ("llama-3.2-1b", "decode"): {"abs": 1400, "ref": "compile", "ref_h200": 797},
    ("llama-3.2-1b", "decode_steady"): {"abs": 1400, "ref": "compile", "ref_h200": 797},
    ("llama-3.2-1b", "prefill"): {"abs": 1.5, "ref": "eager", "ref_h200": 8.5},
    # >= 70k tok/s over 100k tokens is <= 1428.6 ms; PyTorch's 52.9k tok/s is 1890.4 ms
    ("llama-3.2-1b-prefill-100k", "prefill"): {"abs": 100_000 / 70_000 * 1e3, "ref": "eager",
                                               "ref_h200": 100_000 / 52_900 * 1e3, "max_peak": 12 * GiB},
    ("gpt2", "decode"): {"abs": 6000, "ref": "eager", "ref_h200": 608},
    ("gpt2", "decode_steady"): {"abs": 6000, "ref": "eager", "ref_h200": 608},
    ("gpt2", "prefill"): {"abs": 0.4, "ref": "eager", "ref_h200": 2.2},
    ("bert", "forward"): {"ratio": 3.0, "ref": "eager"},
    ("bert-bf16", "forward"): {"ratio": 3.0, "ref": "eager"},
    ("llama-3.2-1b-b16", "decode"): {"ratio": 1.5, "ref": "compile"},
    ("llama-3.2-1b-b16", "decode_steady"): {"ratio": 1.5, "ref": "compile"},
    ("llama-3.2-1b-b64", "decode"): {"ratio": 1.5, "ref": "compile"},
    ("llama-3.2-1b-b64", "decode_steady"): {"ratio": 1.5, "ref": "compile"},
}
REF_NAME = {"eager": "transformers eager", "compile": "torch.compile"}


def impl_of(impl):
    """The table column of an "impl" string, or None."""
    if not impl:
        return None
    impl = str(impl)
    if impl.startswith("torch-magpie") or impl.startswith("magpie"):
        return "module" if "module" in impl else "fused"
    if "compile" in impl:
        return "compile"
    if impl.startswith("transformers") or impl in ("eager", "pytorch"):
        return "eager"
    return None


def load(paths):
    """{impl: {(case, metric): row}}, the floors row (or None) and the (case, metric) keys in file order."""
    rows = {k: {} for k in IMPLS}
    floors, order = None, []
    for path in paths:
        parsed = []
        try:
            f = open(path)
        except OSError as e:
            print(f"report.py: {path}: skipped: {e}", file=sys.stderr)
            continue
        with f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    r = json.loads(line)
                except ValueError as e:
                    print(f"report.py: {path}:{n}: skipped, not JSON: {e}", file=sys.stderr)
                    continue
                if isinstance(r, dict):
                    parsed.append(r)
        common = Counter(impl_of(r.get("impl")) for r in parsed if impl_of(r.get("impl")))
        default = common.most_common(1)[0][0] if common else None
        for r in parsed:
            if r.get("metric") == "floors":
                floors = r
                continue
            if "case" not in r or "metric" not in r:
                continue
            impl = impl_of(r.get("impl")) or default
            if impl is None:
                print(f"report.py: {path}: a row of {r['case']}/{r['metric']} has no known impl, skipped", file=sys.stderr)
                continue
            key = (r["case"], r["metric"])
            rows[impl][key] = r
            if key not in order:
                order.append(key)
    # a case's "all" row (the whole case failed) is listed only when the case has no other row
    cases_with_metrics = {c for c, m in order if m != "all"}
    order = [k for k in order if k[1] != "all" or k[0] not in cases_with_metrics]
    return rows, floors, order


def get(rows, impl, key):
    """The row of (case, metric), or the case's "all" row (an error for the whole case)."""
    return rows[impl].get(key) or rows[impl].get((key[0], "all"))


def has_value(r):
    return r is not None and "error" not in r and isinstance(r.get("value"), (int, float))


def fmt_num(v):
    if v is None:
        return "-"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.2f}M"
    if abs(v) >= 10_000:
        return f"{v / 1e3:.1f}k"
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def fmt_value(r):
    if r is None:
        return "-"
    if not has_value(r):
        return "error: " + str(r.get("error", "no value"))[:80].replace("|", "/").replace("\n", " ")
    s = f"{fmt_num(r['value'])} {r.get('unit', '')}".strip()
    tokens = (r.get("batch") or 1) * (r.get("prompt_tokens") or 0)
    if r.get("unit") in TIME_UNITS and r.get("metric") in ("prefill", "forward") and tokens >= 4096 and r["value"]:
        s += f" ({fmt_num(tokens / (r['value'] * TIME_UNITS[r['unit']] * 1e-3))} tok/s)"
    return s


def fmt_mib(r):
    b = r.get("peak_mem_bytes") if r else None
    return "-" if b is None else f"{b / 2**20:.0f}"


def speedup(ours, theirs):
    """(ours vs theirs as a number > 1 when ours is faster, or None; note)."""
    if not has_value(ours) or not has_value(theirs):
        return None, ""
    differ = [k for k in WORKLOAD if k in ours and k in theirs and ours[k] != theirs[k]]
    if differ:
        return None, "workload differs: " + ", ".join(f"{k} {ours[k]} vs {theirs[k]}" for k in differ)
    uo, ut = ours.get("unit"), theirs.get("unit")
    if uo in RATE_UNITS and ut == uo:
        return (ours["value"] / theirs["value"] if theirs["value"] else None), ""
    if uo in TIME_UNITS and ut in TIME_UNITS:
        o, t = ours["value"] * TIME_UNITS[uo], theirs["value"] * TIME_UNITS[ut]
        return (t / o if o else None), ""
    return None, f"units differ: {uo} vs {ut}"


def fmt_x(x):
    return "-" if x is None else f"{x:.2f}x"


def case_info(rows, case):
    """Merged model facts of a case (parameter counts, FLOPs, workload) from its rows, PyTorch's first."""
    info = {}
    for impl in ("compile", "module", "fused", "eager"):  # later ones win
        for (c, _m), r in rows[impl].items():
            if c == case:
                info.update({k: v for k, v in r.items() if v is not None})
    return info


def prefill_flops(info):
    """Matmul FLOPs of one forward of the prompt batch: the rows' own count, else 2 x params x tokens plus
    attention (4 x layers x width x T^2, halved when causal; full for BERT)."""
    if info.get("prefill_flops"):
        return info["prefill_flops"]
    p, t, b = info.get("params"), info.get("prompt_tokens"), info.get("batch") or 1
    if not p or not t:
        return None
    attn = 0
    if info.get("layers") and info.get("attn_width"):
        attn = 4 * info["layers"] * info["attn_width"] * t * t * (1.0 if info["case"].startswith("bert") else 0.5)
    return b * (2 * p * t + attn)


def floor_of(key, info, floors):
    """(floor value in the metric's unit, unit) or (None, None)."""
    if not floors:
        return None, None
    metric = key[1]
    if metric in ("decode", "decode_steady"):
        wb = info.get("param_bytes") or info.get("weights_bytes")
        if not wb or not floors.get("copy_GBps"):
            return None, None
        return (info.get("batch") or 1) * floors["copy_GBps"] * 1e9 / wb, "tok/s"
    if metric in ("prefill", "forward"):
        peak = floors.get("f32_tflops") if info.get("dtype") == "float32" else floors.get("bf16_tflops")
        fl = prefill_flops(info)
        if not peak or not fl:
            return None, None
        return fl / (peak * 1e12) * 1e3, "ms"
    return None, None


def of_floor(r, floor, unit):
    """Fraction of the floor a row reaches, as a percentage string."""
    if not has_value(r) or not floor:
        return "-"
    if unit == "tok/s" and r.get("unit") == "tok/s":
        return f"{100 * r['value'] / floor:.0f}%"
    if unit == "ms" and r.get("unit") in TIME_UNITS and r["value"]:
        return f"{100 * floor / (r['value'] * TIME_UNITS[r['unit']]):.0f}%"
    return "-"


def norm(r):
    """A row's value in tok/s (rates) or ms (times), or None."""
    if not has_value(r):
        return None
    if r.get("unit") in RATE_UNITS:
        return r["value"]
    if r.get("unit") in TIME_UNITS:
        return r["value"] * TIME_UNITS[r["unit"]]
    return None


def target_of(key, ours, refs, h200):
    """(target text, met text) for (case, metric)."""
    spec = TARGETS.get(key)
    if not spec:
        return "", ""
    ref_impl = spec["ref"]
    ref = refs.get(ref_impl)
    rate = key[1].startswith("decode")
    mem_ok, mem_txt = True, ""
    if "max_peak" in spec:
        mem_txt = f", peak <= {spec['max_peak'] / GiB:.0f} GiB"
        if ours and ours.get("peak_mem_bytes") is not None:
            mem_ok = ours["peak_mem_bytes"] <= spec["max_peak"]
    threshold, text = None, ""
    if "abs" in spec and h200:
        threshold = spec["abs"]
        text = f"{'>=' if rate else '<='} {fmt_num(threshold)} {'tok/s' if rate else 'ms'} (H200)"
    else:
        ratio = spec.get("ratio")
        if ratio is None:  # the H200 target as a ratio to PyTorch's H200 number
            ratio = spec["abs"] / spec["ref_h200"] if rate else spec["ref_h200"] / spec["abs"]
        text = f">= {ratio:.2f}x {REF_NAME[ref_impl]}"
        if norm(ref) is not None:
            threshold = norm(ref) * ratio if rate else norm(ref) / ratio
            text += f" ({'>=' if rate else '<='} {fmt_num(threshold)} {'tok/s' if rate else 'ms'})"
    text += mem_txt
    v = norm(ours)
    if v is None or threshold is None:
        return text, "-"
    met = (v >= threshold if rate else v <= threshold) and mem_ok
    return text, "yes" if met else "no"


def describe(rows, name):
    """One line naming an implementation's device and versions, from its first row with a device."""
    r = next((r for r in rows.values() if r.get("device")), None) or next(iter(rows.values()), None)
    if not r:
        return f"{name}: no rows"
    keys = [k for k in ("device", "torch", "transformers", "version", "commit") if r.get(k)]
    return f"{name}: " + ", ".join(f"{k} {r[k]}" for k in keys) if keys else name


def main():
    paths = sys.argv[1:]
    if not paths or any(p in ("-h", "--help") for p in paths):
        sys.exit("usage: report.py JSONL... (floors, transformers eager, torch.compile and torch-magpie lines, any order)")
    rows, floors, order = load(paths)
    devices = [r.get("device", "") for impl in IMPLS for r in rows[impl].values()] + [(floors or {}).get("device", "")]
    h200 = any("H200" in str(d) for d in devices)
    print(f"- {describe(rows['fused'], 'torch-magpie (fused)')}")
    print(f"- {describe(rows['module'], 'torch-magpie (module path)')}")
    print(f"- {describe(rows['eager'], 'transformers eager (sdpa)')}")
    print(f"- {describe(rows['compile'], 'torch.compile (static cache, reduce-overhead)')}")
    if floors:
        print(f"- floors: {floors.get('device', '?')}: copy {fmt_num(floors.get('copy_GBps'))} GB/s (read + write), "
              f"bf16 matmul {fmt_num(floors.get('bf16_tflops'))} TFLOP/s, f32 matmul (no TF32) "
              f"{fmt_num(floors.get('f32_tflops'))} TFLOP/s")
    else:
        print("- floors: not measured (no floors line)")
    print("- vs eager / vs compile: > 1 means torch-magpie (fused, else the module path) is faster; "
          f"targets {'absolute (H200)' if h200 else 'as ratios to PyTorch in this run (not an H200)'}")
    print()
    print("| case | metric | workload | torch-magpie | magpie module path | transformers eager | torch.compile "
          "| vs eager | vs compile | floor | of floor (magpie / eager / compile) "
          "| peak MiB (magpie / eager / compile) | target | met | note |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
    for key in order:
        fused, module, eager, comp = (get(rows, i, key) for i in IMPLS)
        ours = fused if fused is not None else module
        notes = []
        if fused is None and module is not None:
            notes.append("ratios from the module path")
        r = next((x for x in (eager, comp, ours) if x is not None and x.get("batch") is not None), None) or \
            eager or comp or ours
        work = ", ".join(f"{r[k]}" if k == "dtype" else f"{k.split('_')[0]} {r[k]}"
                         for k in WORKLOAD if r.get(k) is not None)
        xe, ne = speedup(ours, eager)
        xc, nc = speedup(ours, comp)
        notes += [n for n in (ne, nc) if n]
        info = case_info(rows, key[0])
        info.setdefault("case", key[0])
        floor, funit = floor_of(key, info, floors)
        floor_txt = "-" if floor is None else f"{fmt_num(floor)} {funit}"
        frac = " / ".join(of_floor(x, floor, funit) for x in (ours, eager, comp))
        mib = " / ".join(fmt_mib(x) for x in (ours, eager, comp))
        target, met = target_of(key, ours, {"eager": eager, "compile": comp}, h200)
        if ne or nc:
            met = "-"  # not the same workload
        if comp is not None and comp.get("compile_s") is not None:
            notes.append(f"compile {comp['compile_s']:.0f} s")
        note = "; ".join(dict.fromkeys(notes)).replace("|", "/")
        print(f"| {key[0]} | {key[1]} | {work} | {fmt_value(fused)} | {fmt_value(module)} | {fmt_value(eager)} "
              f"| {fmt_value(comp)} | {fmt_x(xe)} | {fmt_x(xc)} | {floor_txt} | {frac} | {mib} | {target} | {met} "
              f"| {note} |")


if __name__ == "__main__":
    main()
