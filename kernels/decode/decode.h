// The decode path (mma.sync kernels for small M): what the dispatcher calls.
// Host C++ interface; the kernels live in decode_gemm.cuh / decode_prep.cuh and
// the launcher (host twin) in decode_launch.cu.
//
// Supports any M >= 1 (M = 0 is a no-op), int4 and int8, fp16 and bf16,
// groups 32 / 64 / 128 and channelwise (scale row 0 only), folded zero
// points, act-order (perm), bias, and a deterministic mode (no atomics,
// bit-identical run to run).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/common/problem.h"

namespace swordfish {
namespace decode {

// "" when the decode path can run p, else the reason naming the value.
// Reads shapes, dtype and flags only; pointers may be null.
std::string can_implement(const GemmProblem& p);

// Scratch bytes launch() needs for p: the permuted activation copy under
// act-order, fp32 split-K partials in deterministic mode. 0 when none.
size_t workspace_bytes(const GemmProblem& p);

// Enqueue p on `stream` (no host synchronisation, no allocation; safe under
// CUDA-graph capture). "" on success, else the error.
std::string launch(const GemmProblem& p, cudaStream_t stream);

// One line naming the kernel configuration launch() would use for p (for
// SWORDFISH_DEBUG logs and tests), e.g. "decode int4 bf16 mt=1 mgroups=1
// stages=4 grid=396 mode=atomic pieces=0 pdl=1".
std::string describe(const GemmProblem& p);

}  // namespace decode
}  // namespace swordfish
