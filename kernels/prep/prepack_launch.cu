// Host twin of prepack.cuh: checks a PrepackProblem and launches the kernel.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/common/format.h"
#include "kernels/prep/prepack.cuh"
#include "kernels/prep/prepack.h"
#include "kernels/prep/prepack_index.h"

namespace swordfish {
namespace prep {

static_assert(prepack_proof(), "the prepack kernel's index math must equal format::locate");

std::string can_implement(const PrepackProblem& p) {
  if (p.bits != 4 && p.bits != 8) return "prepack: bits must be 4 or 8, got " + std::to_string(p.bits);
  const int bk = format::block_k(p.bits);
  if (p.K <= 0 || p.K % bk != 0)
    return "prepack: int" + std::to_string(p.bits) + " needs K to be a positive multiple of " + std::to_string(bk) +
           ", got K = " + std::to_string(p.K);
  if (p.N <= 0 || p.N % format::kBlockN != 0)
    return "prepack: N must be a positive multiple of 64, got N = " + std::to_string(p.N);
  if (p.N / format::kBlockN > 65535)
    return "prepack: N / 64 must be at most 65535 (grid y), got N = " + std::to_string(p.N);
  if (reinterpret_cast<uintptr_t>(p.out) % 16 != 0) return "prepack: the output must be 16-byte aligned";
  if (p.qweight == nullptr || p.out == nullptr) return "prepack: null qweight or output pointer";
  return "";
}

std::string launch(const PrepackProblem& p, void* stream) {
  std::string why = can_implement(p);
  if (!why.empty()) return why;
  const int num_kb = p.K / format::block_k(p.bits);
  const dim3 grid((num_kb + kBlocksPerCta - 1) / kBlocksPerCta, p.N / format::kBlockN);
  const PrepackParams params{p.qweight, p.perm, p.out, p.K, p.N};
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (p.bits == 4) {
    if (p.perm) prepack_kernel<4, true><<<grid, kThreads, 0, s>>>(params);
    else prepack_kernel<4, false><<<grid, kThreads, 0, s>>>(params);
  } else {
    if (p.perm) prepack_kernel<8, true><<<grid, kThreads, 0, s>>>(params);
    else prepack_kernel<8, false><<<grid, kThreads, 0, s>>>(params);
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return std::string("prepack: kernel launch failed: ") + cudaGetErrorString(err);
  return "";
}

}  // namespace prep
}  // namespace swordfish
