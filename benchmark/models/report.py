"""Joins the transformers and torch-magpie JSON lines of the model benchmark into a markdown table.

    python benchmark/models/report.py transformers.jsonl magpie.jsonl > results.md

Each input line is a JSON object with case, metric, value, unit and peak_mem_bytes (other lines are
skipped; a line with "error" instead of a value is shown as the error). Rows are joined on
(case, metric). The speed column is > 1 when torch-magpie is faster: ours/theirs for rates (tok/s),
theirs/ours for times (ms). A row whose workloads differ (batch, prompt_tokens, new_tokens, dtype,
when both sides give them) or whose units differ gets no ratio and a note.
"""
import json
import sys

WORKLOAD = ("batch", "prompt_tokens", "new_tokens", "dtype")
TIME_UNITS = {"ms": 1.0, "s": 1e3, "us": 1e-3}
RATE_UNITS = {"tok/s"}


def load(path):
    """(case, metric) -> row, in file order, plus the first row (for the header)."""
    rows = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except ValueError as e:
                sys.exit(f"report.py: {path}:{n}: not JSON: {e}")
            if "case" not in r or "metric" not in r:
                continue
            rows[(r["case"], r["metric"])] = r
    return rows


def fmt_value(r):
    if r is None:
        return "-"
    if "error" in r or r.get("value") is None:
        return "error: " + str(r.get("error", "no value"))[:60].replace("|", "/")
    v = r["value"]
    return f"{v:.3g} {r.get('unit', '')}" if abs(v) < 100 else f"{v:.1f} {r.get('unit', '')}"


def fmt_mib(r):
    b = r.get("peak_mem_bytes") if r else None
    return "-" if b is None else f"{b / 2**20:.0f}"


def ratio(ours, theirs):
    """(ratio string, note): > 1 means torch-magpie is faster."""
    if not ours or not theirs or ours.get("value") is None or theirs.get("value") is None:
        return "-", ""
    differ = [k for k in WORKLOAD if k in ours and k in theirs and ours[k] != theirs[k]]
    if differ:
        return "-", "workload differs: " + ", ".join(f"{k} {ours[k]} vs {theirs[k]}" for k in differ)
    uo, ut = ours.get("unit"), theirs.get("unit")
    if uo in RATE_UNITS and ut == uo:
        return (f"{ours['value'] / theirs['value']:.2f}x", "") if theirs["value"] else ("-", "")
    if uo in TIME_UNITS and ut in TIME_UNITS:
        o, t = ours["value"] * TIME_UNITS[uo], theirs["value"] * TIME_UNITS[ut]
        return (f"{t / o:.2f}x", "") if o else ("-", "")
    return "-", f"units differ: {uo} vs {ut}"


def describe(rows, name):
    """One line naming the implementation's device and versions, from its first row."""
    r = next(iter(rows.values()), None)
    if not r:
        return f"{name}: no rows"
    keys = [k for k in ("device", "torch", "transformers", "version", "commit") if r.get(k)]
    return f"{name}: " + ", ".join(f"{k} {r[k]}" for k in keys) if keys else name


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: report.py TRANSFORMERS_JSONL MAGPIE_JSONL")
    theirs, ours = load(sys.argv[1]), load(sys.argv[2])
    keys = list(theirs) + [k for k in ours if k not in theirs]
    print(f"- {describe(theirs, 'transformers')}")
    print(f"- {describe(ours, 'torch-magpie')}")
    print("- speed vs transformers: > 1 means torch-magpie is faster (ours/theirs for tok/s, theirs/ours for ms)")
    print()
    print("| case | metric | workload | torch-magpie | transformers | speed vs transformers | peak MiB (magpie / transformers) | note |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for case, metric in keys:
        o, t = ours.get((case, metric)), theirs.get((case, metric))
        r = t or o
        work = ", ".join(
            f"{r[k]}" if k == "dtype" else f"{k.split('_')[0]} {r[k]}" for k in WORKLOAD if r.get(k) is not None
        )
        x, note = ratio(o, t)
        print(f"| {case} | {metric} | {work} | {fmt_value(o)} | {fmt_value(t)} | {x} | {fmt_mib(o)} / {fmt_mib(t)} | {note} |")


if __name__ == "__main__":
    main()
