// The prefill path (tensor-core mainloops for mid-size and large M): what the
// dispatcher calls. Host C++ interface; the sm90 kernel lives in
// prefill_sm90.cuh, the shared Transform stage in transform.cuh, the launcher
// (host twin) in prefill_sm90_launch.cu.
//
// sm90a (H100 / H200): int4 groups 32 / 64 / 128 and int8 groups 32 / 64 /
// 128 (channelwise scales replicated to one of those groups), fp16 and bf16,
// folded zero points, act-order (activation columns gathered into the
// workspace first), bias; K and N multiples of 128; any M >= 1. Every result
// is bit-identical run to run (no atomics; split-K partials are reduced in a
// fixed order). Blackwell's tcgen05 mainloop is a later issue: on sm100 /
// sm110 can_implement() says so.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "kernels/common/problem.h"

namespace swordfish {
namespace prefill {

// "" when the prefill path can run p on its device, else the reason naming the
// offending value. Reads shapes, flags and device facts; checks the alignment
// of the pointers that are set (TMA and bulk copies need 16-byte alignment).
std::string can_implement(const GemmProblem& p);

// Scratch bytes launch() needs for p: the gathered activations under
// act-order and the fp32 split-K partials. 0 when none.
size_t workspace_bytes(const GemmProblem& p);

// Enqueue p on `stream` (no host synchronisation, no allocation; safe under
// CUDA-graph capture). "" on success, else the error.
std::string launch(const GemmProblem& p, cudaStream_t stream);

// One line naming the configuration launch() would use for p, e.g.
// "prefill sm90 int4 bf16 tile=128x256 k=64 stages=4 splits=1 split_tiles=0
// items=512 grid=132 band=4".
std::string describe(const GemmProblem& p);

}  // namespace prefill
}  // namespace swordfish
