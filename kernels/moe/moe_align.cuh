// moe_align: group the (token, slot) pairs of a top-k routing by local
// expert, in padded blocks of block_m rows. Host twin: moe_launch.cu.
//
// Output (the contract of swordfish::moe_align, docs in kernels/moe/moe.h):
//   sorted_ids  slot s = t * top_k + j of every routed pair, grouped by local
//               expert in ascending expert order, ascending s inside an
//               expert (a stable sort: the same routing always gives the same
//               blocks, which deterministic mode needs); each expert's run
//               padded to a multiple of block_m with the sentinel num_slots;
//               positions from num_post_pad on hold the sentinel too.
//   expert_ids  the expert of each block, -1 from block num_post_pad / block_m on.
//   num_post_pad the padded length of the sorted list.
// A slot whose id is outside [0, map_len) (or [0, E) without a map), or whose
// mapped id is outside [0, E) (expert_map's -1), is left out.
//
// CTA 0 sorts (one CTA, NW warps; no host sync, no global atomics; at most 32
// slots, one warp alone: align_sort_warp):
//   1. warp w counts the slots of its contiguous chunk per expert into
//      hist[w][e] (shared atomics);
//   2. per expert, the counts become each warp's start inside the expert's
//      run (exclusive over warps), and a CTA scan of the padded counts gives
//      each run's offset;
//   3. warp w walks its chunk 32 slots at a time in order: lanes of one expert
//      (match.any) take consecutive positions from the warp's cursor.
// Shared memory: (NW + 2) E + 33 ints (align_smem_bytes). Time is linear in
// T * top_k / NW: one CTA is fine through ~64K slots, and correct beyond.
//
// CTAs 1.. (the fused layer only) do what needs no sort: zero the fp32
// accumulators of the atomic epilogues and, under act-order, gather w13's
// input per slot in its expert's permuted column order.
#pragma once

#include <cstdint>

#include "kernels/common/ptx.cuh"

