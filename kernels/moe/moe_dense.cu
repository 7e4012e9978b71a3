// The dense MoE path's own kernels and its host side (moe_dense.h): the
// token-sorted layout a grouped GEMM consumes, the stacked-expert dequant,
// the activation between the two GEMMs and the top-k sum. The op layer
// (kernels/torch/ops_moe.cpp) runs the two bf16 grouped GEMMs between them.
//
//   index_kernel   one CTA: offs[e] = the end row of expert e's padded run
//                  (block counts from expert_ids, a prefix sum); pos := -1
//   gather_kernel  a[j] = x[sorted_ids[j] / top_k] (times the router weight
//                  under weights_on_input), zeros for padding rows;
//                  pos[sorted_ids[j]] = j
//   act_kernel     a2[j] = act(h[j, :I]) * h[j, I:] for j < num_post_pad
//   sum_kernel     y[t] = sum_j w[t, j] * o[pos[t * top_k + j]], in j order
//                  in fp32 (bit-stable: no atomics anywhere on this path)
#include "kernels/moe/moe_dense.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstddef>
#include <string>

#include "kernels/common/format.h"
#include "kernels/dense/dense.h"
#include "kernels/moe/moe.h"
#include "kernels/moe/moe_act.cuh"
#include "kernels/prefill/prefill.h"

namespace swordfish {
namespace moe {
namespace {

constexpr int kThreads = 256;

struct DenseParams {
  const uint16_t* x;           // (T, H)
  int32_t* sorted_ids;         // (rows)
  int32_t* expert_ids;         // (blocks)
  int32_t* num_post_pad;
  int32_t* offs;               // (E)
  int32_t* pos;                // (slots)
  uint16_t* a;                 // (rows, H)
  const uint16_t* h;           // (rows, 2I)
  uint16_t* a2;                // (rows, I)
  const uint16_t* o;           // (rows, H)
  uint16_t* y;                 // (T, H)
  const void* topk_weights;    // (T * top_k)
  int weights_f32;
  int weights_on_input;
  int rows, slots, E, block_m, top_k, T, H, I;
};

SF_DEVICE float router_weight(const DenseParams& p, int s, bool bf16) {
  if (p.weights_f32) return static_cast<const float*>(p.topk_weights)[s];
  const uint16_t w = static_cast<const uint16_t*>(p.topk_weights)[s];
  return bf16 ? decode::detail::to_f32<true>(w) : decode::detail::to_f32<false>(w);
}

template <bool BF16>
SF_DEVICE void unpack8(uint4 v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = decode::detail::to_f32<BF16>(static_cast<uint16_t>(w[i] & 0xffffu));
    f[2 * i + 1] = decode::detail::to_f32<BF16>(static_cast<uint16_t>(w[i] >> 16));
  }
}

// One CTA of kThreads; dynamic shared memory: E ints.
__global__ void index_kernel(const __grid_constant__ DenseParams p) {
  extern __shared__ int32_t rows_of[];
  for (int e = threadIdx.x; e < p.E; e += blockDim.x) rows_of[e] = 0;
  for (int s = threadIdx.x; s < p.slots; s += blockDim.x) p.pos[s] = -1;
  __syncthreads();
  const int blocks = *p.num_post_pad / p.block_m;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
    const int e = p.expert_ids[b];
    if (static_cast<unsigned>(e) < static_cast<unsigned>(p.E)) atomicAdd(&rows_of[e], p.block_m);
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // E is at most a few hundred: a serial prefix sum is a few microseconds at worst
    int32_t end = 0;
    for (int e = 0; e < p.E; ++e) p.offs[e] = end += rows_of[e];
  }
}

// Grid-stride over rows x H / 8 items.
template <bool BF16>
__global__ void gather_kernel(const __grid_constant__ DenseParams p) {
  const int h8 = p.H / 8;
  const int npp = *p.num_post_pad;
  const long long items = static_cast<long long>(npp) * h8;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long it = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; it < items; it += stride) {
    const int j = static_cast<int>(it / h8);
    const int c = static_cast<int>(it - static_cast<long long>(j) * h8) * 8;
    const int s = p.sorted_ids[j];
    uint4 v = make_uint4(0, 0, 0, 0);
    if (static_cast<unsigned>(s) < static_cast<unsigned>(p.slots)) {
      if (c == 0) p.pos[s] = j;
      v = *reinterpret_cast<const uint4*>(p.x + static_cast<long long>(s / p.top_k) * p.H + c);
      if (p.weights_on_input) {
        float f[8];
        unpack8<BF16>(v, f);
        const float w = router_weight(p, s, BF16);
#pragma unroll
        for (int i = 0; i < 8; ++i) f[i] *= w;
        v = pack8<BF16>(f);
      }
    }
    *reinterpret_cast<uint4*>(p.a + static_cast<long long>(j) * p.H + c) = v;
  }
}

