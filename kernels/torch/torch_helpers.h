// Shared helpers of the stable-ABI op registrations (ops_format.cpp,
// ops_gemm.cpp, ops_moe.cpp): argument checks with messages that name the
// offending value, the current CUDA stream, the torch <-> swordfish dtype
// mapping, the per-device SM count cache and the SWORDFISH_DETERMINISTIC parser.
// Only code under kernels/torch/ includes torch headers.
#pragma once

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/env.h"
#include "kernels/common/problem.h"

namespace swordfish {
namespace torch_ops {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// Bad arguments raise std::invalid_argument (Python: ValueError where torch
// translates it, RuntimeError otherwise); the message starts with the op name.
template <class... Args>
[[noreturn]] void fail(const char* op, const Args&... args) {
  std::ostringstream os;
  os << "swordfish." << op << ": ";
  (os << ... << args);
  throw std::invalid_argument(os.str());
}

// Failures that are not the caller's input (a launch error, say).
template <class... Args>
[[noreturn]] void fail_runtime(const char* op, const Args&... args) {
  std::ostringstream os;
  os << "swordfish." << op << ": ";
  (os << ... << args);
  throw std::runtime_error(os.str());
}

#define SF_CHECK(cond, op, ...)                       \
  do {                                                \
    if (!(cond)) ::swordfish::torch_ops::fail(op, __VA_ARGS__); \
  } while (0)

inline const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Half: return "torch.float16";
    case ScalarType::BFloat16: return "torch.bfloat16";
    case ScalarType::Float: return "torch.float32";
    case ScalarType::Double: return "torch.float64";
    case ScalarType::Int: return "torch.int32";
    case ScalarType::Long: return "torch.int64";
    case ScalarType::Short: return "torch.int16";
    case ScalarType::Char: return "torch.int8";
    case ScalarType::Byte: return "torch.uint8";
    case ScalarType::Bool: return "torch.bool";
    default: return torch::headeronly::toString(t);
  }
}

inline std::string shape_str(const Tensor& t) {
  std::ostringstream os;
  os << "(";
  const auto sizes = t.sizes();
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? ", " : "") << sizes[i];
  os << (sizes.size() == 1 ? ",)" : ")");
  return os.str();
}

inline std::string device_str(const Tensor& t) {
  if (t.is_cuda()) return "cuda:" + std::to_string(t.get_device_index());
  if (t.is_cpu()) return "cpu";
  return "a non-CPU, non-CUDA device";
}

// "x" is a CUDA tensor of one of the given dtypes, contiguous, with `dim` dims.
inline void check_tensor(const char* op, const char* name, const Tensor& t, int64_t dim) {
  SF_CHECK(t.is_cuda(), op, name, " must be a CUDA tensor, got one on ", device_str(t));
  SF_CHECK(t.dim() == dim, op, name, " must be ", dim, "-D, got shape ", shape_str(t));
  SF_CHECK(t.is_contiguous(), op, name, " must be contiguous (call .contiguous()), got strides of shape ",
           shape_str(t));
}

inline void check_dtype(const char* op, const char* name, const Tensor& t, ScalarType want) {
  SF_CHECK(t.scalar_type() == want, op, name, " must be ", dtype_name(want), ", got ", dtype_name(t.scalar_type()));
}

inline void check_same_device(const char* op, const char* name, const Tensor& t, const char* ref_name,
                              const Tensor& ref) {
  SF_CHECK(t.is_cuda() && t.get_device_index() == ref.get_device_index(), op, name, " is on ", device_str(t),
           " but ", ref_name, " is on ", device_str(ref));
}

inline void check_shape(const char* op, const char* name, const Tensor& t, std::initializer_list<int64_t> want) {
  bool ok = t.dim() == static_cast<int64_t>(want.size());
  int64_t i = 0;
  for (int64_t w : want) {
    if (!ok) break;
    ok = t.size(i++) == w;
  }
  if (ok) return;
  std::ostringstream os;
  os << "(";
  i = 0;
  for (int64_t w : want) os << (i++ ? ", " : "") << w;
  os << (want.size() == 1 ? ",)" : ")");
  fail(op, name, " must have shape ", os.str(), ", got ", shape_str(t));
}

