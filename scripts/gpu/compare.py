import json, sys, collections
def load(p):
    return {c["id"]: c for c in json.load(open(p))["cases"]}
def ok(c):
    return c["value"] == "passed" and c.get("grad") in (None, "passed")
cpu, cuda = load(sys.argv[1]), load(sys.argv[2])
pc = sum(ok(c) for c in cpu.values()); pg = sum(ok(c) for c in cuda.values())
print(f"cases: {len(cpu)}; passed on cpu: {pc}; passed on cuda: {pg}")
worse = [i for i in cpu if ok(cpu[i]) and not ok(cuda.get(i, {"value": "missing"}))]
better = [i for i in cpu if not ok(cpu[i]) and i in cuda and ok(cuda[i])]
print(f"pass on cpu, not on cuda: {len(worse)}; pass on cuda, not on cpu: {len(better)}")
byop = collections.Counter(cuda[i]["op"] for i in worse if i in cuda)
print("ops with cuda-only failures:", byop.most_common(40))
for i in worse[:40]:
    c = cuda.get(i, {})
    print(" ", i, c.get("value"), c.get("grad"), c.get("message", "")[:220])
nat = collections.Counter(); fb = collections.Counter()
try:
    for line in open(sys.argv[3]):
        op, n, f = line.split()
        nat[op] += int(n); fb[op] += int(f)
except FileNotFoundError:
    pass
ops = set(nat) | set(fb)
print(f"registry calls with CUDA tensors: native {sum(nat.values())}, fallback {sum(fb.values())}; ops: {len(ops)}, "
      f"all-native {sum(1 for o in ops if fb[o] == 0)}, some fallback {sum(1 for o in ops if fb[o] > 0)}")
print("fallback ops:", sorted(o for o in ops if fb[o] > 0))
