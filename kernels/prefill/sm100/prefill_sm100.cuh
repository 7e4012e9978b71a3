// The Blackwell prefill mainloop (sm_100a B200, sm_110a Jetson Thor): a
// warp-specialized tcgen05 kernel that reads packed format v1 directly, two
// SMs per MMA. Host twin: prefill_sm100_launch.cu. Plan, layout and index
// math: prefill_sm100_plan.h (plain C++, tested on the CPU).
//
// COMPILED, NOT RUN: no Blackwell GPU has executed this kernel.
//
//   y^T (N, M) = W (N, K) . x^T (K, M)
//
// The weight is tcgen05's A operand, dequantized by the Transform stage that
// the sm90 kernel runs (transform.cuh: make_role, transform_slice; the same
// code, not a copy) and stored into the UMMA shared-memory buffer; the
// activations are B, staged by TMA exactly as the UMMA descriptor reads them.
// Accumulators live in TMEM.
//
// Cluster = one pair of CTAs (2, 1, 1); rank 0 is the MMA leader. Tile = 256
// weight rows x BT tokens (prefill_sm100_plan.h): CTA r holds weight rows
// n0 + 128 r .. + 127 (A half) and activation rows m0 + r BT / 2 .. (B half);
// tcgen05.mma.cta_group::2 (SM100_MMA_F16BF16_2x1SM_SS through CuTe's
// make_tiled_mma) reads both CTAs' halves and writes each CTA's 128 x BT
// accumulators into its own TMEM.
//
// Warps (kThreads = 448, one CTA per SM, persistent over the pair's tiles):
//   0..3   epilogue   per tile: wait the accumulator stage, tcgen05.ld
//                     32x32b.x32 (warp w: TMEM lanes 32 w ..), release the stage
//                     to the leader's MMA, + bias, round, store y.
//   4..11  Transform  warpgroup c dequantizes n64 block c of the CTA's rows:
//                     wait the packed/scale stage, transform_slice (all loads,
//                     then four dependency chains), release it, wait an A
//                     stage, 16 lane-local 32-bit stores at the byte-domain
//                     swizzled offsets (a_store_offset), fence.proxy.async,
//                     arrive on the LEADER's A-full barrier (both CTAs).
//   12     producer   lane 0: per k64 stage, TMA of the CTA's two packed n64
//                     blocks (one 3-D box of raw bytes) and scale / zero-point
//                     rows onto its own barrier; then its half of the
//                     activations with SM100_TMA_2SM_LOAD (both CTAs issue; the
//                     bytes complete on the leader's barrier, which the leader
//                     alone arms with the pair's total).
//   13     MMA        both CTAs allocate TMEM (cta_group::2); the leader waits
//                     activation and A stages, issues 4 x 256xBTx16 MMAs per
//                     stage, commits (multicast to both CTAs) the stage
//                     releases and, per tile, the accumulator stage.
//
// Pipelines (mbarrier phase rings; "pair" = barrier lives in the leader only):
//   W   (kWStages, per CTA)   producer -> Transform       full: 1 arrive + tx   empty: 8 warp arrives
//   A   (kAStages, pair)      Transforms -> leader MMA    full: 16 warp arrives (2 CTAs x 8)
//                                                          empty (both CTAs): 1 commit
//   X   (kXStages, pair)      2-SM TMA -> leader MMA      full: leader's arrive + both halves' tx
//                                                          empty (both CTAs): 1 commit
//   ACC (2, pair)             leader MMA -> epilogues     full (both CTAs): 1 commit
//                                                          empty (leader): 8 warp arrives (2 x 4)
// Every ring is walked identically by both CTAs (same tile list, same k
// stages), so each CTA's phases match the leader's.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>
#include <type_traits>

#include <cute/arch/cluster_sm90.hpp>
#include <cute/arch/copy_sm100.hpp>
#include <cute/arch/copy_sm100_tma.hpp>
#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/arch/mma_sm100_umma.hpp>
#include <cute/arch/tmem_allocator_sm100.hpp>
#include <cute/atom/mma_traits_sm100.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "kernels/common/format.h"
#include "kernels/common/ptx.cuh"
#include "kernels/prefill/sm100/prefill_sm100_kernels.h"
#include "kernels/prefill/sm100/prefill_sm100_plan.h"
#include "kernels/prefill/sm100/sm100_ptx.cuh"
#include "kernels/prefill/transform.cuh"

