// The Transform stage of the prefill mainloops: staged packed blocks in shared
// memory -> dequantized, scaled weight fragments in registers, in the
// m16 x k16 A-operand layout that both tensor-core generations consume.
//
// The prefill kernels compute y^T = W x^T: the weight is the MMA's A operand
// (M side = output columns n), the activations are B (N side = tokens). Format
// v1 stores, per k16 slice, what a warp feeds mma.sync as B fragments for n8
// tiles; read as an A operand, two n8 tiles are one m16 A fragment, so a word
// dequantizes straight into A registers with no shuffles (the decode swap
// kernel uses the same fact):
//   A fragment of mma.m16n8k16 / wgmma .m64 (per warp, rows r, cols c):
//     a0 = (r = g,     c = 2t, 2t+1)   a1 = (r = g + 8, c = 2t, 2t+1)
//     a2 = (r = g,     c = 2t+8, +9)   a3 = (r = g + 8, c = 2t+8, +9)
//   (lane = 4g + t). Row g of the fragment is output column n_lo, row g + 8 is
//   n_hi = n_lo + 8.
//
// Who uses it:
//   sm90 (prefill_sm90.cuh): wgmma.m64nNk16 with A from registers. Warp w of a
//     consumer warpgroup owns A rows 16w .. 16w + 15 and feeds the fragment
//     directly.
//   sm100 (a later issue): tcgen05.mma reads A from shared memory (or TMEM);
//     its Transform warps call the same fragment() and store the four
//     registers into the UMMA operand buffer at the row/column this header
//     names (Role::n_lo / n_hi, 2t / 2t + 8), so only the store is new.
//
// Row assignment (Role): which 16 output columns a warp's A rows cover is free
// (the accumulator row -> n map is undone in the epilogue), so it is chosen to
// make the shared loads of a warp conflict free:
//   int4: warp w, lane group g reads word j = (w + g / 2) % 4 of each lane's
//     16-byte slot (rows n = 16 j + g and 16 j + 8 + g). Byte address within a
//     512-byte sub-tile is 16 lane + 4 j, bank = (4 lane + j) % 32 =
//     16 (g % 2) + 4 t + (w + g / 2) % 4: 32 distinct banks over the warp.
//   int8: warp w takes n32 half h = w / 2 and word pair p = (w + g / 2) % 2
//     (rows 32 h + 16 p + g and + 8); a lane loads 8 bytes at 16 lane + 8 p:
//     within each half-warp phase lanes l and l + 8 differ in p, so the 16
//     lanes hit 32 distinct banks.
// For a fixed g, w -> j (int4) and w -> (h, p) (int8) are bijections, so the
// four warps of a warpgroup cover all 64 columns of the block exactly once.
#pragma once

#include <cstdint>

#include "kernels/common/dequant.cuh"
#include "kernels/common/format.h"
#include "kernels/common/ptx.cuh"
#include "kernels/prefill/slice.h"

