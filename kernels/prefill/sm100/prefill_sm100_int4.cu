// int4 instantiations of the sm100 prefill kernel (prefill_sm100.cuh): the
// 256 x 256 and 256 x 128 (K-heavy, small M) instructions, fp16 and bf16.
// COMPILED, NOT RUN.
#include "kernels/prefill/sm100/prefill_sm100.cuh"

namespace swordfish {
namespace prefill {
namespace sm100 {

KernelSet kernels_int4(bool bf16, int bt) {
  if (bt == 256) return bf16 ? make_kernel_set<4, true, 256>() : make_kernel_set<4, false, 256>();
  if (bt == 128) return bf16 ? make_kernel_set<4, true, 128>() : make_kernel_set<4, false, 128>();
  return KernelSet{};
}

}  // namespace sm100
}  // namespace prefill
}  // namespace swordfish
