// Crossover table for Hopper (sm90: H100, H200).
//
// Measured on the H200 (132 SMs) over the eight Llama-3 8B / 70B layers, g128 bf16, every path
// forced beside auto and cuBLAS in interleaved rounds (benchmarks/bench_dispatch.py). Each value
// says why in one line; the runs, builds and ratios behind it are in benchmarks/RESULTS.md under
// the tag in brackets. benchmarks/table_verdict.py scores this table on the H200 baseline
// (benchmarks/baselines/h200) without a GPU; tests/test_table_verdict.py holds it there. The H100
// uses the same table (not re-measured for its slower HBM).
#pragma once

#include "kernels/dispatch/heuristics.hpp"

namespace swordfish {
namespace dispatch {
namespace heuristics {

inline constexpr Table kSm90 = {
    "sm90 (H200-measured, 2026-12-03)",
    // 32: on the large layers decode's third m16 tile (M = 33) makes it lose to one BT 64 prefill
    //     tile row [decode-prefill]
    /*decode_max_m=*/32,
    // 0: no underfill rule; the prefill plan splits its last wave along K, so few column tiles
    //    still fill the SMs [no-underfill]
    /*decode_underfill_max_m=*/0,
    /*prefill_tile_n=*/128,
    // 0: no K-heavy rule; the two downs cross with the other layers of their size [no-underfill]
    /*decode_k_heavy_max_m=*/0,
    // Against decode + prefill:
    //   int4 16384: prefill ahead or tied through M = 8192 on every layer, tied at 12288-16384 [dense-int4]
    //   int8 12288: the dense tier ahead on seven of eight layers there, tied on the eighth [dense-int8]
    //   act-order (N <= 2K) 2048 / 4096 on the 8B-class / larger layers: prefill pays a gather pass
    //     over x that the dense tier folds into its dequant writes [dense-act-order]
    //   int8_small 8192: 8B qkv / o / down already favour the dense tier by 2-3% there [dense-int8]
    /*dense_vs_fused=*/DenseFrom{/*int4=*/16384, /*int4_k_heavy=*/16384, /*int8=*/12288, /*int8_k_heavy=*/12288,
                                 /*act_order=*/2048, /*act_order_large=*/4096, /*int8_small=*/8192},
    // Against decode alone (prefill cannot run the problem: K or N not a multiple of 128, a group it
    // does not take, a build without sm_90a):
    //   224 int4 / 208 int8 / 224 int8 K-heavy: decode's mma.sync falls behind dequant + cuBLAS
    //     between M = 182 and 247 by layer [dense-decode]
    //   act-order 208: not measured; decode pays a gather that the dense tier does not, so it
    //     crosses no later than the lower plain value
    /*dense_vs_decode=*/DenseFrom{/*int4=*/224, /*int4_k_heavy=*/224, /*int8=*/208, /*int8_k_heavy=*/224,
                                  /*act_order=*/208},
    // int8 crosses where int4 does on the large layers [decode-prefill]
    /*decode_max_m_int8=*/kSame,
    // 4096 x 14336: the largest 8B-class layer (qkv, o, down); 70B o (8192 x 8192) already crosses
    //   like the large layers [decode-prefill]
    /*small_kn=*/4096LL * 14336,
    // 48 (int4) / 64 (int8): the 8B-class layers keep decode through its three-tile regime, int8
    //   through four [decode-prefill]
    /*small_max_m=*/48,
    /*small_max_m_int8=*/64,
    // 48: int8 8B down (K >= 2N) loses 10-12% on decode at M = 56-64 [decode-prefill]
    /*small_k_heavy_max_m_int8=*/48,
    // 48 below balance 0.8: at M = 33-48 prefill runs one BT 64 tile row, and where its tiles divide
    //   poorly over the SMs (70B qkv, 70B o) decode is ahead or tied [unbalanced]
    /*unbalanced_max_m=*/48,
    /*min_balance=*/0.8,
};

}  // namespace heuristics
}  // namespace dispatch
}  // namespace swordfish
