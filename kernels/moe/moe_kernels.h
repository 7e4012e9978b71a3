// Host-visible descriptions of the fused-MoE kernels: their Params and the
// handles the launcher (moe_launch.cu) reaches the instances through. Plain
// C++ (no CUDA headers), so the launcher never instantiates a mainloop.
//
// Kernels of one layer, in stream order (each launched with programmatic
// dependent launch on sm_90+, each waiting for the one before it before it
// reads what that one wrote; w2 on 8-row blocks copies its first weights
// before its wait, and act releases it before its own):
//   align_kernel     (moe_align.cuh)  CTA 0: stable counting sort of the slots
//                    by local expert -> sorted_ids / expert_ids / num_post_pad;
//                    CTAs 1..: zero the fp32 accumulators, gather act-order x.
//   gemm_kernel      (moe_gemm.cuh)   w13: h[slot] (+)= x[row(slot)] @ W13[e]^T
//                    (blocks of 8: swap_gemm_kernel, moe_swap.cuh)
//   act_kernel       (moe_act.cuh)    a[slot] = act(h[slot, gate]) * h[slot, up]
//   gemm_kernel      (moe_gemm.cuh)   w2: y32[token] += w * (a[slot] @ W2[e]^T)
//                    (blocks of 8: swap_gemm_kernel, its early instance)
//   finalize_kernel  (moe_act.cuh)    y = round(y32), or the ordered sum of
//                                     the per-slot pieces (deterministic)
#pragma once

#include <cstdint>

namespace swordfish {
namespace moe {

// Rows per block of the swapped-operand expert GEMM (moe_swap.cuh: the block's
// tokens are the n8 operand); gemm_kernel's blocks are 16 MT rows.
inline constexpr int kSwapBlockM = 8;

// Epilogue modes of the expert GEMM.
enum GemmMode : int {
  kModeAtomic = 0,  // persistent balanced split of the flat units; red.global.add.v2.f32 into out
  kModeSplit = 1,   // deterministic: CTA c owns split c % splits of segment c / splits and stores
                    // its fp32 piece into plane (c % splits) of out; the consumer sums planes in order
};

// The expert GEMM: out (+)= rows(x) @ W[e]^T over token-sorted blocks of
// 16 MT rows (or kSwapBlockM). Field names K .. fold_mask are the ones decode::mainloop reads.
struct GemmParams {
  const uint16_t* x;           // activation rows: row r of the GEMM is x[(slot / row_div) * K ..]
  const uint8_t* packed;       // (E, N / 64, K / block_k, 2048 B)
  const uint16_t* scales;      // (E, K / group, N)
  const uint16_t* zeros;       // (E, K / group, N) or nullptr
  long long expert_packed;     // bytes per expert slab of packed
  long long expert_scales;     // elements per expert slab of scales / zeros
  const int32_t* sorted_ids;   // moe_align's
  const int32_t* expert_ids;
  const int32_t* num_post_pad;
  const void* topk_weights;    // (T * top_k): read when scale_out (fp32 or the dtype, weights_f32)
  float* out;                  // atomic: (rows_out, N) fp32; split: (splits, num_slots, N) fp32 planes
  long long plane;             // split: elements per plane (num_slots * N)
  int K, N;
  int kblocks;                 // K / block_k
  int ncols;                   // N / 64
  int quads;                   // ceil(ncols / 4)
  int gshift;                  // log2(group); 31 channelwise
  int fold_mask;               // FOLD instances (decode::Params)
  int evict_first;             // 1: each expert's weights are read by one block (T * top_k <= block_m)
  int num_slots;               // T * top_k: sorted ids >= this are padding
  int num_experts;             // E: expert ids outside [0, E) are skipped
  int row_div;                 // x row of a slot: slot / row_div (w13: top_k; act-order / w2: 1)
  int out_div;                 // atomic out row of a slot: slot / out_div (w13: 1; w2: top_k)
  int scale_out;               // multiply by the slot's router weight (w2 without weights_on_input)
  int weights_f32;
  int mode;                    // GemmMode
  int splits;                  // kModeSplit: splits per segment (<= kblocks)
};

// A kernel instance as the launcher sees it.
struct KernelHandle {
  const void* fn = nullptr;
  int smem_bytes = 0;
};

// The expert GEMM instances of one bit width: dtype x MT (1, 2) x zero points
// x FOLD (MT = 1 only; null handle otherwise).
KernelHandle gemm_handle_int4(bool bf16, int mt, bool zeros, bool fold);
KernelHandle gemm_handle_int8(bool bf16, int mt, bool zeros, bool fold);

// The swapped-operand instances (moe_swap.cuh, blocks of kSwapBlockM rows):
// dtype x zero points x FOLD.
// early: the w2 instance that copies its first weights before its dependency wait.
KernelHandle swap_handle_int4(bool bf16, bool zeros, bool fold, bool early);
KernelHandle swap_handle_int8(bool bf16, bool zeros, bool fold, bool early);

}  // namespace moe
}  // namespace swordfish
