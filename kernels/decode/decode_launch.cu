// Host twin of decode_gemm.cuh and decode_prep.cuh: checks a GemmProblem,
// plans the launch (regime, grid, epilogue mode, workspace) and enqueues it.
//
// Plan (all integer, a pure function of the problem and the device):
//   m-groups  M <= 64: one group of MT = ceil(M / 16) tiles; beyond, G =
//             ceil(M / 64) groups of MT = ceil(M / (16 G)) tiles (4 through
//             M = 64, then 3 or 4).
//   grid      atomic mode: persistent, min(occupancy x SMs, units / 4) CTAs,
//             each a balanced range of the flat unit list, so the split-K
//             depth per column follows from occupancy and the SM count.
//             deterministic: one CTA per segment with direct stores when its
//             waves fill the slots (kDirectMinWaveFill) or the pieces would
//             pass kMaxPartialBytes; otherwise the same balanced split as
//             atomic mode (whole CTAs per segment where that keeps
//             kAlignedMinFill of the grid), each CTA storing an fp32 piece per
//             segment it touches, summed in CTA order by reduce_kernel.
//   kernel    M <= kSwapMaxM (8): swap_kernel (weights as the A operand; its
//             activations CTA-shared at int4 M >= kSwapShareMinM);
//             otherwise gemm_kernel<MT>, staging each unit's activations once
//             per CTA when kShareActs; FOLD where use_fold() says so.
//   launches  [prep_kernel: permuted x and/or y := bias or 0] -> gemm_kernel
//             [-> reduce_kernel]. On sm_90+ each launches with programmatic
//             stream serialization (programmatic dependent launch): it may be
//             scheduled before the kernel ahead of it has finished, stages
//             what is constant (the swap kernel pulls its first weight blocks
//             into L2; gemm_kernel measured faster without, kGemmPrefetchUnits),
//             waits for that kernel (griddepcontrol.wait) before touching x, y
//             or the workspace, and at once lets the next kernel launch.
//             Behind a kernel that never triggers early (torch's) this only
//             hides launch latency; behind our own kernels (the prep kernel,
//             the previous Swordfish call) the swap kernel's first weight round
//             trip overlaps the tail of the kernel before it.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kernels/common/device_guard.h"
#include "kernels/common/format.h"
#include "kernels/common/launch.h"
#include "kernels/common/func_attr.h"
#include "kernels/common/problem.h"
#include "kernels/decode/decode.h"
#include "kernels/decode/decode_config.h"
#include "kernels/decode/decode_kernels.h"
#include "kernels/decode/decode_prep.cuh"

