// Host twin of prefill_sm100.cuh: checks a GemmProblem, plans the launch
// (prefill_sm100_plan.h: token tile, pairs, Thor's M chunks), builds the TMA
// descriptors and enqueues 2-CTA clusters. kernels/prefill/prefill_launch.cpp
// routes compute capability 10.0 and 11.0 here.
//
// COMPILED, NOT RUN.
#include "kernels/prefill/sm100/prefill_sm100_launch.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "kernels/common/env.h"
#include "kernels/common/format.h"
#include "kernels/common/func_attr.h"
#include "kernels/common/problem.h"
#include "kernels/prefill/prefill.h"
#include "kernels/common/tma_desc.h"
#include "kernels/prefill/sm100/prefill_sm100.cuh"
#include "kernels/prefill/sm100/prefill_sm100_kernels.h"
#include "kernels/prefill/sm100/prefill_sm100_plan.h"
#include "kernels/prep/gather.h"

namespace swordfish {
namespace prefill {
namespace sm100 {
namespace {

std::string str(long long v) { return std::to_string(v); }

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

KernelSet kernels_for(const GemmProblem& p, const Plan& plan) {
  const bool bf16 = p.dtype == DType::kBFloat16;
  return p.bits == 4 ? kernels_int4(bf16, plan.bt) : kernels_int8(bf16, plan.bt);
}

std::string cuda_error(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return "";
  return std::string(what) + ": " + cudaGetErrorString(e);
}

// Which SASS this build carries for p's device ("" when it has it).
std::string arch_reason(const GemmProblem& p) {
  const std::string dev = "sm" + str(p.cc_major) + str(p.cc_minor);
  if (p.cc_major == 10 && p.cc_minor == 0) {
#if defined(SWORDFISH_HAS_SM100A)
    return "";
#else
    return "this build has no sm_100a code (SWORDFISH_CUDA_ARCHS does not list 100a)";
#endif
  }
  if (p.cc_major == 11 && p.cc_minor == 0) {
#if defined(SWORDFISH_HAS_SM110A)
    return "";
#else
    return "this build has no sm_110a code (SWORDFISH_CUDA_ARCHS does not list 110a)";
#endif
  }
  if (p.cc_major == 10 && p.cc_minor == 1)
    return "Jetson Thor reported as sm101 (a CUDA 12 driver) cannot load the sm_110a kernel; device is " + dev;
  return "the tcgen05 prefill is built for sm_100a (B200) and sm_110a (Thor) only (arch-specific SASS), device is " +
         dev;
}

// Clusters of two the device can hold at once for kernel k (cudaOccupancyMaxActiveClusters),
// cached per (device, kernel): the persistent grid never asks for more.
int max_active_clusters(const KernelSet& k, int device, int fallback) {
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, int> cache;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(device, k.gemm);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = kClusterSize;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3(kClusterSize * fallback);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(k.smem_bytes);
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, k.gemm, &cfg) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return fallback;  // not cached: ask again next time
  }
  cache[key] = n;
  return n;
}

// The device's opt-in shared memory per block (cached per device; 0 when it cannot be asked).
int smem_optin(int device) {
  static std::mutex mu;
  static std::map<int, int> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(device);
  if (it != cache.end()) return it->second;
  int v = 0;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;  // not cached: ask again next time
  }
  cache[device] = v;
  return v;
}

}  // namespace

std::string can_implement(const GemmProblem& p) {
  std::string why = arch_reason(p);
  if (!why.empty()) return why;
  switch (env::flag("SWORDFISH_SM100_PREFILL")) {  // kSm100PrefillKnob, read per call
    case env::Flag::kOn: break;
    case env::Flag::kOff:
      return std::string("the tcgen05 prefill is compiled, not run on any Blackwell GPU yet: set ") +
             kSm100PrefillKnob + "=1 to use it (scripts/blackwell_check.sh does)";
    case env::Flag::kUnrecognised:
      return std::string(kSm100PrefillKnob) + " must be 0 or 1 (or false/true, off/on, no/yes), got '" +
             env::raw(kSm100PrefillKnob) + "'";
  }
  why = format_reason(p);
  if (!why.empty()) return why;
  const void* ptrs[] = {p.x, p.packed, p.scales, p.zeros};
  const char* names[] = {"x", "packed", "scales", "zeros"};
  for (int i = 0; i < 4; ++i)
    if (ptrs[i] != nullptr && !aligned16(ptrs[i]))
      return std::string("the prefill path needs 16-byte aligned ") + names[i] + " (TMA)";
  if (p.y != nullptr && (reinterpret_cast<uintptr_t>(p.y) & 1u) != 0) return "y must be 2-byte aligned";
  // Whatever the dispatcher routes here, launch() can start: the plan's shared memory fits the device
  // (Thor's opt-in limit is assumed, not known, to be the B200's 232,448 bytes).
  const int need = make_plan(p).smem_bytes, have = smem_optin(p.device);
  if (have > 0 && need > have)
    return "the sm100 prefill tile needs " + str(need) + " bytes of shared memory per block, device " +
           str(p.device) + " allows " + str(have);
  return "";
}

