"""Refit the sm90 prefill planner's cost constants (kernels/prefill/sm90/prefill_sm90_launch.cu) from
`swordfish bench --paths prefill` JSON files timed on the H200.

Each file names the constants its extension planned with (--model old|table|fit, see MODELS); the
script replays the planner's choice (BT, splits) for every timed point with those constants, builds
the cost model's terms for that plan (k64 slices per BT on the critical SM, work items on it, the
reduce launch, the partial bytes) and solves a least-squares fit in relative error. It then reports
the fit's rms error and, for points timed under two different plans, whether the fit names the
faster one. The replay mirrors make_plan (keep it in step by hand;
tests/test_prefill_plan.py checks that it does under the committed constants).

    python benchmarks/fit_prefill_plan.py old:DIR/main_*.json fit:DIR/fit_*.json

One bit width per run. SLICES replays the current kernels' stage depths: int8 timings from before
2026-12-03-g ran k64 stages at BT 128 and are misread by it there.

Used for the constants of 2026-12-02-f and their later refits (benchmarks/RESULTS.md, "Prefill plan").
"""

from __future__ import annotations

import glob
import json
import math
import sys

import numpy as np

G = 132  # the H200's SMs
SHAPES = {("llama-3-8b", "qkv"): (4096, 6144), ("llama-3-8b", "o"): (4096, 4096),
          ("llama-3-8b", "gate_up"): (4096, 28672), ("llama-3-8b", "down"): (14336, 4096),
          ("llama-3-70b", "qkv"): (8192, 10240), ("llama-3-70b", "o"): (8192, 8192),
          ("llama-3-70b", "gate_up"): (8192, 57344), ("llama-3-70b", "down"): (28672, 8192)}
# Constants: per-k64-slice ns of the 128-column tile at BT 64 / 128 / 256, per item, reduce launch,
# reduce ns per KB of partials written + read, per-k64-slice ns of the 192-column tile at BT 64 / 128,
# per-k64-slice ns of the 128-column tile at BT 192.
# "old" is the planner before 2026-12-02-f, "fit" the one after (its 192-column constants fitted on
# 2026-12-03-e with the others held). The older models had no 192-column tile and no BT 192 (priced
# out); fit / fit8's BT 192 constants were fitted with the rest held on 2026-12-04-c call 3's timings
# of a build ("bt192g", "bt192g8") that priced them halfway between BT 128's and 256's.
NO = 1e12
MODELS = {"old": (476.0, 572.0, 764.0, 0.0, 3000.0, 0.5, NO, NO, NO),
          "table": (290.0, 410.0, 770.0, 0.0, 3000.0, 0.5, NO, NO, NO),
          "fit": (292.0, 420.0, 742.0, 135.0, 4900.0, 0.16, 508.0, 655.0, 617.0),
          # the same planner before the 192-column tile existed (2026-12-02-f to 8dc57a8; int8 too)
          "fit2": (292.0, 420.0, 742.0, 135.0, 4900.0, 0.16, NO, NO, NO),
          # int8's own slice constants (2026-12-03-e; item and reduce held)
          "fit8": (365.0, 505.0, 820.0, 135.0, 4900.0, 0.16, 547.0, 718.0, 670.0),
          # the first BT 192 build's guess (int4, int8), 2026-12-04-c call 3
          "bt192g": (292.0, 420.0, 742.0, 135.0, 4900.0, 0.16, 508.0, 655.0, 581.0),
          "bt192g8": (365.0, 505.0, 820.0, 135.0, 4900.0, 0.16, 547.0, 718.0, 662.0),
          # the planners from 2026-12-03-e to 5b1b963, before BT 192 (int4, int8)
          "fit3": (292.0, 420.0, 742.0, 135.0, 4900.0, 0.16, 508.0, 655.0, NO),
          "fit83": (365.0, 505.0, 820.0, 135.0, 4900.0, 0.16, 547.0, 718.0, NO),
          # an experiment build pricing the 192-column slice at 0.6x a 128-column one (2.5x too cheap):
          # the wide tile wherever it exists, to time it (2026-12-03-e)
          "cg3f": (292.0, 420.0, 742.0, 135.0, 4900.0, 0.16, 175.2, 252.0, NO)}
# k64 slices per stage by bits and (consumer warpgroups, BT): k128 stages for BT <= 128 on 128
# columns (int8 at BT 128 only since 2026-12-03-g: timings from before ran its k64 stages)
SLICES = {4: {(2, 64): 2, (2, 128): 2, (2, 192): 1, (2, 256): 1, (3, 64): 1, (3, 128): 1},
          8: {(2, 64): 2, (2, 128): 2, (2, 192): 1, (2, 256): 1, (3, 64): 1, (3, 128): 1}}
