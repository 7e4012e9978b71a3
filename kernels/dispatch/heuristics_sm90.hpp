// Crossover table for Hopper (sm90: H100, H200).
//
// Every value is MEASURED on the H200 (132 SMs) with
//
//   python benchmarks/bench_dispatch.py --quick --out <dir>
//
// (decode, prefill and dense forced, auto and cuBLAS bf16, timed in interleaved rounds over
// M = 1 ... 8192 on the eight Llama-3 shapes, int4 g128 bf16). The comment beside each value
// names the per-shape ratios it was read from. The dense-vs-decode set (used when prefill
// cannot run) was measured before prefill existed: benchmarks/results/h200/2026-12-02/ at
// e30f49b, smallest sweep M from which dense stays faster than decode (steps 64 -> 96 -> 128).
#pragma once

#include "kernels/dispatch/heuristics.hpp"

namespace swordfish {
namespace dispatch {
namespace heuristics {

inline constexpr Table kSm90 = {
    "sm90 (H200-measured, 2026-12-02)",
    // Decode against the sm90 prefill mainloop (kernels/prefill, wgmma).
    // measured: decode_max_m 40. bench_dispatch.py --quick at 8df699b..HEAD (results in
    //   benchmarks/results/h200/2026-12-02-c/): decode / prefill time at M = 32, 48, 64 per shape
    //   8B qkv 0.96 1.03 1.23, 8B o 1.14 1.41 1.76, 8B gate_up 0.76 0.89 1.10, 8B down 1.08 1.10 1.35,
    //   70B qkv 0.62 0.72 0.90, 70B o 0.96 1.02 1.27, 70B gate_up 0.69 0.85 1.05, 70B down 0.73 0.88 1.10
    //   (crossovers 28-70, median ~47, before the prefill x-row fix that made prefill 5-15% faster
    //   below M = 64); the README of that folder has the sweep at M = 24..64 that confirms 40.
    /*decode_max_m=*/40,
    // measured: no underfill rule on the H200. The prefill plan splits the last wave along K, so
    // a grid of N / 128 < 132 tiles does not idle SMs: 8B o (32 tiles) is 1.76x faster on prefill
    // at M = 64 and 8B qkv (48 tiles) 1.23x. Equal to decode_max_m = no effect.
    /*decode_underfill_max_m=*/40,
    /*prefill_tile_n=*/128,
    // measured: no K-heavy rule either: 8B down and 70B down cross at ~30 and ~54, like the rest.
    /*decode_k_heavy_max_m=*/40,
    // Dense against decode + prefill.
    // measured: int4 8192: dense / prefill time at M = 4096 and 8192 per shape
    //   8B qkv 1.04 1.00, 8B o 1.04 0.98, 8B gate_up 1.04 1.00, 8B down 1.01 1.00,
    //   70B qkv 1.04 1.03, 70B o 0.96 1.02, 70B gate_up 1.05 1.03, 70B down 1.03 1.00:
    //   prefill is ahead through 4096 and the two are within 2% at 8192, where dense (cuBLAS, the
    //   better-tested of the two at that size) takes over.
    // int8 and act-order: the same value until bench_dispatch.py --bits 8 / --act-order
    //   with the prefill column says otherwise (int8 prefill moves twice the weight bytes, which
    //   matters below M ~ 512, not at 8192; act-order adds one gather pass over x to prefill).
    /*dense_vs_fused=*/DenseFrom{/*int4=*/8192, /*int4_k_heavy=*/8192, /*int8=*/8192, /*int8_k_heavy=*/8192,
                                 /*act_order=*/8192},
    // Dense against decode alone: problems the prefill mainloop cannot run (K or N not a multiple
    // of 128, group not 32/64/128), and builds without sm_90a code.
    // measured: int4 96 (8B qkv / gate_up, 70B o cross at 96; 8B o at 64; 70B qkv / gate_up at 128)
    // measured: int4 K >= 2N 128 (8B down and 70B down cross at 128)
    // measured: int8 96 and int8 K >= 2N 96 (every shape but 8B o, which crosses at 64)
    // act_order: NOT measured (bench_dispatch.py --act-order); decode pays a gather prep for act-order
    // that the dense tier folds into its writes, so it cannot cross later than plain int4/int8: 96.
    /*dense_vs_decode=*/DenseFrom{/*int4=*/96, /*int4_k_heavy=*/128, /*int8=*/96, /*int8_k_heavy=*/96,
                                  /*act_order=*/96},
};

}  // namespace heuristics
}  // namespace dispatch
}  // namespace swordfish
