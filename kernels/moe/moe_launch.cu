// Host twin of moe_align.cuh, moe_gemm.cuh and moe_act.cuh: checks a
// MoeProblem, plans the five launches of one layer and enqueues them.
//
// Plan (integer, a pure function of T, top_k, E, H, I, the format, block_m
// and the device; never of the routing, so a captured graph replays with any):
//   blocks    upper bound of moe_align's real blocks: every non-empty expert
//             adds at most block_m - 1 padding rows and at most min(E, slots)
//             experts are non-empty, so max_blocks = (slots + min(E, slots)
//             (block_m - 1)) / block_m (the sort's arrays are sized by it).
//   GEMMs     per weight (w13: K = H, N = 2I; w2: K = K2 = w2_k(p), N = H), units =
//             quads x blocks x k-blocks. Atomic: a persistent grid of
//             min(occupancy x SMs, max units / kMinUnitsPerCta) CTAs; the
//             kernel reads the real block count and splits the real units
//             evenly (CTAs beyond units / kMinUnitsPerCta leave). Deterministic:
//             splits = the SM slots over the upper-bound segments (1 .. k-blocks
//             / kMinUnitsPerCta, fp32 planes <= kMaxPartialBytes), one CTA per
//             (segment, split).
//   kernel    block_m 16 / 32: gemm_kernel MT = 1 / 2 (moe_gemm.cuh); block_m
//             8 (kSwapBlockM): swap_gemm_kernel (moe_swap.cuh, the block's
//             tokens as the n8 operand), at few tokens per expert (the
//             MoE tables, kernels/dispatch/moe_heuristics.hpp).
//   FOLD      at MT = 1 where the dense decode kernel folds (group >= 64,
//             channelwise, int8).
//   workspace [sorted_ids][expert_ids][num_post_pad][slot_expert][xg: act-order]
//             [h: fp32 planes (splits13, slots, 2I)][y32 (T, H) | o: (splits2, slots, H)]
//             [a: (slots, K2) dtype], each 256-byte aligned; atomic mode zeroes
//             h and y32 (adjacent) in the align launch.
//   launches  align -> w13 GEMM -> act -> w2 GEMM -> finalize, each with
//             programmatic stream serialization on sm_90+ (every kernel waits
//             with griddepcontrol.wait before touching what the one before
//             wrote, and lets the next one launch at once).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kernels/common/device_guard.h"
#include "kernels/common/format.h"
#include "kernels/common/launch.h"
#include "kernels/common/func_attr.h"
#include "kernels/decode/decode_config.h"
#include "kernels/moe/moe.h"
#include "kernels/moe/moe_act.cuh"
#include "kernels/moe/moe_align.cuh"
#include "kernels/moe/moe_kernels.h"

