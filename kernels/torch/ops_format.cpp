// The format ops: abi_info (the packed-format constants of this build),
// path_names (the kernel paths, in swordfish::Path order) and prepack (GPTQ
// K-packed int32 -> packed format v1 on the GPU).
// This file owns the `swordfish` op namespace (STABLE_TORCH_LIBRARY); the
// other op files add to it with STABLE_TORCH_LIBRARY_FRAGMENT.
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/common/format.h"
#include "kernels/common/problem.h"
#include "kernels/prep/prepack.h"
#include "kernels/torch/torch_helpers.h"

namespace swordfish {
namespace torch_ops {
namespace {

// Order of abi_info()'s values: swordfish_backend/ops.py ABI_INFO_FIELDS and
// swordfish_backend/format.py ABI_INFO mirror it.
constexpr int64_t kAbiInfo[] = {
    format::kVersion,      format::kBlockN,        format::kBlockBytes,    format::kBlockWords,
    format::kSubtiles,     format::kSubtileBytes,  format::kLanes,         format::kLaneWords,
    format::kBlockK4,      format::kBlockK8,       format::kBias4,         format::kBias8,
    format::kNibbleOfFragment4[0], format::kNibbleOfFragment4[1], format::kNibbleOfFragment4[2],
    format::kNibbleOfFragment4[3], format::kNibbleOfFragment4[4], format::kNibbleOfFragment4[5],
    format::kNibbleOfFragment4[6], format::kNibbleOfFragment4[7],
    format::kByteOfFragment8[0], format::kByteOfFragment8[1], format::kByteOfFragment8[2],
    format::kByteOfFragment8[3],
};
constexpr int64_t kAbiInfoLen = sizeof(kAbiInfo) / sizeof(kAbiInfo[0]);
static_assert(kAbiInfoLen == 24, "update ops.py ABI_INFO_FIELDS and format.py ABI_INFO with this list");

// abi_info() -> int64 CPU tensor of the format constants compiled into this build.
Tensor abi_info() {
  int64_t size[] = {kAbiInfoLen};
  Tensor out = torch::stable::empty(torch::headeronly::IntHeaderOnlyArrayRef(size, 1), ScalarType::Long,
                                    std::nullopt, torch::stable::Device(torch::stable::DeviceType::CPU));
  int64_t* dst = static_cast<int64_t*>(out.data_ptr());
  for (int64_t i = 0; i < kAbiInfoLen; ++i) dst[i] = kAbiInfo[i];
  return out;
}

// path_names() -> "auto,decode,dense,prefill": path_name() of every Path value, in value order
// (swordfish_backend/ops.py checks its fallback list against it).
std::string path_names() {
  std::string out;
  for (int i = 0; i < kPathCount; ++i) out += std::string(i ? "," : "") + path_name(static_cast<Path>(i));
  return out;
}

// prepack(qweight, perm, bits) -> (N / 64, K / block_k, 512) int32 on qweight's device.
Tensor prepack(Tensor qweight, std::optional<Tensor> perm, int64_t bits) {
  constexpr const char* op = "prepack";
  SF_CHECK(bits == 4 || bits == 8, op, "bits must be 4 or 8, got ", bits);
  check_tensor(op, "qweight", qweight, 2);
  check_dtype(op, "qweight", qweight, ScalarType::Int);
  const int64_t vpw = 32 / bits, bk = format::block_k(static_cast<int>(bits));
  const int64_t K = qweight.size(0) * vpw, N = qweight.size(1);
  SF_CHECK(K > 0 && K % bk == 0, op, "int", bits, " needs K = qweight.size(0) * ", vpw,
           " to be a positive multiple of ", bk, ", got qweight of shape ", shape_str(qweight), " (K = ", K, ")");
  SF_CHECK(N > 0 && N % format::kBlockN == 0, op, "N = qweight.size(1) must be a positive multiple of 64, got N = ",
           N);
  SF_CHECK(fits_int(K) && fits_int(N) && N / format::kBlockN <= 65535, op, "qweight of shape ", shape_str(qweight),
           " is too large (K and N must fit in int32, N / 64 <= 65535)");
  const int32_t* perm_ptr = nullptr;
  if (perm.has_value()) {
    const Tensor& p = *perm;
    check_dtype(op, "perm", p, ScalarType::Int);
    SF_CHECK(p.is_cuda(), op, "perm must be a CUDA tensor, got one on ", device_str(p));
    check_same_device(op, "perm", p, "qweight", qweight);
    check_shape(op, "perm", p, {K});
    SF_CHECK(p.is_contiguous(), op, "perm must be contiguous");
    perm_ptr = static_cast<const int32_t*>(p.data_ptr());
  }
  const int32_t device = qweight.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  Tensor out = empty_like_device({N / format::kBlockN, K / bk, format::kBlockWords}, ScalarType::Int, qweight);
  prep::PrepackProblem problem;
  problem.qweight = static_cast<const int32_t*>(qweight.data_ptr());
  problem.perm = perm_ptr;
  problem.out = static_cast<int32_t*>(out.data_ptr());
  problem.K = static_cast<int>(K);
  problem.N = static_cast<int>(N);
  problem.bits = static_cast<int>(bits);
  const std::string err = prep::launch(problem, current_cuda_stream(device));
  if (!err.empty()) fail_runtime(op, err);
  return out;
}

}  // namespace
}  // namespace torch_ops
}  // namespace swordfish

STABLE_TORCH_LIBRARY(swordfish, m) {
  m.def("abi_info() -> Tensor");
  m.def("path_names() -> str");
  m.def("prepack(Tensor qweight, Tensor? perm, int bits) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(swordfish, CompositeExplicitAutograd, m) {
  m.impl("abi_info", TORCH_BOX(&swordfish::torch_ops::abi_info));
  m.impl("path_names", TORCH_BOX(&swordfish::torch_ops::path_names));
}

STABLE_TORCH_LIBRARY_IMPL(swordfish, CUDA, m) {
  m.impl("prepack", TORCH_BOX(&swordfish::torch_ops::prepack));
}

// CPU tensors reach the same checks, so they fail with "must be a CUDA tensor"
// instead of the dispatcher's "could not run ... with arguments from the CPU backend".
STABLE_TORCH_LIBRARY_IMPL(swordfish, CPU, m) {
  m.impl("prepack", TORCH_BOX(&swordfish::torch_ops::prepack));
}