// Grid-stride over rows x I / 8 items; padding rows (zero input) give zeros.
template <bool BF16, int ACT>
__global__ void dense_act_kernel(const __grid_constant__ DenseParams p) {
  const int i8 = p.I / 8;
  const long long items = static_cast<long long>(*p.num_post_pad) * i8;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long it = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; it < items; it += stride) {
    const int j = static_cast<int>(it / i8);
    const int c = static_cast<int>(it - static_cast<long long>(j) * i8) * 8;
    const uint16_t* row = p.h + static_cast<long long>(j) * 2 * p.I;
    float g[8], u[8], v[8];
    unpack8<BF16>(*reinterpret_cast<const uint4*>(row + c), g);
    unpack8<BF16>(*reinterpret_cast<const uint4*>(row + p.I + c), u);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = activate<ACT>(g[i]) * u[i];
    *reinterpret_cast<uint4*>(p.a2 + static_cast<long long>(j) * p.I + c) = pack8<BF16>(v);
  }
}

// Grid-stride over T x H / 8 items.
template <bool BF16>
__global__ void sum_kernel(const __grid_constant__ DenseParams p) {
  const int h8 = p.H / 8;
  const long long items = static_cast<long long>(p.T) * h8;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long it = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; it < items; it += stride) {
    const int t = static_cast<int>(it / h8);
    const int c = static_cast<int>(it - static_cast<long long>(t) * h8) * 8;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int k = 0; k < p.top_k; ++k) {
      const int s = t * p.top_k + k;
      const int j = p.pos[s];
      if (j < 0) continue;  // an expert not on this rank (or out of range): contributes nothing
      const float w = p.weights_on_input ? 1.f : router_weight(p, s, BF16);
      float f[8];
      unpack8<BF16>(*reinterpret_cast<const uint4*>(p.o + static_cast<long long>(j) * p.H + c), f);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += w * f[i];
    }
    *reinterpret_cast<uint4*>(p.y + static_cast<long long>(t) * p.H + c) = pack8<BF16>(acc);
  }
}

std::string str(long long v) { return std::to_string(v); }

long long grid_for(long long items, int sm_count) {
  return std::max(1LL, std::min((items + kThreads - 1) / kThreads, 8LL * std::max(sm_count, 1)));
}

std::string launched(const char* what) {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string("moe dense: ") + what + " launch failed: " +
                                                cudaGetErrorString(e);
}

// K: the weight's packed rows; K_in: the rows written (w2's padded act-order layout skips its pad rows).
GemmProblem expert_problem(const MoeProblem& p, const MoeWeight& w, int K, int N, int K_in = 0) {
  GemmProblem g;
  g.packed = w.packed;
  g.scales = w.scales;
  g.zeros = w.zeros;
  g.perm = w.perm;
  g.K = K;
  g.K_in = K_in == K ? 0 : K_in;
  g.N = N;
  g.bits = p.bits;
  g.group = w.group;
  g.channelwise = w.channelwise;
  g.dtype = p.dtype;
  g.device = p.device;
  g.sm_count = p.sm_count;
  g.cc_major = p.cc_major;
  g.cc_minor = p.cc_minor;
  return g;
}

}  // namespace

