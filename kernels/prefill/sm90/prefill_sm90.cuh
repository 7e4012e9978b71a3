// The Hopper prefill mainloop: a warp-specialized wgmma kernel that reads
// packed format v1 directly. Host twin: prefill_sm90_launch.cu.
//
//   y^T (N, M) = W (N, K) . x^T (K, M)
//
// The weight is the wgmma A operand, dequantized into registers by the
// Transform stage (transform.cuh); the activations are the B operand, staged
// by TMA into 128-byte-swizzled shared memory exactly as wgmma reads them.
// A from registers means the dequantized weight never makes a round trip
// through shared memory; the weight tile is only 64 rows per warpgroup, so
// the register A tile (16 registers per k64 slice) is small.
//
// CTA: 1 + CG warpgroups (384 or 512 threads), one CTA per SM, persistent.
//   A pipeline stage is KS k64 slices (prefill_sm90_layout.h: k128 for the
//   small token tiles where four such stages fit, else k64).
//   warpgroup 0   producer: per stage, TMA loads of x (BT tokens x 64 k, one
//                 box per slice; the last m tile loads only its rows and
//                 zeros the slot's others once, Params::x_tail_rows), of the
//                 packed slices of n64 blocks n0 / 64
//                 .. n0 / 64 + CG - 1 (2,048 B per slice and block for int4,
//                 4,096 B for int8, read as plain bytes: a block is a linear
//                 byte range; one 3-D box) and of the scale (zero-point) rows,
//                 all completing on one mbarrier; three threads share the
//                 issue.
//   warpgroups 1 .. CG consumers: warpgroup c owns output columns n0 + 64 c
//                 .. + 63. Per stage: Transform 4 k16 steps per slice into A
//                 registers, four wgmma.m64nBTk16 per slice (A: registers, B:
//                 the staged x), keep one stage's MMAs in flight (double-
//                 buffered A registers), then release the previous stage to
//                 the producer.
// Tile (CTA): 64 CG output columns x BT tokens, BT in {64, 128, 192, 256}
//   (CG = 3 only for BT <= 128: 152 registers per consumer). BT 192 and the
//   192-column tile exist for wave quantization: 8B qkv (N = 6144) at
//   M = 512 is 96 tiles of 128 x 256 on 132 SMs, or 128 tiles of 192 x 128;
//   8B down (N = 4096) at M = 768 is 96 tiles of 128 x 256 or 128 of
//   128 x 192. When N is not a multiple of 192 the
//   last column tile's top warpgroups lie past N: TMA zero-fills their weight
//   and scale boxes, they compute zeros, and they store nothing.
// Work items, claimed statically
//   (item = blockIdx.x + i * gridDim.x) so the producer runs ahead into the
//   next item while the consumers store: whole tiles for the full waves, and
//   the tiles of the last, partial wave split along K so that it fills the
//   SMs (data-parallel + split tail, see Params).
// Grouped (stacked experts, grouped_launch): m tile i multiplies by expert
//   tile_expert[i]'s weight (its n blocks and scale rows offset into the same
//   maps widened to all experts); the m tile count is an upper bound and the
//   tiles past the device-side row count are skipped by every role alike.
// Epilogue: fp32 accumulators (+ bias) -> dtype, written into a 128-byte-
//   swizzled (BT, 64) staging tile per warpgroup and stored with one TMA
//   store (rows >= M are clipped by TMA). int8's BT 128 and BT 256 tiles stage
//   half the rows at a time, in two passes, to fit a fourth pipeline stage
//   (prefill_sm90_layout.h epi_rows). Split-K items write fp32 partials in
//   fragment order instead (coalesced float4), and reduce_kernel sums them in
//   split order: bit-identical run to run, like everything else here.
//
// Shared memory, per stage: x KS x (BT, 64) 16-bit = 128 BT bytes per slice
//   [1024-aligned], packed CG x KS x kSliceBytes, scales and zero points
//   2 KS x 64 CG x 2 B each (room for group 32's two rows per slice). Plus
//   CG x 128 kEpiRows bytes of epilogue staging (prefill_sm90_layout.h).
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>
#include <utility>

#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "kernels/common/format.h"
#include "kernels/common/ptx.cuh"
#include "kernels/prefill/sm90/prefill_sm90_kernels.h"
#include "kernels/prefill/sm90/prefill_sm90_layout.h"
#include "kernels/prefill/transform.cuh"