namespace swordfish {
namespace moe {
namespace {

constexpr long long kIntMax = INT_MAX;
constexpr int kElemThreads = 256;  // act / finalize CTAs
constexpr int kAlignMaxSmem = 200 * 1024;

std::string str(long long v) { return std::to_string(v); }
long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }
size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
bool aligned(const void* ptr, uintptr_t a) { return reinterpret_cast<uintptr_t>(ptr) % a == 0; }
int log2_group(int group) { return group == 32 ? 5 : group == 64 ? 6 : 7; }

// CTAs per SM of a GEMM instance on `device` (func_attr.h: raises its shared-memory limit, cached).
int occupancy(const KernelHandle& k, int device, std::string* err) {
  return cached_occupancy(k.fn, decode::kThreads, k.smem_bytes, device, "moe", err);
}

std::string weight_reason(const char* name, const MoeWeight& w, int K, int N, int bits) {
  const std::string pre = std::string("moe: ") + name + " ";
  const int bk = format::block_k(bits);
  if (K <= 0 || K % bk != 0)
    return pre + "needs K to be a positive multiple of " + str(bk) + " (int" + str(bits) + "), got K = " + str(K);
  if (N <= 0 || N % format::kBlockN != 0) return pre + "needs N to be a positive multiple of 64, got N = " + str(N);
  if (w.channelwise) {
    if (w.group <= 0 || K % w.group != 0)
      return pre + "channelwise scales need a replica group dividing K = " + str(K) + ", got group = " + str(w.group);
  } else {
    if (w.group != 32 && w.group != 64 && w.group != 128)
      return pre + "group must be 32, 64 or 128 (or channelwise), got group = " + str(w.group);
    if (K % w.group != 0) return pre + "group = " + str(w.group) + " must divide K = " + str(K);
  }
  if (static_cast<long long>(K / 32) * N > kIntMax)
    return pre + "K * N / 32 must fit in int32, got K = " + str(K) + ", N = " + str(N);
  return "";
}

struct GemmPlan {
  int K = 0, N = 0, ncols = 0, quads = 0, kblocks = 0;
  bool fold = false;
  bool early = false;  // w2's swap instance that copies its first weights before its dependency wait
  int occupancy = 0;
  long long grid = 0;
  int splits = 1;
  KernelHandle kernel;
};

struct Plan {
  int bm = 16, mt = 1;
  bool swap = false;  // bm == kSwapBlockM: swap_gemm_kernel (moe_swap.cuh)
  long long slots = 0, max_blocks = 0;
  bool gather = false;
  GemmPlan g13, g2;
  int align_threads = 128;
  long long align_smem = 0;
  long long align_grid = 1;
  long long zero_n = 0;  // float4s
  size_t o_sorted = 0, o_eids = 0, o_npp = 0, o_slot = 0, o_xg = 0, o_h = 0, o_out = 0, o_a = 0, total = 0;
  bool pdl = false;
};

bool plan_gemm(const MoeProblem& p, const MoeWeight& w, int K, int N, const Plan& pl, bool is_w2, GemmPlan* g,
               std::string* err) {
  g->K = K;
  g->N = N;
  g->ncols = N / format::kBlockN;
  g->quads = (g->ncols + decode::kWarps - 1) / decode::kWarps;
  g->kblocks = K / format::block_k(p.bits);
  g->fold = pl.mt == 1 && (w.channelwise || p.bits == 8 || w.group >= 64);
  const bool bf16 = p.dtype == DType::kBFloat16;
  const bool zeros = w.zeros != nullptr;
  if (pl.swap) {
    g->early = is_w2;  // w2 launches two kernels after the sort: its weights need nothing later
    g->kernel = p.bits == 4 ? swap_handle_int4(bf16, zeros, g->fold, g->early)
                            : swap_handle_int8(bf16, zeros, g->fold, g->early);
  } else {
    g->kernel = p.bits == 4 ? gemm_handle_int4(bf16, pl.mt, zeros, g->fold)
                            : gemm_handle_int8(bf16, pl.mt, zeros, g->fold);
  }
  if (g->kernel.fn == nullptr) {
    *err = "moe: no expert GEMM instance for block_m = " + str(pl.bm);
    return false;
  }
  g->occupancy = occupancy(g->kernel, p.device, err);
  if (g->occupancy == 0) return false;
  const long long slots = static_cast<long long>(g->occupancy) * p.sm_count;
  const long long segments = static_cast<long long>(g->quads) * pl.max_blocks;
  if (!p.deterministic) {
    g->splits = 1;
    g->grid = std::max(1LL, std::min(slots, ceil_div(segments * g->kblocks, decode::kMinUnitsPerCta)));
  } else {
    const long long plane = pl.slots * N * 4;
    long long s = std::max(1LL, slots / std::max(1LL, segments));
    s = std::min<long long>(s, std::max(1, g->kblocks / decode::kMinUnitsPerCta));
    s = std::min<long long>(s, std::max(1LL, static_cast<long long>(decode::kMaxPartialBytes) / plane));
    g->splits = static_cast<int>(s);
    g->grid = std::max(1LL, segments * s);
  }
  if (g->grid > kIntMax) {
    *err = "moe: grid of " + str(g->grid) + " CTAs exceeds the launch limit (T * top_k = " + str(pl.slots) + ")";
    return false;
  }
  return true;
}

bool make_plan(const MoeProblem& p, int block_m, Plan* pl, std::string* err) {
  pl->bm = block_m;
  pl->swap = block_m == kSwapBlockM;
  pl->mt = pl->swap ? 1 : block_m / 16;
  pl->slots = static_cast<long long>(p.T) * p.top_k;
  pl->max_blocks = (pl->slots + std::min<long long>(p.E, pl->slots) * (block_m - 1)) / block_m;
  pl->gather = p.w13.perm != nullptr;
  pl->pdl = p.cc_major >= 9;
  if (!plan_gemm(p, p.w13, p.H, 2 * p.I, *pl, false, &pl->g13, err)) return false;
  if (!plan_gemm(p, p.w2, w2_k(p), p.H, *pl, true, &pl->g2, err)) return false;

  const size_t A = 256;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t o = at;
    at = align_up(at + bytes, A);
    return o;
  };
  pl->o_sorted = take(static_cast<size_t>(pl->max_blocks) * block_m * 4);
  pl->o_eids = take(static_cast<size_t>(pl->max_blocks) * 4);
  pl->o_npp = take(4);
  pl->o_slot = take(static_cast<size_t>(pl->slots) * 4);
  pl->o_xg = take(pl->gather ? static_cast<size_t>(pl->slots) * p.H * 2 : 0);
  const size_t h_bytes = static_cast<size_t>(pl->g13.splits) * pl->slots * 2 * p.I * 4;
  const size_t out_bytes = p.deterministic ? static_cast<size_t>(pl->g2.splits) * pl->slots * p.H * 4
                                           : static_cast<size_t>(p.T) * p.H * 4;
  pl->o_h = take(h_bytes);
  pl->o_out = take(out_bytes);  // right after h (2I * 4 bytes per row: a multiple of 256), zeroed with it
  pl->o_a = take(static_cast<size_t>(pl->slots) * w2_k(p) * 2);  // a is w2's input: K2 wide (pad columns 0)
  pl->total = at;
  pl->zero_n = p.deterministic ? 0 : static_cast<long long>((pl->o_out + out_bytes - pl->o_h) / 16);