namespace swordfish {
namespace decode {
namespace {

constexpr long long kIntMax = 0x7fffffffLL;

long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }
size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

struct Plan {
  int mt = 1, mgroups = 1;
  int ncols = 0, quads = 0, kblocks = 0;
  long long units = 0, segments = 0;
  int mode = kModeAtomic;
  long long pieces = 0;  // kModePartials: planes of fp32 pieces (max_pieces)
  long long grid = 0;
  int occupancy = 0;
  bool gather = false, init_y = false, pdl = false, evict_first = true, fold = false, swap = false;
  bool share = false;  // the swap kernel with CTA-shared activations (kSwapShareMinM)
  size_t ws_x = 0, ws_partials = 0;  // bytes; ws_x is a multiple of 256
  KernelHandle kernel;
};

// CTAs per SM of a kernel instance on `device` (func_attr.h: raises its shared-memory limit, cached).
int occupancy(const KernelHandle& k, int device, std::string* err) {
  return cached_occupancy(k.fn, kThreads, k.smem_bytes, device, "decode", err);
}

int log2_group(int group) { return group == 32 ? 5 : group == 64 ? 6 : 7; }

// Shape / dtype / flag checks only (pointers may be null).
std::string check(const GemmProblem& p) {
  if (p.bits != 4 && p.bits != 8) return "decode: bits must be 4 or 8, got bits = " + std::to_string(p.bits);
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16)
    return "decode: dtype must be float16 or bfloat16, got dtype = " + std::to_string(static_cast<int>(p.dtype));
  if (p.M < 0) return "decode: M must be >= 0, got M = " + std::to_string(p.M);
  const int bk = format::block_k(p.bits);
  if (p.K <= 0 || p.K % bk != 0)
    return "decode: int" + std::to_string(p.bits) + " needs K to be a positive multiple of " + std::to_string(bk) +
           ", got K = " + std::to_string(p.K);
  if (p.N <= 0 || p.N % format::kBlockN != 0)
    return "decode: N must be a positive multiple of 64, got N = " + std::to_string(p.N);
  if (p.channelwise) {
    if (p.group <= 0 || p.K % p.group != 0)
      return "decode: channelwise scales need a replica group dividing K = " + std::to_string(p.K) +
             ", got group = " + std::to_string(p.group);
  } else {
    if (p.group != 32 && p.group != 64 && p.group != 128)
      return "decode: group must be 32, 64 or 128 (or channelwise), got group = " + std::to_string(p.group);
    if (p.K % p.group != 0)
      return "decode: group = " + std::to_string(p.group) + " must divide K = " + std::to_string(p.K);
  }
  // 32-bit index math in the kernels: scale offsets (K / 32) * N, tile strides 64 K.
  if (static_cast<long long>(p.K / 32) * p.N > kIntMax)
    return "decode: K * N / 32 must fit in int32, got K = " + std::to_string(p.K) + ", N = " + std::to_string(p.N);
  if (64LL * p.K > kIntMax) return "decode: K must be below 2^25, got K = " + std::to_string(p.K);
  if (p.cc_major != 0 && p.cc_major < 8)
    return "decode: needs compute capability 8.0 or newer (mma.sync bf16), got " + std::to_string(p.cc_major) + "." +
           std::to_string(p.cc_minor);
  if (p.sm_count <= 0 && p.cc_major != 0)
    return "decode: sm_count must be set, got sm_count = " + std::to_string(p.sm_count);
  return "";
}

// The fp32 per-group scale fold (FOLD kernels) for MT = 1, and for MT = 2 on
// layers of at most kFoldMt2MaxWeightsPerSm weights per SM (decode_config.h:
// its 2 CTAs per SM lose to the unfolded kernel's 3 on larger ones): it removes
// the per-pair scale multiply (and for int4 bf16 / int8 fp16 the bias fma) at
// the cost of ~2-3 FFMA per accumulator per group; int4 g32 has two groups
// per k64 unit, where that no longer pays.
bool use_fold(const GemmProblem& p, int mt) {
  if (mt > kFoldMaxTiles || !(p.channelwise || p.bits == 8 || p.group >= 64)) return false;
  return mt == 1 || static_cast<long long>(p.K) * p.N <= kFoldMt2MaxWeightsPerSm * p.sm_count;
}

// The swapped-operand kernel (decode_swap.cuh) for M <= kSwapMaxM.
bool use_swap(const GemmProblem& p) { return kSwapEnabled && p.M <= kSwapMaxM; }

KernelHandle kernel_for(const GemmProblem& p, int mt, bool fold, bool swap, bool share) {
  const bool bf16 = p.dtype == DType::kBFloat16;
  const bool zeros = p.zeros != nullptr;
  if (swap)
    return p.bits == 4 ? swap_handle_int4(bf16, zeros, fold, share) : swap_handle_int8(bf16, zeros, fold);
  return p.bits == 4 ? gemm_handle_int4(bf16, mt, zeros, fold) : gemm_handle_int8(bf16, mt, zeros, fold);
}

// Everything launch() does, decided up front. Precondition: check(p) == "", M > 0.
bool make_plan(const GemmProblem& p, Plan* pl, std::string* err) {
  pl->ncols = p.N / format::kBlockN;
  pl->quads = (pl->ncols + kWarps - 1) / kWarps;
  pl->kblocks = p.K / format::block_k(p.bits);
  if (p.M <= 16 * kMaxTiles) {
    pl->mgroups = 1;
    pl->mt = static_cast<int>(ceil_div(p.M, 16));
  } else {
    pl->mgroups = static_cast<int>(ceil_div(p.M, 16 * kMaxTiles));
    pl->mt = static_cast<int>(ceil_div(p.M, 16LL * pl->mgroups));
  }
  pl->segments = static_cast<long long>(pl->quads) * pl->mgroups;
  pl->units = pl->segments * pl->kblocks;
  pl->fold = use_fold(p, pl->mt);
  pl->swap = use_swap(p);  // M <= 8: mt == 1, mgroups == 1
  pl->share = pl->swap && p.bits == 4 && p.M >= kSwapShareMinM;
  pl->kernel = kernel_for(p, pl->mt, pl->fold, pl->swap, pl->share);
  if (pl->kernel.fn == nullptr) {
    *err = "decode: no kernel instance for MT = " + std::to_string(pl->mt);
    return false;
  }
  pl->occupancy = occupancy(pl->kernel, p.device, err);
  if (pl->occupancy == 0) return false;
  const long long slots = static_cast<long long>(pl->occupancy) * p.sm_count;

  if (!p.deterministic) {
    pl->mode = kModeAtomic;
    pl->grid = std::max(1LL, std::min(slots, ceil_div(pl->units, kMinUnitsPerCta)));
    pl->init_y = true;
  } else {
    // Deterministic: no atomics. One CTA per segment stores y directly when
    // those CTAs fill their waves; otherwise the atomic mode's balanced grid,
    // each CTA's piece of each segment it touches stored in fp32 and summed in
    // CTA order by reduce_kernel (the direct split left 70B gate_up at M = 1
    // with 224 CTAs on 396 slots, 1.54x the atomic mode's time).
    const long long plane = static_cast<long long>(p.M) * p.N * 4;  // fp32 bytes per piece
    const long long flat = std::max(1LL, std::min(slots, ceil_div(pl->units, kMinUnitsPerCta)));
    // A whole number of CTAs per segment, when that costs few CTAs: no CTA then
    // spans two segments (two flushes on its tail), each segment has the same
    // number of pieces (reduce_kernel need not count them), the fewest there are.
    const long long aligned = pl->segments * (flat / pl->segments);
    const long long grid = aligned >= kAlignedMinFill * flat ? aligned : flat;
    const long long pieces = max_pieces(pl->kblocks, pl->units, grid);
    const double fill = static_cast<double>(pl->segments) / (ceil_div(pl->segments, slots) * slots);
    pl->init_y = false;
    if (fill >= kDirectMinWaveFill || pieces * plane > kMaxPartialBytes) {
      pl->mode = kModeDirect;
      pl->grid = pl->segments;
    } else {
      pl->mode = kModePartials;
      pl->grid = grid;
      pl->pieces = pieces;
      pl->ws_partials = static_cast<size_t>(plane) * pieces;
    }
  }
  if (pl->grid > kIntMax) {
    *err = "decode: grid of " + std::to_string(pl->grid) + " CTAs exceeds the launch limit (M = " +
           std::to_string(p.M) + ", N = " + std::to_string(p.N) + ")";
    return false;
  }
  pl->gather = p.perm != nullptr;
  if (pl->gather) pl->ws_x = align_up(static_cast<size_t>(p.M) * p.K * 2, 256);
  pl->pdl = p.cc_major >= 9;
  pl->evict_first = pl->mgroups == 1;
  return true;
}

const char* mode_name(int mode) {
  return mode == kModeAtomic ? "atomic" : mode == kModeDirect ? "direct" : "partials";
}

bool aligned(const void* ptr, uintptr_t a) { return reinterpret_cast<uintptr_t>(ptr) % a == 0; }

std::string launch_error(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return "";
  return std::string("decode: ") + what + " launch failed: " + cudaGetErrorString(e);
}

// Launch `fn(args)` on `stream`, with programmatic stream serialization when
// `pdl` (every decode kernel waits for its predecessor with
// griddepcontrol.wait before it touches anything that one may write).
std::string launch_kernel(const void* fn, dim3 grid, int block, int smem, bool pdl, void** args, cudaStream_t stream,
                          const char* what) {
  const cudaError_t e = launch_ex(fn, grid, block, static_cast<size_t>(smem), pdl, args, stream);
  if (e != cudaSuccess) return std::string("decode: ") + what + " launch failed: " + cudaGetErrorString(e);
  return launch_error(what);
}

// prep_kernel over pp: a grid wide enough for the gather (K columns) or the
// output init (N / 8 16-byte runs), rows spread over ~4 CTAs per SM.
std::string launch_prep(const PrepParams& pp, int sm_count, bool pdl, cudaStream_t stream) {
  const int width = pp.xp != nullptr ? pp.K : pp.N / 8;
  const int gx = static_cast<int>(std::min<long long>(ceil_div(width, kPrepThreads), 16));
  const int gy = static_cast<int>(std::min<long long>(pp.M, std::max(1, 4 * sm_count / gx)));
  PrepParams arg = pp;
  void* args[] = {&arg};
  return launch_kernel(reinterpret_cast<const void*>(&prep_kernel), dim3(gx, std::max(gy, 1)), kPrepThreads, 0, pdl,
                       args, stream, "prep kernel");
}

}  // namespace