size_t workspace_bytes(const GemmProblem& p) {
  if (p.M <= 0) return 0;
  return make_plan(p).ws_x;
}

std::string describe(const GemmProblem& p) {
  const Plan plan = make_plan(p);
  return "prefill sm100 int" + str(p.bits) + (p.dtype == DType::kBFloat16 ? " bf16" : " fp16") + " tile=256x" +
         str(plan.bt) + " (2-SM pair) k=64 stages=a" + str(kAStages) + "/x" + str(plan.x_stages) + "/w" +
         str(kWStages) + " tmem_cols=" + str(plan.tmem_cols) + " smem=" + str(plan.smem_bytes) +
         " tiles=" + str(plan.tiles) + " clusters<=" + str(plan.clusters) + " band=" + str(plan.group_m) +
         " chunks=" + str(plan.chunks) + "x" + str(plan.chunk_rows) + (p.perm != nullptr ? " gather=1" : "") +
         " (compiled, not run)";
}

std::string launch(const GemmProblem& p, cudaStream_t stream) {
  std::string why = can_implement(p);
  if (!why.empty()) return why;
  if (p.M == 0) return "";
  const Plan plan = make_plan(p);
  const KernelSet k = kernels_for(p, plan);
  if (k.gemm == nullptr) return "no sm100 prefill kernel for int" + str(p.bits) + " tile 256x" + str(plan.bt);
  if (p.workspace_bytes < plan.ws_x || (plan.ws_x > 0 && p.workspace == nullptr))
    return "prefill workspace too small: " + str(static_cast<long long>(p.workspace_bytes)) + " bytes, needs " +
           str(static_cast<long long>(plan.ws_x));

  const void* x = p.x;
  if (p.perm != nullptr) {
    // Packed row k is input feature perm[k]: gather x's columns into packed order first (once for
    // all the M chunks).
    uint16_t* xp = static_cast<uint16_t*>(p.workspace);
    why = prep::gather_columns(static_cast<const uint16_t*>(p.x), p.perm, xp, p.M, p.K, input_width(p), p.sm_count,
                               p.device, stream);
    if (!why.empty()) return why;
    x = xp;
  }

  CUtensorMap tmap_x, tmap_w, tmap_s, tmap_z;
  const int scale_rows_ = plan.scale_rows;
  // x: the whole (M, K) tensor in 2-SM boxes of BT / 2 rows (each CTA of a pair loads its half).
  why = tma::tile_map_16(&tmap_x, x, p.M, p.K, plan.bt / 2, "x");
  if (why.empty()) why = tma::packed_map(&tmap_w, p, kStageK / format::block_k(p.bits), kTransformGroups);
  if (why.empty()) why = tma::scale_map(&tmap_s, p.scales, p, scale_rows_, kCtaRows, "scales");
  if (why.empty())
    why = tma::scale_map(&tmap_z, p.zeros != nullptr ? p.zeros : p.scales, p, scale_rows_, kCtaRows, "zeros");
  if (!why.empty()) return why;

  why = ensure_dynamic_smem(k.gemm, k.smem_bytes, p.device);
  if (!why.empty()) return "prefill: " + why;
  const int clusters_cap = std::max(1, std::min(plan.clusters, max_active_clusters(k, p.device, plan.clusters)));

  // Clusters of two CTAs (the pair), programmatic stream serialization as the other prefill kernels.
  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = kClusterSize;
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  for (int chunk = 0; chunk < plan.chunks; ++chunk) {
    const int row0 = chunk * plan.chunk_rows;
    const int rows = std::min(plan.chunk_rows, p.M - row0);
    Params params{};
    params.bias = static_cast<const uint16_t*>(p.bias);
    params.y = static_cast<uint16_t*>(p.y) + static_cast<long long>(row0) * p.N;
    params.M = rows;
    params.K = p.K;
    params.N = p.N;
    params.group = p.group;
    params.channelwise = p.channelwise ? 1 : 0;
    params.has_zeros = p.zeros != nullptr ? 1 : 0;
    params.x_row0 = row0;
    params.m_tiles = (rows + plan.bt - 1) / plan.bt;
    params.n_tiles = plan.n_tiles;
    params.k_stages = plan.k_stages;
    params.tiles = params.m_tiles * params.n_tiles;
    params.group_m = std::min(plan.group_m, params.m_tiles);
    params.scale_rows = scale_rows_;
    const int clusters = std::min(clusters_cap, params.tiles);

    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(kClusterSize * clusters);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = static_cast<size_t>(k.smem_bytes);
    cfg.stream = stream;
    cfg.attrs = attrs;
    cfg.numAttrs = 2;
    void* args[] = {&params, &tmap_x, &tmap_w, &tmap_s, &tmap_z};
    if (cudaLaunchKernelExC(&cfg, k.gemm, args) != cudaSuccess) return cuda_error("sm100 prefill launch");
  }
  return cuda_error("sm100 prefill launch");
}

}  // namespace sm100
}  // namespace prefill
}  // namespace swordfish
