// Shared-memory staging map of the dense dequant kernel (dense_dequant.cuh):
// the word address of every shared load and store, and the compile-time proof
// that none of them has a bank conflict. Plain C++17, host and device: the
// kernel computes its addresses with these functions, and
// tests/test_dense_smem_banks.py compiles this header on the host, prints
// every lane's address and re-checks banks, coverage and the KN exchange.
//
// Banks: 32 banks of 4 bytes; word address w (4-byte units) sits in bank
// w % 32. A warp access costs one wavefront per distinct word in its busiest
// bank (lanes reading the same word share it). Ideal: 32-bit accesses one
// wavefront; 128-bit accesses four (512 bytes at 128 bytes a wavefront),
// served a quarter warp (8 consecutive lanes) at a time: conflict-free when
// the eight 16-byte chunks of each quarter fall in eight distinct bank
// quads.
//
// The tile: 64 staged rows of kSmemStride = 72 16-bit values (64 + 8 pad),
// a row stride of kRowWords = 36 words, and 36 = 4 (mod 32). Lane l of a warp
// has g = l / 4, t = l % 4 (the mma B-fragment coordinates of format.h): it
// holds, per n8 tile c, the pairs of column n = 8c + g at rows k = 16w + 2t,
// +1 (pair h = 0) and k + 8, +9 (h = 1) of warp w's k16 slice.
//
// 1. stage, NK (smem[n][k]): lane stores its pair as one 32-bit word,
//      word = (8c + g) * 36 + 8w + t + 4h
//      bank = 4g + t + (8w + 4h + 288c) % 32 = 4g + t + const
//    4g + t runs over 0..31 once: conflict-free. Unpadded (stride 32 words)
//    the bank would be t + const: 8 lanes per bank, 8-way conflicts.
// 2. stage, KN (smem[k][n]): two lanes of one row k hold adjacent columns g,
//    g ^ 1 of the same rows. Storing each 16-bit value alone (the earlier
//    kernel) needs four 16-bit stores per pair, two lanes per word. Instead
//    lanes g and g ^ 1 trade pairs (one shfl.xor 4) and each builds ONE word
//    of columns (g & ~1, | 1): the even lane the lower row (lo halves), the
//    odd lane the upper row (hi halves), one prmt each:
//      row  k' = 16w + 2t + (g & 1) + 8h,   column n' = 8c + (g & ~1)
//      word = k' * 36 + 4c + g / 2
//      bank = 8t + 4 (g & 1) + g / 2 + const   (72t = 8t, 36 = 4 mod 32)
//    with 4 (g & 1) + g / 2 running over 0..7 once per t: conflict-free, and
//    one 32-bit store per pair instead of two 16-bit ones.
// 3. write-out, NK and KN without act-order (uint4 loads): thread `tid`
//    reads 16-byte chunk tid % 8 of row tid / 8 + 16 i, so each quarter warp
//    reads one row's 128 contiguous bytes: start 144 r = 16 r (mod 128),
//    16-byte aligned, so its eight chunks fill the 32 banks once.
// 4. write-out, NK with act-order (16-bit loads): lane l reads value (r, l)
//    and then (r, l + 32) of row r: 16 words of one row, two lanes per word
//    (a shared word is one access): conflict-free.
// Every access above is checked by the static_asserts at the end of this
// file for every warp, n8 tile, half and loop index.
//
// ncu on the H200 (cb85925:benchmarks/results/h200/2026-12-02-b/ncu_dequant_70b_o.txt,
// int4 bf16 NK, 16,384 CTAs, maps 1 and 3 exactly as here) read 106,067 load
// and 19,141 store "bank conflicts" (l1tex__data_bank_conflicts_pipe_lsu_mem_
// shared_op_{ld,st}). Every CTA runs the same shared addresses, so a pattern
// conflict would count a multiple of 16,384; neither number is one, nor is
// the 205,888 excess of all shared wavefronts (2,303,040) over the ideal
// (per CTA 64 STS x 1 + 16 LDS.128 x 4 = 128; 2,097,152). So the residue is
// not an address pattern; the likely source (unconfirmed) is that the l1tex
// counter also counts shared accesses that wait on the L1 data banks for
// other traffic (the global loads and stores in flight). ncu's
// SourceCounters section (excessive shared wavefronts per SASS instruction)
// is the check that looks at addresses.
#pragma once