  int warps = align_warps(pl->slots);
  while (warps > 1 && align_smem_bytes(warps, p.E) > kAlignMaxSmem) --warps;
  pl->align_threads = 32 * warps;
  pl->align_smem = align_smem_bytes(warps, p.E);
  const long long help = pl->zero_n + (pl->gather ? pl->slots * (p.H / 8) : 0);
  pl->align_grid = 1 + (help == 0 ? 0 : std::min<long long>(2LL * p.sm_count, ceil_div(help, 8LL * pl->align_threads)));
  return true;
}

std::string launch_kernel(const void* fn, long long grid, int block, long long smem, bool pdl, void** args,
                          cudaStream_t stream, const char* what) {
  const cudaError_t e =
      launch_ex(fn, dim3(static_cast<unsigned>(grid)), block, static_cast<size_t>(smem), pdl, args, stream);
  if (e != cudaSuccess) return std::string("moe: ") + what + " launch failed: " + cudaGetErrorString(e);
  return "";
}

std::string launch_align(const AlignParams& ap, long long grid, int threads, long long smem, int device, bool pdl,
                         cudaStream_t stream) {
  const void* fn = reinterpret_cast<const void*>(&align_kernel);
  if (smem > 48 * 1024) {
    const std::string why = ensure_dynamic_smem(fn, static_cast<int>(smem), device);
    if (!why.empty()) return "moe: align kernel: " + why;
  }
  AlignParams arg = ap;
  void* args[] = {&arg};
  return launch_kernel(fn, grid, threads, smem, pdl, args, stream, "align kernel");
}

GemmParams gemm_params(const MoeProblem& p, const MoeWeight& w, const GemmPlan& g, const Plan& pl,
                       unsigned char* ws, const uint16_t* x, float* out, int row_div, int out_div, bool scale_out) {
  GemmParams gp{};
  gp.x = x;
  gp.packed = reinterpret_cast<const uint8_t*>(w.packed);
  gp.scales = static_cast<const uint16_t*>(w.scales);
  gp.zeros = static_cast<const uint16_t*>(w.zeros);
  gp.expert_packed = static_cast<long long>(g.ncols) * g.kblocks * format::kBlockBytes;
  gp.expert_scales = static_cast<long long>(g.K / w.group) * g.N;
  gp.sorted_ids = reinterpret_cast<const int32_t*>(ws + pl.o_sorted);
  gp.expert_ids = reinterpret_cast<const int32_t*>(ws + pl.o_eids);
  gp.num_post_pad = reinterpret_cast<const int32_t*>(ws + pl.o_npp);
  gp.topk_weights = p.topk_weights;
  gp.out = out;
  gp.plane = pl.slots * g.N;
  gp.K = g.K;
  gp.N = g.N;
  gp.kblocks = g.kblocks;
  gp.ncols = g.ncols;
  gp.quads = g.quads;
  gp.gshift = w.channelwise ? 31 : log2_group(w.group);
  // Channelwise folds every 128 rows, as the dense decode kernel does (decode_launch.cu).
  gp.fold_mask = !g.fold ? 0 : (w.channelwise ? 128 : w.group) / format::block_k(p.bits) - 1;
  gp.evict_first = pl.slots <= pl.bm ? 1 : 0;
  gp.num_slots = static_cast<int>(pl.slots);
  gp.num_experts = p.E;
  gp.row_div = row_div;
  gp.out_div = out_div;
  gp.scale_out = scale_out ? 1 : 0;
  gp.weights_f32 = p.weights_f32 ? 1 : 0;
  gp.mode = p.deterministic ? kModeSplit : kModeAtomic;
  gp.splits = g.splits;
  return gp;
}

const void* act_fn(bool bf16, MoeActivation act, bool perm) {
  const bool gelu = act == MoeActivation::kGelu;
#define SF_ACT(B, A, P) reinterpret_cast<const void*>(&act_kernel<B, A, P>)
  if (bf16) {
    if (gelu) return perm ? SF_ACT(true, kGelu, true) : SF_ACT(true, kGelu, false);
    return perm ? SF_ACT(true, kSilu, true) : SF_ACT(true, kSilu, false);
  }
  if (gelu) return perm ? SF_ACT(false, kGelu, true) : SF_ACT(false, kGelu, false);
  return perm ? SF_ACT(false, kSilu, true) : SF_ACT(false, kSilu, false);
#undef SF_ACT
}

long long elem_grid(long long items, int sm_count) {
  return std::max(1LL, std::min(ceil_div(items, kElemThreads), 8LL * sm_count));
}

}  // namespace

