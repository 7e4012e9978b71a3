// Host twin of gather.cuh: picks the gather kernel for the shape and launches it.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/common/func_attr.h"
#include "kernels/prep/gather.cuh"
#include "kernels/prep/gather.h"

namespace swordfish {
namespace prep {
namespace {

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// Launch fn(args) on `stream`, without programmatic serialization: the kernel
// behind the gather (the prefill GEMM) starts once the gather has finished.
std::string launch_kernel(const void* fn, dim3 grid, int smem, void** args, cudaStream_t stream, const char* what) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kGatherThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = stream;
  cudaError_t e = cudaLaunchKernelExC(&cfg, fn, args);
  if (e == cudaSuccess) e = cudaGetLastError();
  else cudaGetLastError();
  if (e != cudaSuccess) return std::string("gather: ") + what + " launch failed: " + cudaGetErrorString(e);
  return "";
}

}  // namespace

std::string gather_columns(const uint16_t* x, const int32_t* perm, uint16_t* xp, int M, int K, int K_in,
                           int sm_count, int device, void* stream) {
  if (M <= 0) return "";
  if (K_in < 1 || K_in > K)
    return "gather: K_in must lie in [1, K = " + std::to_string(K) + "], got " + std::to_string(K_in);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  GatherParams gp{x, perm, xp, M, K, K_in};
  void* args[] = {&gp};
  // gather_kernel runs a CTA per row: fewer rows than SMs leave SMs idle, where the element
  // kernel spreads each row over up to 16 CTAs (at M = 64 it measured 0.95-1.02x gather_kernel's
  // time, 2026-12-03-h).
  const int smem = K_in * 2;  // one row of x
  if (M < sm_count || K % 8 != 0 || K_in % 8 != 0 || !aligned16(x) || !aligned16(perm) || !aligned16(xp) ||
      smem > kGatherMaxSmem) {
    // Columns over up to 16 CTAs, rows over ~4 CTAs per SM.
    const int gx = static_cast<int>(std::min<long long>((K + kGatherThreads - 1) / kGatherThreads, 16));
    const int gy = static_cast<int>(std::min<long long>(M, std::max(1, 4 * sm_count / gx)));
    return launch_kernel(reinterpret_cast<const void*>(&gather_elements_kernel), dim3(gx, std::max(gy, 1)), 0, args,
                         s, "gather elements kernel");
  }
  const void* fn = reinterpret_cast<const void*>(&gather_kernel);
  const std::string why = ensure_dynamic_smem(fn, smem, device);
  if (!why.empty()) return "gather: gather kernel: " + why;
  const int grid = static_cast<int>(std::min<long long>(M, static_cast<long long>(kGatherCtasPerSm) * sm_count));
  return launch_kernel(fn, dim3(std::max(grid, 1)), smem, args, s, "gather kernel");
}

}  // namespace prep
}  // namespace swordfish
