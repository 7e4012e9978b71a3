// The instantiated sm100 prefill kernels, by (bits, dtype, token tile): one
// translation unit per bit width (prefill_sm100_int4.cu, prefill_sm100_int8.cu)
// so the two build in parallel. Host-only declarations.
//
// COMPILED, NOT RUN.
#pragma once

namespace swordfish {
namespace prefill {
namespace sm100 {

struct KernelSet {
  const void* gemm = nullptr;  // gemm_kernel<BITS, BF16, BT>
  int smem_bytes = 0;          // dynamic shared memory of gemm
  int x_stages = 0;            // activation pipeline depth (Layout::kXStages)
};

// bt: 256 or 128 for int4, 128 for int8 (has_tile). An empty set for anything else.
KernelSet kernels_int4(bool bf16, int bt);
KernelSet kernels_int8(bool bf16, int bt);

}  // namespace sm100
}  // namespace prefill
}  // namespace swordfish
