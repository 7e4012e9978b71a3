// The swapped-operand decode kernel for M <= 8 (kSwapMaxM): y^T = W x^T.
// Host twin: decode_launch.cu (it picks this kernel when kSwapEnabled and
// M <= kSwapMaxM). Same unit list, persistent grid, per-warp self-slot
// cp.async ring, evict_first weight stream and epilogue modes as
// decode_gemm.cuh; only the MMA roles change. At int4 M >= kSwapShareMinM
// (SHARE) the activations are staged once per CTA, as gemm_kernel's
// kShareActs does: one CTA ring, a barrier per unit. The loop itself is
// swap_mainloop over a token source (below): swap_kernel's source is rows of
// x, the fused-MoE 8-row blocks' (kernels/moe/moe_swap.cuh) a token-sorted
// block of one expert.
//
// The weight is the A operand (m16 = 16 output columns), the activations the
// B operand (n8 = up to 8 tokens). Format v1 needs no shuffles for it: for
// lane (g = lane / 4, t = lane % 4), int4 word j of a sub-tile holds n8 tiles
// 2j and 2j + 1, and its four LOP3 pairs (b0, b1 of tile 2j, b0, b1 of tile
// 2j + 1) are the A registers (a0, a2, a1, a3) of the m16k16 tile whose rows
// are output columns 16j .. 16j + 15:
//   a0 = (row g, k 2t..2t+1)  a1 = (row g+8, k 2t..)  a2 = (row g, k 2t+8..)  a3 = (row g+8, k 2t+8..)
// (tests/test_decode_emulation.py checks this against the PTX ISA layout).
// int8: the two words 2m' and 2m'+1 of a sub-tile are n8 tiles c, c + 1 of one
// m16 tile: A = (b0 of c, b0 of c + 1, b1 of c, b1 of c + 1).
// One word then feeds one HMMA instead of two with 15 of 16 rows wasted: per
// int4 unit 16 HMMA (+ 4 row-sum HMMA under FOLD) instead of 32 (+ 4), 2
// ldmatrix.x4 instead of 4, 16 accumulators instead of 32.
//
// B fragment (x^T, k16 x n8): b0 = x[token g][k 2t, 2t+1], b1 = x[token g][k
// 2t+8, 2t+9]: a non-transposed ldmatrix of the row-major (8 tokens, k) slice.
// One ldmatrix.x4 covers k32 (matrices: k 0-7, 8-15 of slice 2h, then of slice
// 2h + 1); lane l stages (and addresses) token l % 8, k 8 (l / 8) .. + 7 of
// the k32. Tokens >= M are never copied: their slots stay zero.
//
// D fragment: (row = output column, col = token): d0, d1 = column 16j + g,
// tokens 2t, 2t + 1; d2, d3 = column 16j + 8 + g, same tokens. Scales are per
// output column = per A row: column 8c + g for c = 0..7, which is what
// detail::expand_row already broadcasts (tile c of the B-operand kernels).
// Epilogue: one shfl.bfly (lane ^ 4, the adjacent column) turns the token pair
// of one column into a column pair of one token (even g keeps token 2t, odd g
// token 2t + 1), for the same packed-pair red.global / stores. From M =
// kSwapRunsMinM the atomic mode instead transposes the packed token pairs
// across the eight lanes of one t (detail::transpose_runs) and adds one
// 16-byte run of eight columns per token.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/decode/decode_gemm.cuh"

namespace swordfish {
namespace decode {

// ---- the loop, for any token source

// What swap_mainloop asks of a source (duck-typed, inlined; the swapped-operand
// counterpart of mainloop.cuh's Source). Lane l stages token x_tok = l % 8.
//   seek(mg, kb)   the producer enters segment (column, m-group mg) at k-block
//                  kb: pick the weight slab and this lane's token row.
//   live()         whether this lane copies its token (a slot never copied
//                  keeps zeros, or a stale token of an earlier segment: either
//                  stays in that token's own accumulator column, which the
//                  flush never stores).
//   packed(), x()  the slab's packed base, the token's activation row.
//   issue_scales   the unit's scale (+ zero-point) row(s) of columns (scol, scol + 1).
//   mgroups()      m-groups (MoE: blocks of 8 tokens) per quad; units run
//                  (quad, m-group, k-block), k fastest.
//   many_tokens()  false when only token 0 can be nonzero (FOLD skips the rest).
// flush(q, mg, acc) stores the warp's column 4 q + warp of m-group mg from the
// D fragments (acc[m][i]: column 16 m + 8 (i / 2) + g, token 2 t + (i & 1))
// and clears acc.

namespace detail {

// The dense layer: one weight; token i is row i of x, rows >= M never copied.
template <int BITS, bool ZEROS>
struct DenseSwapSource {
  const Params& p;
  int x_tok;
  bool x_live;  // x_tok < M (shared: and this warp copies a k32 block)

