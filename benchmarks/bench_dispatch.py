"""The dispatcher's M sweep: every path (decode, prefill, dense forced; auto; cuBLAS bf16) per shape,
timed INTERLEAVED, the decode/dense crossovers that the sm90 table (kernels/dispatch/
heuristics_sm90.hpp) is written from, and the dense tier's dequant kernel alone against an HBM copy
measured in the same run.

    python benchmarks/bench_dispatch.py --quick --out /tmp/d        # 8 shapes x 16 M, int4 g128 bf16
    python benchmarks/bench_dispatch.py --bits 4 8 --out $OUT/dispatch  # int4 and int8, every path
    python benchmarks/bench_dispatch.py --bits 8 --act-order --shapes 70b_o,70b_down --m 64,96,128,192
    python benchmarks/bench_dispatch.py --dry-run --out /tmp/d      # no GPU: synthetic numbers through
                                                                    # the table, verdict and PNG code
    ncu --clock-control none -k regex:dequant -c 1 --section SourceCounters --metrics \\
        l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum \\
        python benchmarks/bench_dispatch.py --dequant-only --shapes 70b_o --bits 4 --out /tmp/ncu

Timing. For each (shape, M) every path gets its own CUDA graph of back-to-back calls that rotate
over weight copies totalling > 2x L2 (so small-M calls stream weights from HBM), sized to at least
--graph-ms of work. Then ROUNDS: each round replays every path's graph once (the order rotates
from round to round), all enqueued back to back, one host sync at the end. A path's time is the
median over rounds of (replay time / calls per graph); its spread is max/min - 1 over the rounds,
so the noise of the run is printed beside every verdict. Clock or thermal drift hits all paths of
a round alike, which timing each path in its own block (as before) did not: repeats of that spread
up to 13%, more than the 3% the "auto within 3% of the fastest path" verdict has to resolve.

A forced path that cannot run a problem raises an error (ValueError) naming why; it is recorded as
"unavailable" (us null) with that reason and the sweep goes on (prefill shows numbers once a
prefill kernel exists for the device). With --prune-decode X, decode is no longer timed at larger
M once it is X times slower than the fastest path of the shape (its time only grows from there).

HBM copy ceiling: an SM copy kernel (torch.neg over fp32 views) of two multi-GiB buffers,
counting read + write bytes, median of the rounds. The earlier probe timed dst.copy_(src), a
cudaMemcpyAsync that a CUDA graph runs as a memcpy node on a copy engine (about 2.7 TB/s r+w on
the H200, below what the dequant kernel itself reaches); it is still measured, as
"memcpy_graph_gbps", for comparison.

Writes under --out (flat, as the device tool returns them; "_act" is appended with --act-order):
    dispatch_int4.json / dispatch_int8.json   the sweep rows (swordfish-bench schema, validated;
                                              rows add us_min, us_max, spread, rounds_us)
    dispatch_int4.png  / dispatch_int8.png    time vs M per path, log-log, one panel per shape
    dispatch_summary.json                     crossovers, suggested table, verdicts, copy probe, dequant
    dispatch_summary.txt                      everything printed
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

from swordfish_backend import bench as _bench  # the timing primitives `swordfish bench` uses too

SHAPES = {  # name: (model, layer name, K, N)
    "8b_qkv": ("llama-3-8b", "qkv", 4096, 6144),
    "8b_o": ("llama-3-8b", "o", 4096, 4096),
    "8b_gate_up": ("llama-3-8b", "gate_up", 4096, 28672),
    "8b_down": ("llama-3-8b", "down", 14336, 4096),
    "70b_qkv": ("llama-3-70b", "qkv", 8192, 10240),
    "70b_o": ("llama-3-70b", "o", 8192, 8192),
    "70b_gate_up": ("llama-3-70b", "gate_up", 8192, 57344),
    "70b_down": ("llama-3-70b", "down", 28672, 8192),
}
M_SWEEP = (1, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048, 4096, 8192)
FORCED = ("decode", "prefill", "dense")      # Swordfish paths timed forced (the op's path argument)
IMPLS = ("auto",) + FORCED + ("cublas",)     # timed per (shape, M), interleaved
NOMINAL_COPY_GBPS = 4250.0  # shared/GPU.md: HBM copy (read + write) on this H200
AUTO_SLACK = 1.03           # issue 4: the dispatcher's choice within 3% of the fastest path
ROUNDS = 9                  # default rounds per (shape, M)
QUICK_ROUNDS = 7            # --quick
GRAPH_MS = 2.0              # each graph holds at least this much work (replay launch noise amortised)
MAX_CALLS = _bench.MAX_CALLS  # calls captured in one graph
COPY_PROBE_BYTES = 2 << 30  # per buffer (two buffers: read one, write the other)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="all", help=f"comma list of {', '.join(SHAPES)} (default all)")
    ap.add_argument("--formats", default=None, help="comma list of int4, int8 (default int4,int8; --quick: int4)")
    ap.add_argument("--bits", type=int, nargs="+", choices=(4, 8), default=None,
                    help="same as --formats: --bits 4 8")
    ap.add_argument("--m", default=",".join(map(str, M_SWEEP)), help="comma list of M values")
    ap.add_argument("--act-order", action="store_true",
                    help="weights with a random act-order permutation (the table's act_order key)")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    ap.add_argument("--paths", default=",".join(IMPLS), help=f"comma list of {', '.join(IMPLS)} (default all)")
    ap.add_argument("--rounds", type=int, default=None, help=f"interleaved rounds per (shape, M) (default "
                    f"{ROUNDS}; --quick {QUICK_ROUNDS})")
    ap.add_argument("--graph-ms", type=float, default=GRAPH_MS, help="minimum work per graph replay, ms")
    ap.add_argument("--prune-decode", type=float, default=None,
                    help="stop timing decode at larger M once it is this many times slower than the fastest "
                         "path of the shape (default 0: off)")
    ap.add_argument("--quick", action="store_true",
                    help=f"int4 g128 only (the eight shapes at the 16 M of the issue unless --shapes/--m say "
                         f"otherwise), {QUICK_ROUNDS} rounds: about a minute of device time on the H200")
    ap.add_argument("--no-dequant", action="store_true", help="skip timing the dequant kernel alone")
    ap.add_argument("--dequant-only", action="store_true",
                    help="time only the dequant kernel (e.g. under ncu for the shared-memory bank-conflict counters)")
    ap.add_argument("--budget-ms", type=float, default=30.0,
                    help="GPU time of replays per dequant measurement (bench.BUDGET_US; default 30 ms)")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU: synthetic timings through the tables, verdicts, JSON and PNG")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench_dispatch_out", help="output folder")
    ap.add_argument("--device", type=int, default=0)
    args = ap.parse_args(argv)
    args.shape_names = list(SHAPES) if args.shapes == "all" else [s.strip() for s in args.shapes.split(",") if s]
    bad = [s for s in args.shape_names if s not in SHAPES]
    if bad:
        ap.error(f"unknown shape(s) {bad}; choose from {', '.join(SHAPES)}")
    if args.bits is not None and args.formats is not None:
        ap.error("give --bits or --formats, not both")
    if args.bits is not None:
        args.bits = sorted(set(args.bits))
    else:
        formats = args.formats or ("int4" if args.quick else "int4,int8")
        args.bits = []
        for f in (f.strip() for f in formats.split(",") if f.strip()):
            if f not in ("int4", "int8"):
                ap.error(f"--formats takes int4 and/or int8, got {f!r}")
            args.bits.append(int(f[3:]))
    args.m_values = sorted({int(m) for m in args.m.split(",") if m.strip()})
    if not args.m_values or args.m_values[0] < 1:
        ap.error("--m needs positive integers")
    args.impls = [p.strip() for p in args.paths.split(",") if p.strip()]
    bad = [p for p in args.impls if p not in IMPLS]
    if bad or not args.impls:
        ap.error(f"--paths takes {', '.join(IMPLS)}, got {args.paths!r}")
    args.impls = [p for p in IMPLS if p in args.impls]  # canonical order
    if args.rounds is None:
        args.rounds = QUICK_ROUNDS if args.quick else ROUNDS
    if args.rounds < 1:
        ap.error(f"--rounds must be >= 1, got {args.rounds}")
    if args.prune_decode is None:
        args.prune_decode = 0.0
    args.suffix = "_act" if args.act_order else ""
    return args


class Log:
    """Print and keep every line (written to dispatch_summary.txt at the end)."""

    def __init__(self):
        self.lines: list[str] = []
        self.t0 = time.time()

    def __call__(self, text: str = "") -> None:
        for line in text.split("\n"):
            self.lines.append(line)
            print(line, flush=True)

    def progress(self, text: str) -> None:
        print(f"[{time.time() - self.t0:6.1f}s] {text}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ analysis (pure: testable on the CPU)


def series(rows: list, model: str, layer: str, impl: str, key: str = "us") -> dict:
    return {r["M"]: r[key] for r in rows
            if (r["model"], r["layer"], r["impl"]) == (model, layer, impl) and r["status"] == "ok"}


def crossover(decode: dict, dense: dict) -> dict:
    """Smallest swept M from which dense stays faster than decode at every larger swept M.

    Returns {"m": M or None, "below": the swept M just below (decode still wins there) or None,
    "interpolated": log-linear estimate of where the two times cross inside (below, m]}.
    """
    ms = sorted(set(decode) & set(dense))
    if not ms:
        return {"m": None, "below": None, "interpolated": None, "note": "decode or dense has no time"}
    m_cross = None
    for i in range(len(ms) - 1, -1, -1):
        if dense[ms[i]] < decode[ms[i]]:
            m_cross = ms[i]
        else:
            break
    if m_cross is None:
        return {"m": None, "below": None, "interpolated": None, "note": "decode wins at every swept M"}
    i = ms.index(m_cross)
    if i == 0:
        return {"m": m_cross, "below": None, "interpolated": None, "note": "dense wins from the first swept M"}
    lo, hi = ms[i - 1], m_cross
    # ratio r(M) = dense / decode; interpolate log r over log M to r = 1
    r_lo, r_hi = math.log(dense[lo] / decode[lo]), math.log(dense[hi] / decode[hi])
    frac = r_lo / (r_lo - r_hi) if r_lo != r_hi else 1.0
    est = math.exp(math.log(lo) + frac * (math.log(hi) - math.log(lo)))
    return {"m": m_cross, "below": lo, "interpolated": round(est), "note": None}


def auto_verdicts(rows: list, model: str, layer: str) -> list:
    """Per swept M: auto's median against the fastest available forced path's median.

    Each entry: M, auto path, auto us and spread, best path, best us and spread, ratio (of the
    medians), paired (median over rounds of auto / best in the same round, when both rows carry
    rounds_us), noise (the larger of the two spreads) and ok (ratio <= AUTO_SLACK).
    """
    by = {(r["impl"], r["M"]): r for r in rows
          if (r["model"], r["layer"]) == (model, layer) and r["status"] == "ok"}
    out = []
    for M in sorted({m for impl, m in by if impl == "auto"}):
        auto = by[("auto", M)]
        cands = [by[(p, M)] for p in FORCED if (p, M) in by]
        if not cands:
            continue
        best = min(cands, key=lambda r: r["us"])
        ratio = auto["us"] / best["us"]
        paired = None
        ra, rb = auto.get("rounds_us"), best.get("rounds_us")
        if ra and rb and len(ra) == len(rb):
            paired = statistics.median(a / b for a, b in zip(ra, rb))
        noise = max(auto.get("spread") or 0.0, best.get("spread") or 0.0)
        out.append({"M": M, "auto_path": auto["path"], "auto_us": auto["us"], "auto_spread": auto.get("spread"),
                    "best_path": best["impl"], "best_us": best["us"], "best_spread": best.get("spread"),
                    "ratio": ratio, "paired": paired, "noise": noise, "ok": ratio <= AUTO_SLACK})
    return out


def auto_check(rows: list, model: str, layer: str) -> list:
    """(M, auto us, best us, best path, ratio) wherever auto's median is more than 3% above the best path's."""
    return [{"M": v["M"], "auto_us": v["auto_us"], "best_us": v["best_us"], "best_path": v["best_path"],
             "ratio": v["ratio"], "noise": v["noise"], "paired": v["paired"]}
            for v in auto_verdicts(rows, model, layer) if not v["ok"]]


def suggest(crossovers: list, bits: int, act_order: bool) -> dict:
    """Table values from the measured crossovers: the smallest over shapes, per K-heavy class.

    An act-order sweep suggests the one act_order key, which the dispatcher applies to shapes with
    N <= 2K (heuristics.hpp dense_from): the smallest crossover over those shapes.
    """
    out = {}
    for heavy in (False, True):
        if act_order:
            if heavy:
                continue
            key = "act_order"
            found = [c for c in crossovers if c["bits"] == bits and c["N"] <= 2 * c["K"] and c["m"] is not None]
        else:
            key = f"int{bits}" + ("_k_heavy" if heavy else "")
            found = [c for c in crossovers if c["bits"] == bits and c["k_heavy"] == heavy and c["m"] is not None]
        if not found:
            out[key] = {"value": None, "from": "no shape crossed over in the sweep"}
            continue
        best = min(found, key=lambda c: c["m"])
        out[key] = {"value": best["m"], "interpolated": best["interpolated"],
                    "from": ", ".join(f"{c['shape']}={c['m']}" for c in found)}
    return out


def graph_calls(eager_us: float, n_list: int, graph_ms: float = GRAPH_MS) -> int:
    """Calls captured in one graph: whole passes over the n_list rotating calls, at least graph_ms of work."""
    return _bench.graph_calls(eager_us, n_list, graph_ms * 1e3)


def copies_for(bytes_per_copy: int, l2_bytes: int, free_bytes: int, l2_multiple: int = 2) -> int:
    """Rotating weight copies: together more than l2_multiple x L2, at least 2, a quarter of free memory at most."""
    want = math.ceil(l2_multiple * max(l2_bytes, 1) / max(bytes_per_copy, 1))
    fit = max(1, (free_bytes // 4) // max(bytes_per_copy, 1))
    return int(max(2, min(want, MAX_CALLS, fit)))


def should_prune(prune: float, impl: str, us: float | None, best_us: float | None) -> bool:
    """Decode only: stop timing it at larger M once it is `prune` times slower than the fastest path."""
    return bool(prune) and impl == "decode" and us is not None and best_us is not None and us > prune * best_us


def mark_pruned(timings: dict, pruned: list, key: tuple) -> None:
    """Record a decode point skipped because decode already lost by the prune factor at a smaller M."""
    bits, name, M, impl = key
    timings[key] = {"status": "pruned"}
    pruned.append({"bits": bits, "shape": name, "M": M, "impl": impl})


def decode_lost(args, timings: dict, bits: int, name: str, M: int) -> bool:
    """After the paths of one (shape, M) are timed: is decode now `--prune-decode` times slower than
    the fastest forced path (so larger M skip it)?"""
    best = min((statistics.median(timings[(bits, name, M, i)]["rounds_us"]) for i in FORCED
                if timings.get((bits, name, M, i), {}).get("status") == "ok"), default=None)
    d = timings.get((bits, name, M, "decode"), {})
    return d.get("status") == "ok" and should_prune(args.prune_decode, "decode", statistics.median(d["rounds_us"]),
                                                    best)


def build_rows(timings: dict, shapes: list, ms: list, impls: list, wbytes: dict, ceilings: dict | None,
               bench) -> list:
    """Result rows (swordfish-bench schema) from timings[(shape, M, impl)] = {status, rounds_us, ...}.

    Rows of pruned points are left out (the table prints "-"); roofline rows are added when the
    ceilings are known.
    """
    from swordfish_backend.presets import Layer

    rows = []
    for name in shapes:
        model, layer_name, K, N = SHAPES[name]
        layer = Layer(layer_name, K, N)
        for M in ms:
            for impl in impls:
                t = timings.get((name, M, impl))
                if t is None or t["status"] == "pruned":
                    continue
                wb = K * N * 2 if impl == "cublas" else wbytes[name]
                rows.append(bench.timed_row(model, layer, M, impl, t, wb))
            if ceilings is not None:
                roof, hbm, compute = bench.roofline_us(M, K, N, wbytes[name], ceilings)
                rows.append(bench.make_row(model, layer, M, "roofline", us=roof, weight_bytes=wbytes[name],
                                           hbm_floor_us=hbm, compute_floor_us=compute))
    return rows


def format_spread_table(rows: list) -> str:
    """Per shape and M: each path's median us and its spread over the rounds (max/min - 1, %)."""
    impls = [i for i in IMPLS if any(r["impl"] == i for r in rows)]
    layers = []
    for r in rows:
        if (r["model"], r["layer"], r["K"], r["N"]) not in layers:
            layers.append((r["model"], r["layer"], r["K"], r["N"]))
    by = {(r["model"], r["layer"], r["M"], r["impl"]): r for r in rows}
    lines = ["median us per call over the interleaved rounds (spread = max/min - 1 over the rounds, %)"]
    for model, layer, K, N in layers:
        lines.append("")
        lines.append(f"{model} {layer}  (K={K}, N={N})")
        lines.append(f"{'M':>6}" + "".join(f"{i:>16}" for i in impls))
        for M in sorted({r["M"] for r in rows if (r["model"], r["layer"]) == (model, layer)}):
            cells = []
            for i in impls:
                r = by.get((model, layer, M, i))
                if r is None:
                    cells.append("-")
                elif r["status"] != "ok":
                    cells.append("n/a" if r["status"] == "unavailable" else "ERR")
                else:
                    cells.append(f"{r['us']:.1f} ({100 * (r.get('spread') or 0):.1f}%)")
            lines.append(f"{M:>6}" + "".join(f"{c:>16}" for c in cells))
    return "\n".join(lines)