namespace swordfish {
namespace prefill {
namespace sm100 {

// What the kernel reads besides its tensor maps: x (tmap_x, the whole (M_total, K)
// tensor; 2-SM boxes of BT / 2 rows), the packed weight (tmap_w: (256 u64, K / block_k,
// N / 64), boxes of one k64 slice of two n64 blocks), scales and folded zero points
// (tmap_s, tmap_z: (rows, 128) boxes).
struct Params {
  const uint16_t* bias;  // (N) or nullptr
  uint16_t* y;           // this launch's rows of the (M_total, N) output: row 0 is x row x_row0
  int M;                 // rows of this launch (Thor's L2 chunk; all of M elsewhere)
  int K, N, group;
  int channelwise;       // 1: every k reads scale row 0
  int has_zeros;
  int x_row0;            // first x row of this launch in tmap_x
  int m_tiles, n_tiles, k_stages, tiles, group_m;
  int scale_rows;        // scale (zero-point) rows a stage stages: the scale box's height
};

// ---------------------------------------------------------------- the MMA and its operand layouts (CuTe)

template <bool BF16>
using Elem = std::conditional_t<BF16, cute::bfloat16_t, cute::half_t>;

// The pair's instruction: 256 x BT x 16, both operands K-major from shared memory, fp32 in TMEM.
template <bool BF16, int BT>
using MmaOp = cute::SM100_MMA_F16BF16_2x1SM_SS<Elem<BF16>, Elem<BF16>, float, kPairRows, BT, cute::UMMA::Major::K,
                                               cute::UMMA::Major::K>;
template <bool BF16, int BT>
using TiledMma = decltype(cute::make_tiled_mma(MmaOp<BF16, BT>{}));

// Per-CTA operand shapes of one k64 stage: partition_shape_A/B take the MMA tile (256 x 64, BT x 64)
// and return the CTA's half ((128, 16), 1, 4) and ((BT / 2, 16), 1, 4).
template <bool BF16, int BT>
using CtaShapeA = decltype(cute::partition_shape_A(TiledMma<BF16, BT>{},
                                                   cute::make_shape(cute::Int<kPairRows>{}, cute::Int<kStageK>{})));
template <bool BF16, int BT>
using CtaShapeB = decltype(cute::partition_shape_B(TiledMma<BF16, BT>{},
                                                   cute::make_shape(cute::Int<BT>{}, cute::Int<kStageK>{})));
// (MMA, MMA_M, MMA_K, stages): K-major, 128-byte swizzle (one swizzle row = one k64 stage row).
template <bool BF16, int BT>
using SmemLayoutA = decltype(cute::UMMA::tile_to_mma_shape(
    cute::UMMA::Layout_K_SW128_Atom<Elem<BF16>>{}, cute::append(CtaShapeA<BF16, BT>{}, cute::Int<kAStages>{})));
template <int BITS, bool BF16, int BT>
using SmemLayoutB = decltype(cute::UMMA::tile_to_mma_shape(
    cute::UMMA::Layout_K_SW128_Atom<Elem<BF16>>{},
    cute::append(CtaShapeB<BF16, BT>{}, cute::Int<Layout<BITS, BT>::kXStages>{})));

// ---------------------------------------------------------------- compile-time proofs

namespace detail {

// umma_a_offset (what the Transform stores to) is CuTe's A layout taken in the BYTE domain: the
// layout's element offset, in bytes, through its swizzle functor (which acts on byte addresses of
// a 1024-aligned buffer, cute/pointer_flagged.hpp), for every (row, k) of rows [kRow0, kRow0 +
// kRows) of stage 0, and the first element of every stage. (64 rows per assertion: EDG's constexpr
// step limit. tests/test_prefill_sm100_host.py checks every row of every stage at run time.)
template <bool BF16, int BT, int kRow0, int kRows>
constexpr bool a_layout_is_the_byte_domain_swizzle() {
  constexpr auto L = SmemLayoutA<BF16, BT>{};
  for (int row = kRow0; row < kRow0 + kRows; ++row)
    for (int k = 0; k < kStageK; ++k) {
      const auto crd = cute::make_coord(cute::make_coord(row, k % kMmaK), 0, k / kMmaK, 0);
      const uint32_t bytes = static_cast<uint32_t>(L.layout_a()(2 * static_cast<int>(L.layout_b()(crd))));
      if (bytes != umma_a_offset(row, k)) return false;
    }
  for (int s = 0; s < kAStages; ++s) {
    const auto crd = cute::make_coord(cute::make_coord(0, 0), 0, 0, s);
    if (2 * static_cast<int>(L.layout_b()(crd)) != s * kABytes) return false;
  }
  return true;
}

// The B (activation) stage CuTe's descriptors read is the TMA box: (BT / 2) rows of 128 bytes,
// 128-byte swizzle (16-byte chunk (k / 8) ^ (row % 8)), stages kXBytes apart.
template <int BITS, bool BF16, int BT, int kRow0, int kRows>
constexpr bool b_layout_is_the_tma_box() {
  using L = Layout<BITS, BT>;
  constexpr auto B = SmemLayoutB<BITS, BF16, BT>{};
  static_assert(kRow0 + kRows <= L::kXRows, "rows of the B half");
  for (int row = kRow0; row < kRow0 + kRows; ++row)
    for (int k = 0; k < kStageK; ++k) {
      const auto crd = cute::make_coord(cute::make_coord(row, k % kMmaK), 0, k / kMmaK, 0);
      const uint32_t bytes = static_cast<uint32_t>(B.layout_a()(2 * static_cast<int>(B.layout_b()(crd))));
      const uint32_t tma = 128u * row + 16u * static_cast<uint32_t>((k / 8) ^ (row % 8)) + 2u * (k % 8);
      if (bytes != tma) return false;
    }
  for (int s = 0; s < L::kXStages; ++s) {
    const auto crd = cute::make_coord(cute::make_coord(0, 0), 0, 0, s);
    if (2 * static_cast<int>(B.layout_b()(crd)) != s * L::kXBytes) return false;
  }
  return true;
}

// The Transform's 16 stores per thread and k64 stage cover the stage's A buffer exactly once
// (both warpgroups, all lanes), and each warp's store instruction touches 32 distinct banks.
template <int BITS>
constexpr bool transform_stores_cover_and_are_conflict_free() {
  bool seen[kABytes / 4] = {};
  for (int c = 0; c < kTransformGroups; ++c)
    for (int w = 0; w < 4; ++w)
      for (int kk = 0; kk < 4; ++kk)
        for (int reg = 0; reg < 4; ++reg) {
          bool bank[32] = {};
          for (int lane = 0; lane < 32; ++lane) {
            const Role r = make_role<BITS>(w, lane);
            const uint32_t o = a_store_offset(c, r.n_lo, lane % 4, kk, reg);
            if (o % 4 != 0 || seen[o / 4] || bank[(o / 4) % 32]) return false;
            seen[o / 4] = true;
            bank[(o / 4) % 32] = true;
          }
        }
  for (bool s : seen)
    if (!s) return false;
  return true;
}

#define SF_A_MSG "the Transform's byte-domain store offsets must be CuTe's UMMA A layout (offset ^ ((n % 8) << 3))"
#define SF_B_MSG "the activation stage CuTe describes must be the 2-SM TMA box"
static_assert(a_layout_is_the_byte_domain_swizzle<true, 256, 0, 64>(), SF_A_MSG);
static_assert(a_layout_is_the_byte_domain_swizzle<true, 256, 64, 64>(), SF_A_MSG);
static_assert(a_layout_is_the_byte_domain_swizzle<false, 128, 0, 64>(), SF_A_MSG);
static_assert(b_layout_is_the_tma_box<4, true, 256, 0, 64>(), SF_B_MSG);
static_assert(b_layout_is_the_tma_box<4, true, 256, 64, 64>(), SF_B_MSG);
static_assert(b_layout_is_the_tma_box<4, false, 128, 0, 64>(), SF_B_MSG);
static_assert(b_layout_is_the_tma_box<8, true, 128, 0, 64>(), SF_B_MSG);
#undef SF_A_MSG
#undef SF_B_MSG
static_assert(transform_stores_cover_and_are_conflict_free<4>() && transform_stores_cover_and_are_conflict_free<8>(),
              "Transform stores: every A element once, 32 banks per warp store");

}  // namespace detail

// ---------------------------------------------------------------- small helpers

using ptx::from_f32;  // kernels/common/ptx.cuh
using ptx::to_f32;

// Every pipeline wait of the kernel: a hang of the never-run 2-SM wiring becomes, after
// kWatchdogCycles (about 35 s at 1.9 GHz; no legitimate wait comes near it, even under
// compute-sanitizer), one printed line naming the barrier and a trapped launch instead of a hung
// process. The fast path is one try_wait; the clock is read only when the stage is not ready.
inline constexpr long long kWatchdogCycles = 1LL << 36;

// The cold path, out of line (one printf in the kernel, no local memory in the waits) and never
// returning (nothing to keep live across the call).
[[noreturn]] static __device__ __noinline__ void watchdog_trap(const char* what, int stage, uint32_t phase) {
  printf("swordfish sm100 prefill: block %d (cluster rank %u) thread %d waited %lld cycles on %s stage %d "
         "parity %u: a hang of the 2-SM pipelines (docs/PREFILL.md, What to look at first)\n",
         static_cast<int>(blockIdx.x), ptx100::cluster_rank(), static_cast<int>(threadIdx.x), kWatchdogCycles, what,
         stage, phase);
  __trap();
}

SF_DEVICE void wait(const uint64_t* bar, uint32_t phase, const char* what, int stage) {
  const uint32_t addr = ptx::smem_u32(bar);
  if (ptx100::try_wait(addr, phase)) return;
  const long long t0 = clock64();
  while (!ptx100::try_wait(addr, phase))
    if (clock64() - t0 > kWatchdogCycles) watchdog_trap(what, stage, phase);
}

// One ring of mbarrier stages: index and phase parity.
template <int kStages>
struct Ring {
  int stage = 0;
  uint32_t phase = 0;
  SF_DEVICE void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

// ---------------------------------------------------------------- the kernel

template <int BITS, bool BF16, int BT>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_kernel(const __grid_constant__ Params p, const __grid_constant__ CUtensorMap tmap_x,
                const __grid_constant__ CUtensorMap tmap_w, const __grid_constant__ CUtensorMap tmap_s,
                const __grid_constant__ CUtensorMap tmap_z) {
#if defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM110_ALL)
  using L = Layout<BITS, BT>;
  using cutlass::arch::ClusterBarrier;
  using cutlass::arch::ClusterTransactionBarrier;
  constexpr int kXStages = L::kXStages;
  constexpr uint16_t kPairMask = 0b11;  // both CTAs of the cluster

  extern __shared__ uint8_t smem_raw[];
  // 1024-aligned base: the same offset in both CTAs (same kernel, same static shared memory), which
  // the pair's MMA relies on (its descriptors address the peer's buffers at the leader's offsets).
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + L::kOffBar);
  uint64_t* w_full = bar + L::kBarWFull;
  uint64_t* w_empty = bar + L::kBarWEmpty;
  uint64_t* a_full = bar + L::kBarAFull;    // leader's is used
  uint64_t* a_empty = bar + L::kBarAEmpty;  // both
  uint64_t* x_full = bar + L::kBarXFull;    // leader's is used
  uint64_t* x_empty = bar + L::kBarXEmpty;  // both
  uint64_t* acc_full = bar + L::kBarAccFull;    // both
  uint64_t* acc_empty = bar + L::kBarAccEmpty;  // leader's is used
  uint32_t* tmem_slot = reinterpret_cast<uint32_t*>(smem + L::kOffTmemSlot);

  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const uint32_t rank = ptx100::cluster_rank();
  const bool leader = rank == 0;
  const int cluster = static_cast<int>(ptx100::cluster_id_x());
  const int clusters = static_cast<int>(ptx100::cluster_count_x());

