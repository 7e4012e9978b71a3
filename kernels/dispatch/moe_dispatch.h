// The MoE dispatcher: the one place that decides which path runs a fused-MoE
// layer and with which block size. Host C++ only; no torch. The torch layer
// (kernels/torch/ops_moe.cpp) fills a MoeProblem from tensors, asks for the
// path and its workspace, allocates the workspace from torch's allocator and
// calls moe_run().
//
// Every decision is a pure function of (T, top_k, E, H, I, format, dtype) and
// the device (compute capability, SM count): the per-architecture tables live
// in moe_sm90.hpp / moe_sm100.hpp, the rule in moe_heuristics.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/moe/moe_problem.h"

namespace swordfish {
namespace dispatch {

// "" when `path` can run p on p's device, else the reason naming the value.
// Reads shapes, dtypes and flags only (pointers may be null). kAuto asks about
// the path moe_select() would pick.
std::string moe_can_implement(const MoeProblem& p, MoePath path);

// The path the tables pick for p (never kAuto).
MoePath moe_select(const MoeProblem& p);

// Rows per token-sorted block the fused path uses for p (16 or 32).
int moe_block_m(const MoeProblem& p);

// Bytes of scratch `path` needs for p (0 when none).
size_t moe_workspace_bytes(const MoeProblem& p, MoePath path);

// Launch `path` (resolved, not kAuto) on `stream` (a cudaStream_t) with p's
// device current; records the path as the device's last MoE path and logs it
// once per shape when SWORDFISH_DEBUG is on. "" or the error.
std::string moe_run(const MoeProblem& p, MoePath path, void* stream);

// The path of the most recent moe_run() on `device` (kAuto if none).
MoePath moe_last_path(int device);

// moe_align (the op): "" when it can sort `slots` pairs over `experts` local
// experts in blocks of block_m on a device of compute capability cc_major,
// else the reason; the lengths of its sorted_ids / expert_ids; the launch
// (one CTA on `stream`; ids int32, or int64 when ids_int64). See kernels/moe/moe.h.
std::string moe_align_check(long long slots, int experts, int block_m, int cc_major);
long long moe_align_sorted_len(long long slots, int experts, int block_m);
long long moe_align_blocks_len(long long slots, int experts, int block_m);
std::string moe_align(const void* ids, bool ids_int64, long long slots, int experts, int block_m,
                      const int32_t* expert_map, int map_len, int32_t* sorted_ids, int32_t* expert_ids,
                      int32_t* num_post_pad, int device, int cc_major, void* stream);

// The names of the accepted paths, comma-separated, in value order from 1
// (what moe_path_names() returns to Python).
std::string moe_path_names();

}  // namespace dispatch
}  // namespace swordfish