namespace swordfish {
namespace prefill {
namespace sm90 {

// The packed weight, scales and zero points reach the kernel as TMA
// descriptors (tmap_w, tmap_s, tmap_z); x and y as tmap_x, tmap_y, the last m
// tile's rows of x as tmap_x_tail (a box of x_tail_rows rows), and a global
// buffer of zeros as tmap_x_zero (a box of BT - x_tail_rows rows).
struct Params {
  const uint16_t* zeros;   // (K / group, N) folded zero points, or nullptr (only tested for null)
  const uint16_t* bias;    // (N) or nullptr (split tiles: added by reduce_kernel)
  float* partials;         // fp32 partials of the split tiles, or nullptr when none
  int M, K, N, group;
  int channelwise;         // 1: every k reads scale row 0 (the replicas are not read)
  int m_tiles, n_tiles;
  int k_stages;            // K / (64 KS): pipeline stages per tile
  // Work items: tiles [0, dp_tiles) whole (data parallel), then every tile
  // of [dp_tiles, m_tiles * n_tiles) split into `splits` k ranges. dp_tiles
  // is a multiple of the grid, so the split items form the last wave.
  int dp_tiles, splits;
  int items;               // dp_tiles + (m_tiles * n_tiles - dp_tiles) * splits
  int group_m;             // raster: tiles are walked in bands of group_m m tiles (L2 reuse)
  int scale_rows;          // scale (zero-point) rows a stage stages: 64 KS / group, at least 1 (1: channelwise)
  int x_tail_rows;         // rows of x a stage loads for the last m tile (tmap_x_tail's box,
                           // last_tile_x_rows): the other m tiles load BT through tmap_x. The
                           // stage's other rows only feed outputs that are never stored; they
                           // are zeroed once per ring slot (tmap_x_zero) so that their MMAs
                           // run on zeros, as TMA's out-of-bounds fill had them do.
  // Grouped (the MoE experts, launch_grouped): m tile i of x runs against expert tile_expert[i]'s
  // weight, whose n blocks start expert_nblocks * e into tmap_w and whose scale rows start
  // expert_srows * e into tmap_s / tmap_z. m_tiles is then an upper bound: tiles from
  // *rows_dev / BT on, and tiles of an expert outside [0, experts), are skipped by every role.
  const int32_t* tile_expert;  // (m_tiles) or nullptr: one weight
  const int32_t* rows_dev;     // rows of x in use (a multiple of BT), read after the dependency wait
  int experts, expert_nblocks, expert_srows;
};

// Work item -> tile coordinates and k-stage range.
struct Item {
  int m_tile, n0, kb0, kb1;
  int slot;  // split tiles: partials slot (split tile index * splits + split); -1 for a whole tile
};

// Tile index -> (m tile, n tile). Tiles run in bands of group_m m tiles, n
// fastest across the band's m tiles, so the CTAs resident at one time share a
// few x slabs and a few weight columns through L2 instead of streaming one of
// the two (the host picks group_m; 1 = plain m-fastest order).
SF_DEVICE void tile_coords(const Params& p, int mn, int& m_tile, int& n_tile) {
  const int band = p.group_m * p.n_tiles;
  const int m_first = (mn / band) * p.group_m;
  const int rest = mn % band;
  const int rows = p.m_tiles - m_first < p.group_m ? p.m_tiles - m_first : p.group_m;
  m_tile = m_first + rest % rows;
  n_tile = rest / rows;
}

template <int CG>
SF_DEVICE Item item_of(const Params& p, int item) {
  Item it;
  int mn, split = 0, parts = 1;
  if (item < p.dp_tiles) {
    mn = item;
    it.slot = -1;
  } else {
    const int j = item - p.dp_tiles;
    mn = p.dp_tiles + j / p.splits;
    split = j % p.splits;
    parts = p.splits;
    it.slot = parts > 1 ? j : -1;
  }
  int n_tile;
  tile_coords(p, mn, it.m_tile, n_tile);
  it.n0 = n_tile * tile_n(CG);
  it.kb0 = static_cast<int>(static_cast<long long>(split) * p.k_stages / parts);
  it.kb1 = static_cast<int>(static_cast<long long>(split + 1) * p.k_stages / parts);
  return it;
}

// m tiles in use: all of them, or a grouped GEMM's *rows_dev / BT (read once per role, after the
// dependency wait).
template <int BT>
SF_DEVICE int live_m_tiles(const Params& p) {
  return p.rows_dev != nullptr ? min(p.m_tiles, *p.rows_dev / BT) : p.m_tiles;
}

// The expert whose weight item `it` reads: 0 without tile_expert, else tile_expert[m tile];
// -1 when every role skips the item (past the rows in use, or an expert not on this rank).
SF_DEVICE int item_expert(const Params& p, const Item& it, int live_m) {
  if (p.tile_expert == nullptr) return 0;
  if (it.m_tile >= live_m) return -1;
  const int e = p.tile_expert[it.m_tile];
  return static_cast<unsigned>(e) < static_cast<unsigned>(p.experts) ? e : -1;
}

// First scale row a stage needs (scale_rows consecutive rows are staged).
// Channelwise weights read row 0 only, like decode (the replicas need not be
// valid).
template <int KS>
SF_DEVICE int scale_row(const Params& p, int kb) {
  if (p.channelwise) return 0;
  return (kb * KS * kSliceK) / p.group;
}

// wgmma shared-memory descriptor of a K-major, 128-byte-swizzled operand tile
// whose rows are 128 bytes: 8-row groups 1024 bytes apart (stride byte
// offset), leading byte offset unused by swizzled K-major layouts (1).
SF_DEVICE uint64_t smem_desc_sw128(uint32_t addr) {
  cute::GmmaDescriptor d;
  d.bitfield.start_address_ = static_cast<uint16_t>((addr & 0x3ffff) >> 4);
  d.bitfield.leading_byte_offset_ = 1;
  d.bitfield.stride_byte_offset_ = 1024 >> 4;
  d.bitfield.base_offset_ = 0;
  d.bitfield.layout_type_ = static_cast<uint8_t>(cute::SM90::GMMA::LayoutType::B128);
  return d.desc_;
}

// The wgmma atom for (dtype, BT): A from registers (K-major by definition), B
// K-major from shared memory.
template <bool BF16, int BT>
struct Atom;
#define SF_PREFILL_ATOM(BT_, BF_, F16_)                                                              \
  template <>                                                                                        \
  struct Atom<true, BT_> {                                                                           \
    using type = cute::SM90::GMMA::BF_<cute::SM90::GMMA::Major::K, cute::SM90::GMMA::Major::K>;                  \
  };                                                                                                 \
  template <>                                                                                        \
  struct Atom<false, BT_> {                                                                          \
    using type = cute::SM90::GMMA::F16_<cute::SM90::GMMA::Major::K, cute::SM90::GMMA::Major::K>;                 \
  };
SF_PREFILL_ATOM(64, MMA_64x64x16_F32BF16BF16_RS, MMA_64x64x16_F32F16F16_RS)
SF_PREFILL_ATOM(128, MMA_64x128x16_F32BF16BF16_RS, MMA_64x128x16_F32F16F16_RS)
SF_PREFILL_ATOM(192, MMA_64x192x16_F32BF16BF16_RS, MMA_64x192x16_F32F16F16_RS)
SF_PREFILL_ATOM(256, MMA_64x256x16_F32BF16BF16_RS, MMA_64x256x16_F32F16F16_RS)
#undef SF_PREFILL_ATOM

template <class A, size_t... I>
SF_DEVICE void gmma(const uint32_t (&a)[4], uint64_t desc, float* d, bool accumulate, std::index_sequence<I...>) {
  A::fma(a[0], a[1], a[2], a[3], desc, d[I]..., accumulate ? cute::SM90::GMMA::ScaleOut::One : cute::SM90::GMMA::ScaleOut::Zero);
}

using ptx::from_f32;  // kernels/common/ptx.cuh
using ptx::to_f32;

// Byte offset of element (token, n) in a (BT, 64) 16-bit epilogue staging tile
// laid out as TMA's 128-byte swizzle stores it: 16-byte chunk n / 8 of row
// `token` sits at chunk (n / 8) ^ (token % 8).
SF_HOST_DEVICE constexpr uint32_t staging_offset(int token, int n) {
  return 128u * token + 16u * ((n / 8) ^ (token % 8)) + 2u * (n % 8);
}

// The epilogue's 16-bit stores (accumulator 4 j + e of lane (g, t) is token
// 8 j + 2 t + (e & 1), column n_lo + 8 (e >> 1)) touch each bank with one
// 32-bit word at a time (two lanes may share a word): conflict free.
template <int BITS>
constexpr bool staging_stores_conflict_free() {
  for (int w = 0; w < 4; ++w)
    for (int e = 0; e < 4; ++e) {
      uint32_t word_of_bank[32] = {};
      bool used[32] = {};
      for (int lane = 0; lane < 32; ++lane) {
        const Role r = make_role<BITS>(w, lane);
        const uint32_t word = staging_offset(2 * (lane % 4) + (e & 1), r.n_lo + 8 * (e >> 1)) / 4;
        const int bank = static_cast<int>(word % 32);
        if (used[bank] && word_of_bank[bank] != word) return false;
        used[bank] = true;
        word_of_bank[bank] = word;
      }
    }
  return true;
}
static_assert(staging_stores_conflict_free<4>() && staging_stores_conflict_free<8>(),
              "epilogue staging stores must be free of shared-memory bank conflicts");

// Named barrier over one consumer warpgroup (ids 1, 2; 0 is __syncthreads).
SF_DEVICE void warpgroup_sync(int consumer) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + consumer) : "memory");
}

