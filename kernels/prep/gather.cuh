// The act-order gather, xp[m, k] = x[m, perm[k]]: its kernels. Host twin:
// gather_launch.cu. x has K_in columns, xp K (the padded act-order layout's
// K_pad >= K_in); a perm entry outside [0, K_in) (a pad row's -1) gathers 0.
#pragma once

#include <cstdint>

#include "kernels/common/ptx.cuh"

namespace swordfish {
namespace prep {

struct GatherParams {
  const uint16_t* x;     // (M, K_in)
  const int32_t* perm;   // (K)
  uint16_t* xp;          // (M, K)
  int M, K;
  int K_in;              // x's columns and row stride, <= K
};

inline constexpr int kGatherThreads = 256;
// Launch shape (gather_launch.cu): CTAs per SM in gather_kernel's grid (rows beyond it loop), and
// the largest row (K * 2 bytes) it stages in shared memory; longer rows go through
// gather_elements_kernel.
inline constexpr int kGatherCtasPerSm = 4;
inline constexpr int kGatherMaxSmem = 96 * 1024;

// gather_elements_kernel: the gather for few rows (and for rows gather_kernel
// cannot take), one thread per element: coalesced perm and xp accesses, one
// gathered 2-byte load each. decode's prep_kernel (decode_prep.cuh) runs the
// same loop fused with its output init. grid: (x, y) any; blockIdx.y strides
// rows, the x dimension strides columns. Like prep_kernel it lets the kernel
// behind it launch at once and waits for the one before it (no-ops unless
// launched with programmatic serialization).
__global__ void __launch_bounds__(kGatherThreads) gather_elements_kernel(const __grid_constant__ GatherParams p) {
  ptx::grid_launch_dependents();
  ptx::grid_dependency_wait();
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  const int stride = gridDim.x * blockDim.x;
  for (int m = blockIdx.y; m < p.M; m += gridDim.y) {
    const uint16_t* xrow = p.x + static_cast<long long>(m) * p.K_in;
    uint16_t* xprow = p.xp + static_cast<long long>(m) * p.K;
    for (int k = tid; k < p.K; k += stride) {
      const int src = __ldg(p.perm + k);  // outside [0, K_in) (a pad row, or a bad entry): a zero, no stray read
      xprow[k] = static_cast<unsigned>(src) < static_cast<unsigned>(p.K_in) ? xrow[src] : 0;
    }
  }
}

// gather_kernel: the gather for M in the hundreds or thousands (the prefill
// path meets act-order there), where one gathered 2-byte load and store per
// element falls far short of the copy bandwidth. A CTA stages one whole row of
// x in shared memory (coalesced 16-byte loads), then each thread builds
// 16-byte runs of eight output columns from it through the permutation (two
// 16-byte perm loads, which stay in L1 across the CTA's rows). A perm entry
// outside [0, K_in) yields 0, never an out-of-bounds read. Needs K % 8 == 0,
// K_in % 8 == 0 and 16-byte aligned x, perm and xp (the launcher checks, else
// uses gather_elements_kernel). grid: any (rows blockIdx.x, += gridDim.x);
// dynamic smem: K_in * 2 bytes.
__global__ void __launch_bounds__(kGatherThreads) gather_kernel(const __grid_constant__ GatherParams p) {
  extern __shared__ __align__(16) uint16_t row[];  // (K_in) one row of x
  const int runs = p.K / 8;
  const int4* perm = reinterpret_cast<const int4*>(p.perm);
  for (int m = blockIdx.x; m < p.M; m += gridDim.x) {
    const uint4* src = reinterpret_cast<const uint4*>(p.x + static_cast<long long>(m) * p.K_in);
    for (int c = threadIdx.x; c < p.K_in / 8; c += kGatherThreads) reinterpret_cast<uint4*>(row)[c] = __ldg(src + c);
    __syncthreads();
    uint4* dst = reinterpret_cast<uint4*>(p.xp + static_cast<long long>(m) * p.K);
    for (int c = threadIdx.x; c < runs; c += kGatherThreads) {
      const int4 lo = __ldg(perm + 2 * c), hi = __ldg(perm + 2 * c + 1);
      const int k[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      alignas(16) uint16_t v[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = static_cast<unsigned>(k[e]) < static_cast<unsigned>(p.K_in) ? row[k[e]] : 0;
      dst[c] = *reinterpret_cast<const uint4*>(v);
    }
    __syncthreads();  // the row is read by every thread before the next one overwrites it
  }
}

}  // namespace prep
}  // namespace swordfish