  SF_DEVICE void seek(int /*mg*/, int /*kb*/) {}
  SF_DEVICE bool live() const { return x_live; }
  SF_DEVICE const uint8_t* packed() const { return p.packed; }
  SF_DEVICE const uint16_t* x() const { return p.x + static_cast<long long>(x_live ? x_tok : 0) * p.K; }
  SF_DEVICE void issue_scales(uint32_t s_dst, uint32_t z_dst, int k0, int scol, bool two_rows, int lane) const {
    detail::issue_scales<BITS, ZEROS>(s_dst, z_dst, p, k0, scol, two_rows, lane);
  }
  SF_DEVICE int mgroups() const { return 1; }
  SF_DEVICE bool many_tokens() const { return p.M > 1; }
};

// The flush's exchange: lane (g, t) holds column 16 m + 8 h + g, tokens 2t,
// 2t + 1 in acc[m][2h], acc[m][2h + 1]; one shuffle with lane ^ 4 (column
// g ^ 1) leaves it token 2t + (g & 1) of columns 16 m + 8 h + (g & ~1), + 1 in
// v[m][h]. Every lane of the warp calls it (converged); acc is cleared.
SF_DEVICE void token_pairs(float (&acc)[4][4], int g, float (&v)[4][2][2]) {
  const bool odd = g & 1;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float lo = acc[m][2 * h], hi = acc[m][2 * h + 1];
      const float other = ptx::shfl_xor_f32(odd ? lo : hi, 4);
      v[m][h][0] = odd ? other : lo;
      v[m][h][1] = odd ? hi : other;
    }
  }
  clear(acc);
}

}  // namespace detail

// Units [pos0, pos0 + n) of this warp (lane-local) or CTA (SHARE) through the
// stage ring; P: K, N, kblocks, ncols, gshift, fold_mask, evict_first.
// EARLY (lane-local only): the first units' weights and scales are copied
// before dep_wait(), their activations after it (detail::run_ring_early).
template <int BITS, bool BF16, bool ZEROS, bool FOLD, bool SHARE, bool EARLY = false, class P, class Src,
          class Flush, class Wait = detail::NoWait>
