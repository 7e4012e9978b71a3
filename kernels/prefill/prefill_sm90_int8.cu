// int8 instantiations of the sm90 prefill kernels (prefill_sm90.cuh).
#include "kernels/prefill/prefill_sm90.cuh"
#include "kernels/prefill/prefill_sm90_kernels.h"

namespace swordfish {
namespace prefill {
namespace sm90 {
namespace {

template <bool BF16, int BT>
KernelSet make() {
  KernelSet k;
  k.gemm = reinterpret_cast<const void*>(&gemm_kernel<8, BF16, BT>);
  k.reduce = reinterpret_cast<const void*>(&reduce_kernel<8, BF16, BT>);
  k.smem_bytes = Layout<8, BT>::kSmemBytes;
  k.stages = Layout<8, BT>::kStages;
  return k;
}

}  // namespace

KernelSet kernels_int8(bool bf16, int bt) {
  switch (bt) {
    case 64: return bf16 ? make<true, 64>() : make<false, 64>();
    case 128: return bf16 ? make<true, 128>() : make<false, 128>();
    case 256: return bf16 ? make<true, 256>() : make<false, 256>();
    default: return KernelSet{};
  }
}

}  // namespace sm90
}  // namespace prefill
}  // namespace swordfish