long long dense_rows(const MoeProblem& p) {
  return sorted_len(static_cast<long long>(p.T) * p.top_k, p.E, kDenseBlockM);
}

namespace {

// The workspace, each piece 256-byte aligned. Dense: w is the dequantized
// scratch and the GEMMs' outputs come from the op layer. Grouped: no w; h
// (rows, 2I) and the w2 output over a (dead once w13 has run).
struct Workspace {
  size_t sorted = 0, eids = 0, npp = 0, offs = 0, pos = 0, a = 0, a2 = 0, w = 0, h = 0, total = 0;
};

size_t align_up(size_t v) { return (v + 255) / 256 * 256; }

Workspace workspace(const MoeProblem& p, int block_m, long long rows, bool grouped) {
  const long long slots = static_cast<long long>(p.T) * p.top_k;
  const long long blocks = blocks_len(slots, p.E, block_m);
  Workspace l;
  size_t at = 0;
  auto take = [&](size_t bytes) { const size_t o = at; at = align_up(at + bytes); return o; };
  l.sorted = take(rows * 4);
  l.eids = take(blocks * 4);
  l.npp = take(4);
  l.offs = take(static_cast<size_t>(p.E) * 4);
  l.pos = take(slots * 4);
  l.a = take(static_cast<size_t>(rows) * p.H * 2);
  l.a2 = take(static_cast<size_t>(rows) * p.I * 2);
  if (grouped) {
    l.h = take(static_cast<size_t>(rows) * 2 * p.I * 2);
  } else {
    l.w = take(static_cast<size_t>(p.E) * 2 * p.I * p.H * 2);  // W13 (E, 2I, H), then W2 (E, H, I) over it
  }
  l.total = at;
  return l;
}

Workspace workspace(const MoeProblem& p) { return workspace(p, kDenseBlockM, dense_rows(p), false); }

// The layout both paths share, over the workspace: the sort, positions, gathered rows.
DenseParams layout_params(const MoeProblem& p, unsigned char* ws, const Workspace& l, int block_m, long long rows) {
  DenseParams d{};
  d.x = static_cast<const uint16_t*>(p.x);
  d.sorted_ids = reinterpret_cast<int32_t*>(ws + l.sorted);
  d.expert_ids = reinterpret_cast<int32_t*>(ws + l.eids);
  d.num_post_pad = reinterpret_cast<int32_t*>(ws + l.npp);
  d.offs = reinterpret_cast<int32_t*>(ws + l.offs);
  d.pos = reinterpret_cast<int32_t*>(ws + l.pos);
  d.a = reinterpret_cast<uint16_t*>(ws + l.a);
  d.a2 = reinterpret_cast<uint16_t*>(ws + l.a2);
  d.y = static_cast<uint16_t*>(p.y);
  d.topk_weights = p.topk_weights;
  d.weights_f32 = p.weights_f32 ? 1 : 0;
  d.weights_on_input = p.weights_on_input ? 1 : 0;
  d.rows = static_cast<int>(rows);
  d.slots = p.T * p.top_k;
  d.E = p.E;
  d.block_m = block_m;
  d.top_k = p.top_k;
  d.T = p.T;
  d.H = p.H;
  d.I = p.I;
  return d;
}

std::string check_workspace(const MoeProblem& p, const Workspace& l, const char* path) {
  if (p.workspace == nullptr || p.workspace_bytes < l.total)
    return std::string("moe ") + path + ": workspace of " + str(static_cast<long long>(l.total)) +
           " bytes required, got " + str(p.workspace == nullptr ? 0 : static_cast<long long>(p.workspace_bytes));
  if (reinterpret_cast<uintptr_t>(p.workspace) % 256 != 0)
    return std::string("moe ") + path + ": workspace must be 256-byte aligned";
  if (reinterpret_cast<uintptr_t>(p.x) % 16 != 0 || reinterpret_cast<uintptr_t>(p.y) % 16 != 0)
    return std::string("moe ") + path + ": x and y must be 16-byte aligned";
  return "";
}

// align -> index (offs, pos := -1) -> gather: d.a holds the rows in expert runs of d.block_m.
std::string sort_and_gather(const MoeProblem& p, DenseParams& d, cudaStream_t stream) {
  const long long slots = static_cast<long long>(p.T) * p.top_k;
  std::string why = align(p.topk_ids, p.ids_int64, slots, p.E, d.block_m, p.expert_map, p.map_len, d.sorted_ids,
                          d.rows, d.expert_ids, blocks_len(slots, p.E, d.block_m), d.num_post_pad, p.device,
                          p.cc_major, stream);
  if (!why.empty()) return why;
  index_kernel<<<1, kThreads, static_cast<size_t>(p.E) * sizeof(int32_t), stream>>>(d);
  if (!(why = launched("index kernel")).empty()) return why;
  // (the kernel stops at num_post_pad)
  const long long gather_grid = grid_for(static_cast<long long>(d.rows) * (p.H / 8), p.sm_count);
  if (p.dtype == DType::kBFloat16) gather_kernel<true><<<gather_grid, kThreads, 0, stream>>>(d);
  else gather_kernel<false><<<gather_grid, kThreads, 0, stream>>>(d);
  return launched("gather kernel");
}

// a2 = act(h[:, :I]) * h[:, I:] over the rows in use.
std::string run_act(const MoeProblem& p, const DenseParams& d, cudaStream_t stream) {
  const long long act_grid = grid_for(static_cast<long long>(d.rows) * (p.I / 8), p.sm_count);
  const bool gelu = p.activation == MoeActivation::kGelu;
  if (p.dtype == DType::kBFloat16) {
    if (gelu) dense_act_kernel<true, kGelu><<<act_grid, kThreads, 0, stream>>>(d);
    else dense_act_kernel<true, kSilu><<<act_grid, kThreads, 0, stream>>>(d);
  } else {
    if (gelu) dense_act_kernel<false, kGelu><<<act_grid, kThreads, 0, stream>>>(d);
    else dense_act_kernel<false, kSilu><<<act_grid, kThreads, 0, stream>>>(d);
  }
  return launched("act kernel");
}

// y[t] = sum over k of w * o[pos[t k]] in fp32.
std::string run_sum(const MoeProblem& p, const DenseParams& d, cudaStream_t stream) {
  const long long sum_grid = grid_for(static_cast<long long>(p.T) * (p.H / 8), p.sm_count);
  if (p.dtype == DType::kBFloat16) sum_kernel<true><<<sum_grid, kThreads, 0, stream>>>(d);
  else sum_kernel<false><<<sum_grid, kThreads, 0, stream>>>(d);
  return launched("sum kernel");
}

}  // namespace

