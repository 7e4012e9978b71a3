// The fused-MoE path (the decode machinery over token-sorted blocks): what the
// MoE dispatcher (kernels/dispatch/moe_dispatch.h) calls. Host C++ interface;
// the kernels live in moe_align.cuh, moe_gemm.cuh and moe_act.cuh, the
// launcher (host twin) in moe_launch.cu.
//
// One layer is five launches on the caller's stream, no host synchronisation
// and no allocation (CUDA-graph safe; every size is a function of T, top_k, E,
// H, I and block_m, never of the routing): align (+ zeroing, + the act-order
// gather of x), the w13 GEMM, activation-and-mul, the w2 GEMM, finalize.
// Atomic mode sums split-K pieces and the top-k experts with fp32
// reductions and rounds once; deterministic mode stores every piece and sums
// them in a fixed order (bit-stable run to run; the sort is stable).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/moe/moe_problem.h"

namespace swordfish {
namespace moe {

// Length of moe_align's sorted_ids for slots = T * top_k routed pairs: every
// expert's run may add block_m - 1 padding entries (the op's contract bound).
inline long long sorted_len(long long slots, int experts, int block_m) {
  return slots + static_cast<long long>(experts) * (block_m - 1);
}
inline long long blocks_len(long long slots, int experts, int block_m) {
  return (sorted_len(slots, experts, block_m) + block_m - 1) / block_m;
}

// "" when moe_align can sort `slots` pairs over `experts` local experts in
// blocks of block_m (8, 16, 32: the fused kernels; 64, 128, 256: the grouped
// prefill's token tiles) on a device with compute capability cc_major
// (0: unknown), else the reason naming the value.
std::string can_align(long long slots, int experts, int block_m, int cc_major);

// The moe_align op: sorted_ids (sorted_len entries), expert_ids (blocks_len),
// num_post_pad (1) from topk ids (int32, or int64 when ids_int64) of `slots`
// pairs; expert_map (map_len entries) or nullptr. One CTA; enqueued on stream.
std::string align(const void* ids, bool ids_int64, long long slots, int experts, int block_m,
                  const int32_t* expert_map, int map_len, int32_t* sorted_ids, long long sorted_entries,
                  int32_t* expert_ids, long long block_entries, int32_t* num_post_pad, int device, int cc_major,
                  cudaStream_t stream);

// "" when the fused path can run p with blocks of block_m rows, else the
// reason naming the value. Reads shapes, dtype and flags only.
std::string can_implement(const MoeProblem& p, int block_m);

// Scratch bytes launch() needs (sort, intermediate activations, fp32 accumulators).
size_t workspace_bytes(const MoeProblem& p, int block_m);

// Enqueue the layer: y = fused_moe(p). "" on success, else the error.
std::string launch(const MoeProblem& p, int block_m, cudaStream_t stream);

// One line naming the launch configuration (SWORDFISH_DEBUG logs, tests).
std::string describe(const MoeProblem& p, int block_m);

}  // namespace moe
}  // namespace swordfish
