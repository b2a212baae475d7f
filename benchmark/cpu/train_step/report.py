"""Writes the side-by-side table of benchmark/cpu/train_step from the JSON lines of each side
(one line per round; rounds alternate between the two sides)."""
import json, statistics, sys

ours, torch = ([json.loads(l) for l in open(p).read().split("\n") if l.strip()] for p in sys.argv[1:3])
shape, threads, load = sys.argv[3], sys.argv[4], sys.argv[5]
rounds = min(len(ours), len(torch))
ours, torch = ours[:rounds], torch[:rounds]
med = lambda runs, k: statistics.median(r[k] for r in runs)
rows = [("step (median)", "step_ms"), ("forward", "forward_ms"), ("backward", "backward_ms"), ("clip + AdamW", "optimizer_ms")]
print(f"GPT training step on this CPU, {shape}, float32, {threads} thread(s) each; {rounds} alternating rounds per side,")
print("each round's median step; the table gives the median over rounds, the ratio column the median of the per-round ratios.")
print(f"Load average before the run: {load}. Parameters: {ours[0]['params']} (torch-magpie) / {torch[0]['params']} (PyTorch). Ratio > 1 means torch-magpie is faster.\n")
print(f"| | torch-magpie | {torch[0]['impl']} | speed ratio |")
print("|---|---|---|---|")
for name, k in rows:
    ratio = statistics.median(t[k] / o[k] for o, t in zip(ours, torch))
    print(f"| {name} | {med(ours, k):.1f} ms | {med(torch, k):.1f} ms | {ratio:.2f}x |")
print(f"| peak RSS (whole process) | {max(r['peak_rss_mb'] for r in ours):.0f} MB | {max(r['peak_rss_mb'] for r in torch):.0f} MB | |")
print(f"| loss after the timed steps | {ours[-1]['final_loss']:.4f} | {torch[-1]['final_loss']:.4f} | |")
print()
print("Per round (step ms, torch-magpie / PyTorch): " + ", ".join(f"{o['step_ms']:.1f} / {t['step_ms']:.1f}" for o, t in zip(ours, torch)))