  if (threadIdx.x == 0) {
    for (int s = 0; s < kWStages; ++s) {
      ClusterBarrier::init(&w_full[s], 1);                // producer's arm + the stage's bytes
      ClusterBarrier::init(&w_empty[s], kTransformWarps);  // one arrive per Transform warp
    }
    for (int s = 0; s < kAStages; ++s) {
      ClusterBarrier::init(&a_full[s], kClusterSize * kTransformWarps);  // both CTAs' Transform warps
      ClusterBarrier::init(&a_empty[s], 1);                              // the leader's commit
    }
    for (int s = 0; s < kXStages; ++s) {
      ClusterBarrier::init(&x_full[s], 1);   // the leader producer's arm + both halves' bytes
      ClusterBarrier::init(&x_empty[s], 1);  // the leader's commit
    }
    for (int s = 0; s < kAccStages; ++s) {
      ClusterBarrier::init(&acc_full[s], 1);                               // the leader's commit
      ClusterBarrier::init(&acc_empty[s], kClusterSize * kEpilogueWarps);  // both CTAs' epilogue warps
    }
    cutlass::arch::fence_barrier_init();  // fence.mbarrier_init.release.cluster
  }
  if (warp == kProducerWarp && lane == 0) {
    cute::prefetch_tma_descriptor(reinterpret_cast<const cute::TmaDescriptor*>(&tmap_x));
    cute::prefetch_tma_descriptor(reinterpret_cast<const cute::TmaDescriptor*>(&tmap_w));
    cute::prefetch_tma_descriptor(reinterpret_cast<const cute::TmaDescriptor*>(&tmap_s));
    if (p.has_zeros) cute::prefetch_tma_descriptor(reinterpret_cast<const cute::TmaDescriptor*>(&tmap_z));
  }
  if (warp == kMmaWarp) {
    // The pair's accumulators: the same columns in both CTAs' TMEM (cta_group::2 allocation by
    // the same warp of each CTA); the address lands in tmem_slot of both.
    cute::TMEM::Allocator2Sm tmem;
    tmem.allocate(tmem_columns(BT), tmem_slot);
    tmem.release_allocation_lock();
    ptx100::tcgen05_before_thread_sync();
  }
  // Barrier inits visible to the peer (its TMA bytes and arrives target ours), TMEM allocated.
  cute::cluster_sync();
  ptx100::tcgen05_after_thread_sync();
  const uint32_t tmem_base = *reinterpret_cast<volatile uint32_t*>(tmem_slot);

