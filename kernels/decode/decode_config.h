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

// ---- CTA-shared activations (gemm_kernel, every M the swap kernel does not take).
// The four warps of a CTA stream the same unit at the same time (the same
// m-group and k-block, each its own column of the quad), so they need the same
// activation tile. Lane-local staging copies it four times per CTA through L1
// (16 scattered 32-byte row pieces per LDGSTS); shared staging copies it once,
// coalesced (every thread one 16-byte chunk per 16 rows of int4), into one
// region of the CTA's stage that all four warps ldmatrix from. The price is one
// CTA barrier per unit (detail::run_ring<S, true>): a copy by one thread is
// read by the others, and a slot is refilled only after all four warps are done.
// Weights and scales stay lane-local. false restores the lane-local layout
// (stage_layout / stages above) everywhere.
inline constexpr bool kShareActs = true;

// Ring depth with shared activations. One unit less is in flight across the
// wait than with lane-local staging (the refill follows the barrier), and a
// stage is smaller, so the rings are deeper: int4 MT 1/2 keep 3 CTAs per SM
// (the register limit of MT = 2) with 5/4 units in flight per warp at the
// wait, MT 3/4 keep 2.
SF_HOST_DEVICE constexpr int shared_stages(int bits, int mt) {
  return bits == 4 ? (mt == 2 ? 5 : 6) : (mt == 1 ? 7 : 6);
}

// One CTA stage with shared activations, in bytes:
//   [activations MT x 16 rows x block_k, row-major, 128-byte-line swizzle]  (MT*16, BK)
//   [warp 0 slot] .. [warp 3 slot], a slot = [weights 2048][scales rows x 128][zeros rows x 128]
// The swizzle (detail::swizzle_128) XORs the 16-byte chunk index inside each
// 128-byte line with the line index mod 8: an ldmatrix phase (8 rows, one
// chunk column) and a warp's coalesced fill both touch 8 distinct bank groups.
struct SharedStageLayout {
  int warp_offset;   // bytes before warp 0's slot (= the activation tile)
  int warp_bytes;    // bytes per warp slot
  int scale_offset;  // in a warp slot
  int zero_offset;   // in a warp slot
  int bytes;         // the whole stage
};
// A shared stage with `act` bytes of activations ahead of the four warp slots.
SF_HOST_DEVICE constexpr SharedStageLayout shared_layout_after(int act, int bits, bool zeros) {
  const int scale = kUnitBytes;
  const int zero = scale + scale_rows_per_unit(bits) * 128;
  const int slot = zero + (zeros ? scale_rows_per_unit(bits) * 128 : 0);
  return SharedStageLayout{act, slot, scale, zero, act + kWarps * slot};
}
SF_HOST_DEVICE constexpr SharedStageLayout shared_stage_layout(int bits, int mt, bool zeros) {
  return shared_layout_after(mt * 16 * format::block_k(bits) * 2, bits, zeros);
}

SF_HOST_DEVICE constexpr int shared_smem_bytes(int bits, int mt, bool zeros) {
  return shared_stages(bits, mt) * shared_stage_layout(bits, mt, zeros).bytes;
}

// gemm_kernel's ring depth and dynamic shared memory in the chosen staging mode.
SF_HOST_DEVICE constexpr int gemm_stages(int bits, int mt, bool share) {
  return share ? shared_stages(bits, mt) : stages(bits, mt);
}
SF_HOST_DEVICE constexpr int gemm_smem_bytes(int bits, int mt, bool zeros, bool share) {
  return share ? shared_smem_bytes(bits, mt, zeros) : smem_bytes(bits, mt, zeros);
}

// __launch_bounds__ minimum CTAs per SM: with shared activations, MT <= 2
// fits 3 CTAs by shared memory, so the registers must allow 3 too (<= 168),
// except FOLD at MT = 2, whose second accumulator set (64 more floats) spilled
// at 168 (ptxas, nvcc 13.0): 2 CTAs (<= 255). 0 elsewhere: no minimum,
// ptxas' default register heuristic (an explicit 1 changes it: +8..35
// registers on the lane-local kernels, measured with nvcc 13.0).
SF_HOST_DEVICE constexpr int gemm_min_ctas(int mt, bool share, bool fold = false) {
  return !share || mt > 2 ? 0 : fold && mt == 2 ? 2 : 3;
}

