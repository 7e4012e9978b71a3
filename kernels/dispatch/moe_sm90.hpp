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
    // 128: first-principles, not measured: dequantizing every expert costs about one write and one read of
    //      the bf16 experts (~E * 3HI * 6 bytes), which the tensor-core grouped GEMM repays once an expert's
    //      run is about 128 rows (the Hopper wgmma tile); RESULTS.md [moe] will hold the measured crossover
    /*dense_min_avg_tokens=*/128,
};

}  // namespace moe_heuristics
}  // namespace dispatch
}  // namespace swordfish
