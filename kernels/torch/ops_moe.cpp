// The MoE ops: moe_align, fused_moe, moe_select_path, last_moe_path,
// moe_path_names (schemas: /work/notes/moe_contract.md; Python wrappers and
// fakes in swordfish_backend/ops.py).
//
// fused_moe checks its tensors, fills a MoeProblem (kernels/moe/moe_problem.h)
// and hands it to the MoE dispatcher (kernels/dispatch/moe_dispatch.h), which
// alone decides the path and block size. CUDA-graph safe: no host
// synchronisation, output and workspace from torch's caching allocator,
// launches on torch's current stream of x's device. SWORDFISH_DETERMINISTIC is
// read per call.
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "kernels/common/format.h"
#include "kernels/dispatch/moe_dispatch.h"
#include "kernels/moe/moe_problem.h"
#include "kernels/torch/torch_helpers.h"

namespace swordfish {
namespace torch_ops {
namespace {

// The routing tensors: topk_ids int32 / int64 (T, k), CUDA, contiguous.
void check_ids(const char* op, const Tensor& ids) {
  check_tensor(op, "topk_ids", ids, 2);
  SF_CHECK(ids.scalar_type() == ScalarType::Int || ids.scalar_type() == ScalarType::Long, op,
           "topk_ids must be torch.int32 or torch.int64, got ", dtype_name(ids.scalar_type()));
  SF_CHECK(ids.size(1) >= 1, op, "topk_ids must have at least one column (top_k >= 1), got shape ", shape_str(ids));
  SF_CHECK(fits_int(ids.size(0)) && fits_int(ids.size(1)) && fits_int(ids.size(0) * ids.size(1)), op,
           "topk_ids has too many entries, got shape ", shape_str(ids));
}

void check_map(const char* op, const std::optional<Tensor>& expert_map, const Tensor& ref) {
  if (!expert_map.has_value()) return;
  const Tensor& m = *expert_map;
  check_tensor(op, "expert_map", m, 1);
  check_dtype(op, "expert_map", m, ScalarType::Int);
  check_same_device(op, "expert_map", m, "topk_ids", ref);
  SF_CHECK(m.size(0) >= 1 && fits_int(m.size(0)), op, "expert_map must hold one entry per global expert, got shape ",
           shape_str(m));
}

// moe_align(topk_ids, num_experts, block_m, expert_map) -> (sorted_ids, expert_ids, num_post_pad)
std::tuple<Tensor, Tensor, Tensor> moe_align(Tensor topk_ids, int64_t num_experts, int64_t block_m,
                                             std::optional<Tensor> expert_map) {
  constexpr const char* op = "moe_align";
  check_ids(op, topk_ids);
  check_map(op, expert_map, topk_ids);
  // fits before the int cast; which sizes the sort takes is moe_align_check's (moe::can_align) to say
  SF_CHECK(fits_int(block_m), op, "block_m must be a non-negative int32, got ", block_m);
  SF_CHECK(num_experts >= 1 && fits_int(num_experts), op, "num_experts must be a positive int32, got ", num_experts);
  const int64_t slots = topk_ids.size(0) * topk_ids.size(1);
  const int32_t device = topk_ids.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const DeviceInfo info = device_info(op, device);
  const int E = static_cast<int>(num_experts), bm = static_cast<int>(block_m);
  const std::string why = dispatch::moe_align_check(slots, E, bm, info.cc_major);
  SF_CHECK(why.empty(), op, why);
  const int64_t len = dispatch::moe_align_sorted_len(slots, E, bm);
  const int64_t blocks = dispatch::moe_align_blocks_len(slots, E, bm);
  Tensor sorted_ids = empty_like_device({len}, ScalarType::Int, topk_ids);
  Tensor expert_ids = empty_like_device({blocks}, ScalarType::Int, topk_ids);
  Tensor num_post_pad = empty_like_device({1}, ScalarType::Int, topk_ids);
  const std::string err = dispatch::moe_align(
      topk_ids.data_ptr(), topk_ids.scalar_type() == ScalarType::Long, slots, E, bm,
      expert_map.has_value() ? static_cast<const int32_t*>(expert_map->data_ptr()) : nullptr,
      expert_map.has_value() ? static_cast<int>(expert_map->size(0)) : 0, static_cast<int32_t*>(sorted_ids.data_ptr()),
      static_cast<int32_t*>(expert_ids.data_ptr()), static_cast<int32_t*>(num_post_pad.data_ptr()), device,
      info.cc_major, current_cuda_stream(device));
  if (!err.empty()) fail_runtime(op, err);
  return std::make_tuple(sorted_ids, expert_ids, num_post_pad);
}

// The scalar format of one stacked weight.
void check_format(const char* op, const char* name, int64_t K, int64_t bits, int64_t group, bool channelwise) {
  if (channelwise) {
    SF_CHECK(group > 0 && K % group == 0, op, name, ": channelwise scales are replicated per group rows; group must ",
             "divide K = ", K, ", got group = ", group);
  } else {
    SF_CHECK(group == 32 || group == 64 || group == 128, op, name,
             ": group must be 32, 64 or 128 (channelwise weights pass channelwise=True), got group = ", group);
    SF_CHECK(K % group == 0, op, name, ": group = ", group, " must divide K = ", K);
  }
  (void)bits;
}

// One stacked weight (E, N / 64, K / block_k, 512) and its scales / zeros / perm. Returns (E, N).
std::pair<int64_t, int64_t> check_experts(const char* op, const char* name, const Tensor& packed,
                                          const Tensor& scales, const std::optional<Tensor>& zeros,
                                          const std::optional<Tensor>& perm, int64_t K, int64_t bits, int64_t group,
                                          bool channelwise, const Tensor& x) {
  const std::string pn = std::string(name) + "_packed", sn = std::string(name) + "_scales",
                    zn = std::string(name) + "_zeros", qn = std::string(name) + "_perm";
  check_tensor(op, pn.c_str(), packed, 4);
  check_dtype(op, pn.c_str(), packed, ScalarType::Int);
  check_same_device(op, pn.c_str(), packed, "x", x);
  const int64_t bk = format::block_k(static_cast<int>(bits));
  const int64_t E = packed.size(0), N = packed.size(1) * format::kBlockN;
  SF_CHECK(E >= 1 && fits_int(E), op, pn, " must hold at least one expert, got shape ", shape_str(packed));
  SF_CHECK(K > 0 && K % bk == 0, op, name, ": int", bits, " weights need K to be a positive multiple of ", bk,
           ", got K = ", K);
  SF_CHECK(packed.size(2) == K / bk && packed.size(3) == format::kBlockWords, op, pn, " must have shape (", E, ", ",
           packed.size(1), ", ", K / bk, ", ", format::kBlockWords, ") for K = ", K, " (int", bits, "), got ",
           shape_str(packed));
  check_format(op, name, K, bits, group, channelwise);
  check_tensor(op, sn.c_str(), scales, 3);
  check_same_device(op, sn.c_str(), scales, "x", x);
  SF_CHECK(scales.scalar_type() == x.scalar_type(), op, sn, ".dtype must equal x.dtype (",
           dtype_name(x.scalar_type()), "), got ", dtype_name(scales.scalar_type()));
  check_shape(op, sn.c_str(), scales, {E, K / group, N});
  if (zeros.has_value()) {
    check_tensor(op, zn.c_str(), *zeros, 3);
    check_same_device(op, zn.c_str(), *zeros, "x", x);
    SF_CHECK(zeros->scalar_type() == x.scalar_type(), op, zn, ".dtype must equal x.dtype (",
             dtype_name(x.scalar_type()), "), got ", dtype_name(zeros->scalar_type()));
    check_shape(op, zn.c_str(), *zeros, {E, K / group, N});
  }
  if (perm.has_value()) {
    check_tensor(op, qn.c_str(), *perm, 2);
    check_dtype(op, qn.c_str(), *perm, ScalarType::Int);
    check_same_device(op, qn.c_str(), *perm, "x", x);
    check_shape(op, qn.c_str(), *perm, {E, K});
  }
  return {E, N};
}

MoeWeight fill_weight(const Tensor& packed, const Tensor& scales, const std::optional<Tensor>& zeros,
                      const std::optional<Tensor>& perm, int64_t group, bool channelwise) {
  MoeWeight w;
  w.packed = static_cast<const int32_t*>(packed.data_ptr());
  w.scales = scales.data_ptr();
  w.zeros = zeros.has_value() ? zeros->data_ptr() : nullptr;
  w.perm = perm.has_value() ? static_cast<const int32_t*>(perm->data_ptr()) : nullptr;
  w.group = static_cast<int>(group);
  w.channelwise = channelwise;
  return w;
}

void fill_device(const char* op, MoeProblem& p, int64_t device) {
  const DeviceInfo info = device_info(op, device);
  p.device = static_cast<int>(device);
  p.sm_count = info.sm_count;
  p.cc_major = info.cc_major;
  p.cc_minor = info.cc_minor;
}

// A non-owning tensor over device memory the caller keeps alive (the dense path's workspace pieces).
Tensor device_view(void* data, std::initializer_list<int64_t> sizes, int32_t dtype, int32_t device) {
  std::vector<int64_t> sz(sizes), st(sz.size(), 1);
  for (int i = static_cast<int>(sz.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * sz[i + 1];
  AtenTensorHandle h = nullptr;
  const AOTITorchError e = aoti_torch_create_tensor_from_blob(data, static_cast<int64_t>(sz.size()), sz.data(),
                                                               st.data(), 0, dtype, aoti_torch_device_type_cuda(),
                                                               device, &h);
  if (e != AOTI_TORCH_SUCCESS) throw std::runtime_error("fused_moe: cannot wrap a workspace piece as a tensor");
  return Tensor(h);
}

// The dense MoE path's grouped GEMM (moe_problem.h's MoeGroupedGemm): torch's _grouped_mm on token-sorted rows,
// W (E, N, K) row-major handed over as its (E, K, N) transpose (the column-major B that the sm90 kernel takes).
struct GroupedGemmContext {
  int32_t dtype;                 // aoti dtype of the activations
  int32_t device;
  std::vector<Tensor> outputs;   // alive until fused_moe returns; the stream orders the reuse of their memory
};

std::string grouped_gemm(void* ctx_ptr, const void* a, long long rows, int K, const void* w, int N, int E,
                         const int32_t* offs, void** out) {
  auto* ctx = static_cast<GroupedGemmContext*>(ctx_ptr);
  try {
    Tensor ta = device_view(const_cast<void*>(a), {rows, K}, ctx->dtype, ctx->device);
    Tensor tw = device_view(const_cast<void*>(w), {E, N, K}, ctx->dtype, ctx->device);
    Tensor to = device_view(const_cast<int32_t*>(offs), {E}, aoti_torch_dtype_int32(), ctx->device);
    std::array<StableIValue, 5> stack{torch::stable::detail::from(ta),
                                      torch::stable::detail::from(torch::stable::transpose(tw, 1, 2)),
                                      torch::stable::detail::from(std::optional<Tensor>(to)),
                                      torch::stable::detail::from(std::nullopt),
                                      torch::stable::detail::from(std::nullopt)};
    const AOTITorchError e = torch_call_dispatcher("aten::_grouped_mm", "", stack.data(), TORCH_ABI_VERSION);
    if (e != AOTI_TORCH_SUCCESS) return "torch._grouped_mm failed (rows " + std::to_string(rows) + ", K " +
                                        std::to_string(K) + ", N " + std::to_string(N) + ", E " +
                                        std::to_string(E) + ")";
    ctx->outputs.push_back(torch::stable::detail::to<Tensor>(stack[0]));
    *out = ctx->outputs.back().data_ptr();
  } catch (const std::exception& ex) {
    return std::string("torch._grouped_mm: ") + ex.what();
  }
  return "";
}

MoePath resolve_path(const char* op, const MoeProblem& p, int64_t path) {
  SF_CHECK(path >= 0 && path <= static_cast<int64_t>(MoePath::kGrouped), op,
           "path must be 0 (auto), 1 (fused), 2 (dense) or 3 (grouped), got ", path);
  const MoePath chosen = path == 0 ? dispatch::moe_select(p) : static_cast<MoePath>(path);
  const std::string why = dispatch::moe_can_implement(p, chosen);
  SF_CHECK(why.empty(), op, "path ", moe_path_name(chosen), " cannot run this problem: ", why);
  return chosen;
}

Tensor fused_moe(Tensor x, Tensor w13_packed, Tensor w13_scales, std::optional<Tensor> w13_zeros,
                 std::optional<Tensor> w13_perm, Tensor w2_packed, Tensor w2_scales, std::optional<Tensor> w2_zeros,
                 std::optional<Tensor> w2_perm, Tensor topk_weights, Tensor topk_ids,
                 std::optional<Tensor> expert_map, int64_t bits, int64_t group13, bool channelwise13, int64_t group2,
                 bool channelwise2, int64_t activation, bool weights_on_input, int64_t path, int64_t deterministic) {
  constexpr const char* op = "fused_moe";
  check_tensor(op, "x", x, 2);
  const DType dtype = activation_dtype(op, "x", x);
  SF_CHECK(bits == 4 || bits == 8, op, "bits must be 4 or 8, got ", bits);
  const int64_t T = x.size(0), H = x.size(1);
  SF_CHECK(fits_int(T) && fits_int(H), op, "x is too large, got shape ", shape_str(x));
  const auto [E, N13] = check_experts(op, "w13", w13_packed, w13_scales, w13_zeros, w13_perm, H, bits, group13,
                                      channelwise13, x);
  SF_CHECK(N13 % 2 == 0, op, "w13 must hold [gate | up] (N = 2I), got N = ", N13);
  const int64_t I = N13 / 2;
  SF_CHECK(w2_packed.dim() == 4 && w2_packed.size(0) == E, op, "E mismatch: w13 holds ", E,
           " experts but w2_packed has shape ", shape_str(w2_packed));
  SF_CHECK(w2_packed.size(1) * format::kBlockN == H, op, "H mismatch: x has H = ", H,
           " columns but w2 produces N = ", w2_packed.size(1) * format::kBlockN, " (w2_packed shape ",
           shape_str(w2_packed), ")");
  const int64_t bk = format::block_k(static_cast<int>(bits));
  // w2's packed K: I, or (padded act-order shard, w2_perm (E, K2) with -1 on pad rows) any K2 >= I.
  const int64_t K2 = w2_packed.size(2) * bk;
  if (w2_perm.has_value()) {
    SF_CHECK(K2 >= I, op, "I mismatch: w13 produces 2I = ", N13, " (I = ", I, ") but act-order w2 packs K = ", K2,
             " < I rows (w2_packed shape ", shape_str(w2_packed), ")");
  } else {
    SF_CHECK(K2 == I, op, "I mismatch: w13 produces 2I = ", N13, " (I = ", I, ") but w2 consumes K = ", K2,
             " (w2_packed shape ", shape_str(w2_packed), "); only an act-order w2 (w2_perm) may pack more rows");
  }
  SF_CHECK(fits_int(K2), op, "w2's packed K is too large, got K = ", K2);
  check_experts(op, "w2", w2_packed, w2_scales, w2_zeros, w2_perm, K2, bits, group2, channelwise2, x);
  check_ids(op, topk_ids);
  check_same_device(op, "topk_ids", topk_ids, "x", x);
  SF_CHECK(topk_ids.size(0) == T, op, "topk_ids must have one row per token (T = ", T, "), got shape ",
           shape_str(topk_ids));
  const int64_t top_k = topk_ids.size(1);
  check_tensor(op, "topk_weights", topk_weights, 2);
  check_same_device(op, "topk_weights", topk_weights, "x", x);
  SF_CHECK(topk_weights.scalar_type() == ScalarType::Float || topk_weights.scalar_type() == x.scalar_type(), op,
           "topk_weights must be torch.float32 or x.dtype (", dtype_name(x.scalar_type()), "), got ",
           dtype_name(topk_weights.scalar_type()));
  SF_CHECK(topk_weights.size(0) == T && topk_weights.size(1) == top_k, op, "k mismatch: topk_weights has shape ",
           shape_str(topk_weights), " but topk_ids has shape ", shape_str(topk_ids));
  check_map(op, expert_map, x);
  SF_CHECK(activation == 0 || activation == 1, op, "activation must be 0 (silu) or 1 (gelu), got ", activation);
  SF_CHECK(!weights_on_input || top_k == 1, op,
           "weights_on_input (apply_router_weight_on_input) needs top_k == 1, got top_k = ", top_k);
  const bool det = resolve_deterministic(op, deterministic);

  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  MoeProblem p;
  p.w13 = fill_weight(w13_packed, w13_scales, w13_zeros, w13_perm, group13, channelwise13);
  p.w2 = fill_weight(w2_packed, w2_scales, w2_zeros, w2_perm, group2, channelwise2);
  p.T = static_cast<int>(T);
  p.top_k = static_cast<int>(top_k);
  p.E = static_cast<int>(E);
  p.map_len = expert_map.has_value() ? static_cast<int>(expert_map->size(0)) : 0;
  p.expert_map = expert_map.has_value() ? static_cast<const int32_t*>(expert_map->data_ptr()) : nullptr;
  p.H = static_cast<int>(H);
  p.I = static_cast<int>(I);
  p.I_w2 = K2 == I ? 0 : static_cast<int>(K2);
  p.bits = static_cast<int>(bits);
  p.dtype = dtype;
  p.weights_f32 = topk_weights.scalar_type() == ScalarType::Float;
  p.ids_int64 = topk_ids.scalar_type() == ScalarType::Long;
  p.activation = static_cast<MoeActivation>(activation);
  p.weights_on_input = weights_on_input;
  p.deterministic = det;
  fill_device(op, p, device);
  GroupedGemmContext gg_ctx{x.scalar_type() == ScalarType::BFloat16 ? aoti_torch_dtype_bfloat16()
                                                                    : aoti_torch_dtype_float16(),
                            device, {}};
  const MoeGroupedGemm gg{&gg_ctx, &grouped_gemm};
  p.grouped_gemm = &gg;
  const MoePath chosen = resolve_path(op, p, path);

  Tensor y = empty_like_device({T, H}, x.scalar_type(), x);
  if (T == 0) return y;
  p.x = x.data_ptr();
  p.y = y.data_ptr();
  p.topk_weights = topk_weights.data_ptr();
  p.topk_ids = topk_ids.data_ptr();
  const size_t ws_bytes = dispatch::moe_workspace_bytes(p, chosen);
  std::optional<Tensor> workspace;  // lives until the launches are enqueued; the allocator orders its reuse
  if (ws_bytes > 0) {
    workspace = empty_like_device({static_cast<int64_t>(ws_bytes)}, ScalarType::Byte, x);
    p.workspace = workspace->data_ptr();
    p.workspace_bytes = ws_bytes;
  }
  const std::string err = dispatch::moe_run(p, chosen, current_cuda_stream(device));
  if (!err.empty()) fail_runtime(op, "path ", moe_path_name(chosen), ": ", err);
  return y;
}

// moe_select_path(T, top_k, E, H, I, bits, group, dtype, device, act_order) -> MoePath value
int64_t moe_select_path(int64_t T, int64_t top_k, int64_t E, int64_t H, int64_t I, int64_t bits, int64_t group,
                        int64_t dtype, int64_t device, bool act_order) {
  constexpr const char* op = "moe_select_path";
  SF_CHECK(T >= 0 && fits_int(T), op, "T must be a non-negative int32, got ", T);
  SF_CHECK(top_k >= 1 && fits_int(top_k), op, "top_k must be >= 1, got ", top_k);
  SF_CHECK(E >= 1 && fits_int(E), op, "E must be >= 1, got ", E);
  SF_CHECK(H >= 1 && fits_int(H) && I >= 1 && fits_int(I), op, "H and I must be positive, got H = ", H, ", I = ", I);
  SF_CHECK(bits == 4 || bits == 8, op, "bits must be 4 or 8, got ", bits);
  SF_CHECK(dtype == 0 || dtype == 1, op, "dtype must be 0 (float16) or 1 (bfloat16), got ", dtype);
  MoeProblem p;
  p.T = static_cast<int>(T);
  p.top_k = static_cast<int>(top_k);
  p.E = static_cast<int>(E);
  p.H = static_cast<int>(H);
  p.I = static_cast<int>(I);
  p.bits = static_cast<int>(bits);
  p.w13.group = p.w2.group = static_cast<int>(group);
  p.dtype = static_cast<DType>(dtype);
  // Act-order experts: the checks test only that a permutation is present (the grouped path refuses them).
  static const int32_t kPresentPerm = 0;
  if (act_order) p.w13.perm = p.w2.perm = &kPresentPerm;
  fill_device(op, p, device);
  static const MoeGroupedGemm kTorchGroupedGemm{nullptr, &grouped_gemm};  // fused_moe supplies this GEMM too
  p.grouped_gemm = &kTorchGroupedGemm;
  return static_cast<int64_t>(dispatch::moe_select(p));
}

// last_moe_path(device) -> MoePath value of the most recent fused_moe on that device (0 if none).
int64_t last_moe_path(int64_t device) {
  SF_CHECK(device >= 0 && device < kMaxDevices, "last_moe_path", "device index must be in [0, ", kMaxDevices,
           "), got ", device);
  return static_cast<int64_t>(dispatch::moe_last_path(static_cast<int>(device)));
}

// moe_path_names() -> "fused[,dense]": the accepted path names, value 1 first.
std::string moe_path_names() { return dispatch::moe_path_names(); }

}  // namespace
}  // namespace torch_ops
}  // namespace swordfish

STABLE_TORCH_LIBRARY_FRAGMENT(swordfish, m) {
  m.def("moe_align(Tensor topk_ids, int num_experts, int block_m, Tensor? expert_map) -> (Tensor, Tensor, Tensor)");
  m.def(
      "fused_moe(Tensor x, Tensor w13_packed, Tensor w13_scales, Tensor? w13_zeros, Tensor? w13_perm, "
      "Tensor w2_packed, Tensor w2_scales, Tensor? w2_zeros, Tensor? w2_perm, Tensor topk_weights, "
      "Tensor topk_ids, Tensor? expert_map, int bits, int group13, bool channelwise13, int group2, "
      "bool channelwise2, int activation, bool weights_on_input, int path, int deterministic) -> Tensor");
  m.def("moe_select_path(int T, int top_k, int E, int H, int I, int bits, int group, int dtype, int device, "
        "bool act_order) -> int");
  m.def("last_moe_path(int device) -> int");
  m.def("moe_path_names() -> str");
}

STABLE_TORCH_LIBRARY_IMPL(swordfish, CUDA, m) {
  m.impl("moe_align", TORCH_BOX(&swordfish::torch_ops::moe_align));
  m.impl("fused_moe", TORCH_BOX(&swordfish::torch_ops::fused_moe));
}

// CPU tensors reach the same checks and fail with "must be a CUDA tensor".
STABLE_TORCH_LIBRARY_IMPL(swordfish, CPU, m) {
  m.impl("moe_align", TORCH_BOX(&swordfish::torch_ops::moe_align));
  m.impl("fused_moe", TORCH_BOX(&swordfish::torch_ops::fused_moe));
}

STABLE_TORCH_LIBRARY_IMPL(swordfish, CompositeExplicitAutograd, m) {
  m.impl("moe_select_path", TORCH_BOX(&swordfish::torch_ops::moe_select_path));
  m.impl("last_moe_path", TORCH_BOX(&swordfish::torch_ops::last_moe_path));
  m.impl("moe_path_names", TORCH_BOX(&swordfish::torch_ops::moe_path_names));
}
