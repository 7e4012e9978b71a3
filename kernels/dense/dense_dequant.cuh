// Dense-tier dequantization: packed format v1 -> a plain fp16/bf16 weight.
//
// One CTA of 4 warps owns a k64 x n64 tile (one int4 block, two int8 blocks):
//   load     warp w takes the k16 slice w of the tile. int4: sub-tile w of the
//            block, one 16-byte load per lane; int8: the two n32 sub-tiles of
//            the slice, two 16-byte loads per lane. Every warp access is one
//            coalesced 512-byte run, streamed (evict-first).
//   dequant  the same magic-number path as the decode mainloop turns each
//            word into exact (q - B) pairs (dequant_pairs below); one hmul2
//            (or hfma2 with folded zero points) per pair scales them. Each
//            value is one rounding of the exact (q - B) * s + zs.
//   stage    into a shared tile padded 64 -> 72 elements per row: with a
//            144-byte row stride the lanes of one store hit 32 (NK) or 16
//            distinct (KN, two lanes per word) banks; unpadded, every lane of
//            a column store lands on one bank.
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
//
// Requirements (checked by the launcher, dense_dequant_launch.cu):
// K % block_k(bits) == 0 (int8 may end on a half tile, K % 64 == 32),
// N % 64 == 0, N / 64 <= 65535, group % 16 == 0 and K % group == 0 unless
// channelwise (every scale row equal: row 0 is read), 16-byte aligned packed
// and output, perm a permutation of [0, K) (not checked: device data).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/format.h"
#include "kernels/dense/dense.h"

