// Instances of the decode mainloop for int4 weights (16: dtype x MT x zeros).
// Split from int8 so a parallel build compiles them side by side.
#include "kernels/decode/decode_gemm.cuh"
#include "kernels/decode/decode_kernels.h"

namespace swordfish {
namespace decode {

KernelHandle gemm_handle_int4(bool bf16, int mt, bool zeros) { return handle_for<4>(bf16, mt, zeros); }

}  // namespace decode
}  // namespace swordfish
