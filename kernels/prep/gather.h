// Host API of the act-order gather (gather.cuh): xp[m, k] = x[m, perm[k]] for
// (M, K) 16-bit row-major activations, so that a GEMM can consume them in
// packed-row order. Used by the prefill path; decode fuses the same element
// gather into its prep kernel (decode_prep.cuh). Plain C++ (no CUDA headers).
#pragma once

#include <cstdint>
#include <string>

namespace swordfish {
namespace prep {

// Enqueue the gather on `stream` (a cudaStream_t): gather_kernel (a CTA per
// row of x, staged in shared memory, 16-byte runs out) where M >= sm_count,
// K % 8 == 0, K_in % 8 == 0, the pointers are 16-byte aligned and a row fits
// (kGatherMaxSmem); else gather_elements_kernel (one thread per element). x is
// (M, K_in), xp (M, K) with K_in <= K (the padded act-order layout). A perm
// entry outside [0, K_in) gathers 0 either way. `device` is x's CUDA device
// (current); `sm_count` is that device's. "" or the error.
std::string gather_columns(const uint16_t* x, const int32_t* perm, uint16_t* xp, int M, int K, int K_in,
                           int sm_count, int device, void* stream);

}  // namespace prep
}  // namespace swordfish