SF_DEVICE void swap_mainloop(const P& p, Src& src, Flush&& flush, const detail::UnitPos pos0, int n, int lane,
                             int warp, unsigned char* smem, Wait&& dep_wait = Wait{}) {
  static_assert(!(EARLY && SHARE), "early weight copies are lane-local only");
  constexpr int S = swap_kernel_stages(BITS, SHARE);
  constexpr StageLayout L = swap_stage_layout(BITS, ZEROS);               // lane-local: one warp's stage
  constexpr SharedStageLayout C = swap_shared_layout(BITS, ZEROS);        // shared: the CTA's stage
  constexpr int STRIDE = SHARE ? C.bytes : L.bytes;                       // bytes per ring slot
  constexpr int ACT = SHARE ? 0 : L.act_offset;                           // activations in a slot
  constexpr int SCALES = SHARE ? C.scale_offset : L.scale_offset;         // from the warp's weight slot
  constexpr int ZPS = SHARE ? C.zero_offset : L.zero_offset;
  constexpr int NS = slices_per_unit(BITS);
  constexpr int NX = NS / 2;  // ldmatrix.x4 (k32) per unit
  constexpr int BK = format::block_k(BITS);
  constexpr float kOffset = dequant::kRawOffset<BITS, BF16>;
  constexpr bool kRowSums = FOLD && (kOffset != 0.f || ZEROS);
  static_assert(NS % 2 == 0, "one ldmatrix.x4 covers two k16 slices");

  // Lane-local: one ring per warp. Shared: one ring for the CTA, each slot the
  // activation slice first, then the warps' weight slots (wslot).
  const uint32_t ring = ptx::smem_u32(smem) + static_cast<uint32_t>(SHARE ? 0 : warp * S * L.bytes);
  const uint32_t wslot = SHARE ? static_cast<uint32_t>(C.warp_offset + warp * C.warp_bytes) : 0u;
  // Activation slots start as zeros (a token the source does not copy). Shared: other
  // warps copy into what this one zeroes, so a barrier separates the two.
  if constexpr (SHARE) {
    detail::zero_ring<S, NX * 512, kThreads>(ring, STRIDE, threadIdx.x);
    __syncthreads();
  } else {
    detail::zero_ring<S, NX * 512, 32>(ring + L.act_offset, L.bytes, lane);
  }

  // int4 g32: two scale rows per k64 unit (FOLD never runs g32: decode_launch.cu's use_fold)
  const bool two_rows = BITS == 4 && !FOLD && p.gshift == 5;

  // ---- producer
  const uint64_t pol = p.evict_first ? ptx::policy_evict_first() : ptx::policy_evict_normal();
  const int x_col = (lane >> 3) * 8;           // matrix l / 8 = k 8 (l / 8) .. + 7 of the k32
  int p_kb = pos0.kb, p_q = pos0.q, p_mg = pos0.mg;
  const uint8_t* p_w = nullptr;
  const uint16_t* p_x = nullptr;
  int p_scol = 0;
  auto seek = [&]() {
    const int col = SHARE ? min(4 * p_q + warp, p.ncols - 1) : 4 * p_q + warp;
    src.seek(p_mg, p_kb);
    p_w = src.packed() + (static_cast<long long>(col) * p.kblocks + p_kb) * kUnitBytes + lane * 16;
    p_x = src.x() + p_kb * BK + x_col + (SHARE ? 32 * warp : 0);
    p_scol = col * format::kBlockN + 2 * lane;
  };
  seek();

  auto advance = [&]() {
    p_w += kUnitBytes;  // unconditional: seek() overwrites both at a segment change
    p_x += BK;
    if (++p_kb == p.kblocks) {
      p_kb = 0;
      if (++p_mg == src.mgroups()) {
        p_mg = 0;
        ++p_q;
      }
      seek();
    }
  };
  auto issue_x = [&](uint32_t st, const uint16_t* px) {
    if constexpr (SHARE) {
      ptx::cp_async_16_ca(st + warp * 512 + lane * 16, px);
    } else {
#pragma unroll
      for (int h = 0; h < NX; ++h) ptx::cp_async_16_ca(st + L.act_offset + h * 512 + lane * 16, px + 32 * h);
    }
  };
  auto issue = [&](uint32_t st) {
    detail::issue_weights(st + wslot, p_w, pol, lane);
    if (src.live()) issue_x(st, p_x);
    src.issue_scales(st + wslot + SCALES, st + wslot + ZPS, p_kb * BK, p_scol, two_rows, lane);
    advance();
  };

  // ---- consumer. acc[m]: m16 tile m = output columns 16 m .. 16 m + 15 of the warp's column.
  float acc[4][4], raw[FOLD ? 4 : 1][4], xs[4];
  detail::clear(acc);
  detail::clear(raw);
  detail::clear(xs);

  // The A fragment of m16 tile m in k16 slice sl from the staged words:
  // int4: word m of sub-tile sl, pairs (0, 2, 1, 3); int8: words 2 (m % 2),
  // 2 (m % 2) + 1 of sub-tile 2 sl + m / 2, pairs (c.b0, c1.b0, c.b1, c1.b1).
  // RAW: dequant::int4_raw / int8_raw values (FOLD); else scaled by sp / zp.
  auto a_tile = [&](const uint4 (&wv)[format::kSubtiles], int sl, int m, const uint32_t* sp, const uint32_t* zp,
                    uint32_t (&a)[4], auto raw_tag) {
    constexpr bool RAW = decltype(raw_tag)::value;
    uint32_t w[4];
    if constexpr (BITS == 4) {
      uint32_t v[4];
      if constexpr (RAW) {
        dequant::int4_raw<BF16>(detail::word(wv[sl], m), v);
      } else {
        dequant::int4_pairs<BF16>(detail::word(wv[sl], m), v);
      }
      w[0] = v[0];
      w[1] = v[2];
      w[2] = v[1];
      w[3] = v[3];
    } else {
      uint32_t c0[2], c1[2];
      const uint4& s = wv[2 * sl + (m >> 1)];
      if constexpr (RAW) {
        dequant::int8_raw<BF16>(detail::word(s, 2 * (m & 1)), c0);
        dequant::int8_raw<BF16>(detail::word(s, 2 * (m & 1) + 1), c1);
      } else {
        dequant::int8_pairs<BF16>(detail::word(s, 2 * (m & 1)), c0);
        dequant::int8_pairs<BF16>(detail::word(s, 2 * (m & 1) + 1), c1);
      }
      w[0] = c0[0];
      w[1] = c1[0];
      w[2] = c0[1];
      w[3] = c1[1];
    }
    if constexpr (RAW) {
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = w[i];
    } else {
      // rows g (a0, a2): column 16 m + g = tile 2 m; rows g + 8 (a1, a3): tile 2 m + 1
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = detail::apply<BF16, ZEROS>(w[i], sp[2 * m + (i & 1)], zp[2 * m + (i & 1)]);
    }
  };

  // FRESH (FOLD): the unit opens a scale group; fold() left raw / xs stale, and
  // the first MMA into each overwrites it (mma_group).
  auto consume = [&](uint32_t st, auto fresh_tag) {
    [[maybe_unused]] constexpr bool FRESH = decltype(fresh_tag)::value;  // read by the FOLD instances only
    uint4 wv[format::kSubtiles];
    detail::lds_weights(wv, st + wslot, lane);
    uint32_t xb[NX][4];
#pragma unroll
    for (int h = 0; h < NX; ++h) ptx::ldmatrix_x4(xb[h], st + ACT + h * 512 + lane * 16);
    uint32_t sp[8] = {}, zp[8] = {};
    if constexpr (!FOLD) {
      detail::expand_row(st + wslot + SCALES, lane, sp);
      if constexpr (ZEROS) detail::expand_row(st + wslot + ZPS, lane, zp);
    }
#pragma unroll
    for (int sl = 0; sl < NS; ++sl) {
      if constexpr (BITS == 4 && !FOLD) {
        if (sl == 2 && two_rows) {
          detail::expand_row(st + wslot + SCALES + 128, lane, sp);
          if constexpr (ZEROS) detail::expand_row(st + wslot + ZPS + 128, lane, zp);
        }
      }
      const uint32_t b0 = xb[sl >> 1][2 * (sl & 1)], b1 = xb[sl >> 1][2 * (sl & 1) + 1];
      if constexpr (kRowSums) {
        const uint32_t ones[4] = {dequant::kOnes<BF16>, dequant::kOnes<BF16>, dequant::kOnes<BF16>,
                                  dequant::kOnes<BF16>};
        // xs[i]: sum of token 2t + (i & 1) over the group
        detail::mma_group<BF16>(xs, ones, b0, b1, FRESH && sl == 0);
      }
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        uint32_t a[4];
        if constexpr (FOLD) {
          a_tile(wv, sl, m, sp, zp, a, std::true_type{});
          detail::mma_group<BF16>(raw[m], a, b0, b1, FRESH && sl == 0);
        } else {
          a_tile(wv, sl, m, sp, zp, a, std::false_type{});
          detail::mma<BF16>(acc[m], a, b0, b1);
        }
      }
    }
  };

  // FOLD, once per group (and before a flush): acc += s * (raw - offset * xs)
  // (+ zs * xs); raw and xs need no clearing (the next group's first MMAs
  // overwrite them: consume's FRESH instance). Accumulator [m][i] is column
  // 16 m + 8 (i / 2) + g = 8 c + g with c = 2 m + i / 2, token 2t + (i & 1). The odd i (tokens 1, 3, 5, 7)
  // hold exact zeros at M = 1 (their x rows are zero slots), so a warp skips
  // them there: half the fold's instructions on the M = 1 path.
  auto fold = [&](uint32_t st) {
    float s[8], z[8] = {};
    detail::expand_row_f32<BF16>(st + wslot + SCALES, lane, s);
    if constexpr (ZEROS) detail::expand_row_f32<BF16>(st + wslot + ZPS, lane, z);
    auto fold_one = [&](int m, int i) {
      const int c = 2 * m + (i >> 1);
      const float t_i = kOffset != 0.f ? fmaf(-kOffset, xs[i], raw[m][i]) : raw[m][i];
      acc[m][i] = fmaf(s[c], t_i, acc[m][i]);
      if constexpr (ZEROS) acc[m][i] = fmaf(z[c], xs[i], acc[m][i]);
    };
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      fold_one(m, 0);
      fold_one(m, 2);
    }
    if (src.many_tokens()) {
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        fold_one(m, 1);
        fold_one(m, 3);
      }
    }
  };

  // ---- pipeline (detail::run_ring)
  int seg_left = min(p.kblocks - pos0.kb, n);
  int c_q = pos0.q, c_mg = pos0.mg;
  int c_kb = pos0.kb;
  // (shared: one CTA barrier per unit; a warp past the last column keeps the
  // barriers and the copies, nothing else)
  auto step = [&](int it, uint32_t cons) {
    const bool seg_end = --seg_left == 0;
    const bool live = !SHARE || 4 * c_q + warp < p.ncols;
    if (live) {
      if (FOLD && (c_kb & p.fold_mask) == 0) {
        consume(cons, std::true_type{});
      } else {
        consume(cons, std::false_type{});
      }
    }
    if constexpr (FOLD) {
      const bool group_end = ((c_kb + 1) & p.fold_mask) == 0;
      if (++c_kb == p.kblocks) c_kb = 0;
      if (live && (group_end || seg_end)) fold(cons);
    }
    if (seg_end) {
      if (live) flush(c_q, c_mg, acc);
      if (++c_mg == src.mgroups()) {
        c_mg = 0;
        ++c_q;
      }
      seg_left = min(p.kblocks, n - it - 1);
    }
  };
  if constexpr (EARLY) {
    const uint16_t* pre_x[S - 1];
    bool pre_live[S - 1];
    auto issue_w = [&](uint32_t st, int s) {
      detail::issue_weights(st + wslot, p_w, pol, lane);
      src.issue_scales(st + wslot + SCALES, st + wslot + ZPS, p_kb * BK, p_scol, two_rows, lane);
      pre_x[s] = p_x;
      pre_live[s] = src.live();
      advance();
    };
    detail::run_ring_early<S>(n, ring, STRIDE, issue_w, dep_wait, [&](uint32_t st, int s) {
      if (pre_live[s]) issue_x(st, pre_x[s]);
    }, issue, step);
  } else {
    detail::run_ring<S, SHARE>(n, ring, STRIDE, issue, step);
  }
}

