// Host twin of prefill_sm90.cuh: checks a GemmProblem, plans the launch
// (token tile, split-K, grid), builds the TMA descriptors and enqueues.
// kernels/prefill/prefill_launch.cpp routes compute capability 9.0 here.
//
// The plan itself (tile, split-K, grid): prefill_sm90_plan.h.
#include "kernels/prefill/sm90/prefill_sm90_launch.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/common/format.h"
#include "kernels/common/func_attr.h"
#include "kernels/common/launch.h"
#include "kernels/common/problem.h"
#include "kernels/prefill/prefill.h"
#include "kernels/common/tma_desc.h"
#include "kernels/prefill/sm90/prefill_sm90.cuh"
#include "kernels/prefill/sm90/prefill_sm90_kernels.h"
#include "kernels/prefill/sm90/prefill_sm90_plan.h"
#include "kernels/prep/gather.h"

namespace swordfish {
namespace prefill {
namespace sm90 {
namespace {

std::string str(long long v) { return std::to_string(v); }

KernelSet kernels_for(const GemmProblem& p, const Plan& plan) {
  const bool bf16 = p.dtype == DType::kBFloat16;
  return p.bits == 4 ? kernels_int4(bf16, plan.cg, plan.bt) : kernels_int8(bf16, plan.cg, plan.bt);
}

#if defined(SWORDFISH_HAS_SM90A)  // can_implement's only caller; a build without 90a never gets there
bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }
#endif

// Zeros for the last m tile's x rows past x_tail_rows (tmap_x_zero): 256 rows of 64 16-bit
// columns, zero-initialized when the module loads and never written.
constexpr int kZeroRows = 256;
__device__ uint16_t g_zero_rows[kZeroRows * 64];

std::string cuda_error(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return "";
  return std::string(what) + ": " + cudaGetErrorString(e);
}

// One launch with programmatic stream serialization (common/launch.h): "" or the error named by `what`.
std::string launch_pdl(const void* fn, dim3 grid, int block, int smem, void** args, cudaStream_t stream,
                       const char* what) {
  const cudaError_t e = launch_ex(fn, grid, block, static_cast<size_t>(smem), true, args, stream);
  return e == cudaSuccess ? "" : std::string(what) + ": " + cudaGetErrorString(e);
}

// The launch parameters every plan sets (the caller adds bias, partials, x_tail_rows and the grouped fields).
Params params_for(const GemmProblem& p, const Plan& plan, const KernelSet& k) {
  Params params{};
  params.zeros = static_cast<const uint16_t*>(p.zeros);
  params.M = p.M;
  params.K = p.K;
  params.N = p.N;
  params.group = p.group;
  params.channelwise = p.channelwise ? 1 : 0;
  params.m_tiles = plan.m_tiles;
  params.n_tiles = plan.n_tiles;
  params.dp_tiles = plan.dp_tiles;
  params.splits = plan.splits;
  params.k_stages = plan.k_stages;
  params.items = plan.items;
  params.group_m = plan.group_m;
  params.scale_rows = p.channelwise ? 1 : std::max(1, k.slices * kSliceK / p.group);
  return params;
}

}  // namespace

std::string can_implement(const GemmProblem& p) {
  if (p.cc_major != 9 || p.cc_minor != 0)
    return "the sm90 prefill mainloop needs sm90a (wgmma; compute capability 9.0), device is sm" + str(p.cc_major) +
           str(p.cc_minor);
#if !defined(SWORDFISH_HAS_SM90A)
  return "this build has no sm_90a code (SWORDFISH_CUDA_ARCHS does not list 90a)";
#else
  const std::string why = format_reason(p);
  if (!why.empty()) return why;
  const void* ptrs[] = {p.x, p.packed, p.scales, p.zeros, p.y};
  const char* names[] = {"x", "packed", "scales", "zeros", "y"};
  for (int i = 0; i < 5; ++i)
    if (ptrs[i] != nullptr && !aligned16(ptrs[i]))
      return std::string("the prefill path needs 16-byte aligned ") + names[i] + " (TMA / bulk copies)";
  return "";
#endif
}

size_t workspace_bytes(const GemmProblem& p) {
  if (p.M <= 0) return 0;
  const Plan plan = make_plan(p);
  return plan.ws_x + plan.ws_partials;
}

std::string describe(const GemmProblem& p) {
  const Plan plan = make_plan(p);
  const KernelSet k = kernels_for(p, plan);
  return "prefill sm90 int" + str(p.bits) + (p.dtype == DType::kBFloat16 ? " bf16" : " fp16") + " tile=" +
         str(plan.tile_n()) + "x" + str(plan.bt) + " k=" + str(kSliceK * k.slices) + " stages=" + str(k.stages) +
         (k.epi_rows < plan.bt ? " epi_rows=" + str(k.epi_rows) : "") +
         " splits=" + str(plan.splits) + " split_tiles=" + str(plan.split_tiles) + " items=" + str(plan.items) +
         " grid=" + str(plan.grid) + " band=" + str(plan.group_m) +
         " x_tail_rows=" + str(last_tile_x_rows(plan, p.M)) + (p.perm != nullptr ? " gather=1" : "");
}

std::string launch(const GemmProblem& p, cudaStream_t stream) {
  std::string why = can_implement(p);
  if (!why.empty()) return why;
  if (p.M == 0) return "";
  const Plan plan = make_plan(p);
  const KernelSet k = kernels_for(p, plan);
  if (k.gemm == nullptr) return "no prefill kernel for tile " + str(plan.tile_n()) + "x" + str(plan.bt);
  if (p.workspace_bytes < plan.ws_x + plan.ws_partials || (plan.ws_x + plan.ws_partials > 0 && p.workspace == nullptr))
    return "prefill workspace too small: " + str(static_cast<long long>(p.workspace_bytes)) + " bytes, needs " +
           str(static_cast<long long>(plan.ws_x + plan.ws_partials));

  const void* x = p.x;
  uint8_t* ws = static_cast<uint8_t*>(p.workspace);
  if (p.perm != nullptr) {
    // Packed row k is input feature perm[k]: gather x's columns into packed order first.
    uint16_t* xp = reinterpret_cast<uint16_t*>(ws);
    why = prep::gather_columns(static_cast<const uint16_t*>(p.x), p.perm, xp, p.M, p.K, input_width(p), p.sm_count,
                               p.device, stream);
    if (!why.empty()) return why;
    x = xp;
  }

  Params params = params_for(p, plan, k);
  params.bias = static_cast<const uint16_t*>(p.bias);
  params.partials = plan.splits > 1 ? reinterpret_cast<float*>(ws + plan.ws_x) : nullptr;

  CUtensorMap tmap_x, tmap_x_tail, tmap_x_zero, tmap_w, tmap_s, tmap_z, tmap_y;
  params.x_tail_rows = last_tile_x_rows(plan, p.M);
  // One m tile: only the tail map is read (and a BT-row box need not exceed M's rows).
  why = tma::tile_map_16(&tmap_x, x, p.M, p.K, plan.m_tiles > 1 ? plan.bt : params.x_tail_rows, "x");
  if (why.empty()) why = tma::tile_map_16(&tmap_x_tail, x, p.M, p.K, params.x_tail_rows, "x (last m tile)");
  void* zeros = nullptr;
  if (why.empty() && cudaGetSymbolAddress(&zeros, g_zero_rows) != cudaSuccess) why = cuda_error("prefill zero rows");
  // Unused (never loaded) when the last m tile fills BT rows: any legal box.
  if (why.empty())
    why = tma::tile_map_16(&tmap_x_zero, zeros, kZeroRows, 64, std::max(8, plan.bt - params.x_tail_rows),
                           "x zero rows");
  if (why.empty()) why = tma::packed_map(&tmap_w, p, k.slices * kSliceK / format::block_k(p.bits), plan.cg);
  if (why.empty()) why = tma::scale_map(&tmap_s, p.scales, p, params.scale_rows, plan.tile_n(), "scales");
  if (why.empty())
    why = tma::scale_map(&tmap_z, p.zeros != nullptr ? p.zeros : p.scales, p, params.scale_rows, plan.tile_n(),
                         "zeros");
  if (why.empty()) why = tma::tile_map_16(&tmap_y, p.y, p.M, p.N, k.epi_rows, "y");
  if (!why.empty()) return why;

  why = ensure_dynamic_smem(k.gemm, k.smem_bytes, p.device);
  if (!why.empty()) return "prefill: " + why;
  // Both kernels launch with programmatic stream serialization: each may be
  // scheduled before its predecessor in the stream has finished, runs its
  // prologue, and waits for it (griddepcontrol.wait) before touching global
  // memory. That hides a launch latency per kernel (the GEMM's behind the
  // previous kernel when that one triggers early, as the GEMM itself and
  // decode's prep kernel do; the reduce's behind the GEMM).
  void* args[] = {&params, &tmap_x, &tmap_x_tail, &tmap_x_zero, &tmap_w, &tmap_s, &tmap_z, &tmap_y};
  why = launch_pdl(k.gemm, dim3(plan.grid), threads_for(plan.cg), k.smem_bytes, args, stream, "prefill gemm launch");
  if (!why.empty()) return why;
  if (plan.splits > 1) {
    uint16_t* y = static_cast<uint16_t*>(p.y);
    void* rargs[] = {&params, &y};
    why = launch_pdl(k.reduce, dim3(plan.split_tiles, plan.bt / 8), consumer_threads(plan.cg), 0, rargs, stream,
                     "prefill split-K reduce launch");
    if (!why.empty()) return why;
  }
  return cuda_error("prefill launch");
}

namespace {

// One expert's problem widened to all of them, for the tensor maps: the packed
// n blocks and the scale rows of expert e follow those of expert e - 1.
GemmProblem stacked(const GroupedProblem& g) {
  GemmProblem all = g.gemm;
  all.N = g.gemm.N * g.experts;  // packed: (E N / 64) n blocks of K / block_k blocks each
  return all;
}

}  // namespace

std::string grouped_can_implement(const GroupedProblem& g) {
  const GemmProblem& p = g.gemm;
  std::string why = can_implement(p);
  if (!why.empty()) return why;
  if (p.perm != nullptr) return "the grouped prefill takes no act-order permutation (gather the rows first)";
  if (p.bias != nullptr) return "the grouped prefill takes no bias";
  if (g.tile_rows != 64 && g.tile_rows != 128 && g.tile_rows != 256)
    return "the grouped prefill runs 64-, 128- or 256-row tiles, got tile_rows = " + str(g.tile_rows);
  if (p.M % g.tile_rows != 0)
    return "the grouped prefill needs M (the rows allocated) to be a multiple of tile_rows = " + str(g.tile_rows) +
           ", got M = " + str(p.M);
  if (g.experts < 1) return "the grouped prefill needs experts >= 1, got " + str(g.experts);
  // Every TMA coordinate is an int32: the stacked packed n blocks and scale rows must fit.
  if (static_cast<long long>(p.N / format::kBlockN) * g.experts > INT_MAX ||
      static_cast<long long>(p.K / p.group) * g.experts > INT_MAX)
    return "the grouped prefill's stacked experts overflow a TMA coordinate (E = " + str(g.experts) + ")";
  return "";
}

std::string grouped_describe(const GroupedProblem& g) {
  const GemmProblem& p = g.gemm;
  const Plan plan = make_grouped_plan(p, p.M, g.tile_rows, g.experts);
  const KernelSet k = kernels_for(p, plan);
  return "grouped prefill sm90 int" + str(p.bits) + (p.dtype == DType::kBFloat16 ? " bf16" : " fp16") + " tile=" +
         str(plan.tile_n()) + "x" + str(plan.bt) + " k=" + str(kSliceK * k.slices) + " stages=" + str(k.stages) +
         " experts=" + str(g.experts) + " m_tiles<=" + str(plan.m_tiles) + " items<=" + str(plan.items) +
         " grid=" + str(plan.grid) + " band=" + str(plan.group_m);
}

std::string grouped_launch(const GroupedProblem& g, cudaStream_t stream) {
  std::string why = sm90::grouped_can_implement(g);
  if (!why.empty()) return why;
  if (g.tile_expert == nullptr || g.rows_dev == nullptr)
    return "the grouped prefill needs tile_expert and rows_dev (device pointers)";
  const GemmProblem& p = g.gemm;
  if (p.M == 0) return "";
  const Plan plan = make_grouped_plan(p, p.M, g.tile_rows, g.experts);
  const KernelSet k = kernels_for(p, plan);
  if (k.gemm == nullptr) return "no prefill kernel for tile " + str(plan.tile_n()) + "x" + str(plan.bt);

  Params params = params_for(p, plan, k);  // make_grouped_plan: splits 1
  params.x_tail_rows = plan.bt;  // every run is whole: the tail map is the plain one
  params.tile_expert = g.tile_expert;
  params.rows_dev = g.rows_dev;
  params.experts = g.experts;
  params.expert_nblocks = p.N / format::kBlockN;
  params.expert_srows = p.K / p.group;

  const GemmProblem all = stacked(g);
  CUtensorMap tmap_x, tmap_x_tail, tmap_x_zero, tmap_w, tmap_s, tmap_z, tmap_y;
  why = tma::tile_map_16(&tmap_x, p.x, p.M, p.K, plan.bt, "x");
  if (why.empty()) why = tma::tile_map_16(&tmap_x_tail, p.x, p.M, p.K, plan.bt, "x (last m tile)");
  void* zeros = nullptr;
  if (why.empty() && cudaGetSymbolAddress(&zeros, g_zero_rows) != cudaSuccess) why = cuda_error("prefill zero rows");
  if (why.empty()) why = tma::tile_map_16(&tmap_x_zero, zeros, kZeroRows, 64, 8, "x zero rows");  // never loaded
  if (why.empty()) why = tma::packed_map(&tmap_w, all, k.slices * kSliceK / format::block_k(p.bits), plan.cg);
  // Scales of all experts as one (E K / group, N) tensor: scale_map reads K / group rows of N columns.
  GemmProblem rows_all = p;
  rows_all.K = p.K * g.experts;
  if (why.empty()) why = tma::scale_map(&tmap_s, p.scales, rows_all, params.scale_rows, plan.tile_n(), "scales");
  if (why.empty())
    why = tma::scale_map(&tmap_z, p.zeros != nullptr ? p.zeros : p.scales, rows_all, params.scale_rows,
                         plan.tile_n(), "zeros");
  if (why.empty()) why = tma::tile_map_16(&tmap_y, p.y, p.M, p.N, k.epi_rows, "y");
  if (!why.empty()) return why;

  why = ensure_dynamic_smem(k.gemm, k.smem_bytes, p.device);
  if (!why.empty()) return "grouped prefill: " + why;
  void* args[] = {&params, &tmap_x, &tmap_x_tail, &tmap_x_zero, &tmap_w, &tmap_s, &tmap_z, &tmap_y};
  why = launch_pdl(k.gemm, dim3(plan.grid), threads_for(plan.cg), k.smem_bytes, args, stream,
                   "grouped prefill gemm launch");
  if (!why.empty()) return why;
  return cuda_error("grouped prefill launch");
}

}  // namespace sm90
}  // namespace prefill
}  // namespace swordfish
