// The sm100 / sm110 prefill path's host interface (prefill_sm100_launch.cu):
// what kernels/prefill/prefill_launch.cpp routes compute capability 10.0
// (B200, sm_100a SASS) and 11.0 (Jetson Thor, sm_110a) to. The same four
// questions as prefill.h, answered for the tcgen05 mainloop (prefill_sm100.cuh).
//
// COMPILED, NOT RUN: until a Blackwell run has checked it, the path serves a
// problem only while SWORDFISH_SM100_PREFILL=1 (kSm100PrefillKnob): with the
// knob off can_implement() says so, and the dispatcher keeps those devices on
// decode and the dense tier exactly as before the path existed.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "kernels/common/problem.h"

namespace swordfish {
namespace prefill {
namespace sm100 {

// The opt-in for the unverified path (kernels/common/env.h spellings; only an "on" spelling opens it).
inline constexpr const char* kSm100PrefillKnob = "SWORDFISH_SM100_PREFILL";

// "" when the tcgen05 mainloop can run p, else the reason naming the value (including "this build
// has no sm_100a / sm_110a code" and "SWORDFISH_SM100_PREFILL is off").
std::string can_implement(const GemmProblem& p);

// Scratch bytes launch() needs: the gathered activations (act-order). 0 when none.
size_t workspace_bytes(const GemmProblem& p);

// Enqueue p on `stream`; "" or the error. No host synchronisation, no allocation.
std::string launch(const GemmProblem& p, cudaStream_t stream);

// One line naming the plan and kernel configuration launch() would use.
std::string describe(const GemmProblem& p);

}  // namespace sm100
}  // namespace prefill
}  // namespace swordfish
