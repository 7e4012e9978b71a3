// MoE table for Hopper (sm90: H100, H200). The dense crossover sits inside the
// bracket the H200 run measured, the 8-row threshold inside the H100 run's
// (benchmarks/RESULTS.md [moe] holds every run), the 32-row threshold inside a second H100 run's,
// the grouped threshold inside a third's.
#pragma once

#include "kernels/dispatch/moe_heuristics.hpp"

namespace swordfish {
namespace dispatch {
namespace moe_heuristics {

inline constexpr MoeTable kMoeSm90 = {
    "sm90 (dense crossover within the H200 run's bracket; 8-row, 32-row blocks and grouped timed on an H100)",
    // 16: from here an average expert fills an m16 block, and 32-row blocks stream its weights half as often
    /*block32_min_avg_tokens=*/16,
    // 128: inside the measured bracket (fused faster to 96 routed tokens per expert, dense from 256)
    /*dense_min_avg_tokens=*/128,
    // 8: below it most 16-row blocks hold a few real rows; 8-row blocks won to 6, lost from 8
    /*block16_min_avg_tokens=*/8,
    // 32: fused faster to 24-26 routed tokens per expert on all four models, grouped from 32 (H100)
    /*grouped_min_avg_tokens=*/32,
};

}  // namespace moe_heuristics
}  // namespace dispatch
}  // namespace swordfish