  // Launched with programmatic stream serialization: nothing in global memory before the previous
  // kernel (the act-order gather, the previous GEMM) has completed.
  ptx::grid_dependency_wait();
  ptx::grid_launch_dependents();

  if (warp == kProducerWarp) {
    // ------------------------------------------------------------ producer
    if (lane == 0) {
      constexpr int kBlocksPerStage = kStageK / format::block_k(BITS);
      const uint64_t hint = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL);
      const uint32_t w_tx = L::w_tx(p.scale_rows, p.has_zeros != 0);
      Ring<kWStages> w;
      Ring<kXStages> x;
      for (int t = cluster; t < p.tiles; t += clusters) {
        const CtaPart part = cta_part(tile_coords(t, p.m_tiles, p.n_tiles, p.group_m), static_cast<int>(rank), BT);
        const int nb = part.n0 / format::kBlockN;  // past N on the last tile of an N % 256 = 128 layer:
                                                   // TMA zero-fills (and counts) the boxes
        for (int kb = 0; kb < p.k_stages; ++kb) {
          wait(&w_empty[w.stage], w.phase ^ 1u, "w_empty", w.stage);
          ClusterTransactionBarrier::arrive_and_expect_tx(&w_full[w.stage], w_tx);
          cute::SM90_TMA_LOAD_3D::copy(&tmap_w, &w_full[w.stage], hint, smem + L::kOffW + w.stage * L::kWBytes, 0,
                                       kb * kBlocksPerStage, nb);
          const int row = scale_row(kb, p.group, p.channelwise != 0);
          cute::SM90_TMA_LOAD_2D::copy(&tmap_s, &w_full[w.stage], hint, smem + L::kOffS + w.stage * L::kSBytes,
                                       part.n0, row);
          if (p.has_zeros)
            cute::SM90_TMA_LOAD_2D::copy(&tmap_z, &w_full[w.stage], hint, smem + L::kOffZ + w.stage * L::kSBytes,
                                         part.n0, row);
          w.advance();

          // The activation half: released by the leader's commit to both CTAs' x_empty; armed on
          // the leader's x_full by the leader alone with both halves' bytes. A half may land before
          // the arm (the count goes negative; the phase cannot complete without the arrive).
          wait(&x_empty[x.stage], x.phase ^ 1u, "x_empty", x.stage);
          if (leader) ClusterTransactionBarrier::arrive_and_expect_tx(&x_full[x.stage], L::kXPairTx);
          cute::SM100_TMA_2SM_LOAD_2D::copy(&tmap_x, &x_full[x.stage], hint, smem + L::kOffX + x.stage * L::kXBytes,
                                            kb * kStageK, p.x_row0 + part.x_row);
          x.advance();
        }
      }
      // Tail: every stage released once more, so no commit from the leader (multicast into this
      // CTA's x_empty) is in flight when the CTA exits; the weight ring likewise.
      for (int i = 0; i < kXStages; ++i, x.advance()) wait(&x_empty[x.stage], x.phase ^ 1u, "x_empty", x.stage);
      for (int i = 0; i < kWStages; ++i, w.advance()) wait(&w_empty[w.stage], w.phase ^ 1u, "w_empty", w.stage);
    }
    __syncwarp();
  } else if (warp >= kFirstTransformWarp && warp < kProducerWarp) {
    // ------------------------------------------------------------ Transform
    const int tw = warp - kFirstTransformWarp;
    const int c = tw / 4;  // n64 block of the CTA's 128 rows
    const Role role = make_role<BITS>(tw % 4, lane);
    const int t = lane % 4;
    uint32_t st[4][4];  // the thread's 16 store offsets in an A stage (loop invariant)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int reg = 0; reg < 4; ++reg) st[kk][reg] = a_store_offset(c, role.n_lo, t, kk, reg);
    const uint32_t s_a = ptx::smem_u32(smem + L::kOffA);
    const uint32_t s_w = ptx::smem_u32(smem + L::kOffW) + static_cast<uint32_t>(c * kSliceBytes<BITS>);
    const uint32_t col = scale_col_bytes(c, role.n_lo);
    const uint32_t s_s = ptx::smem_u32(smem + L::kOffS) + col;
    const uint32_t s_z = ptx::smem_u32(smem + L::kOffZ) + col;
    const uint32_t row1 = scale_row1_bytes(p.group, p.channelwise != 0, L::kSRowBytes);
    const bool has_zeros = p.has_zeros != 0;
    Ring<kWStages> w;
    Ring<kAStages> a_ring;
    for (int tile = cluster; tile < p.tiles; tile += clusters) {
      for (int kb = 0; kb < p.k_stages; ++kb) {
        wait(&w_full[w.stage], w.phase, "w_full", w.stage);
        SliceAddr at;
        at.words = s_w + static_cast<uint32_t>(w.stage * L::kWBytes);
        at.scales = s_s + static_cast<uint32_t>(w.stage * L::kSBytes);
        at.zeros = s_z + static_cast<uint32_t>(w.stage * L::kSBytes);
        at.row1 = row1;
        uint32_t a[4][4];
        if (has_zeros) {
          transform_slice<BITS, BF16, true>(at, role, a);
        } else {
          transform_slice<BITS, BF16, false>(at, role, a);
        }
        // The warp's loads of the stage are done (mbarrier.arrive orders them): back to the producer.
        __syncwarp();
        if (lane == 0) ClusterBarrier::arrive(&w_empty[w.stage]);
        w.advance();

        wait(&a_empty[a_ring.stage], a_ring.phase ^ 1u, "a_empty", a_ring.stage);
        const uint32_t dst = s_a + static_cast<uint32_t>(a_ring.stage * kABytes);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
          for (int reg = 0; reg < 4; ++reg) ptx100::sts_32(dst + st[kk][reg], a[kk][reg]);
        // Generic-proxy stores -> the MMA's async-proxy reads (here or, from the peer, remote).
        cutlass::arch::fence_view_async_shared();
        __syncwarp();
        if (lane == 0) ptx100::mbar_arrive_cluster(ptx::smem_u32(&a_full[a_ring.stage]), 0);
        a_ring.advance();
      }
    }
    // Tail: the leader's last commits into this CTA's a_empty have landed.
    if (tw == 0 && lane == 0)
      for (int i = 0; i < kAStages; ++i, a_ring.advance())
        wait(&a_empty[a_ring.stage], a_ring.phase ^ 1u, "a_empty", a_ring.stage);
    __syncwarp();
  } else if (warp == kMmaWarp) {
    // ------------------------------------------------------------ MMA (the leader issues for the pair)
    if (leader) {
      using Mma = TiledMma<BF16, BT>;
      Mma mma;
      cute::Tensor sA = cute::make_tensor(cute::make_smem_ptr(reinterpret_cast<Elem<BF16>*>(smem + L::kOffA)),
                                          SmemLayoutA<BF16, BT>{});
      cute::Tensor sB = cute::make_tensor(cute::make_smem_ptr(reinterpret_cast<Elem<BF16>*>(smem + L::kOffX)),
                                          SmemLayoutB<BITS, BF16, BT>{});
      cute::Tensor tCrA = Mma::make_fragment_A(sA);  // (MMA, MMA_M, MMA_K, stages) descriptors
      cute::Tensor tCrB = Mma::make_fragment_B(sB);
      cute::Tensor acc = Mma::make_fragment_C(cute::partition_shape_C(
          mma, cute::make_shape(cute::Int<kPairRows>{}, cute::Int<BT>{})));  // (MMA, 1, 1) in TMEM
      Ring<kXStages> x;
      Ring<kAStages> a_ring;
      Ring<kAccStages> acc_ring;
      for (int t = cluster; t < p.tiles; t += clusters) {
        // Both CTAs' epilogues have drained this accumulator stage.
        wait(&acc_empty[acc_ring.stage], acc_ring.phase ^ 1u, "acc_empty", acc_ring.stage);
        __syncwarp();  // the waits leave lanes apart; elect.sync and the commits need the whole warp
        ptx100::tcgen05_after_thread_sync();
        acc.data() = tmem_address(tmem_base, acc_ring.stage, BT, 0, 0);
        mma.accumulate_ = cute::UMMA::ScaleOut::Zero;
        for (int kb = 0; kb < p.k_stages; ++kb) {
          wait(&x_full[x.stage], x.phase, "x_full", x.stage);
          wait(&a_full[a_ring.stage], a_ring.phase, "a_full", a_ring.stage);
          __syncwarp();
          ptx100::tcgen05_after_thread_sync();
#pragma unroll
          for (int k = 0; k < kStageK / kMmaK; ++k) {
            cute::gemm(mma, tCrA(cute::_, cute::_, k, a_ring.stage), tCrB(cute::_, cute::_, k, x.stage), acc);
            mma.accumulate_ = cute::UMMA::ScaleOut::One;
          }
          // When these MMAs complete: both CTAs' activation halves and A halves are free.
          cutlass::arch::umma_arrive_multicast_2x1SM(&x_empty[x.stage], kPairMask);
          cutlass::arch::umma_arrive_multicast_2x1SM(&a_empty[a_ring.stage], kPairMask);
          x.advance();
          a_ring.advance();
        }
        cutlass::arch::umma_arrive_multicast_2x1SM(&acc_full[acc_ring.stage], kPairMask);
        acc_ring.advance();
      }
      // Tail: both CTAs' epilogues have released every accumulator stage (their remote arrives landed).
      for (int i = 0; i < kAccStages; ++i, acc_ring.advance())
        wait(&acc_empty[acc_ring.stage], acc_ring.phase ^ 1u, "acc_empty", acc_ring.stage);
    }
  } else {
    // ------------------------------------------------------------ epilogue (warps 0..3)
    Ring<kAccStages> acc_ring;
    for (int t = cluster; t < p.tiles; t += clusters) {
      const CtaPart part = cta_part(tile_coords(t, p.m_tiles, p.n_tiles, p.group_m), static_cast<int>(rank), BT);
      const int n = part.n0 + 32 * warp + lane;  // TMEM lane 32 warp + lane = weight row = output column
      const bool n_ok = n < p.N;                 // rows past N (ragged last pair tile) are zeros, unstored
      const float b = (p.bias != nullptr && n_ok) ? to_f32<BF16>(p.bias[n]) : 0.f;
      wait(&acc_full[acc_ring.stage], acc_ring.phase, "acc_full", acc_ring.stage);
      __syncwarp();  // tcgen05.ld is .sync.aligned: the whole warp, converged
      ptx100::tcgen05_after_thread_sync();
#pragma unroll 1
      for (int j = 0; j < BT / 32; ++j) {
        uint32_t v[32];
        cute::SM100_TMEM_LOAD_32dp32b32x::copy(
            tmem_address(tmem_base, acc_ring.stage, BT, 32 * warp, 32 * j), v[0], v[1], v[2], v[3], v[4], v[5],
            v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14], v[15], v[16], v[17], v[18], v[19], v[20],
            v[21], v[22], v[23], v[24], v[25], v[26], v[27], v[28], v[29], v[30], v[31]);
        ptx100::tcgen05_wait_ld();
        if (j == BT / 32 - 1) {
          // The stage is in registers: hand it back to the leader's MMA (the next tile but one).
          ptx100::tcgen05_before_thread_sync();
          __syncwarp();
          if (lane == 0) ptx100::mbar_arrive_cluster(ptx::smem_u32(&acc_empty[acc_ring.stage]), 0);
        }
        if (n_ok) {
          const int m_base = part.m0 + 32 * j;
          uint16_t* out = p.y + static_cast<long long>(m_base) * p.N + n;
#pragma unroll
          for (int i = 0; i < 32; ++i)
            if (m_base + i < p.M) out[static_cast<long long>(i) * p.N] = from_f32<BF16>(__uint_as_float(v[i]) + b);
        }
      }
      acc_ring.advance();
    }
  }

