// The decode family's two support kernels. Host twin: decode_launch.cu.
//
// prep_kernel: ONE launch that (a) under act-order writes the column-permuted
//   activations xp[m, k] = x[m, perm[k]] into the workspace (one thread per
//   element, coalesced perm and xp accesses), and (b) initialises the output
//   for the atomic epilogue: y[m, :] = bias, or 0 (16-byte stores). It runs
//   on the compute engine, so a captured graph never switches to the copy
//   engine for a memset.
// reduce_kernel: deterministic split-K: y = round(sum over parts, in part
//   order, of the fp32 partials + bias).
#pragma once

#include <cstdint>

#include "kernels/common/ptx.cuh"

namespace swordfish {
namespace decode {

struct PrepParams {
  const uint16_t* x;     // (M, K)
  const int32_t* perm;   // (K) or nullptr: no gather
  uint16_t* xp;          // (M, K) workspace, written when perm != nullptr
  uint16_t* y;           // (M, N) or nullptr: no output init
  const uint16_t* bias;  // (N) or nullptr: init to zero
  int M, K, N;
};

inline constexpr int kPrepThreads = 256;

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
      const uint16_t* xrow = p.x + static_cast<long long>(m) * p.K;
      uint16_t* xprow = p.xp + static_cast<long long>(m) * p.K;
      for (int k = tid; k < p.K; k += stride) xprow[k] = xrow[__ldg(p.perm + k)];
    }
    if (p.y != nullptr) {
      uint4* yrow = reinterpret_cast<uint4*>(p.y + static_cast<long long>(m) * p.N);
      const uint4* b = reinterpret_cast<const uint4*>(p.bias);
      for (int v = tid; v < p.N / 8; v += stride) yrow[v] = b != nullptr ? __ldg(b + v) : make_uint4(0, 0, 0, 0);
    }
  }
}

// grid: (x, y) any; block: kPrepThreads. One thread per output pair.
template <bool BF16>
__global__ void __launch_bounds__(kPrepThreads)
    reduce_kernel(const float* __restrict__ partials, int parts, const uint16_t* __restrict__ bias,
                  uint16_t* __restrict__ y, int M, int N) {
  ptx::grid_dependency_wait();  // launched behind the GEMM with programmatic serialization: its partials
  ptx::grid_launch_dependents();
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  const int stride = gridDim.x * blockDim.x;
  const long long plane = static_cast<long long>(M) * N;
  for (int m = blockIdx.y; m < M; m += gridDim.y) {
    for (int c = tid; c < N / 2; c += stride) {
      const long long off = static_cast<long long>(m) * N + 2 * c;
      float s0 = 0.f, s1 = 0.f;
      for (int part = 0; part < parts; ++part) {  // fixed order: bit-identical every run
        const float2 v = *reinterpret_cast<const float2*>(partials + part * plane + off);
        s0 += v.x;
        s1 += v.y;
      }
      if (bias != nullptr) {
        if constexpr (BF16) {
          s0 += __uint_as_float(static_cast<uint32_t>(bias[2 * c]) << 16);
          s1 += __uint_as_float(static_cast<uint32_t>(bias[2 * c + 1]) << 16);
        } else {
          s0 += ptx::cvt_f32_f16(bias[2 * c]);
          s1 += ptx::cvt_f32_f16(bias[2 * c + 1]);
        }
      }
      *reinterpret_cast<uint32_t*>(y + off) = BF16 ? ptx::cvt_pack_bf16x2(s0, s1) : ptx::cvt_pack_f16x2(s0, s1);
    }
  }
}

}  // namespace decode
}  // namespace swordfish
