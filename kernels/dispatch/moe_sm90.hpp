// MoE table for Hopper (sm90: H100, H200). Not measured yet: the values come
// from the kernel's structure; benchmarks/RESULTS.md will hold the evidence
// once `swordfish bench --moe` has run on the device.
#pragma once

#include "kernels/dispatch/moe_heuristics.hpp"

namespace swordfish {
namespace dispatch {
namespace moe_heuristics {

inline constexpr MoeTable kMoeSm90 = {
    "sm90 (first-principles values, not yet measured)",
    // 16: from here the average expert fills an m16 block, so 32-row blocks stream each expert's weights
    //     half as often; below, the second m16 tile is mostly padding (MMA and ldmatrix work, no bytes saved)
    /*block32_min_avg_tokens=*/16,
    // kNever: the dense MoE path (dequantize + grouped GEMM) is not built yet
    /*dense_min_avg_tokens=*/kNever,
};

}  // namespace moe_heuristics
}  // namespace dispatch
}  // namespace swordfish
