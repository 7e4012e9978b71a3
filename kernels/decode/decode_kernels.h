// Host-visible descriptions of the decode kernels: their Params and the
// handles the launcher uses to reach the instances compiled in
// decode_gemm_int4.cu / decode_gemm_int8.cu. Plain C++ (no CUDA headers), so
// the launcher never instantiates the mainloop itself.
#pragma once

#include <cstdint>

namespace swordfish {
namespace decode {

// Arguments -> Params: what the launcher derives from a GemmProblem.
struct Params {
  const uint16_t* x;       // (M, K) activations (the permuted copy under act-order), dtype bits
  const uint8_t* packed;   // format v1, (N/64, K/block_k, 2048 B)
  const uint16_t* scales;  // (K / group, N)
  const uint16_t* zeros;   // (K / group, N) folded zero points, or nullptr (then unused)
  const uint16_t* bias;    // (N) or nullptr: read by kModeDirect only
  uint16_t* y;             // (M, N)
  float* partials;         // (pieces, M, N) fp32: kModePartials only (decode_config.h: first_cta)
  long long units;         // quads * mgroups * kblocks
  int M, K, N;
  int kblocks;             // K / block_k
  int ncols;               // N / 64
  int mgroups;             // ceil(M / (16 * MT))
  int gshift;              // log2(group); 31 for channelwise (every k reads scale row 0)
  int mode;                // Mode (decode_config.h)
  int evict_first;         // 1: weights are read once (evict_first); 0: several m-groups re-read them
  int fold_mask;           // FOLD kernels: fold after k-block kb when ((kb + 1) & fold_mask) == 0
                           // (units per group - 1; channelwise: units per 128 rows - 1)
};

// A kernel instance as the launcher sees it.
struct KernelHandle {
  const void* fn = nullptr;  // &gemm_kernel<...>
  int smem_bytes = 0;
  int stages = 0;
};

// The instances of one bit width: dtype x MT 1..4 x zero points, and the
// FOLD variants (fp32 per-group scale fold, MT = 1..kFoldMaxTiles; null handle otherwise).
KernelHandle gemm_handle_int4(bool bf16, int mt, bool zeros, bool fold);
KernelHandle gemm_handle_int8(bool bf16, int mt, bool zeros, bool fold);

// The swapped-operand instances (decode_swap.cuh, M <= kSwapMaxM): dtype x
// zero points x FOLD, and for int4 x CTA-shared activations (share: M >= kSwapShareMinM).
KernelHandle swap_handle_int4(bool bf16, bool zeros, bool fold, bool share);
KernelHandle swap_handle_int8(bool bf16, bool zeros, bool fold);

}  // namespace decode
}  // namespace swordfish
