// The decode mainloop as a reusable piece: stage packed weights, scales and
// activations through a ring of cp.async stages, dequantize with LOP3, and
// run mma.sync.m16n8k16 over a contiguous range of flat units, handing the
// accumulators of each finished segment to an epilogue. Used by gemm_kernel
// (decode_gemm.cuh: rows of x / y are rows m) and by the fused-MoE expert GEMM
// (kernels/moe/moe_gemm.cuh: rows gathered through sorted slot ids, weights
// from an expert's slab).
//
// What a kernel supplies (duck-typed, all calls inlined):
//   P        the parameters: K, N, kblocks, ncols, gshift, evict_first,
//            fold_mask (decode_kernels.h Params, or moe::MoeParams).
//   Source   where the unit's operands come from, asked once per segment
//            (quad q, m-group / block mg) by the producer:
//              prepare(): per-thread constants, once before the first seek;
//              seek(q, mg, kb, x_row, x_col): point the activation cursor(s)
//                at this thread's rows of the segment (x_row + RP i, column
//                x_col, k-block kb) and pick the weight slab;
//              row_ok(i), x(i): whether pass i's row exists, and its 8
//                activations; advance(BK): next k-block;
//              packed(), scales(), zeros(): the slab (constant for a dense
//                layer, the block's expert for MoE); kSlabMoves: whether
//                seek() can change it (then packed() is read after seek());
//              mgroups(): m-groups (MoE: blocks) per quad.
//   Flush    flush(q, mg, acc): store the (MT, 8 tiles, 4) accumulators of
//            this warp's column 4 q + warp, m-group mg; the loop clears them
//            after (decode/epilogue.cuh: DenseEpilogue; MoE: moe_gemm.cuh).
// Vocabulary and the flat unit order: decode_config.h.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/common/dequant.cuh"
#include "kernels/common/format.h"
#include "kernels/common/ptx.cuh"
#include "kernels/decode/decode_config.h"

namespace swordfish {
namespace decode {

namespace detail {

using ptx::to_f32;  // kernels/common/ptx.cuh

template <bool BF16>
SF_DEVICE uint32_t pack(float lo, float hi) {
  if constexpr (BF16) {
    return ptx::cvt_pack_bf16x2(lo, hi);
  } else {
    return ptx::cvt_pack_f16x2(lo, hi);
  }
}

template <bool BF16>
SF_DEVICE void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (BF16) {
    ptx::mma_bf16(d, a, b0, b1);
  } else {
    ptx::mma_f16(d, a, b0, b1);
  }
}

// FOLD accumulators: D = A * B when `first` (the first MMA into it of a scale
// group: C is zero, ptxas reads RZ, so fold() clears nothing after applying a
// group), else D += A * B. `first` is a constant after unrolling.
template <bool BF16>
SF_DEVICE void mma_group(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, bool first) {
  if (first) d[0] = d[1] = d[2] = d[3] = 0.f;
  mma<BF16>(d, a, b0, b1);
}

// The scales of the eight fragment columns of this lane, 8 c + g (c = 0..7,
// g = lane / 4: tile c of the B-operand kernels, A row g of m16 tile c / 2 in
// swap_kernel), from one staged scale row (64 columns, 128 bytes at `row`),
// two per register: r[j] = (column 16 j + g, column 16 j + 8 + g), the
// scales of tiles 2 j and 2 j + 1. One ldmatrix.x4.trans does the broadcast:
// the rows of matrix j alternate between the two 16-byte runs of columns
// 16 j .. 16 j + 7 and 16 j + 8 .. 16 j + 15, so transposed, lane (g, t)
// receives element g of each (rows 2t, 2t + 1). The row was staged by other
// lanes (each copies its own 4 bytes): their cp.async waits are complete when
// they reach the __syncwarp, which orders those writes before the read.
SF_DEVICE void scale_columns(uint32_t row, int lane, uint32_t (&r)[4]) {
  __syncwarp();
  ptx::ldmatrix_x4_trans(r, row + 32 * (lane >> 3) + 16 * (lane & 1));
}

// The scale pairs of this lane's D-fragment columns in the B-operand kernels,
// (8 c + 2 t, 8 c + 2 t + 1) for c = 0..7 (gemm_kernel's FOLD epilogue): word
// 4 c + t of the staged row. Two ldmatrix.x4 whose eight row addresses per
// matrix all name the 16-byte run of columns 8 c .. 8 c + 7 (one broadcast
// wavefront each): lane (g, t) receives elements 2 t, 2 t + 1 of it. As in
// scale_columns, other lanes staged the row.
SF_DEVICE void scale_pairs(uint32_t row, int lane, uint32_t (&r)[8]) {
  __syncwarp();
  uint32_t lo[4], hi[4];
  ptx::ldmatrix_x4(lo, row + 16 * (lane >> 3));
  ptx::ldmatrix_x4(hi, row + 64 + 16 * (lane >> 3));
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    r[j] = lo[j];
    r[4 + j] = hi[j];
  }
}

// scale_columns as packed pairs for the dequant multiply: tile c's scale twice.
SF_DEVICE void expand_row(uint32_t row, int lane, uint32_t (&pairs)[8]) {
  uint32_t r[4];
  scale_columns(row, lane, r);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    pairs[2 * j] = dequant::dup_half(r[j], false);
    pairs[2 * j + 1] = dequant::dup_half(r[j], true);
  }
}

