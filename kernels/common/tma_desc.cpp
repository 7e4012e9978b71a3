// TMA tensor-map encoding (tma_desc.h).
#include "kernels/common/tma_desc.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/common/format.h"

namespace swordfish {
namespace tma {
namespace {

// cuTensorMapEncodeTiled through the runtime's driver entry point (no link
// against libcuda). Resolved once per process: a function address, not a knob.
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encode_tiled() {
  static EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      f = nullptr;
    }
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

}  // namespace

std::string encode(CUtensorMap* map, CUtensorMapDataType type, int rank, const void* base, const cuuint64_t* dims,
                   const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle, const char* what) {
  EncodeTiled fn = encode_tiled();
  if (fn == nullptr) return "cannot resolve cuTensorMapEncodeTiled from the CUDA driver";
  const cuuint32_t elem[3] = {1, 1, 1};
  const CUresult r = fn(map, type, static_cast<cuuint32_t>(rank), const_cast<void*>(base), dims, strides, box, elem,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return std::string("cuTensorMapEncodeTiled failed for ") + what + " (CUresult " +
           std::to_string(static_cast<int>(r)) + ")";
  return "";
}

std::string tile_map_16(CUtensorMap* map, const void* base, long long rows, long long cols, int box_rows,
                        const char* what) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, base, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B, what);
}

std::string packed_map(CUtensorMap* map, const GemmProblem& p, int box_kblocks, int box_nblocks) {
  const long long kblocks = p.K / format::block_k(p.bits);
  const cuuint64_t dims[3] = {format::kBlockBytes / 8, static_cast<cuuint64_t>(kblocks),
                              static_cast<cuuint64_t>(p.N / format::kBlockN)};
  const cuuint64_t strides[2] = {format::kBlockBytes, static_cast<cuuint64_t>(kblocks) * format::kBlockBytes};
  const cuuint32_t box[3] = {format::kBlockBytes / 8, static_cast<cuuint32_t>(box_kblocks),
                              static_cast<cuuint32_t>(box_nblocks)};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT64, 3, p.packed, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE,
                "packed");
}

std::string scale_map(CUtensorMap* map, const void* base, const GemmProblem& p, int rows, int cols,
                      const char* what) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(p.N), static_cast<cuuint64_t>(p.K / p.group)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(p.N) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(cols), static_cast<cuuint32_t>(rows)};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, base, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE, what);
}

}  // namespace tma
}  // namespace swordfish
