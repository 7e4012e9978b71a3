// int4 instantiations of the sm90 prefill kernels (prefill_sm90.cuh).
#include "kernels/prefill/sm90/prefill_sm90.cuh"

namespace swordfish {
namespace prefill {
namespace sm90 {

KernelSet kernels_int4(bool bf16, int cg, int bt) { return kernel_set<4>(bf16, cg, bt); }

}  // namespace sm90
}  // namespace prefill
}  // namespace swordfish
