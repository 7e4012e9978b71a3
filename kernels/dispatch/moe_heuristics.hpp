// The MoE dispatcher's decision, as a pure function of the layer's shape and
// a per-architecture table (moe_sm90.hpp, moe_sm100.hpp, kMoeConservative
// below). Header-only and constexpr, plain C++17 with no CUDA, so a CPU test
// can compile it.
//
// The decision, in order:
//   0. Grouped (the prefill mainloop's grouped GEMM on the packed experts)
//      when it can run the layer and the average reaches
//      grouped_min_avg_tokens (timed on sm90; kNever elsewhere: sm90a only).
//   1. Dense (dequantize the experts + a bf16 grouped GEMM) when it can run
//      the layer and the average routed tokens per expert, T * top_k / E
//      (E: the global experts, expert_map's length when there is one), reach
//      dense_min_avg_tokens.
//   2. Otherwise fused (the decode-machinery Stream-K kernel), with blocks of
//      32 rows (MT = 2) once the average reaches block32_min_avg_tokens, 16
//      once it reaches block16_min_avg_tokens, and below that 8 (the
//      swapped-operand kernel, moe_swap.cuh: a block's tokens are the MMA's n8).
#pragma once

#include <climits>

namespace swordfish {
namespace dispatch {
namespace moe_heuristics {

inline constexpr int kNever = INT_MAX;  // a threshold the average never reaches

struct MoeTable {
  const char* name = "";
  int block32_min_avg_tokens = kNever;  // T * top_k / E from which fused blocks are 32 rows
  int dense_min_avg_tokens = kNever;    // T * top_k / E from which the dense path runs
  int block16_min_avg_tokens = 0;       // T * top_k / E from which fused blocks are 16 rows (below: 8 rows,
                                        // the swap kernel); 0: never 8
  int grouped_min_avg_tokens = kNever;  // T * top_k / E from which the grouped path runs (before dense)
};

// The path values of swordfish::MoePath (moe_problem.h), restated as plain
// ints so this header stays free of the problem struct.
inline constexpr int kPathFused = 1;
inline constexpr int kPathDense = 2;
inline constexpr int kPathGrouped = 3;

struct Choice {
  int path = kPathFused;
  int block_m = 16;
};

// avg >= threshold, with avg = slots / experts, in integers.
constexpr bool reaches(long long slots, long long experts, int threshold) {
  return threshold != kNever && slots >= static_cast<long long>(threshold) * experts;
}

constexpr int block_m_for(const MoeTable& t, long long slots, long long experts) {
  if (reaches(slots, experts, t.block32_min_avg_tokens)) return 32;
  return reaches(slots, experts, t.block16_min_avg_tokens) ? 16 : 8;
}

constexpr Choice choose(const MoeTable& t, long long slots, long long experts, bool dense_available,
                        bool grouped_available = false) {
  if (grouped_available && reaches(slots, experts, t.grouped_min_avg_tokens)) return Choice{kPathGrouped, 0};
  if (dense_available && reaches(slots, experts, t.dense_min_avg_tokens)) return Choice{kPathDense, 16};
  return Choice{kPathFused, block_m_for(t, slots, experts)};
}

// Architectures no table was written for (sm80, sm89, sm120, ...): the fused
// path with the Hopper block rule.
inline constexpr MoeTable kMoeConservative = {
    "conservative (no MoE measurements for this architecture)",
    /*block32_min_avg_tokens=*/16,  // 16: the Hopper rule (moe_sm90.hpp); nothing measured here
    /*dense_min_avg_tokens=*/kNever,  // kNever: _grouped_mm's fast kernels are sm90 / sm100 ones
    /*block16_min_avg_tokens=*/8,     // 8: the Hopper rule (moe_sm90.hpp), as dense decode's M <= 8 swap kernel
};

static_assert(block_m_for(kMoeConservative, 15, 1) == 16 && block_m_for(kMoeConservative, 16, 1) == 32,
              "the block rule switches at the threshold");
inline constexpr MoeTable kBlock8Example = {"", 16, kNever, 4};
static_assert(block_m_for(kBlock8Example, 31, 8) == 8 && block_m_for(kBlock8Example, 32, 8) == 16,
              "8-row blocks below block16_min_avg_tokens");
static_assert(block_m_for(MoeTable{"", 16, kNever, 0}, 0, 8) == 16, "0 never picks 8-row blocks");
static_assert(choose(kMoeConservative, 1 << 20, 8, true, true).path == kPathFused,
              "kNever never picks dense or grouped");
inline constexpr MoeTable kGroupedExample = {"", 16, 128, 8, 64};
static_assert(choose(kGroupedExample, 63 * 8, 8, true, true).path == kPathFused &&
                  choose(kGroupedExample, 64 * 8, 8, true, true).path == kPathGrouped &&
                  choose(kGroupedExample, 1 << 20, 8, true, true).path == kPathGrouped &&
                  choose(kGroupedExample, 1 << 20, 8, true, false).path == kPathDense,
              "grouped from its threshold, before dense; dense where grouped cannot run");

}  // namespace moe_heuristics
}  // namespace dispatch
}  // namespace swordfish