std::string dense_can_implement(const MoeProblem& p) {
  if (p.grouped_gemm == nullptr || p.grouped_gemm->run == nullptr)
    return "the dense MoE path needs a grouped GEMM from the op layer (torch's _grouped_mm), none was supplied";
  // torch._grouped_mm's CUTLASS kernels take bf16 on sm90 / sm100; anything else goes to its fallback, which
  // synchronises with the host (no CUDA graphs) and loops over the experts.
  if (p.dtype != DType::kBFloat16) return "the dense MoE path needs bfloat16 activations (torch._grouped_mm's kernel)";
  if (p.cc_major != 9 && p.cc_major != 10)
    return "the dense MoE path needs sm90 or sm100 (torch._grouped_mm's kernel), got compute capability " +
           str(p.cc_major) + "." + str(p.cc_minor);
  if (p.bits != 4 && p.bits != 8) return "bits must be 4 or 8, got " + str(p.bits);
  if (p.E < 1 || p.E > kDenseMaxExperts)
    return "the dense MoE path needs 1 <= E <= " + str(kDenseMaxExperts) + ", got E = " + str(p.E);
  if (p.H % 8 != 0 || p.I % 8 != 0)
    return "the grouped GEMM needs H and I to be multiples of 8, got H = " + str(p.H) + ", I = " + str(p.I);
  std::string why = dense::can_implement_dequant(expert_problem(p, p.w13, p.H, 2 * p.I));
  if (!why.empty()) return "w13: " + why;
  why = dense::can_implement_dequant(expert_problem(p, p.w2, w2_k(p), p.H, p.I));
  if (!why.empty()) return "w2: " + why;
  return can_align(static_cast<long long>(p.T) * p.top_k, p.E, kDenseBlockM, p.cc_major);
}