def plot(doc: dict, path) -> str | None:
    """Time per call vs M per path, log-log, one panel per shape, min-max over the rounds as error bars
    (swordfish_backend.bench.plot). Returns None, or why no PNG was written."""
    from swordfish_backend import bench

    return bench.plot(doc, path, title="bench_dispatch",
                      note=f"median of {doc.get('rounds', '?')} interleaved rounds of CUDA-graph replays over "
                           "rotating weights, bars min..max; lower is better; forced paths clipped above 4x "
                           "auto/cuBLAS")


def report(args, docs: dict, log: Log, copy: dict, dequant: list, pruned: list) -> dict:
    """Crossovers, suggested table values, verdicts and the dequant lines; returns the summary fields."""
    crossovers, auto_misses, vs_cublas, verdicts = [], [], [], []
    for bits, doc in docs.items():
        log("")
        log(format_spread_table(doc["rows"]))
        rows = doc["rows"]
        for name in args.shape_names:
            model, layer, K, N = SHAPES[name]
            c = crossover(series(rows, model, layer, "decode"), series(rows, model, layer, "dense"))
            c.update(shape=name, K=K, N=N, bits=bits, k_heavy=K >= 2 * N, act_order=args.act_order)
            crossovers.append(c)
            for v in auto_verdicts(rows, model, layer):
                verdicts.append(dict(v, shape=name, bits=bits))
                if not v["ok"]:
                    auto_misses.append({"M": v["M"], "auto_us": v["auto_us"], "best_us": v["best_us"],
                                        "best_path": v["best_path"], "ratio": v["ratio"], "noise": v["noise"],
                                        "paired": v["paired"], "shape": name, "bits": bits})
            cub = series(rows, model, layer, "cublas")
            auto = series(rows, model, layer, "auto")
            for M in (1024, 2048, 4096, 8192):
                if M in cub and M in auto:
                    vs_cublas.append({"shape": name, "bits": bits, "M": M, "auto_vs_cublas": cub[M] / auto[M]})
    suggestions = {}
    if docs:
        log("")
        log("decode -> dense crossover per shape (smallest swept M from which dense stays faster):")
        log(f"{'shape':<12}{'K':>7}{'N':>7}  fmt   {'crossover':>9}  {'(after M)':>9}  {'interp':>7}  note")
        for c in crossovers:
            log(f"{c['shape']:<12}{c['K']:>7}{c['N']:>7}  int{c['bits']}  {str(c['m']):>9}  {str(c['below']):>9}  "
                f"{str(c['interpolated']):>7}  {c['note'] or ('K-heavy' if c['k_heavy'] else '')}")
        suggestions = {f"int{b}": suggest(crossovers, b, args.act_order) for b in docs}
        log("")
        log("suggested dense_vs_decode values for heuristics_sm90.hpp (smallest crossover over the shapes; "
            "write each with this command and the per-shape list):")
        for fmt_name, keys in suggestions.items():
            for key, v in keys.items():
                log(f"  {key:<14} = {v['value']}   ({v['from']})")
        log("")
        log(f"auto vs the fastest available path (medians; verdict: ratio <= {AUTO_SLACK:.2f}; "
            "paired = median over rounds of the same-round ratio; noise = larger spread of the two):")
        log(f"  {'fmt':<5}{'shape':<12}{'M':>6}  {'auto':<8}{'us':>9}  {'best':<8}{'us':>9}"
            f"{'ratio':>8}{'paired':>8}{'noise':>8}  verdict")
        for v in verdicts:
            paired = "-" if v["paired"] is None else f"{v['paired']:.3f}"
            log(f"  int{v['bits']:<2}{v['shape']:<12}{v['M']:>6}  {str(v['auto_path']):<8}{v['auto_us']:>9.1f}  "
                f"{v['best_path']:<8}{v['best_us']:>9.1f}{v['ratio']:>8.3f}{paired:>8}{100 * v['noise']:>7.1f}%  "
                f"{'ok' if v['ok'] else 'MISS'}")
        n_ok = sum(v["ok"] for v in verdicts)
        worst_noise = max((v["noise"] for v in verdicts), default=0.0)
        log(f"auto within {100 * (AUTO_SLACK - 1):.0f}% of the fastest path at {n_ok} of {len(verdicts)} points "
            f"(largest spread over the rounds: {100 * worst_noise:.1f}%)")
        for a in auto_misses:
            log(f"  MISS int{a['bits']} {a['shape']:<12} M={a['M']:<5} auto {a['auto_us']:.1f} us vs {a['best_path']} "
                f"{a['best_us']:.1f} us (x{a['ratio']:.3f}, noise {100 * a['noise']:.1f}%)")
        if pruned:
            log(f"decode not timed at {len(pruned)} points (more than {args.prune_decode:g}x the fastest path at a "
                "smaller M of the shape): " + ", ".join(f"int{p['bits']} {p['shape']} M={p['M']}" for p in pruned[:8])
                + (" ..." if len(pruned) > 8 else ""))
        if vs_cublas:
            log("")
            log("auto vs cuBLAS bf16 at large M (cuBLAS time / auto time; targets: >= 0.90 at 2048, >= 0.95 from 4096):")
            for v in vs_cublas:
                log(f"  int{v['bits']} {v['shape']:<12} M={v['M']:<5} {v['auto_vs_cublas']:.3f}")
    if dequant:
        log("")
        log("dequant kernel alone (the dequantize op, (N, K) layout; bytes read + written; target >= 85% of copy "
            "on the 70B shapes):")
        for d in dequant:
            log(f"  int{d['bits']} {d['shape']:<12} {d['us']:9.1f} us {d['gbps']:7.0f} GB/s "
                f"{d['pct_copy_measured']:5.1f}% of measured copy, {d['pct_copy_nominal']:5.1f}% of 4.25 TB/s")
    return {"crossovers": crossovers, "suggested_sm90": suggestions, "auto_misses": auto_misses,
            "auto_vs_cublas": vs_cublas, "auto_verdicts": verdicts, "pruned": pruned}