// The fp32 per-group scale fold (gemm_kernel's FOLD instances) runs for MT <= this
// many m16 tiles: each tile keeps a second accumulator set (raw values and row sums).
inline constexpr int kFoldMaxTiles = 2;
// ... and at MT = 2 (M = 17-32) only on layers of at most this many weights per SM
// (69 M on the H200's 132 SMs: 70B o, 67 M, folds; 70B qkv, 84 M, does not): FOLD at
// MT = 2 needs 220-247 registers, so 2 CTAs per SM instead of 3. Measured on the
// H200 (2026-12-03-d, experiments/ab_fold2: FOLD at MT = 2 everywhere against
// nowhere, M = 17 / 24 / 32, int4 and int8 g128 bf16): 8B o 0.85-0.87x (int4) and
// 0.91-0.94x (int8), 8B qkv 0.93-0.96x at M = 24-32, 8B down 0.96-0.97x, 70B o
// 0.94-0.97x (int4); the larger layers gain nothing at M = 24-32 and lose at
// M = 17 (8B gate_up 1.05x, 70B qkv 1.03x, 70B gate_up / down 1.07-1.12x), where
// 3 CTAs per SM stream better.
inline constexpr long long kFoldMt2MaxWeightsPerSm = 1LL << 19;

// CTAs per 228 KB SM (H100 / H200 / B200) by shared memory, with the 1 KB each CTA reserves.
SF_HOST_DEVICE constexpr int ctas_per_sm(int smem) { return 228 * 1024 / (smem + 1024); }
static_assert(ctas_per_sm(shared_smem_bytes(4, 1, true)) >= 3, "shared int4 MT=1: 3 CTAs per SM");
static_assert(ctas_per_sm(shared_smem_bytes(4, 2, true)) >= 3, "shared int4 MT=2: 3 CTAs per SM");
static_assert(ctas_per_sm(shared_smem_bytes(4, 3, true)) >= 2, "shared int4 MT=3: 2 CTAs per SM");
static_assert(ctas_per_sm(shared_smem_bytes(4, 4, true)) >= 2, "shared int4 MT=4: 2 CTAs per SM");
static_assert(ctas_per_sm(shared_smem_bytes(8, 1, true)) >= 3, "shared int8 MT=1: 3 CTAs per SM");
static_assert(ctas_per_sm(shared_smem_bytes(8, 2, true)) >= 3, "shared int8 MT=2: 3 CTAs per SM");
static_assert(ctas_per_sm(shared_smem_bytes(8, 3, true)) >= 3, "shared int8 MT=3: 3 CTAs per SM");
static_assert(ctas_per_sm(shared_smem_bytes(8, 4, true)) >= 2, "shared int8 MT=4: 2 CTAs per SM");
static_assert(shared_stage_layout(8, 1, false).warp_offset % 1024 == 0 && kUnitBytes % 128 == 0,
              "the activation tile spans whole 1 KB swizzle blocks; warp slots start on 128-byte lines");

// ---- swapped-operand kernels (decode_swap.cuh, M <= kSwapMaxM): y^T = W x^T
// with the weight as the m16 A operand and up to 8 tokens as the n8 B operand.
inline constexpr int kSwapMaxM = 8;
// M from which swap_kernel's atomic flush adds 16-byte runs (detail::transpose_runs: 12 shuffles per
// lane, two 16-byte reductions per lane instead of eight 4-byte ones). Below it the shuffles cost more
// than the atomics they save (runs at every M: 1.00-1.03x the time at M = 1-4, 2026-12-03-e
// experiments/ab_swap_runs/); from it they pay: 0.88-0.98x on int4 8B qkv / o / down at M = 5-8, the
// large layers unchanged (cb85925:benchmarks/results/h200/2026-12-03-g/, call 3).
inline constexpr int kSwapRunsMinM = 5;
// Launcher switch: false keeps every M on the kernels above.
inline constexpr bool kSwapEnabled = true;

