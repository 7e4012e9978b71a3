// The Blackwell (sm100a / sm110a) tcgen05 prefill: its tile choice, shared-
// memory layout, TMEM column plan, 2-SM pairing, tile scheduler, Thor's L2
// chunking and the Transform's byte-domain store addresses. Plain C++ (no
// CUDA): the kernel (prefill_sm100.cuh), its launcher and the CPU tests
// (tests/test_prefill_sm100_host.py through tests/plan_main.cpp and
// tests/transform_emu_main.cu) read the same functions.
//
// COMPILED, NOT RUN: no Blackwell GPU has executed any of this.
//
// Vocabulary (the MMA computes y^T = W x^T, as on sm90):
//   MMA tile      256 weight rows (output columns n) x BT tokens (m), one
//                 tcgen05.mma.cta_group::2 of 256 x BT x 16 per k16 step,
//                 issued by the pair's leader CTA (rank 0 of a 2-CTA cluster).
//   pair          the two CTAs of a cluster. CTA rank r owns weight rows
//                 n0 + 128 r .. + 127 (A operand half, dequantized by its own
//                 Transform), activation rows m0 + r BT / 2 .. + BT / 2 - 1 (B
//                 operand half, delivered by the 2-SM TMA load), and the
//                 accumulators of its 128 weight rows x all BT tokens in its
//                 own TMEM (lane = weight row, column = token).
//   BT            256 for int4 (the 256 x 256 instruction), 128 for int8 and
//                 for K-heavy int4 (K >= max(2N, 8192)) and for M <= 128.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/format.h"
#include "kernels/common/problem.h"
#include "kernels/prefill/slice.h"