// grid, block, modes: as gemm_kernel. dynamic smem: swap_kernel_smem_bytes(BITS, ZEROS, SHARE),
// which admits kSwapCtasPerSm CTAs per SM (decode_config.h).
// SHARE (M >= kSwapShareMinM): the CTA stages each unit's activation slice once,
// for all four warps; otherwise every warp stages its own copy, lane-local.
template <int BITS, bool BF16, bool ZEROS, bool FOLD, bool SHARE>
__global__ void __launch_bounds__(kThreads, kSwapCtasPerSm) swap_kernel(const __grid_constant__ Params p) {
  constexpr int S = swap_kernel_stages(BITS, SHARE);
  constexpr int NX = slices_per_unit(BITS) / 2;
  extern __shared__ __align__(128) unsigned char smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;

  // ---- units [u0, u1) (detail::ring_units); here mgroups == 1. Shared: a warp
  // whose column does not exist in the last quad streams the last column again
  // and skips its MMAs and flush there.
  long long u0, u1;
  const int n = detail::ring_units<SHARE>(p, warp, 1, u0, u1);
  if (n == 0) return;
  const detail::UnitPos pos0 = detail::unit_pos(u0, p.kblocks, 1);
  detail::enter_dependent(p, min(4 * pos0.q + warp, p.ncols - 1), pos0.kb, S, lane);
  const int piece0 = detail::first_piece(p, u0 - pos0.kb);

  // ldmatrix: lane l addresses row l % 8 of matrix l / 8. Tokens >= M: slot stays
  // zero. Shared: warp h < NX copies ldmatrix block h (k32 h of the unit) for the
  // CTA, as every warp copies all NX lane-local.
  const int x_tok = lane & 7;
  detail::DenseSwapSource<BITS, ZEROS> src{p, x_tok, x_tok < p.M && (!SHARE || warp < NX)};

  // Lane (g, t) holds column 16 m + 8 h + g, tokens 2t, 2t + 1 in acc[m][2h],
  // acc[m][2h + 1]. After one exchange with lane ^ 4 (detail::token_pairs), even g
  // owns token 2t and odd g token 2t + 1, of columns (g & ~1, g | 1). Every
  // lane shuffles first (converged), then the lanes whose token exists write.
  auto flush = [&](int q, int /*mg*/, float (&acc)[4][4]) {
    const int g = lane >> 2, t = lane & 3;
    const int col0 = (4 * q + warp) * format::kBlockN;
    if (p.mode == kModeAtomic && p.M >= kSwapRunsMinM) {
      // Column 8 r + g (r = 2 m + h) packed as (token 2t, token 2t + 1); after the transpose lane
      // (g, t) holds columns 8 g .. 8 g + 7 of both tokens: one 16-byte reduction per token.
      uint32_t w[8];
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) w[2 * m + h] = detail::pack<BF16>(acc[m][2 * h], acc[m][2 * h + 1]);
      detail::clear(acc);
      detail::transpose_runs(w, g);
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const int tok = 2 * t + k;
        if (tok >= p.M) continue;
        const uint32_t sel = k ? 0x7632u : 0x5410u;  // the hi (token 2t + 1) or lo (token 2t) halves
        const uint4 run = make_uint4(ptx::prmt(w[0], w[1], sel), ptx::prmt(w[2], w[3], sel),
                                     ptx::prmt(w[4], w[5], sel), ptx::prmt(w[6], w[7], sel));
        detail::red_run<BF16>(p.y + static_cast<long long>(tok) * p.N + col0 + 8 * g, run);
      }
      return;
    }
    const int tok = 2 * t + (g & 1);
    const int col = col0 + (g & ~1);
    float v[4][2][2];
    detail::token_pairs(acc, g, v);
    if (tok >= p.M) return;
    const long long row = static_cast<long long>(tok) * p.N + col;
    if (p.mode == kModeAtomic) {
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          detail::red_pair<BF16>(p.y + row + 16 * m + 8 * h, detail::pack<BF16>(v[m][h][0], v[m][h][1]));
    } else if (p.mode == kModeDirect) {
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int cc = col + 16 * m + 8 * h;
          float b0 = 0.f, b1 = 0.f;
          if (p.bias != nullptr) {
            b0 = detail::to_f32<BF16>(p.bias[cc]);
            b1 = detail::to_f32<BF16>(p.bias[cc + 1]);
          }
          *reinterpret_cast<uint32_t*>(p.y + row + 16 * m + 8 * h) =
              detail::pack<BF16>(v[m][h][0] + b0, v[m][h][1] + b1);
        }
    } else {
      float* out = detail::piece_plane(p, q == pos0.q, piece0) + row;
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          *reinterpret_cast<float2*>(out + 16 * m + 8 * h) = make_float2(v[m][h][0], v[m][h][1]);
    }
  };

  swap_mainloop<BITS, BF16, ZEROS, FOLD, SHARE>(p, src, flush, pos0, n, lane, warp, smem);
}

