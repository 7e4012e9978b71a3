// Shared-memory layout and pipeline depth of the sm90 prefill kernel
// (prefill_sm90.cuh), by bit width, token tile BT and k64 slices per stage
// KS. Plain C++ (no CUDA): the kernel, its host planner
// (prefill_sm90_plan.h) and the CPU tests read the same numbers.
#pragma once

#include "kernels/prefill/slice.h"

namespace swordfish {
namespace prefill {
namespace sm90 {

inline constexpr int kThreads = 384;
inline constexpr int kTileN = 128;         // output columns per CTA
inline constexpr int kSmemLimit = 232448;  // sm90 opt-in shared memory per block
inline constexpr int kMaxStages = 8;

template <int BITS, int BT, int KS>
struct Layout {
  static_assert(BT == 64 || BT == 128 || BT == 256, "token tile");
  static_assert(KS == 1 || KS == 2, "k64 slices per stage");
  static constexpr int kXTile = BT * 128;                  // one (BT, 64) 16-bit tile, 128 B per row
  static constexpr int kXBytes = KS * kXTile;              // (KS, BT, 64)
  static constexpr int kWBytes = 2 * KS * kSliceBytes<BITS>;  // (2 n64 blocks, KS k64 slices)
  static constexpr int kSBytes = 2 * KS * kTileN * 2;      // (2 KS rows: group 32, 128 columns) 16-bit
  static constexpr int kStageBytes = kXBytes + kWBytes + 2 * kSBytes;
  static constexpr int kEpiBytes = 2 * BT * 128;           // (2 warpgroups, BT, 64) 16-bit
  static constexpr int kReserve = 1024 + 2 * kMaxStages * 8;  // base alignment + barriers
  static constexpr int kFit = (kSmemLimit - kReserve - kEpiBytes) / kStageBytes;
  static constexpr int kStages = kFit < kMaxStages ? kFit : kMaxStages;
  static_assert(kStages >= 2, "at least a double-buffered pipeline");
  static constexpr int kSmemBytes = kReserve + kEpiBytes + kStages * kStageBytes;
  static_assert(kSmemBytes <= kSmemLimit, "shared memory");
  // Offsets from the 1024-aligned base.
  static constexpr int kOffX = 0;
  static constexpr int kOffEpi = kOffX + kStages * kXBytes;
  static constexpr int kOffW = kOffEpi + kEpiBytes;
  static constexpr int kOffS = kOffW + kStages * kWBytes;
  static constexpr int kOffZ = kOffS + kStages * kSBytes;
  static constexpr int kOffBar = kOffZ + kStages * kSBytes;
  static_assert(kOffEpi % 1024 == 0 && kXBytes % 1024 == 0, "swizzle-128B tiles are 1024-byte aligned");
  static_assert(kOffW % 16 == 0 && kWBytes % 16 == 0 && kOffS % 16 == 0 && kOffBar % 8 == 0, "bulk copy alignment");
};

// k64 slices per pipeline stage (KS) of a token tile: two (k128 stages) for
// the small tiles, whose stage carries a fixed cost that a longer stage
// halves, where at least four k128 stages fit (int8 at BT = 128 fits three,
// and measured 5-8% slower than its seven k64 stages at M = 128,
// benchmarks/results/h200/2026-12-02-f/experiments/); one for BT = 256, whose
// registers have no room for a second slice's A.
template <int BITS, int BT>
constexpr int slices_for() {
  if constexpr (BT > 128) {
    return 1;
  } else {
    return Layout<BITS, BT, 2>::kStages >= 4 ? 2 : 1;
  }
}

// KS of a token tile at run time (0 for a BT the kernel does not have).
constexpr int slices(int bits, int bt) {
  if (bits == 4) return bt == 64 ? slices_for<4, 64>() : bt == 128 ? slices_for<4, 128>() : bt == 256 ? 1 : 0;
  if (bits == 8) return bt == 64 ? slices_for<8, 64>() : bt == 128 ? slices_for<8, 128>() : bt == 256 ? 1 : 0;
  return 0;
}

}  // namespace sm90
}  // namespace prefill
}  // namespace swordfish
