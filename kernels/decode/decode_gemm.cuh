// The decode mainloop: y (+)= x @ W^T for small M, streaming packed format v1
// weights at HBM speed through mma.sync.m16n8k16. Host twin: decode_launch.cu.
//
// The pieces live beside it: decode/mainloop.cuh (staging ring, dequant, MMA,
// FOLD over a unit range, for any row source) and decode/epilogue.cuh (the
// flush modes); this file holds the work split and the dense kernel that
// binds them: rows of x are rows m (DenseSource), y rows m (DenseEpilogue).
//
// One kernel template serves every decode regime (M <= 8 runs the
// swapped-operand twin in decode_swap.cuh instead); MT (m16 tiles per m-group,
// 1..4) picks the regime: MT = 1 for M <= 16, 2 / 3 for M <= 32 / 48 (one
// dequantized weight stream shared by the tiles), 4 for M <= 64, and several
// m-groups beyond. Work is a flat list of units (decode_config.h): a
// persistent grid splits it evenly, so split-K depth follows from the grid
// (occupancy x SM count) and the shape, with no tail wave.
//
// A CTA is 4 warps; warp w streams column 4 q + w of quad q, and all four
// walk the CTA's units in the same order (same m-group and k-block at once).
// Weights and scales are staged per warp: every lane copies exactly the
// 16-byte weight slots it reads back itself, and 4 bytes of each scale row,
// which ldmatrix.trans then reads across the warp. Activations, which the
// four warps share, are staged one of two ways (SHARE = kShareActs,
// decode_config.h):
//   lane-local  each warp its own S-stage ring, each lane its own ldmatrix
//               rows' copies (four copies per CTA); a stage is one commit
//               group, no CTA barrier, two __syncwarp per unit (before the
//               refill, after cp.async.wait_group: detail::run_ring).
//   shared      one S-stage ring per CTA: the unit's (MT x 16, BK) tile,
//               copied once by all 128 threads (coalesced 16-byte chunks,
//               swizzle_128) and read by every warp's ldmatrix; one CTA
//               barrier per unit (detail::run_ring<S, true>).
//
// Per unit and warp (int4: k64, int8: k32):
//   weights  4 x LDGSTS.128 (evict_first) -> 4 x LDS.128 -> LOP3 dequant
//   x        lane-local: MT x slices x LDGSTS.128 (only rows < M); shared:
//            MT (int4) / MT/2 (int8) x LDGSTS.128 per thread for the whole CTA
//            -> ldmatrix.x4
//   scales   1-2 x LDGSTS.32 (+ zeros) -> ldmatrix.x4.trans (detail::scale_columns) -> 8 x PRMT
//   math     8 x MT HMMA.16816 per k16 slice
// FOLD variant (MT <= kFoldMaxTiles, every format but int4 g32; at MT = 2 only
// on layers the launcher's use_fold() picks): the MMAs take the raw
// LOP3 / PRMT values (dequant::kRawOffset) and the scale, zero point and
// offset are applied to fp32 accumulators once per group (fold()), which
// removes the per-pair scale multiply and, for int4 bf16 / int8 fp16, the
// bias fma: ~260 instead of ~415 instructions per int4 unit (SASS, 2026-12-02;
// the clear-free fold has trimmed it since). Its weights are never rounded to
// the dtype (more accurate than the reference; one-hot inputs still reproduce
// the reference's rounded weights exactly).
// Epilogue at each segment boundary: 16-byte red.global.add runs (atomic
// mode, detail::red_row_runs), or plain stores of rounded results / fp32
// partials (deterministic).
#pragma once


#include <cstdint>
#include <type_traits>

#include "kernels/common/format.h"
#include "kernels/common/ptx.cuh"
#include "kernels/decode/decode_config.h"
#include "kernels/decode/decode_kernels.h"
#include "kernels/decode/epilogue.cuh"
#include "kernels/decode/mainloop.cuh"

