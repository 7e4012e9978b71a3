// The unit the prefill Transform and its pipelines work in: a k64 slice of
// one n64 block of the packed tensor. Plain C++ (no CUDA), so the host-side
// layout and plan checks compile on the CPU.
#pragma once

#include "kernels/common/format.h"

namespace swordfish {
namespace prefill {

// Bytes of packed weight per (n64 block, k64 slice): one int4 block, or two
// consecutive int8 blocks (k32 each), which format v1 stores back to back.
template <int BITS>
inline constexpr int kSliceBytes = BITS == 4 ? format::kBlockBytes : 2 * format::kBlockBytes;
inline constexpr int kSliceK = 64;  // k rows per slice (a pipeline stage holds KS slices)

}  // namespace prefill
}  // namespace swordfish