def copy_line(copy: dict) -> str:
    extra = ""
    if copy.get("memcpy_graph_gbps"):
        extra = f"; cudaMemcpy in a graph (the old probe): {copy['memcpy_graph_gbps']:.0f} GB/s"
    return (f"HBM copy (SM kernel, read + write, {2 * copy['bytes'] / 2**30:.0f} GiB moved per call, median of "
            f"{copy['rounds']}): {copy['copy_gbps']:.0f} GB/s, spread {100 * copy['spread']:.1f}% "
            f"(nominal {NOMINAL_COPY_GBPS:.0f}){extra}")


def write_outputs(args, out: Path, docs: dict, summary: dict, log: Log, bench) -> None:
    for bits, doc in docs.items():
        bench.write_json(doc, out / f"dispatch_int{bits}{args.suffix}.json")
        why = plot(doc, out / f"dispatch_int{bits}{args.suffix}.png")
        if why:
            log(f"no PNG for int{bits}: {why}")
    (out / f"dispatch_summary{args.suffix}.json").write_text(json.dumps(summary, indent=1, allow_nan=False) + "\n")
    (out / f"dispatch_summary{args.suffix}.txt").write_text("\n".join(log.lines) + "\n")


# ------------------------------------------------------------------ synthetic timings (--dry-run)


