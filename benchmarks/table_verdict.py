"""Judge the dispatcher's tables against a recorded sweep, without a GPU.

The dispatcher's choice is a pure function of the problem and the per-arch
table (kernels/dispatch/heuristics*.hpp). Given a bench_dispatch.py JSON that
timed every path forced (decode, prefill, dense) at each (shape, M), this
compiles the table driver the CPU tests use
(kernels/dispatch/tests/select_table_main.cpp, the headers as they are in the
tree now), asks it which path each point would take, and prints the chosen
path's time over the fastest path's time, per shape and M. So a table edit
can be checked against the last sweep before spending device time on a new
one. The sweep's own "auto" column is what the table of the measured commit
chose; this reports what the current table chooses.

    python benchmarks/table_verdict.py benchmarks/baselines/h200/dispatch_int4.json
    python benchmarks/table_verdict.py --no-prefill ...   # the thresholds used when prefill cannot run
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
DRIVER = ROOT / "kernels" / "dispatch" / "tests" / "select_table_main.cpp"
PREFILL_PLAN = ROOT / "kernels" / "prefill" / "prefill_plan.cpp"  # prefill::plan_balance, which the driver links
PATHS = {1: "decode", 2: "dense", 3: "prefill"}


def build_driver(tmp: pathlib.Path) -> pathlib.Path:
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        sys.exit("needs a host C++ compiler (c++, g++ or clang++)")
    exe = tmp / "select_table"
    subprocess.run([cxx, "-std=c++17", "-O1", "-I", str(ROOT), str(DRIVER), str(PREFILL_PLAN), "-o", str(exe)],
                   check=True)
    return exe


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", nargs="+", help="bench_dispatch.py JSON file(s) (dispatch_int4.json, ...)")
    ap.add_argument("--tolerance", type=float, default=0.03, help="allowed chosen/best - 1 (default 0.03)")
    ap.add_argument("--no-prefill", action="store_true",
                    help="judge the table as if prefill could not run (K or N not a multiple of 128, a build "
                         "without sm_90a): the dense-vs-decode thresholds, against decode and dense only")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_driver(pathlib.Path(tmp))
        for path in args.sweep:
            doc = json.loads(pathlib.Path(path).read_text())
            dev = doc["device"]
            cc = [int(v) for v in str(dev["capability"]).split(".")]
            sms = int(dev["sm_count"])
            act = bool(doc.get("config", {}).get("act_order", False))
            times = collections.defaultdict(dict)
            bits_of = {}
            for r in doc["rows"]:
                if r.get("us") is None:
                    continue
                key = (f"{r['model']} {r['layer']}", r["K"], r["N"], r.get("bits", doc.get("config", {}).get("bits", 4)))
                if args.no_prefill and r["impl"] == "prefill":
                    continue
                times[(key, r["M"])][r["impl"]] = r["us"]
                bits_of[key] = key[3]
            points = sorted(times, key=lambda k: (k[0], k[1]))
            lines = []
            for (key, M) in points:
                e = times[(key, M)]
                avail = {p: p in e for p in ("decode", "dense", "prefill")}
                lines.append(f"choose {cc[0]} {cc[1]} {sms} {M} {key[1]} {key[2]} {key[3]} {int(act)} "
                             f"{int(avail['decode'])} {int(avail['dense'])} {int(avail['prefill'])}")
            out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True,
                                 check=True).stdout.split()
            table = collections.defaultdict(dict)
            worst, within, total = [], 0, 0
            for (key, M), chosen in zip(points, out):
                e = times[(key, M)]
                name = PATHS[int(chosen)]
                best_name = min(("decode", "prefill", "dense"), key=lambda p: e.get(p, float("inf")))
                ratio = e[name] / e[best_name]
                table[key][M] = (name, ratio)
                total += 1
                within += ratio <= 1 + args.tolerance
                worst.append((ratio, key[0], M, name, best_name))
            Ms = sorted({M for (_, M) in points})
            print(f"{path}: chosen path / fastest path ({'act-order, ' if act else ''}sm{cc[0]}{cc[1]}, {sms} SMs"
                  f"{', prefill unavailable' if args.no_prefill else ''})")
            print(f"{'shape':26}" + "".join(f"{M:>8}" for M in Ms))
            for key in table:
                cells = []
                for M in Ms:
                    if M not in table[key]:
                        cells.append(f"{'':>8}")
                        continue
                    name, ratio = table[key][M]
                    cells.append(f"  {name[:2]}{ratio:4.2f}")
                print(f"{key[0] + ' int' + str(key[3]):26}" + "".join(cells))
            print(f"within {args.tolerance:.0%} of the fastest path: {within}/{total} points; worst:")
            for ratio, shape, M, name, best in sorted(worst, reverse=True)[:8]:
                print(f"  {shape} M={M}: {name} is {ratio:.2f}x the fastest ({best})")
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
