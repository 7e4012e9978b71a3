// Instances of the decode mainloop for int8 weights (16: dtype x MT x zeros).
#include "kernels/decode/decode_gemm.cuh"
#include "kernels/decode/decode_kernels.h"

namespace swordfish {
namespace decode {

KernelHandle gemm_handle_int8(bool bf16, int mt, bool zeros) { return handle_for<8>(bf16, mt, zeros); }

}  // namespace decode
}  // namespace swordfish
