// The dense MoE path (high tokens per expert): dequantize every expert into a
// plain fp16/bf16 scratch weight and hand the token-sorted activations to a
// grouped GEMM; and the grouped path, which runs the same layout through the
// prefill mainloop on the packed experts. Host C++ interface; kernels and host
// side in moe_dense.cu.
//
// The grouped GEMM comes from the op layer (MoeProblem::grouped_gemm: torch's
// _grouped_mm, its CUTLASS kernel on sm90). One stream, no host
// synchronisation, no allocation here (CUDA-graph safe):
//   align (blocks of kDenseBlockM) -> offs, pos -> gathered activations a
//   -> W13 dequantized into (E, 2I, H) -> h = a @ W13[e]^T per expert run
//   -> a2 = act(h[:, :I]) * h[:, I:] -> W2 dequantized into (E, H, I)
//   -> o = a2 @ W2[e]^T -> y[t] = sum_j w[t, j] o[pos[t * top_k + j]] (fp32)
// No atomics: the output is bit-stable run to run (deterministic by
// construction).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/moe/moe_problem.h"

namespace swordfish {
namespace moe {

// Rows per padded expert run: the grouped GEMM needs no padding, so the
// smallest block moe_align makes.
inline constexpr int kDenseBlockM = 16;
// Experts the index kernel counts in shared memory (4 bytes each, under the 48 KiB static limit).
inline constexpr int kDenseMaxExperts = 8192;

long long dense_rows(const MoeProblem& p);

// "" when the dense path can run p (a grouped GEMM supplied, bf16 on sm90 /
// sm100, the formats the dense-tier dequant takes, H and I multiples of 8,
// E <= kDenseMaxExperts), else the
// reason naming the value. Shapes and flags only.
std::string dense_can_implement(const MoeProblem& p);

// Workspace: the sort, the gathered and activated rows, and one scratch of
// E * 2I * H elements that holds W13 and then W2 (the stream orders the reuse).
size_t dense_workspace_bytes(const MoeProblem& p);

// Enqueue the layer (align -> index -> gather -> dequant W13 -> GEMM -> act ->
// dequant W2 -> GEMM -> top-k sum). "" or the error.
std::string dense_launch(const MoeProblem& p, cudaStream_t stream);

// One line naming the configuration (SWORDFISH_DEBUG logs, tests).
std::string dense_describe(const MoeProblem& p);

// The grouped path: the same layout, sort, gather, activation and top-k sum,
// with runs padded to the prefill's token tile (prefill::grouped_tile_rows)
// and both GEMMs run by the prefill mainloop's grouped GEMM on the packed
// experts (prefill.h GroupedProblem): no dequantized scratch, no torch GEMM,
// bit-stable output. sm90a only; no act-order experts. Auto picks it from
// moe_sm90.hpp's grouped_min_avg_tokens; path="grouped" forces it.
int grouped_block_m(const MoeProblem& p);
std::string grouped_can_implement(const MoeProblem& p);
size_t grouped_workspace_bytes(const MoeProblem& p);
std::string grouped_launch(const MoeProblem& p, cudaStream_t stream);
std::string grouped_describe(const MoeProblem& p);

}  // namespace moe
}  // namespace swordfish
