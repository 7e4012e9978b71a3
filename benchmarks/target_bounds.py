"""The issue targets that compare against cuBLAS, each beside the most the measured GPU allows.

A target "x times faster than cuBLAS bf16 at M" can only be met if the roofline
allows it: no kernel runs faster than max(bytes / HBM read, 2 M N K / tensor
peak), with both ceilings measured in the same run (bench_dispatch.py records
them, and a "roofline" row per point). So for every target point this prints
the measured ratio (cuBLAS time / Swordfish time, for the dispatcher's choice and
for each forced path), the ceiling ratio (cuBLAS time / roofline time), and how
much of the roofline the best path reached. A target above its ceiling cannot
be met by any kernel on this machine; one below it says how close the kernels
are to what the hardware gives.

    python benchmarks/target_bounds.py benchmarks/baselines/h200/dispatch_int4.json \
        benchmarks/baselines/h200/dispatch_int8.json

No GPU needed: it reads the JSON of a sweep that timed cuBLAS (and forced
paths) at the target M values.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import sys

L70 = ("llama-3-70b",)
L8 = ("llama-3-8b",)

# (issue, bits, models, M values, minimum cuBLAS / Swordfish ratio), as the issues state them.
TARGETS = [
    ("#3", 4, L70, (64,), 2.2),
    ("#3", 4, L8, (64,), 1.8),
    ("#3", 4, L70, (128,), 1.2),
    ("#3", 4, L8, (128,), 1.0),
    ("#7", 4, L70, (128, 256), 1.5),
    ("#7", 4, L70 + L8, (512, 768, 1024, 2048), 0.90),
    ("#7", 8, L70 + L8, (512, 768, 1024, 2048), 0.85),
]
PATHS = ("decode", "prefill", "dense")


def load(paths):
    """{(bits, model, layer, M): {impl: us}} from bench_dispatch.py JSON files (one format per file)."""
    times = collections.defaultdict(dict)
    for path in paths:
        doc = json.loads(pathlib.Path(path).read_text())
        bits = doc.get("config", {}).get("bits")
        if bits not in (4, 8):
            sys.exit(f"{path}: config.bits is {bits!r}, not 4 or 8 (is this a bench_dispatch.py JSON?)")
        for r in doc["rows"]:
            if r.get("status") == "ok" and r.get("us"):
                times[(bits, r["model"], r["layer"], r["M"])][r["impl"]] = r["us"]
    return times


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", nargs="+", help="bench_dispatch.py JSON file(s)")
    args = ap.parse_args(argv)
    times = load(args.sweep)
    print("x = cuBLAS bf16 time / our time (> 1 is faster); ceiling = cuBLAS / roofline; "
          "%roof = roofline / best path's time")
    head = f"{'issue':5} {'fmt':4} {'shape':20} {'M':>5} {'target':>6} {'auto':>6} " + \
        " ".join(f"{p:>7}" for p in PATHS) + f" {'ceiling':>7} {'%roof':>6}  verdict"
    print(head)
    counts = collections.Counter()
    for issue, bits, models, ms, target in TARGETS:
        for key in sorted(k for k in times if k[0] == bits and k[1] in models and k[3] in ms):
            t = times[key]
            if "cublas" not in t or "roofline" not in t:
                continue
            ratio = {p: t["cublas"] / t[p] for p in ("auto",) + PATHS if p in t}
            forced = [t[p] for p in PATHS if p in t]
            if not forced and "auto" not in t:
                continue
            best = min(forced) if forced else t["auto"]
            ceiling = t["cublas"] / t["roofline"]
            measured = ratio.get("auto", t["cublas"] / best)
            detail = ""
            if measured >= target:
                kind = "met"
            elif ceiling < target:
                kind = "beyond the roofline"
            else:
                kind, detail = "short", f" (needs {100 * target / ceiling:.0f}% of roofline)"
            counts[kind] += 1
            shape = f"{key[1].replace('llama-3-', '')} {key[2]}"
            cells = " ".join(f"{ratio[p]:7.2f}" if p in ratio else f"{'-':>7}" for p in PATHS)
            print(f"{issue:5} int{bits:<1} {shape:20} {key[3]:5d} {target:6.2f} {ratio.get('auto', float('nan')):6.2f} "
                  f"{cells} {ceiling:7.2f} {100 * t['roofline'] / best:5.0f}%  {kind}{detail}")
    print("points: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