template <int BITS, bool BF16, int BT, int KS, int CG>
__global__ void __launch_bounds__(threads_for(CG), 1)
    gemm_kernel(const __grid_constant__ Params p, const __grid_constant__ CUtensorMap tmap_x,
                const __grid_constant__ CUtensorMap tmap_x_tail, const __grid_constant__ CUtensorMap tmap_x_zero,
                const __grid_constant__ CUtensorMap tmap_w, const __grid_constant__ CUtensorMap tmap_s,
                const __grid_constant__ CUtensorMap tmap_z, const __grid_constant__ CUtensorMap tmap_y) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Layout<BITS, BT, KS, CG>;
  constexpr int kStages = L::kStages;
  constexpr int kAcc = BT / 2;  // fp32 accumulators per thread: (64 x BT) / 128
  using MmaAtom = typename Atom<BF16, BT>::type;
  using cutlass::arch::ClusterBarrier;
  using cutlass::arch::ClusterTransactionBarrier;

  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L::kOffBar);
  uint64_t* empty = full + kStages;
  const uint32_t s_x = ptx::smem_u32(smem + L::kOffX);
  const uint32_t s_w = ptx::smem_u32(smem + L::kOffW);
  const uint32_t s_s = ptx::smem_u32(smem + L::kOffS);
  const uint32_t s_z = ptx::smem_u32(smem + L::kOffZ);

  const int wg = threadIdx.x / 128;
  const int tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ClusterBarrier::init(&full[s], 1);   // the producer's arrive + the stage's bytes
      ClusterBarrier::init(&empty[s], CG);  // one arrive per consumer warpgroup
    }
    cutlass::arch::fence_barrier_init();
    cute::prefetch_tma_descriptor(reinterpret_cast<const cute::TmaDescriptor*>(&tmap_x));
    cute::prefetch_tma_descriptor(reinterpret_cast<const cute::TmaDescriptor*>(&tmap_x_tail));
    cute::prefetch_tma_descriptor(reinterpret_cast<const cute::TmaDescriptor*>(&tmap_x_zero));
    cute::prefetch_tma_descriptor(reinterpret_cast<const cute::TmaDescriptor*>(&tmap_w));
    cute::prefetch_tma_descriptor(reinterpret_cast<const cute::TmaDescriptor*>(&tmap_s));
    if (p.zeros != nullptr) cute::prefetch_tma_descriptor(reinterpret_cast<const cute::TmaDescriptor*>(&tmap_z));
    cute::prefetch_tma_descriptor(reinterpret_cast<const cute::TmaDescriptor*>(&tmap_y));
  }
  __syncthreads();
  // Launched with programmatic stream serialization: the prologue above ran
  // while the previous kernel in the stream finished; nothing in global memory
  // is touched before it has completed. Then the kernel behind us (the split-K
  // reduce, or the next GEMM) may launch and park on its own wait.
  ptx::grid_dependency_wait();
  ptx::grid_launch_dependents();

  const bool has_zeros = p.zeros != nullptr;
  const int rows = p.scale_rows;

  if (wg == 0) {
    // ------------------------------------------------------------ producer
    // Three threads (lane 0 of warps 0, 1, 2) walk the same stages and each
    // issues one kind of copy onto the stage's barrier: warp 0 arms it with
    // the stage's total bytes and loads x, warp 1 the packed slices (one 3-D
    // box: CG n64 blocks x the stage's KS k64 slices), warp 2 the scale (and zero-point)
    // rows. Spreading the issue over three threads and using TMA boxes for
    // the packed slices and scale rows measured 17% faster at M <= 64 than
    // one thread issuing bulk copies (2026-12-02, 70B gate_up). A copy may
    // complete before the arming arrive: the barrier's transaction count
    // goes negative until then and the phase cannot complete without the
    // arrive.
    cutlass::arch::warpgroup_reg_dealloc<producer_regs(CG)>();
    const int role_warp = threadIdx.x / 32;
    if (threadIdx.x % 32 != 0 || role_warp > 2) return;
    constexpr int kSlice = kSliceBytes<BITS>;
    // Boxes past N (the last column tile of a ragged N) are zero-filled and still count in full.
    const uint32_t tx_wsz = CG * KS * kSlice + rows * L::kSRowBytes * (has_zeros ? 2 : 1);
    const uint64_t hint = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL);
    constexpr int kBlocksPerStage = kSliceK / format::block_k(BITS);
    // The last m tile's rows past x_tail_rows: bytes per stage, and the ring
    // slots where they hold zeros (bit s; a whole-tile load overwrites them).
    static_assert(kStages <= 32, "one bit per ring slot");
    const uint32_t zero_bytes = KS * (BT - p.x_tail_rows) * 128;
    uint32_t zeroed = 0;
    int stage = 0;
    uint32_t phase = 0;
    const int live_m = live_m_tiles<BT>(p);
    for (int item = blockIdx.x; item < p.items; item += gridDim.x) {
      const Item it = item_of<CG>(p, item);
      const int e = item_expert(p, it, live_m);
      if (e < 0) continue;
      const int m0 = it.m_tile * BT;
      const int nb = it.n0 / format::kBlockN + e * p.expert_nblocks;
      const bool last_m = it.m_tile == p.m_tiles - 1;
      const void* map_x = last_m ? &tmap_x_tail : &tmap_x;
      const uint32_t tx = KS * (last_m ? p.x_tail_rows : BT) * 128 + tx_wsz;
      for (int kb = it.kb0; kb < it.kb1; ++kb) {
        ClusterBarrier::wait(&empty[stage], phase ^ 1);
        if (role_warp == 0) {
          const bool zero_rest = last_m && zero_bytes != 0 && !((zeroed >> stage) & 1u);
          ClusterTransactionBarrier::arrive_and_expect_tx(&full[stage], tx + (zero_rest ? zero_bytes : 0u));
          uint8_t* xs = smem + L::kOffX + stage * L::kXBytes;
#pragma unroll
          for (int j = 0; j < KS; ++j) {
            cute::SM90_TMA_LOAD_2D::copy(map_x, &full[stage], hint, xs + j * L::kXTile, (kb * KS + j) * kSliceK, m0);
            // x_tail_rows is a multiple of 8: the zeros land on whole 1024-byte swizzle atoms.
            if (zero_rest)
              cute::SM90_TMA_LOAD_2D::copy(&tmap_x_zero, &full[stage], hint, xs + j * L::kXTile + p.x_tail_rows * 128,
                                           0, 0);
          }
          zeroed = last_m ? (zeroed | (1u << stage)) : (zeroed & ~(1u << stage));
        } else if (role_warp == 1) {
          // (256 u64 per block, k block, n block): the CG n64 blocks of the tile at this stage's
          // KS k64 slices (the host's box spans KS * kBlocksPerStage k blocks).
          cute::SM90_TMA_LOAD_3D::copy(&tmap_w, &full[stage], hint, smem + L::kOffW + stage * L::kWBytes, 0,
                                       kb * KS * kBlocksPerStage, nb);
        } else {
          const int row = scale_row<KS>(p, kb) + e * p.expert_srows;
          cute::SM90_TMA_LOAD_2D::copy(&tmap_s, &full[stage], hint, smem + L::kOffS + stage * L::kSBytes, it.n0, row);
          if (has_zeros)
            cute::SM90_TMA_LOAD_2D::copy(&tmap_z, &full[stage], hint, smem + L::kOffZ + stage * L::kSBytes, it.n0,
                                         row);
        }
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
    return;
  }

  // -------------------------------------------------------------- consumers
  cutlass::arch::warpgroup_reg_alloc<consumer_regs(CG)>();
  const int c = wg - 1;  // n64 block of the CTA tile this warpgroup owns
  const int warp = tid / 32, lane = threadIdx.x % 32;
  const int t = lane % 4;
  const Role role = make_role<BITS>(warp, lane);
  const uint32_t w_off = c * KS * kSliceBytes<BITS>;  // this warpgroup's n64 block: KS slices back to back
  const uint32_t col = 2u * (64 * c + role.n_lo);  // byte offset of column n_lo in a staged scale row
  const uint32_t s_epi = ptx::smem_u32(smem + L::kOffEpi) + c * L::kEpiRows * 128;
  // A split tile's partials: float4 q of consumer thread i at q * consumer_threads(CG) + i.
  constexpr int kPartialThreads = consumer_threads(CG);

  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
  // A registers of two stages: one stage's MMAs stay in flight while the
  // Transform of the next writes the other buffer. (A third buffer and two
  // stages in flight made ptxas serialize the BT = 256 wgmmas for lack of
  // registers, and did not help the small tiles: measured 2026-12-02.)
  uint32_t a_even[4 * KS][4], a_odd[4 * KS][4];
  // Staged scale row of slice i (group 32 stages two rows per slice; group >= 128 one row for both).
  uint32_t slice_row[KS];
#pragma unroll
  for (int i = 0; i < KS; ++i)
    slice_row[i] = p.channelwise ? 0u : static_cast<uint32_t>((i * kSliceK) / p.group * L::kSRowBytes);

  // Adding a byte offset / 16 to a descriptor moves its start address as long as
  // every address stays below 2^18 (the field is 14 bits of address >> 4): the
  // CTA's whole dynamic shared memory, alignment slack included, does.
  static_assert(L::kSmemBytes <= (1 << 18), "descriptor start-address arithmetic must not carry");
  const uint64_t desc_x0 = smem_desc_sw128(s_x);  // stage 0, slice 0, k16 step 0 of the x tiles
  int stage = 0;
  uint32_t phase = 0;

  // One stage: Transform its KS k64 slices into `a`, issue their 4 KS MMAs,
  // then retire the previous stage's MMAs and hand that stage back to the
  // producer.
  auto step = [&](uint32_t(&a)[4 * KS][4], bool accumulate, int& prev) {
    ClusterBarrier::wait(&full[stage], phase);
#pragma unroll
    for (int i = 0; i < KS; ++i) {
      SliceAddr at;
      at.words = s_w + stage * L::kWBytes + w_off + i * kSliceBytes<BITS>;
      at.scales = s_s + stage * L::kSBytes + slice_row[i] + col;
      at.zeros = s_z + stage * L::kSBytes + slice_row[i] + col;
      at.row1 = (p.group == 32 && !p.channelwise) ? static_cast<uint32_t>(L::kSRowBytes) : 0u;
      uint32_t(&ai)[4][4] = *reinterpret_cast<uint32_t(*)[4][4]>(&a[4 * i]);
      if (has_zeros) {
        transform_slice<BITS, BF16, true>(at, role, ai);
      } else {
        transform_slice<BITS, BF16, false>(at, role, ai);
      }
    }
#pragma unroll
    for (int i = 0; i < kAcc; ++i) cute::warpgroup_fence_operand(acc[i]);
    cute::warpgroup_arrive();
    // The stage's descriptors: desc_x0 plus the stage's offset in 16-byte units
    // (no carry: the static_assert above), the stage index broadcast from lane
    // 0 so that ptxas sees a warp-uniform value and builds them in uniform
    // registers. From the per-thread index, every descriptor went through R2UR,
    // two before each HGMMA (docs/PREFILL.md).
    const uint64_t d_stage = desc_x0 + static_cast<uint64_t>(__shfl_sync(0xffffffffu, stage, 0) * (L::kXBytes / 16));
#pragma unroll
    for (int kk = 0; kk < 4 * KS; ++kk)
      gmma<MmaAtom>(a[kk], d_stage + ((kk / 4) * L::kXTile + 32 * (kk % 4)) / 16, acc, accumulate || kk > 0,
                    std::make_index_sequence<kAcc>{});
    cute::warpgroup_commit_batch();
#pragma unroll
    for (int i = 0; i < kAcc; ++i) cute::warpgroup_fence_operand(acc[i]);
    cute::warpgroup_wait<1>();  // the previous stage's MMAs are done: its x tile and A buffer are free
    if (prev >= 0 && tid == 0) ClusterBarrier::arrive(&empty[prev]);
    prev = stage;
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  };

  bool pending_store = false;
  const int live_m = live_m_tiles<BT>(p);
  for (int item = blockIdx.x; item < p.items; item += gridDim.x) {
    const Item it = item_of<CG>(p, item);
    if (item_expert(p, it, live_m) < 0) continue;  // as the producer: no stage of it was loaded
    const int m0 = it.m_tile * BT;
    int prev = -1;
    int kb = it.kb0;
    bool accumulate = false;
    for (; kb + 1 < it.kb1; kb += 2) {
      step(a_even, accumulate, prev);
      accumulate = true;
      step(a_odd, true, prev);
    }
    if (kb < it.kb1) step(a_even, accumulate, prev);
    cute::warpgroup_wait<0>();
    if (prev >= 0 && tid == 0) ClusterBarrier::arrive(&empty[prev]);

    // ------------------------------------------------------------ epilogue
    if (it.slot >= 0) {
      // Fragment-order fp32 partials: float4 q of thread i at ((slot, q) * 128 CG + i) * 4.
      float4* dst = reinterpret_cast<float4*>(p.partials) +
                    static_cast<long long>(it.slot) * (kAcc / 4) * kPartialThreads + (128 * c + tid);
#pragma unroll
      for (int q = 0; q < kAcc / 4; ++q)
        dst[q * kPartialThreads] = make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]);
      continue;
    }
    // A warpgroup past N (the last column tile of a ragged N) has nothing to store.
    if (it.n0 + 64 * c >= p.N) continue;
    float b_lo = 0.f, b_hi = 0.f;
    if (p.bias != nullptr) {
      b_lo = to_f32<BF16>(p.bias[it.n0 + 64 * c + role.n_lo]);
      b_hi = to_f32<BF16>(p.bias[it.n0 + 64 * c + role.n_lo + 8]);
    }
    // staging_offset(): accumulator 4 j + e is token 8 j + 2 t + (e & 1),
    // column n_lo + 8 (e >> 1); token % 8 = 2 t + (e & 1) does not depend on
    // j, so row j adds 1024 bytes to a per-e base. Conflict free (checked at
    // compile time above).
    uint32_t base[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) base[e] = s_epi + staging_offset(2 * t + (e & 1), role.n_lo + 8 * (e >> 1));
    // BT / kEpiRows passes through the (kEpiRows, 64) staging tile (one pass
    // unless int8's deeper pipeline took the room, prefill_sm90_layout.h).
