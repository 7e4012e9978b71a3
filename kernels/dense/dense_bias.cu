// Bias for the dense tier when cuBLASLt's BIAS epilogue cannot take it: a
// bias vector that is not 16-byte aligned (a view into a larger tensor).
// y[m, n] += bias[n], in pairs; one extra rounding compared with the
// epilogue (which adds in fp32 before rounding y once).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/dense/dense.h"

namespace swordfish {
namespace dense {
namespace {

constexpr int kBiasThreads = 256;

// Grid-stride over the (M, N / 2) pairs of y; bias pairs are read unaligned-safe as two halves.
template <typename T, typename T2>
__global__ void __launch_bounds__(kBiasThreads) add_bias_kernel(T2* __restrict__ y, const T* __restrict__ bias,
                                                                long long pairs, int half_n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < pairs;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % half_n);
    const T2 b(bias[2 * c], bias[2 * c + 1]);
    y[i] = __hadd2(y[i], b);
  }
}

}  // namespace

std::string add_bias(const GemmProblem& p, void* stream) {
  if (p.bias == nullptr || p.M == 0) return "";
  const long long pairs = static_cast<long long>(p.M) * (p.N / 2);
  int sms = p.sm_count > 0 ? p.sm_count : 1;
  const long long want = (pairs + kBiasThreads - 1) / kBiasThreads;
  const int blocks = static_cast<int>(want < 8LL * sms ? want : 8LL * sms);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (p.dtype == DType::kFloat16) {
    add_bias_kernel<__half, __half2><<<blocks, kBiasThreads, 0, s>>>(
        static_cast<__half2*>(p.y), static_cast<const __half*>(p.bias), pairs, p.N / 2);
  } else {
    add_bias_kernel<__nv_bfloat16, __nv_bfloat162><<<blocks, kBiasThreads, 0, s>>>(
        static_cast<__nv_bfloat162*>(p.y), static_cast<const __nv_bfloat16*>(p.bias), pairs, p.N / 2);
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return std::string("dense bias kernel launch failed: ") + cudaGetErrorString(err);
  return "";
}

}  // namespace dense
}  // namespace swordfish
