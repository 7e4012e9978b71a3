// Swordfish packed weight format, version 1: the one source of truth.
//
// docs/FORMAT.md is the prose specification; swordfish_backend/format.py
// mirrors the integer constants below (tests/test_format_header.py parses
// this file and fails if the two disagree). Everything here is plain C++17
// usable from host and device code; no torch, no CUDA runtime headers.
//
// Summary (see docs/FORMAT.md for the full statement):
//   int4: int32 words, extents (N/64, K/64, 512); a block is a k64 x n64 tile.
//   int8: int32 words, extents (N/64, K/32, 512); a block is a k32 x n64 tile.
//   Every block is one contiguous 2,048-byte run made of four 512-byte
//   sub-tiles; a sub-tile is 32 lanes x 16 bytes, lane-major, and holds what
//   one warp's lanes feed to mma.sync.m16n8k16 as B fragments.
//   Stored values are unsigned with an implicit zero point of 8 (int4,
//   "uint4b8") or 128 (int8, "uint8b128").
#pragma once

#if defined(__CUDACC__)
#define SF_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SF_HOST_DEVICE inline
#endif

namespace swordfish {
namespace format {

inline constexpr int kVersion = 1;

inline constexpr int kBlockN = 64;          // output columns per block
inline constexpr int kBlockBytes = 2048;    // one block, contiguous
inline constexpr int kBlockWords = 512;     // int32 words per block
inline constexpr int kSubtiles = 4;         // 512-byte sub-tiles per block
inline constexpr int kSubtileBytes = 512;
inline constexpr int kLanes = 32;           // lanes per sub-tile
inline constexpr int kLaneWords = 4;        // words per lane per sub-tile (16 B)
inline constexpr int kFragmentK = 16;       // k rows per mma.sync B fragment

// Per-bit-width geometry.
inline constexpr int kBlockK4 = 64;         // int4: k rows per block
inline constexpr int kBlockK8 = 32;         // int8: k rows per block
inline constexpr int kBias4 = 8;            // int4 implicit zero point
inline constexpr int kBias8 = 128;          // int8 implicit zero point

// Group sizes every path accepts; -1 means one scale row (channelwise).
inline constexpr int kChannelwise = -1;
inline constexpr int kGroupSizes[] = {32, 64, 128, kChannelwise};
// Channelwise scales are replicated to this group at load for the grouped
// (prefill, dense) paths whenever K allows it; see docs/FORMAT.md.
inline constexpr int kChannelwiseReplicaGroup = 128;

SF_HOST_DEVICE constexpr int block_k(int bits) { return bits == 4 ? kBlockK4 : kBlockK8; }
SF_HOST_DEVICE constexpr int values_per_word(int bits) { return 32 / bits; }
SF_HOST_DEVICE constexpr int bias(int bits) { return bits == 4 ? kBias4 : kBias8; }

static_assert(kSubtiles * kSubtileBytes == kBlockBytes, "a block is four sub-tiles");
static_assert(kLanes * kLaneWords * 4 == kSubtileBytes, "a sub-tile is 32 lanes x 16 B");
static_assert(kBlockWords * 4 == kBlockBytes, "512 words per block");
static_assert(kBlockK4 * kBlockN / 8 == kBlockWords, "int4 block holds 64x64 nibbles");
static_assert(kBlockK8 * kBlockN / 4 == kBlockWords, "int8 block holds 32x64 bytes");

// Where one weight value lives inside its block.
//   word: 0..511, the int32 word within the block
//   shift: bit offset of the value inside the word (multiple of `bits`)
struct Slot {
  int word;
  int shift;
};

// Which tile-local value sits at (word, field) and vice versa.
//
// Lane l of a sub-tile has t = l % 4 and g = l / 4. For an n8 column tile c it
// holds the B fragment of mma.sync.m16n8k16: column n = 8c + g, rows
// 2t, 2t+1 (register b0) and 2t+8, 2t+9 (register b1) of the sub-tile's k16.
//
// int4 (sub-tile s = k16 slice s of the k64 block, covering all 64 columns):
//   word j (0..3) of lane l holds n8 tiles 2j and 2j+1. Its eight values in
//   fragment order f = 0..7 are
//     f: 0      1        2        3        4       5         6         7
//        b0.lo  b0.hi    b1.lo    b1.hi    b0'.lo  b0'.hi    b1'.lo    b1'.hi
//   (primed: tile 2j+1) and value f sits in nibble kNibbleOfFragment4[f], so
//   that (q >> 4i) & 0x000f000f holds fragment pair i in its two halves.
inline constexpr int kNibbleOfFragment4[8] = {0, 4, 1, 5, 2, 6, 3, 7};
// int8 (sub-tile s: k16 slice s / 2 of the k32 block, n32 half s % 2):
//   word j (0..3) of lane l holds n8 tile 4 * (s % 2) + j; its four values
//   b0.lo, b0.hi, b1.lo, b1.hi sit in bytes kByteOfFragment8[f], so that a
//   byte permute of bytes {0, 2} and {1, 3} yields the b0 and b1 pairs.
inline constexpr int kByteOfFragment8[4] = {0, 2, 1, 3};

// Closed forms of the two tables, usable at run time in device code (a
// constexpr array is not addressable from __device__ functions).
SF_HOST_DEVICE constexpr int nibble_of_fragment4(int f) { return f / 2 + 4 * (f % 2); }
SF_HOST_DEVICE constexpr int byte_of_fragment8(int f) { return f / 2 + 2 * (f % 2); }
static_assert(nibble_of_fragment4(0) == kNibbleOfFragment4[0] && nibble_of_fragment4(1) == kNibbleOfFragment4[1] &&
              nibble_of_fragment4(2) == kNibbleOfFragment4[2] && nibble_of_fragment4(3) == kNibbleOfFragment4[3] &&
              nibble_of_fragment4(4) == kNibbleOfFragment4[4] && nibble_of_fragment4(5) == kNibbleOfFragment4[5] &&
              nibble_of_fragment4(6) == kNibbleOfFragment4[6] && nibble_of_fragment4(7) == kNibbleOfFragment4[7],
              "closed form of the int4 nibble order");
static_assert(byte_of_fragment8(0) == kByteOfFragment8[0] && byte_of_fragment8(1) == kByteOfFragment8[1] &&
              byte_of_fragment8(2) == kByteOfFragment8[2] && byte_of_fragment8(3) == kByteOfFragment8[3],
              "closed form of the int8 byte order");

// (k, n) inside a block -> slot. k in [0, block_k(bits)), n in [0, 64).
SF_HOST_DEVICE constexpr Slot locate(int bits, int k, int n) {
  const int c = n / 8, g = n % 8;
  const int kk = k % 16;                       // row within the k16 slice
  const int t = (kk % 8) / 2;                  // lane % 4
  const int f_in_pair = (kk % 2) + 2 * (kk / 8);  // b0.lo, b0.hi, b1.lo, b1.hi
  const int lane = 4 * g + t;
  if (bits == 4) {
    const int s = k / 16;
    const int j = c / 2;
    const int f = f_in_pair + 4 * (c % 2);
    return Slot{s * (kLanes * kLaneWords) + lane * kLaneWords + j, 4 * nibble_of_fragment4(f)};
  }
  const int s = 2 * (k / 16) + c / 4;
  const int j = c % 4;
  return Slot{s * (kLanes * kLaneWords) + lane * kLaneWords + j, 8 * byte_of_fragment8(f_in_pair)};
}

// Word offset of block (n_block, k_block) in a tensor with K rows.
SF_HOST_DEVICE constexpr long long block_offset_words(int bits, int K, int n_block, int k_block) {
  return (static_cast<long long>(n_block) * (K / block_k(bits)) + k_block) * kBlockWords;
}

}  // namespace format
}  // namespace swordfish
