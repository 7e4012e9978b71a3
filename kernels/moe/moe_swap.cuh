// The fused-MoE expert GEMM for blocks of kSwapBlockM = 8 rows: the
// swapped-operand decode loop (decode::swap_mainloop, decode_swap.cuh) over
// token-sorted blocks. Host twin: moe_launch.cu (block_m = 8).
//
// Why: at a few routed tokens per expert most 16-row blocks of gemm_kernel
// (moe_gemm.cuh) hold 1-4 real rows, and it pays for 16 anyway (32 HMMA and 4
// ldmatrix per int4 unit). Here the expert's weight is the A operand and the
// block's 8 tokens the n8 B operand: 16 HMMA and 2 ldmatrix per unit, 16
// accumulators, the structure the dense decode path runs at M <= 8.
//
// Work: flat units (quad, block, k-block), k fastest, as gemm_kernel, split
// by cta_units (moe_gemm.cuh); activations lane-local (each warp its own ring,
// no barrier), so every warp is cut to the quads where its column exists.
// Indirections, as gemm_kernel's:
//   tokens   lane l stages token slot sorted_ids[8 b + l % 8] (x row slot /
//            row_div); padding slots and dead blocks copy nothing. A slot
//            keeps zeros or a token of an earlier block: either stays in its
//            own accumulator column, which the flush does not store.
//   weights  expert_ids[b] picks the slab (a dead block streams expert 0).
//   output   after detail::token_pairs each lane holds one token's column
//            pairs: red.global.add.v2.f32 of (w *) acc into row slot /
//            out_div (atomic), or plain stores into plane `split` (split).
#pragma once

#include <cstdint>

#include "kernels/decode/decode_swap.cuh"
#include "kernels/moe/moe_gemm.cuh"
#include "kernels/moe/moe_kernels.h"

namespace swordfish {
namespace moe {

// decode::swap_mainloop's source for block b: the block's expert slab, this
// lane's token (lane % 8 of the block).
template <int BITS, bool ZEROS>
struct MoeSwapSource {
  const GemmParams& p;
  int blocks;  // real blocks (num_post_pad / kSwapBlockM)
  int x_tok;   // lane % 8
  const uint8_t* pk = nullptr;
  const uint16_t* sc = nullptr;
  const uint16_t* zp = nullptr;
  const uint16_t* row = nullptr;
  bool x_live = false;

  SF_DEVICE void seek(int b, int /*kb*/) {
    const int e = ptx::ld_cg_s32(p.expert_ids + b);  // early (w2): read before the dependency wait
    const bool live = e >= 0 && e < p.num_experts;
    const long long es = live ? e : 0;  // a dead block streams expert 0 and stores nothing
    pk = p.packed + es * p.expert_packed;
    sc = p.scales + es * p.expert_scales;
    if constexpr (ZEROS) zp = p.zeros + es * p.expert_scales;
    const int slot = ptx::ld_cg_s32(p.sorted_ids + kSwapBlockM * b + x_tok);
    x_live = live && static_cast<unsigned>(slot) < static_cast<unsigned>(p.num_slots);
    row = p.x + static_cast<long long>(x_live ? slot / p.row_div : 0) * p.K;
  }
  SF_DEVICE bool live() const { return x_live; }
  SF_DEVICE const uint8_t* packed() const { return pk; }
  SF_DEVICE const uint16_t* x() const { return row; }
  SF_DEVICE const uint16_t* scales() const { return sc; }
  SF_DEVICE const uint16_t* zeros() const { return zp; }
  SF_DEVICE void issue_scales(uint32_t s_dst, uint32_t z_dst, int k0, int scol, bool two_rows, int lane) const {
    decode::detail::issue_scales<BITS, ZEROS>(s_dst, z_dst, p, *this, k0, scol, two_rows, lane);
  }
  SF_DEVICE int mgroups() const { return blocks; }
  SF_DEVICE bool many_tokens() const { return true; }
};

// Flush of warp `warp`'s column 4 q + warp, block b.
template <bool BF16>
struct MoeSwapFlush {
  const GemmParams& p;
  int warp, lane, split;

