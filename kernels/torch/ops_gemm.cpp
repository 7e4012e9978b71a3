// The GEMM ops: gemm, dequantize, select_path, can_implement, last_path.
//
// Each op checks its tensors, fills a GemmProblem (problem.h) and hands it to
// the dispatcher (kernels/dispatch/dispatch.h), which alone decides the path.
// CUDA-graph safe: no host synchronisation, every allocation (output,
// workspace) from torch's caching allocator, launches on torch's current
// stream of the input's device. Environment knobs are read per call.
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "kernels/common/env.h"
#include "kernels/common/format.h"
#include "kernels/common/problem.h"
#include "kernels/dispatch/dispatch.h"
#include "kernels/torch/torch_helpers.h"

namespace swordfish {
namespace torch_ops {
namespace {

// The scalar part of a problem (bits, group, K, N, M): "" or the reason. The
// torch layer's own rules, checked before the dispatcher's: gemm and
// dequantize raise with the reason, can_implement returns it.
std::string geometry_reason(int64_t M, int64_t K, int64_t N, int64_t bits, int64_t group, bool channelwise) {
  std::ostringstream os;
  if (bits != 4 && bits != 8) {
    os << "bits must be 4 or 8, got " << bits;
  } else if (K <= 0 || K % format::block_k(static_cast<int>(bits)) != 0) {
    os << "int" << bits << " weights need K to be a positive multiple of " << format::block_k(static_cast<int>(bits))
       << ", got K = " << K;
  } else if (N <= 0 || N % format::kBlockN != 0) {
    os << "N must be a positive multiple of 64, got N = " << N;
  } else if (M < 0) {
    os << "M must be >= 0, got M = " << M;
  } else if (!fits_int(M) || !fits_int(K) || !fits_int(N)) {
    os << "M, K and N must fit in int32, got M = " << M << ", K = " << K << ", N = " << N;
  } else if (channelwise) {
    if (group <= 0 || K % group != 0)
      os << "channelwise scales are replicated per group rows; group must divide K = " << K << ", got group = "
         << group;
  } else if (group != 32 && group != 64 && group != 128) {
    os << "group must be 32, 64 or 128 (channelwise weights pass channelwise=True), got group = " << group;
  } else if (K % group != 0) {
    os << "group = " << group << " must divide K = " << K;
  }
  return os.str();
}

void check_geometry(const char* op, int64_t M, int64_t K, int64_t N, int64_t bits, int64_t group, bool channelwise) {
  const std::string why = geometry_reason(M, K, N, bits, group, channelwise);
  SF_CHECK(why.empty(), op, why);
}

// Flag-only stand-ins for select_path: the dispatcher reads whether zeros /
// perm are present, never what they point to, but it does check pointer
// alignment (the prefill path's TMA needs 16 bytes), so the stand-in is
// 16-byte aligned like any tensor torch allocates.
alignas(16) const int32_t kPresent[4] = {};

// K of the packed weight (its rows, K_pad under the padded act-order layout), read from its extents.
int64_t packed_k(const char* op, const Tensor& packed, int64_t bits) {
  check_tensor(op, "packed", packed, 3);
  SF_CHECK(bits == 4 || bits == 8, op, "bits must be 4 or 8, got ", bits);
  return packed.size(1) * format::block_k(static_cast<int>(bits));
}

// The input width K_in (x's columns for gemm, the output's for dequantize) against the packed K:
// equal without perm; with perm (act-order) 1 <= K_in <= K, the padded layout's pad rows holding
// perm -1. perm's values are device data, not read here (no host sync): the kernels gather 0 for
// an entry outside [0, K_in) and never write one (QuantizedWeight checks them when it builds perm).
void check_input_width(const char* op, const char* what, int64_t K_in, int64_t K, bool has_perm) {
  SF_CHECK(fits_int(K_in), op, what, " must fit in int32, got ", K_in);
  if (!has_perm)
    SF_CHECK(K_in == K, op, what, " must equal the packed weight's K = ", K,
             " (only an act-order weight, with perm, is read through fewer input features), got ", K_in);
  else
    SF_CHECK(K_in >= 1 && K_in <= K, op, what, " (the act-order layer's input features K_in) must lie in [1, ", K,
             "] (the packed K; perm has K entries, -1 for a pad row), got ", K_in);
}

// Tensors shared by gemm and dequantize: packed, scales, zeros, perm.
// Returns N; `dtype_ref` is the tensor whose dtype scales must match.
int64_t check_weight(const char* op, const Tensor& packed, const Tensor& scales, const std::optional<Tensor>& zeros,
                     const std::optional<Tensor>& perm, int64_t K, int64_t bits, int64_t group, bool channelwise,
                     const char* ref_name, const Tensor& ref) {
  check_tensor(op, "packed", packed, 3);
  check_dtype(op, "packed", packed, ScalarType::Int);
  check_same_device(op, "packed", packed, ref_name, ref);
  const int64_t N = packed.size(0) * format::kBlockN;
  check_geometry(op, 0, K, N, bits, group, channelwise);
  const int64_t bk = format::block_k(static_cast<int>(bits));
  check_shape(op, "packed", packed, {N / format::kBlockN, K / bk, format::kBlockWords});

  check_tensor(op, "scales", scales, 2);
  check_same_device(op, "scales", scales, ref_name, ref);
  SF_CHECK(scales.scalar_type() == ref.scalar_type(), op, "scales.dtype must equal ", ref_name, ".dtype (",
           dtype_name(ref.scalar_type()), "), got ", dtype_name(scales.scalar_type()));
  check_shape(op, "scales", scales, {K / group, N});
  if (zeros.has_value()) {
    const Tensor& z = *zeros;
    check_tensor(op, "zeros", z, 2);
    check_same_device(op, "zeros", z, ref_name, ref);
    SF_CHECK(z.scalar_type() == ref.scalar_type(), op, "zeros.dtype must equal ", ref_name, ".dtype (",
             dtype_name(ref.scalar_type()), "), got ", dtype_name(z.scalar_type()));
    check_shape(op, "zeros", z, {K / group, N});
  }
  if (perm.has_value()) {
    const Tensor& p = *perm;
    check_tensor(op, "perm", p, 1);
    check_dtype(op, "perm", p, ScalarType::Int);
    check_same_device(op, "perm", p, ref_name, ref);
    check_shape(op, "perm", p, {K});
  }
  return N;
}

void fill_weight(GemmProblem& p, const Tensor& packed, const Tensor& scales, const std::optional<Tensor>& zeros,
                 const std::optional<Tensor>& perm, int64_t K, int64_t N, int64_t bits, int64_t group,
                 bool channelwise) {
  p.packed = static_cast<const int32_t*>(packed.data_ptr());
  p.scales = scales.data_ptr();
  p.zeros = zeros.has_value() ? zeros->data_ptr() : nullptr;
  p.perm = perm.has_value() ? static_cast<const int32_t*>(perm->data_ptr()) : nullptr;
  p.K = static_cast<int>(K);
  p.N = static_cast<int>(N);
  p.bits = static_cast<int>(bits);
  p.group = static_cast<int>(group);
  p.channelwise = channelwise;
}

void fill_device(const char* op, GemmProblem& p, int64_t device) {
  const DeviceInfo info = device_info(op, device);
  p.device = static_cast<int>(device);
  p.sm_count = info.sm_count;
  p.cc_major = info.cc_major;
  p.cc_minor = info.cc_minor;
}

// "0 (auto), 1 (decode), 2 (dense) or 3 (prefill)": the values a `path` argument takes.
std::string path_choices() {
  std::string out;
  for (int i = 0; i < kPathCount; ++i)
    out += (i == 0 ? "" : i + 1 == kPathCount ? " or " : ", ") + std::to_string(i) + " (" +
           path_name(static_cast<Path>(i)) + ")";
  return out;
}

void check_path(const char* op, int64_t path) {
  SF_CHECK(path >= 0 && path < kPathCount, op, "path must be ", path_choices(), ", got ", path);
}

Path resolve_path(const char* op, const GemmProblem& p, int64_t path) {
  check_path(op, path);
  if (path == 0) {
    const Path chosen = dispatch::select(p);
    SF_CHECK(chosen != Path::kAuto, op, "the dispatcher chose no path for this problem");
    return chosen;
  }
  const Path forced = static_cast<Path>(path);
  const std::string why = dispatch::can_implement(p, forced);
  SF_CHECK(why.empty(), op, "path ", path_name(forced), " cannot run this problem: ", why);
  return forced;
}

// gemm(x, packed, scales, zeros, perm, bias, bits, group, channelwise, path, deterministic) -> (M, N)
Tensor gemm(Tensor x, Tensor packed, Tensor scales, std::optional<Tensor> zeros, std::optional<Tensor> perm,
            std::optional<Tensor> bias, int64_t bits, int64_t group, bool channelwise, int64_t path,
            int64_t deterministic) {
  constexpr const char* op = "gemm";
  check_tensor(op, "x", x, 2);
  const DType dtype = activation_dtype(op, "x", x);
  const int64_t M = x.size(0), K_in = x.size(1);
  SF_CHECK(fits_int(M), op, "x has too many rows: M = ", M);
  const int64_t K = packed_k(op, packed, bits);
  const int64_t N = check_weight(op, packed, scales, zeros, perm, K, bits, group, channelwise, "x", x);
  check_input_width(op, "x.size(1)", K_in, K, perm.has_value());
  if (bias.has_value()) {
    const Tensor& b = *bias;
    check_tensor(op, "bias", b, 1);
    check_same_device(op, "bias", b, "x", x);
    SF_CHECK(b.scalar_type() == x.scalar_type(), op, "bias.dtype must equal x.dtype (", dtype_name(x.scalar_type()),
             "), got ", dtype_name(b.scalar_type()));
    check_shape(op, "bias", b, {N});
  }
  const bool det = resolve_deterministic(op, deterministic);

  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  GemmProblem p;
  fill_weight(p, packed, scales, zeros, perm, K, N, bits, group, channelwise);
  fill_device(op, p, device);
  p.K_in = static_cast<int>(K_in);
  p.M = static_cast<int>(M);
  p.dtype = dtype;
  p.deterministic = det;
  const Path chosen = resolve_path(op, p, path);

  Tensor y = empty_like_device({M, N}, x.scalar_type(), x);
  if (M == 0) return y;
  p.x = x.data_ptr();
  p.bias = bias.has_value() ? bias->data_ptr() : nullptr;
  p.y = y.data_ptr();
  const size_t ws_bytes = dispatch::workspace_bytes(p, chosen);
  // Lives until the launch is enqueued; the caching allocator orders its reuse on this stream.
  std::optional<Tensor> workspace;
  if (ws_bytes > 0) {
    workspace = empty_like_device({static_cast<int64_t>(ws_bytes)}, ScalarType::Byte, x);
    p.workspace = workspace->data_ptr();
    p.workspace_bytes = ws_bytes;
  }
  const std::string err = dispatch::run(p, chosen, current_cuda_stream(device));
  if (!err.empty()) fail_runtime(op, "path ", path_name(chosen), ": ", err);
  return y;
}

// dequantize(packed, scales, zeros, perm, bits, group, channelwise, K) -> (N, K) in scales.dtype,
// columns in original input-feature order. K is the input width: the packed K, or under the padded
// act-order layout the layer's K_in (pad rows are dropped).
Tensor dequantize(Tensor packed, Tensor scales, std::optional<Tensor> zeros, std::optional<Tensor> perm, int64_t bits,
                  int64_t group, bool channelwise, int64_t K_in) {
  constexpr const char* op = "dequantize";
  check_tensor(op, "scales", scales, 2);
  const DType dtype = activation_dtype(op, "scales", scales);
  check_tensor(op, "packed", packed, 3);
  check_same_device(op, "packed", packed, "scales", scales);
  const int64_t K = packed_k(op, packed, bits);
  const int64_t N = check_weight(op, packed, scales, zeros, perm, K, bits, group, channelwise, "scales", scales);
  check_input_width(op, "K", K_in, K, perm.has_value());

  const int32_t device = scales.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  GemmProblem p;
  fill_weight(p, packed, scales, zeros, perm, K, N, bits, group, channelwise);
  fill_device(op, p, device);
  p.K_in = static_cast<int>(K_in);
  p.dtype = dtype;
  Tensor out = empty_like_device({N, K_in}, scales.scalar_type(), scales);
  const std::string err = dispatch::dequantize(p, out.data_ptr(), current_cuda_stream(device));
  if (!err.empty()) fail_runtime(op, err);
  return out;
}

// The problem select_path and can_implement ask about: shapes and flags, with
// stand-ins for zeros and perm, on device_index. K_in: x's width (0: K).
GemmProblem stand_in_problem(const char* op, int64_t M, int64_t K, int64_t N, int64_t bits, int64_t group,
                             bool channelwise, bool has_zeros, bool act_order, int64_t dtype, int64_t device_index,
                             int64_t K_in) {
  GemmProblem p;
  p.M = static_cast<int>(M);
  p.K = static_cast<int>(K);
  p.K_in = static_cast<int>(K_in);
  p.N = static_cast<int>(N);
  p.bits = static_cast<int>(bits);
  p.group = static_cast<int>(group);
  p.channelwise = channelwise;
  p.zeros = has_zeros ? static_cast<const void*>(kPresent) : nullptr;
  p.perm = act_order ? kPresent : nullptr;
  p.dtype = static_cast<DType>(dtype);
  fill_device(op, p, device_index);
  return p;
}

void check_dtype_code(const char* op, int64_t dtype) {
  SF_CHECK(dtype == 0 || dtype == 1, op, "dtype must be 0 (float16) or 1 (bfloat16), got ", dtype);
}

// select_path(M, K, N, bits, group, channelwise, has_zeros, act_order, dtype, device_index, K_in=0) -> Path value
int64_t select_path(int64_t M, int64_t K, int64_t N, int64_t bits, int64_t group, bool channelwise, bool has_zeros,
                    bool act_order, int64_t dtype, int64_t device_index, int64_t K_in) {
  constexpr const char* op = "select_path";
  check_geometry(op, M, K, N, bits, group, channelwise);
  check_dtype_code(op, dtype);
  if (K_in != 0) check_input_width(op, "K_in", K_in, K, act_order);  // 0: x is K wide
  const GemmProblem p =
      stand_in_problem(op, M, K, N, bits, group, channelwise, has_zeros, act_order, dtype, device_index, K_in);
  const Path chosen = dispatch::select(p);
  return static_cast<int64_t>(chosen);
}

// can_implement(M, K, N, bits, group, channelwise, has_zeros, act_order, dtype, path, device_index, K_in=0) -> str:
// "" when gemm with these arguments could run `path` (auto: the path select_path picks) on that
// device, else the reason gemm would give (the torch layer's shape rules, then the dispatcher's
// and the path's can_implement). Raises only for arguments that name nothing: a dtype or path
// code out of range, a device it cannot query.
std::string can_implement(int64_t M, int64_t K, int64_t N, int64_t bits, int64_t group, bool channelwise,
                          bool has_zeros, bool act_order, int64_t dtype, int64_t path, int64_t device_index,
                          int64_t K_in) {
  constexpr const char* op = "can_implement";
  check_dtype_code(op, dtype);
  check_path(op, path);
  const std::string why = geometry_reason(M, K, N, bits, group, channelwise);
  if (!why.empty()) return why;
  if (K_in < 0 || K_in > K)
    return "K_in must lie in [0, K = " + std::to_string(K) + "] (0: K), got K_in = " + std::to_string(K_in);
  const GemmProblem p =
      stand_in_problem(op, M, K, N, bits, group, channelwise, has_zeros, act_order, dtype, device_index, K_in);
  return dispatch::can_implement(p, static_cast<Path>(path));
}

// last_path(device_index) -> Path value of the most recent gemm on that device (0 if none).
int64_t last_path(int64_t device_index) {
  SF_CHECK(device_index >= 0 && device_index < kMaxDevices, "last_path", "device index must be in [0, ",
           kMaxDevices, "), got ", device_index);
  return static_cast<int64_t>(dispatch::last_path(static_cast<int>(device_index)));
}

}  // namespace
}  // namespace torch_ops
}  // namespace swordfish

