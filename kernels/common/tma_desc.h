// Host helpers that encode TMA tensor maps (CUtensorMap) for the kernels that
// stage their operands with TMA: the sm90 prefill mainloop, and the sm100 one
// to come, read the same packed blocks, scales and 16-bit activations.
// <cuda.h> supplies the types only; the encoder is the driver's, reached
// through the runtime's entry-point query (nothing links against libcuda).
#pragma once

#include <cuda.h>

#include <string>

#include "kernels/common/problem.h"

namespace swordfish {
namespace tma {

// One tiled tensor map: `rank` dims (innermost first), byte strides of dims
// 1.., the box, the swizzle; no interleave, 256-byte L2 promotion, no OOB
// fill. "" or the error naming `what`.
std::string encode(CUtensorMap* map, CUtensorMapDataType type, int rank, const void* base, const cuuint64_t* dims,
                   const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle, const char* what);

// A (rows, cols) 16-bit row-major activation / output tensor read or written
// in (box_rows, 64) boxes with the 128-byte swizzle (a 64-column box row is
// one 128-byte swizzle row).
std::string tile_map_16(CUtensorMap* map, const void* base, long long rows, long long cols, int box_rows,
                        const char* what);

// p's packed tensor (format.h) as plain bytes: (256 u64 per block, K /
// block_k blocks, N / 64 blocks); one box is box_kblocks consecutive k blocks
// of box_nblocks adjacent n64 blocks (blocks past N are zero-filled).
std::string packed_map(CUtensorMap* map, const GemmProblem& p, int box_kblocks, int box_nblocks);

// Scales / folded zero points of p, (K / group, N) 16-bit: boxes of (rows, cols).
std::string scale_map(CUtensorMap* map, const void* base, const GemmProblem& p, int rows, int cols,
                      const char* what);

}  // namespace tma
}  // namespace swordfish