def synthetic_time(impl: str, M: int, K: int, N: int, bits: int, act_order: bool) -> float | None:
    """A plausible H200-like time (us) for a path, or None where the path is 'unavailable'."""
    wbytes = K * N * bits / 8 + K // 128 * N * 2
    mma = 2.0 * M * K * N
    cublas = max(K * N * 2 / 3.9e6, mma / 650e6) + 6.0
    if impl == "cublas":
        return cublas
    if impl == "decode":
        return wbytes / 3.6e6 + mma / 160e6 + 4.0 + (2.0 if act_order else 0.0)
    if impl == "dense":
        return K * N * (2 + bits / 8) / 3.6e6 + cublas + 3.0
    if impl == "prefill":
        return None if M < 64 else max(wbytes / 3.0e6, mma / 600e6) + 8.0
    raise ValueError(impl)


def dry_run_timings(args, rng: random.Random) -> tuple:
    """timings[(shape, M, impl)] as the GPU part returns them, from synthetic_time with noise."""
    timings, pruned = {}, []
    for bits in args.bits:
        for name in args.shape_names:
            _, _, K, N = SHAPES[name]
            stop_decode = False
            for M in args.m_values:
                base = {i: synthetic_time(i, M, K, N, bits, args.act_order) for i in args.impls if i != "auto"}
                forced = {i: t for i, t in base.items() if i in FORCED and t is not None}
                if "auto" in args.impls:  # the "table": decode below 96, then prefill or dense
                    pick = "decode" if M < 96 else ("prefill" if base.get("prefill") and M < 1024 else "dense")
                    pick = pick if pick in forced else min(forced, key=forced.get, default=None)
                    base["auto"] = None if pick is None else forced[pick]
                for impl in args.impls:
                    key = (bits, name, M, impl)
                    if impl == "decode" and stop_decode:
                        mark_pruned(timings, pruned, key)
                        continue
                    t = base[impl]
                    if t is None:
                        timings[key] = {"status": "unavailable", "note": f"{impl}: no {impl} kernel (dry run)"}
                        continue
                    rounds = [t * (1 + rng.gauss(0, 0.004)) for _ in range(args.rounds)]
                    path = pick if impl == "auto" else (None if impl == "cublas" else impl)
                    timings[key] = {"status": "ok", "rounds_us": rounds, "path": path, "copies": 4, "calls": 64}
                if decode_lost(args, timings, bits, name, M):
                    stop_decode = True
    return timings, pruned