#include "kernels/common/format.h"

namespace swordfish {
namespace dense {

inline constexpr int kTileK = 64;               // k rows per CTA tile
inline constexpr int kTileN = format::kBlockN;  // n columns per CTA tile
inline constexpr int kWarps = kTileK / format::kFragmentK;  // one k16 slice per warp
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kSmemPad = 8;                 // 16-bit elements: 64 -> 72 per row
inline constexpr int kSmemStride = 64 + kSmemPad;  // 16-bit elements per staged row
inline constexpr int kRowWords = kSmemStride / 2;  // 32-bit words per staged row (36)
inline constexpr int kSmemRows = 64;               // (BLK_N or BLK_K) rows of the staged tile
inline constexpr int kSmemWords = kSmemRows * kRowWords;
inline constexpr int kChunksPerRow = 64 * 2 / 16;  // 16-byte chunks per 64-element row
inline constexpr int kRowsPerPass = kThreads / kChunksPerRow;  // rows one write-out pass covers (16)
inline constexpr int kBanks = 32;
static_assert(kWarps == 4 && kThreads == 128, "a CTA is four warps");
static_assert(kSmemStride % 8 == 0, "staged rows stay 16-byte aligned");

// prmt selectors of the KN exchange: (own pair P, partner pair Q) -> the word
// the lane stores. Even g: lo = P.lo (column g), hi = Q.lo (column g + 1),
// row 2t. Odd g: lo = Q.hi (column g - 1), hi = P.hi (column g), row 2t + 1.
inline constexpr unsigned kExchangeEven = 0x5410u;
inline constexpr unsigned kExchangeOdd = 0x3276u;
// Lane offset of the KN exchange partner (g ^ 1, same t).
inline constexpr int kExchangeLaneXor = 4;

namespace smem {

// lane in [0, 32): shifts and masks, so signed division never reaches the SASS.
SF_HOST_DEVICE constexpr int lane_g(int lane) { return lane >> 2; }
SF_HOST_DEVICE constexpr int lane_t(int lane) { return lane & 3; }

// (1) NK stage: lane's pair h of n8 tile c, warp w -> smem[n][k], n = 8c + g, k = 16w + 2t + 8h.
SF_HOST_DEVICE constexpr int stage_nk(int warp, int lane, int c, int h) {
  return (8 * c + lane_g(lane)) * kRowWords + 8 * warp + lane_t(lane) + 4 * h;  // k / 2 = 8w + t + 4h
}
// (2) KN stage, after the exchange: row 16w + 2t + (g & 1) + 8h, columns 8c + (g & ~1), +1.
SF_HOST_DEVICE constexpr int stage_kn(int warp, int lane, int c, int h) {
  const int g = lane_g(lane), t = lane_t(lane);
  return (16 * warp + 2 * t + (g & 1) + 8 * h) * kRowWords + 4 * c + (g >> 1);  // n' / 2 = 4c + g / 2
}
SF_HOST_DEVICE constexpr unsigned exchange_selector(int lane) {
  return (lane_g(lane) & 1) ? kExchangeOdd : kExchangeEven;
}
// (3) write-out: the staged row and the word of the 16-byte chunk thread `tid` reads in pass i.
SF_HOST_DEVICE constexpr int out_row(int tid, int i) { return tid / kChunksPerRow + i * kRowsPerPass; }
SF_HOST_DEVICE constexpr int out_chunk(int tid) { return tid % kChunksPerRow; }
SF_HOST_DEVICE constexpr int out_word(int tid, int i) { return out_row(tid, i) * kRowWords + 4 * out_chunk(tid); }
// (4) act-order NK write-out: 16-bit element index of value (r, lane + 32h) (word = index / 2).
SF_HOST_DEVICE constexpr int scatter_elem(int r, int lane, int h) { return r * kSmemStride + lane + 32 * h; }

// ---- compile-time checks (host constexpr evaluation; the Python test repeats them from printed addresses)

// Wavefronts of one warp access of 4-byte words: the busiest bank's distinct words.
template <class Word>
constexpr int wavefronts_32(Word word) {
  int per_bank[kBanks] = {};
  for (int b = 0; b < 32; ++b) {
    bool first = true;  // count each distinct word once, at its first lane
    for (int e = 0; e < b; ++e) first = first && word(e) != word(b);
    if (first) ++per_bank[word(b) % kBanks];
  }
  int worst = 0;
  for (int i = 0; i < kBanks; ++i) worst = per_bank[i] > worst ? per_bank[i] : worst;
  return worst;
}

// A 16-byte access of a warp (word(lane) = first of 4 words): conflict-free when every quarter warp's
// chunks sit in 8 distinct bank quads (so 4 wavefronts in all).
template <class Word>
constexpr bool conflict_free_128(Word word) {
  for (int q = 0; q < 4; ++q)
    for (int a = 8 * q; a < 8 * q + 8; ++a) {
      if (word(a) % 4 != 0) return false;  // 16-byte aligned
      for (int b = a + 1; b < 8 * q + 8; ++b)
        if (word(a) != word(b) && (word(a) % kBanks) / 4 == (word(b) % kBanks) / 4) return false;
    }
  return true;
}

// The stage stores of one layout (kKN: KN, else NK) take one wavefront each.
template <bool kKN>
constexpr bool stage_conflict_free() {
  for (int w = 0; w < kWarps; ++w)
    for (int c = 0; c < 8; ++c)
      for (int h = 0; h < 2; ++h)
        if (wavefronts_32([=](int l) { return kKN ? stage_kn(w, l, c, h) : stage_nk(w, l, c, h); }) != 1) return false;
  return true;
}
constexpr bool out_conflict_free() {
  for (int w = 0; w < kWarps; ++w)
    for (int i = 0; i < kSmemRows / kRowsPerPass; ++i)
      if (!conflict_free_128([=](int l) { return out_word(32 * w + l, i); })) return false;
  return true;
}
constexpr bool scatter_conflict_free() {
  for (int r = 0; r < kSmemRows; ++r)
    for (int h = 0; h < 2; ++h)
      if (wavefronts_32([=](int l) { return scatter_elem(r, l, h) / 2; }) != 1) return false;
  return true;
}
// Every staged word written exactly once by the 4 warps x 8 tiles x 2 halves x 32 lanes, inside the
// 64 data columns (never the pad), in both layouts.
template <bool kKN>
constexpr bool stage_covers_tile_once() {
  int hits[kSmemWords] = {};
  for (int w = 0; w < kWarps; ++w)
    for (int c = 0; c < 8; ++c)
      for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) ++hits[kKN ? stage_kn(w, l, c, h) : stage_nk(w, l, c, h)];
  for (int i = 0; i < kSmemWords; ++i)
    if (hits[i] != (i % kRowWords < 32 ? 1 : 0)) return false;
  return true;
}

static_assert(kRowWords % kBanks == 4, "row stride 4 (mod 32) words: the stage maps above rely on it");
static_assert(stage_conflict_free<false>(), "NK stage stores: one wavefront each");
static_assert(stage_conflict_free<true>(), "KN stage stores: one wavefront each");
static_assert(out_conflict_free(), "16-byte write-out loads: conflict-free per quarter warp");
static_assert(scatter_conflict_free(), "act-order 16-bit write-out loads: one wavefront each");
static_assert(stage_covers_tile_once<false>() && stage_covers_tile_once<true>(), "each staged word written once");

}  // namespace smem
}  // namespace dense
}  // namespace swordfish
