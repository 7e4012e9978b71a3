// The sm90 prefill path's host interface (prefill_sm90_launch.cu): what
// kernels/prefill/prefill_launch.cpp routes compute capability 9.0 to. The
// same four questions as prefill.h, answered for the wgmma mainloop
// (prefill_sm90.cuh) alone.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "kernels/common/problem.h"
#include "kernels/prefill/prefill.h"

namespace swordfish {
namespace prefill {
namespace sm90 {

// "" when the sm90 mainloop can run p, else the reason naming the value
// (including "this build has no sm_90a code").
std::string can_implement(const GemmProblem& p);

// Scratch bytes launch() needs: gathered activations (act-order), fp32 split-K partials.
size_t workspace_bytes(const GemmProblem& p);

// Enqueue p on `stream`; "" or the error.
std::string launch(const GemmProblem& p, cudaStream_t stream);

// One line naming the plan and kernel configuration launch() would use.
std::string describe(const GemmProblem& p);

// The grouped GEMM over stacked experts (prefill.h GroupedProblem), the same
// kernel with a per-run expert: its can_implement, launch and describe.
std::string grouped_can_implement(const GroupedProblem& g);
std::string grouped_launch(const GroupedProblem& g, cudaStream_t stream);
std::string grouped_describe(const GroupedProblem& g);

}  // namespace sm90
}  // namespace prefill
}  // namespace swordfish
