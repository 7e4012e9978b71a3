// Instances of the decode mainloop for int8 weights (dtype x MT x zero points, + FOLD at MT = 1),
// and of the swapped-operand kernel (decode_swap.cuh).
#include "kernels/decode/decode_gemm.cuh"
#include "kernels/decode/decode_swap.cuh"
#include "kernels/decode/decode_kernels.h"

namespace swordfish {
namespace decode {

KernelHandle gemm_handle_int8(bool bf16, int mt, bool zeros, bool fold) {
  return handle_for<8>(bf16, mt, zeros, fold);
}

KernelHandle swap_handle_int8(bool bf16, bool zeros, bool fold) { return swap_handle_share<8, false>(bf16, zeros, fold); }

}  // namespace decode
}  // namespace swordfish