#pragma unroll
    for (int pass = 0; pass < BT / L::kEpiRows; ++pass) {
      // The previous store (this item's last pass or the previous item's) must have finished reading the tile.
      if (pending_store && tid == 0) cute::tma_store_wait<0>();
      warpgroup_sync(c);
#pragma unroll
      for (int j = 0; j < L::kEpiRows / 8; ++j) {
        const int jj = pass * (L::kEpiRows / 8) + j;
#pragma unroll
        for (int e = 0; e < 4; ++e)
          ptx::sts_u16(base[e] + 1024u * j, from_f32<BF16>(acc[4 * jj + e] + ((e >> 1) ? b_hi : b_lo)));
      }
      cutlass::arch::fence_view_async_shared();
      warpgroup_sync(c);
      const int row0 = m0 + pass * L::kEpiRows;
      if (tid == 0 && row0 < p.M) {
        cute::SM90_TMA_STORE_2D::copy(&tmap_y, smem + L::kOffEpi + c * L::kEpiRows * 128, it.n0 + 64 * c, row0);
        cute::tma_store_arrive();
      }
      pending_store = true;
    }
  }
  if (pending_store && tid == 0) cute::tma_store_wait<0>();
#else
  // Built for an architecture without wgmma: the host never launches this
  // (prefill::can_implement requires sm90a); trap rather than do nothing.
  (void)p;
  (void)tmap_x;
  (void)tmap_x_tail;
  (void)tmap_x_zero;
  (void)tmap_w;
  (void)tmap_s;
  (void)tmap_z;
  (void)tmap_y;