def dry_run(args) -> int:
    from swordfish_backend import bench

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = Log()
    rng = random.Random(args.seed)
    device = {"index": 0, "name": "dry run (synthetic)", "capability": "9.0", "sm_count": 132,
              "l2_bytes": 62914560, "memory_bytes": 150 << 30}
    ceilings = {"hbm_read_gbps": 4180.0, "hbm_read_bytes": 2 << 30, "mma_tflops": 700.0, "mma_shape": [8192] * 3}
    log(f"bench_dispatch --dry-run: synthetic timings, formats {args.bits}, act-order {args.act_order}, "
        f"shapes {args.shape_names}, M {args.m_values}, {args.rounds} rounds")
    copy = {"copy_gbps": 4250.0, "bytes": COPY_PROBE_BYTES, "rounds": args.rounds, "spread": 0.004,
            "method": "synthetic", "memcpy_graph_gbps": 2720.0}
    log(copy_line(copy))
    timings, pruned = ({}, []) if args.dequant_only else dry_run_timings(args, rng)
    docs = {}
    for bits in ([] if args.dequant_only else args.bits):
        wbytes = {n: bench.quantized_bytes(SHAPES[n][2], SHAPES[n][3], bits, 128, False, args.act_order)
                  for n in args.shape_names}
        mine = {(n, M, i): t for (b, n, M, i), t in timings.items() if b == bits}
        rows = build_rows(mine, args.shape_names, args.m_values, args.impls, wbytes, ceilings, bench)
        docs[bits] = make_doc(args, bits, rows, device, ceilings, bench, commit="dry-run", torch_version="n/a",
                              cuda_version=None)
        log("")
        log(bench.format_table(docs[bits]))
    dequant = []
    for b in ([] if args.no_dequant else args.bits):
        for n in args.shape_names:
            K, N = SHAPES[n][2], SHAPES[n][3]
            nbytes = K * N * b // 8 + K // 128 * N * 2 + K * N * 2
            dequant.append(dequant_record(n, K, N, b, args.act_order, nbytes / 3.7e6, nbytes, copy["copy_gbps"]))
    fields = report(args, docs, log, copy, dequant, pruned)
    summary = make_summary(args, device, "dry-run", copy, fields, dequant)
    write_outputs(args, out, docs, summary, log, bench)
    log.progress(f"dry run done; results in {out}")
    return 0


