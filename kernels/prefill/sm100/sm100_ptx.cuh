// PTX wrappers the tcgen05 prefill needs beyond kernels/common/ptx.cuh and
// what CuTe / CUTLASS expose: one instruction each, with why it is hand-
// written. Device-only; sm_100a / sm_110a (every caller sits behind the
// kernel's architecture guard). Candidates for common/ptx.cuh once the sm100
// folder settles (kept here so this change touches no shared file).
//
// COMPILED, NOT RUN.
#pragma once

#include <cstdint>

#include "kernels/common/ptx.cuh"

namespace swordfish {
namespace prefill {
namespace sm100 {
namespace ptx100 {

// Order this thread's earlier tcgen05 operations (tcgen05.ld, the MMAs it
// issued) before a following thread synchronization (mbarrier arrive, bar.sync,
// barrier.cluster). The PTX memory model asks for it around every hand-off of
// TMEM between threads; CUTLASS 4.2's kernels emit none, we do.
SF_DEVICE void tcgen05_before_thread_sync() { asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory"); }

// The other side of the hand-off: after the wait, before this thread's next
// tcgen05 operation (the MMA after an accumulator stage is released, the
// tcgen05.ld after it is full, reading the allocated TMEM address).
SF_DEVICE void tcgen05_after_thread_sync() { asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory"); }

// Wait for this thread's tcgen05.ld to land in registers (before using them or
// releasing the accumulator stage they came from).
SF_DEVICE void tcgen05_wait_ld() { asm volatile("tcgen05.wait::ld.sync.aligned;\n" ::: "memory"); }

// mbarrier arrive on the barrier at the same shared-memory offset in CTA `cta`
// of the cluster (mapa): the peer's Transform and epilogue signal the leader's
// A-full and accumulator-empty barriers with it. Default semantics (.release
// at .cta scope), as CUTLASS's 2-SM pipelines arrive on the leader
// (ClusterBarrier::arrive(cta_id), umma_arrive_2x1SM_sm0): the data behind
// these arrives is read by the async proxy (fence.proxy.async before the A
// arrive) or is TMEM (tcgen05.fence before the accumulator arrive). The
// .release.cluster form compiles to MEMBAR.ALL.GPU before every arrive
// (sm_100a SASS, checked): too costly per warp and stage.
SF_DEVICE void mbar_arrive_cluster(uint32_t local_bar, uint32_t cta) {
  asm volatile(
      "{\n\t.reg .b32 remote;\n\t"
      "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}\n" ::"r"(local_bar),
      "r"(cta)
      : "memory");
}

// 4-byte shared store: one Transform register (two consecutive k of one weight
// row) into the UMMA operand buffer, lane-local (transform.cuh, prefill_sm100_plan.h
// a_store_offset; conflict free, prefill_sm100.cuh proves it).
SF_DEVICE void sts_32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

// mbarrier.try_wait.parity with the default acquire semantics (the hardware
// suspends the thread for a while if the phase is not complete): true once the
// phase with parity `phase` has completed. The kernel's wait loop around it
// adds the watchdog (prefill_sm100.cuh wait()).
SF_DEVICE bool try_wait(uint32_t bar, uint32_t phase) {
  uint32_t done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}\n"
      : "=r"(done)
      : "r"(bar), "r"(phase)
      : "memory");
  return done != 0;
}

// The CTA's rank in its cluster (%cluster_ctarank): 0 is the pair's MMA leader.
SF_DEVICE uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// The cluster's index in the grid and the grid's cluster count (x only: the
// kernel launches clusters of (2, 1, 1) on a 1-D grid).
SF_DEVICE uint32_t cluster_id_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
  return r;
}
SF_DEVICE uint32_t cluster_count_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(r));
  return r;
}

}  // namespace ptx100
}  // namespace sm100
}  // namespace prefill
}  // namespace swordfish
