"""int8's own prefill slice constants (item and reduce held), and the plans they change on the
Llama-3 shapes with the timings of both plans where this call measured both. From the project root,
with json.tgz unpacked into DIR:
    python benchmarks/results/h200/2026-12-03-e/experiments/ab_cg3/fit_int8.py DIR"""
import sys, glob, json, numpy as np
sys.path.insert(0, "benchmarks/experiments")
import fit_prefill_plan as f
DIR = sys.argv[1]
BITS = 8
f.SLICES = {4: f.SLICES[8], 8: f.SLICES[8]}  # terms()/plan() below default to bits=4: int8 depths
times = {}
for model, pat in (("fit2", f"{DIR}/prefill8/main_*.json"), ("cg3f", f"{DIR}/prefill8/cg3f_*.json")):
    for path in glob.glob(pat):
        for row in json.load(open(path))["rows"]:
            K, N = f.SHAPES[(row["model"], row["layer"])]
            bt, s, cg = f.plan(K, N, row["M"], f.MODELS[model])
            times.setdefault((row["model"], row["layer"], row["M"], bt, s, cg), []).append(row["us"] * 1e3)
keys = sorted(times)
A = np.array([f.terms(*f.SHAPES[k[:2]], *k[2:]) for k in keys]); y = np.array([min(times[k]) for k in keys])
c0 = np.array(f.MODELS["fit"])
def report(c, name):
    err = A @ c / y - 1
    pairs = {}
    for k, p, m in zip(keys, A @ c, y):
        pairs.setdefault(k[:3], []).append((k[3:], p, m))
    named = [(k, v) for k, v in pairs.items() if len(v) == 2]
    right = sum((v[0][1] < v[1][1]) == (v[0][2] < v[1][2]) for _, v in named)
    print(name, "rms %.3f max %.3f" % (np.sqrt((err**2).mean()), abs(err).max()), "pairs", len(named), "right", right)
report(c0, "int4 constants")
for free in ([0,1,2,6,7], [0,1,2,3,4,6,7]):
    fixed = [i for i in range(8) if i not in free]
    W = 1 / y
    sol = np.linalg.lstsq(A[:, free] * W[:, None], (y - A[:, fixed] @ c0[fixed]) * W, rcond=None)[0]
    c = c0.copy(); c[free] = sol
    print(free, np.round(c, 0))
    report(c, "fit")

c8 = np.array([365., 505., 820., 135., 4900., 0.16, 547., 718.])
meas = {}
for k in keys: meas[k] = min(times[k])
import itertools
Ms = [33,64,128,192,256,384,512,768,1024,2048]
for (m, l), (K, N) in f.SHAPES.items():
    for M in Ms:
        cur = f.plan(K, N, M, c0); new = f.plan(K, N, M, c8)
        if cur != new:
            a = meas.get((m, l, M) + cur); b = meas.get((m, l, M) + new)
            print(m, l, M, "cur", cur, a and round(a/1e3,1), "new", new, b and round(b/1e3,1), (a and b) and round(b/a,3))