// scale_columns as one fp32 per tile (the FOLD epilogues). bf16 -> fp32 is the
// half moved to the top 16 bits: one shift or one mask.
template <bool BF16>
SF_DEVICE void expand_row_f32(uint32_t row, int lane, float (&out)[8]) {
  uint32_t r[4];
  scale_columns(row, lane, r);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if constexpr (BF16) {
      out[2 * j] = __uint_as_float(r[j] << 16);
      out[2 * j + 1] = __uint_as_float(r[j] & 0xffff0000u);
    } else {
      out[2 * j] = ptx::cvt_f32_f16(static_cast<uint16_t>(r[j] & 0xffffu));
      out[2 * j + 1] = ptx::cvt_f32_f16(static_cast<uint16_t>(r[j] >> 16));
    }
  }
}

template <bool BF16, bool ZEROS>
SF_DEVICE uint32_t apply(uint32_t w, uint32_t s, uint32_t z) {
  if constexpr (ZEROS) {
    return dequant::scale_zero<BF16>(w, s, z);
  } else {
    return dequant::scale<BF16>(w, s);
  }
}

SF_DEVICE uint32_t word(const uint4& v, int j) { return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w; }

// Zero a register array of accumulators (fully unrolled: stays in registers).
template <int N>
SF_DEVICE void clear(float (&a)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) a[i] = 0.f;
}
template <int R, int N>
SF_DEVICE void clear(float (&a)[R][N]) {
#pragma unroll
  for (int r = 0; r < R; ++r) clear(a[r]);
}
template <int T, int R, int N>
SF_DEVICE void clear(float (&a)[T][R][N]) {
#pragma unroll
  for (int t = 0; t < T; ++t) clear(a[t]);
}

// This lane's 16 B of each of the four weight sub-tiles staged at `slot`.
SF_DEVICE void lds_weights(uint4 (&wv)[format::kSubtiles], uint32_t slot, int lane) {
#pragma unroll
  for (int s = 0; s < format::kSubtiles; ++s) wv[s] = ptx::lds_128(slot + s * format::kSubtileBytes + lane * 16);
}

// Byte offset in a CTA-shared activation tile (kShareActs, decode_config.h):
// the 16-byte chunk index inside a 128-byte line XOR the line index mod 8.
SF_HOST_DEVICE constexpr uint32_t swizzle_128(uint32_t o) { return o ^ ((o >> 3) & 0x70u); }