SLICE_COL = {(2, 64): 0, (2, 128): 1, (2, 256): 2, (3, 64): 6, (3, 128): 7, (2, 192): 8}


def terms(K, N, M, bt, s, cg=2, bits=4):
    """The cost model's terms of one plan: slices per (cg, BT) (6), items, reduce launches, partial KB."""
    ks = SLICES[bits][(cg, bt)]
    kst = K // (64 * ks)
    tn = 64 * cg
    T = -(-M // bt) * -(-N // tn)
    full, r = divmod(T, G)
    f = np.zeros(9)
    col = SLICE_COL[(cg, bt)]
    if s == 1:
        waves = math.ceil(T / G)
        f[col], f[3] = waves * kst * ks, waves
    else:
        rounds = math.ceil(r * s / G)
        f[col] = (full * kst + rounds * math.ceil(kst / s)) * ks
        f[3], f[4], f[5] = full + rounds, 1, r * s * bt * tn * 4 * 2 / 1e3
    return f


def plan(K, N, M, c, bits=4):
    """make_plan's choice (bt, splits, cg) under constants c."""
    best = None
    for cg, bt in ((2, 256), (2, 192), (2, 128), (2, 64), (3, 128), (3, 64)):
        tiles = -(-M // bt) * -(-N // (64 * cg))
        kst = K // (64 * SLICES[bits][(cg, bt)])
        splits = [1] + ([s for s in range(2, 9) if kst // s >= 4] if tiles % G else [])
        for s in splits:
            est = float(terms(K, N, M, bt, s, cg, bits) @ np.array(c))
            if best is None or est < best[0]:
                best = (est, bt, s, cg)
    return best[1], best[2], best[3]


def timings(specs):
    """{(model, layer, M, bt, splits, cg, bits): best ns} from (MODEL, GLOB) pairs: every file's rows
    under the plan MODEL's constants chose for them (the files say their bit width)."""
    times: dict[tuple, float] = {}
    for model, pattern in specs:
        for path in glob.glob(pattern):
            data = json.load(open(path))
            bits = data["config"]["bits"]
            for row in data["rows"]:
                if row.get("impl", "prefill") != "prefill" or row.get("status", "ok") != "ok":
                    continue  # a file timed with --paths prefill,cublas holds cuBLAS rows too
                K, N = SHAPES[(row["model"], row["layer"])]
                key = (row["model"], row["layer"], row["M"], *plan(K, N, row["M"], MODELS[model], bits), bits)
                times[key] = min(times.get(key, math.inf), row["us"] * 1e3)
    return times


def design(times):
    """(keys, A, y): the timed plans in order, their cost-model terms and their times."""
    keys = sorted(times)
    return keys, np.array([terms(*SHAPES[k[:2]], *k[2:]) for k in keys]), np.array([times[k] for k in keys])


def fit_held(A, y, c0, free):
    """c0 with the columns `free` refitted (least squares in relative error), the others held."""
    fixed = [i for i in range(len(c0)) if i not in free]
    w = 1 / y
    c = np.array(c0, dtype=float)
    c[free] = np.linalg.lstsq(A[:, free] * w[:, None], (y - A[:, fixed] @ c[fixed]) * w, rcond=None)[0]
    return c


def two_plan_points(keys, pred, y):
    """[(point, [(plan, predicted, measured), ...])] for the points timed under two plans, and how
    many of them the prediction orders the way the measurement does."""
    pairs: dict[tuple, list] = {}
    for k, p, m in zip(keys, pred, y):
        pairs.setdefault(k[:3], []).append((k[3:], p, m))
    named = [(k, v) for k, v in pairs.items() if len(v) == 2]
    return named, sum((v[0][1] < v[1][1]) == (v[0][2] < v[1][2]) for _, v in named)


def main(argv):
    keys, A, y = design(timings(arg.split(":", 1) for arg in argv))
    c = np.linalg.lstsq(A / y[:, None], np.ones_like(y), rcond=None)[0]
    err = A @ c / y - 1
    print("slice ns BT64 %.0f BT128 %.0f BT256 %.0f, item %.0f ns, reduce %.0f ns + %.2f ns/KB, "
          "192 columns: BT64 %.0f BT128 %.0f, BT192 %.0f" % tuple(c))
    print(f"{len(y)} points, rms relative error {np.sqrt((err ** 2).mean()):.3f}, max {abs(err).max():.3f}")
    named, right = two_plan_points(keys, A @ c, y)
    print(f"points timed under two plans: {len(named)}, fit names the faster at {right}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