namespace swordfish {
namespace prefill {


// One thread's place in a warpgroup's 64 x k16 A tile.
struct Role {
  int n_lo;        // output column (within the n64 block) of fragment row g; n_hi = n_lo + 8
  uint32_t word;   // byte offset of the thread's word(s) within a sub-tile (int4) / sub-tile pair (int8)
  int half;        // int8: which n32 half's sub-tile (0 / 1); int4: 0
};

template <int BITS>
SF_HOST_DEVICE constexpr Role make_role(int warp_in_group, int lane) {
  const int g = lane / 4;
  Role r{};
  if constexpr (BITS == 4) {
    const int j = (warp_in_group + g / 2) & 3;
    r.n_lo = 16 * j + g;
    r.word = 16u * lane + 4u * j;
    r.half = 0;
  } else {
    const int h = warp_in_group / 2;
    const int p = ((warp_in_group & 1) + g / 2) & 1;
    r.n_lo = 32 * h + 16 * p + g;
    r.word = 16u * lane + 8u * p;
    r.half = h;
  }
  return r;
}

// Byte offset, within a staged k64 slice of one n64 block, of the word(s) the
// role reads for k16 step kk (0..3).
template <int BITS>
SF_HOST_DEVICE constexpr uint32_t fragment_offset(const Role& r, int kk) {
  if constexpr (BITS == 4) {
    return static_cast<uint32_t>(kk) * format::kSubtileBytes + r.word;  // sub-tile kk of the block
  } else {
    // k16 step kk is block kk / 2 (k32 each), k16 slice kk % 2 inside it;
    // sub-tile 2 (kk % 2) + half.
    return static_cast<uint32_t>(kk / 2) * format::kBlockBytes +
           static_cast<uint32_t>(2 * (kk % 2) + r.half) * format::kSubtileBytes + r.word;
  }
}

// ---------------------------------------------------------------- compile-time proofs

namespace detail {

// Where fragment() takes A register `reg`'s half `half` from: the byte offset
// of its word within the staged slice and the value's bit shift in it, as the
// dequant routines extract them (dequant.cuh: int4 pair i = nibbles i, i + 4
// with a0 = pair 0, a1 = pair 2, a2 = pair 1, a3 = pair 3; int8 b0 = bytes
// 0, 2 and b1 = bytes 1, 3 of word 2p (rows n_lo) and 2p + 1 (rows n_hi)).
struct Source {
  uint32_t byte;
  int shift;
};

template <int BITS>
constexpr Source source(const Role& r, int kk, int reg, int half) {
  if constexpr (BITS == 4) {
    constexpr int kPair[4] = {0, 2, 1, 3};
    return Source{fragment_offset<4>(r, kk), 4 * (kPair[reg] + 4 * half)};
  } else {
    const uint32_t word = fragment_offset<8>(r, kk) + ((reg == 1 || reg == 3) ? 4u : 0u);
    const int b = reg < 2 ? 0 : 1;  // b0 (a0, a1) or b1 (a2, a3)
    return Source{word, 8 * (b + 2 * half)};
  }
}

// Every (warp, lane, k16 step, register, half) reads the value the A operand
// layout needs there: A rows g / g + 8 are columns n_lo / n_hi, A columns
// 2t + half (+ 8 for a2, a3) are k within the step. Checked against
// format::locate, the format's definition.
template <int BITS>
constexpr bool roles_read_the_a_operand() {
  for (int w = 0; w < 4; ++w)
    for (int lane = 0; lane < 32; ++lane) {
      const Role r = make_role<BITS>(w, lane);
      const int t = lane % 4;
      for (int kk = 0; kk < 4; ++kk)
        for (int reg = 0; reg < 4; ++reg)
          for (int half = 0; half < 2; ++half) {
            const int n = r.n_lo + ((reg & 1) ? 8 : 0);
            const int k = 16 * kk + 2 * t + half + (reg >= 2 ? 8 : 0);  // within the k64 slice
            const int kb = k / format::block_k(BITS);                     // int8: block 0 or 1
            const format::Slot slot = format::locate(BITS, k % format::block_k(BITS), n);
            const Source src = source<BITS>(r, kk, reg, half);
            if (src.byte != static_cast<uint32_t>(kb * format::kBlockBytes + 4 * slot.word) || src.shift != slot.shift)
              return false;
          }
    }
  return true;
}

// The four warps of a warpgroup cover the block's 64 columns exactly once.
template <int BITS>
constexpr bool roles_cover_the_block() {
  int seen[64] = {};
  for (int w = 0; w < 4; ++w)
    for (int g = 0; g < 8; ++g) {
      const Role r = make_role<BITS>(w, 4 * g);
      if (r.n_lo < 0 || r.n_lo + 8 >= 64) return false;
      ++seen[r.n_lo];
      ++seen[r.n_lo + 8];
    }
  for (int n = 0; n < 64; ++n)
    if (seen[n] != 1) return false;
  return true;
}

// A warp's fragment loads hit every bank at most once per phase: int4 is one
// 4-byte load per lane (one phase of 32 lanes), int8 one 8-byte load per lane
// (two phases of 16 lanes, each covering 2 banks per lane).
template <int BITS>
constexpr bool fragment_loads_conflict_free() {
  constexpr int kPhase = BITS == 4 ? 32 : 16;
  constexpr int kWords = BITS == 4 ? 1 : 2;
  for (int w = 0; w < 4; ++w)
    for (int kk = 0; kk < 4; ++kk)
      for (int phase = 0; phase < 32 / kPhase; ++phase) {
        int bank_users[32] = {};
        for (int l = phase * kPhase; l < (phase + 1) * kPhase; ++l) {
          const uint32_t byte = fragment_offset<BITS>(make_role<BITS>(w, l), kk);
          for (int i = 0; i < kWords; ++i)
            if (++bank_users[(byte / 4 + i) % 32] > 1) return false;
        }
      }
  return true;
}

static_assert(roles_read_the_a_operand<4>() && roles_read_the_a_operand<8>(),
              "a Role's words must hold the A fragment rows n_lo / n_hi (format::locate)");
static_assert(roles_cover_the_block<4>() && roles_cover_the_block<8>(),
              "the four warps' roles must cover the 64 columns of a block exactly once");
static_assert(fragment_loads_conflict_free<4>() && fragment_loads_conflict_free<8>(),
              "fragment loads must be free of shared-memory bank conflicts");

}  // namespace detail

// The A fragment for one k16 step: dequantize, then (q - B) * s (+ zs) with
// one rounding, exactly as the reference. s_lo / s_hi (and z_lo / z_hi) are
// the scale (folded zero point) of columns n_lo / n_hi duplicated into both
// halves of a pair.
template <int BITS, bool BF16, bool ZEROS>
SF_DEVICE void fragment(uint32_t smem_addr, uint32_t s_lo, uint32_t s_hi, uint32_t z_lo, uint32_t z_hi,
                        uint32_t (&a)[4]) {
  uint32_t lo0, lo1, hi0, hi1;  // b0 / b1 pairs of rows n_lo and n_hi
  if constexpr (BITS == 4) {
    uint32_t w[4];
    dequant::int4_pairs<BF16>(ptx::lds_32(smem_addr), w);
    lo0 = w[0]; lo1 = w[1]; hi0 = w[2]; hi1 = w[3];
  } else {
    const uint2 q = ptx::lds_64(smem_addr);
    uint32_t u[2], v[2];
    dequant::int8_pairs<BF16>(q.x, u);
    dequant::int8_pairs<BF16>(q.y, v);
    lo0 = u[0]; lo1 = u[1]; hi0 = v[0]; hi1 = v[1];
  }
  if constexpr (ZEROS) {
    a[0] = dequant::scale_zero<BF16>(lo0, s_lo, z_lo);
    a[1] = dequant::scale_zero<BF16>(hi0, s_hi, z_hi);
    a[2] = dequant::scale_zero<BF16>(lo1, s_lo, z_lo);
    a[3] = dequant::scale_zero<BF16>(hi1, s_hi, z_hi);
  } else {
    (void)z_lo;
    (void)z_hi;
    a[0] = dequant::scale<BF16>(lo0, s_lo);
    a[1] = dequant::scale<BF16>(hi0, s_hi);
    a[2] = dequant::scale<BF16>(lo1, s_lo);
    a[3] = dequant::scale<BF16>(hi1, s_hi);
  }
}

// A 16-bit value from shared memory duplicated into both halves of a pair.
SF_DEVICE uint32_t lds_pair(uint32_t addr) { return ptx::prmt(ptx::lds_u16(addr), 0u, 0x1010u); }

// Where a staged k64 slice lives in shared memory, for one thread.
struct SliceAddr {
  uint32_t words;   // the n64 block's packed k64 slice (format v1 bytes)
  uint32_t scales;  // column n_lo of the first staged scale row (16-bit values)
  uint32_t zeros;   // the same in the folded zero-point rows
  uint32_t row1;    // byte offset of the scale row for k16 steps 2, 3: 256 (group 32: two rows) or 0
};

// The whole Transform of one k64 slice: four k16 A fragments. All shared
// loads are issued first, then the integer / half math of the four
// independent fragments, so the four dependency chains interleave (a branch
// per fragment would serialize them: ZEROS is a template argument for that
// reason).
template <int BITS, bool BF16, bool ZEROS>
SF_DEVICE void transform_slice(const SliceAddr& at, const Role& role, uint32_t (&a)[4][4]) {
  uint32_t s[2][2], z[2][2] = {{0u, 0u}, {0u, 0u}};
  s[0][0] = lds_pair(at.scales);
  s[0][1] = lds_pair(at.scales + 16);  // column n_hi = n_lo + 8
  s[1][0] = lds_pair(at.scales + at.row1);
  s[1][1] = lds_pair(at.scales + at.row1 + 16);
  if constexpr (ZEROS) {
    z[0][0] = lds_pair(at.zeros);
    z[0][1] = lds_pair(at.zeros + 16);
    z[1][0] = lds_pair(at.zeros + at.row1);
    z[1][1] = lds_pair(at.zeros + at.row1 + 16);
  }
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    fragment<BITS, BF16, ZEROS>(at.words + fragment_offset<BITS>(role, kk), s[kk / 2][0], s[kk / 2][1], z[kk / 2][0],
                                z[kk / 2][1], a[kk]);
}

}  // namespace prefill
}  // namespace swordfish