namespace swordfish {
namespace moe {

struct AlignParams {
  const void* ids;              // (num_slots) int32, or int64 when ids_int64
  int ids_int64;
  const int32_t* expert_map;    // (map_len) or nullptr
  int map_len;                  // ids must lie in [0, map_len) with a map
  int num_experts;              // E
  int num_slots;                // T * top_k
  int block_m;
  int sorted_len;               // entries of sorted_ids
  int blocks_len;               // entries of expert_ids
  int32_t* sorted_ids;
  int32_t* expert_ids;
  int32_t* num_post_pad;
  int32_t* slot_expert;         // (num_slots) local expert or -1, or nullptr
  // CTAs 1..: helper work
  float4* zero;                 // zero[0 .. zero_n) := 0
  long long zero_n;
  const uint16_t* x;            // (T, K): act-order gather source, or nullptr
  const int32_t* perm;          // (E, K) w13 act-order permutation
  uint16_t* xg;                 // (num_slots, K): xg[s, k] = x[s / top_k, perm[e, k]]
  int K;
  int top_k;
};

// Threads of the align CTA by slots to sort: one warp per 256 slots, 4..32 warps.
inline int align_warps(long long slots) {
  const long long w = (slots + 255) / 256;
  return w < 4 ? 4 : w > 32 ? 32 : static_cast<int>(w);
}
inline long long align_smem_bytes(int warps, int experts) {
  return (static_cast<long long>(warps) + 2) * experts * 4 + 33 * 4;
}

SF_DEVICE int local_expert(const AlignParams& p, int s) {
  const long long id = p.ids_int64 ? static_cast<const long long*>(p.ids)[s] : static_cast<const int32_t*>(p.ids)[s];
  const long long bound = p.expert_map != nullptr ? p.map_len : p.num_experts;
  if (id < 0 || id >= bound) return -1;
  const int e = p.expert_map != nullptr ? p.expert_map[id] : static_cast<int>(id);
  return e >= 0 && e < p.num_experts ? e : -1;
}

// Exclusive prefix of v over the CTA (every thread calls); *total: the sum.
// scratch: 33 ints of shared memory.
SF_DEVICE int cta_exclusive_scan(int v, int* scratch, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  int x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) scratch[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int w = lane < nw ? scratch[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += y;
    }
    scratch[lane] = w;
  }
  __syncthreads();
  const int before = warp > 0 ? scratch[warp - 1] : 0;
  *total = scratch[nw - 1];
  __syncthreads();  // scratch is reused by the caller's next scan
  return before + x - v;
}

SF_DEVICE void align_sort(const AlignParams& p, int* smem) {
  const int E = p.num_experts, bm = p.block_m, slots = p.num_slots;
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5, nw = nt >> 5;
  int* const hist = smem;              // (NW, E): counts, then each warp's start in the expert's run
  int* const cnt = hist + nw * E;      // (E) slots per expert
  int* const off = cnt + E;            // (E) the run's first position
  int* const scratch = off + E;        // (33)
  for (int i = tid; i < nw * E; i += nt) hist[i] = 0;
  __syncthreads();

  // 1. counts per warp chunk
  const int chunk = (slots + nw - 1) / nw;
  const int lo = min(slots, warp * chunk), hi = min(slots, lo + chunk);
  for (int s = lo + lane; s < hi; s += 32) {
    const int e = local_expert(p, s);
    if (p.slot_expert != nullptr) p.slot_expert[s] = e;
    if (e >= 0) atomicAdd(&hist[warp * E + e], 1);
  }
  __syncthreads();

  // 2. warp starts inside each run, run lengths, run offsets (padded)
  for (int e = tid; e < E; e += nt) {
    int run = 0;
    for (int w = 0; w < nw; ++w) {
      const int c = hist[w * E + e];
      hist[w * E + e] = run;
      run += c;
    }
    cnt[e] = run;
  }
  __syncthreads();
  const int per = (E + nt - 1) / nt;
  const int e0 = min(E, tid * per), e1 = min(E, e0 + per);
  int mine = 0;
  for (int e = e0; e < e1; ++e) mine += (cnt[e] + bm - 1) / bm * bm;
  int total = 0;
  int at = cta_exclusive_scan(mine, scratch, &total);
  for (int e = e0; e < e1; ++e) {
    off[e] = at;
    at += (cnt[e] + bm - 1) / bm * bm;
  }
  if (tid == 0) *p.num_post_pad = total;
  __syncthreads();

  // expert_ids and the padding of sorted_ids
  for (int e = tid; e < E; e += nt) {
    const int padded = (cnt[e] + bm - 1) / bm * bm;
    for (int b = off[e] / bm; b < (off[e] + padded) / bm; ++b) p.expert_ids[b] = e;
    for (int i = off[e] + cnt[e]; i < off[e] + padded; ++i) p.sorted_ids[i] = slots;
  }
  for (int b = total / bm + tid; b < p.blocks_len; b += nt) p.expert_ids[b] = -1;
  for (int i = total + tid; i < p.sorted_len; i += nt) p.sorted_ids[i] = slots;

  // 3. stable scatter: chunks in warp order, slots in order inside a chunk
  const unsigned below = (1u << lane) - 1u;
  for (int base = lo; base < hi; base += 32) {
    const int s = base + lane;
    const int e = s < hi ? local_expert(p, s) : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    if (e >= 0) p.sorted_ids[off[e] + hist[warp * E + e] + __popc(peers & below)] = s;
    __syncwarp();
    if (e >= 0 && lane == __ffs(peers) - 1) hist[warp * E + e] += __popc(peers);
    __syncwarp();
  }
}

// At most 32 slots (batch 1 through a few tokens): warp 0 of CTA 0 sorts alone,
// slot s on lane s, with no shared memory and no CTA barrier; the same output
// as align_sort (experts ascending, slots ascending inside an expert). A run's
// offset is the padded counts of the present experts below it, summed over
// the 32 lanes (one shuffle round per lane).
SF_DEVICE void align_sort_warp(const AlignParams& p) {
  const int lane = threadIdx.x & 31, bm = p.block_m, slots = p.num_slots;
  const int e = lane < slots ? local_expert(p, lane) : -1;
  if (p.slot_expert != nullptr && lane < slots) p.slot_expert[lane] = e;
  const unsigned peers = __match_any_sync(0xffffffffu, e);
  const int cnt = __popc(peers);
  const int padded = (cnt + bm - 1) / bm * bm;
  const int leader = e >= 0 && lane == __ffs(peers) - 1;  // one lane per present expert
  int off = 0, total = 0;
  for (int j = 0; j < 32; ++j) {
    const int ej = __shfl_sync(0xffffffffu, e, j);
    const int pj = __shfl_sync(0xffffffffu, padded, j);
    if (__shfl_sync(0xffffffffu, leader, j)) {
      total += pj;
      if (ej < e) off += pj;
    }
  }
  if (e >= 0) p.sorted_ids[off + __popc(peers & ((1u << lane) - 1u))] = lane;
  if (leader) {
    for (int i = off + cnt; i < off + padded; ++i) p.sorted_ids[i] = slots;
    for (int b = off / bm; b < (off + padded) / bm; ++b) p.expert_ids[b] = e;
  }
  if (lane == 0) *p.num_post_pad = total;
  for (int b = total / bm + lane; b < p.blocks_len; b += 32) p.expert_ids[b] = -1;
  for (int i = total + lane; i < p.sorted_len; i += 32) p.sorted_ids[i] = slots;
}

// CTAs 1..gridDim.x - 1: zero the accumulators, gather act-order rows.
SF_DEVICE void align_help(const AlignParams& p) {
  const long long nthreads = static_cast<long long>(gridDim.x - 1) * blockDim.x;
  const long long first = static_cast<long long>(blockIdx.x - 1) * blockDim.x + threadIdx.x;
  for (long long i = first; i < p.zero_n; i += nthreads) p.zero[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  if (p.perm == nullptr) return;
  const int k8 = p.K / 8;
  const long long items = static_cast<long long>(p.num_slots) * k8;
  for (long long i = first; i < items; i += nthreads) {
    const int s = static_cast<int>(i / k8), c = static_cast<int>(i - static_cast<long long>(s) * k8) * 8;
    const int e = local_expert(p, s);
    if (e < 0) continue;  // never read: the slot is in no block
    const uint16_t* src = p.x + static_cast<long long>(s / p.top_k) * p.K;
    const int32_t* perm = p.perm + static_cast<long long>(e) * p.K + c;
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int k0 = perm[2 * j], k1 = perm[2 * j + 1];
      const uint32_t v0 = static_cast<unsigned>(k0) < static_cast<unsigned>(p.K) ? src[k0] : 0u;
      const uint32_t v1 = static_cast<unsigned>(k1) < static_cast<unsigned>(p.K) ? src[k1] : 0u;
      w[j] = v0 | (v1 << 16);
    }
    *reinterpret_cast<uint4*>(p.xg + static_cast<long long>(s) * p.K + c) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// grid: 1 + helper CTAs; block: 32 * align_warps(num_slots); dynamic smem: align_smem_bytes.
__global__ void align_kernel(const __grid_constant__ AlignParams p) {
  extern __shared__ int align_smem[];
  ptx::grid_dependency_wait();  // topk_ids, x: written by the kernels before
  ptx::grid_launch_dependents();
  if (blockIdx.x == 0) {
    if (p.num_slots > 32) {
      align_sort(p, align_smem);
    } else if (threadIdx.x < 32) {
      align_sort_warp(p);
    }
  } else {
    align_help(p);
  }
}

}  // namespace moe
}  // namespace swordfish
