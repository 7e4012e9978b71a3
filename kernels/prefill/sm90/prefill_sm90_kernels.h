// The instantiated sm90 prefill kernels, by (bits, dtype, token tile): one
// translation unit per bit width (prefill_sm90_int4.cu, prefill_sm90_int8.cu)
// so the two build in parallel. Host-only declarations.
#pragma once

namespace swordfish {
namespace prefill {
namespace sm90 {

struct KernelSet {
  const void* gemm = nullptr;    // gemm_kernel<BITS, BF16, BT, KS, CG>
  const void* reduce = nullptr;  // reduce_kernel<BITS, BF16, BT, CG>
  int smem_bytes = 0;            // dynamic shared memory of gemm
  int stages = 0;
  int slices = 1;                // k64 slices per pipeline stage (KS): 2 = k128 stages
  int epi_rows = 0;              // token rows per epilogue store (the y tensor map's box)
};

// cg: consumer warpgroups (2: 128-column tiles, 3: 192); bt: 64, 128, 192 or 256
// (cg 3: 64 or 128). Returns an empty set for anything else (has_tile).
KernelSet kernels_int4(bool bf16, int cg, int bt);
KernelSet kernels_int8(bool bf16, int cg, int bt);

}  // namespace sm90
}  // namespace prefill
}  // namespace swordfish