std::string can_align(long long slots, int experts, int block_m, int cc_major) {
  if (block_m != kSwapBlockM && block_m != 16 && block_m != 32 && block_m != 64 && block_m != 128 && block_m != 256)
    return "moe: block_m must be 8, 16, 32, 64, 128 or 256, got block_m = " + str(block_m);
  if (experts <= 0) return "moe: the number of experts must be positive, got E = " + str(experts);
  if (slots < 0) return "moe: T * top_k must be >= 0, got " + str(slots);
  if (sorted_len(slots, experts, block_m) > kIntMax)
    return "moe: T * top_k + E * (block_m - 1) must fit in int32, got T * top_k = " + str(slots) + ", E = " +
           str(experts);
  if (align_smem_bytes(1, experts) > kAlignMaxSmem)
    return "moe: the sort keeps per-expert counters in shared memory; E must be <= " +
           str((kAlignMaxSmem - 33 * 4) / 12) + ", got E = " + str(experts);
  if (cc_major != 0 && cc_major < 8)
    return "moe: needs compute capability 8.0 or newer, got " + str(cc_major) + ".x";
  return "";
}

std::string align(const void* ids, bool ids_int64, long long slots, int experts, int block_m,
                  const int32_t* expert_map, int map_len, int32_t* sorted_ids, long long sorted_entries,
                  int32_t* expert_ids, long long block_entries, int32_t* num_post_pad, int device, int cc_major,
                  cudaStream_t stream) {
  std::string why = can_align(slots, experts, block_m, cc_major);
  if (!why.empty()) return why;
  AlignParams ap{};
  ap.ids = ids;
  ap.ids_int64 = ids_int64 ? 1 : 0;
  ap.expert_map = expert_map;
  ap.map_len = map_len;
  ap.num_experts = experts;
  ap.num_slots = static_cast<int>(slots);
  ap.block_m = block_m;
  ap.sorted_len = static_cast<int>(sorted_entries);
  ap.blocks_len = static_cast<int>(block_entries);
  ap.sorted_ids = sorted_ids;
  ap.expert_ids = expert_ids;
  ap.num_post_pad = num_post_pad;
  int warps = align_warps(slots);
  while (warps > 1 && align_smem_bytes(warps, experts) > kAlignMaxSmem) --warps;
  DeviceGuard scope(device);
  return launch_align(ap, 1, 32 * warps, align_smem_bytes(warps, experts), device, cc_major >= 9, stream);
}