namespace swordfish {
namespace dense {

inline constexpr int kTileK = 64;               // k rows per CTA tile
inline constexpr int kTileN = format::kBlockN;  // n columns per CTA tile
inline constexpr int kWarps = kTileK / format::kFragmentK;  // one k16 slice per warp
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kSmemPad = 8;                     // elements: 64 -> 72 per row
inline constexpr int kSmemStride = 64 + kSmemPad;      // elements per staged row
inline constexpr int kChunksPerRow = 64 * 2 / 16;      // 16-byte chunks per 64-element row
static_assert(kWarps == 4 && kThreads == 128, "a CTA is four warps");
static_assert(kSmemStride * 2 % 16 == 0, "staged rows stay 16-byte aligned");
// Column store (NK): lane (g, t) writes word (8c+g)*stride/2 + t; bank 4g+t+const is distinct
// for all 32 lanes exactly when stride/2 == 4 (mod 32).
static_assert((kSmemStride / 2) % 32 == 4, "padding makes the NK column stores conflict-free");

struct DequantParams {
  const int32_t* __restrict__ packed;  // (N/64, K/block_k, 512)
  const void* __restrict__ scales;     // (K/group, N)
  const void* __restrict__ zeros;      // (K/group, N) folded zero points, or nullptr
  const int32_t* __restrict__ perm;    // (K) or nullptr: packed row k is input feature perm[k]
  void* __restrict__ out;              // kNK: (N, K); kKN: (K, N)
  int K, N;
  int group;         // rows per scale row
  bool channelwise;  // every scale row equal: read row 0
};

template <typename T>
struct Vec2;
template <>
struct Vec2<__half> {
  using type = __half2;
};
template <>
struct Vec2<__nv_bfloat16> {
  using type = __nv_bfloat162;
};

// ---------------------------------------------------------------------------
// dequant_pairs: exact (q - B) pairs in the fragment order of format.h.
// TODO(one dequant path): kernels/common/dequant.cuh (the decode engineer's
// LOP3 helpers) replaces this block when it lands; the contract is the same:
// pair p holds (row 2t, row 2t+1) or (row 2t+8, row 2t+9) of one column.

// lop3.b32 with LUT 0xEA = (a & b) | c: mask a field and OR the magic exponent
// in, one instruction (the compiler does not fuse AND+OR into LOP3 reliably).
__device__ __forceinline__ uint32_t lop3_and_or(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

template <typename T>
__device__ __forceinline__ typename Vec2<T>::type as_vec2(uint32_t u) {
  return *reinterpret_cast<const typename Vec2<T>::type*>(&u);
}

// int4: pair i (0..3) of word q as (q - 8) in both halves. Nibbles i and i+4
// are pair i (kNibbleOfFragment4); OR-ing them under the exponent of 1024
// (fp16 0x6400) or 128 (bf16 0x4300) gives 1024 + q / 128 + q exactly, and
// subtracting 1032 / 136 removes the magic and the zero point 8 exactly.
template <typename T>
__device__ __forceinline__ typename Vec2<T>::type int4_pair(uint32_t q, int i) {
  if constexpr (std::is_same<T, __half>::value) {
    const uint32_t h = lop3_and_or(q >> (4 * i), 0x000f000fu, 0x64006400u);
    return __hsub2(as_vec2<T>(h), as_vec2<T>(0x64086408u));  // 1032 = 1024 + 8
  } else {
    const uint32_t h = lop3_and_or(q >> (4 * i), 0x000f000fu, 0x43004300u);
    return __hsub2(as_vec2<T>(h), as_vec2<T>(0x43084308u));  // 136 = 128 + 8
  }
}

// int8: pair hi (0: bytes {0, 2} = b0, 1: bytes {1, 3} = b1; kByteOfFragment8)
// as (q - 128). fp16: a byte permute under 0x64 gives 1024 + q exactly.
// bf16 holds only 8 significant bits, too few for 128 + q: go through fp32
// 2^23 + q, subtract 2^23 + 128 exactly, convert the pair (exact: |q-128| <= 128).
template <typename T>
__device__ __forceinline__ typename Vec2<T>::type int8_pair(uint32_t q, int hi) {
  if constexpr (std::is_same<T, __half>::value) {
    const uint32_t h = __byte_perm(q, 0x64646464u, hi ? 0x4341u : 0x4240u);
    return __hsub2(as_vec2<T>(h), as_vec2<T>(0x64806480u));  // 1152 = 1024 + 128
  } else {
    const float lo = __uint_as_float(__byte_perm(q, 0x4b000000u, hi ? 0x7541u : 0x7540u)) - 8388736.0f;
    const float up = __uint_as_float(__byte_perm(q, 0x4b000000u, hi ? 0x7543u : 0x7542u)) - 8388736.0f;
    return __floats2bfloat162_rn(lo, up);
  }
}
// ---------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ uint32_t as_u32(typename Vec2<T>::type v) {
  return *reinterpret_cast<const uint32_t*>(&v);
}

// One CTA: the k64 x n64 tile (blockIdx.x = k64 tile, blockIdx.y = n-block).
template <int kBits, typename T, bool kZeros, Layout kLayout, bool kPerm>
__global__ void __launch_bounds__(kThreads) dequant_kernel(const DequantParams p) {
  using T2 = typename Vec2<T>::type;
  // NK: (BLK_N, BLK_K + pad); KN: (BLK_K, BLK_N + pad)
  __shared__ alignas(16) T smem[64][kSmemStride];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int t = lane % 4, g = lane / 4;
  const int nb = blockIdx.y;
  const int k0 = blockIdx.x * kTileK;
  const int valid_k = min(kTileK, p.K - k0);  // 64, or 32 on an int8 tensor's last tile
  const int n0 = nb * kTileN;

  if (warp * 16 < valid_k) {
    // ---- load: this lane's words of the k16 slice `warp` (word j covers n8 tiles per format.h)
    uint32_t w[kBits == 4 ? 4 : 8];
    if constexpr (kBits == 4) {
      const int32_t* src = p.packed + format::block_offset_words(4, p.K, nb, blockIdx.x) +
                           warp * (format::kLanes * format::kLaneWords) + lane * format::kLaneWords;
      const int4 v = __ldcs(reinterpret_cast<const int4*>(src));
      w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else {
      const int kb = 2 * blockIdx.x + warp / 2;  // k32 block
      const int32_t* src = p.packed + format::block_offset_words(8, p.K, nb, kb) +
                           (2 * (warp % 2)) * (format::kLanes * format::kLaneWords) + lane * format::kLaneWords;
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // n32 half h = sub-tile 2 * (warp % 2) + h
        const int4 v = __ldcs(reinterpret_cast<const int4*>(src + h * format::kLanes * format::kLaneWords));
        w[4 * h + 0] = v.x, w[4 * h + 1] = v.y, w[4 * h + 2] = v.z, w[4 * h + 3] = v.w;
      }
    }

    // ---- scales (and folded zero points) of this lane's 8 columns 8c + g
    const int srow = p.channelwise ? 0 : (k0 + warp * 16) / p.group;
    const T* scales = static_cast<const T*>(p.scales) + static_cast<long long>(srow) * p.N + n0 + g;
    const T* zeros = kZeros ? static_cast<const T*>(p.zeros) + static_cast<long long>(srow) * p.N + n0 + g : nullptr;
    T2 s2[8], z2[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const T s = __ldg(scales + 8 * c);
      s2[c] = T2(s, s);
      if constexpr (kZeros) {
        const T z = __ldg(zeros + 8 * c);
        z2[c] = T2(z, z);
      }
    }

    // ---- dequantize + stage. Column c: pair 0 = rows (2t, 2t+1), pair 1 = rows (2t+8, 2t+9).
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      T2 pr[2];
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        if constexpr (kBits == 4) {
          pr[b] = int4_pair<T>(w[c / 2], 2 * (c % 2) + b);  // word c/2 holds n8 tiles c, c^1
        } else {
          pr[b] = int8_pair<T>(w[c], b);  // word c (h = c/4, j = c%4) holds n8 tile c
        }
        pr[b] = kZeros ? __hfma2(pr[b], s2[c], z2[c]) : __hmul2(pr[b], s2[c]);
      }
      const int n = 8 * c + g;
      const int k = warp * 16 + 2 * t;
      if constexpr (kLayout == Layout::kNK) {
        *reinterpret_cast<uint32_t*>(&smem[n][k]) = as_u32<T>(pr[0]);
        *reinterpret_cast<uint32_t*>(&smem[n][k + 8]) = as_u32<T>(pr[1]);
      } else {
        smem[k][n] = pr[0].x;
        smem[k + 1][n] = pr[0].y;
        smem[k + 8][n] = pr[1].x;
        smem[k + 9][n] = pr[1].y;
      }
    }
  }
  __syncthreads();