#if defined(__CUDA_ARCH__)
  __trap();
#endif
#endif
}

// Split tiles: y = round(sum over splits, in split order, of the fragment-
// order partials + bias). grid (split tiles, BT / 8), 128 CG threads: CTA
// (i, q) finishes float4 q of every thread of split tile i; thread j holds
// what consumer thread j held (same Role), so the fragment -> (token, column)
// map is the epilogue's.
template <int BITS, bool BF16, int BT, int CG>
__global__ void __launch_bounds__(consumer_threads(CG))
    reduce_kernel(const __grid_constant__ Params p, uint16_t* __restrict__ y) {
  constexpr int kQuads = BT / 8;  // float4s per thread
  constexpr int kPartialThreads = consumer_threads(CG);
  // Launched behind the GEMM with programmatic stream serialization (its launch latency hides
  // under the GEMM): the partials are complete and visible only after this wait.
  ptx::grid_dependency_wait();
  ptx::grid_launch_dependents();
  const int mn = p.dp_tiles + blockIdx.x;
  const int q = blockIdx.y;
  int m_tile, n_tile;
  tile_coords(p, mn, m_tile, n_tile);
  const int m0 = m_tile * BT;
  const int n0 = n_tile * tile_n(CG);
  const int c = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int t = lane % 4;
  const Role role = make_role<BITS>(warp, lane);
  const int n_lo = n0 + 64 * c + role.n_lo;
  if (n_lo >= p.N) return;  // a warpgroup past a ragged N: its partials are zeros, never stored
  const float4* src = reinterpret_cast<const float4*>(p.partials) +
                      (static_cast<long long>(blockIdx.x) * p.splits * kQuads + q) * kPartialThreads + threadIdx.x;
  float v[4] = {0.f, 0.f, 0.f, 0.f};
  for (int s = 0; s < p.splits; ++s) {  // fixed order: bit-identical every run
    const float4 f = src[static_cast<long long>(s) * kQuads * kPartialThreads];
    v[0] += f.x;
    v[1] += f.y;
    v[2] += f.z;
    v[3] += f.w;
  }
  float b_lo = 0.f, b_hi = 0.f;
  if (p.bias != nullptr) {
    b_lo = to_f32<BF16>(p.bias[n_lo]);
    b_hi = to_f32<BF16>(p.bias[n_lo + 8]);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int m = m0 + 8 * q + 2 * t + (e & 1);
    const int n = n_lo + 8 * (e >> 1);
    if (m < p.M) y[static_cast<long long>(m) * p.N + n] = from_f32<BF16>(v[e] + ((e >> 1) ? b_hi : b_lo));
  }
}