namespace swordfish {
namespace prefill {
namespace sm100 {

// ---------------------------------------------------------------- the pair and the CTA

inline constexpr int kPairRows = 256;               // weight rows (output columns) per MMA tile
inline constexpr int kCtaRows = kPairRows / 2;      // per CTA: the A operand half, TMEM lanes 0..127
inline constexpr int kClusterSize = 2;              // one pair per cluster
inline constexpr int kStageK = kSliceK;             // k rows per pipeline stage: one k64 slice
inline constexpr int kMmaK = 16;                    // k per tcgen05.mma (256 bits of 16-bit operands)

// Warp roles of a CTA (448 threads; no setmaxnreg: 65536 / 448 leaves 144 registers per thread).
//   warps 0..3   epilogue: warp w reads TMEM lanes 32 w .. 32 w + 31 (a warp may touch only
//                the lane quarter w % 4), i.e. weight rows 32 w + lane of the CTA's half
//   warps 4..11  Transform: warpgroup c = 0, 1 dequantizes n64 block c of the CTA's 128 rows
//   warp 12      producer: TMA of the packed blocks, scale / zero-point rows (its own CTA) and
//                of its half of the activations (2-SM TMA, completing on the leader's barrier)
//   warp 13      MMA: allocates the pair's TMEM (both CTAs); in the leader it issues every
//                tcgen05.mma of the pair and commits to both CTAs' barriers
inline constexpr int kEpilogueWarps = 4;
inline constexpr int kTransformGroups = kCtaRows / format::kBlockN;  // 2 warpgroups, one per n64 block
inline constexpr int kTransformWarps = 4 * kTransformGroups;
inline constexpr int kFirstTransformWarp = kEpilogueWarps;
inline constexpr int kProducerWarp = kFirstTransformWarp + kTransformWarps;
inline constexpr int kMmaWarp = kProducerWarp + 1;
inline constexpr int kWarps = kMmaWarp + 1;
inline constexpr int kThreads = 32 * kWarps;
static_assert(kThreads == 448, "warp roles");
static_assert(kEpilogueWarps * 32 == kCtaRows, "one epilogue thread per TMEM lane");

// ---------------------------------------------------------------- tile choice

// K-heavy int4 starves the wide tile's K pipeline (write-up: 256 x 128 for K >= max(2N, 8192)).
constexpr bool k_heavy_int4(long long K, long long N) { return K >= (2 * N > 8192 ? 2 * N : 8192); }

// Token tile (the MMA's N): 256 for int4, 128 for int8 (the wide tile's staging does not fit at
// 8 bits, write-up) and for K-heavy int4; 128 also where M <= 128, where a 256-token tile would
// be more than half empty (ours, unmeasured).
constexpr int token_tile(int bits, long long M, long long K, long long N) {
  if (bits != 4) return 128;
  if (k_heavy_int4(K, N)) return 128;
  return M <= 128 ? 128 : 256;
}

constexpr bool has_tile(int bits, int bt) {
  return (bits == 4 && (bt == 128 || bt == 256)) || (bits == 8 && bt == 128);
}

// ---------------------------------------------------------------- TMEM column plan

// Two accumulator stages of BT fp32 columns each (the epilogue drains one while the MMA fills the
// other): 2 x 256 = the 512 columns of TMEM at BT 256; 2 x 128 at BT 128. tcgen05.alloc takes a
// power of two >= 32 columns.
inline constexpr int kAccStages = 2;
inline constexpr int kTmemColumns = 512;
constexpr int tmem_columns(int bt) { return kAccStages * bt; }
// TMEM address (lane << 16 | column) of accumulator stage `stage`, token column `col`, lane `lane`.
constexpr uint32_t tmem_address(uint32_t base, int stage, int bt, int lane, int col) {
  return base + (static_cast<uint32_t>(lane) << 16) + static_cast<uint32_t>(stage * bt + col);
}
constexpr bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }
static_assert(tmem_columns(256) == kTmemColumns && is_pow2(tmem_columns(256)) && is_pow2(tmem_columns(128)),
              "two 256-column accumulator stages fill TMEM's 512 columns; allocations are powers of two");

// ---------------------------------------------------------------- the Transform's UMMA buffer

// The A operand of one pipeline stage, per CTA: 128 weight rows x 64 k of 16-bit values, K-major
// in the canonical 128-byte-swizzle layout the UMMA descriptor reads (SWIZZLE_128B: rows of 128
// bytes, 8-row atoms of 1024 bytes, stage base 1024-aligned). In bytes,
//   offset(row, k) = 1024 (row / 8) + 128 (row % 8) + 16 ((k / 8) ^ (row % 8)) + 2 (k % 8)
// i.e. the unswizzled byte offset 128 row + 2 k with bits [4, 7) XORed with bits [7, 10). In
// elements this is e ^ ((row % 8) << 3) for e = 64 row + k: the closed form the write-up gives
// (the flagged ComposedLayout evaluates its swizzle in the element domain, which is NOT this;
// prefill_sm100.cuh static-asserts this against CuTe's UMMA layout taken in the byte domain).
inline constexpr int kARowBytes = kStageK * 2;                   // 128: one swizzle row
inline constexpr int kABytes = kCtaRows * kARowBytes;            // 16,384 per stage
constexpr uint32_t umma_a_offset(int row, int k) {
  return 1024u * static_cast<uint32_t>(row / 8) + 128u * static_cast<uint32_t>(row % 8) +
         16u * static_cast<uint32_t>((k / 8) ^ (row % 8)) + 2u * static_cast<uint32_t>(k % 8);
}
constexpr uint32_t umma_a_offset_elements(int row, int k) {
  return (static_cast<uint32_t>(64 * row + k) ^ (static_cast<uint32_t>(row % 8) << 3));
}

// Where the Transform of warpgroup c (n64 block c of the CTA's rows) puts A register `reg` (0..3)
// of k16 step kk for a thread whose fragment rows are n_lo / n_lo + 8 (transform.cuh Role) and
// whose lane % 4 is t: the mma.sync / wgmma A-fragment positions
//   a0 = (n_lo, 2t..2t+1)   a1 = (n_lo + 8, 2t..)   a2 = (n_lo, 2t+8..)   a3 = (n_lo + 8, 2t+8..)
// of the k16 step, as one lane-local 32-bit store (two consecutive k of one row).
struct AStore {
  int row;  // weight row within the CTA's 128
  int k;    // first of the two k within the stage's 64
};
constexpr AStore a_store(int c, int n_lo, int t, int kk, int reg) {
  return AStore{format::kBlockN * c + n_lo + 8 * (reg & 1), kMmaK * kk + 2 * t + 8 * (reg >> 1)};
}
constexpr uint32_t a_store_offset(int c, int n_lo, int t, int kk, int reg) {
  return umma_a_offset(a_store(c, n_lo, t, kk, reg).row, a_store(c, n_lo, t, kk, reg).k);
}

// Every byte of a stage's A buffer is some (row, k) exactly once, and 32-bit stores stay aligned.
constexpr bool umma_a_offset_is_a_bijection() {
  bool seen[kABytes / 2] = {};
  for (int row = 0; row < kCtaRows; ++row)
    for (int k = 0; k < kStageK; ++k) {
      const uint32_t o = umma_a_offset(row, k);
      if (o % 2 != 0 || o >= static_cast<uint32_t>(kABytes) || seen[o / 2]) return false;
      if (o != 2 * umma_a_offset_elements(row, k)) return false;
      if (k % 2 == 0 && o % 4 != 0) return false;
      seen[o / 2] = true;
    }
  return true;
}
static_assert(umma_a_offset_is_a_bijection(), "the byte-domain swizzle must be a bijection onto the stage");

// ---------------------------------------------------------------- shared memory

inline constexpr int kSmemLimit = 232448;          // sm100 / sm110 opt-in shared memory per block (227 KB)
inline constexpr int kAStages = 4;                 // Transform -> MMA
inline constexpr int kWStages = 8;                 // TMA -> Transform (packed blocks, scale rows)
inline constexpr int kMaxXStages = 8;              // TMA -> MMA (activations)
inline constexpr int kBarrierBytes = 512;
inline constexpr int kReserveBytes = 1024 + kBarrierBytes;  // base alignment slack + barriers and the TMEM slot

template <int BITS, int BT>
struct Layout {
  static_assert(has_tile(BITS, BT), "tile");
  static constexpr int kXRows = BT / 2;                             // activation rows per CTA (B half)
  static constexpr int kXBytes = kXRows * 128;                      // (BT / 2, 64) 16-bit, 128-byte swizzle
  static constexpr int kWBytes = kTransformGroups * kSliceBytes<BITS>;  // the CTA's two n64 blocks, one k64 slice
  static constexpr int kSRowBytes = kCtaRows * 2;                   // one staged scale row: 128 columns
  static constexpr int kSBytes = 2 * kSRowBytes;                    // room for group 32's two rows per slice
  static constexpr int kWStageBytes = kWBytes + 2 * kSBytes;        // packed + scales + zero points
  static constexpr int kXStages = [] {
    const int fit = (kSmemLimit - kReserveBytes - kAStages * kABytes - kWStages * kWStageBytes) / kXBytes;
    return fit < kMaxXStages ? fit : kMaxXStages;
  }();
  static_assert(kXStages >= 2, "at least a double-buffered activation pipeline");
  // Offsets from the 1024-aligned base: the swizzled operands first (1024-aligned stages).
  static constexpr int kOffA = 0;
  static constexpr int kOffX = kOffA + kAStages * kABytes;
  static constexpr int kOffW = kOffX + kXStages * kXBytes;
  static constexpr int kOffS = kOffW + kWStages * kWBytes;
  static constexpr int kOffZ = kOffS + kWStages * kSBytes;
  static constexpr int kOffBar = kOffZ + kWStages * kSBytes;
  // Barriers (8 bytes each), then the TMEM base address the allocation writes.
  static constexpr int kBarWFull = 0, kBarWEmpty = kBarWFull + kWStages;
  static constexpr int kBarAFull = kBarWEmpty + kWStages, kBarAEmpty = kBarAFull + kAStages;
  static constexpr int kBarXFull = kBarAEmpty + kAStages, kBarXEmpty = kBarXFull + kXStages;
  static constexpr int kBarAccFull = kBarXEmpty + kXStages, kBarAccEmpty = kBarAccFull + kAccStages;
  static constexpr int kBarCount = kBarAccEmpty + kAccStages;
  static constexpr int kOffTmemSlot = kOffBar + 8 * kBarCount;
  static constexpr int kSmemBytes = 1024 + kOffTmemSlot + 16;  // + alignment slack of the dynamic base
  static_assert(kOffTmemSlot + 16 - kOffBar <= kBarrierBytes, "barrier region");
  static_assert(kSmemBytes <= kSmemLimit, "shared memory");
  static_assert(kABytes % 1024 == 0 && kXBytes % 1024 == 0 && kOffX % 1024 == 0, "swizzled stages are 1024-aligned");
  static_assert(kOffW % 128 == 0 && kWBytes % 128 == 0 && kOffS % 16 == 0 && kSBytes % 16 == 0 && kOffBar % 8 == 0,
                "TMA destinations 16-byte (packed: 128-byte) aligned");
  // Transaction bytes: a weight stage (the scale box always has `rows` rows, zero points doubling
  // it when present), an activation stage of the pair (both CTAs' halves land on the leader's barrier).
  static constexpr uint32_t w_tx(int scale_rows, bool zeros) {
    return static_cast<uint32_t>(kWBytes + scale_rows * kSRowBytes * (zeros ? 2 : 1));
  }
  static constexpr uint32_t kXPairTx = kClusterSize * kXBytes;
};

// Budget of the three instantiated layouts (docs/PREFILL.md's sm100 table, tests pin the values).
static_assert(Layout<4, 256>::kXStages == 7 && Layout<4, 128>::kXStages == 8 && Layout<8, 128>::kXStages == 8,
              "stage depths");

// Scale (zero-point) rows a stage stages: 64 / group (two at group 32), one for channelwise (row 0).
constexpr int scale_rows(int group, bool channelwise) {
  if (channelwise || group >= kStageK) return 1;
  return kStageK / group;
}
// First staged scale row of k stage kb; channelwise weights read row 0 only (the replicas need not
// be valid), as decode and the sm90 path do.
constexpr int scale_row(int kb, int group, bool channelwise) { return channelwise ? 0 : (kb * kStageK) / group; }
// Byte offset, in a staged scale row, of a Transform thread's column n_lo of block c; and of the
// second staged row that k16 steps 2, 3 read (group 32; 0 otherwise: one row serves the slice).
constexpr uint32_t scale_col_bytes(int c, int n_lo) { return 2u * static_cast<uint32_t>(format::kBlockN * c + n_lo); }
constexpr uint32_t scale_row1_bytes(int group, bool channelwise, int row_bytes) {
  return (group == 32 && !channelwise) ? static_cast<uint32_t>(row_bytes) : 0u;
}

// ---------------------------------------------------------------- 2-SM pairing and the tile scheduler

// Tiles of the pair: ceil(N / 256) n tiles x ceil(M / BT) m tiles. A tile index walks bands of
// group_m m tiles, n fastest across the band's rows (the sm90 raster: the clusters resident at once
// share a few x slabs and a few weight columns through L2).
struct TileCoord {
  int m_tile, n_tile;
};
constexpr TileCoord tile_coords(int t, int m_tiles, int n_tiles, int group_m) {
  const int band = group_m * n_tiles;
  const int m_first = (t / band) * group_m;
  const int rest = t % band;
  const int rows = m_tiles - m_first < group_m ? m_tiles - m_first : group_m;
  return TileCoord{m_first + rest % rows, rest / rows};
}
// Cluster `cluster` of `clusters` takes tiles cluster, cluster + clusters, ... (static persistent
// schedule: both CTAs of a pair walk the same list).
constexpr int cluster_tile_count(int tiles, int cluster, int clusters) {
  return cluster < tiles ? (tiles - 1 - cluster) / clusters + 1 : 0;
}

// What CTA `rank` of a pair owns of tile (m_tile, n_tile).
struct CtaPart {
  int n0;      // first weight row (output column) of its A half
  int x_row;   // first activation row of its B half
  int m0;      // first token of the tile (its accumulators hold all BT tokens)
};
constexpr CtaPart cta_part(TileCoord tc, int rank, int bt) {
  return CtaPart{tc.n_tile * kPairRows + rank * kCtaRows, tc.m_tile * bt + rank * (bt / 2), tc.m_tile * bt};
}

// ---------------------------------------------------------------- the plan

// Thor's L2 (32 MB): a large-M launch whose activation slab outgrows it thrashes (the write-up's
// two-thirds loss at M = 2048, K = 14336), so the launcher runs M in chunks whose slab (rows x K x
// 2 bytes) fits half of it (the other half for the weight and scale stream; unmeasured fraction).
inline constexpr long long kThorL2Bytes = 32LL << 20;
constexpr long long l2_bytes_for(int cc_major, int cc_minor) {
  return (cc_major == 11 || (cc_major == 10 && cc_minor == 1)) ? kThorL2Bytes : 0;  // 0: no chunking
}
constexpr int chunk_rows(long long M, long long K, int bt, long long l2_bytes) {
  if (l2_bytes <= 0 || M <= 0) return static_cast<int>(M);
  long long rows = (l2_bytes / 2) / (K * 2);
  rows = rows / bt * bt;
  if (rows < bt) rows = bt;
  return static_cast<int>(rows < M ? rows : M);
}

constexpr size_t plan_align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

struct Plan {
  int bt = 0;                 // token tile (the MMA's N)
  int x_stages = 0, tmem_cols = 0, smem_bytes = 0;
  int chunk_rows = 0;         // tokens per launch (M when no L2 chunking)
  int chunks = 0;             // launches
  int m_tiles = 0;            // of one full chunk
  int n_tiles = 0;
  int k_stages = 0;           // K / 64
  int tiles = 0;              // of one full chunk
  int clusters = 0;           // persistent clusters (pairs) of one full chunk
  int group_m = 1;            // raster band in m tiles
  int scale_rows = 1;
  size_t ws_x = 0;            // workspace: the gathered activations (act-order)
};

template <int BITS, int BT>
constexpr void fill_layout(Plan& t) {
  t.x_stages = Layout<BITS, BT>::kXStages;
  t.smem_bytes = Layout<BITS, BT>::kSmemBytes;
  t.tmem_cols = tmem_columns(BT);
}

// The plan of p on a device of p.sm_count SMs (pairs: sm_count / 2; the launcher may lower it to the
// clusters the device can co-schedule, cudaOccupancyMaxActiveClusters).
inline Plan make_plan(const GemmProblem& p) {
  Plan t;
  t.bt = token_tile(p.bits, p.M, p.K, p.N);
  if (p.bits == 4 && t.bt == 256) fill_layout<4, 256>(t);
  else if (p.bits == 4) fill_layout<4, 128>(t);
  else fill_layout<8, 128>(t);
  const int M = p.M > 0 ? p.M : 0;
  t.chunk_rows = chunk_rows(M, p.K, t.bt, l2_bytes_for(p.cc_major, p.cc_minor));
  t.chunks = t.chunk_rows > 0 ? (M + t.chunk_rows - 1) / t.chunk_rows : 0;
  t.m_tiles = (t.chunk_rows + t.bt - 1) / t.bt;
  t.n_tiles = (p.N + kPairRows - 1) / kPairRows;
  t.k_stages = p.K / kStageK;
  t.tiles = t.m_tiles * t.n_tiles;
  const int pairs = p.sm_count / kClusterSize > 0 ? p.sm_count / kClusterSize : 1;
  t.clusters = t.tiles < pairs ? t.tiles : pairs;
  // Band: the clusters resident at once cover about sqrt(clusters) m tiles (x slabs) by as many n
  // tiles, so each weight column is re-read from L2, not HBM, across the band.
  int g = 1;
  while ((g + 1) * (g + 1) <= t.clusters) ++g;
  t.group_m = g < t.m_tiles ? g : (t.m_tiles > 0 ? t.m_tiles : 1);
  t.scale_rows = scale_rows(p.group, p.channelwise);
  if (p.perm != nullptr) t.ws_x = plan_align_up(static_cast<size_t>(M) * p.K * 2, 256);
  return t;
}

}  // namespace sm100
}  // namespace prefill
}  // namespace swordfish
