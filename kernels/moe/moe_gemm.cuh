// The fused-MoE expert GEMM: decode::mainloop (kernels/decode/mainloop.cuh)
// over token-sorted blocks. Host twin: moe_launch.cu.
//
// Work: flat units (quad, block, k-block), k fastest, exactly the dense
// decode order with m-groups replaced by moe_align's blocks of BM = 16 MT
// rows. The block count is read on the device (num_post_pad / BM), so the
// launch is sized from an upper bound and stays CUDA-graph safe; blocks past
// it do not exist in the flat list. Blocks of one expert are adjacent, so
// within a quad consecutive segments re-read the same expert's columns (L2).
//
// Three indirections on top of the dense kernel:
//   rows     row r of block b is slot s = sorted_ids[BM b + r]; the mainloop
//            copies x row s / row_div (w13: the token; act-order w13 and w2:
//            the slot's own row); s >= num_slots is padding: never copied,
//            never stored (MoeSource).
//   weights  expert_ids[b] picks the expert's slab of packed / scales / zeros.
//   output   fp32: atomic mode red.global.add.v2.f32 of (w *) acc into row
//            s / out_div (w13: h[slot]; w2: y32[token], w = router weight);
//            split mode (deterministic) plain stores of this CTA's piece into
//            plane `split` at row s (MoeEpilogue).
#pragma once

#include <cstdint>

#include "kernels/common/format.h"
#include "kernels/common/ptx.cuh"
#include "kernels/decode/decode_config.h"
#include "kernels/decode/epilogue.cuh"
#include "kernels/decode/mainloop.cuh"
#include "kernels/moe/moe_kernels.h"

namespace swordfish {
namespace moe {

using decode::kThreads;
using decode::kUnitBytes;

// __launch_bounds__ minimum CTAs per SM: as the dense kernel's shared-activation
// instances (decode_config.h gemm_min_ctas): 3 at MT <= 2, 2 for FOLD at MT = 2.
SF_HOST_DEVICE constexpr int moe_min_ctas(int mt, bool fold) { return decode::gemm_min_ctas(mt, true, fold); }

template <bool BF16>
SF_DEVICE float load_weight(const GemmParams& p, int slot) {
  if (p.weights_f32) return static_cast<const float*>(p.topk_weights)[slot];
  return decode::detail::to_f32<BF16>(static_cast<const uint16_t*>(p.topk_weights)[slot]);
}

// Row source of block b (decode::mainloop "Source"): pass i of this thread is
// tile row x_row + RP i, the slot sorted_ids[BM b + row]; one cursor per pass.
template <int BITS, int MT>
struct MoeSource {
  using T = decode::ActTiling<BITS, MT, true>;
  static constexpr int BM = 16 * MT;
  static constexpr bool kSlabMoves = true;  // seek() picks the block's expert slab
  const GemmParams& p;
  int blocks;                          // real blocks (num_post_pad / BM)
  const uint16_t* cur[T::NP] = {};
  uint32_t rows = 0;                   // bit i: pass i's row is a real slot
  const uint8_t* pk = nullptr;
  const uint16_t* sc = nullptr;
  const uint16_t* zp = nullptr;

  SF_DEVICE void prepare() {}
  SF_DEVICE void seek(int /*q*/, int b, int kb, int x_row, int x_col) {
    const int e = p.expert_ids[b];
    const bool live = e >= 0 && e < p.num_experts;
    const long long es = live ? e : 0;  // a dead block streams expert 0 and stores nothing
    pk = p.packed + es * p.expert_packed;
    sc = p.scales + es * p.expert_scales;
    zp = p.zeros != nullptr ? p.zeros + es * p.expert_scales : nullptr;
    rows = 0;
#pragma unroll
    for (int i = 0; i < T::NP; ++i) {
      const int r = x_row + T::RP * i;
      int src = 0;
      if (r < BM) {
        const int slot = p.sorted_ids[BM * b + r];
        if (live && static_cast<unsigned>(slot) < static_cast<unsigned>(p.num_slots)) {
          src = slot / p.row_div;
          rows |= 1u << i;
        }
      }
      cur[i] = p.x + static_cast<long long>(src) * p.K + kb * T::BK + x_col;
    }
  }
  SF_DEVICE bool row_ok(int i) const { return (rows & (1u << i)) != 0; }
  SF_DEVICE const uint16_t* x(int i) const { return cur[i]; }
  SF_DEVICE void advance(int bk) {
#pragma unroll
    for (int i = 0; i < T::NP; ++i) cur[i] += bk;
  }
  SF_DEVICE const uint8_t* packed() const { return pk; }
  SF_DEVICE const uint16_t* scales() const { return sc; }
  SF_DEVICE const uint16_t* zeros() const { return zp; }
  SF_DEVICE int mgroups() const { return blocks; }
};

// Flush of warp `warp`'s column 4 q + warp, block b (decode::mainloop "Flush").
// Lane (g, t) holds rows g, g + 8 of each m16 tile, columns 8 c + 2t, + 1.
template <bool BF16, int MT>
struct MoeEpilogue {
  static constexpr int BM = 16 * MT;
  const GemmParams& p;
  int warp, lane, split;

