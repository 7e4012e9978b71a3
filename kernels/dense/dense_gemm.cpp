// The dense tier's GEMM: dequantize into scratch, then cuBLASLt.
//
// Column-major view (cuBLAS's): y (M, N) row-major is D = y^T, an N x M
// matrix with ld N, and x (M, K) row-major is B = x^T, K x M with ld K. The
// scratch weight is operand A:
//   kNK  W (N, K) row-major = K x N column-major, ld K, op T  (torch F.linear's "TN")
//   kKN  W^T (K, N) row-major = N x K column-major, ld N, op N ("NN", act-order)
// so D = op(A) @ B + bias, bias broadcast along M (the BIAS epilogue adds a
// vector of D's row count, N). Compute type fp32, alpha = 1, beta = 0.
//
// Handles: one cuBLASLt handle per device, created on first use. Algorithm:
// cublasLtMatmulAlgoGetHeuristic's first answer, cached per (device, shape,
// dtype, layout, bias, deterministic, pointer alignments); descriptors are
// built per call (host-only, cheap), so concurrent calls share no mutable
// state. Workspace: cuBLASLt gets kCublasWorkspaceBytes out of p.workspace.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/common/problem.h"
#include "kernels/dense/dense.h"

namespace swordfish {
namespace dense {
namespace {

std::string str(long long v) { return std::to_string(v); }

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// The dequantized weight: K_in x N (the padded act-order layout's pad rows are not written).
size_t scratch_bytes(const GemmProblem& p) {
  return align_up(static_cast<size_t>(input_width(p)) * static_cast<size_t>(p.N) * 2, kWorkspaceAlign);
}

// Largest power of two (<= 256) dividing the address: what cuBLASLt may assume.
uint32_t alignment_of(const void* ptr) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(ptr);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

std::string lt_error(const char* what, cublasStatus_t s) {
  return std::string("cuBLASLt ") + what + " failed: " + cublasLtGetStatusString(s) + " (status " +
         str(static_cast<int>(s)) + ")";
}

// One cuBLASLt handle per device, created lazily under a mutex.
std::string handle_for(int device, cublasLtHandle_t* out) {
  static std::mutex mu;
  static std::vector<cublasLtHandle_t> handles;
  std::lock_guard<std::mutex> lock(mu);
  if (handles.empty()) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= 0) {
      cudaGetLastError();
      return std::string("cannot count CUDA devices: ") + cudaGetErrorString(e);
    }
    handles.assign(static_cast<size_t>(count), nullptr);
  }
  if (device < 0 || static_cast<size_t>(device) >= handles.size())
    return "device " + str(device) + " is not one of the " + str(static_cast<long long>(handles.size())) +
           " CUDA devices";
  if (handles[device] == nullptr) {
    cublasLtHandle_t h = nullptr;
    const cublasStatus_t s = cublasLtCreate(&h);
    if (s != CUBLAS_STATUS_SUCCESS) return lt_error("cublasLtCreate", s);
    handles[device] = h;  // lives until process exit (destroying at exit races the driver's teardown)
  }
  *out = handles[device];
  return "";
}

// RAII over the four cuBLASLt descriptors of one call.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descriptors() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

#define SF_LT(call)                                             \
  do {                                                          \
    const cublasStatus_t _s = (call);                           \
    if (_s != CUBLAS_STATUS_SUCCESS) return lt_error(#call, _s); \
  } while (0)

// The BIAS epilogue takes an aligned vector; a bias view at an odd offset goes through add_bias().
bool epilogue_bias(const GemmProblem& p) { return p.bias != nullptr && reinterpret_cast<uintptr_t>(p.bias) % 16 == 0; }

std::string build(const GemmProblem& p, Layout layout, const void* scratch, Descriptors& dsc) {
  const cudaDataType_t t = p.dtype == DType::kFloat16 ? CUDA_R_16F : CUDA_R_16BF;
  SF_LT(cublasLtMatmulDescCreate(&dsc.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = layout == Layout::kNK ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = CUBLAS_OP_N;
  SF_LT(cublasLtMatmulDescSetAttribute(dsc.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  SF_LT(cublasLtMatmulDescSetAttribute(dsc.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  if (epilogue_bias(p)) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    SF_LT(cublasLtMatmulDescSetAttribute(dsc.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    SF_LT(cublasLtMatmulDescSetAttribute(dsc.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof(t)));
    SF_LT(cublasLtMatmulDescSetAttribute(dsc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)));
  }
  const uint64_t M = p.M, N = p.N, K = input_width(p);  // the GEMM's K: x's columns
  if (layout == Layout::kNK) SF_LT(cublasLtMatrixLayoutCreate(&dsc.a, t, K, N, K));
  else SF_LT(cublasLtMatrixLayoutCreate(&dsc.a, t, N, K, N));
  SF_LT(cublasLtMatrixLayoutCreate(&dsc.b, t, K, M, K));
  SF_LT(cublasLtMatrixLayoutCreate(&dsc.d, t, N, M, N));

  SF_LT(cublasLtMatmulPreferenceCreate(&dsc.pref));
  const uint64_t ws = kCublasWorkspaceBytes;
  SF_LT(cublasLtMatmulPreferenceSetAttribute(dsc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const uint32_t al_a = alignment_of(scratch), al_b = alignment_of(p.x), al_d = alignment_of(p.y);
  SF_LT(cublasLtMatmulPreferenceSetAttribute(dsc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a,
                                             sizeof(al_a)));
  SF_LT(cublasLtMatmulPreferenceSetAttribute(dsc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b,
                                             sizeof(al_b)));
  SF_LT(cublasLtMatmulPreferenceSetAttribute(dsc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d,
                                             sizeof(al_d)));
  SF_LT(cublasLtMatmulPreferenceSetAttribute(dsc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d,
                                             sizeof(al_d)));
  if (p.deterministic) {
    // No split-K reduction: the same algorithm then sums in one fixed order.
    const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE;
    SF_LT(cublasLtMatmulPreferenceSetAttribute(dsc.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                               sizeof(mask)));
  }
  return "";
}

// The algorithm for p, from cuBLASLt's heuristic once per key.
using AlgoKey = std::tuple<int, int, int, int, int, int, bool, bool, uint32_t, uint32_t, uint32_t>;

std::string algo_for(cublasLtHandle_t h, const GemmProblem& p, Layout layout, const void* scratch,
                     const Descriptors& dsc, cublasLtMatmulAlgo_t* algo) {
  static std::mutex mu;
  static std::map<AlgoKey, cublasLtMatmulAlgo_t> cache;
  constexpr size_t kMaxEntries = 4096;  // distinct M values are few in practice; bound it anyway
  const AlgoKey key{p.device,     p.M, p.N, input_width(p), static_cast<int>(p.dtype), static_cast<int>(layout),
                    epilogue_bias(p), p.deterministic, alignment_of(scratch), alignment_of(p.x),
                    alignment_of(p.y)};
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) {
      *algo = it->second;
      return "";
    }
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t s =
      cublasLtMatmulAlgoGetHeuristic(h, dsc.op, dsc.a, dsc.b, dsc.d, dsc.d, dsc.pref, 1, &result, &found);
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error("cublasLtMatmulAlgoGetHeuristic", s);
  if (found == 0)
    return "cuBLASLt has no algorithm for M = " + str(p.M) + ", N = " + str(p.N) + ", K = " + str(p.K) +
           (p.deterministic ? " without split-K (deterministic)" : "");
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= kMaxEntries) cache.clear();
  cache.emplace(key, result.algo);
  *algo = result.algo;
  return "";
}

}  // namespace

std::string can_implement(const GemmProblem& p) {
  std::string why = can_implement_dequant(p);
  if (!why.empty()) return why;
  if (p.M < 0) return "M must be >= 0, got M = " + str(p.M);
  return "";
}

size_t workspace_bytes(const GemmProblem& p) {
  if (!can_implement(p).empty()) return 0;
  return scratch_bytes(p) + kCublasWorkspaceBytes;
}

Layout gemm_layout(const GemmProblem& p) { return p.perm != nullptr ? Layout::kKN : Layout::kNK; }

std::string launch(const GemmProblem& p, void* stream) {
  std::string why = can_implement(p);
  if (!why.empty()) return why;
  if (p.M == 0) return "";
  if (p.x == nullptr || p.y == nullptr) return "null x or y pointer";
  const size_t need = workspace_bytes(p);
  if (p.workspace == nullptr || p.workspace_bytes < need)
    return "the dense tier needs " + str(static_cast<long long>(need)) + " workspace bytes, got " +
           str(static_cast<long long>(p.workspace_bytes));
  if (reinterpret_cast<uintptr_t>(p.workspace) % kWorkspaceAlign != 0)
    return "the workspace must be " + str(static_cast<long long>(kWorkspaceAlign)) + "-byte aligned";

  char* ws = static_cast<char*>(p.workspace);
  void* scratch = ws;
  void* lt_ws = ws + scratch_bytes(p);
  const Layout layout = gemm_layout(p);

  why = dequantize(p, scratch, layout, stream);
  if (!why.empty()) return why;

  cublasLtHandle_t h = nullptr;
  why = handle_for(p.device, &h);
  if (!why.empty()) return why;
  Descriptors dsc;
  why = build(p, layout, scratch, dsc);
  if (!why.empty()) return why;
  cublasLtMatmulAlgo_t algo;
  why = algo_for(h, p, layout, scratch, dsc, &algo);
  if (!why.empty()) return why;
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s = cublasLtMatmul(h, dsc.op, &alpha, scratch, dsc.a, p.x, dsc.b, &beta, p.y, dsc.d, p.y,
                                          dsc.d, &algo, lt_ws, kCublasWorkspaceBytes,
                                          static_cast<cudaStream_t>(stream));
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error("cublasLtMatmul", s);
  if (p.bias != nullptr && !epilogue_bias(p)) return add_bias(p, stream);
  return "";
}

}  // namespace dense
}  // namespace swordfish
