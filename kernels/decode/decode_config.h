// Decode-family geometry and tuning tables, shared by the kernels (device)
// and their launcher (host). Plain C++17 constexpr; no CUDA headers.
//
// Vocabulary (the kernel's comments use it):
//   column   an n64 strip of the output: one packed block column (N / 64 of them)
//   quad     four adjacent columns; the four warps of a CTA take one each
//   m-group  16 * MT consecutive rows of x / y (MT m16 tiles, 1..4)
//   unit     one packed block (k64 int4, k32 int8) of one quad: each warp of
//            the CTA streams the 2,048-byte block of its own column
//   segment  all K / block_k units of one (quad, m-group): one output tile
//
// The flat unit order is (quad, m-group, k-block), k fastest. A CTA owns a
// contiguous range of units; the accumulators flush (atomically, or as
// deterministic partials) whenever the range crosses a segment boundary.
#pragma once

#include "kernels/common/format.h"

namespace swordfish {
namespace decode {

inline constexpr int kWarps = 4;              // warps per CTA (one per column of the quad)
inline constexpr int kThreads = kWarps * 32;  // threads per CTA
inline constexpr int kMaxTiles = 4;           // m16 tiles per m-group (accumulators: 32 floats each)
inline constexpr int kUnitBytes = format::kBlockBytes;  // weight bytes per warp per unit (one block)

// k16 slices per unit: 4 (int4, k64) or 2 (int8, k32).
SF_HOST_DEVICE constexpr int slices_per_unit(int bits) { return format::block_k(bits) / format::kFragmentK; }

// Scale rows one unit can touch: int4 g32 covers two groups per k64 block.
SF_HOST_DEVICE constexpr int scale_rows_per_unit(int bits) { return bits == 4 ? 2 : 1; }

// Pipeline depth (stages in the per-warp ring) by bits and MT. Chosen so that
// shared memory admits 2-3 CTAs per SM on a 228 KB SM (H100/H200/B200) for
// MT <= 3; MT = 4 trades to 1 CTA with 3 stages. Tune on hardware.
SF_HOST_DEVICE constexpr int stages(int bits, int mt) {
  return bits == 4 ? (mt <= 2 ? 4 : 3) : (mt == 1 ? 5 : 4);
}

// Shared-memory layout of one stage of one warp, in bytes:
//   [weights 2048: 4 sub-tiles x 32 lanes x 16 B]            (4 sub-tiles, 32 lanes, 16 B)
//   [activations MT x slices x 512: 32 lanes x 16 B each]    (MT, SLICES, 32 lanes, 16 B)
//   [scales   rows x 32 lanes x 4 B]                         (ROWS, 32 lanes, 4 B)
//   [zeros    rows x 32 lanes x 4 B, only with zero points]  (ROWS, 32 lanes, 4 B)
// Every slot is written and read by the same lane (self-slot staging).
struct StageLayout {
  int act_offset, scale_offset, zero_offset, bytes;
};
SF_HOST_DEVICE constexpr StageLayout stage_layout(int bits, int mt, bool zeros) {
  const int act = kUnitBytes;
  const int scale = act + mt * slices_per_unit(bits) * 512;
  const int zero = scale + scale_rows_per_unit(bits) * 128;
  const int end = zero + (zeros ? scale_rows_per_unit(bits) * 128 : 0);
  return StageLayout{act, scale, zero, end};
}

// Dynamic shared memory of one CTA.
SF_HOST_DEVICE constexpr int smem_bytes(int bits, int mt, bool zeros) {
  return kWarps * stages(bits, mt) * stage_layout(bits, mt, zeros).bytes;
}

static_assert(smem_bytes(4, 1, true) * 3 <= 227 * 1024, "int4 MT=1 must fit 3 CTAs per SM");
static_assert(smem_bytes(4, 2, true) * 2 <= 227 * 1024, "int4 MT=2 must fit 2 CTAs per SM");
static_assert(smem_bytes(4, 3, true) * 2 <= 227 * 1024, "int4 MT=3 must fit 2 CTAs per SM");
static_assert(smem_bytes(4, 4, true) <= 227 * 1024, "int4 MT=4 must fit one CTA");
static_assert(smem_bytes(8, 1, true) * 3 <= 227 * 1024, "int8 MT=1 must fit 3 CTAs per SM");
static_assert(smem_bytes(8, 4, true) * 2 <= 227 * 1024, "int8 MT=4 must fit 2 CTAs per SM");

// ---- swapped-operand kernels (decode_swap.cuh, M <= kSwapMaxM): y^T = W x^T
// with the weight as the m16 A operand and up to 8 tokens as the n8 B operand.
inline constexpr int kSwapMaxM = 8;
// Launcher switch: false keeps every M on the kernels above.
inline constexpr bool kSwapEnabled = true;

// Deeper than stages(bits, 1): a swap stage holds 1 KB (int4) / 512 B (int8) of
// activations instead of 2 KB / 1 KB, so one more unit per warp stays in
// flight at the same 3 CTAs per SM. At M = 1 the int4 MT = 1 kernel (4 units
// per warp in flight) reaches 76% of the HBM ceiling and int8 (5) 96%, on the
// same 2 KB units: a Little's-law ratio, so bytes in flight matter here.
SF_HOST_DEVICE constexpr int swap_stages(int bits) { return bits == 4 ? 5 : 6; }

// One stage of one warp, in bytes:
//   [weights 2048]                                            (4 sub-tiles, 32 lanes, 16 B)
//   [activations slices/2 x 512: one ldmatrix.x4 per k32]     (K32, 32 lanes, 16 B) = (8 tokens, k32)
//   [scales, zeros: as stage_layout]
SF_HOST_DEVICE constexpr StageLayout swap_stage_layout(int bits, bool zeros) {
  const int act = kUnitBytes;
  const int scale = act + slices_per_unit(bits) / 2 * 512;
  const int zero = scale + scale_rows_per_unit(bits) * 128;
  const int end = zero + (zeros ? scale_rows_per_unit(bits) * 128 : 0);
  return StageLayout{act, scale, zero, end};
}

SF_HOST_DEVICE constexpr int swap_smem_bytes(int bits, bool zeros) {
  return kWarps * swap_stages(bits) * swap_stage_layout(bits, zeros).bytes;
}

static_assert(swap_smem_bytes(4, true) * 3 <= 227 * 1024, "int4 swap must fit 3 CTAs per SM");
static_assert(swap_smem_bytes(8, true) * 3 <= 227 * 1024, "int8 swap must fit 3 CTAs per SM");

// Epilogue kinds (Params::mode).
enum Mode : int {
  kModeAtomic = 0,    // red.global.add into y, which the prep kernel zeroed (or set to bias)
  kModeDirect = 1,    // deterministic, one CTA per segment: y = round(acc + bias), plain stores
  kModePartials = 2,  // deterministic, P parts per segment: fp32 partials, reduced by a second kernel
};

// Host-side heuristics (per launch): see decode_launch.cu.
inline constexpr int kMinUnitsPerCta = 4;        // fewer and prologue/flush overheads dominate
inline constexpr long long kMaxPartialBytes = 256ll << 20;  // deterministic partials workspace cap

}  // namespace decode
}  // namespace swordfish
