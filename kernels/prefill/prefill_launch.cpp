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

std::string str(long long v) { return std::to_string(v); }

}  // namespace

std::string format_reason(const GemmProblem& p) {
  if (p.bits != 4 && p.bits != 8) return "bits must be 4 or 8, got " + str(p.bits);
  if (p.group != 32 && p.group != 64 && p.group != 128)
    return "the prefill path needs group 32, 64 or 128 (channelwise scales replicated to one of them), got group " +
           str(p.group);
  if (p.K % 128 != 0) return "the prefill path needs K to be a multiple of 128, got K = " + str(p.K);
  if (p.N % 128 != 0) return "the prefill path needs N to be a multiple of 128, got N = " + str(p.N);
  if (p.K % p.group != 0) return "K = " + str(p.K) + " is not a multiple of group " + str(p.group);
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16)
    return "dtype must be float16 or bfloat16, got " + str(static_cast<int>(p.dtype));
  if (p.M < 0) return "M must be >= 0, got " + str(p.M);
  return "";
}

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

std::string grouped_can_implement(const GroupedProblem& g) {
  if (arch_of(g.gemm) == Arch::kSm90) return sm90::grouped_can_implement(g);
  return "the grouped prefill (stacked experts) needs sm90a (compute capability 9.0), device is " + arch_name(g.gemm);
}

std::string grouped_launch(const GroupedProblem& g, void* stream) {
  if (arch_of(g.gemm) == Arch::kSm90) return sm90::grouped_launch(g, static_cast<cudaStream_t>(stream));
  return grouped_can_implement(g);
}

std::string grouped_describe(const GroupedProblem& g) {
  if (arch_of(g.gemm) == Arch::kSm90) return sm90::grouped_describe(g);
  return "grouped prefill: " + grouped_can_implement(g);
}

}  // namespace prefill
}  // namespace swordfish
