import csv, sys, re, collections
def load(p):
    rows = [l for l in open(p) if l.startswith('"')]
    r = list(csv.DictReader(rows))
    # one row per kernel launch (metric gpu__time_duration.sum)
    ks = [(x["Kernel Name"], float(x["Metric Value"].replace(",", "")), x["Metric Unit"]) for x in r if x["Metric Name"] == "gpu__time_duration.sum"]
    return ks
def cat(n):
    n0 = n.split("(")[0].split("<")[0]
    if "adam" in n0: return "AdamW"
    if "amp_cast_multi" in n0: return "weight casts (multi-tensor)"
    if n0.startswith("ew_") or "cast" in n0 or "map" in n0: return "elementwise/casts: " + n0[:40]
    if "gemm" in n0.lower() or "nvjet" in n0 or "sm90" in n0 or "cutlass" in n0 or "Kernel" == n0: return "GEMM"
    return n0[:50]
for p in sys.argv[1:]:
    ks = load(p)
    # the replay: after the eager step's last adam_step_multi
    idx = [i for i, k in enumerate(ks) if "adam_step_multi" in k[0]]
    first_end = idx[0]
    # eager adam launches are consecutive; the replay begins after the last of that run
    j = first_end
    while j + 1 < len(ks) and "adam_step_multi" in ks[j + 1][0]: j += 1
    rep = ks[j + 1:]
    unit = rep[0][2]
    scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0}.get(unit, 1e-6)
    tot = sum(k[1] for k in rep) * scale
    print(f"== {p}: {len(ks)} kernels, eager step {j+1}, replay {len(rep)} kernels, {tot:.3f} ms (unit {unit})")
    by = collections.defaultdict(lambda: [0, 0.0])
    for n, v, u in rep:
        c = cat(n); by[c][0] += 1; by[c][1] += v * scale
    for c, (n, t) in sorted(by.items(), key=lambda x: -x[1][1])[:28]:
        print(f"  {t:7.3f} ms {n:4d}  {c}")