// Deeper than stages(bits, 1): a swap stage holds 1 KB (int4) / 512 B (int8) of
// activations instead of 2 KB / 1 KB, so one more unit per warp stays in
// flight at the same 3 CTAs per SM. At M = 1 the int4 MT = 1 kernel (4 units
// per warp in flight) reaches 76% of the HBM ceiling and int8 (5) 96%, on the
// same 2 KB units: a Little's-law ratio, so bytes in flight matter here.
SF_HOST_DEVICE constexpr int swap_stages(int bits) { return bits == 4 ? 5 : 6; }

// CTAs per SM the swap kernel's shared memory admits (static_asserts below), and
// its __launch_bounds__ minimum: ptxas must then stay within 168 registers, so a
// change cannot silently cost a CTA per SM. Today's instances use far fewer (96
// on int4 bf16 FOLD, nvcc 13.0, the same count as without the minimum).
inline constexpr int kSwapCtasPerSm = 3;

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

static_assert(swap_smem_bytes(4, true) * kSwapCtasPerSm <= 227 * 1024, "int4 swap must fit 3 CTAs per SM");
static_assert(swap_smem_bytes(8, true) * kSwapCtasPerSm <= 227 * 1024, "int8 swap must fit 3 CTAs per SM");

// int4: the swap kernel with CTA-shared activations (as gemm_kernel's kShareActs) from this M up.
// Lane-local staging copies the unit's (8 tokens, k64) slice once per warp, four times per CTA: at
// M = 8 that is 1 KB of activations per 2 KB weight unit and warp, and a timing-only build that
// staged token 0 alone ran 0.885-0.955x the time at M = 8 (0.965-1.00x at M = 4, none at M = 2;
// cb85925:benchmarks/results/h200/2026-12-04-d call 4). Shared, warps 0 .. NX - 1 each copy one 512-byte
// ldmatrix block of the slice into the CTA's stage, all four read it, and the ring pays one CTA
// barrier per unit (detail::run_ring<S, true>). Measured against lane-local (call 5, 4 rounds,
// eight layers): int4 M = 8 0.945-0.972x on six layers, 1.008x / 1.022x on 8B down / qkv
// (geometric mean 0.972x); M = 2 and 4 1.01-1.06x (the barrier, with little to save); int8
// (a k32 unit: half the activation bytes per weight byte) 0.99-1.07x at M = 2-8. So int4 only,
// M = 8 (M = 5-7 not measured); int8 has no shared instances.
inline constexpr int kSwapShareMinM = 8;

// Ring depth with shared activations: one more than lane-local, so that as many units are in
// flight per warp at the wait (the refill follows the barrier), in less shared memory (one
// activation slice per stage instead of four).
SF_HOST_DEVICE constexpr int swap_shared_stages(int bits) { return swap_stages(bits) + 1; }

// One CTA stage of the shared swap kernel: shared_stage_layout's warp slots behind the
// (8 tokens, block_k) activation slice as NX ldmatrix blocks of 512 B (the lane-local layout).
SF_HOST_DEVICE constexpr SharedStageLayout swap_shared_layout(int bits, bool zeros) {
  return shared_layout_after(8 * format::block_k(bits) * 2, bits, zeros);
}

SF_HOST_DEVICE constexpr int swap_kernel_stages(int bits, bool share) {
  return share ? swap_shared_stages(bits) : swap_stages(bits);
}
SF_HOST_DEVICE constexpr int swap_kernel_smem_bytes(int bits, bool zeros, bool share) {
  return share ? swap_shared_stages(bits) * swap_shared_layout(bits, zeros).bytes : swap_smem_bytes(bits, zeros);
}

