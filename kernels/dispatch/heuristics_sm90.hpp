// Crossover table for Hopper (sm90: H100, H200).
//
// The dense-vs-decode thresholds below are MEASURED on the H200 (132 SMs),
// 2026-12-02, at commit e30f49b, with
//
//   python benchmarks/bench_dispatch.py --out <dir>
//
// (decode forced, dense forced, auto and cuBLAS bf16 over M = 1 ... 8192 on
// the eight Llama-3 shapes, int4 g128 and int8 g128 bf16; results in
// benchmarks/results/h200/2026-12-02/). Per shape, the smallest sweep M from
// which dense stays faster than decode:
//   int4: 8B o 64; 8B qkv, 8B gate_up, 70B o 96; 8B down, 70B qkv,
//         70B gate_up, 70B down 128
//   int8: 8B o 64; every other shape 96
// The sweep steps 64 -> 96 -> 128, so each value is the sweep point at which
// most shapes have crossed; at the shapes that cross a step earlier or later
// the two paths are within ~4% there.
#pragma once

#include "kernels/dispatch/heuristics.hpp"

namespace swordfish {
namespace dispatch {
namespace heuristics {

inline constexpr Table kSm90 = {
    "sm90 (H200-measured dense crossovers, 2026-12-02)",
    // Decode against the sm90 prefill mainloop. There is no sm90 prefill in
    // this build, so these are never consulted; they are the write-up's B200
    // values (decode always <= 55; < 96 while N / 128 CTAs underfill the SMs;
    // K >= 2N through 127), to be re-measured when the wgmma mainloop lands.
    /*decode_max_m=*/55,
    /*decode_underfill_max_m=*/95,
    /*prefill_tile_n=*/128,
    /*decode_k_heavy_max_m=*/127,
    // Dense against decode + prefill: the write-up's B200 values (int8 from
    // 1024, int4 from 4096, act-order from 512 when N <= 2K), unused until an
    // sm90 prefill exists.
    /*dense_vs_fused=*/DenseFrom{/*int4=*/4096, /*int4_k_heavy=*/4096, /*int8=*/1024, /*int8_k_heavy=*/1024,
                                 /*act_order=*/512},
    // Dense against decode alone: what this build uses on the H200.
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
