// Instances of the fused-MoE expert GEMM for int4 weights (dtype x MT 1..2 x zero points, FOLD at MT = 1;
// and the swapped-operand ones for blocks of 8: dtype x zero points x FOLD).
// Split from int8 so a parallel build compiles them side by side.
#include "kernels/moe/moe_gemm.cuh"
#include "kernels/moe/moe_swap.cuh"
#include "kernels/moe/moe_kernels.h"

namespace swordfish {
namespace moe {

KernelHandle gemm_handle_int4(bool bf16, int mt, bool zeros, bool fold) { return handle_for<4>(bf16, mt, zeros, fold); }
KernelHandle swap_handle_int4(bool bf16, bool zeros, bool fold, bool early) {
  return swap_handle_for<4>(bf16, zeros, fold, early);
}

}  // namespace moe
}  // namespace swordfish
