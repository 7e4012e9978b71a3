#!/usr/bin/env python3
"""Decode-path benchmark: weight-stream bandwidth of path=1 against the HBM roofline and cuBLAS.

    python benchmarks/bench_decode.py                       # Llama-3 8B/70B layers, int4 g128 bf16, M 1..128
    python benchmarks/bench_decode.py --bits 4 8 --M 1 16 --out $OUT/decode.json

Each measurement is the median of many CUDA-graph replays; one graph holds
back-to-back calls cycling through enough weight copies that the weights come
from HBM, not from L2. Each point reports the median of --rounds rounds
(default 3) with its min and max. The M values of one (shape, bits) are timed
in ascending M, all rounds of one M before the next (--order by-m, the
default), after a --settle pause (default 0.5 s) that lets the board's power
controller recover from the previous shape's heaviest point: on the H200 an
M = 128 decode or cuBLAS point drives the board to its 700 W cap, the SM clock
then drops to 1.2-1.9 GHz for a while, and a memory-bound M = 1 point timed
right after reads up to 1.2x slower than the same kernel timed in an M = 1
stream (benchmarks/RESULTS.md, "Decode").
--order interleaved times M = 1, 16, ..., then again (the order before
2026-12-03-c), which spreads a slow spell over every M instead.

Reported per (shape, M): microseconds per call, the weight stream (packed words + scales [+ zero points]) in TB/s, that as a
fraction of 4.18 TB/s and of the HBM read ceiling measured in this run (a large
bf16 sum), cuBLAS bf16 (torch.nn.functional.linear) on the same shape,
timed the same way, and the time over this run's M = 1 time of the same
shape (x_M1: the issue's targets are <= 1.15 at M = 16, <= 1.3 at M = 32).
With --read-floor, also the time the ceiling's own method takes at this size
(a bf16 sum of the same number of bytes over as many rotating buffers,
graph-replayed back to back) and that time over ours (%read). torch's
reduction is a loose floor at layer sizes (on the H200 it is slower than our
decode there; benchmarks/RESULTS.md gives a plain streaming read's times, the
tighter floor).
Ratios are only meaningful within one run.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from swordfish_backend import format as fmt
from swordfish_backend import ops
from swordfish_backend.bench import time_calls

HBM_NOMINAL_TBPS = 4.18  # H200 read ceiling measured 2026-12-02 (shared/GPU.md)
SHAPES = {
    "8b_qkv": (4096, 6144), "8b_o": (4096, 4096), "8b_gate_up": (4096, 28672), "8b_down": (14336, 4096),
    "70b_qkv": (8192, 10240), "70b_o": (8192, 8192), "70b_gate_up": (8192, 57344), "70b_down": (28672, 8192),
}
PATH_DECODE = 1


def time_graph(calls):
    """Median microseconds per call over CUDA-graph replays of `calls` cycled back to back
    (the same timer as `swordfish bench`)."""
    return time_calls(calls, torch.cuda.current_device())[0]


def hbm_read_tbps():
    free, _ = torch.cuda.mem_get_info()
    nbytes = int(min(4 << 30, free // 8)) // 4096 * 4096
    buf = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    us = time_graph([buf.sum])
    del buf
    torch.cuda.empty_cache()
    return nbytes / us / 1e6


def read_floor_us(nbytes, copies, rounds):
    """Median microseconds of a bf16 sum over `nbytes`, cycling through `copies` buffers (the ceiling's
    method at this size: one reduction kernel per call, graph-replayed back to back)."""
    bufs = [torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1) for _ in range(copies)]
    us = statistics.median(time_graph([b.sum for b in bufs]) for _ in range(rounds))
    del bufs
    torch.cuda.empty_cache()
    return us


def copies_for(nbytes):
    l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0) or (60 << 20)
    free, _ = torch.cuda.mem_get_info()
    return int(max(2, min(math.ceil(3 * l2 / nbytes), 24, (free // 4) // max(nbytes, 1))))


def make_weight(K, N, bits, group, dtype, zeros, gen):
    q = torch.randint(0, 1 << bits, (K, N), generator=gen, device="cuda", dtype=torch.int32)
    packed = fmt.pack_reference(q, bits)
    scales = (torch.rand(K // group, N, generator=gen, device="cuda") * 0.01 + 0.001).to(dtype)
    z = (torch.randn(K // group, N, generator=gen, device="cuda") * 0.01).to(dtype) if zeros else None
    return packed, scales, z


def git_commit():
    """The measured library's commit (see swordfish_backend.bench.git_commit)."""
    from swordfish_backend import bench

    return bench.git_commit()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--M", nargs="+", type=int, default=[1, 16, 32, 64, 128])
    ap.add_argument("--bits", nargs="+", type=int, default=[4])
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--zeros", action="store_true", help="with folded zero points")
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--no-cublas", action="store_true")
    ap.add_argument("--rounds", type=int, default=3, help="timing rounds per point (default 3)")
    ap.add_argument("--order", choices=["by-m", "interleaved"], default="by-m",
                    help="by-m: all rounds of one M, ascending M (default); interleaved: M = 1, 16, ..., then again")
    ap.add_argument("--settle", type=float, default=0.5,
                    help="seconds of idle before each (shape, bits), for the power controller (default 0.5)")
    ap.add_argument("--read-floor", action="store_true",
                    help="also time a bf16 sum of the weight's byte count (per shape and bits)")
    ap.add_argument("--out", help="write the JSON records here")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"--rounds must be >= 1, got {args.rounds}")
    if args.settle < 0:
        ap.error(f"--settle must be >= 0, got {args.settle}")
    if not torch.cuda.is_available() or not ops.has_extension():
        sys.exit(f"needs a CUDA device and the extension ({ops.extension_error()})")
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    dev = torch.cuda.get_device_properties(torch.cuda.current_device())
    commit = git_commit()
    ceiling = hbm_read_tbps()
    print(f"# {dev.name}, {dev.multi_processor_count} SMs; HBM read ceiling measured now: {ceiling:.3f} TB/s "
          f"(nominal {HBM_NOMINAL_TBPS})", flush=True)
    gen = torch.Generator(device="cuda").manual_seed(0)
    records = []
    hdr = (f"{'shape':>12} {'bits':>4} {'M':>4} {'us':>9} {'TB/s':>6} {'%4.18':>6} {'%ceil':>6} {'x_M1':>5} "
           f"{'cublas_us':>9} {'x_cublas':>8} {'spread':>6}"
           + (f" {'read_us':>8} {'%read':>6}" if args.read_floor else ""))
    print(hdr)
    for name in args.shapes:
        K, N = SHAPES[name]
        for bits in args.bits:
            wbytes = K * N * bits // 8 + (K // args.group) * N * 2 * (2 if args.zeros else 1)
            copies = [make_weight(K, N, bits, args.group, dtype, args.zeros, gen) for _ in range(copies_for(wbytes))]
            dense = None
            if not args.no_cublas:
                dn = copies_for(K * N * 2)
                dense = [torch.randn(N, K, device="cuda", dtype=dtype, generator=gen) for _ in range(dn)]
            read_us = read_floor_us(wbytes, len(copies), args.rounds) if args.read_floor else None
            # Every M's calls first, then the rounds (--order).
            xs = {M: torch.randn(M, K, device="cuda", dtype=dtype, generator=gen) for M in args.M}
            calls = {
                M: [(lambda x=x, p=p, s=s, z=z: ops.gemm(x, p, s, z, None, None, bits, args.group, False, PATH_DECODE,
                                                         int(args.deterministic)))
                    for p, s, z in copies]
                for M, x in xs.items()
            }
            rounds = {M: [] for M in args.M}
            cublas_rounds = {M: [] for M in args.M}
            if args.order == "by-m":
                schedule = [M for M in sorted(args.M) for _ in range(args.rounds)]
            else:
                schedule = [M for _ in range(args.rounds) for M in args.M]
            torch.cuda.synchronize()
            time.sleep(args.settle)
            for M in schedule:
                rounds[M].append(time_graph(calls[M]))
                if dense:
                    cublas_rounds[M].append(time_graph([lambda x=xs[M], w=w: F.linear(x, w) for w in dense]))
            m1_us = None
            for M in args.M:
                us = statistics.median(rounds[M])
                cublas_us = statistics.median(cublas_rounds[M]) if dense else None
                tbps = wbytes / us / 1e6
                if M == 1:
                    m1_us = us
                to_m1 = us / m1_us if m1_us else None
                rec = {
                    "shape": name, "K": K, "N": N, "M": M, "bits": bits, "group_size": args.group,
                    "dtype": args.dtype, "zeros": args.zeros, "deterministic": args.deterministic,
                    "path": "decode", "us": us, "us_min": min(rounds[M]), "us_max": max(rounds[M]),
                    "rounds_us": rounds[M], "order": args.order, "cublas_us": cublas_us, "weight_bytes": wbytes,
                    "weight_TBps": tbps, "frac_of_4.18": tbps / HBM_NOMINAL_TBPS, "hbm_read_TBps": ceiling,
                    "frac_of_measured_ceiling": tbps / ceiling, "ratio_to_m1": to_m1, "copies": len(copies),
                    "read_floor_us": read_us, "frac_of_read_floor": read_us / us if read_us else None,
                    "commit": commit,
                    "device": dev.name, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                }
                records.append(rec)
                cub = f"{cublas_us:9.1f} {cublas_us / us:8.2f}" if cublas_us else f"{'-':>9} {'-':>8}"
                m1 = f"{to_m1:5.2f}" if to_m1 else f"{'-':>5}"
                spread = max(rounds[M]) / min(rounds[M])
                print(f"{name:>12} {bits:>4} {M:>4} {us:9.2f} {tbps:6.3f} {100 * tbps / HBM_NOMINAL_TBPS:6.1f} "
                      f"{100 * tbps / ceiling:6.1f} {m1} {cub} {spread:6.3f}"
                      + (f" {read_us:8.2f} {100 * read_us / us:6.1f}" if read_us else ""), flush=True)
            del calls, xs
            del copies, dense
            torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"records": records, "hbm_read_TBps": ceiling, "commit": commit}, f, indent=1)
        print(f"# wrote {args.out}")


if __name__ == "__main__":
    main()