// Where flat unit u lies: quad, m-group, k-block (mgroups folded as above).
struct UnitPos {
  int q, mg, kb;
};
SF_DEVICE UnitPos unit_pos(long long u, int kblocks, int mgroups) {
  const long long seg = u / kblocks;
  return UnitPos{static_cast<int>(seg / mgroups), static_cast<int>(seg % mgroups),
                 static_cast<int>(u - seg * kblocks)};
}

// A unit's weights, lane-local: this lane's 16 B of each 512-byte sub-tile of
// the column's block (w: the lane's bytes of sub-tile 0) into slot `dst`.
SF_DEVICE void issue_weights(uint32_t dst, const uint8_t* w, uint64_t pol, int lane) {
#pragma unroll
  for (int s = 0; s < format::kSubtiles; ++s)
    ptx::cp_async_16_cg(dst + s * format::kSubtileBytes + lane * 16, w + s * format::kSubtileBytes, pol);
}

// A unit's scale (+ zero-point) pair of this lane's columns (scol, scol + 1),
// lane-local: the row of k0, and for int4 g32 (two_rows) also the row of k0 + 32.
// src.scales() / src.zeros(): (K / group, N) of the layer (or of the expert);
// p: gshift, N.
template <int BITS, bool ZEROS, class P, class Source>
SF_DEVICE void issue_scales(uint32_t s_dst, uint32_t z_dst, const P& p, const Source& src, int k0, int scol,
                            bool two_rows, int lane) {
#pragma unroll
  for (int r = 0; r < scale_rows_per_unit(BITS); ++r) {
    if (r == 1 && !two_rows) break;
    const int off = ((k0 + r * 32) >> p.gshift) * p.N + scol;
    ptx::cp_async_4_ca(s_dst + r * 128 + lane * 4, src.scales() + off);
    if constexpr (ZEROS) ptx::cp_async_4_ca(z_dst + r * 128 + lane * 4, src.zeros() + off);
  }
}

// Zero BYTES at `base` of each of the S ring slots (stride apart): thread
// `tid` of NT stores 16 B at base + 16 tid, + 16 NT, ... (once, before the
// prologue; activation slots no thread copies must read as zeros).
template <int S, int BYTES, int NT>
SF_DEVICE void zero_ring(uint32_t base, uint32_t stride, int tid) {
#pragma unroll
  for (int st = 0; st < S; ++st)
#pragma unroll
    for (int o = 0; o < BYTES; o += 16 * NT)
      if (BYTES % (16 * NT) == 0 || o + tid * 16 < BYTES) ptx::sts_128(base + st * stride + o + tid * 16, make_uint4(0, 0, 0, 0));
}

// The steady state of run_ring and run_ring_early (below) after their first
// S - 1 issues: prod is the slot of the next issue, `issued` the units issued;
// ring_end = ring + S * stride, which the callers compute before their
// prologues (computed here, ptxas laid the prologues out differently).
template <int S, bool SYNC, class Issue, class Consume>
SF_DEVICE void ring_loop(int n, uint32_t ring, uint32_t ring_end, uint32_t stride, uint32_t prod, int issued,
                         Issue&& issue, Consume&& consume) {
  uint32_t cons = ring;
  for (int it = 0; it < n; ++it) {
    if constexpr (SYNC) {
      ptx::cp_async_wait<S - 2>();
      __syncthreads();
    }
    if constexpr (!SYNC) __syncwarp();
    if (issued < n) {
      issue(prod);
      ++issued;
    }
    ptx::cp_async_commit();
    prod += stride;
    if (prod == ring_end) prod = ring;
    if constexpr (!SYNC) {
      ptx::cp_async_wait<S - 1>();
      __syncwarp();
    }
    consume(it, cons);
    cons += stride;
    if (cons == ring_end) cons = ring;
  }
}

