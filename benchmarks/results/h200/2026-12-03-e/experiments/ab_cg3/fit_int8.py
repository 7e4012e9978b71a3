"""int8's own prefill slice constants (item and reduce held), and the plans they change on the
Llama-3 shapes with the timings of both plans where this call measured both. From the project root,
with json.tgz unpacked into DIR:
    python benchmarks/results/h200/2026-12-03-e/experiments/ab_cg3/fit_int8.py DIR"""
import sys

import numpy as np

sys.path.insert(0, "benchmarks/experiments")
import fit_prefill_plan as f  # noqa: E402

DIR = sys.argv[1]
times = f.timings([("fit2", f"{DIR}/prefill8/main_*.json"), ("cg3f", f"{DIR}/prefill8/cg3f_*.json")])
keys, A, y = f.design(times)
c0 = np.array(f.MODELS["fit"])


def report(c, name):
    err = A @ c / y - 1
    named, right = f.two_plan_points(keys, A @ c, y)
    print(name, "rms %.3f max %.3f" % (np.sqrt((err**2).mean()), abs(err).max()), "pairs", len(named), "right", right)


report(c0, "int4 constants")
for free in ([0, 1, 2, 6, 7], [0, 1, 2, 3, 4, 6, 7]):
    c = f.fit_held(A, y, c0, free)
    print(free, np.round(c, 0))
    report(c, "fit")

# The plans the committed int8 constants (MODELS["fit8"], the first fit rounded) change, with both times
# where this call measured both.
c8 = np.array(f.MODELS["fit8"])
for (m, l), (K, N) in f.SHAPES.items():
    for M in [33, 64, 128, 192, 256, 384, 512, 768, 1024, 2048]:
        cur, new = f.plan(K, N, M, c0, 8), f.plan(K, N, M, c8, 8)
        if cur != new:
            a, b = times.get((m, l, M, *cur, 8)), times.get((m, l, M, *new, 8))
            print(m, l, M, "cur", cur, a and round(a / 1e3, 1), "new", new, b and round(b / 1e3, 1),
                  (a and b) and round(b / a, 3))