  // ---- write
  T* out = static_cast<T*>(p.out);
  const int chunk = threadIdx.x % kChunksPerRow;
  if constexpr (kLayout == Layout::kNK && !kPerm) {
    // 64 rows n x 8 chunks: out[n0 + r][k0 + 8 * chunk ...], 128 contiguous bytes per row.
#pragma unroll
    for (int i = 0; i < 64 / (kThreads / kChunksPerRow); ++i) {
      const int r = threadIdx.x / kChunksPerRow + i * (kThreads / kChunksPerRow);
      if (chunk * 8 < valid_k) {
        const uint4 v = *reinterpret_cast<const uint4*>(&smem[r][chunk * 8]);
        *reinterpret_cast<uint4*>(out + static_cast<long long>(n0 + r) * p.K + k0 + chunk * 8) = v;
      }
    }
  } else if constexpr (kLayout == Layout::kNK) {
    // Act-order, nn.Linear layout: column perm[k0 + k] of every row receives packed row k0 + k.
    const int ka = lane, kb = lane + 32;
    // A perm entry outside [0, K) is skipped, never written out of bounds.
    const int pa = ka < valid_k ? __ldg(p.perm + k0 + ka) : -1;
    const int pb = kb < valid_k ? __ldg(p.perm + k0 + kb) : -1;
    const bool wa = static_cast<unsigned>(pa) < static_cast<unsigned>(p.K);
    const bool wb = static_cast<unsigned>(pb) < static_cast<unsigned>(p.K);
#pragma unroll 4
    for (int r = warp; r < 64; r += kWarps) {
      T* row = out + static_cast<long long>(n0 + r) * p.K;
      if (wa) row[pa] = smem[r][ka];
      if (wb) row[pb] = smem[r][kb];
    }
  } else {
    // KN: 64 rows k x 8 chunks: out[dst(k0 + r)][n0 + 8 * chunk ...]; act-order moves whole rows.
#pragma unroll
    for (int i = 0; i < 64 / (kThreads / kChunksPerRow); ++i) {
      const int r = threadIdx.x / kChunksPerRow + i * (kThreads / kChunksPerRow);
      if (r < valid_k) {
        const int dst = kPerm ? __ldg(p.perm + k0 + r) : k0 + r;
        if (kPerm && static_cast<unsigned>(dst) >= static_cast<unsigned>(p.K)) continue;  // bad perm entry: skip
        const uint4 v = *reinterpret_cast<const uint4*>(&smem[r][chunk * 8]);
        *reinterpret_cast<uint4*>(out + static_cast<long long>(dst) * p.N + n0 + chunk * 8) = v;
      }
    }
  }
}

}  // namespace dense
}  // namespace swordfish
