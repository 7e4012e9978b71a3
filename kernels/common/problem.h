// The one description of a weight-only quantized GEMM that every layer below
// the torch ops speaks: the dispatcher, the decode kernels, the dense tier and
// the prefill mainloops. Raw pointers only; no torch, no CUDA runtime types.
//
//   y[M, N] = x[M, K] @ W^T (+ bias)       W[n, k] = (q[k, n] - bias_q) * s + zs
//
// where q is read from the packed tensor (format.h), s = scales[k / group, n],
// zs = zeros[k / group, n] (folded zero point, or 0 when zeros == nullptr).
// With act-order (perm != nullptr) row k of the packed weight is input
// feature perm[k]: x's columns are consumed in the order perm[0], perm[1], ...
// The padded act-order layout (docs/FORMAT.md "Act-order shards") packs
// K >= K_in rows for x's K_in columns: a pad row has perm[k] = -1 (any entry
// outside [0, K_in) reads a zero activation and is never written by the dense
// tier), and every 32-row chunk belongs to one group, read as group 32.
#pragma once

#include <cstddef>
#include <cstdint>

namespace swordfish {

enum class DType : int { kFloat16 = 0, kBFloat16 = 1 };

// Paths a call can take. Values are part of the op ABI (swordfish_backend/ops.py).
enum class Path : int {
  kAuto = 0,     // let the dispatcher choose (the only value production uses)
  kDecode = 1,   // mma.sync decode family (kernels/decode)
  kDense = 2,    // dequantize to scratch + cuBLAS (kernels/dense)
  kPrefill = 3,  // wgmma / tcgen05 prefill mainloop (kernels/prefill)
};

// Path values are 0 .. kPathCount - 1. The path_names op hands path_name() of
// each to Python in this order (swordfish_backend/ops.py reads it).
inline constexpr int kPathCount = 4;

constexpr const char* path_name(Path p) {
  switch (p) {
    case Path::kAuto: return "auto";
    case Path::kDecode: return "decode";
    case Path::kDense: return "dense";
    case Path::kPrefill: return "prefill";
  }
  return "unknown";
}

// Every value below kPathCount has a name and none above it: a new Path needs
// its name here and a larger kPathCount.
constexpr bool paths_named() {
  auto unknown = [](Path p) {
    const char* a = path_name(p);
    const char* b = "unknown";
    while (*a != '\0' && *a == *b) ++a, ++b;
    return *a == *b;
  };
  for (int i = 0; i < kPathCount; ++i)
    if (unknown(static_cast<Path>(i))) return false;
  return unknown(static_cast<Path>(kPathCount));
}
static_assert(paths_named(), "kPathCount must count the named Path values");

struct GemmProblem {
  const void* x = nullptr;          // (M, K_in) row-major, dtype
  const int32_t* packed = nullptr;  // format v1, (N/64, K/block_k, 512) int32
  const void* scales = nullptr;     // (K / group, N) row-major, dtype
  const void* zeros = nullptr;      // (K / group, N) folded zero points, or nullptr
  const int32_t* perm = nullptr;    // (K) act-order permutation, or nullptr
  const void* bias = nullptr;       // (N), dtype, or nullptr
  void* y = nullptr;                // (M, N) row-major, dtype

  int M = 0, K = 0, N = 0;  // K: rows of the packed weight
  int K_in = 0;  // columns (and row stride) of x: K, or fewer under the padded act-order layout; 0 means K
  int bits = 4;           // 4 or 8
  int group = 128;        // rows per scale row of the stored tensor: 32, 64 or 128
  bool channelwise = false;  // scales hold one row replicated K / group times
  DType dtype = DType::kBFloat16;
  bool deterministic = false;  // no atomics in epilogues: bit-identical runs

  void* workspace = nullptr;    // from the caller's allocator, >= workspace_bytes()
  size_t workspace_bytes = 0;

  int device = -1;    // the CUDA device of every pointer above (-1: unset, refused by the runners)
  int sm_count = 0;   // of that device
  int cc_major = 0, cc_minor = 0;  // its compute capability
};

// x's width: K_in, or K when the problem leaves it 0.
constexpr int input_width(const GemmProblem& p) { return p.K_in > 0 ? p.K_in : p.K; }

}  // namespace swordfish
