// Shared-memory layout and pipeline depth of the sm90 prefill kernel
// (prefill_sm90.cuh), by bit width, token tile BT, k64 slices per stage KS
// and consumer warpgroups CG (each owns 64 output columns: CTA tiles of 128
// or 192 columns). Plain C++ (no CUDA): the kernel, its host planner
// (prefill_sm90_plan.h) and the CPU tests read the same numbers.
#pragma once

#include "kernels/prefill/slice.h"

namespace swordfish {
namespace prefill {
namespace sm90 {

inline constexpr int kSmemLimit = 232448;  // sm90 opt-in shared memory per block
inline constexpr int kMaxStages = 8;
inline constexpr int kMinStages = 4;  // the depth the epilogue staging gives way to (epi_rows)
inline constexpr int kReserveBytes = 1024 + 2 * kMaxStages * 8;  // base alignment + barriers

// A CTA is one producer warpgroup and CG consumer warpgroups; consumer c owns
// output columns n0 + 64 c .. + 63 of the CTA's tile_n(CG) columns.
constexpr int consumer_threads(int cg) { return 128 * cg; }
constexpr int threads_for(int cg) { return 128 + consumer_threads(cg); }
constexpr int tile_n(int cg) { return 64 * cg; }
// Registers per thread after setmaxnreg (producer, consumers): 128 (40 + 2 x 232) = 504 and
// 128 (40 + 3 x 152) = 496 of the SM's 512 per thread slot.
constexpr int producer_regs(int) { return 40; }
constexpr int consumer_regs(int cg) { return cg == 2 ? 232 : 152; }
static_assert(producer_regs(2) + 2 * consumer_regs(2) <= 512 && producer_regs(3) + 3 * consumer_regs(3) <= 512,
              "setmaxnreg budgets fit the register file");

// Token tiles a CG has a kernel for: the 192-column tile has 152 registers per consumer thread,
// no room for BT >= 192's 96-128 accumulators plus two A buffers. BT = 192 is for the M that
// 256 and 128 tile poorly (M = 192, 576, 768: one, three, four m tiles where BT 256 needs a
// split tail or leaves SMs idle, prefill_sm90_plan.h prices the choice).
constexpr bool has_tile(int cg, int bt) {
  return (cg == 2 && (bt == 64 || bt == 128 || bt == 192 || bt == 256)) || (cg == 3 && (bt == 64 || bt == 128));
}

// Stages of stage_bytes that fit beside epi_bytes of epilogue staging.
constexpr int fit_stages(int stage_bytes, int epi_bytes) {
  const int fit = (kSmemLimit - kReserveBytes - epi_bytes) / stage_bytes;
  return fit < kMaxStages ? fit : kMaxStages;
}

// Token rows of the epilogue staging tile (per consumer warpgroup, 128 B per
// row): all BT when kMinStages stages fit beside a (BT, 64) tile, else the
// largest of BT / 2, BT / 4, ... (>= 64) that lets them fit; the epilogue then
// stores the tile in BT / rows passes through the one staging tile. Only int8
// needs it: at BT = 256 its (256, 64) tiles leave room for three k64 stages,
// at BT = 128 for three k128 stages.
constexpr int epi_rows(int bt, int cg, int stage_bytes) {
  for (int rows = bt; rows >= 64; rows /= 2)
    if (fit_stages(stage_bytes, cg * rows * 128) >= kMinStages) return rows;
  return bt;
}

template <int BITS, int BT, int KS, int CG = 2>
struct Layout {
  static_assert(has_tile(CG, BT), "token tile");
  static_assert(KS == 1 || KS == 2, "k64 slices per stage");
  static constexpr int kTileN = tile_n(CG);                // output columns per CTA
  static constexpr int kXTile = BT * 128;                  // one (BT, 64) 16-bit tile, 128 B per row
  static constexpr int kXBytes = KS * kXTile;              // (KS, BT, 64)
  static constexpr int kWBytes = CG * KS * kSliceBytes<BITS>;  // (CG n64 blocks, KS k64 slices)
  static constexpr int kSRowBytes = kTileN * 2;            // one staged scale row: kTileN 16-bit columns
  static constexpr int kSBytes = 2 * KS * kSRowBytes;      // (2 KS rows: group 32, kTileN columns) 16-bit
  static constexpr int kStageBytes = kXBytes + kWBytes + 2 * kSBytes;
  static constexpr int kEpiRows = epi_rows(BT, CG, kStageBytes);  // staged per epilogue pass
  static constexpr int kEpiBytes = CG * kEpiRows * 128;    // (CG warpgroups, kEpiRows, 64) 16-bit
  static constexpr int kStages = fit_stages(kStageBytes, kEpiBytes);
  static_assert(kStages >= 2, "at least a double-buffered pipeline");
  static_assert(BT % kEpiRows == 0 && kEpiRows % 8 == 0, "whole epilogue passes of whole 8-row swizzle atoms");
  static constexpr int kSmemBytes = kReserveBytes + kEpiBytes + kStages * kStageBytes;
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
// halves, where at least four k128 stages fit (int8 at BT = 128 fits four
// with a (64, 64) epilogue staging tile, three beside a (128, 64) one: those
// three measured 5-8% slower than its seven k64 stages at M = 128,
// cb85925:benchmarks/results/h200/2026-12-02-f/experiments/); one for BT >= 192, whose
// registers have no room for a second slice's A, and for the 192-column tile:
// at KS = 2 ptxas serialized its BT = 64 wgmmas (C7512); it seems to allocate
// the consumers within the 128 registers a 512-thread launch allows, not the
// 152 setmaxnreg gives them at run time.
template <int BITS, int BT, int CG = 2>
constexpr int slices_for() {
  if constexpr (BT > 128 || CG == 3) {
    return 1;
  } else {
    return Layout<BITS, BT, 2, CG>::kStages >= kMinStages ? 2 : 1;
  }
}

// KS of a (CG, token tile) at run time (0 for a tile the kernel does not have).
template <int BITS>
constexpr int slices_bits(int cg, int bt) {
  if (!has_tile(cg, bt)) return 0;
  if (cg == 2)
    return bt == 64    ? slices_for<BITS, 64, 2>()
           : bt == 128 ? slices_for<BITS, 128, 2>()
           : bt == 192 ? slices_for<BITS, 192, 2>()
                       : slices_for<BITS, 256, 2>();
  return bt == 64 ? slices_for<BITS, 64, 3>() : slices_for<BITS, 128, 3>();
}
constexpr int slices(int bits, int bt, int cg = 2) {
  return bits == 4 ? slices_bits<4>(cg, bt) : bits == 8 ? slices_bits<8>(cg, bt) : 0;
}

}  // namespace sm90
}  // namespace prefill
}  // namespace swordfish