# ------------------------------------------------------------------ result documents


def make_doc(args, bits: int, rows: list, device: dict, ceilings: dict, bench, *, commit, torch_version,
             cuda_version) -> dict:
    models = sorted({SHAPES[n][0] for n in args.shape_names})
    config = {"models": models, "bits": bits, "group": 128, "dtype": args.dtype, "m": list(args.m_values),
              "impls": list(args.impls) + ["roofline"], "zero_points": False, "act_order": args.act_order,
              "deterministic": False}
    doc = bench.make_result(rows, device=device, config=config, ceilings=ceilings, commit=commit, rounds=args.rounds,
                            torch_version=torch_version, cuda_version=cuda_version)
    doc["timing"]["graph_ms"] = args.graph_ms
    doc["rounds"] = args.rounds
    return doc


def dequant_record(name, K, N, bits, act_order, us, nbytes, copy_gbps) -> dict:
    gbps = nbytes / us / 1e3
    return {"shape": name, "K": K, "N": N, "bits": bits, "act_order": act_order, "us": us, "bytes": nbytes,
            "gbps": gbps, "pct_copy_measured": 100 * gbps / copy_gbps, "pct_copy_nominal": 100 * gbps / NOMINAL_COPY_GBPS}


def make_summary(args, device, commit, copy, fields, dequant) -> dict:
    return {"schema": "swordfish-dispatch-sweep", "version": 1, "device": device, "commit": commit,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": "python benchmarks/bench_dispatch.py " + " ".join(args.argv),
            "config": {"shapes": args.shape_names, "bits": args.bits, "m": args.m_values, "dtype": args.dtype,
                       "group": 128, "act_order": args.act_order, "budget_ms": args.budget_ms,
                       "rounds": args.rounds, "graph_ms": args.graph_ms, "impls": args.impls,
                       "prune_decode": args.prune_decode, "quick": args.quick, "dry_run": args.dry_run},
            "copy_gbps": copy["copy_gbps"], "copy_probe": copy, **fields, "dequant": dequant}


