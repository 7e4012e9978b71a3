// The dispatcher (dispatch.h): validation, the per-architecture tables
// (arch_tables.hpp), the last-path record and the SWORDFISH_DEBUG log.
#include "kernels/dispatch/dispatch.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "kernels/common/device_guard.h"
#include "kernels/common/env.h"
#include "kernels/dispatch/last_path.h"
#include "kernels/common/format.h"
#include "kernels/decode/decode.h"
#include "kernels/dense/dense.h"
#include "kernels/dispatch/arch_tables.hpp"
#include "kernels/prefill/prefill.h"

namespace swordfish {
namespace dispatch {
namespace {

std::string str(long long v) { return std::to_string(v); }

std::string arch(const GemmProblem& p) { return "sm" + str(p.cc_major) + str(p.cc_minor); }

// What every path needs; the reason names the offending value.
std::string common_reason(const GemmProblem& p) {
  if (p.bits != 4 && p.bits != 8) return "bits must be 4 or 8, got " + str(p.bits);
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16)
    return "dtype must be float16 (0) or bfloat16 (1), got " + str(static_cast<int>(p.dtype));
  if (p.M < 0) return "M must be >= 0, got M = " + str(p.M);
  const int bk = format::block_k(p.bits);
  if (p.K <= 0 || p.K % bk != 0)
    return "int" + str(p.bits) + " weights need K to be a positive multiple of " + str(bk) + ", got K = " + str(p.K);
  if (p.N <= 0 || p.N % format::kBlockN != 0) return "N must be a positive multiple of 64, got N = " + str(p.N);
  if (p.K_in < 0 || p.K_in > p.K)
    return "the input width K_in must lie in [1, K = " + str(p.K) + "] (0: K), got K_in = " + str(p.K_in);
  if (p.perm == nullptr && input_width(p) != p.K)
    return "x has K_in = " + str(p.K_in) + " columns but the packed weight K = " + str(p.K) +
           " rows; only an act-order weight (perm) is read through a narrower x";
  if (p.sm_count <= 0) return "the problem carries no device facts (sm_count = " + str(p.sm_count) + ")";
  return "";
}

std::string decode_reason(const GemmProblem& p) { return decode::can_implement(p); }

std::string dense_reason(const GemmProblem& p) {
  if (p.cc_major < 8)
    return "the dense tier needs compute capability 8.0 or newer (bf16 tensor cores), device is " + arch(p);
  return dense::can_implement(p);
}

std::string prefill_reason(const GemmProblem& p) { return prefill::can_implement(p); }

std::string path_reason(const GemmProblem& p, Path path) {
  switch (path) {
    case Path::kDecode: return decode_reason(p);
    case Path::kDense: return dense_reason(p);
    case Path::kPrefill: return prefill_reason(p);
    case Path::kAuto: break;
  }
  return "unknown path " + str(static_cast<int>(path));
}

// The most recent path per device: an atomic per device, sized by the device
// count the first time anyone asks.
LastPathRecord& last_paths() {
  static LastPathRecord record;
  return record;
}

// SWORDFISH_DEBUG, read now (never cached), leniently: a debug switch never fails a GEMM.
bool debug_enabled() { return env::lenient("SWORDFISH_DEBUG"); }

// One line per distinct (shape, format, epilogue mode, path) for the life of the process.
void log_choice(const GemmProblem& p, Path path) {
  using Key = std::tuple<int, int, int, int, int, int, bool, bool, bool, bool, int, int>;
  static std::mutex mu;
  static std::set<Key> seen;
  const Key key{p.M, p.K, input_width(p), p.N, p.bits, p.group, p.channelwise, p.perm != nullptr, p.zeros != nullptr,
                p.deterministic, static_cast<int>(p.dtype), static_cast<int>(path)};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.insert(key).second) return;
  }
  std::string detail;
  if (path == Path::kDecode) detail = " (" + decode::describe(p) + ")";
  if (path == Path::kPrefill) detail = " (" + prefill::describe(p) + ")";
  const std::string k_in = input_width(p) != p.K ? " K_in=" + str(input_width(p)) : "";
  std::fprintf(stderr, "swordfish: M=%d K=%d%s N=%d bits=%d group=%d%s%s -> %s%s\n", p.M, p.K, k_in.c_str(), p.N,
               p.bits, p.group, p.channelwise ? " channelwise" : "", p.perm != nullptr ? " act-order" : "",
               path_name(path), detail.c_str());
}


}  // namespace

std::string can_implement(const GemmProblem& p, Path path) {
  std::string why = common_reason(p);
  if (!why.empty()) return why;
  if (path == Path::kAuto) return path_reason(p, select(p));
  return path_reason(p, path);
}

Path select(const GemmProblem& p) {
  heuristics::Availability a;
  const bool ok = common_reason(p).empty();
  a.decode = ok && decode_reason(p).empty();
  a.dense = ok && dense_reason(p).empty();
  a.prefill = ok && prefill_reason(p).empty();
  const heuristics::Table& t = heuristics::table_for(p.cc_major, p.cc_minor);
  if (a.prefill) a.prefill_balance = heuristics::prefill_balance(t, p);
  return heuristics::choose(t, p, a);
}

size_t workspace_bytes(const GemmProblem& p, Path path) {
  if (!can_implement(p, path).empty()) return 0;
  switch (path) {
    case Path::kAuto: return workspace_bytes(p, select(p));
    case Path::kDecode: return decode::workspace_bytes(p);
    case Path::kDense: return dense::workspace_bytes(p);
    case Path::kPrefill: return prefill::workspace_bytes(p);
  }
  return 0;
}

std::string run(const GemmProblem& p, Path path, void* stream) {
  if (path == Path::kAuto) return "run() needs a resolved path (not auto): call select() first";
  std::string why = can_implement(p, path);
  if (!why.empty()) return std::string(path_name(path)) + " cannot run this problem: " + why;
  if (p.M > 0) {
    DeviceGuard guard(p.device);
    if (!guard.ok()) return "cannot make CUDA device " + str(p.device) + " current";
    switch (path) {
      case Path::kDecode: why = decode::launch(p, static_cast<cudaStream_t>(stream)); break;
      case Path::kDense: why = dense::launch(p, stream); break;
      case Path::kPrefill: why = prefill::launch(p, stream); break;
      default: why = path_reason(p, path); break;
    }
    if (!why.empty()) return why;
  }
  last_paths().record(p.device, static_cast<int>(path));
  if (debug_enabled()) log_choice(p, path);
  return "";
}

Path last_path(int device) {
  return static_cast<Path>(last_paths().last(device));
}

std::string dequantize(const GemmProblem& p, void* out, void* stream) {
  std::string why = dense::can_implement_dequant(p);
  if (!why.empty()) return why;
  if (p.cc_major > 0 && p.cc_major < 8)
    return "dequantize needs compute capability 8.0 or newer, device is " + arch(p);
  DeviceGuard guard(p.device);
  if (!guard.ok()) return "cannot make CUDA device " + str(p.device) + " current";
  return dense::dequantize(p, out, dense::Layout::kNK, stream);
}

}  // namespace dispatch
}  // namespace swordfish
