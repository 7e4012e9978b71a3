// The element-wise kernels of the fused-MoE layer. Host twin: moe_launch.cu.
//
//   act_kernel       a[s, k] = act(g) * u, g = h[s, p(k)], u = h[s, I + p(k)]
//                    for every routed slot s and k < K2 (h: the sum of the
//                    w13 GEMM's fp32 planes in plane order; one plane in
//                    atomic mode), p = the expert's w2 act-order permutation
//                    (or identity; K2 = I), 0 where p(k) is outside [0, I)
//                    (a pad row of the padded layout, K2 >= I),
//                    times the router weight first when weights_on_input;
//                    one rounding to the dtype. Slots in no block are skipped
//                    (the w2 GEMM never reads them).
//   finalize_kernel  y[t] = round(y32[t]) (atomic mode), or the sum over the
//                    token's routed slots j = 0 .. top_k - 1 and the w2
//                    GEMM's planes, in that order (deterministic mode).
// Each thread owns 8 consecutive outputs (one 16-byte store).
#pragma once

#include <cstdint>

#include "kernels/common/ptx.cuh"
#include "kernels/decode/mainloop.cuh"

namespace swordfish {
namespace moe {

struct ActParams {
  const float* h;             // (splits, num_slots, 2I) fp32
  long long plane;            // num_slots * 2I
  int splits;
  const int32_t* slot_expert; // (num_slots) local expert or -1
  const int32_t* perm;        // (E, K2) w2 act-order permutation (-1: pad row), or nullptr
  const void* topk_weights;   // read when weights_on_input
  int weights_f32;
  int weights_on_input;
  uint16_t* a;                // (num_slots, K2), dtype
  int num_slots;
  int I;                      // h's half width (gate | up)
  int K2;                     // a's width: w2's packed K (I without perm; K_pad >= I in the padded layout)
};

struct FinalizeParams {
  const float* y32;           // atomic: (T, H) fp32
  const float* o;             // deterministic: (splits, num_slots, H) fp32
  long long plane;            // num_slots * H
  int splits;
  const int32_t* slot_expert;
  int top_k;
  int deterministic;
  uint16_t* y;                // (T, H), dtype
  int T, H;
};

enum ActKind : int { kSilu = 0, kGelu = 1 };

template <int ACT>
SF_DEVICE float activate(float g) {
  if constexpr (ACT == kSilu) {
    return g / (1.f + __expf(-g));
  } else {
    return 0.5f * g * (1.f + erff(g * 0.70710678118654752f));  // exact (erf) GELU
  }
}

template <bool BF16>
SF_DEVICE uint4 pack8(const float (&v)[8]) {
  return make_uint4(decode::detail::pack<BF16>(v[0], v[1]), decode::detail::pack<BF16>(v[2], v[3]),
                    decode::detail::pack<BF16>(v[4], v[5]), decode::detail::pack<BF16>(v[6], v[7]));
}

// grid: any (grid-stride over num_slots x K2 / 8 items); block: any.
template <bool BF16, int ACT, bool PERM>
__global__ void act_kernel(const __grid_constant__ ActParams p) {
  // Let w2 launch first: its early weight copies need only the sort, complete before this launch.
  ptx::grid_launch_dependents();
  ptx::grid_dependency_wait();
  const int i8 = p.K2 / 8;
  const long long items = static_cast<long long>(p.num_slots) * i8;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const int two_i = 2 * p.I;
  for (long long it = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; it < items; it += stride) {
    const int s = static_cast<int>(it / i8);
    const int c = static_cast<int>(it - static_cast<long long>(s) * i8) * 8;
    const int e = p.slot_expert[s];
    if (e < 0) continue;
    float g[8], u[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) g[j] = u[j] = 0.f;
    for (int sp = 0; sp < p.splits; ++sp) {
      const float* row = p.h + sp * p.plane + static_cast<long long>(s) * two_i;
      if constexpr (PERM) {
        const int32_t* perm = p.perm + static_cast<long long>(e) * p.K2 + c;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int k = perm[j];
          const bool ok = static_cast<unsigned>(k) < static_cast<unsigned>(p.I);
          g[j] += ok ? row[k] : 0.f;
          u[j] += ok ? row[p.I + k] : 0.f;
        }
      } else {
        const float4 g0 = *reinterpret_cast<const float4*>(row + c), g1 = *reinterpret_cast<const float4*>(row + c + 4);
        const float4 u0 = *reinterpret_cast<const float4*>(row + p.I + c);
        const float4 u1 = *reinterpret_cast<const float4*>(row + p.I + c + 4);
        g[0] += g0.x, g[1] += g0.y, g[2] += g0.z, g[3] += g0.w, g[4] += g1.x, g[5] += g1.y, g[6] += g1.z, g[7] += g1.w;
        u[0] += u0.x, u[1] += u0.y, u[2] += u0.z, u[3] += u0.w, u[4] += u1.x, u[5] += u1.y, u[6] += u1.z, u[7] += u1.w;
      }
    }
    float w = 1.f;
    if (p.weights_on_input) {
      w = p.weights_f32 ? static_cast<const float*>(p.topk_weights)[s]
                        : decode::detail::to_f32<BF16>(static_cast<const uint16_t*>(p.topk_weights)[s]);
    }
    float v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = activate<ACT>(w * g[j]) * (w * u[j]);
    *reinterpret_cast<uint4*>(p.a + static_cast<long long>(s) * p.K2 + c) = pack8<BF16>(v);
  }
}

// grid: any (grid-stride over T x H / 8 items); block: any.
template <bool BF16>
__global__ void finalize_kernel(const __grid_constant__ FinalizeParams p) {
  ptx::grid_dependency_wait();
  ptx::grid_launch_dependents();
  const int h8 = p.H / 8;
  const long long items = static_cast<long long>(p.T) * h8;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long it = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; it < items; it += stride) {
    const int t = static_cast<int>(it / h8);
    const int c = static_cast<int>(it - static_cast<long long>(t) * h8) * 8;
    float v[8];
    if (!p.deterministic) {
      const float* row = p.y32 + static_cast<long long>(t) * p.H + c;
      const float4 a = *reinterpret_cast<const float4*>(row), b = *reinterpret_cast<const float4*>(row + 4);
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = 0.f;
      for (int j = 0; j < p.top_k; ++j) {
        const int s = t * p.top_k + j;
        if (p.slot_expert[s] < 0) continue;
        for (int sp = 0; sp < p.splits; ++sp) {
          const float* row = p.o + sp * p.plane + static_cast<long long>(s) * p.H + c;
          const float4 a = *reinterpret_cast<const float4*>(row), b = *reinterpret_cast<const float4*>(row + 4);
          v[0] += a.x, v[1] += a.y, v[2] += a.z, v[3] += a.w, v[4] += b.x, v[5] += b.y, v[6] += b.z, v[7] += b.w;
        }
      }
    }
    *reinterpret_cast<uint4*>(p.y + static_cast<long long>(t) * p.H + c) = pack8<BF16>(v);
  }
}

}  // namespace moe
}  // namespace swordfish