// The stage ring: S slots of `stride` bytes from `ring`, compare-and-wrap
// cursors. issue(st) copies the next unit into slot st; consume(it, st) uses
// unit it (0 .. n - 1) from slot st. S - 1 units are issued before the loop.
//   SYNC = false (one warp's slots: each lane copies its own bytes, ldmatrix
//     reads rows other lanes copied): iteration it issues unit it + S - 1
//     into the slot consumed at it - 1, commits (empty groups past the end
//     keep the count uniform) and waits for unit it with the per-thread
//     cp.async.wait_group. Two __syncwarp per unit, no CTA barrier: one before
//     the refill (the other lanes' reads of the slot come before this lane's
//     copies into it), one after the wait (their copies of unit it have landed
//     before this lane reads them).
//   SYNC = true (slots some threads fill and others read: kShareActs): wait
//     for this thread's copies of unit it, then one CTA barrier: after it every
//     copy of unit it has landed and is visible, and every warp has finished
//     unit it - 1, whose slot the refill (unit it + S - 1) then takes. n must
//     be the same for every thread of the CTA.
template <int S, bool SYNC = false, class Issue, class Consume>
SF_DEVICE void run_ring(int n, uint32_t ring, uint32_t stride, Issue&& issue, Consume&& consume) {
  static_assert(S >= (SYNC ? 3 : 2), "the ring needs a unit in flight beyond the one consumed");
  const uint32_t ring_end = ring + S * stride;
  uint32_t prod = ring;
  int issued = 0;
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (issued < n) {
      issue(prod);
      ++issued;
    }
    ptx::cp_async_commit();
    prod += stride;
  }
  ring_loop<S, SYNC>(n, ring, ring_end, stride, prod, issued, issue, consume);
}

// dep_wait of a loop with nothing to wait for.
struct NoWait {
  SF_DEVICE void operator()() const {}
};

// Lane-local run_ring whose first S - 1 units copy their weights and scales
// (issue_w(slot, s)) before dep_wait(), while the kernel before still runs, and
// their activations (issue_x(slot, s)) after it, in one group that every lane
// waits for with all earlier ones before the first consume. From there on the
// ring runs as run_ring's (unit it + S - 1 refills the slot of unit it - 1).
template <int S, class IssueW, class Wait, class IssueX, class Issue, class Consume>
SF_DEVICE void run_ring_early(int n, uint32_t ring, uint32_t stride, IssueW&& issue_w, Wait&& dep_wait,
                              IssueX&& issue_x, Issue&& issue, Consume&& consume) {
  static_assert(S >= 2, "the ring needs a unit in flight beyond the one consumed");
  const uint32_t ring_end = ring + S * stride;
  uint32_t prod = ring;
  int issued = 0;
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (issued < n) {
      issue_w(prod, s);
      ++issued;
    }
    ptx::cp_async_commit();
    prod += stride;
  }
  dep_wait();
#pragma unroll
  for (int s = 0; s < S - 1; ++s)
    if (s < issued) issue_x(ring + s * stride, s);
  ptx::cp_async_commit();
  ptx::cp_async_wait<0>();
  ring_loop<S, false>(n, ring, ring_end, stride, prod, issued, issue, consume);
}

}  // namespace detail

// How a unit's activation tile (MT x 16 rows, BK columns) is copied: NP copy
// passes per unit, RP rows apart. Shared (kShareActs): every thread one 16-byte
// chunk per pass (row tid / XC, chunk tid % XC), XR rows per 2 KB pass;
// lane-local: one pass per m16 tile, each lane its ldmatrix row, NS slices.
template <int BITS, int MT, bool SHARE>
struct ActTiling {
  static constexpr int BK = format::block_k(BITS);
  static constexpr int RB = BK * 2;         // bytes of one activation row of a unit
  static constexpr int XC = BK / 8;         // shared: 16-byte chunks per row (8 int4, 4 int8)
  static constexpr int XR = kThreads / XC;  // shared: rows one pass of the CTA copies (16 int4, 32 int8)
  static constexpr int NP = SHARE ? (MT * 16 + XR - 1) / XR : MT;
  static constexpr int RP = SHARE ? XR : 16;
};

