// Dense-tier dequantization: packed format v1 -> a plain fp16/bf16 weight.
//
// One CTA of 4 warps owns a k64 x n64 tile (one int4 block, two int8 blocks):
//   load     warp w takes the k16 slice w of the tile. int4: sub-tile w of the
//            block, one 16-byte load per lane; int8: the two n32 sub-tiles of
//            the slice, two 16-byte loads per lane. Every warp access is one
//            coalesced 512-byte run, streamed (evict-first).
//   dequant  the decode mainloop's magic-number path (kernels/common/
//            dequant.cuh) turns each word into exact (q - B) pairs; one
//            scale() (or scale_zero() with folded zero points) per pair: each
//            value is one rounding of the exact (q - B) * s + zs.
//   stage    into a shared tile padded 64 -> 72 elements per row (a 36-word
//            row stride, 4 mod 32 banks), one 32-bit store per fragment pair
//            in both layouts (KN: lanes g, g ^ 1 first trade pairs with one
//            shuffle so each lane holds two adjacent columns of one row).
//            Every shared store and load is bank-conflict-free: the address
//            map, its bank arithmetic and the static_asserts that check it
//            lane by lane are in dense_smem.h.
//   write    16-byte stores, eight threads per 128-byte row segment.
//
// Two output layouts (Layout):
//   kNK  W[n][k], (N, K) row-major: nn.Linear's layout, what the dequantize op
//        returns and the dense GEMM reads (cuBLAS "T" operand). Act-order is
//        folded into the write addresses: column perm[k] receives packed row k
//        (2-byte scattered stores: the dequantize op only).
//   kKN  W^T[k][n], (K, N) row-major (cuBLAS "N" operand). Act-order moves
//        whole 128-byte row segments: row perm[k] receives packed row k, so
//        the act-order GEMM keeps 16-byte coalesced writes.
// Under act-order the output has K_out <= K input features ((N, K_out) or
// (K_out, N)): the padded act-order layout's pad rows (perm -1) are skipped.
//
// Requirements (checked by the launcher, dense_dequant_launch.cu):
// K % block_k(bits) == 0 (int8 may end on a half tile, K % 64 == 32),
// N % 64 == 0, N / 64 <= 65535, group % 16 == 0 and K % group == 0 unless
// channelwise (every scale row equal: row 0 is read), 16-byte aligned packed
// and output; perm maps packed rows into [0, K_out), one row each (not
// checked: device data; an entry outside it is skipped, never written).
#pragma once

#include <cstdint>

#include "kernels/common/dequant.cuh"
#include "kernels/common/format.h"
#include "kernels/dense/dense.h"
#include "kernels/dense/dense_smem.h"