size_t dense_workspace_bytes(const MoeProblem& p) { return workspace(p).total; }

std::string dense_describe(const MoeProblem& p) {
  return "dense: block_m=" + str(kDenseBlockM) + " rows<=" + str(dense_rows(p)) + " scratch=" +
         str(static_cast<long long>(p.E) * 2 * p.I * p.H * 2) + "B";
}

std::string dense_launch(const MoeProblem& p, cudaStream_t stream) {
  const Workspace l = workspace(p);
  std::string why = check_workspace(p, l, "dense");
  if (!why.empty()) return why;
  unsigned char* ws = static_cast<unsigned char*>(p.workspace);
  const long long rows = dense_rows(p);
  const MoeGroupedGemm& gg = *p.grouped_gemm;
  DenseParams d = layout_params(p, ws, l, kDenseBlockM, rows);
  void* w = ws + l.w;

  if (!(why = sort_and_gather(p, d, stream)).empty()) return why;
  why = dense::dequantize_experts(expert_problem(p, p.w13, p.H, 2 * p.I), p.E, w, dense::Layout::kNK, stream);
  if (!why.empty()) return "moe dense: w13 dequant: " + why;
  void* h = nullptr;
  why = gg.run(gg.ctx, d.a, rows, p.H, w, 2 * p.I, p.E, d.offs, &h);
  if (!why.empty()) return "moe dense: w13 grouped GEMM: " + why;
  d.h = static_cast<const uint16_t*>(h);
  if (!(why = run_act(p, d, stream)).empty()) return why;
  why = dense::dequantize_experts(expert_problem(p, p.w2, w2_k(p), p.H, p.I), p.E, w, dense::Layout::kNK, stream);
  if (!why.empty()) return "moe dense: w2 dequant: " + why;
  void* o = nullptr;
  why = gg.run(gg.ctx, d.a2, rows, p.I, w, p.H, p.E, d.offs, &o);
  if (!why.empty()) return "moe dense: w2 grouped GEMM: " + why;
  d.o = static_cast<const uint16_t*>(o);
  return run_sum(p, d, stream);
}

// ---------------------------------------------------------------- grouped path

namespace {

// The routed rows per expert the tile is chosen for: T top_k / E (global experts under a map).
double avg_rows(const MoeProblem& p) {
  return static_cast<double>(p.T) * p.top_k / static_cast<double>(std::max(1LL, global_experts(p)));
}

// Rows allocated: every padded run fits, and a whole number of tiles.
long long grouped_rows(const MoeProblem& p, int bm) {
  return blocks_len(static_cast<long long>(p.T) * p.top_k, p.E, bm) * bm;
}

// One GEMM of the layer over the stacked experts, on rows a -> out.
prefill::GroupedProblem grouped_gemm(const MoeProblem& p, const MoeWeight& w, int K, int N, int bm, long long rows,
                                     const void* a, void* out, const DenseParams* d) {
  prefill::GroupedProblem g;
  g.gemm = expert_problem(p, w, K, N);
  g.gemm.perm = nullptr;  // refused by grouped_can_implement before this is used
  g.gemm.x = a;
  g.gemm.y = out;
  g.gemm.M = static_cast<int>(rows);
  g.tile_expert = d != nullptr ? d->expert_ids : nullptr;
  g.rows_dev = d != nullptr ? d->num_post_pad : nullptr;
  g.experts = p.E;
  g.tile_rows = bm;
  return g;
}

}  // namespace

