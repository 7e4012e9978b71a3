// MoE table for Hopper (sm90: H100, H200). The dense crossover sits inside the
// bracket the H200 run measured (benchmarks/RESULTS.md [moe]); the block size
// threshold comes from the kernel's structure, not timed on its own.
#pragma once

#include "kernels/dispatch/moe_heuristics.hpp"

namespace swordfish {
namespace dispatch {
namespace moe_heuristics {

inline constexpr MoeTable kMoeSm90 = {
    "sm90 (dense crossover within the H200 run's bracket; block size unmeasured)",
    // 16: from here the average expert fills an m16 block, so 32-row blocks stream each expert's weights
    //     half as often; below, the second m16 tile is mostly padding (MMA and ldmatrix work, no bytes saved)
    /*block32_min_avg_tokens=*/16,
    // 128: the H200 run (swordfish bench --moe, benchmarks/baselines/h200/bench_moe.txt) has fused faster up
    //      to 96 routed tokens per expert (DeepSeek-V2-Lite, T = 1024) and dense faster from 256 (all four
    //      models); no point fell between, and auto was within 3% of the faster path at all 28 points
    /*dense_min_avg_tokens=*/128,
    // 8: PROVISIONAL (not yet timed): below, most 16-row blocks hold a few real rows, which the 8-row
    //    swapped-operand kernel (moe_swap.cuh) serves with half the MMA work, as dense decode at M <= 8
    /*block16_min_avg_tokens=*/8,
};

}  // namespace moe_heuristics
}  // namespace dispatch
}  // namespace swordfish