namespace swordfish {
namespace dense {

struct DequantParams {
  const int32_t* __restrict__ packed;  // (N/64, K/block_k, 512)
  const void* __restrict__ scales;     // (K/group, N)
  const void* __restrict__ zeros;      // (K/group, N) folded zero points, or nullptr
  const int32_t* __restrict__ perm;    // (K) or nullptr: packed row k is input feature perm[k]
  void* __restrict__ out;              // kNK: (N, K); kKN: (K, N)
  int K, N;
  int group;         // rows per scale row
  bool channelwise;  // every scale row equal: read row 0
  int K_out;         // input features of the output (its kNK row stride): K, or K_in under act-order
  // Stacked experts (the dense MoE path): expert blockIdx.z reads and writes these strides further on.
  long long expert_packed_words, expert_scales, expert_perm, expert_out;
};

// p for expert blockIdx.z of a stacked weight (grid z = 1 and zero strides for one weight).
SF_DEVICE DequantParams expert_slice(const DequantParams& s) {
  DequantParams p = s;
  const long long e = blockIdx.z;
  p.packed += e * s.expert_packed_words;
  p.scales = static_cast<const uint16_t*>(s.scales) + e * s.expert_scales;
  if (s.zeros != nullptr) p.zeros = static_cast<const uint16_t*>(s.zeros) + e * s.expert_scales;
  if (s.perm != nullptr) p.perm += e * s.expert_perm;
  p.out = static_cast<uint16_t*>(s.out) + e * s.expert_out;
  return p;
}

// 16 CTAs of 128 threads fill an SM's 2048 threads (sm80-sm100): registers capped at 32 so that
// every instantiation (the KN exchange costs a few) keeps full occupancy and its loads in flight.
inline constexpr int kMinBlocksPerSm = 16;

// One CTA: the k64 x n64 tile (blockIdx.x = k64 tile, blockIdx.y = n-block).
// kBF16 picks bf16x2 (true) or f16x2 (false) arithmetic; values travel as raw 16-bit patterns.
template <int kBits, bool kBF16, bool kZeros, Layout kLayout, bool kPerm>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm) dequant_kernel(const DequantParams stacked) {
  const DequantParams p = expert_slice(stacked);
  // NK: (BLK_N, BLK_K + pad); KN: (BLK_K, BLK_N + pad); 16-bit values, addressed as 32-bit words (dense_smem.h)
  __shared__ alignas(16) uint32_t tile[kSmemWords];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4;  // this lane's column within each n8 tile (format.h)
  const int nb = blockIdx.y;
  const int k0 = blockIdx.x * kTileK;
  const int valid_k = min(kTileK, p.K - k0);  // 64, or 32 on an int8 tensor's last tile
  const int n0 = nb * kTileN;

  // An int8 tensor may end on a half tile (valid_k = 32): warps 2 and 3 then load slices 0 and 1 again
  // (in bounds) and stage them into rows 32..63, which the write-out skips. No branch around the stage:
  // the KN exchange's shuffles stay in converged code (no divergent fallback path, no spills).
  const int slice = kBits == 8 && warp * 16 >= valid_k ? warp - 2 : warp;
  {  // load, dequantize, stage (the registers live in this block only)
    // ---- load: this lane's words of the k16 slice `slice` (word j covers n8 tiles per format.h)
    uint32_t w[kBits == 4 ? 4 : 8];
    if constexpr (kBits == 4) {
      const int32_t* src = p.packed + format::block_offset_words(4, p.K, nb, blockIdx.x) +
                           slice * (format::kLanes * format::kLaneWords) + lane * format::kLaneWords;
      const int4 v = __ldcs(reinterpret_cast<const int4*>(src));
      w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else {
      const int kb = 2 * blockIdx.x + slice / 2;  // k32 block
      const int32_t* src = p.packed + format::block_offset_words(8, p.K, nb, kb) +
                           (2 * (slice % 2)) * (format::kLanes * format::kLaneWords) + lane * format::kLaneWords;
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // n32 half h = sub-tile 2 * (slice % 2) + h
        const int4 v = __ldcs(reinterpret_cast<const int4*>(src + h * format::kLanes * format::kLaneWords));
        w[4 * h + 0] = v.x, w[4 * h + 1] = v.y, w[4 * h + 2] = v.z, w[4 * h + 3] = v.w;
      }
    }

    // ---- scales (and folded zero points) of this lane's 8 columns 8c + g, each in both halves
    const long long srow = p.channelwise ? 0 : (k0 + slice * 16) / p.group;
    const uint16_t* scales = static_cast<const uint16_t*>(p.scales) + srow * p.N + n0 + g;
    const uint16_t* zeros = kZeros ? static_cast<const uint16_t*>(p.zeros) + srow * p.N + n0 + g : nullptr;
    uint32_t s2[8], z2[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      s2[c] = 0x00010001u * __ldg(scales + 8 * c);
      if constexpr (kZeros) z2[c] = 0x00010001u * __ldg(zeros + 8 * c);
    }

    // ---- dequantize, scale, stage. Column 8c + g: pair 0 = rows (2t, 2t+1), pair 1 = rows (2t+8, 2t+9).
    auto stage = [&](int c, uint32_t pair0, uint32_t pair1) {
      if constexpr (kZeros) {
        pair0 = dequant::scale_zero<kBF16>(pair0, s2[c], z2[c]);
        pair1 = dequant::scale_zero<kBF16>(pair1, s2[c], z2[c]);
      } else {
        pair0 = dequant::scale<kBF16>(pair0, s2[c]);
        pair1 = dequant::scale<kBF16>(pair1, s2[c]);
      }
      if constexpr (kLayout == Layout::kNK) {
        tile[smem::stage_nk(warp, lane, c, 0)] = pair0;
        tile[smem::stage_nk(warp, lane, c, 1)] = pair1;
      } else {
        // Trade pairs with lane g ^ 1 (same rows, adjacent column); keep one row of both columns.
        const uint32_t other0 = __shfl_xor_sync(0xffffffffu, pair0, kExchangeLaneXor);
        const uint32_t other1 = __shfl_xor_sync(0xffffffffu, pair1, kExchangeLaneXor);
        tile[smem::stage_kn(warp, lane, c, 0)] = ptx::prmt(pair0, other0, smem::exchange_selector(lane));
        tile[smem::stage_kn(warp, lane, c, 1)] = ptx::prmt(pair1, other1, smem::exchange_selector(lane));
      }
    };
    if constexpr (kBits == 4) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {  // word j: b0, b1 of n8 tile 2j, then of tile 2j + 1
        uint32_t pr[4];
        dequant::int4_pairs<kBF16>(w[j], pr);
        stage(2 * j, pr[0], pr[1]);
        stage(2 * j + 1, pr[2], pr[3]);
      }
    } else {
#pragma unroll
      for (int c = 0; c < 8; ++c) {  // word c (sub-tile half c / 4, word c % 4): b0, b1 of n8 tile c
        uint32_t pr[2];
        dequant::int8_pairs<kBF16>(w[c], pr);
        stage(c, pr[0], pr[1]);
      }
    }
  }
  __syncthreads();