std::string can_implement(const MoeProblem& p, int block_m) {
  if (p.bits != 4 && p.bits != 8) return "moe: bits must be 4 or 8, got bits = " + str(p.bits);
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16)
    return "moe: dtype must be float16 or bfloat16, got dtype = " + str(static_cast<int>(p.dtype));
  if (p.T < 0) return "moe: T must be >= 0, got T = " + str(p.T);
  if (p.top_k < 1) return "moe: top_k must be >= 1, got top_k = " + str(p.top_k);
  if (p.E < 1) return "moe: E must be >= 1, got E = " + str(p.E);
  if (p.expert_map != nullptr && p.map_len < 1)
    return "moe: expert_map must hold the global experts, got map_len = " + str(p.map_len);
  if (p.weights_on_input && p.top_k != 1)
    return "moe: weights_on_input (apply_router_weight_on_input) needs top_k == 1, got top_k = " + str(p.top_k);
  if (p.activation != MoeActivation::kSilu && p.activation != MoeActivation::kGelu)
    return "moe: activation must be 0 (silu) or 1 (gelu), got " + str(static_cast<int>(p.activation));
  if (p.I <= 0 || p.I % 8 != 0) return "moe: I must be a positive multiple of 8, got I = " + str(p.I);
  std::string why = weight_reason("w13", p.w13, p.H, 2 * p.I, p.bits);
  if (!why.empty()) return why;
  if (p.I_w2 != 0 && (p.I_w2 < p.I || p.w2.perm == nullptr))
    return "moe: w2's packed K (I_w2 = " + str(p.I_w2) + ") may exceed I = " + str(p.I) +
           " only for an act-order w2 (perm) in the padded layout, and never be smaller";
  why = weight_reason("w2", p.w2, w2_k(p), p.H, p.bits);
  if (!why.empty()) return why;
  const long long slots = static_cast<long long>(p.T) * p.top_k;
  why = can_align(slots, p.E, block_m, p.cc_major);
  if (!why.empty()) return why;
  if (slots * std::max(std::max(2 * p.I, w2_k(p)), p.H) > (1LL << 40))
    return "moe: T * top_k * max(2I, H) is too large for the intermediate buffers, got T * top_k = " + str(slots);
  if (p.sm_count <= 0 && p.cc_major != 0) return "moe: sm_count must be set, got sm_count = " + str(p.sm_count);
  return "";
}

size_t workspace_bytes(const MoeProblem& p, int block_m) {
  if (!can_implement(p, block_m).empty() || p.T == 0) return 0;
  Plan pl;
  std::string err;
  if (!make_plan(p, block_m, &pl, &err)) return 0;
  return pl.total;
}

