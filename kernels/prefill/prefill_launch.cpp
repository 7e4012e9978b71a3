// Host twin of prefill.h: routes can_implement / workspace_bytes / launch /
// describe by compute capability to an architecture's launcher. No
// architecture's code is reached for a device it was not written for.
//   9.0          sm90/prefill_sm90_launch.cu (wgmma; only in builds that carry sm_90a)
//   10.x, 11.x   sm100/prefill_sm100_launch.cu (tcgen05, 2-SM pairs; sm_100a for 10.0, sm_110a
//                for 11.0; COMPILED, NOT RUN: it serves a problem only while
//                SWORDFISH_SM100_PREFILL=1, and says why not otherwise)
//   anything else: no prefill mainloop
// plan_balance's routing lives in prefill_plan.cpp (plain C++ for the CPU tests).
#include "kernels/prefill/prefill.h"

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/common/problem.h"
#include "kernels/prefill/sm100/prefill_sm100_launch.h"
#include "kernels/prefill/sm90/prefill_sm90_launch.h"

namespace swordfish {
namespace prefill {
namespace {

enum class Arch { kNone, kSm90, kSm100 };

Arch arch_of(const GemmProblem& p) {
  if (p.cc_major == 9 && p.cc_minor == 0) return Arch::kSm90;
  if (p.cc_major == 10 || p.cc_major == 11) return Arch::kSm100;  // B200 / B300 (10.x), Thor (11.0 under CUDA 13)
  return Arch::kNone;
}

std::string arch_name(const GemmProblem& p) { return "sm" + std::to_string(p.cc_major) + std::to_string(p.cc_minor); }

// Why no mainloop serves p's architecture (only asked for Arch::kNone).
std::string arch_reason(const GemmProblem& p) {
  return "the prefill path needs sm90a (wgmma; compute capability 9.0) or sm100a / sm110a (tcgen05; 10.0, 11.0), "
         "device is " + arch_name(p);
}

}  // namespace

std::string can_implement(const GemmProblem& p) {
  switch (arch_of(p)) {
    case Arch::kSm90: return sm90::can_implement(p);
    case Arch::kSm100: return sm100::can_implement(p);
    case Arch::kNone: break;
  }
  return arch_reason(p);
}

size_t workspace_bytes(const GemmProblem& p) {
  switch (arch_of(p)) {
    case Arch::kSm90: return sm90::workspace_bytes(p);
    case Arch::kSm100: return sm100::workspace_bytes(p);
    case Arch::kNone: break;
  }
  return 0;
}

std::string launch(const GemmProblem& p, void* stream) {
  switch (arch_of(p)) {
    case Arch::kSm90: return sm90::launch(p, static_cast<cudaStream_t>(stream));
    case Arch::kSm100: return sm100::launch(p, static_cast<cudaStream_t>(stream));
    case Arch::kNone: break;
  }
  return arch_reason(p);
}

std::string describe(const GemmProblem& p) {
  switch (arch_of(p)) {
    case Arch::kSm90: return sm90::describe(p);
    case Arch::kSm100: return sm100::describe(p);
    case Arch::kNone: break;
  }
  return "prefill: " + arch_reason(p);
}

}  // namespace prefill
}  // namespace swordfish
