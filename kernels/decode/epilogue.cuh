// Decode epilogues: how a segment's fp32 accumulators leave the CTA.
//
// Accumulator fragment of n8 tile c, m16 tile mt (the mma.sync D layout),
// lane (g = lane / 4, t = lane % 4): (row g, cols 8 c + 2t, + 1) in [0], [1]
// and (row g + 8, same cols) in [2], [3].
//
//   DenseEpilogue  gemm_kernel's three modes (decode_config.h Mode): 16-byte
//                  red.global.add runs into y (atomic), rounded plain stores
//                  (+ bias) into y (direct), fp32 pieces into the partials
//                  workspace (partials).
//   red_f32x2      the fp32 reduction the fused-MoE epilogues use
//                  (kernels/moe/moe_gemm.cuh): packed-pair fp32 adds into an
//                  fp32 buffer, one rounding to the dtype afterwards.
#pragma once

#include <cstdint>

#include "kernels/common/format.h"
#include "kernels/common/ptx.cuh"
#include "kernels/decode/decode_config.h"
#include "kernels/decode/decode_kernels.h"
#include "kernels/decode/mainloop.cuh"

namespace swordfish {
namespace decode {

namespace detail {

template <bool BF16>
SF_DEVICE void red_pair(uint16_t* addr, uint32_t v) {
  if constexpr (BF16) {
    ptx::red_add_bf16x2(addr, v);
  } else {
    ptx::red_add_f16x2(addr, v);
  }
}

// Eight consecutive outputs (16-byte aligned) in one reduction on sm_90+, as
// four packed pairs before.
template <bool BF16>
SF_DEVICE void red_run(uint16_t* addr, uint4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (BF16) {
    ptx::red_add_bf16x8(addr, v);
  } else {
    ptx::red_add_f16x8(addr, v);
  }
#else
  red_pair<BF16>(addr, v.x);
  red_pair<BF16>(addr + 2, v.y);
  red_pair<BF16>(addr + 4, v.z);
  red_pair<BF16>(addr + 6, v.w);
#endif
}

// Atomic flush of one accumulator row of a warp's n64 block as 8-column runs.
// On entry lane (g, t) holds the packed pairs w[c]: columns 8 c + 2 t, + 1 of
// its row (c = 0..7, the mma.sync accumulator layout). Two butterfly rounds
// (lane ^ 1, then lane ^ 2) leave it the whole runs of tiles c = t and 4 + t,
// which it adds with two 16-byte reductions instead of eight 4-byte ones (a
// quarter of the atomic operations). Measured 0.914x the time over 112 decode
// points, 0.64-0.88x on int4 8B qkv / o / down at M = 16-64 (2026-12-03-c,
// experiments/ab4_red_runs). All 32 lanes call it (the shuffles); `row_ok`
// gates only the reductions. `row` points at column 0 of the block in this
// lane's output row (16-byte aligned: y is, and N is a multiple of 64).
template <bool BF16>
SF_DEVICE void red_row_runs(uint16_t* row, const uint32_t (&w)[8], int t, bool row_ok) {
  const bool odd = (t & 1) != 0, hi = (t & 2) != 0;
  uint32_t d[4][2];  // d[k]: columns 8 (2 k + odd) + 4 (t >> 1) .. + 3
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t recv = ptx::shfl_xor_u32(odd ? w[2 * k] : w[2 * k + 1], 1);
    d[k][0] = odd ? recv : w[2 * k];
    d[k][1] = odd ? w[2 * k + 1] : recv;
  }
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const uint32_t r0 = ptx::shfl_xor_u32(hi ? d[2 * m][0] : d[2 * m + 1][0], 2);
    const uint32_t r1 = ptx::shfl_xor_u32(hi ? d[2 * m][1] : d[2 * m + 1][1], 2);
    const uint4 run = hi ? make_uint4(r0, r1, d[2 * m + 1][0], d[2 * m + 1][1])
                         : make_uint4(d[2 * m][0], d[2 * m][1], r0, r1);  // columns 8 (4 m + t) .. + 7
    if (row_ok) red_run<BF16>(row + 8 * (4 * m + t), run);
  }
}

// An 8 x 8 transpose of packed words across the eight lanes of one t (lane
// bits 2-4, g = lane / 4) in three butterfly rounds (lane ^ 4, ^ 8, ^ 16; four
// shuffles each): on entry lane g holds w[r] = element g of run r, on exit
// w[r] = element r of run g. swap_kernel's atomic flush: element = column,
// run = 8 consecutive columns, so a lane ends with one whole 16-byte run per
// token. All 32 lanes call it.
SF_DEVICE void transpose_runs(uint32_t (&w)[8], int g) {
#pragma unroll
  for (int b = 0; b < 3; ++b) {
    const int mask = 1 << b;
    const bool upper = ((g >> b) & 1) != 0;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      if (r & mask) continue;
      const uint32_t recv = ptx::shfl_xor_u32(upper ? w[r] : w[r | mask], 4 << b);
      if (upper) {
        w[r] = recv;
      } else {
        w[r | mask] = recv;
      }
    }
  }
}