// fp16 / bf16 -> swordfish::DType; anything else is an error naming it.
inline DType activation_dtype(const char* op, const char* name, const Tensor& t) {
  const ScalarType s = t.scalar_type();
  if (s == ScalarType::Half) return DType::kFloat16;
  if (s == ScalarType::BFloat16) return DType::kBFloat16;
  fail(op, name, " must be torch.float16 or torch.bfloat16, got ", dtype_name(s));
}

inline bool fits_int(int64_t v) { return v >= 0 && v <= INT32_MAX; }

// The current CUDA stream of `device` (a cudaStream_t), as torch sees it:
// the one a captured CUDA graph or torch.cuda.stream() context selects.
inline void* current_cuda_stream(int32_t device) {
  void* stream = nullptr;
  // Checked by hand: STABLE_TORCH_ERROR_CODE_CHECK is absent from torch 2.11's headers.
  const AOTITorchError err = aoti_torch_get_current_cuda_stream(device, &stream);
  if (err != AOTI_TORCH_SUCCESS) fail_runtime("stream", "cannot get the current CUDA stream of device ", device);
  return stream;
}

// SM count and compute capability of a device, queried once per device.
struct DeviceInfo {
  int sm_count, cc_major, cc_minor;
};
constexpr int kMaxDevices = 256;

inline DeviceInfo device_info(const char* op, int64_t device) {
  SF_CHECK(device >= 0 && device < kMaxDevices, op, "device index must be in [0, ", kMaxDevices, "), got ", device);
  // Packed (sm_count << 16 | major << 8 | minor); 0 = not queried yet.
  static std::array<std::atomic<uint32_t>, kMaxDevices> cache{};
  uint32_t v = cache[device].load(std::memory_order_relaxed);
  if (v == 0) {
    int sm = 0, major = 0, minor = 0;
    const int d = static_cast<int>(device);
    cudaError_t e = cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, d);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear the error this query left behind
      fail_runtime(op, "cannot query CUDA device ", device, ": ", cudaGetErrorString(e));
    }
    v = (static_cast<uint32_t>(sm) << 16) | (static_cast<uint32_t>(major) << 8) | static_cast<uint32_t>(minor);
    cache[device].store(v, std::memory_order_relaxed);
  }
  return DeviceInfo{static_cast<int>(v >> 16), static_cast<int>((v >> 8) & 0xFF), static_cast<int>(v & 0xFF)};
}

// deterministic: 0 / 1 explicit; -1 reads SWORDFISH_DETERMINISTIC now (never cached), strictly.
inline bool resolve_deterministic(const char* op, int64_t arg) {
  if (arg == 0 || arg == 1) return arg == 1;
  SF_CHECK(arg == -1, op, "deterministic must be -1 (read SWORDFISH_DETERMINISTIC), 0 or 1, got ", arg);
  switch (env::flag("SWORDFISH_DETERMINISTIC")) {
    case env::Flag::kOff: return false;
    case env::Flag::kOn: return true;
    case env::Flag::kUnrecognised: break;
  }
  fail(op, "SWORDFISH_DETERMINISTIC must be 0 or 1 (or false/true, off/on, no/yes), got '",
       env::raw("SWORDFISH_DETERMINISTIC"), "'");
}

// An uninitialised tensor from torch's allocator (caching, stream-ordered).
inline Tensor empty_like_device(std::initializer_list<int64_t> sizes, ScalarType dtype, const Tensor& like) {
  std::vector<int64_t> s(sizes);
  return torch::stable::new_empty(like, torch::headeronly::IntHeaderOnlyArrayRef(s.data(), s.size()), dtype);
}

}  // namespace torch_ops
}  // namespace swordfish