# ------------------------------------------------------------------ GPU parts


def capture(calls: list, graph_ms: float, stream) -> tuple:
    """Warm up eagerly (errors surface here, before capture), size and capture one graph. (graph, calls)."""
    return _bench.capture_graph(calls, stream, lambda eager_us: graph_calls(eager_us, len(calls), graph_ms))


def measure_copy(device, rounds: int, graph_ms: float) -> dict:
    """HBM copy bandwidth, read + write bytes: an SM kernel (torch.neg over fp32) on two multi-GiB buffers,
    median over interleaved rounds; the graph-captured cudaMemcpy (the old probe) beside it."""
    import torch

    free, _ = torch.cuda.mem_get_info(device)
    nbytes = int(min(COPY_PROBE_BYTES, free // 6)) // 4096 * 4096
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_(-1, 1)
    dst = torch.empty_like(src)
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    graphs, calls = {}, {}
    for key, fn in (("kernel", functools.partial(torch.neg, src, out=dst)), ("memcpy", functools.partial(dst.copy_, src))):
        graphs[key], calls[key] = capture([fn], graph_ms, stream)
    ms = _bench.replay_rounds(graphs, max(rounds, 5))
    del graphs, src, dst
    torch.cuda.empty_cache()
    per_call = {k: [t * 1e3 / calls[k] for t in v] for k, v in ms.items()}
    s = _bench.round_stats(per_call["kernel"])
    return {"copy_gbps": 2 * nbytes / s["us"] / 1e3, "bytes": nbytes, "rounds": len(per_call["kernel"]),
            "spread": s["spread"], "method": "torch.neg(src, out=dst), fp32, CUDA-graph replays",
            "memcpy_graph_gbps": 2 * nbytes / statistics.median(per_call["memcpy"]) / 1e3}


def time_dequant(args, bench, ops, device, copy_gbps, log) -> list:
    import torch

    results = []
    gen = torch.Generator(device=device)
    gen.manual_seed(1)
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    for bits in args.bits:
        cfg = bench.Config(layers=[], m=[1], bits=bits, group=128, dtype=args.dtype, act_order=args.act_order)
        for name in args.shape_names:
            model, layer, K, N = SHAPES[name]
            w = bench.random_weight(K, N, cfg, device, gen)
            packed, scales, zeros, perm, _, group, cw = w.kernel_args()
            nbytes = packed.numel() * 4 + scales.numel() * 2 + N * K * 2 + (0 if perm is None else K * 4)
            copies = max(2, math.ceil(2 * l2 / nbytes))
            sets = [(packed, scales)] + [(packed.clone(), scales.clone()) for _ in range(copies - 1)]
            calls = [functools.partial(ops.dequantize, p, s, None, perm, bits, group, cw, K) for p, s in sets]
            us, _, _ = bench.time_calls(calls, device)
            results.append(dequant_record(name, K, N, bits, args.act_order, us, nbytes, copy_gbps))
            log.progress(f"dequant int{bits} {name}: {us:.1f} us, {results[-1]['gbps']:.0f} GB/s")
            del w, sets, calls, packed, scales
            torch.cuda.empty_cache()
    return results


def sweep(args, bench, ops, device, info, log) -> tuple:
    """Time every (bits, shape, M, path) interleaved; returns (timings keyed (bits, shape, M, impl), pruned)."""
    import torch
    import torch.nn.functional as F

    torch_dtype = getattr(torch, bench.DTYPES[args.dtype])
    gen = torch.Generator(device=device)
    gen.manual_seed(args.seed)
    l2 = info["l2_bytes"] or bench.L2_UNKNOWN
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    timings, pruned = {}, []
    total = len(args.bits) * len(args.shape_names) * len(args.m_values)
    done = 0
    for bits in args.bits:
        cfg = bench.Config(layers=[], m=[1], bits=bits, group=128, dtype=args.dtype, act_order=args.act_order,
                           seed=args.seed)
        for name in args.shape_names:
            model, layer, K, N = SHAPES[name]
            w = bench.random_weight(K, N, cfg, device, gen)
            packed, scales, zeros, perm, wbits, group, channelwise = w.kernel_args()
            wbytes = bench.quantized_bytes(K, N, bits, 128, zeros is not None, perm is not None)
            free = int(torch.cuda.mem_get_info(device)[0])
            nq = copies_for(wbytes, l2, free)
            qcopies = [(packed, scales, zeros)] + [
                (packed.clone(), scales.clone(), None if zeros is None else zeros.clone()) for _ in range(nq - 1)]
            dcopies = []
            if "cublas" in args.impls:
                nd = copies_for(K * N * 2, l2, free)
                dcopies = [torch.randn(N, K, generator=gen, device=device, dtype=torch.float32).mul_(0.02)
                           .to(torch_dtype) for _ in range(nd)]
            stop_decode = False
            for M in args.m_values:
                x = torch.randn(M, K, generator=gen, device=device, dtype=torch.float32).to(torch_dtype)
                calls = {}
                for impl in args.impls:
                    if impl == "decode" and stop_decode:
                        mark_pruned(timings, pruned, (bits, name, M, impl))
                    elif impl == "cublas":
                        calls[impl] = [functools.partial(F.linear, x, d) for d in dcopies]
                    else:
                        calls[impl] = [functools.partial(ops.gemm, x, p, s, z, perm, None, wbits, group, channelwise,
                                                         ops.PATHS[impl], 0) for p, s, z in qcopies]
                timed = bench.time_point(calls, stream, args.rounds, args.device, args.graph_ms * 1e3)
                timings.update({(bits, name, M, impl): t for impl, t in timed.items()})
                if decode_lost(args, timings, bits, name, M):
                    stop_decode = True
                del calls, x
                torch.cuda.empty_cache()  # the graphs' private pools (GBs at large M)
                done += 1
                line = ", ".join(f"{i} {statistics.median(timings[(bits, name, M, i)]['rounds_us']):.1f}"
                                 for i in args.impls if timings.get((bits, name, M, i), {}).get("status") == "ok")
                log.progress(f"{done}/{total} int{bits} {name} M={M}: {line}")
            del w, qcopies, dcopies, packed, scales, zeros, perm
            torch.cuda.empty_cache()
    return timings, pruned


def main(argv=None) -> int:
    args = parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.dry_run:
        return dry_run(args)
    import torch

    from swordfish_backend import bench, ops

    if not torch.cuda.is_available():
        print("bench_dispatch needs a CUDA device (--dry-run exercises the rest without one)", file=sys.stderr)
        return 2
    if not ops.has_extension():
        print(f"bench_dispatch needs the compiled extension: {ops.extension_error()}", file=sys.stderr)
        return 2
    bench.BUDGET_US = args.budget_ms * 1e3
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda", args.device)
    torch.cuda.set_device(device)
    log = Log()
    info = bench.device_info(args.device)
    log(f"bench_dispatch: {info['name']} (sm{info['capability'].replace('.', '')}, {info['sm_count']} SMs), "
        f"{args.dtype}, g128, formats {args.bits}, act-order {args.act_order}, shapes {args.shape_names}, "
        f"M {args.m_values}, paths {args.impls}, {args.rounds} interleaved rounds")

    copy = measure_copy(device, args.rounds, args.graph_ms)
    log(copy_line(copy))

    docs, pruned = {}, []
    if not args.dequant_only:
        torch_dtype = getattr(torch, bench.DTYPES[args.dtype])
        ceilings = bench.measure_ceilings(device, torch_dtype)
        log(f"HBM read (bf16 sum) {ceilings['hbm_read_gbps']:.0f} GB/s, dense {args.dtype} matmul "
            f"{ceilings['mma_tflops']:.0f} TFLOP/s")
        timings, pruned = sweep(args, bench, ops, device, info, log)
        for bits in args.bits:
            wbytes = {n: bench.quantized_bytes(SHAPES[n][2], SHAPES[n][3], bits, 128, False, args.act_order)
                      for n in args.shape_names}
            mine = {(n, M, i): t for (b, n, M, i), t in timings.items() if b == bits}
            rows = build_rows(mine, args.shape_names, args.m_values, args.impls, wbytes, ceilings, bench)
            docs[bits] = make_doc(args, bits, rows, info, ceilings, bench, commit=bench.git_commit(),
                                  torch_version=torch.__version__, cuda_version=torch.version.cuda)
            log("")
            log(bench.format_table(docs[bits]))

    dequant = [] if args.no_dequant else time_dequant(args, bench, ops, device, copy["copy_gbps"], log)
    fields = report(args, docs, log, copy, dequant, pruned)
    summary = make_summary(args, info, bench.git_commit(), copy, fields, dequant)
    write_outputs(args, out, docs, summary, log, bench)
    log.progress(f"done; results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
