// MoE table for Hopper (sm90: H100, H200). The dense crossover sits inside the
// bracket the H200 run measured, the 8-row threshold inside the H100 run's
// (benchmarks/RESULTS.md [moe]), the 32-row threshold inside a second H100 run's.
#pragma once

#include "kernels/dispatch/moe_heuristics.hpp"

namespace swordfish {
namespace dispatch {
namespace moe_heuristics {

inline constexpr MoeTable kMoeSm90 = {
    "sm90 (dense crossover within the H200 run's bracket; 8-row and 32-row blocks timed on an H100)",
    // 16: from here the average expert fills an m16 block, so 32-row blocks stream each expert's weights
    //     half as often (16-row blocks took 1.16-1.68x the time at 16-128 tokens per expert); from 8 they
    //     were within +-2.5% of 16-row blocks, either way (RESULTS.md [moe], 2026-12-07-d)
    /*block32_min_avg_tokens=*/16,
    // 128: the H200 run (swordfish bench --moe, benchmarks/baselines/h200/bench_moe.txt) has fused faster up
    //      to 96 routed tokens per expert (DeepSeek-V2-Lite, T = 1024) and dense faster from 256 (all four
    //      models); no point fell between, and auto was within 3% of the faster path at all 28 points
    /*dense_min_avg_tokens=*/128,
    // 8: the H100 run of 2026-12-07-c (benchmarks/RESULTS.md [moe]): 8-row blocks on the swapped-operand
    //    kernel (moe_swap.cuh) were 1.07-1.16x faster than 16-row blocks at every point up to 6 routed tokens
    //    per expert (14 of 14, four models) and slower from 8 (1.07x at 8, 1.17x at 8.5, 1.5x at 12)
    /*block16_min_avg_tokens=*/8,
};

}  // namespace moe_heuristics
}  // namespace dispatch
}  // namespace swordfish
