// Crossover table for Hopper (sm90: H100, H200).
//
// Every value is MEASURED on the H200 (132 SMs) with
//
//   python benchmarks/bench_dispatch.py --bits 4 8 --m 1,16,24,...,8192 --rounds 5 --out <dir>
//   python benchmarks/bench_dispatch.py --bits 4 --act-order --shapes 8b_o,70b_o,70b_gate_up ...
//
// (scripts/h200_results.sh runs both: decode, prefill and dense forced, auto and cuBLAS bf16,
// timed in interleaved rounds on the eight Llama-3 shapes, g128 bf16). The comment beside each
// value names the per-shape ratios it was read from. The dense-vs-decode set (used when prefill
// cannot run) was measured before prefill existed: benchmarks/results/h200/2026-12-02/ at
// e30f49b, smallest sweep M from which dense stays faster than decode (steps 64 -> 96 -> 128).
#pragma once

#include "kernels/dispatch/heuristics.hpp"

namespace swordfish {
namespace dispatch {
namespace heuristics {

inline constexpr Table kSm90 = {
    "sm90 (H200-measured, 2026-12-03)",
    // Decode against the sm90 prefill mainloop (kernels/prefill, wgmma): decode keeps M <= 32,
    //   and on small layers (K * N <= 8192 * 8192) M <= 24, for int4 and int8 alike (the
    //   refinements at the end of this table).
    // measured: benchmarks/results/h200/2026-12-03/ (decode kernels at f6708ca, prefill as in
    //   2026-12-02-f; bench_dispatch.py --bits 4 8 --m 1,16,...,8192 --rounds 3): decode /
    //   prefill time per shape at M = 16, 24, 32, 40, 48, 56, 64
    //   int4: 8B qkv 0.71 0.91 1.09 0.94 0.99 1.17 1.26   8B o 0.86 0.96 1.10 1.20 1.33 1.59 1.77
    //         8B gate_up 0.71 0.88 0.92 1.13 1.16 1.42 1.47   8B down 0.83 1.01 1.14 1.13 1.21 1.48 1.55
    //         70B qkv 0.62 0.80 0.86 0.97 1.01 1.25 1.28   70B o 0.73 0.94 1.07 1.16 1.22 1.47 1.52
    //         70B gate_up 0.65 0.87 0.88 1.15 1.14 1.44 1.48   70B down 0.66 0.90 0.92 1.13 1.18 1.44 1.48
    //   int8: 8B qkv 0.74 0.89 0.98 0.91 0.96 1.10 1.16   8B o 0.91 1.07 1.21 1.04 1.17 1.31 1.43
    //         8B gate_up 0.81 0.87 0.91 1.05 1.08 1.26 1.27   8B down 0.84 0.95 1.06 1.06 1.12 1.30 1.36
    //         70B qkv 0.74 0.82 0.86 0.96 1.00 1.15 1.18   70B o 0.79 0.94 1.06 1.08 1.14 1.31 1.35
    //         70B gate_up 0.81 0.89 0.90 1.09 1.09 1.29 1.31   70B down 0.82 0.88 0.91 1.06 1.09 1.26 1.27
    //   The four layers above 8192 x 8192 weights (8B gate_up, 70B qkv, gate_up, down) cross
    //   between 32 and 40 (70B qkv nearer 48: 0.96-1.01 at 40-48, left to prefill); the four at
    //   or below it (8B qkv, o, down, 70B o) between 24 and 32, whatever their N: decode's fixed
    //   cost per call (2-3 us at M = 1, 0.3-0.6 us of it the output-zeroing launch; 2026-12-03-b
    //   experiments) weighs more on a small weight stream. The 2026-12-03 decode changes (fewer
    //   instructions per unit, 0.96x the time) moved the small-layer crossover up from 16-24
    //   (2026-12-02-f, the previous value 16). Not yet re-measured after gemm_kernel's 16-byte
    //   atomic runs (663b98b, 0.64-0.88x on the small layers at M = 16-64): docs/DECODE.md.
    //   benchmarks/table_verdict.py on this sweep with this table: int4 150/152 points within 3%
    //   of the fastest path (misses: 8B qkv M = 40, prefill 1.07x decode, which is not monotonic
    //   there: 1.09 at 32, 0.94 at 40; 70B qkv M = 40, 1.03x), int8 148/152 (8B qkv M = 40 1.10x
    //   and M = 48 1.04x, 8B o M = 24 decode 1.07x, 70B qkv M = 40 1.04x); with the previous
    //   value 16, 147/152 and 146/152. Checked on the GPU in benchmarks/results/h200/2026-12-03-b/
    //   (the same bench_dispatch.py command, build 39acac8): int4 151/152, int8 147/152.
    /*decode_max_m=*/32,
    // measured: no underfill rule on the H200 (0 = off). The prefill plan splits the last wave
    // along K, so a grid of N / 128 < 132 tiles does not idle SMs: 8B o (32 tiles) is 1.77x faster
    // on prefill at M = 64 and 8B qkv (48 tiles) 1.26x.
    /*decode_underfill_max_m=*/0,
    /*prefill_tile_n=*/128,
    // measured: no K-heavy rule either (0 = off): 8B down and 70B down cross with the small and
    // the large layers respectively (2026-12-02-f: 16-24 and 32-40).
    /*decode_k_heavy_max_m=*/0,
    // Dense against decode + prefill, dense / prefill time at M = 2048, 4096, 8192:
    // measured: int4 16384 (prefill through M = 16383; nothing above M = 8192 was timed):
    //   2026-12-02-c: 8B qkv 1.12 1.04 0.99, 8B o 1.15 1.04 0.98, 8B gate_up 1.07 1.06 1.00,
    //   8B down 1.13 1.03 1.01, 70B qkv 1.13 1.02 1.05, 70B o 1.10 0.98 0.98, 70B gate_up 1.07 1.01
    //   1.02, 70B down 1.08 1.01 1.01; at M = 8192 in 2026-12-02-d 1.00-1.06 and in 2026-12-02-e
    //   0.99-1.08 (8B qkv 0.99, 70B gate_up 1.08): prefill is ahead or tied at 8192 on every shape
    //   in three runs, so the dense tier starts at the next power of two. K-heavy shapes (the two
    //   downs) behave the same.
    // measured: int8 4096: 1.04-1.12 at 2048, 0.99-1.01 at 4096, 0.93-0.99 at 8192 (2026-12-02-c);
    //   0.99-1.02 at 4096, 0.95-1.00 at 8192 (2026-12-02-e).
    // measured: act-order 2048 (N <= 2K; --act-order sweep at M = 64, 512, 2048, 4096, 8192):
    //   dense / prefill 8B o 1.45 0.96 0.84 0.81 0.79, 70B o 2.50 1.32 1.01 0.91 0.88: prefill pays
    //   a gather pass over x (decode's per-element prep kernel) that the dense tier folds
    //   into its dequant writes. 8B o loses up to 16% between 512 and 2048.
    /*dense_vs_fused=*/DenseFrom{/*int4=*/16384, /*int4_k_heavy=*/16384, /*int8=*/4096, /*int8_k_heavy=*/4096,
                                 /*act_order=*/2048},
    // Dense against decode alone: problems the prefill mainloop cannot run (K or N not a multiple
    // of 128, group not 32/64/128), and builds without sm_90a code.
    // measured: int4 96 (8B qkv / gate_up, 70B o cross at 96; 8B o at 64; 70B qkv / gate_up at 128)
    // measured: int4 K >= 2N 128 (8B down and 70B down cross at 128)
    // measured: int8 96 and int8 K >= 2N 96 (every shape but 8B o, which crosses at 64)
    // act_order: NOT measured (bench_dispatch.py --act-order); decode pays a gather prep for act-order
    // that the dense tier folds into its writes, so it cannot cross later than plain int4/int8: 96.
    /*dense_vs_decode=*/DenseFrom{/*int4=*/96, /*int4_k_heavy=*/128, /*int8=*/96, /*int8_k_heavy=*/96,
                                  /*act_order=*/96},
    // measured (see decode_max_m above): int8 crosses where int4 does; small layers
    // (K * N <= 8192 * 8192) keep M <= 24 (int8 8B o alone is 7% slower there than prefill;
    // 8B qkv, 8B down and 70B o gain 5-11%).
    /*decode_max_m_int8=*/kSame,
    /*small_kn=*/8192LL * 8192,
    /*small_max_m=*/24,
    /*small_max_m_int8=*/kSame,
};

}  // namespace heuristics
}  // namespace dispatch
}  // namespace swordfish
