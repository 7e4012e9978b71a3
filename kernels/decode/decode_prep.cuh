// The decode family's support kernels. Host twin: decode_launch.cu.
//
// prep_kernel: ONE launch that (a) under act-order writes the column-permuted
//   activations xp[m, k] = x[m, perm[k]] into the workspace (one thread per
//   element, coalesced perm and xp accesses; 0 for a perm entry outside
//   [0, K_in), the padded layout's pad rows included:
//   prep::gather_elements_kernel's loop, fused here with the output
//   init to save a launch), and (b) initialises the output
//   for the atomic epilogue: y[m, :] = bias, or 0 (16-byte stores). It runs
//   on the compute engine, so a captured graph never switches to the copy
//   engine for a memset.
// reduce_kernel: deterministic split-K (kModePartials): y = round(sum of the
//   segment's fp32 pieces, in CTA order, + bias). Which pieces a segment has
//   follows from the GEMM's balanced split (decode_config.h first_cta).
#pragma once

#include <cstdint>

#include "kernels/common/ptx.cuh"
#include "kernels/decode/decode_config.h"

namespace swordfish {
namespace decode {

struct PrepParams {
  const uint16_t* x;     // (M, K_in)
  const int32_t* perm;   // (K) or nullptr: no gather
  uint16_t* xp;          // (M, K) workspace, written when perm != nullptr
  uint16_t* y;           // (M, N) or nullptr: no output init
  const uint16_t* bias;  // (N) or nullptr: init to zero
  int M, K, N;
  int K_in;              // x's columns and row stride (K, or fewer under the padded act-order layout)
};

inline constexpr int kPrepThreads = 256;

struct ReduceParams {
  const float* partials;  // (pieces, M, N) fp32, written by the GEMM in kModePartials
  const uint16_t* bias;   // (N) or nullptr
  uint16_t* y;            // (M, N)
  long long units;        // the GEMM's flat units and grid: which CTAs hold which pieces
  int grid;
  int M, N;
  int kblocks;            // units per segment
  int mgroups;            // m-groups of mg_rows rows (segment = quad * mgroups + m-group)
  int mg_rows;            // 16 * MT
  int uniform_pieces;     // > 0: every segment has this many pieces (grid = segments x pieces); 0: count them
};

// grid: (x, y) any; blockIdx.y strides rows, the x dimension strides columns.
__global__ void __launch_bounds__(kPrepThreads) prep_kernel(const __grid_constant__ PrepParams p) {
  // Launched with programmatic stream serialization (sm_90+): the GEMM behind
  // us may launch now and stage its first weights while we run (it waits for
  // our completion before it reads x or y); we wait for the kernel before us
  // (it may have written x, or still read the memory y now occupies).
  ptx::grid_launch_dependents();
  ptx::grid_dependency_wait();
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  const int stride = gridDim.x * blockDim.x;
  for (int m = blockIdx.y; m < p.M; m += gridDim.y) {
    if (p.perm != nullptr) {
      const uint16_t* xrow = p.x + static_cast<long long>(m) * p.K_in;
      uint16_t* xprow = p.xp + static_cast<long long>(m) * p.K;
      for (int k = tid; k < p.K; k += stride) {
        const int src = __ldg(p.perm + k);  // outside [0, K_in) (a pad row, or a bad entry): a zero, no stray read
        xprow[k] = static_cast<unsigned>(src) < static_cast<unsigned>(p.K_in) ? xrow[src] : 0;
      }
    }
    if (p.y != nullptr) {
      uint4* yrow = reinterpret_cast<uint4*>(p.y + static_cast<long long>(m) * p.N);
      const uint4* b = reinterpret_cast<const uint4*>(p.bias);
      for (int v = tid; v < p.N / 8; v += stride) yrow[v] = b != nullptr ? __ldg(b + v) : make_uint4(0, 0, 0, 0);
    }
  }
}

// grid: (x, y) any; block: kPrepThreads. One thread per output pair. The pieces
// and the bias are read through the non-coherent path (__ldg): read-only here,
// and a struct's pointers are not __restrict__, so the compiler would not infer
// it (8B qkv int4 M = 16: 11.7 us with plain loads, 11.1 with __ldg, 2026-12-03-f).
template <bool BF16>
__global__ void __launch_bounds__(kPrepThreads) reduce_kernel(const ReduceParams p) {
  ptx::grid_dependency_wait();  // launched behind the GEMM with programmatic serialization: its pieces
  ptx::grid_launch_dependents();
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  const int stride = gridDim.x * blockDim.x;
  const long long plane = static_cast<long long>(p.M) * p.N;
  for (int m = blockIdx.y; m < p.M; m += gridDim.y) {
    const int mg = m / p.mg_rows;
    for (int c = tid; c < p.N / 2; c += stride) {
      int pieces = p.uniform_pieces;
      if (pieces == 0) {
        const long long seg = static_cast<long long>(2 * c / (kWarps * format::kBlockN)) * p.mgroups + mg;
        const long long u0 = seg * p.kblocks;
        pieces = static_cast<int>(first_cta(u0 + p.kblocks - 1, p.units, p.grid) - first_cta(u0, p.units, p.grid) + 1);
      }
      const long long off = static_cast<long long>(m) * p.N + 2 * c;
      float s0 = 0.f, s1 = 0.f;
      for (int piece = 0; piece < pieces; ++piece) {  // fixed order: bit-identical every run
        const float2 v = __ldg(reinterpret_cast<const float2*>(p.partials + piece * plane + off));
        s0 += v.x;
        s1 += v.y;
      }
      if (p.bias != nullptr) {
        if constexpr (BF16) {
          s0 += __uint_as_float(static_cast<uint32_t>(__ldg(p.bias + 2 * c)) << 16);
          s1 += __uint_as_float(static_cast<uint32_t>(__ldg(p.bias + 2 * c + 1)) << 16);
        } else {
          s0 += ptx::cvt_f32_f16(__ldg(p.bias + 2 * c));
          s1 += ptx::cvt_f32_f16(__ldg(p.bias + 2 * c + 1));
        }
      }
      *reinterpret_cast<uint32_t*>(p.y + off) = BF16 ? ptx::cvt_pack_bf16x2(s0, s1) : ptx::cvt_pack_f16x2(s0, s1);
    }
  }
}

}  // namespace decode
}  // namespace swordfish