  SF_DEVICE void operator()(int q, int b, float (&acc)[MT][8][4]) const {
    const int g = lane >> 2, t = lane & 3;
    const int col = (4 * q + warp) * format::kBlockN + 2 * t;
    const int e = p.expert_ids[b];
    if (e < 0 || e >= p.num_experts) return;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int slot = p.sorted_ids[BM * b + 16 * mt + 8 * h + g];
        if (static_cast<unsigned>(slot) >= static_cast<unsigned>(p.num_slots)) continue;
        const float w = p.scale_out ? load_weight<BF16>(p, slot) : 1.f;
        if (p.mode == kModeAtomic) {
          float* const row = p.out + static_cast<long long>(slot / p.out_div) * p.N + col;
#pragma unroll
          for (int c = 0; c < 8; ++c)
            decode::detail::red_f32x2(row + 8 * c, w * acc[mt][c][2 * h], w * acc[mt][c][2 * h + 1]);
        } else {
          float* const row = p.out + split * p.plane + static_cast<long long>(slot) * p.N + col;
#pragma unroll
          for (int c = 0; c < 8; ++c)
            *reinterpret_cast<float2*>(row + 8 * c) = make_float2(w * acc[mt][c][2 * h], w * acc[mt][c][2 * h + 1]);
        }
      }
    }
  }
};

// This CTA's units [u0, u1) of the flat (quad, block, k-block) list over
// `blocks` real blocks (empty when it has none). kModeAtomic: a balanced slice
// of the real units, at least kMinUnitsPerCta each, over the first CTAs of the
// grid; kModeSplit: split `split` of segment blockIdx.x / splits.
SF_DEVICE void cta_units(const GemmParams& p, int blocks, long long& u0, long long& u1, int& split) {
  const long long segments = static_cast<long long>(p.quads) * blocks;
  u0 = u1 = 0;
  if (p.mode == kModeSplit) {
    const long long seg = blockIdx.x / p.splits;
    split = static_cast<int>(blockIdx.x - seg * p.splits);
    if (seg >= segments) return;
    u0 = seg * p.kblocks + static_cast<long long>(split) * p.kblocks / p.splits;
    u1 = seg * p.kblocks + static_cast<long long>(split + 1) * p.kblocks / p.splits;
  } else {
    const long long units = segments * p.kblocks;
    const long long want = (units + decode::kMinUnitsPerCta - 1) / decode::kMinUnitsPerCta;
    const long long grid = want < gridDim.x ? want : gridDim.x;
    if (blockIdx.x >= grid) return;
    u0 = blockIdx.x * units / grid;
    u1 = (blockIdx.x + 1) * units / grid;
  }
}

// grid: 1-D. kModeAtomic: persistent (occupancy x SMs, or fewer), each CTA a
// balanced range of the real units (at least kMinUnitsPerCta each: CTAs past
// that many leave at once). kModeSplit: splits CTAs per segment of the upper
// bound, CTAs of blocks that do not exist leave at once.
// block: kThreads. dynamic smem: decode::gemm_smem_bytes(BITS, MT, ZEROS, true).
template <int BITS, bool BF16, int MT, bool ZEROS, bool FOLD>
__global__ void __launch_bounds__(kThreads, moe_min_ctas(MT, FOLD)) gemm_kernel(const __grid_constant__ GemmParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  // Everything below reads what the kernels before wrote (the sort, x / a).
  ptx::grid_dependency_wait();
  ptx::grid_launch_dependents();

  constexpr int BM = 16 * MT;
  const int blocks = *p.num_post_pad / BM;
  long long u0, u1;
  int split = 0;
  cta_units(p, blocks, u0, u1, split);
  const int n = static_cast<int>(u1 - u0);
  if (n <= 0) return;
  const decode::detail::UnitPos pos0 = decode::detail::unit_pos(u0, p.kblocks, blocks);

  MoeSource<BITS, MT> src{p, blocks};
  decode::mainloop<BITS, BF16, MT, ZEROS, FOLD, true>(p, src, MoeEpilogue<BF16, MT>{p, warp, lane, split}, pos0, n,
                                                      smem);
}

template <int BITS, bool BF16, int MT, bool ZEROS, bool FOLD>
KernelHandle make_handle() {
  return KernelHandle{reinterpret_cast<const void*>(&gemm_kernel<BITS, BF16, MT, ZEROS, FOLD>),
                      decode::gemm_smem_bytes(BITS, MT, ZEROS, true)};
}

// Instances of one bit width (moe_gemm_int4.cu / moe_gemm_int8.cu): dtype x MT
// 1..2 x zero points, FOLD at MT = 1.
template <int BITS>
KernelHandle handle_for(bool bf16, int mt, bool zeros, bool fold) {
  if (mt == 1) {
    if (fold) {
      if (bf16) return zeros ? make_handle<BITS, true, 1, true, true>() : make_handle<BITS, true, 1, false, true>();
      return zeros ? make_handle<BITS, false, 1, true, true>() : make_handle<BITS, false, 1, false, true>();
    }
    if (bf16) return zeros ? make_handle<BITS, true, 1, true, false>() : make_handle<BITS, true, 1, false, false>();
    return zeros ? make_handle<BITS, false, 1, true, false>() : make_handle<BITS, false, 1, false, false>();
  }
  if (mt == 2 && !fold) {
    if (bf16) return zeros ? make_handle<BITS, true, 2, true, false>() : make_handle<BITS, true, 2, false, false>();
    return zeros ? make_handle<BITS, false, 2, true, false>() : make_handle<BITS, false, 2, false, false>();
  }
  return KernelHandle{};
}

}  // namespace moe
}  // namespace swordfish