  // ---- write (the reads of `tile` below use dense_smem.h's maps 3 and 4)
  uint16_t* out = static_cast<uint16_t*>(p.out);
  const int chunk = smem::out_chunk(threadIdx.x);
  if constexpr (kLayout == Layout::kNK && !kPerm) {
    // 64 rows n x 8 chunks: out[n0 + r][k0 + 8 * chunk ...], 128 contiguous bytes per row.
#pragma unroll
    for (int i = 0; i < kSmemRows / kRowsPerPass; ++i) {
      const int r = smem::out_row(threadIdx.x, i);
      if (chunk * 8 < valid_k) {
        const uint4 v = *reinterpret_cast<const uint4*>(&tile[smem::out_word(threadIdx.x, i)]);
        *reinterpret_cast<uint4*>(out + static_cast<long long>(n0 + r) * p.K + k0 + chunk * 8) = v;
      }
    }
  } else if constexpr (kLayout == Layout::kNK) {
    // Act-order, nn.Linear layout: column perm[k0 + k] of every row receives packed row k0 + k.
    const uint16_t* tile16 = reinterpret_cast<const uint16_t*>(tile);
    const int ka = lane, kb = lane + 32;
    // A perm entry outside [0, K_out) (a pad row's -1) is skipped, never written out of bounds.
    const int pa = ka < valid_k ? __ldg(p.perm + k0 + ka) : -1;
    const int pb = kb < valid_k ? __ldg(p.perm + k0 + kb) : -1;
    const bool wa = static_cast<unsigned>(pa) < static_cast<unsigned>(p.K_out);
    const bool wb = static_cast<unsigned>(pb) < static_cast<unsigned>(p.K_out);
#pragma unroll 4
    for (int r = warp; r < kSmemRows; r += kWarps) {
      uint16_t* row = out + static_cast<long long>(n0 + r) * p.K_out;
      if (wa) row[pa] = tile16[smem::scatter_elem(r, lane, 0)];
      if (wb) row[pb] = tile16[smem::scatter_elem(r, lane, 1)];
    }
  } else {
    // KN: 64 rows k x 8 chunks: out[dst(k0 + r)][n0 + 8 * chunk ...]; act-order moves whole rows.
#pragma unroll
    for (int i = 0; i < kSmemRows / kRowsPerPass; ++i) {
      const int r = smem::out_row(threadIdx.x, i);
      if (r < valid_k) {
        const int dst = kPerm ? __ldg(p.perm + k0 + r) : k0 + r;
        if (kPerm && static_cast<unsigned>(dst) >= static_cast<unsigned>(p.K_out)) continue;  // pad row / bad entry
        const uint4 v = *reinterpret_cast<const uint4*>(&tile[smem::out_word(threadIdx.x, i)]);
        *reinterpret_cast<uint4*>(out + static_cast<long long>(dst) * p.N + n0 + chunk * 8) = v;
      }
    }
  }
}

}  // namespace dense
}  // namespace swordfish
