"""The 192-column tile's two slice constants, fitted with the committed others held (fit.txt).
From the project root, with json.tgz unpacked into DIR:
    python benchmarks/results/h200/2026-12-03-e/experiments/ab_cg3/fit_wide.py DIR"""
import sys

import numpy as np

sys.path.insert(0, "benchmarks/experiments")
import fit_prefill_plan as f  # noqa: E402

DIR = sys.argv[1]
keys, A, y = f.design(f.timings([("fit2", f"{DIR}/prefill/main_*.json"), ("cg3f", f"{DIR}/prefill/cg3f_*.json")]))
c0 = np.array(f.MODELS["fit"])
c = f.fit_held(A, y, c0, [6, 7])
err = A @ c / y - 1
print("cg3 slice ns BT64 %.0f BT128 %.0f" % tuple(c[[6, 7]]), "rms %.3f max %.3f" % (np.sqrt((err**2).mean()), abs(err).max()))
err0 = A @ c0 / y - 1
print("committed fit model rms %.3f" % np.sqrt((err0**2).mean()))
named, right = f.two_plan_points(keys, A @ c, y)
print("pairs", len(named), "right", right)
for k, v in named:
    if (v[0][1] < v[1][1]) != (v[0][2] < v[1][2]):
        print("wrong", k, v)