std::string can_implement(const GemmProblem& p) { return check(p); }

size_t workspace_bytes(const GemmProblem& p) {
  if (!check(p).empty() || p.M == 0) return 0;
  Plan pl;
  std::string err;
  if (!make_plan(p, &pl, &err)) return 0;  // launch() reports the error
  return pl.ws_x + pl.ws_partials;
}

std::string describe(const GemmProblem& p) {
  std::string why = check(p);
  if (!why.empty()) return why;
  if (p.M == 0) return "decode: M = 0, nothing to launch";
  Plan pl;
  if (!make_plan(p, &pl, &why)) return why;
  return std::string("decode int") + std::to_string(p.bits) + (p.dtype == DType::kBFloat16 ? " bf16" : " fp16") +
         " mt=" + std::to_string(pl.mt) + (pl.swap ? " swap" : "") + (pl.fold ? " fold" : "") +
         " acts=" + ((pl.swap ? pl.share : kShareActs) ? "cta" : "lane") +
         " mgroups=" + std::to_string(pl.mgroups) +
         " stages=" + std::to_string(pl.kernel.stages) + " occupancy=" + std::to_string(pl.occupancy) +
         " grid=" + std::to_string(pl.grid) + " units=" + std::to_string(pl.units) + " mode=" + mode_name(pl.mode) +
         " pieces=" + std::to_string(pl.pieces) + " pdl=" + std::to_string(pl.pdl ? 1 : 0) +
         " zeros=" + std::to_string(p.zeros != nullptr ? 1 : 0) + " act_order=" + std::to_string(pl.gather ? 1 : 0);
}

