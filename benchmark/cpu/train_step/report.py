"""Writes the side-by-side table of benchmark/cpu/train_step from the two JSON lines."""
import json, sys

ours, torch = (json.loads(open(p).read().strip().splitlines()[-1]) for p in sys.argv[1:3])
shape, threads, load = sys.argv[3], sys.argv[4], sys.argv[5]
rows = [("step (median)", "step_ms"), ("forward", "forward_ms"), ("backward", "backward_ms"), ("clip + AdamW", "optimizer_ms")]
print(f"GPT training step on this CPU, {shape}, float32, {threads} thread(s) each, median of the timed steps;")
print(f"load average before the run: {load} (other jobs on the machine slow both sides, PyTorch's spinning OpenMP threads most).")
print(f"Parameters: {ours['params']} (torch-magpie) / {torch['params']} (PyTorch). Ratio > 1 means torch-magpie is faster.\n")
print(f"| | torch-magpie | {torch['impl']} | speed ratio |")
print("|---|---|---|---|")
for name, k in rows:
    print(f"| {name} | {ours[k]:.1f} ms | {torch[k]:.1f} ms | {torch[k] / ours[k]:.2f}x |")
print(f"| peak RSS (whole process) | {ours['peak_rss_mb']:.0f} MB | {torch['peak_rss_mb']:.0f} MB | |")
print(f"| loss after the timed steps | {ours['final_loss']:.4f} | {torch['final_loss']:.4f} | |")