STABLE_TORCH_LIBRARY_FRAGMENT(swordfish, m) {
  m.def(
      "gemm(Tensor x, Tensor packed, Tensor scales, Tensor? zeros, Tensor? perm, Tensor? bias, int bits, int group, "
      "bool channelwise, int path, int deterministic) -> Tensor");
  m.def(
      "dequantize(Tensor packed, Tensor scales, Tensor? zeros, Tensor? perm, int bits, int group, bool channelwise, "
      "int K) -> Tensor");
  m.def(
      "select_path(int M, int K, int N, int bits, int group, bool channelwise, bool has_zeros, bool act_order, "
      "int dtype, int device_index, int K_in=0) -> int");
  m.def(
      "can_implement(int M, int K, int N, int bits, int group, bool channelwise, bool has_zeros, bool act_order, "
      "int dtype, int path, int device_index, int K_in=0) -> str");
  m.def("last_path(int device_index) -> int");
}

STABLE_TORCH_LIBRARY_IMPL(swordfish, CUDA, m) {
  m.impl("gemm", TORCH_BOX(&swordfish::torch_ops::gemm));
  m.impl("dequantize", TORCH_BOX(&swordfish::torch_ops::dequantize));
}

// CPU tensors reach the same checks and fail with "must be a CUDA tensor".
STABLE_TORCH_LIBRARY_IMPL(swordfish, CPU, m) {
  m.impl("gemm", TORCH_BOX(&swordfish::torch_ops::gemm));
  m.impl("dequantize", TORCH_BOX(&swordfish::torch_ops::dequantize));
}

STABLE_TORCH_LIBRARY_IMPL(swordfish, CompositeExplicitAutograd, m) {
  m.impl("select_path", TORCH_BOX(&swordfish::torch_ops::select_path));
  m.impl("can_implement", TORCH_BOX(&swordfish::torch_ops::can_implement));
  m.impl("last_path", TORCH_BOX(&swordfish::torch_ops::last_path));
}
