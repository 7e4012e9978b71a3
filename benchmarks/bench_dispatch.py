"""The dispatcher's M sweep: decode (forced), dense (forced), auto and cuBLAS bf16 per shape, the
measured decode/dense crossovers that the sm90 table (kernels/dispatch/heuristics_sm90.hpp) is
written from, and the dense tier's dequant kernel alone against the HBM copy bandwidth.

    python benchmarks/bench_dispatch.py --out benchmarks/results/h200            # everything, ~3-4 min
    python benchmarks/bench_dispatch.py --shapes 70b_o,70b_down --m 128,256,512,1024 --formats int4
    ncu --clock-control none -k regex:dequant_kernel -c 1 \
        --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
        python benchmarks/bench_dispatch.py --dequant-only --shapes 70b_o --formats int4 --out /tmp/ncu

Timing is the house method (swordfish_backend.bench.time_calls): CUDA-graph replays of
back-to-back calls over rotating weight copies totalling > 2x L2, median replay / calls. Ratios
are taken within this run only.

Writes under --out (flat, at most 8 files, as the device tool returns them):
    dispatch_int4.json / dispatch_int8.json   the sweep rows (swordfish-bench schema, validated)
    dispatch_int4.png  / dispatch_int8.png    time vs M per path (log-x), one panel per shape
    dispatch_summary.json                     crossovers, suggested table, dequant GB/s, checks
    dispatch_summary.txt                      everything printed
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from pathlib import Path

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
IMPLS = ("auto", "decode", "dense", "cublas")
NOMINAL_COPY_GBPS = 4250.0  # shared/GPU.md: HBM copy (read + write) on this H200
AUTO_SLACK = 1.03           # issue 4: the dispatcher's choice within 3% of the fastest path


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="all", help=f"comma list of {', '.join(SHAPES)} (default all)")
    ap.add_argument("--formats", default="int4,int8", help="comma list of int4, int8 (group 128, bf16)")
    ap.add_argument("--m", default=",".join(map(str, M_SWEEP)), help="comma list of M values")
    ap.add_argument("--act-order", action="store_true", help="act-order weights (the table's act_order key)")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    ap.add_argument("--no-dequant", action="store_true", help="skip timing the dequant kernel alone")
    ap.add_argument("--dequant-only", action="store_true",
                    help="time only the dequant kernel (e.g. under ncu for the shared-memory bank-conflict counters)")
    ap.add_argument("--budget-ms", type=float, default=30.0,
                    help="GPU time of replays per measurement (bench.BUDGET_US; default 30 ms)")
    ap.add_argument("--out", default="benchmarks/results/h200", help="output folder")
    ap.add_argument("--device", type=int, default=0)
    args = ap.parse_args(argv)
    args.shape_names = list(SHAPES) if args.shapes == "all" else [s.strip() for s in args.shapes.split(",") if s]
    bad = [s for s in args.shape_names if s not in SHAPES]
    if bad:
        ap.error(f"unknown shape(s) {bad}; choose from {', '.join(SHAPES)}")
    args.bits = []
    for f in (f.strip() for f in args.formats.split(",") if f.strip()):
        if f not in ("int4", "int8"):
            ap.error(f"--formats takes int4 and/or int8, got {f!r}")
        args.bits.append(int(f[3:]))
    args.m_values = sorted({int(m) for m in args.m.split(",") if m.strip()})
    if not args.m_values or args.m_values[0] < 1:
        ap.error("--m needs positive integers")
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


def series(rows: list, model: str, layer: str, impl: str) -> dict:
    return {r["M"]: r["us"] for r in rows
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


def auto_check(rows: list, model: str, layer: str) -> list:
    """(M, auto us, best us, best path, ratio) wherever auto is more than 3% slower than the best path."""
    auto = series(rows, model, layer, "auto")
    paths = {p: series(rows, model, layer, p) for p in ("decode", "dense", "prefill")}
    bad = []
    for M, us in sorted(auto.items()):
        cands = [(t[M], p) for p, t in paths.items() if M in t]
        if not cands:
            continue
        best_us, best_path = min(cands)
        if us > AUTO_SLACK * best_us:
            bad.append({"M": M, "auto_us": us, "best_us": best_us, "best_path": best_path, "ratio": us / best_us})
    return bad


def suggest(crossovers: list, bits: int, act_order: bool) -> dict:
    """Table values from the measured crossovers: the smallest over shapes, per K-heavy class."""
    out = {}
    for heavy in (False, True):
        found = [c for c in crossovers if c["bits"] == bits and c["k_heavy"] == heavy and c["m"] is not None]
        key = "act_order" if act_order else f"int{bits}" + ("_k_heavy" if heavy else "")
        if act_order and heavy:
            continue  # act-order has one key (N <= 2K shapes); K-heavy shapes qualify too
        if not found:
            out[key] = {"value": None, "from": "no shape crossed over in the sweep"}
            continue
        best = min(found, key=lambda c: c["m"])
        out[key] = {"value": best["m"], "interpolated": best["interpolated"],
                    "from": ", ".join(f"{c['shape']}={c['m']}" for c in found)}
    return out


# ------------------------------------------------------------------ GPU parts


def measure_copy_gbps(device, time_calls) -> float:
    import torch

    free, _ = torch.cuda.mem_get_info(device)
    n = int(min(2 << 30, free // 8)) // 4096 * 4096
    src = torch.empty(n // 2, dtype=torch.bfloat16, device=device).uniform_(-1, 1)
    dst = torch.empty_like(src)
    us, _, _ = time_calls([functools.partial(dst.copy_, src)], device)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n / us / 1e3


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
            gbps = nbytes / us / 1e3
            results.append({"shape": name, "K": K, "N": N, "bits": bits, "act_order": args.act_order, "us": us,
                            "bytes": nbytes, "gbps": gbps, "pct_copy_measured": 100 * gbps / copy_gbps,
                            "pct_copy_nominal": 100 * gbps / NOMINAL_COPY_GBPS})
            log.progress(f"dequant int{bits} {name}: {us:.1f} us, {gbps:.0f} GB/s")
            del w, sets, calls, packed, scales
            torch.cuda.empty_cache()
    return results


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    from swordfish_backend import bench, ops
    from swordfish_backend.presets import Layer

    if not torch.cuda.is_available():
        print("bench_dispatch needs a CUDA device", file=sys.stderr)
        return 2
    if not ops.has_extension():
        print(f"bench_dispatch needs the compiled extension: {ops.extension_error()}", file=sys.stderr)
        return 2
    if hasattr(bench, "BUDGET_US"):
        bench.BUDGET_US = args.budget_ms * 1e3
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda", args.device)
    torch.cuda.set_device(device)
    log = Log()
    props = torch.cuda.get_device_properties(device)
    log(f"bench_dispatch: {props.name} (sm{props.major}{props.minor}, {props.multi_processor_count} SMs), "
        f"{args.dtype}, g128, formats {args.bits}, act-order {args.act_order}, shapes {args.shape_names}, "
        f"M {args.m_values}")

    copy_gbps = measure_copy_gbps(device, bench.time_calls)
    log(f"HBM copy (read + write) measured now: {copy_gbps:.0f} GB/s (nominal {NOMINAL_COPY_GBPS:.0f})")

    layers = [(SHAPES[n][0], Layer(SHAPES[n][1], SHAPES[n][2], SHAPES[n][3])) for n in args.shape_names]
    name_of = {(SHAPES[n][0], SHAPES[n][1]): n for n in args.shape_names}
    docs, crossovers, auto_misses, vs_cublas = {}, [], [], []
    for bits in ([] if args.dequant_only else args.bits):
        cfg = bench.Config(layers=layers, m=args.m_values, bits=bits, group=128, dtype=args.dtype, impls=IMPLS,
                           act_order=args.act_order, device_index=args.device,
                           models=sorted({m for m, _ in layers}))
        steps = len(layers) * len(args.m_values) * len(IMPLS)
        done = [0]

        class _Progress:
            def step(self, label):
                done[0] += 1
                if done[0] % 16 == 0 or done[0] == steps:
                    log.progress(f"int{bits}: {done[0]}/{steps} {label}")

        doc = bench.run(cfg, _Progress())
        doc["commit"] = bench.git_commit()
        docs[bits] = doc
        bench.write_json(doc, out / f"dispatch_int{bits}.json")
        why = bench.plot(doc, out / f"dispatch_int{bits}.png")
        if why:
            log(f"no PNG for int{bits}: {why}")
        log("")
        log(bench.format_table(doc))
        rows = doc["rows"]
        for model, layer in layers:
            K, N = layer.K, layer.N
            c = crossover(series(rows, model, layer.name, "decode"), series(rows, model, layer.name, "dense"))
            c.update(shape=name_of[(model, layer.name)], K=K, N=N, bits=bits, k_heavy=K >= 2 * N,
                     act_order=args.act_order)
            crossovers.append(c)
            for miss in auto_check(rows, model, layer.name):
                auto_misses.append(dict(miss, shape=c["shape"], bits=bits))
            cub = series(rows, model, layer.name, "cublas")
            auto = series(rows, model, layer.name, "auto")
            for M in (1024, 2048, 4096, 8192):
                if M in cub and M in auto:
                    vs_cublas.append({"shape": c["shape"], "bits": bits, "M": M, "auto_vs_cublas": cub[M] / auto[M]})

    dequant = [] if args.no_dequant else time_dequant(args, bench, ops, device, copy_gbps, log)

    # ---------------------------------------------------------------- summary
    suggestions = {}
    if not args.dequant_only:
        log("")
        log("decode -> dense crossover per shape (smallest swept M from which dense stays faster):")
        log(f"{'shape':<12}{'K':>7}{'N':>7}  fmt   {'crossover':>9}  {'(after M)':>9}  {'interp':>7}  note")
        for c in crossovers:
            log(f"{c['shape']:<12}{c['K']:>7}{c['N']:>7}  int{c['bits']}  {str(c['m']):>9}  {str(c['below']):>9}  "
                f"{str(c['interpolated']):>7}  {c['note'] or ('K-heavy' if c['k_heavy'] else '')}")
        suggestions = {f"int{b}": suggest(crossovers, b, args.act_order) for b in args.bits}
        log("")
        log("suggested dense_vs_decode values for heuristics_sm90.hpp (smallest crossover over the shapes; "
            "write each with this command and the per-shape list):")
        for fmt_name, keys in suggestions.items():
            for key, v in keys.items():
                log(f"  {key:<14} = {v['value']}   ({v['from']})")
        log("")
        if auto_misses:
            log(f"auto more than {100 * (AUTO_SLACK - 1):.0f}% slower than the best path at {len(auto_misses)} points:")
            for a in auto_misses:
                log(f"  int{a['bits']} {a['shape']:<12} M={a['M']:<5} auto {a['auto_us']:.1f} us vs {a['best_path']} "
                    f"{a['best_us']:.1f} us (x{a['ratio']:.2f})")
        else:
            log(f"auto within {100 * (AUTO_SLACK - 1):.0f}% of the best path at every swept point")
        if vs_cublas:
            log("")
            log("auto vs cuBLAS bf16 at large M (cuBLAS time / auto time; targets: >= 0.90 at 2048, >= 0.95 from 4096):")
            for v in vs_cublas:
                log(f"  int{v['bits']} {v['shape']:<12} M={v['M']:<5} {v['auto_vs_cublas']:.3f}")
    if dequant:
        log("")
        log(f"dequant kernel alone (bytes read + written; target >= 85% of copy on the 70B shapes):")
        for d in dequant:
            log(f"  int{d['bits']} {d['shape']:<12} {d['us']:9.1f} us {d['gbps']:7.0f} GB/s "
                f"{d['pct_copy_measured']:5.1f}% of measured copy, {d['pct_copy_nominal']:5.1f}% of 4.25 TB/s")

    summary = {"schema": "swordfish-dispatch-sweep", "version": 1, "device": bench.device_info(args.device),
               "commit": bench.git_commit(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "command": "python benchmarks/bench_dispatch.py " + " ".join(sys.argv[1:] if argv is None else argv),
               "config": {"shapes": args.shape_names, "bits": args.bits, "m": args.m_values, "dtype": args.dtype,
                          "group": 128, "act_order": args.act_order, "budget_ms": args.budget_ms},
               "copy_gbps": copy_gbps, "crossovers": crossovers, "suggested_sm90": suggestions,
               "auto_misses": auto_misses, "auto_vs_cublas": vs_cublas, "dequant": dequant}
    (out / "dispatch_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "dispatch_summary.txt").write_text("\n".join(log.lines) + "\n")
    log.progress(f"done; results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