template <int BITS, bool BF16, bool ZEROS, bool FOLD, bool SHARE>
KernelHandle make_swap_handle() {
  return KernelHandle{reinterpret_cast<const void*>(&swap_kernel<BITS, BF16, ZEROS, FOLD, SHARE>),
                      swap_kernel_smem_bytes(BITS, ZEROS, SHARE), swap_kernel_stages(BITS, SHARE)};
}

// Instances for one bit width: dtype x zero points x FOLD x shared activations.
template <int BITS, bool SHARE>
KernelHandle swap_handle_share(bool bf16, bool zeros, bool fold) {
  if (bf16) {
    if (fold)
      return zeros ? make_swap_handle<BITS, true, true, true, SHARE>() : make_swap_handle<BITS, true, false, true, SHARE>();
    return zeros ? make_swap_handle<BITS, true, true, false, SHARE>() : make_swap_handle<BITS, true, false, false, SHARE>();
  }
  if (fold)
    return zeros ? make_swap_handle<BITS, false, true, true, SHARE>() : make_swap_handle<BITS, false, false, true, SHARE>();
  return zeros ? make_swap_handle<BITS, false, true, false, SHARE>() : make_swap_handle<BITS, false, false, false, SHARE>();
}

}  // namespace decode
}  // namespace swordfish
