// Host twin of dense_dequant.cuh: checks a problem and launches the dequant
// kernel instantiation it needs (bits x dtype x zeros x layout x act-order:
// 32 kernels, each a few hundred bytes of SASS).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/common/format.h"
#include "kernels/dense/dense.h"
#include "kernels/dense/dense_dequant.cuh"

namespace swordfish {
namespace dense {
namespace {

std::string str(long long v) { return std::to_string(v); }

template <int kBits, bool kBF16, bool kZeros>
void launch_layout(const DequantParams& params, Layout layout, bool perm, dim3 grid, cudaStream_t s) {
  if (layout == Layout::kNK) {
    if (perm) dequant_kernel<kBits, kBF16, kZeros, Layout::kNK, true><<<grid, kThreads, 0, s>>>(params);
    else dequant_kernel<kBits, kBF16, kZeros, Layout::kNK, false><<<grid, kThreads, 0, s>>>(params);
  } else {
    if (perm) dequant_kernel<kBits, kBF16, kZeros, Layout::kKN, true><<<grid, kThreads, 0, s>>>(params);
    else dequant_kernel<kBits, kBF16, kZeros, Layout::kKN, false><<<grid, kThreads, 0, s>>>(params);
  }
}

template <int kBits, bool kBF16>
void launch_zeros(const DequantParams& params, Layout layout, bool perm, dim3 grid, cudaStream_t s) {
  if (params.zeros) launch_layout<kBits, kBF16, true>(params, layout, perm, grid, s);
  else launch_layout<kBits, kBF16, false>(params, layout, perm, grid, s);
}

}  // namespace

std::string can_implement_dequant(const GemmProblem& p) {
  if (p.bits != 4 && p.bits != 8) return "bits must be 4 or 8, got " + str(p.bits);
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16)
    return "dtype must be float16 (0) or bfloat16 (1), got " + str(static_cast<int>(p.dtype));
  const int bk = format::block_k(p.bits);
  if (p.K <= 0 || p.K % bk != 0)
    return "int" + str(p.bits) + " weights need K to be a positive multiple of " + str(bk) + ", got K = " + str(p.K);
  if (p.N <= 0 || p.N % format::kBlockN != 0) return "N must be a positive multiple of 64, got N = " + str(p.N);
  if (p.N / format::kBlockN > 65535) return "the dense tier needs N / 64 <= 65535 (grid y), got N = " + str(p.N);
  if (p.K_in < 0 || p.K_in > p.K)
    return "the input width K_in must lie in [1, K = " + str(p.K) + "] (0: K), got K_in = " + str(p.K_in);
  if (p.perm == nullptr && input_width(p) != p.K)
    return "K_in = " + str(p.K_in) + " differs from the packed K = " + str(p.K) + " without act-order (perm)";
  if (!p.channelwise) {
    if (p.group != 32 && p.group != 64 && p.group != 128)
      return "group must be 32, 64 or 128, got group = " + str(p.group);
    if (p.K % p.group != 0) return "group = " + str(p.group) + " must divide K = " + str(p.K);
  } else if (p.group <= 0 || p.K % p.group != 0) {
    return "channelwise scales are stored as K / group replicated rows; group must divide K = " + str(p.K) +
           ", got group = " + str(p.group);
  }
  return "";
}

std::string dequantize_experts(const GemmProblem& p, int experts, void* out, Layout layout, void* stream) {
  std::string why = can_implement_dequant(p);
  if (!why.empty()) return why;
  if (experts < 1 || experts > 65535) return "experts must be in [1, 65535] (grid z), got " + str(experts);
  if (p.packed == nullptr || p.scales == nullptr || out == nullptr) return "null packed, scales or output pointer";
  if (reinterpret_cast<uintptr_t>(p.packed) % 16 != 0) return "the packed tensor must be 16-byte aligned";
  if (reinterpret_cast<uintptr_t>(out) % 16 != 0) return "the dequantized output must be 16-byte aligned";
  if (layout != Layout::kNK && layout != Layout::kKN) return "unknown layout " + str(static_cast<int>(layout));

  const long long K = p.K, N = p.N, K_out = input_width(p);
  const DequantParams params{p.packed, p.scales, p.zeros, p.perm, out, p.K, p.N, p.group, p.channelwise,
                             static_cast<int>(K_out),
                             /*expert_packed_words=*/K * N / (32 / p.bits), /*expert_scales=*/K / p.group * N,
                             /*expert_perm=*/K, /*expert_out=*/K_out * N};
  const dim3 grid((p.K + kTileK - 1) / kTileK, p.N / kTileN, experts);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const bool perm = p.perm != nullptr;
  if (p.bits == 4) {
    if (p.dtype == DType::kFloat16) launch_zeros<4, false>(params, layout, perm, grid, s);
    else launch_zeros<4, true>(params, layout, perm, grid, s);
  } else {
    if (p.dtype == DType::kFloat16) launch_zeros<8, false>(params, layout, perm, grid, s);
    else launch_zeros<8, true>(params, layout, perm, grid, s);
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return std::string("dense dequant kernel launch failed: ") + cudaGetErrorString(err);
  return "";
}

std::string dequantize(const GemmProblem& p, void* out, Layout layout, void* stream) {
  return dequantize_experts(p, 1, out, layout, stream);
}

}  // namespace dense
}  // namespace swordfish
