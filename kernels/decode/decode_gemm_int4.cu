// Instances of the decode mainloop for int4 weights (dtype x MT x zero points, + FOLD at MT = 1),
// and of the swapped-operand kernel (decode_swap.cuh).
// Split from int8 so a parallel build compiles them side by side.
#include "kernels/decode/decode_gemm.cuh"
#include "kernels/decode/decode_swap.cuh"
#include "kernels/decode/decode_kernels.h"

namespace swordfish {
namespace decode {

KernelHandle gemm_handle_int4(bool bf16, int mt, bool zeros, bool fold) {
  return handle_for<4>(bf16, mt, zeros, fold);
}

KernelHandle swap_handle_int4(bool bf16, bool zeros, bool fold, bool share) {
  return share ? swap_handle_share<4, true>(bf16, zeros, fold) : swap_handle_share<4, false>(bf16, zeros, fold);
}

}  // namespace decode
}  // namespace swordfish
