// MoE tables for Blackwell (sm100/sm103: B200, B300; sm110: Jetson Thor).
// Nobody here has a Blackwell GPU: compiled, not run, not measured.
#pragma once

#include "kernels/dispatch/moe_heuristics.hpp"

namespace swordfish {
namespace dispatch {
namespace moe_heuristics {

inline constexpr MoeTable kMoeSm100 = {
    "sm100 (Hopper's values, not measured on Blackwell)",
    // 16: the Hopper rule (moe_sm90.hpp); the write-up widens blocks at a threshold it does not state
    /*block32_min_avg_tokens=*/16,
    // 128: the Hopper value (moe_sm90.hpp); the write-up hands high tokens per expert to this path too
    /*dense_min_avg_tokens=*/128,
    // 8: the Hopper value (moe_sm90.hpp): below it most 16-row blocks hold a few real rows, on any mma.sync GPU
    /*block16_min_avg_tokens=*/8,
};

}  // namespace moe_heuristics
}  // namespace dispatch
}  // namespace swordfish
