// Host API of the dense tier: dequantize the packed weight into a plain
// fp16/bf16 scratch weight (dense_dequant.cuh, launched by
// dense_dequant_launch.cu), then let cuBLASLt run y = x @ W^T (+ bias) with
// fp32 accumulation (dense_gemm.cpp). Plain C++: no CUDA or cuBLAS headers,
// so the dispatcher includes it freely.
//
// Every call is CUDA-graph safe: no host synchronisation, no allocation (the
// scratch weight and cuBLAS's workspace both come from p.workspace), work
// enqueued on the caller's stream only.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/common/problem.h"

namespace swordfish {
namespace dense {

// Layout of a dequantized weight.
enum class Layout : int {
  kNK = 0,  // W[n][k], (N, K) row-major: nn.Linear.weight (the dequantize op)
  kKN = 1,  // W^T[k][n], (K, N) row-major (the act-order GEMM: row perm[k] gets packed row k)
};

// cuBLASLt workspace handed out of p.workspace: what cuBLAS itself asks for
// on Hopper/Blackwell (32 MiB) so that split-K algorithms stay available.
inline constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;
// Alignment of each piece of p.workspace (cuBLASLt wants 256-byte pointers).
inline constexpr size_t kWorkspaceAlign = 256;

// "" when the dequant kernel can handle p's weight (bits, K, N, group,
// channelwise, dtype), else the reason naming the offending value. Shapes only.
std::string can_implement_dequant(const GemmProblem& p);

// Dequantize p's weight (p.packed, p.scales, p.zeros, p.perm, p.K, p.N,
// p.bits, p.group, p.channelwise, p.dtype) into `out` in `layout`, original
// input-feature order. `out` must be 16-byte aligned. Enqueued on `stream` (a
// cudaStream_t); returns "" or an error message.
std::string dequantize(const GemmProblem& p, void* out, Layout layout, void* stream);

// dequantize() over `experts` weights of p's shape stacked along a leading
// axis (the dense MoE path): packed, scales / zeros and perm advance by one
// expert's extent per expert, and expert e lands at out + e * K * N. One launch.
std::string dequantize_experts(const GemmProblem& p, int experts, void* out, Layout layout, void* stream);

// "" when the dense tier can run the GEMM p (the dequant conditions plus M).
std::string can_implement(const GemmProblem& p);

// Scratch weight (K * N elements) + cuBLASLt workspace, each 256-byte aligned.
size_t workspace_bytes(const GemmProblem& p);

// The layout the GEMM path dequantizes into: kNK (cuBLAS's "T" operand, as
// torch's F.linear) unless act-order, where kKN keeps the writes coalesced.
Layout gemm_layout(const GemmProblem& p);

// Dequantize into p.workspace, then cuBLASLt: y = x @ W^T (+ bias, as the
// cuBLASLt BIAS epilogue when the bias is 16-byte aligned, else add_bias()
// after the GEMM), fp32 accumulation, output in p.dtype. With
// p.deterministic, only algorithms without split-K reduction are used.
// Returns "" or an error message.
std::string launch(const GemmProblem& p, void* stream);

// y += bias broadcast over rows (dense_bias.cu): the fallback for a bias the
// epilogue cannot take. "" or an error message.
std::string add_bias(const GemmProblem& p, void* stream);

}  // namespace dense
}  // namespace swordfish
