"""Per-family sums of the kernels of one replayed training step in an ncu CSV
(`ncu --csv --metrics gpu__time_duration.sum train-bench ... --graph on --warmup 1 --steps 1`).
The replay is the kernels after the second-to-last run of adam_step_multi launches (the eager
step's optimizer ends in two runs: the AdamW groups, then the step scalars' casts and one more run).
Usage: python3 ncu_replay.py FILE.csv[.gz] [--list]"""
import csv, collections, gzip, sys


def load(p):
    f = gzip.open(p, "rt") if p.endswith(".gz") else open(p)
    rows = [l for l in f if l.startswith('"')]
    r = list(csv.DictReader(rows))
    return [(x["Kernel Name"].split("(")[0], x["Grid Size"], float(x["Metric Value"].replace(",", ""))) for x in r if x["Metric Name"] == "gpu__time_duration.sum"]


def family(n):
    if "nvjet" in n or "gemm" in n.lower() or "cutlass" in n or n.startswith("sm90"):
        return "GEMM"
    return n[:60]


ks = load(sys.argv[1])
runs, cur = [], []
for i, k in enumerate(ks):
    if "adam_step_multi" in k[0]:
        cur.append(i)
    elif cur:
        runs.append(cur)
        cur = []
if cur:
    runs.append(cur)
start = runs[-2][-1] + 1 if len(runs) >= 2 else 0
rep = ks[start:]
tot = sum(k[2] for k in rep) / 1e6
print(f"{sys.argv[1]}: {len(ks)} kernels, replay from #{start}: {len(rep)} kernels, {tot:.3f} ms")
by = collections.defaultdict(lambda: [0, 0.0])
for n, g, v in rep:
    by[family(n)][0] += 1
    by[family(n)][1] += v / 1e6
for n, (c, t) in sorted(by.items(), key=lambda x: -x[1][1]):
    print(f"  {t:7.3f} ms {c:4d}  {n}")
if "--list" in sys.argv:
    for i, (n, g, v) in enumerate(rep):
        print(i, n[:70], g, round(v / 1000, 1))