static_assert(swap_kernel_smem_bytes(4, true, true) * kSwapCtasPerSm <= 227 * 1024,
              "the shared int4 swap kernel must fit 3 CTAs per SM");
static_assert(swap_shared_layout(4, false).warp_offset == 2 * 512,
              "the shared activation slice is the lane-local one: one 512-byte ldmatrix block per k32");

// Epilogue kinds (Params::mode).
enum Mode : int {
  kModeAtomic = 0,    // red.global.add into y, which the prep kernel zeroed (or set to bias)
  kModeDirect = 1,    // deterministic, one CTA per segment: y = round(acc + bias), plain stores
  kModePartials = 2,  // deterministic, the atomic mode's balanced split: each CTA stores its fp32 piece
                      // of every segment it touches, reduce_kernel sums a segment's pieces in CTA order
};

// The CTA whose balanced range [b * units / grid, (b + 1) * units / grid) holds
// flat unit u: the largest b with b * units / grid <= u. In kModePartials a
// CTA's piece of segment s is plane b - first_cta(s * kblocks), and the
// segment has first_cta(s * kblocks + kblocks - 1) - first_cta(s * kblocks) + 1
// pieces; the kernels and reduce_kernel derive both from this one formula.
SF_HOST_DEVICE constexpr long long first_cta(long long u, long long units, long long grid) {
  const long long x = (u + 1) * grid - 1;
  // 32 bits wherever they suffice (every decode-sized launch): on the GPU a
  // 64-bit division is a subroutine, a long dependent chain on a CTA's tail.
  if (x <= 0xffffffffLL && units <= 0xffffffffLL) return static_cast<unsigned>(x) / static_cast<unsigned>(units);
  return x / units;
}

// Planes of fp32 pieces a kModePartials launch may write: no segment of
// `kblocks` units spans more than floor((kblocks - 1) * grid / units) + 2 CTAs
// (each holds at least floor(units / grid) >= 1 units), nor more than the grid.
SF_HOST_DEVICE constexpr long long max_pieces(long long kblocks, long long units, long long grid) {
  const long long bound = (kblocks - 1) * grid / units + 2;
  return bound < grid ? bound : grid;
}

static_assert(first_cta(0, 10, 3) == 0 && first_cta(2, 10, 3) == 0 && first_cta(3, 10, 3) == 1 &&
                  first_cta(5, 10, 3) == 1 && first_cta(6, 10, 3) == 2 && first_cta(9, 10, 3) == 2,
              "first_cta inverts the balanced split b * units / grid");

// Weight units per warp gemm_kernel (M > 8) pulls into L2 before its
// grid-dependency wait (detail::enter_dependent): none. Without the prefetch it
// measured 0.987x the time over M = 9-64 (96 points, int4 + int8; 0.87-0.92x on
// 8B qkv / o / down at M = 9-16, up to 1.05x on a few points;
// results/h200/2026-12-03-b/experiments/ab4_nopf_gemm). The swap kernel (M <= 8)
// keeps prefetching its whole ring: without it, 1.00-1.09x slower on seven of
// eight layers at M = 1 (ab2_decode_decomp, column nopf).
inline constexpr int kGemmPrefetchUnits = 0;

// Host-side heuristics (per launch): see decode_launch.cu.
inline constexpr int kMinUnitsPerCta = 4;        // fewer and prologue/flush overheads dominate
inline constexpr long long kMaxPartialBytes = 256ll << 20;  // deterministic partials workspace cap
// Deterministic mode: one CTA per segment (kModeDirect, no workspace, no reduce
// kernel) when its waves of occupancy x SMs CTAs are at least this full;
// otherwise the atomic mode's balanced split with fp32 pieces (kModePartials).
inline constexpr double kDirectMinWaveFill = 0.9;
// kModePartials: segments x floor(grid / segments) CTAs (none spans two
// segments) instead of the flat split's grid when that keeps this share of it.
inline constexpr double kAlignedMinFill = 0.9;

}  // namespace decode
}  // namespace swordfish
