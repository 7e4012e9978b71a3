// Which crossover table a device uses, from its compute capability.
// Plain C++17, no CUDA (the CPU tests compile it, linking
// kernels/prefill/prefill_plan.cpp for prefill::plan_balance).
#pragma once

#include "kernels/dispatch/heuristics.hpp"
#include "kernels/dispatch/heuristics_sm100.hpp"
#include "kernels/dispatch/heuristics_sm90.hpp"
#include "kernels/prefill/prefill.h"

namespace swordfish {
namespace dispatch {
namespace heuristics {

constexpr const Table& table_for(int cc_major, int cc_minor) {
  if (cc_major == 9) return kSm90;
  // Jetson Thor: sm110 under CUDA 13, reported as 10.1 by CUDA 12.x.
  if (cc_major == 11 || (cc_major == 10 && cc_minor == 1)) return kThor;
  if (cc_major == 10) return kSm100;  // B200 (10.0), B300 (10.3)
  return kConservative;               // sm80, sm86, sm89, sm120, sm121, anything newer
}

// Availability::prefill_balance for p under table t: the prefill path's plan
// balance (prefill::plan_balance; 1 on architectures without a plan model)
// where t's unbalanced-plan rule can apply (M <= unbalanced_max_m), else 1
// (no plan is built on the per-call path where nothing reads it).
inline double prefill_balance(const Table& t, const GemmProblem& p) {
  if (p.M > 0 && p.M <= t.unbalanced_max_m) return prefill::plan_balance(p);
  return 1.0;
}

}  // namespace heuristics
}  // namespace dispatch
}  // namespace swordfish
