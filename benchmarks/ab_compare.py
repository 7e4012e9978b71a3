"""Compare variants of the extension timed in interleaved rounds (the `ab` stage of scripts/gpu_check.sh).

Reads result files named VARIANT_ROUND.json, written by `swordfish bench` (key "rows"; with --moe the M
column is the token count T) or by
benchmarks/bench_decode.py (key "records"), keeps the best (minimum) time of each point over the
rounds per variant, and prints one line per point with every variant's time and its ratio to the
first (the baseline), then the geometric mean of each ratio. A ratio below 1 means the variant is
faster. The spread column is the largest (max - min) / min over the rounds of any variant at that
point: a ratio inside it is not a result.

    python benchmarks/ab_compare.py DIR [--base main] [--min-ratio 0.97]
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import re
import sys
from collections import defaultdict

_NAME = re.compile(r"^(?P<variant>.+)_(?P<round>\d+)\.json$")


def _points(doc: dict):
    """(key, us) for every timed point of one result file; key is (shape, bits, M, path)."""
    if "rows" in doc:  # swordfish bench
        bits = doc.get("config", {}).get("bits")
        for r in doc["rows"]:
            if r.get("status") == "ok" and r.get("us") is not None:
                model = r["model"].replace("llama-3-", "")
                if "T" in r:  # swordfish bench --moe: one MoE layer at T tokens
                    yield (f"{model} moe", bits, r["T"], r["impl"]), float(r["us"])
                else:
                    yield (f"{model} {r['layer']}", bits, r["M"], r["impl"]), float(r["us"])
    elif "records" in doc:  # bench_decode
        for r in doc["records"]:
            if r.get("us") is not None:
                yield (r["shape"].replace("_", " ", 1), r["bits"], r["M"], r["path"]), float(r["us"])
    else:
        raise ValueError("neither 'rows' (swordfish bench) nor 'records' (bench_decode)")


def load(directory: pathlib.Path) -> dict[str, dict[tuple, list[float]]]:
    """variant -> point -> the times of that point over the rounds."""
    out: dict[str, dict[tuple, list[float]]] = defaultdict(lambda: defaultdict(list))
    files = sorted(directory.glob("*.json"))
    for f in files:
        m = _NAME.match(f.name)
        if not m:
            continue
        for key, us in _points(json.loads(f.read_text())):
            out[m["variant"]][key].append(us)
    if not out:
        raise SystemExit(f"ab_compare: no VARIANT_ROUND.json files in {directory}")
    return out


def table(data: dict[str, dict[tuple, list[float]]], base: str) -> tuple[list[str], dict[str, float]]:
    """The printed lines and the geometric-mean ratio of each variant to the base."""
    if base not in data:
        raise SystemExit(f"ab_compare: no baseline {base!r}; variants are {sorted(data)}")
    others = sorted(v for v in data if v != base)
    w = max(10, *(len(v) + 2 for v in data))  # a time column fits its variant's name
    wr = max(16, *(len(v) + len(base) + 3 for v in others)) if others else 16
    head = f"{'shape':<14}{'bits':>5}{'M':>6} {'path':<8}{base:>{w}}" + "".join(f"{v:>{w}}" for v in others)
    head += "".join(f"{v + '/' + base:>{wr}}" for v in others) + f"{'spread':>8}"
    lines = [head]
    logs: dict[str, list[float]] = {v: [] for v in others}
    for key in sorted(data[base]):
        shape, bits, m, path = key
        b = min(data[base][key])
        row = f"{shape:<14}{bits!s:>5}{m:>6} {path:<8}{b:>{w}.1f}"
        ratios = []
        spread = max((max(t) - min(t)) / min(t) for t in (d[key] for d in data.values() if key in d))
        for v in others:
            t = data[v].get(key)
            row += f"{min(t):>{w}.1f}" if t else f"{'-':>{w}}"
            r = min(t) / b if t else None
            ratios.append(r)
            if r is not None:
                logs[v].append(math.log(r))
        row += "".join(f"{r:>{wr}.3f}" if r is not None else f"{'-':>{wr}}" for r in ratios)
        lines.append(row + f"{spread:>8.1%}")
    gm = {v: math.exp(sum(x) / len(x)) for v, x in logs.items() if x}
    lines.append("geometric mean of variant/base: " + ", ".join(f"{v} {g:.3f} over {len(logs[v])} points"
                                                                for v, g in gm.items()))
    return lines, gm


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("directory", type=pathlib.Path)
    p.add_argument("--base", default="main", help="the baseline variant (default main)")
    a = p.parse_args(argv)
    lines, _ = table(load(a.directory), a.base)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
