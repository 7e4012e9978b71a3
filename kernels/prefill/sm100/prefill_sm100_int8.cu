// int8 instantiations of the sm100 prefill kernel (prefill_sm100.cuh): the
// 256 x 128 instruction only (the wide tile's staging does not fit at 8 bits),
// fp16 and bf16. COMPILED, NOT RUN.
#include "kernels/prefill/sm100/prefill_sm100.cuh"

namespace swordfish {
namespace prefill {
namespace sm100 {

KernelSet kernels_int8(bool bf16, int bt) {
  if (bt == 128) return bf16 ? make_kernel_set<8, true, 128>() : make_kernel_set<8, false, 128>();
  return KernelSet{};
}

}  // namespace sm100
}  // namespace prefill
}  // namespace swordfish