namespace swordfish {
namespace decode {

namespace detail {

// ---- work split, shared by gemm_kernel and swap_kernel (decode_swap.cuh); the stage ring is in mainloop.cuh

// This CTA's units [u0, u1) of the flat list (decode_config.h): a balanced
// slice of p.units over the grid. kModeDirect launches one CTA per segment, so
// there the slice is segment blockIdx.x, written without the division (one
// formula for all modes changes ptxas' register allocation of the swap and
// gemm instances by -8..+10: not taken without a timing run).
SF_DEVICE void cta_units(const Params& p, long long& u0, long long& u1) {
  if (p.mode == kModeDirect) {
    u0 = static_cast<long long>(blockIdx.x) * p.kblocks;
    u1 = u0 + p.kblocks;
  } else {
    u0 = static_cast<long long>(blockIdx.x) * p.units / gridDim.x;
    u1 = static_cast<long long>(blockIdx.x + 1) * p.units / gridDim.x;
  }
}

// kModePartials: the plane of this CTA's piece of the segment its range starts
// in, which begins at flat unit seg_start (decode_config.h first_cta). Every
// later segment it touches starts inside its range: there it is the first CTA,
// plane 0. Computed once, after the dependency wait, off the flush's path. (This
// placement and the reduce kernel's uniform piece count, together, took int8
// 8B qkv M = 64 deterministic from 23.4 to 21.1 us; 2026-12-03-f call 5.)
SF_DEVICE int first_piece(const Params& p, long long seg_start) {
  return p.mode == kModePartials ? static_cast<int>(blockIdx.x - first_cta(seg_start, p.units, gridDim.x)) : 0;
}

// The units [u0, u1) warp `warp` streams: the CTA's range cut to the quads q
// where its column 4 q + warp exists (the last quad may hold fewer than four
// columns). Returns how many (0: none). mgroups is p.mgroups, or the constant 1
// of a kernel with one m-group (swap_kernel), which the compiler then folds.
SF_DEVICE int warp_units(const Params& p, int warp, int mgroups, long long& u0, long long& u1) {
  cta_units(p, u0, u1);
  const int warp_quads = (p.ncols - warp + 3) >> 2;  // quads q with 4 q + warp < ncols
  const long long warp_end = static_cast<long long>(warp_quads) * mgroups * p.kblocks;
  if (u1 > warp_end) u1 = warp_end;
  return u0 < u1 ? static_cast<int>(u1 - u0) : 0;
}

// The units a thread streams, by activation staging (SHARE, as run_ring's SYNC):
// lane-local, its warp's cut (warp_units: an idle warp may leave, no CTA barriers);
// shared, the CTA's whole range for every warp (CTA-uniform: all take part in
// every copy and barrier). Returns how many (0: none).
template <bool SHARE>
SF_DEVICE int ring_units(const Params& p, int warp, int mgroups, long long& u0, long long& u1) {
  if constexpr (SHARE) {
    cta_units(p, u0, u1);
    return u0 < u1 ? static_cast<int>(u1 - u0) : 0;
  } else {
    return warp_units(p, warp, mgroups, u0, u1);
  }
}

// The kernels' entry under programmatic dependent launch (decode_launch.cu
// launches every decode kernel with it on sm_90+): the packed weights are
// constant, so before waiting for the previous grid (the prep kernel, which
// itself waits for whatever produced x) a warp pulls the weight blocks of its
// first `units` units (column `col`, k-blocks from `kb`, never past the column)
// into L2; then it waits, and lets the next grid in the stream launch. Nothing
// that depends on an earlier kernel (x, y, the workspace) is touched before the
// wait. Without a programmatic edge both PTX calls are no-ops.
SF_DEVICE void enter_dependent(const Params& p, int col, int kb, int units, int lane) {
  constexpr int kLines = kUnitBytes / 128;
  const int n = min(units, p.kblocks - kb);
  const uint8_t* base = p.packed + (static_cast<long long>(col) * p.kblocks + kb) * kUnitBytes;
  for (int i = lane; i < n * kLines; i += 32) ptx::prefetch_l2(base + i * 128);
  ptx::grid_dependency_wait();
  ptx::grid_launch_dependents();
}

// issue_scales (mainloop.cuh) on the layer's scale / zero-point tensors
// (swap_kernel; written out, not forwarded: forwarding moved ptxas' register
// allocation of the swap instances with zero points by -30..+1).
template <int BITS, bool ZEROS>
SF_DEVICE void issue_scales(uint32_t s_dst, uint32_t z_dst, const Params& p, int k0, int scol, bool two_rows,
                            int lane) {
#pragma unroll
  for (int r = 0; r < scale_rows_per_unit(BITS); ++r) {
    if (r == 1 && !two_rows) break;
    const int off = ((k0 + r * 32) >> p.gshift) * p.N + scol;
    ptx::cp_async_4_ca(s_dst + r * 128 + lane * 4, p.scales + off);
    if constexpr (ZEROS) ptx::cp_async_4_ca(z_dst + r * 128 + lane * 4, p.zeros + off);
  }
}

}  // namespace detail

// gemm_kernel's row source: rows of x are output rows m (mainloop.cuh
// "Source"). Pass i of the thread's copy is row row0 + RP i, present when
// < M (and, shared, inside the m-group's tile); one cursor for all passes.
template <int BITS, int MT, bool SHARE>
struct DenseSource {
  using T = ActTiling<BITS, MT, SHARE>;
  static constexpr bool kSlabMoves = false;  // one weight for every segment
  const Params& p;
  const uint16_t* cur = nullptr;  // this thread's 8 activations of pass 0 (lane-local: slice 0)
  uint32_t rows = 0;              // bit i: this thread's row of pass i is in the tile and < M
  int stride = 0;                 // elements between copy passes

  SF_DEVICE void prepare() { stride = T::RP * p.K; }