std::string describe(const MoeProblem& p, int block_m) {
  std::string why = can_implement(p, block_m);
  if (!why.empty()) return why;
  if (p.T == 0) return "moe: T = 0, nothing to launch";
  Plan pl;
  if (!make_plan(p, block_m, &pl, &why)) return why;
  auto gemm = [](const char* name, const GemmPlan& g) {
    return std::string(" ") + name + "[grid=" + str(g.grid) + " splits=" + str(g.splits) + " occupancy=" +
           str(g.occupancy) + (g.fold ? " fold" : "") + (g.early ? " early" : "") + "]";
  };
  return "moe fused int" + str(p.bits) + (p.dtype == DType::kBFloat16 ? " bf16" : " fp16") + " block_m=" +
         str(pl.bm) + (pl.swap ? " swap" : "") + " max_blocks=" + str(pl.max_blocks) +
         " mode=" + (p.deterministic ? "split" : "atomic") +
         gemm("w13", pl.g13) + gemm("w2", pl.g2) + " align_grid=" + str(pl.align_grid) +
         " act_order=" + str(pl.gather ? 1 : 0) + str(p.w2.perm != nullptr ? 1 : 0) + " pdl=" + str(pl.pdl ? 1 : 0);
}

std::string launch(const MoeProblem& p, int block_m, cudaStream_t stream) {
  std::string why = can_implement(p, block_m);
  if (!why.empty()) return why;
  if (p.T == 0) return "";
  if (p.x == nullptr || p.y == nullptr || p.topk_ids == nullptr || p.topk_weights == nullptr ||
      p.w13.packed == nullptr || p.w13.scales == nullptr || p.w2.packed == nullptr || p.w2.scales == nullptr)
    return "moe: null x, y, topk, packed or scales pointer";
  if (!aligned(p.x, 16) || !aligned(p.y, 16)) return "moe: x and y must be 16-byte aligned";
  if (!aligned(p.w13.packed, 16) || !aligned(p.w2.packed, 16)) return "moe: packed weights must be 16-byte aligned";
  if (!aligned(p.w13.scales, 4) || !aligned(p.w2.scales, 4) || (p.w13.zeros && !aligned(p.w13.zeros, 4)) ||
      (p.w2.zeros && !aligned(p.w2.zeros, 4)))
    return "moe: scales and zeros must be 4-byte aligned";
  Plan pl;
  if (!make_plan(p, block_m, &pl, &why)) return why;
  if (p.workspace == nullptr || p.workspace_bytes < pl.total)
    return "moe: workspace of " + str(static_cast<long long>(pl.total)) + " bytes required, got " +
           str(p.workspace == nullptr ? 0 : static_cast<long long>(p.workspace_bytes));
  if (!aligned(p.workspace, 256)) return "moe: workspace must be 256-byte aligned";
  DeviceGuard scope(p.device);
  unsigned char* ws = static_cast<unsigned char*>(p.workspace);
  const bool bf16 = p.dtype == DType::kBFloat16;
  const uint16_t* x = static_cast<const uint16_t*>(p.x);
  int32_t* slot_expert = reinterpret_cast<int32_t*>(ws + pl.o_slot);
  float* h = reinterpret_cast<float*>(ws + pl.o_h);
  float* out = reinterpret_cast<float*>(ws + pl.o_out);
  uint16_t* a = reinterpret_cast<uint16_t*>(ws + pl.o_a);
  uint16_t* xg = pl.gather ? reinterpret_cast<uint16_t*>(ws + pl.o_xg) : nullptr;

  // 1. align (+ zero h / y32, + act-order gather of x)
  AlignParams ap{};
  ap.ids = p.topk_ids;
  ap.ids_int64 = p.ids_int64 ? 1 : 0;
  ap.expert_map = p.expert_map;
  ap.map_len = p.map_len;
  ap.num_experts = p.E;
  ap.num_slots = static_cast<int>(pl.slots);
  ap.block_m = pl.bm;
  ap.sorted_len = static_cast<int>(pl.max_blocks * pl.bm);
  ap.blocks_len = static_cast<int>(pl.max_blocks);
  ap.sorted_ids = reinterpret_cast<int32_t*>(ws + pl.o_sorted);
  ap.expert_ids = reinterpret_cast<int32_t*>(ws + pl.o_eids);
  ap.num_post_pad = reinterpret_cast<int32_t*>(ws + pl.o_npp);
  ap.slot_expert = slot_expert;
  ap.zero = reinterpret_cast<float4*>(h);
  ap.zero_n = pl.zero_n;
  ap.x = x;
  ap.perm = p.w13.perm;
  ap.xg = xg;
  ap.K = p.H;
  ap.top_k = p.top_k;
  why = launch_align(ap, pl.align_grid, pl.align_threads, pl.align_smem, p.device, pl.pdl, stream);
  if (!why.empty()) return why;

  // 2. w13: h[slot] (+)= x[token | slot] @ W13[e]^T
  {
    GemmParams gp = pl.gather ? gemm_params(p, p.w13, pl.g13, pl, ws, xg, h, 1, 1, false)
                              : gemm_params(p, p.w13, pl.g13, pl, ws, x, h, p.top_k, 1, false);
    void* args[] = {&gp};
    why = launch_kernel(pl.g13.kernel.fn, pl.g13.grid, decode::kThreads, pl.g13.kernel.smem_bytes, pl.pdl, args,
                        stream, "w13 GEMM");
    if (!why.empty()) return why;
  }

  // 3. a[slot] = act(gate) * up
  {
    ActParams acp{};
    acp.h = h;
    acp.plane = pl.slots * 2 * p.I;
    acp.splits = pl.g13.splits;
    acp.slot_expert = slot_expert;
    acp.perm = p.w2.perm;
    acp.topk_weights = p.topk_weights;
    acp.weights_f32 = p.weights_f32 ? 1 : 0;
    acp.weights_on_input = p.weights_on_input ? 1 : 0;
    acp.a = a;
    acp.num_slots = static_cast<int>(pl.slots);
    acp.I = p.I;
    acp.K2 = w2_k(p);
    void* args[] = {&acp};
    why = launch_kernel(act_fn(bf16, p.activation, p.w2.perm != nullptr),
                        elem_grid(pl.slots * (acp.K2 / 8), p.sm_count), kElemThreads, 0, pl.pdl, args, stream,
                        "activation kernel");
    if (!why.empty()) return why;
  }

  // 4. w2: y32[token] += w * (a[slot] @ W2[e]^T)   (deterministic: o[split][slot] = w * piece)
  {
    GemmParams gp = gemm_params(p, p.w2, pl.g2, pl, ws, a, out, 1, p.top_k, !p.weights_on_input);
    void* args[] = {&gp};
    why = launch_kernel(pl.g2.kernel.fn, pl.g2.grid, decode::kThreads, pl.g2.kernel.smem_bytes, pl.pdl, args, stream,
                        "w2 GEMM");
    if (!why.empty()) return why;
  }

  // 5. y = round(y32) | ordered sum of the pieces
  {
    FinalizeParams fp{};
    fp.y32 = out;
    fp.o = out;
    fp.plane = pl.slots * p.H;
    fp.splits = pl.g2.splits;
    fp.slot_expert = slot_expert;
    fp.top_k = p.top_k;
    fp.deterministic = p.deterministic ? 1 : 0;
    fp.y = static_cast<uint16_t*>(p.y);
    fp.T = p.T;
    fp.H = p.H;
    void* args[] = {&fp};
    const void* fn = bf16 ? reinterpret_cast<const void*>(&finalize_kernel<true>)
                          : reinterpret_cast<const void*>(&finalize_kernel<false>);
    why = launch_kernel(fn, elem_grid(static_cast<long long>(p.T) * (p.H / 8), p.sm_count), kElemThreads, 0, pl.pdl,
                        args, stream, "finalize kernel");
    if (!why.empty()) return why;
  }
  return "";
}

}  // namespace moe
}  // namespace swordfish
