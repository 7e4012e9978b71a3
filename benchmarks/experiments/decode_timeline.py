#!/usr/bin/env python3
"""Where the decode path's time per call goes: a kernel timeline of CUDA-graph replays.

    python benchmarks/experiments/decode_timeline.py --shapes 8b_qkv 70b_gate_up --M 1 16
    python benchmarks/experiments/decode_timeline.py --path prefill --shapes 8b_qkv --M 64 512

`--path prefill` times the sm90 prefill path the same way (its gemm, split-K reduce and act-order
gather kernels), e.g. to see where a split plan's extra time goes (docs/PREFILL.md).

Captures the same graph `bench_decode.py` times (back-to-back calls on rotating weight
copies), replays it under torch.profiler (CUPTI records every kernel of a replay) and prints,
per shape and M: the period per call (first kernel start to last kernel end over the calls),
the median duration of each kernel kind (prep, gemm, ...), and the median gap from one kernel's
end to the next one's start by transition (negative: the two overlapped, as programmatic
dependent launch allows). cuBLAS bf16 on the same shape runs the same way for reference. The
floor column is the weight stream at 4.18 TB/s. Timings under the profiler are slightly
inflated; compare the rows of one run, not with bench_decode.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_decode import PATH_DECODE, SHAPES, copies_for, make_weight  # noqa: E402

from swordfish_backend import ops  # noqa: E402
from swordfish_backend.bench import capture_graph  # noqa: E402

HBM_TBPS = 4.18


def short(name: str) -> str:
    for key in ("prep_kernel", "gather_kernel", "reduce_kernel", "swap_kernel", "gemm_kernel", "dequant"):
        if key in name:
            return key.replace("_kernel", "")
    return "cublas:" + name.split("(")[0].split("<")[0][-28:]


def kernels_of_replays(graph, replays: int) -> list[tuple[str, float, float]]:
    """(kind, start_us, end_us) of every kernel the profiled replays ran, in start order."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    os.unlink(path)
    ev = [(short(e["name"]), float(e["ts"]), float(e["ts"]) + float(e["dur"]))
          for e in trace.get("traceEvents", []) if e.get("cat") == "kernel"]
    return sorted(ev, key=lambda e: e[1])


def summarize(ev, calls: int) -> dict:
    dur: dict[str, list] = {}
    gap: dict[str, list] = {}
    for i, (k, s, e) in enumerate(ev):
        dur.setdefault(k, []).append(e - s)
        if i:
            pk, _, pe = ev[i - 1]
            gap.setdefault(f"{pk}->{k}", []).append(s - pe)
    period = (ev[-1][2] - ev[0][1]) / calls if ev else float("nan")
    return {"period_us": period, "kernels": len(ev),
            "dur_us": {k: statistics.median(v) for k, v in dur.items()},
            "gap_us": {k: statistics.median(v) for k, v in gap.items()}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="+", default=["8b_qkv", "8b_o", "70b_o", "70b_gate_up"], choices=list(SHAPES))
    ap.add_argument("--M", nargs="+", type=int, default=[1])
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--replays", type=int, default=3)
    ap.add_argument("--calls", type=int, default=48, help="calls per graph")
    ap.add_argument("--path", choices=("decode", "prefill"), default="decode", help="the forced Swordfish path")
    ap.add_argument("--deterministic", action="store_true", help="the Swordfish calls in deterministic mode")
    ap.add_argument("--no-cublas", action="store_true")
    ap.add_argument("--out", help="JSON output")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or not ops.has_extension():
        sys.exit(f"needs a CUDA device and the extension ({ops.extension_error()})")
    gen = torch.Generator(device="cuda").manual_seed(0)
    dtype = torch.bfloat16
    stream = torch.cuda.Stream()
    out = []
    print(f"{'shape':>12} {'M':>4} {'path':>7} {'floor':>6} {'period':>7}  kernel durations | gaps (end -> next start)")
    for name in args.shapes:
        K, N = SHAPES[name]
        wbytes = K * N * args.bits // 8 + (K // 128) * N * 2
        copies = [make_weight(K, N, args.bits, 128, dtype, False, gen) for _ in range(copies_for(wbytes))]
        dense = [] if args.no_cublas else [torch.randn(N, K, device="cuda", dtype=dtype, generator=gen)
                                           for _ in range(copies_for(K * N * 2))]
        for M in args.M:
            x = torch.randn(M, K, device="cuda", dtype=dtype, generator=gen)
            path_id = PATH_DECODE if args.path == "decode" else ops.PATH_PREFILL
            runs = {
                args.path: ([lambda p=p, s=s: ops.gemm(x, p, s, None, None, None, args.bits, 128, False, path_id,
                                                           int(args.deterministic))
                             for p, s, _ in copies], wbytes),
            }
            if dense:
                runs["cublas"] = ([lambda w=w: F.linear(x, w) for w in dense], K * N * 2)
            for path, (calls, nbytes) in runs.items():
                graph, n = capture_graph(calls, stream, lambda _us: args.calls)
                for _ in range(3):
                    graph.replay()
                s = summarize(kernels_of_replays(graph, args.replays), n * args.replays)
                floor = nbytes / HBM_TBPS / 1e6
                durs = " ".join(f"{k}={v:.2f}" for k, v in s["dur_us"].items())
                gaps = " ".join(f"{k}={v:+.2f}" for k, v in s["gap_us"].items())
                print(f"{name:>12} {M:>4} {path:>7} {floor:6.2f} {s['period_us']:7.2f}  {durs} | {gaps}", flush=True)
                out.append({"shape": name, "K": K, "N": N, "M": M, "bits": args.bits, "path": path,
                            "floor_us": floor, **s})
                del graph
        del copies, dense
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