  // Everyone (both CTAs) done: no MMA reads the peer's buffers, no TMEM load is pending, no remote
  // arrive is in flight. Then both MMA warps free the pair's TMEM.
  ptx100::tcgen05_before_thread_sync();
  cute::cluster_sync();
  if (warp == kMmaWarp) {
    ptx100::tcgen05_after_thread_sync();
    cute::TMEM::Allocator2Sm().free(tmem_base, tmem_columns(BT));
  }
#else
  // Built for an architecture without tcgen05: the host never launches this
  // (prefill::can_implement requires sm100a / sm110a SASS); trap rather than do nothing.
  (void)p;
  (void)tmap_x;
  (void)tmap_w;
  (void)tmap_s;
  (void)tmap_z;
#if defined(__CUDA_ARCH__)
  __trap();
#endif
#endif
}

// The instantiated kernels of one bit width by (dtype, token tile): prefill_sm100_int4.cu / _int8.cu.
template <int BITS, bool BF16, int BT>
KernelSet make_kernel_set() {
  using L = Layout<BITS, BT>;
  KernelSet k;
  k.gemm = reinterpret_cast<const void*>(&gemm_kernel<BITS, BF16, BT>);
  k.smem_bytes = L::kSmemBytes;
  k.x_stages = L::kXStages;
  return k;
}

}  // namespace sm100
}  // namespace prefill
}  // namespace swordfish
