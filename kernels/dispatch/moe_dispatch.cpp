// The MoE dispatcher (moe_dispatch.h): validation, the per-architecture
// tables, the last-path record and the SWORDFISH_DEBUG log.
#include "kernels/dispatch/moe_dispatch.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "kernels/common/device_guard.h"
#include "kernels/common/env.h"
#include "kernels/dispatch/last_path.h"
#include "kernels/dispatch/moe_heuristics.hpp"
#include "kernels/dispatch/moe_sm100.hpp"
#include "kernels/dispatch/moe_sm90.hpp"
#include "kernels/moe/moe.h"
#include "kernels/moe/moe_dense.h"

namespace swordfish {
namespace dispatch {
namespace {

std::string str(long long v) { return std::to_string(v); }

static_assert(moe_heuristics::kPathFused == static_cast<int>(MoePath::kFused) &&
                  moe_heuristics::kPathDense == static_cast<int>(MoePath::kDense) &&
                  moe_heuristics::kPathGrouped == static_cast<int>(MoePath::kGrouped),
              "moe_heuristics restates MoePath's values");

const moe_heuristics::MoeTable& table_for(int cc_major) {
  if (cc_major == 9) return moe_heuristics::kMoeSm90;
  if (cc_major == 10 || cc_major == 11) return moe_heuristics::kMoeSm100;  // B200 / B300, Thor
  return moe_heuristics::kMoeConservative;
}

std::string dense_reason(const MoeProblem& p) { return moe::dense_can_implement(p); }

std::string path_reason(const MoeProblem& p, MoePath path) {
  switch (path) {
    case MoePath::kFused: return moe::can_implement(p, moe_block_m(p));
    case MoePath::kDense: return dense_reason(p);
    case MoePath::kGrouped: return moe::grouped_can_implement(p);
    case MoePath::kAuto: break;
  }
  return "unknown MoE path " + str(static_cast<int>(path));
}

LastPathRecord& last_paths() {
  static LastPathRecord record;
  return record;
}

// SWORDFISH_DEBUG, read now (never cached), leniently, through the one parser dispatch.cpp uses.
bool debug_enabled() { return env::lenient("SWORDFISH_DEBUG"); }

void log_choice(const MoeProblem& p, MoePath path) {
  using Key = std::tuple<int, int, int, int, int, int, bool, bool, bool, int, int>;
  static std::mutex mu;
  static std::set<Key> seen;
  const Key key{p.T, p.top_k, p.E, p.H, p.I, p.bits, p.w13.perm != nullptr, p.w13.zeros != nullptr, p.deterministic,
                static_cast<int>(p.dtype), static_cast<int>(path)};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.insert(key).second) return;
  }
  const std::string detail = path == MoePath::kFused   ? moe::describe(p, moe_block_m(p))
                             : path == MoePath::kDense ? moe::dense_describe(p)
                                                       : moe::grouped_describe(p);
  std::fprintf(stderr, "swordfish: moe T=%d top_k=%d E=%d H=%d I=%d bits=%d -> %s (%s)\n", p.T, p.top_k, p.E, p.H,
               p.I, p.bits, moe_path_name(path), detail.c_str());
}

}  // namespace

int moe_block_m(const MoeProblem& p) {
  return moe_heuristics::block_m_for(table_for(p.cc_major), static_cast<long long>(p.T) * p.top_k, global_experts(p));
}

std::string moe_can_implement(const MoeProblem& p, MoePath path) {
  if (path == MoePath::kAuto) return path_reason(p, moe_select(p));
  return path_reason(p, path);
}

MoePath moe_select(const MoeProblem& p) {
  const moe_heuristics::MoeTable& t = table_for(p.cc_major);
  const bool dense = dense_reason(p).empty();
  // (asked only when the table can pick it: its check builds plans)
  const bool grouped = t.grouped_min_avg_tokens != moe_heuristics::kNever && moe::grouped_can_implement(p).empty();
  const moe_heuristics::Choice c =
      moe_heuristics::choose(t, static_cast<long long>(p.T) * p.top_k, global_experts(p), dense, grouped);
  if (c.path == moe_heuristics::kPathGrouped) return MoePath::kGrouped;
  return c.path == moe_heuristics::kPathDense ? MoePath::kDense : MoePath::kFused;
}

size_t moe_workspace_bytes(const MoeProblem& p, MoePath path) {
  if (path == MoePath::kAuto) path = moe_select(p);
  if (!moe_can_implement(p, path).empty()) return 0;
  if (path == MoePath::kFused) return moe::workspace_bytes(p, moe_block_m(p));
  if (path == MoePath::kGrouped) return moe::grouped_workspace_bytes(p);
  return moe::dense_workspace_bytes(p);
}

std::string moe_run(const MoeProblem& p, MoePath path, void* stream) {
  if (path == MoePath::kAuto) return "moe_run() needs a resolved path (not auto): call moe_select() first";
  std::string why = moe_can_implement(p, path);
  if (!why.empty()) return std::string(moe_path_name(path)) + " cannot run this problem: " + why;
  if (p.T > 0) {
    DeviceGuard guard(p.device);
    if (!guard.ok()) return "cannot make CUDA device " + str(p.device) + " current";
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    why = path == MoePath::kFused   ? moe::launch(p, moe_block_m(p), s)
          : path == MoePath::kDense ? moe::dense_launch(p, s)
                                    : moe::grouped_launch(p, s);
    if (!why.empty()) return why;
  }
  last_paths().record(p.device, static_cast<int>(path));
  if (debug_enabled()) log_choice(p, path);
  return "";
}

MoePath moe_last_path(int device) {
  return static_cast<MoePath>(last_paths().last(device));
}

std::string moe_align_check(long long slots, int experts, int block_m, int cc_major) {
  return moe::can_align(slots, experts, block_m, cc_major);
}
long long moe_align_sorted_len(long long slots, int experts, int block_m) {
  return moe::sorted_len(slots, experts, block_m);
}
long long moe_align_blocks_len(long long slots, int experts, int block_m) {
  return moe::blocks_len(slots, experts, block_m);
}
std::string moe_align(const void* ids, bool ids_int64, long long slots, int experts, int block_m,
                      const int32_t* expert_map, int map_len, int32_t* sorted_ids, int32_t* expert_ids,
                      int32_t* num_post_pad, int device, int cc_major, void* stream) {
  return moe::align(ids, ids_int64, slots, experts, block_m, expert_map, map_len, sorted_ids,
                    moe::sorted_len(slots, experts, block_m), expert_ids, moe::blocks_len(slots, experts, block_m),
                    num_post_pad, device, cc_major, static_cast<cudaStream_t>(stream));
}

std::string moe_path_names() {
  return std::string(moe_path_name(MoePath::kFused)) + "," + moe_path_name(MoePath::kDense) + "," +
         moe_path_name(MoePath::kGrouped);
}

}  // namespace dispatch
}  // namespace swordfish
