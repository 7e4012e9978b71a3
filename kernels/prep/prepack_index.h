// Index math of the prepack kernel (prepack.cuh), host- and device-usable,
// and a compile-time proof that the kernel writes exactly format::locate().
//
// The kernel moves one block in two steps through a shared-memory staging
// tile, so that both the global reads and the global writes are coalesced
// and both shared-memory steps are 16-byte / 4-byte conflict-free accesses:
//
//   1. stage:    GPTQ words (K-packed) -> staging tile, one byte per value.
//                The tile is column-major, (BLOCK_N columns) x (stride bytes);
//                inside a column the block's rows sit in *fragment order*:
//                row k at stage_pos(k). One k16 slice of one column is one
//                16-byte run, written with one 16-byte store.
//   2. assemble: each thread builds its 4 output words (16 bytes) from 32-bit
//                loads of the staging tile (word_operands) and a few shifts
//                and masks (assemble4 / the int8 word is the load itself).
//
// stage_pos is chosen so that the four values a lane's fragment needs from
// one column (rows 2t, 2t+1, 2t+8, 2t+9 of a k16 slice) are one aligned
// 32-bit word, already in kByteOfFragment8 order. Everything below is
// checked against format::locate by static_assert (prepack_proof()).
#pragma once

#include <cstdint>

#include "kernels/common/format.h"