int grouped_block_m(const MoeProblem& p) {
  return prefill::grouped_tile_rows(expert_problem(p, p.w13, p.H, 2 * p.I), avg_rows(p));
}

std::string grouped_can_implement(const MoeProblem& p) {
  const int bm = grouped_block_m(p);
  if (bm == 0)
    return "the grouped MoE path needs sm90a (the prefill mainloop's grouped GEMM), device is compute capability " +
           str(p.cc_major) + "." + str(p.cc_minor);
  if (p.w13.perm != nullptr || p.w2.perm != nullptr || p.I_w2 > 0)
    return "the grouped MoE path takes no act-order experts (the fused and dense paths serve them)";
  if (p.E < 1 || p.E > kDenseMaxExperts)
    return "the grouped MoE path needs 1 <= E <= " + str(kDenseMaxExperts) + ", got E = " + str(p.E);
  const long long rows = grouped_rows(p, bm);
  if (rows > INT_MAX) return "the grouped MoE path needs its rows (" + str(rows) + ") to fit in int32";
  std::string why = prefill::grouped_can_implement(grouped_gemm(p, p.w13, p.H, 2 * p.I, bm, rows, nullptr, nullptr,
                                                                nullptr));
  if (!why.empty()) return "w13: " + why;
  why = prefill::grouped_can_implement(grouped_gemm(p, p.w2, p.I, p.H, bm, rows, nullptr, nullptr, nullptr));
  if (!why.empty()) return "w2: " + why;
  return can_align(static_cast<long long>(p.T) * p.top_k, p.E, bm, p.cc_major);
}

size_t grouped_workspace_bytes(const MoeProblem& p) {
  const int bm = grouped_block_m(p);
  return bm == 0 ? 0 : workspace(p, bm, grouped_rows(p, bm), true).total;
}

std::string grouped_describe(const MoeProblem& p) {
  const int bm = grouped_block_m(p);
  if (bm == 0) return "grouped: " + grouped_can_implement(p);
  const long long rows = grouped_rows(p, bm);
  return "grouped: block_m=" + str(bm) + " rows<=" + str(rows) + " w13[" +
         prefill::grouped_describe(grouped_gemm(p, p.w13, p.H, 2 * p.I, bm, rows, nullptr, nullptr, nullptr)) +
         "] w2[" + prefill::grouped_describe(grouped_gemm(p, p.w2, p.I, p.H, bm, rows, nullptr, nullptr, nullptr)) +
         "]";
}

std::string grouped_launch(const MoeProblem& p, cudaStream_t stream) {
  const int bm = grouped_block_m(p);
  const long long rows = grouped_rows(p, bm);
  const Workspace l = workspace(p, bm, rows, true);
  std::string why = check_workspace(p, l, "grouped");
  if (!why.empty()) return why;
  unsigned char* ws = static_cast<unsigned char*>(p.workspace);
  DenseParams d = layout_params(p, ws, l, bm, rows);
  uint16_t* h = reinterpret_cast<uint16_t*>(ws + l.h);
  uint16_t* o = d.a;  // the gathered rows are dead once w13 has run
  d.h = h;
  d.o = o;

  if (!(why = sort_and_gather(p, d, stream)).empty()) return why;
  why = prefill::grouped_launch(grouped_gemm(p, p.w13, p.H, 2 * p.I, bm, rows, d.a, h, &d), stream);
  if (!why.empty()) return "moe grouped: w13: " + why;
  if (!(why = run_act(p, d, stream)).empty()) return why;
  why = prefill::grouped_launch(grouped_gemm(p, p.w2, p.I, p.H, bm, rows, d.a2, o, &d), stream);
  if (!why.empty()) return "moe grouped: w2: " + why;
  return run_sum(p, d, stream);
}

}  // namespace moe
}  // namespace swordfish
