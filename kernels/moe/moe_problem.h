// The one description of a fused-MoE layer that the MoE dispatcher
// (kernels/dispatch/moe_dispatch.h) and the MoE paths speak. Raw pointers
// only; no torch, no CUDA runtime types.
//
//   h[s]  = x[t] @ W13[e]^T                      s = t * top_k + j, e = local(topk_ids[t, j])
//   a[s]  = act(h[s, :I]) * h[s, I:]             (act: SiLU or erf GELU, on the gate half)
//   y[t]  = sum_j w[t, j] * (a[t * top_k + j] @ W2[e]^T)
//
// W13[e] is (2I, H) and W2[e] is (H, I) in nn.Linear terms; each expert is a
// packed format v1 weight (format.h) stacked along a leading expert axis:
// packed (E, N / 64, K / block_k, 512) int32, scales / zeros (E, K / group, N),
// perm (E, K) int32 (act-order: row k of expert e's packed weight is input
// feature perm[e, k]). A slot whose expert id is out of range, or maps to -1
// through expert_map, contributes nothing. w2 may take the padded act-order
// layout of a row-parallel shard (docs/FORMAT.md "Act-order shards"): K2 =
// w2_k() >= I packed rows, perm (E, K2) with -1 (or any entry outside [0, I))
// on pad rows, which meet a zero activation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/common/problem.h"

namespace swordfish {

// Values of fused_moe's `path` argument and of moe_select_path / last_moe_path
// (part of the op ABI; moe_path_names() lists the accepted names in this order
// from 1).
enum class MoePath : int {
  kAuto = 0,   // the MoE dispatcher's choice
  kFused = 1,  // the decode-machinery Stream-K expert GEMM (kernels/moe)
  kDense = 2,  // dequantize the experts + a grouped GEMM (kernels/moe/moe_dense.h)
  kGrouped = 3,  // the prefill mainloop's grouped GEMM on the packed experts (moe_dense.h grouped_*)
};

constexpr const char* moe_path_name(MoePath p) {
  switch (p) {
    case MoePath::kAuto: return "auto";
    case MoePath::kFused: return "fused";
    case MoePath::kDense: return "dense";
    case MoePath::kGrouped: return "grouped";
  }
  return "unknown";
}

enum class MoeActivation : int { kSilu = 0, kGelu = 1 };

// One stacked expert weight (w13 or w2).
struct MoeWeight {
  const int32_t* packed = nullptr;  // (E, N / 64, K / block_k, 512)
  const void* scales = nullptr;     // (E, K / group, N), dtype
  const void* zeros = nullptr;      // (E, K / group, N) folded zero points, or nullptr
  const int32_t* perm = nullptr;    // (E, K) act-order permutation, or nullptr
  int group = 128;                  // rows per stored scale row: 32, 64, 128 (or the channelwise replica)
  bool channelwise = false;         // one scale row replicated K / group times (row 0 is read)
};

// The grouped GEMM the dense path calls (the op layer supplies torch's): for
// expert runs e = 0 .. E - 1, rows [offs[e - 1], offs[e]) of a (rows, K) get
// out = a @ W[e]^T with W (E, N, K) row-major; out (rows, N) in the dtype,
// allocated by the callee and alive until the MoeProblem's run returns (the
// stream orders its reuse). Rows from offs[E - 1] on are not computed.
struct MoeGroupedGemm {
  void* ctx = nullptr;
  std::string (*run)(void* ctx, const void* a, long long rows, int K, const void* w, int N, int E,
                     const int32_t* offs, void** out) = nullptr;
};

struct MoeProblem {
  const void* x = nullptr;             // (T, H) row-major, dtype
  MoeWeight w13;                       // K = H, N = 2I ([gate | up] along N)
  MoeWeight w2;                        // K = w2_k(*this) (I, or K_pad), N = H
  const void* topk_weights = nullptr;  // (T, top_k) fp32 (weights_f32) or dtype
  const void* topk_ids = nullptr;      // (T, top_k) int32, or int64 (ids_int64)
  const int32_t* expert_map = nullptr;  // (map_len) global id -> local expert or -1, or nullptr
  void* y = nullptr;                   // (T, H) row-major, dtype

  int T = 0, top_k = 1;
  int E = 0;          // local experts (the weights' leading axis)
  int map_len = 0;    // global experts when expert_map is set (ids are checked against it), else 0
  int H = 0, I = 0;
  int I_w2 = 0;       // w2's packed K (padded act-order, needs w2.perm), 0 means I
  int bits = 4;
  DType dtype = DType::kBFloat16;
  bool weights_f32 = true;
  bool ids_int64 = false;
  MoeActivation activation = MoeActivation::kSilu;
  bool weights_on_input = false;  // router weight scales x's row before w13 (top_k == 1 only)
  bool deterministic = false;     // no atomics: bit-identical run to run

  const MoeGroupedGemm* grouped_gemm = nullptr;  // the dense path's GEMM (nullptr: the dense path is refused)

  void* workspace = nullptr;  // from the caller's allocator, >= workspace_bytes(); 256-byte aligned
  size_t workspace_bytes = 0;

  int device = -1;  // the CUDA device of every pointer (-1: unset, refused by moe_run)
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
};

// w2's packed K: I, or K_pad >= I when w2 holds the padded act-order layout.
constexpr int w2_k(const MoeProblem& p) { return p.I_w2 > 0 ? p.I_w2 : p.I; }

// The experts top_k chooses from: the global ones (expert_map's length) under a map, else E.
constexpr long long global_experts(const MoeProblem& p) { return p.expert_map != nullptr ? p.map_len : p.E; }

}  // namespace swordfish