// The mainloop over this CTA's n units from pos0 (the flat order of
// decode_config.h with src.mgroups() m-groups per quad): staging ring, dequant,
// MMA, FOLD, and a flush at every segment end.
// smem: the dynamic shared memory of gemm_smem_bytes(BITS, MT, ZEROS, SHARE).
// SHARE: n must be the same for all threads of the CTA (run_ring's barrier).
template <int BITS, bool BF16, int MT, bool ZEROS, bool FOLD, bool SHARE, class P, class Source, class Flush>
SF_DEVICE void mainloop(const P& p, Source& src, Flush&& flush, const detail::UnitPos pos0, const int n,
                        unsigned char* smem) {
  constexpr int S = gemm_stages(BITS, MT, SHARE);
  constexpr StageLayout L = stage_layout(BITS, MT, ZEROS);                 // lane-local: one warp's stage
  constexpr SharedStageLayout C = shared_stage_layout(BITS, MT, ZEROS);   // shared: the CTA's stage
  constexpr int STRIDE = SHARE ? C.bytes : L.bytes;                       // bytes per ring slot
  constexpr int SCALES = SHARE ? C.scale_offset : L.scale_offset;         // from the warp's weight slot
  constexpr int ZPS = SHARE ? C.zero_offset : L.zero_offset;
  constexpr int NS = slices_per_unit(BITS);
  using T = ActTiling<BITS, MT, SHARE>;
  constexpr int BK = T::BK;
  constexpr int RB = T::RB;
  constexpr int XC = T::XC;
  constexpr int XR = T::XR;
  constexpr int NP = T::NP;
  static_assert(MT >= 1 && MT <= kMaxTiles, "1..4 m16 tiles per m-group");
  static_assert(!FOLD || MT <= kFoldMaxTiles, "the fp32 scale fold keeps a second accumulator set (kFoldMaxTiles)");
  static_assert(!SHARE || XR * RB == 2048, "a shared copy pass fills one 2 KB block of the tile");
  constexpr float kOffset = dequant::kRawOffset<BITS, BF16>;
  constexpr bool kRowSums = FOLD && (kOffset != 0.f || ZEROS);  // the fold needs sum(x) per group

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;

  // ---- stage ring (S, STRIDE): 32-bit shared addresses, compare-and-wrap.
  // Lane-local: one ring per warp, act at L.act_offset of each slot. Shared:
  // one ring for the CTA, the activation tile first, then the warps' slots.
  const uint32_t ring = ptx::smem_u32(smem) + static_cast<uint32_t>(SHARE ? 0 : warp * S * L.bytes);
  const uint32_t wslot = SHARE ? static_cast<uint32_t>(C.warp_offset + warp * C.warp_bytes) : 0u;

  // Activation slots start as zeros. A row the source marks absent (>= M, a
  // padding slot) is never copied (it may keep a valid row of an earlier
  // m-group): such rows only feed accumulator rows that are never stored.
  // Shared: other threads copy into what this one zeroes, so a barrier
  // separates the two.
  if constexpr (SHARE) {
    detail::zero_ring<S, MT * 16 * RB, kThreads>(ring, STRIDE, tid);
    __syncthreads();
  } else {
    detail::zero_ring<S, MT * NS * 512, 32>(ring + L.act_offset, L.bytes, lane);
  }

  const bool two_rows = BITS == 4 && p.gshift == 5;  // int4 g32: slices 2, 3 use the next scale row

  // ---- producer: the unit it issues next, as cursors
  const uint64_t pol = p.evict_first ? ptx::policy_evict_first() : ptx::policy_evict_normal();
  const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8;  // ldmatrix.x4: lane l addresses row l % 8 of matrix l / 8
  const int a_col = (lane >> 4) * 8;                      // matrices 2, 3 hold k 8..15
  // The rows and column this thread copies: lane-local, its ldmatrix row of
  // each m16 tile; shared, chunk tid of each 2 KB pass (row tid / XC, 16-byte
  // chunk tid % XC), written at swizzle_128(16 tid) of the pass.
  const int x_row = SHARE ? tid / XC : a_row;
  const int x_col = SHARE ? (tid % XC) * 8 : a_col;
  const uint32_t x_dst = detail::swizzle_128(static_cast<uint32_t>(tid) * 16);
  // ldmatrix address of this lane in tile 0 slice 0 of the shared tile; slice sl: ^ 32 sl (the chunk pair 2 sl)
  const uint32_t x_lane = detail::swizzle_128(static_cast<uint32_t>(a_row * RB)) ^ static_cast<uint32_t>(a_col * 2);
  src.prepare();
  int p_kb = pos0.kb, p_mg = pos0.mg, p_q = pos0.q;
  const uint8_t* p_w = nullptr;  // this lane's 16 B of sub-tile 0 of the unit
  int p_scol = 0;                // scale column of this lane's pair: 64 col + 2 lane
  auto seek = [&]() {
    // shared: a warp whose column does not exist (short last quad) streams the
    // last column again instead of branching around its copies; it skips the MMAs
    const int col = SHARE ? min(4 * p_q + warp, p.ncols - 1) : 4 * p_q + warp;
    // A source whose slab moves (MoE: seek() picks the block's expert) is read after seek(); a dense
    // source's never does, and reading it first keeps the dense kernels' SASS as measured.
    if constexpr (Source::kSlabMoves) src.seek(p_q, p_mg, p_kb, x_row, x_col);
    p_w = src.packed() + (static_cast<long long>(col) * p.kblocks + p_kb) * kUnitBytes + lane * 16;
    if constexpr (!Source::kSlabMoves) src.seek(p_q, p_mg, p_kb, x_row, x_col);
    p_scol = col * format::kBlockN + 2 * lane;
  };
  seek();

  auto issue = [&](uint32_t st) {
    detail::issue_weights(st + wslot, p_w, pol, lane);
#pragma unroll
    for (int i = 0; i < NP; ++i) {
      if (src.row_ok(i)) {
        if constexpr (SHARE) {
          ptx::cp_async_16_ca(st + i * 2048 + x_dst, src.x(i));
        } else {
#pragma unroll
          for (int sl = 0; sl < NS; ++sl)
            ptx::cp_async_16_ca(st + L.act_offset + (i * NS + sl) * 512 + lane * 16,
                                src.x(i) + sl * format::kFragmentK);
        }
      }
    }
    detail::issue_scales<BITS, ZEROS>(st + wslot + SCALES, st + wslot + ZPS, p, src, p_kb * BK, p_scol, two_rows,
                                      lane);
    if (++p_kb == p.kblocks) {
      p_kb = 0;
      if (++p_mg == src.mgroups()) {
        p_mg = 0;
        ++p_q;
      }
      seek();  // segment boundary: once per segment, off the steady path
    } else {
      p_w += kUnitBytes;
      src.advance(BK);
    }
  };

  // ldmatrix.x4 address of this lane's rows of m16 tile mt, k16 slice sl, in the stage at st
  auto act_addr = [&](uint32_t st, int mt, int sl) -> uint32_t {
    if constexpr (SHARE) return st + mt * 16 * RB + (x_lane ^ static_cast<uint32_t>(sl * 32));
    return st + L.act_offset + (mt * NS + sl) * 512 + lane * 16;
  };

  // ---- consumer
  float acc[MT][8][4];
  detail::clear(acc);


  // FOLD (MT <= kFoldMaxTiles): the MMAs accumulate x . raw per scale group in
  // raw[] (dequant::kRawOffset), xs[] the group's row sums of x; fold() applies
  // acc += s * (raw - offset * xs) (+ zs * xs) in fp32 at each group end and
  // before a flush; the next group's first MMAs overwrite them (mma_group). No
  // scale multiply, and for int4 bf16 / int8 fp16 no bias fma, per weight pair;
  // each dequantized pair feeds the MT tiles' MMAs.
  constexpr int FT = FOLD ? MT : 1;  // tiles with raw sums (the unfolded instances keep one unused slot)
  float raw[FT][FOLD ? 8 : 1][4], xs[FT][4];
  detail::clear(raw);
  detail::clear(xs);

  // FRESH: the unit opens a scale group (fold() left raw / xs stale): the first
  // MMA into each accumulator overwrites it (mma_group).
  auto consume_fold = [&](uint32_t st, auto fresh_tag) {
    constexpr bool FRESH = decltype(fresh_tag)::value;
    uint4 wv[format::kSubtiles];
    detail::lds_weights(wv, st + wslot, lane);
#pragma unroll
    for (int sl = 0; sl < NS; ++sl) {
      uint32_t a[FT][4];
#pragma unroll
      for (int mt = 0; mt < FT; ++mt) {
        ptx::ldmatrix_x4(a[mt], act_addr(st, mt, sl));
        if constexpr (kRowSums)
          detail::mma_group<BF16>(xs[mt], a[mt], dequant::kOnes<BF16>, dequant::kOnes<BF16>, FRESH && sl == 0);
      }
      if constexpr (BITS == 4) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t w[4];
          dequant::int4_raw<BF16>(detail::word(wv[sl], j), w);
#pragma unroll
          for (int mt = 0; mt < FT; ++mt) {
            detail::mma_group<BF16>(raw[mt][2 * j], a[mt], w[0], w[1], FRESH && sl == 0);
            detail::mma_group<BF16>(raw[mt][2 * j + 1], a[mt], w[2], w[3], FRESH && sl == 0);
          }
        }
      } else {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            uint32_t w[2];
            dequant::int8_raw<BF16>(detail::word(wv[2 * sl + h], j), w);
#pragma unroll
            for (int mt = 0; mt < FT; ++mt)
              detail::mma_group<BF16>(raw[mt][4 * h + j], a[mt], w[0], w[1], FRESH && sl == 0);
          }
        }
      }
    }
  };

  // The group's scale (and zero-point) row is the one staged with the unit
  // just consumed (slot 0: FOLD never runs int4 g32, where a unit has two).
  // Accumulator [c][i] of this lane is output column 8 c + 2 t + (i & 1): its
  // scale pair (columns 8 c + 2 t, + 1) is word 4 c + t of the row (scale_pairs).
  auto fold = [&](uint32_t st) {
    uint32_t sp[8], zp[8] = {};
    detail::scale_pairs(st + wslot + SCALES, lane, sp);
    if constexpr (ZEROS) detail::scale_pairs(st + wslot + ZPS, lane, zp);
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const uint32_t sw = sp[c];
      const float sc[2] = {detail::to_f32<BF16>(static_cast<uint16_t>(sw & 0xffffu)),
                           detail::to_f32<BF16>(static_cast<uint16_t>(sw >> 16))};
      float zc[2] = {0.f, 0.f};
      if constexpr (ZEROS) {
        zc[0] = detail::to_f32<BF16>(static_cast<uint16_t>(zp[c] & 0xffffu));
        zc[1] = detail::to_f32<BF16>(static_cast<uint16_t>(zp[c] >> 16));
      }
#pragma unroll
      for (int mt = 0; mt < FT; ++mt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float t_i = kOffset != 0.f ? fmaf(-kOffset, xs[mt][i], raw[mt][c][i]) : raw[mt][c][i];
          acc[mt][c][i] = fmaf(sc[i & 1], t_i, acc[mt][c][i]);
          if constexpr (ZEROS) acc[mt][c][i] = fmaf(zc[i & 1], xs[mt][i], acc[mt][c][i]);
        }
      }
    }
  };

  auto consume = [&](uint32_t st) {
    const uint32_t w = st + wslot;
    uint4 wv[format::kSubtiles];
    detail::lds_weights(wv, w, lane);
    uint32_t sp[8], zp[8] = {};  // zp stays 0 (and unused) without zero points
    detail::expand_row(w + SCALES, lane, sp);
    if constexpr (ZEROS) detail::expand_row(w + ZPS, lane, zp);
#pragma unroll
    for (int sl = 0; sl < NS; ++sl) {
      if constexpr (BITS == 4) {
        if (sl == 2 && two_rows) {
          detail::expand_row(w + SCALES + 128, lane, sp);
          if constexpr (ZEROS) detail::expand_row(w + ZPS + 128, lane, zp);
        }
      }
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) ptx::ldmatrix_x4(a[mt], act_addr(st, mt, sl));
      if constexpr (BITS == 4) {
        // sub-tile sl = k16 slice sl; word j = n8 tiles 2j, 2j+1
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t w[4];
          dequant::int4_pairs<BF16>(detail::word(wv[sl], j), w);
          const uint32_t b0 = detail::apply<BF16, ZEROS>(w[0], sp[2 * j], zp[2 * j]);
          const uint32_t b1 = detail::apply<BF16, ZEROS>(w[1], sp[2 * j], zp[2 * j]);
          const uint32_t b2 = detail::apply<BF16, ZEROS>(w[2], sp[2 * j + 1], zp[2 * j + 1]);
          const uint32_t b3 = detail::apply<BF16, ZEROS>(w[3], sp[2 * j + 1], zp[2 * j + 1]);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            detail::mma<BF16>(acc[mt][2 * j], a[mt], b0, b1);
            detail::mma<BF16>(acc[mt][2 * j + 1], a[mt], b2, b3);
          }
        }
      } else {
        // sub-tile 2 sl + h = k16 slice sl, n32 half h; word j = n8 tile 4h + j
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int c = 4 * h + j;
            uint32_t w[2];
            dequant::int8_pairs<BF16>(detail::word(wv[2 * sl + h], j), w);
            const uint32_t b0 = detail::apply<BF16, ZEROS>(w[0], sp[c], zp[c]);
            const uint32_t b1 = detail::apply<BF16, ZEROS>(w[1], sp[c], zp[c]);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) detail::mma<BF16>(acc[mt][c], a[mt], b0, b1);
          }
        }
      }
    }
  };

  // ---- pipeline (detail::run_ring; shared: one CTA barrier per unit); flush at each segment end
  int seg_left = min(p.kblocks - pos0.kb, n);  // units left in the current segment
  int c_q = pos0.q, c_mg = pos0.mg;
  int c_kb = pos0.kb;                              // FOLD: k-block of the unit being consumed (group ends)
  bool c_col = !SHARE || 4 * c_q + warp < p.ncols;  // this warp's column of the segment exists
  detail::run_ring<S, SHARE>(n, ring, STRIDE, issue, [&](int it, uint32_t cons) {
    const bool seg_end = --seg_left == 0;
    if constexpr (FOLD) {
      const bool group_start = (c_kb & p.fold_mask) == 0;
      const bool group_end = ((c_kb + 1) & p.fold_mask) == 0;
      if (++c_kb == p.kblocks) c_kb = 0;
      if (c_col) {
        if (group_start) {
          consume_fold(cons, std::true_type{});
        } else {
          consume_fold(cons, std::false_type{});
        }
        if (group_end || seg_end) fold(cons);
      }
    } else {
      if (c_col) consume(cons);
    }
    if (seg_end) {
      if (c_col) {
        flush(c_q, c_mg, acc);
        detail::clear(acc);
      }
      if (++c_mg == src.mgroups()) {
        c_mg = 0;
        ++c_q;
        if constexpr (SHARE) c_col = 4 * c_q + warp < p.ncols;
      }
      seg_left = min(p.kblocks, n - it - 1);
    }
  });
}

}  // namespace decode
}  // namespace swordfish
