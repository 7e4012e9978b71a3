#!/usr/bin/env python3
"""How fast can one kernel per call read N bytes, timed the way bench_decode.py times decode?

For each byte count (the int4 / int8 g128 weight streams of the eight Llama-3 layers, and a 4 GiB
probe), rotating buffers so that the bytes come from HBM, graph-replayed back to back
(bench_decode.time_graph):

- torch: a bf16 `sum` (the method of the 4.18 TB/s ceiling);
- triton: a plain streaming kernel, one program per (SM x occupancy) slot, 16-byte loads, the
  best of a few grid sizes;
- launch: a one-element add (the period of a graph of back-to-back tiny kernels).

Prints microseconds and TB/s per byte count. Needs a CUDA device and triton.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_decode import SHAPES, copies_for, read_floor_us, time_graph  # noqa: E402


def triton_reader():
    import triton
    import triton.language as tl

    @triton.jit
    def read_kernel(src, dst, n_vec, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        nprog = tl.num_programs(0)
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for start in range(pid * BLOCK, n_vec, nprog * BLOCK):
            offs = start + tl.arange(0, BLOCK)
            acc ^= tl.load(src + offs, mask=offs < n_vec, other=0, eviction_policy="evict_first")
        tl.store(dst + pid, tl.xor_sum(acc, 0))

    def launch(buf, out, grid, block):
        read_kernel[(grid,)](buf, out, buf.numel(), BLOCK=block, num_warps=4)

    return launch


def time_us(calls, rounds):
    return statistics.median(time_graph(calls) for _ in range(rounds))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA device")
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    sms = props.multi_processor_count
    sizes = []
    for name, (K, N) in SHAPES.items():
        for bits in (4, 8):
            sizes.append((f"{name} int{bits}", K * N * bits // 8 + (K // 128) * N * 2))
    sizes.append(("probe 4 GiB", 4 << 30))
    launch = triton_reader()
    one = torch.zeros(1, device="cuda")
    launch_us = time_us([lambda: one.add_(1.0)], args.rounds)
    print(f"# {props.name}, {sms} SMs; back-to-back one-element kernel period: {launch_us:.2f} us")
    print(f"{'bytes of':>18} {'MB':>8} {'torch_us':>9} {'TB/s':>6} {'triton_us':>9} {'TB/s':>6} {'grid':>6}")
    records = []
    for label, nbytes in sizes:
        nbytes = nbytes // 64 * 64
        copies = copies_for(nbytes)
        torch_us = read_floor_us(nbytes, copies, args.rounds)  # bench_decode.py --read-floor's method
        bufs = [torch.randint(-2**31, 2**31 - 1, (nbytes // 4,), device="cuda", dtype=torch.int32)
                for _ in range(copies)]
        best = None
        for per_sm in (2, 4, 8, 16):
            grid = sms * per_sm
            out = torch.empty(grid, device="cuda", dtype=torch.int32)
            us = time_us([lambda v=v: launch(v, out, grid, 1024) for v in bufs], args.rounds)
            if best is None or us < best[0]:
                best = (us, grid)
        rec = {"label": label, "bytes": nbytes, "copies": copies, "torch_sum_us": torch_us,
               "triton_us": best[0], "triton_grid": best[1], "launch_period_us": launch_us}
        records.append(rec)
        print(f"{label:>18} {nbytes / 1e6:8.2f} {torch_us:9.2f} {nbytes / torch_us / 1e6:6.3f} "
              f"{best[0]:9.2f} {nbytes / best[0] / 1e6:6.3f} {best[1]:6d}", flush=True)
        del bufs
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": props.name, "records": records}, f, indent=1)


if __name__ == "__main__":
    main()