std::string launch(const GemmProblem& p, cudaStream_t stream) {
  std::string why = check(p);
  if (!why.empty()) return why;
  if (p.M == 0) return "";
  if (p.x == nullptr || p.packed == nullptr || p.scales == nullptr || p.y == nullptr)
    return "decode: null x, packed, scales or y pointer";
  if (!aligned(p.packed, 16)) return "decode: packed must be 16-byte aligned";
  if (!aligned(p.x, 16)) return "decode: x must be 16-byte aligned";
  if (!aligned(p.y, 16)) return "decode: y must be 16-byte aligned";
  if (!aligned(p.scales, 4)) return "decode: scales must be 4-byte aligned";
  if (p.zeros != nullptr && !aligned(p.zeros, 4)) return "decode: zeros must be 4-byte aligned";
  if (p.bias != nullptr && !aligned(p.bias, 16)) return "decode: bias must be 16-byte aligned";

  Plan pl;
  if (!make_plan(p, &pl, &why)) return why;
  const size_t need = pl.ws_x + pl.ws_partials;
  if (need > 0) {
    if (p.workspace == nullptr || p.workspace_bytes < need)
      return "decode: workspace of " + std::to_string(need) + " bytes required, got " +
             std::to_string(p.workspace == nullptr ? 0 : p.workspace_bytes);
    if (!aligned(p.workspace, 256)) return "decode: workspace must be 256-byte aligned";
  }
  DeviceGuard scope(p.device);
  unsigned char* ws = static_cast<unsigned char*>(p.workspace);
  const uint16_t* x = static_cast<const uint16_t*>(p.x);
  uint16_t* y = static_cast<uint16_t*>(p.y);
  const uint16_t* bias = static_cast<const uint16_t*>(p.bias);

  // 1. prep: permuted activations and / or y := bias (or 0).
  if (pl.gather || pl.init_y) {
    PrepParams pp{x, p.perm, pl.gather ? reinterpret_cast<uint16_t*>(ws) : nullptr, pl.init_y ? y : nullptr, bias,
                  p.M, p.K, p.N, input_width(p)};
    why = launch_prep(pp, p.sm_count, pl.pdl, stream);
    if (!why.empty()) return why;
    if (pl.gather) x = reinterpret_cast<const uint16_t*>(ws);
  }

  // 2. the GEMM.
  Params gp{};
  gp.x = x;
  gp.packed = reinterpret_cast<const uint8_t*>(p.packed);
  gp.scales = static_cast<const uint16_t*>(p.scales);
  gp.zeros = static_cast<const uint16_t*>(p.zeros);
  gp.bias = bias;
  gp.y = y;
  gp.partials = pl.mode == kModePartials ? reinterpret_cast<float*>(ws + pl.ws_x) : nullptr;
  gp.units = pl.units;
  gp.M = p.M;
  gp.K = p.K;
  gp.N = p.N;
  gp.kblocks = pl.kblocks;
  gp.ncols = pl.ncols;
  gp.mgroups = pl.mgroups;
  gp.gshift = p.channelwise ? 31 : log2_group(p.group);
  gp.mode = pl.mode;
  gp.evict_first = pl.evict_first ? 1 : 0;
  // Channelwise folds every 128 rows as well: the raw accumulators carry
  // kRawOffset * sum(x), and the tensor core's fp32 accumulation error grows
  // with their magnitude, so they are kept short.
  gp.fold_mask = !pl.fold ? 0 : (p.channelwise ? 128 : p.group) / format::block_k(p.bits) - 1;

  void* args[] = {&gp};
  why = launch_kernel(pl.kernel.fn, dim3(static_cast<unsigned>(pl.grid)), kThreads, pl.kernel.smem_bytes, pl.pdl, args,
                      stream, "gemm kernel");
  if (!why.empty()) return why;

  // 3. deterministic split-K: fixed-order reduction of the fp32 partials.
  if (pl.mode == kModePartials) {
    // ~4 CTAs per SM: rows first, then as many column CTAs as the rows leave (M = 1 is on the latency path).
    const int gy = static_cast<int>(std::min<long long>(p.M, 4LL * p.sm_count));
    const int gx =
        static_cast<int>(std::min<long long>(ceil_div(p.N / 2, kPrepThreads), std::max(1, 4 * p.sm_count / gy)));
    ReduceParams rp{reinterpret_cast<const float*>(ws + pl.ws_x), bias, y, pl.units, static_cast<int>(pl.grid),
                    p.M, p.N, pl.kblocks, pl.mgroups, 16 * pl.mt,
                    // a whole number of CTAs per segment: each has exactly that many pieces
                    pl.grid % pl.segments == 0 ? static_cast<int>(pl.grid / pl.segments) : 0};
    void* rargs[] = {&rp};
    const void* fn = p.dtype == DType::kBFloat16 ? reinterpret_cast<const void*>(&reduce_kernel<true>)
                                                 : reinterpret_cast<const void*>(&reduce_kernel<false>);
    why = launch_kernel(fn, dim3(gx, gy), kPrepThreads, 0, pl.pdl, rargs, stream, "reduce kernel");
    if (!why.empty()) return why;
  }
  return "";
}

}  // namespace decode
}  // namespace swordfish
