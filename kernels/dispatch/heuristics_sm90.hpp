// Crossover table for Hopper (sm90: H100, H200).
//
// PROVISIONAL: nothing here is measured yet. The values are estimates made
// before the first H200 run; replace each with the measured crossover and
// the command that measured it. The measurement (about 4 minutes on the H200,
// with the extension built for 90a):
//
//   python benchmarks/bench_dispatch.py --out benchmarks/results/h200
//
// It times decode (forced), dense (forced), auto and cuBLAS bf16 over
// M = 1 ... 8192 on the eight Llama-3 shapes, int4 g128 and int8 g128 bf16,
// and prints, per shape and format, the smallest M from which dense stays
// faster than decode ("crossover"); the table takes the smallest over the
// shapes (rounded down to a sweep point) unless a shape class needs its own
// key (K >= 2N has one).
#pragma once

#include "kernels/dispatch/heuristics.hpp"

namespace swordfish {
namespace dispatch {
namespace heuristics {

inline constexpr Table kSm90 = {
    "sm90 (PROVISIONAL, unmeasured)",
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
    // PROVISIONAL estimate from rooflines, not a measurement: at M = 512 on
    // 70B o (8192 x 8192) int4 the tier costs ~47 us of dequant (168 MB at
    // ~3.6 TB/s) plus ~150 us of cuBLAS (GPU.md: ~470 TFLOP/s at M = 256-512),
    // while an mma.sync mainloop at an assumed ~250 TFLOP/s needs ~275 us; at
    // M = 256 the two are within ~15%. int8 halves decode's weight advantage,
    // act-order adds decode's gather: both cross earlier (write-up, "The dense
    // tier"). Measure: the command above; then write "measured: M = ... on
    // <shape list>, bench_dispatch.py <args>, <date>" next to each value.
    /*dense_vs_decode=*/DenseFrom{/*int4=*/512, /*int4_k_heavy=*/512, /*int8=*/256, /*int8_k_heavy=*/256,
                                  /*act_order=*/256},
};

}  // namespace heuristics
}  // namespace dispatch
}  // namespace swordfish
