"""The 192-column tile's two slice constants, fitted with the committed others held (fit.txt).
From the project root, with json.tgz unpacked into DIR:
    python benchmarks/results/h200/2026-12-03-e/experiments/ab_cg3/fit_wide.py DIR"""
import sys, glob, json, numpy as np
sys.path.insert(0, "benchmarks/experiments")
DIR = sys.argv[1]
import fit_prefill_plan as f
times = {}
for model, pat in (("fit2", f"{DIR}/prefill/main_*.json"), ("cg3f", f"{DIR}/prefill/cg3f_*.json")):
    for path in glob.glob(pat):
        for row in json.load(open(path))["rows"]:
            K, N = f.SHAPES[(row["model"], row["layer"])]
            bt, s, cg = f.plan(K, N, row["M"], f.MODELS[model])
            times.setdefault((row["model"], row["layer"], row["M"], bt, s, cg), []).append(row["us"] * 1e3)
keys = sorted(times)
A = np.array([f.terms(*f.SHAPES[k[:2]], *k[2:]) for k in keys]); y = np.array([min(times[k]) for k in keys])
c0 = np.array(f.MODELS["fit"])
free = [6, 7]
fixed = [i for i in range(8) if i not in free]
rhs = y - A[:, fixed] @ c0[fixed]
W = 1 / y
sol = np.linalg.lstsq(A[:, free] * W[:, None], rhs * W, rcond=None)[0]
c = c0.copy(); c[free] = sol
err = A @ c / y - 1
print("cg3 slice ns BT64 %.0f BT128 %.0f" % tuple(sol), "rms %.3f max %.3f" % (np.sqrt((err**2).mean()), abs(err).max()))
err0 = A @ c0 / y - 1
print("committed fit model rms %.3f" % np.sqrt((err0**2).mean()))
pairs = {}
for k, p, m in zip(keys, A @ c, y):
    pairs.setdefault(k[:3], []).append((k[3:], p, m))
named = [(k, v) for k, v in pairs.items() if len(v) == 2]
right = sum((v[0][1] < v[1][1]) == (v[0][2] < v[1][2]) for _, v in named)
print("pairs", len(named), "right", right)
for k, v in named:
    if (v[0][1] < v[1][1]) != (v[0][2] < v[1][2]): print("wrong", k, v)