  SF_DEVICE void seek(int /*q*/, int mg, int kb, int x_row, int x_col) {
    const int row0 = mg * MT * 16 + x_row;
    cur = p.x + static_cast<long long>(row0) * p.K + kb * T::BK + x_col;
    rows = 0;
#pragma unroll
    for (int i = 0; i < T::NP; ++i)
      rows |= (row0 + T::RP * i < p.M && (!SHARE || x_row + T::RP * i < MT * 16) ? 1u : 0u) << i;
  }
  SF_DEVICE bool row_ok(int i) const { return (rows & (1u << i)) != 0; }
  SF_DEVICE const uint16_t* x(int i) const { return cur + i * stride; }
  SF_DEVICE void advance(int bk) { cur += bk; }
  SF_DEVICE const uint8_t* packed() const { return p.packed; }
  SF_DEVICE const uint16_t* scales() const { return p.scales; }
  SF_DEVICE const uint16_t* zeros() const { return p.zeros; }
  SF_DEVICE int mgroups() const { return p.mgroups; }
};

// grid: 1-D; kModeAtomic: any size (persistent, occupancy x SMs), each CTA a
// balanced range of units; kModePartials: the same split; kModeDirect: one CTA per segment.
// block: kThreads. dynamic smem: gemm_smem_bytes(BITS, MT, ZEROS, SHARE).
// SHARE (kShareActs): the CTA stages each unit's activation tile once, for
// all four warps (decode_config.h); otherwise every lane stages its own rows.
template <int BITS, bool BF16, int MT, bool ZEROS, bool FOLD, bool SHARE>
__global__ void __launch_bounds__(kThreads, gemm_min_ctas(MT, SHARE, FOLD))
    gemm_kernel(const __grid_constant__ Params p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;

  // ---- units [u0, u1) (detail::ring_units). Shared: a warp whose column does
  // not exist in the last quad skips its MMAs and flush there.
  long long u0, u1;
  const int n = detail::ring_units<SHARE>(p, warp, p.mgroups, u0, u1);
  if (n == 0) return;
  const detail::UnitPos pos0 = detail::unit_pos(u0, p.kblocks, p.mgroups);
  // kGemmPrefetchUnits (decode_config.h: none, measured faster than the swap kernel's ring prefetch here).
  detail::enter_dependent(p, min(4 * pos0.q + warp, p.ncols - 1), pos0.kb, kGemmPrefetchUnits, lane);
  const int piece0 = detail::first_piece(p, u0 - pos0.kb);

  DenseSource<BITS, MT, SHARE> src{p};
  mainloop<BITS, BF16, MT, ZEROS, FOLD, SHARE>(p, src, DenseEpilogue<BF16, MT>{p, warp, lane, pos0, piece0}, pos0, n,
                                               smem);
}

template <int BITS, bool BF16, int MT, bool ZEROS, bool FOLD = false>
KernelHandle make_handle() {
  return KernelHandle{reinterpret_cast<const void*>(&gemm_kernel<BITS, BF16, MT, ZEROS, FOLD, kShareActs>),
                      gemm_smem_bytes(BITS, MT, ZEROS, kShareActs), gemm_stages(BITS, MT, kShareActs)};
}

// Instances for one bit width (decode_gemm_int4.cu / decode_gemm_int8.cu):
// dtype x MT 1..4 x zero points, plus the FOLD variants of MT = 1..kFoldMaxTiles.
template <int BITS, int MT>
KernelHandle fold_handle(bool bf16, bool zeros) {
  if (bf16) return zeros ? make_handle<BITS, true, MT, true, true>() : make_handle<BITS, true, MT, false, true>();
  return zeros ? make_handle<BITS, false, MT, true, true>() : make_handle<BITS, false, MT, false, true>();
}

template <int BITS>
KernelHandle handle_for(bool bf16, int mt, bool zeros, bool fold) {
  if (fold) {
    static_assert(kFoldMaxTiles >= 1 && kFoldMaxTiles <= 2, "FOLD instances exist for MT = 1..2");
    if (mt == 1) return fold_handle<BITS, 1>(bf16, zeros);
    if constexpr (kFoldMaxTiles >= 2) {
      if (mt == 2) return fold_handle<BITS, 2>(bf16, zeros);
    }
    return KernelHandle{};
  }
#define SF_DECODE_CASE(MT_)                                                                                  \
  case MT_:                                                                                                  \
    if (bf16) return zeros ? make_handle<BITS, true, MT_, true>() : make_handle<BITS, true, MT_, false>(); \
    return zeros ? make_handle<BITS, false, MT_, true>() : make_handle<BITS, false, MT_, false>();
  switch (mt) {
    SF_DECODE_CASE(1)
    SF_DECODE_CASE(2)
    SF_DECODE_CASE(3)
    SF_DECODE_CASE(4)
    default: return KernelHandle{};
  }
#undef SF_DECODE_CASE
}

}  // namespace decode
}  // namespace swordfish