// The instantiated kernels of one bit width, by (dtype, consumer warpgroups,
// token tile); each of prefill_sm90_int4.cu / _int8.cu instantiates one bit
// width through this.
template <int BITS, bool BF16, int BT, int CG>
KernelSet make_kernel_set() {
  constexpr int KS = slices_for<BITS, BT, CG>();
  using L = Layout<BITS, BT, KS, CG>;
  KernelSet k;
  k.gemm = reinterpret_cast<const void*>(&gemm_kernel<BITS, BF16, BT, KS, CG>);
  k.reduce = reinterpret_cast<const void*>(&reduce_kernel<BITS, BF16, BT, CG>);
  k.smem_bytes = L::kSmemBytes;
  k.stages = L::kStages;
  k.slices = KS;
  k.epi_rows = L::kEpiRows;
  return k;
}

template <int BITS, bool BF16>
KernelSet kernel_set_dtype(int cg, int bt) {
  if (cg == 2) {
    switch (bt) {
      case 64: return make_kernel_set<BITS, BF16, 64, 2>();
      case 128: return make_kernel_set<BITS, BF16, 128, 2>();
      case 192: return make_kernel_set<BITS, BF16, 192, 2>();
      case 256: return make_kernel_set<BITS, BF16, 256, 2>();
      default: return KernelSet{};
    }
  }
  if (cg == 3) {
    switch (bt) {
      case 64: return make_kernel_set<BITS, BF16, 64, 3>();
      case 128: return make_kernel_set<BITS, BF16, 128, 3>();
      default: return KernelSet{};
    }
  }
  return KernelSet{};
}

template <int BITS>
KernelSet kernel_set(bool bf16, int cg, int bt) {
  return bf16 ? kernel_set_dtype<BITS, true>(cg, bt) : kernel_set_dtype<BITS, false>(cg, bt);
}

}  // namespace sm90
}  // namespace prefill
}  // namespace swordfish