  SF_DEVICE void operator()(int q, int b, float (&acc)[4][4]) const {
    const int g = lane >> 2, t = lane & 3;
    float v[4][2][2];
    decode::detail::token_pairs(acc, g, v);
    const int e = p.expert_ids[b];
    if (e < 0 || e >= p.num_experts) return;
    const int slot = p.sorted_ids[kSwapBlockM * b + 2 * t + (g & 1)];
    if (static_cast<unsigned>(slot) >= static_cast<unsigned>(p.num_slots)) return;
    const float w = p.scale_out ? load_weight<BF16>(p, slot) : 1.f;
    const int col = (4 * q + warp) * format::kBlockN + (g & ~1);
    if (p.mode == kModeAtomic) {
      float* const out = p.out + static_cast<long long>(slot / p.out_div) * p.N + col;
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) decode::detail::red_f32x2(out + 16 * m + 8 * h, w * v[m][h][0], w * v[m][h][1]);
    } else {
      float* const out = p.out + split * p.plane + static_cast<long long>(slot) * p.N + col;
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          *reinterpret_cast<float2*>(out + 16 * m + 8 * h) = make_float2(w * v[m][h][0], w * v[m][h][1]);
    }
  }
};

// grid and modes: as gemm_kernel (moe_gemm.cuh), blocks of kSwapBlockM rows.
// block: kThreads. dynamic smem: decode::swap_kernel_smem_bytes(BITS, ZEROS, false).
// EARLY (w2, two launches after the sort): the sort's outputs are complete at
// launch (moe_launch.cu), so each warp copies its first units' weights before
// the dependency wait, while w13 and act still run; a (w2's input) after it.
template <int BITS, bool BF16, bool ZEROS, bool FOLD, bool EARLY>
__global__ void __launch_bounds__(kThreads, decode::kSwapCtasPerSm)
    swap_gemm_kernel(const __grid_constant__ GemmParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  auto dep_wait = [] {
    ptx::grid_dependency_wait();
    ptx::grid_launch_dependents();
  };
  // Everything below reads what the kernels before wrote (the sort, x / a).
  if constexpr (!EARLY) dep_wait();

  const int blocks = ptx::ld_cg_s32(p.num_post_pad) / kSwapBlockM;
  long long u0, u1;
  int split = 0;
  cta_units(p, blocks, u0, u1, split);
  // lane-local: this warp's column exists in quads q < warp_quads (the last may hold fewer than four)
  const long long warp_end = static_cast<long long>((p.ncols - warp + 3) >> 2) * blocks * p.kblocks;
  if (u1 > warp_end) u1 = warp_end;
  const int n = static_cast<int>(u1 - u0);
  if (n <= 0) {
    // EARLY: CTA 0 waits even without units, so that this grid never completes before the kernel it depends
    // on (act): with nothing routed to this rank no CTA has units, and finalize, which waits only for this
    // grid, must not run (and the next op reuse the workspace) while act still reads it.
    if constexpr (EARLY) {
      if (blockIdx.x == 0) dep_wait();
    }
    return;
  }
  const decode::detail::UnitPos pos0 = decode::detail::unit_pos(u0, p.kblocks, blocks);

  MoeSwapSource<BITS, ZEROS> src{p, blocks, lane & 7};
  if constexpr (EARLY) {
    decode::swap_mainloop<BITS, BF16, ZEROS, FOLD, false, true>(p, src, MoeSwapFlush<BF16>{p, warp, lane, split},
                                                                pos0, n, lane, warp, smem, dep_wait);
  } else {
    decode::swap_mainloop<BITS, BF16, ZEROS, FOLD, false>(p, src, MoeSwapFlush<BF16>{p, warp, lane, split}, pos0,
                                                          n, lane, warp, smem);
  }
}

template <int BITS, bool BF16, bool ZEROS, bool FOLD, bool EARLY>
KernelHandle make_swap_handle() {
  return KernelHandle{reinterpret_cast<const void*>(&swap_gemm_kernel<BITS, BF16, ZEROS, FOLD, EARLY>),
                      decode::swap_kernel_smem_bytes(BITS, ZEROS, false)};
}

template <int BITS, bool EARLY>
KernelHandle swap_handle_flags(bool bf16, bool zeros, bool fold) {
  if (fold) {
    if (bf16) {
      return zeros ? make_swap_handle<BITS, true, true, true, EARLY>()
                   : make_swap_handle<BITS, true, false, true, EARLY>();
    }
    return zeros ? make_swap_handle<BITS, false, true, true, EARLY>()
                 : make_swap_handle<BITS, false, false, true, EARLY>();
  }
  if (bf16) {
    return zeros ? make_swap_handle<BITS, true, true, false, EARLY>()
                 : make_swap_handle<BITS, true, false, false, EARLY>();
  }
  return zeros ? make_swap_handle<BITS, false, true, false, EARLY>()
               : make_swap_handle<BITS, false, false, false, EARLY>();
}

// Instances of one bit width (moe_gemm_int4.cu / moe_gemm_int8.cu): dtype x zero points x FOLD x EARLY.
template <int BITS>
KernelHandle swap_handle_for(bool bf16, bool zeros, bool fold, bool early) {
  return early ? swap_handle_flags<BITS, true>(bf16, zeros, fold) : swap_handle_flags<BITS, false>(bf16, zeros, fold);
}

}  // namespace moe
}  // namespace swordfish
