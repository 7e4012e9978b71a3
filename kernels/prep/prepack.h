// Host API of the prepack kernel (prepack.cuh): GPTQ K-packed int32 words ->
// packed format v1. Plain C++ (no CUDA headers): the torch layer includes it.
#pragma once

#include <cstdint>
#include <string>

namespace swordfish {
namespace prep {

struct PrepackProblem {
  const int32_t* qweight = nullptr;  // (K * bits / 32, N) K-packed (GPTQ), row-major, unsigned codes
  const int32_t* perm = nullptr;     // (K) or nullptr: packed row k takes source row perm[k]
  int32_t* out = nullptr;            // (N / 64, K / block_k(bits), 512), 16-byte aligned
  int K = 0, N = 0;
  int bits = 4;
};

// "" when the kernel can pack p, else the reason naming the offending value.
// Reads shapes and alignment only.
std::string can_implement(const PrepackProblem& p);

// Launch on `stream` (a cudaStream_t). No host synchronisation, no
// allocation. Returns "" or an error message (can_implement's reason or the
// launch error).
std::string launch(const PrepackProblem& p, void* stream);

}  // namespace prep
}  // namespace swordfish