// Two adjacent fp32 outputs (8-byte aligned) in one reduction on sm_90+
// (red.global.add.v2.f32), two scalar ones before.
SF_DEVICE void red_f32x2(float* addr, float v0, float v1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  ptx::red_add_f32x2(addr, v0, v1);
#else
  atomicAdd(addr, v0);
  atomicAdd(addr + 1, v1);
#endif
}

// kModePartials: the (M, N) fp32 plane of this CTA's piece of a segment; `first`:
// the segment its range starts in (plane piece0 = first_piece), else plane 0.
SF_DEVICE float* piece_plane(const Params& p, bool first, int piece0) {
  return p.partials + static_cast<long long>(first ? piece0 : 0) * p.M * p.N;
}

}  // namespace detail

// gemm_kernel's flush of warp `warp`'s column 4 q + warp, m-group mg (rows
// 16 MT mg ..): by p.mode, atomic 16-byte runs into y, direct rounded stores
// (+ bias) or the fp32 piece of this CTA (plane piece0 in the segment the
// CTA's range starts in, pos0; plane 0 in every later one). Rows >= M are
// skipped. The mainloop clears acc after the call.
template <bool BF16, int MT>
struct DenseEpilogue {
  const Params& p;
  int warp, lane;
  detail::UnitPos pos0;
  int piece0;

  SF_DEVICE void operator()(int q, int mg, float (&acc)[MT][8][4]) const {
    const int g = lane >> 2, t = lane & 3;
    const int col = (4 * q + warp) * format::kBlockN + 2 * t;
    const int row = mg * MT * 16 + g;
    float b[8][2];
#pragma unroll
    for (int c = 0; c < 8; ++c) b[c][0] = b[c][1] = 0.f;
    if (p.mode == kModeDirect && p.bias != nullptr) {
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        b[c][0] = detail::to_f32<BF16>(p.bias[col + 8 * c]);
        b[c][1] = detail::to_f32<BF16>(p.bias[col + 8 * c + 1]);
      }
    }
    if (p.mode == kModeAtomic) {
      const int col0 = (4 * q + warp) * format::kBlockN;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = row + 16 * mt + 8 * h;
          if (r - g >= p.M) continue;  // no row of this half exists (warp-uniform)
          uint32_t w[8];
#pragma unroll
          for (int c = 0; c < 8; ++c) w[c] = detail::pack<BF16>(acc[mt][c][2 * h], acc[mt][c][2 * h + 1]);
          detail::red_row_runs<BF16>(p.y + static_cast<long long>(r < p.M ? r : 0) * p.N + col0, w, t, r < p.M);
        }
      }
      return;
    }
    float* const piece = detail::piece_plane(p, q == pos0.q && mg == pos0.mg, piece0);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row + 16 * mt + 8 * h;
        if (r >= p.M) continue;
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          const float v0 = acc[mt][c][2 * h], v1 = acc[mt][c][2 * h + 1];
          const long long off = static_cast<long long>(r) * p.N + col + 8 * c;
          if (p.mode == kModeDirect) {
            *reinterpret_cast<uint32_t*>(p.y + off) = detail::pack<BF16>(v0 + b[c][0], v1 + b[c][1]);
          } else {
            *reinterpret_cast<float2*>(piece + off) = make_float2(v0, v1);
          }
        }
      }
    }
  }
};

}  // namespace decode
}  // namespace swordfish