namespace swordfish {
namespace prep {

inline constexpr int kThreads = 128;      // threads per CTA: 128 x 16 B = one 2 KB block
inline constexpr int kBlocksPerCta = 2;   // consecutive k-blocks per CTA (more loads in flight)
inline constexpr int kStagePad = 16;      // staging column padding: conflict-free accesses
// Occupancy hint for __launch_bounds__: 8 (not 16) CTAs per SM lets ptxas keep
// all of a thread's source loads in flight before the first use (at the 32
// registers a 16-CTA bound forces, it sinks half of them below the
// interleave arithmetic and the CTA waits for memory twice).
inline constexpr int kMinCtasPerSm = 8;

// kByteOfFragment8 = {0, 2, 1, 3} as arithmetic (swap of the two bits), so
// device code needs no table; equality with the header's table is asserted.
SF_HOST_DEVICE constexpr int byte_of_fragment8(int f) { return ((f & 1) << 1) | (f >> 1); }

// Bytes per staged column: block_k rows plus padding.
SF_HOST_DEVICE constexpr int stage_stride(int bits) { return format::block_k(bits) + kStagePad; }

// Row k (0 .. block_k) of a column -> its byte in the staged column.
// Inside k16 slice k / 16: lane-quad t = (kk % 8) / 2 owns bytes 4t .. 4t+3,
// holding fragment values f = 0..3 (rows 2t, 2t+1, 2t+8, 2t+9) at bytes
// byte_of_fragment8(f).
SF_HOST_DEVICE constexpr int stage_pos(int k) {
  const int kk = k % 16;
  const int t = (kk % 8) / 2;
  const int f = kk % 2 + 2 * (kk / 8);
  return 16 * (k / 16) + 4 * t + byte_of_fragment8(f);
}

// Inverse of stage_pos (byte_of_fragment8 is an involution).
SF_HOST_DEVICE constexpr int stage_row(int pos) {
  const int q = pos % 16;
  const int t = q / 4;
  const int f = byte_of_fragment8(q % 4);
  return 16 * (pos / 16) + 8 * (f / 2) + 2 * t + f % 2;
}

// ---- step 1: K-packed words -> one 16-byte staged k16 slice of one column.
// int4: the slice is source words r = 0, 1 (rows 8r .. 8r+7) of the slice;
//       staged byte 2i + r holds nibble i of word r.
// int8: source words r = 0..3 (rows 4r .. 4r+3); staged byte
//       8 (r % 2) + 2i + r / 2 holds byte i of word r.
SF_HOST_DEVICE constexpr int staged_byte_of_source(int bits, int r, int field) {
  return bits == 4 ? 2 * field + r : 8 * (r % 2) + 2 * field + r / 2;
}

struct Bytes16 {
  uint32_t w[4];
};

// int4: words e (rows 0..7) and o (rows 8..15) of a slice -> 16 staged bytes.
SF_HOST_DEVICE constexpr Bytes16 interleave4(uint32_t e, uint32_t o) {
  Bytes16 out{};
  for (int m = 0; m < 4; ++m) {
    const uint32_t e_lo = (e >> (8 * m)) & 0xFu, e_hi = (e >> (8 * m + 4)) & 0xFu;
    const uint32_t o_lo = (o >> (8 * m)) & 0xFu, o_hi = (o >> (8 * m + 4)) & 0xFu;
    out.w[m] = e_lo | (o_lo << 8) | (e_hi << 16) | (o_hi << 24);
  }
  return out;
}

// int8: words w0..w3 (rows 0..3, 4..7, 8..11, 12..15) -> 16 staged bytes.
SF_HOST_DEVICE constexpr Bytes16 interleave8(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3) {
  Bytes16 out{};
  for (int h = 0; h < 2; ++h) {
    const uint32_t a = h == 0 ? w0 : w1, b = h == 0 ? w2 : w3;
    for (int m = 0; m < 2; ++m) {
      const uint32_t a0 = (a >> (16 * m)) & 0xFFu, a1 = (a >> (16 * m + 8)) & 0xFFu;
      const uint32_t b0 = (b >> (16 * m)) & 0xFFu, b1 = (b >> (16 * m + 8)) & 0xFFu;
      out.w[2 * h + m] = a0 | (b0 << 8) | (a1 << 16) | (b1 << 24);
    }
  }
  return out;
}

// ---- step 2: which staged 32-bit words make output word w of a block.
// Thread `tid` writes words 4 tid .. 4 tid + 3 (sub-tile s = tid / 32, lane
// tid % 32, j = 0..3). int4 needs two columns (n8 tiles 2j and 2j+1), int8 one.
struct WordOperands {
  int col_a, col_b;  // staged columns (col_b unused for int8)
  int pos;           // byte offset inside the column (a multiple of 4)
};

SF_HOST_DEVICE constexpr WordOperands word_operands(int bits, int w) {
  const int s = w / (format::kLanes * format::kLaneWords);
  const int lane = (w / format::kLaneWords) % format::kLanes;
  const int j = w % format::kLaneWords;
  const int g = lane / 4, t = lane % 4;
  if (bits == 4) return WordOperands{8 * (2 * j) + g, 8 * (2 * j + 1) + g, 16 * s + 4 * t};
  return WordOperands{8 * (4 * (s % 2) + j) + g, -1, 16 * (s / 2) + 4 * t};
}

// int4: a = staged word of tile 2j (bytes = fragment values in
// byte_of_fragment8 order, one nibble each), b = tile 2j+1 -> the packed word.
SF_HOST_DEVICE constexpr uint32_t assemble4(uint32_t a, uint32_t b) {
  return (a & 0x000F000Fu) | ((a >> 4) & 0x00F000F0u) | ((b & 0x000F000Fu) << 8) | ((b << 4) & 0xF000F000u);
}

// ---- the proof: the kernel's data movement equals format::locate.
SF_HOST_DEVICE constexpr bool prepack_proof() {
  for (int f = 0; f < 4; ++f)
    if (byte_of_fragment8(f) != format::kByteOfFragment8[f]) return false;
  for (int bits = 4; bits <= 8; bits += 4) {
    const int bk = format::block_k(bits), vpw = format::values_per_word(bits);
    // stage_pos is a bijection of each k16 slice, stage_row its inverse.
    for (int k = 0; k < bk; ++k)
      if (stage_pos(k) / 16 != k / 16 || stage_row(stage_pos(k)) != k) return false;
    // step 1: source (word r, field i) lands on stage_pos of its row, and the
    // interleave functions put it there (values tagged with their own ids).
    for (int k = 0; k < bk; ++k) {
      const int r = (k % 16) / vpw, field = k % vpw;
      const int byte = staged_byte_of_source(bits, r, field);
      if (16 * (k / 16) + byte != stage_pos(k)) return false;
      uint32_t id = 0;
      if (bits == 4) {
        const Bytes16 v = interleave4(0x76543210u, 0xFEDCBA98u);  // nibble i of word r = 8r + i
        id = (v.w[byte / 4] >> (8 * (byte % 4))) & 0xFFu;
        if (id != static_cast<uint32_t>(8 * r + field)) return false;
      } else {
        const Bytes16 v = interleave8(0x03020100u, 0x13121110u, 0x23222120u, 0x33323130u);  // byte i of r = 16r + i
        id = (v.w[byte / 4] >> (8 * (byte % 4))) & 0xFFu;
        if (id != static_cast<uint32_t>(16 * r + field)) return false;
      }
    }
    // step 2: field i of output word w comes from the staged (column, row)
    // that format::locate sends to (w, bits * i).
    for (int w = 0; w < format::kBlockWords; ++w) {
      const WordOperands op = word_operands(bits, w);
      if (op.pos % 4 != 0 || op.col_a < 0 || op.col_a >= format::kBlockN) return false;
      for (int i = 0; i < vpw; ++i) {
        int col = op.col_a, byte = i;
        if (bits == 4) {
          // Tag byte b of a with id b, of b-operand with 4 + b; read nibble i.
          const uint32_t id = (assemble4(0x03020100u, 0x07060504u) >> (4 * i)) & 0xFu;
          col = id < 4 ? op.col_a : op.col_b;
          byte = static_cast<int>(id % 4);
        }
        const int k = stage_row(op.pos + byte);
        const format::Slot slot = format::locate(bits, k, col);
        if (slot.word != w || slot.shift != bits * i) return false;
      }
    }
  }
  return true;
}

}  // namespace prep
}  // namespace swordfish
