"""Would the dense tier gain from dequantizing in column chunks small enough to stay in L2?

A torch-only proxy, run before building it: `scratch.copy_(w_int8)` stands for the dequant pass
(reads 1 byte, writes 2 bytes per weight, like the int8 dequant kernel) and `torch.mm` for the
cuBLAS GEMM. Per shape and M it times, as median CUDA-event times over rotating weight copies:

  cublas   torch.mm on a ready bf16 weight (the ceiling)
  full     convert the whole weight into a (N, K) scratch, then one GEMM (today's dense tier)
  cNN      for each chunk of NN MB of bf16 weight: convert the chunk into one reused scratch, then
           the GEMM of that chunk's output columns

    python benchmarks/experiments/dense_chunk_proxy.py [--m 4096 8192] [--mb 8 16 24 32 48]
"""

from __future__ import annotations

import argparse
import statistics

import torch

SHAPES = {"8b.qkv": (4096, 6144), "8b.o": (4096, 4096), "8b.gate_up": (4096, 28672), "8b.down": (14336, 4096),
          "70b.qkv": (8192, 10240), "70b.o": (8192, 8192), "70b.gate_up": (8192, 57344), "70b.down": (28672, 8192)}


def time_us(fn, reps: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--mb", type=int, nargs="+", default=[8, 16, 24, 32, 48])
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES))
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    print(f"{'shape':12} {'M':>5} {'cublas':>9} {'full':>9} " + " ".join(f"{'c' + str(mb):>9}" for mb in args.mb)
          + "   (us; then cublas / each)")
    for name in args.shapes:
        K, N = SHAPES[name]
        copies = max(1, min(3, int(2e9 // (K * N))))
        w8 = [torch.randint(-128, 127, (N, K), dtype=torch.int8, device=dev) for _ in range(copies)]
        wb = [w.to(torch.bfloat16) for w in w8]
        scratch = torch.empty(N, K, dtype=torch.bfloat16, device=dev)
        for M in args.m:
            x = torch.randn(M, K, dtype=torch.bfloat16, device=dev)
            y = torch.empty(M, N, dtype=torch.bfloat16, device=dev)
            it = [0]

            def nxt() -> int:
                it[0] = (it[0] + 1) % copies
                return it[0]

            def cublas() -> None:
                torch.mm(x, wb[nxt()].t(), out=y)

            def full() -> None:
                scratch.copy_(w8[nxt()])
                torch.mm(x, scratch.t(), out=y)

            res = {"cublas": time_us(cublas, args.reps), "full": time_us(full, args.reps)}
            for mb in args.mb:
                nc = max(128, (mb << 20) // (2 * K) // 128 * 128)
                bounds = [(n0, min(N, n0 + nc)) for n0 in range(0, N, nc)]
                outs = [torch.empty(M, b - a, dtype=torch.bfloat16, device=dev) for a, b in bounds]

                def chunked(bounds=bounds, outs=outs) -> None:
                    w = w8[nxt()]
                    for (a, b), o in zip(bounds, outs):
                        s = scratch[: b - a]
                        s.copy_(w[a:b])
                        torch.mm(x, s.t(), out=o)

                res[f"c{mb}"] = time_us(chunked, args.reps)
            cols = " ".join(f"{res['c' + str(mb)]:9.1f}" for mb in args.mb)
            ratios = " ".join(f"{res['cublas'] / res[k]:.3f}" for k in ["full"] + [f"c{mb}" for mb in args.mb])
            print(f"{name:12} {M:5d} {res['cublas']:9.1f} {res['full']:9.1f} {cols}   {ratios}", flush=True)
            del x, y


if __name__ == "__main__":
    main()
