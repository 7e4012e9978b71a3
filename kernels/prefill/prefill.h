// The prefill path (tensor-core mainloops for mid-size and large M): what the
// dispatcher calls. Plain C++ (no CUDA headers). prefill_launch.cpp routes
// each question by compute capability to an architecture's folder:
//   sm90/   wgmma mainloop (prefill_sm90.cuh), its launcher and planner
//   sm100/  tcgen05 mainloop (prefill_sm100.cuh; B200 sm_100a, Thor sm_110a), its
//           launcher and planner: COMPILED, NOT RUN
// The Transform stage they share (transform.cuh, slice.h) sits beside this file.
//
// sm90a (H100 / H200): int4 groups 32 / 64 / 128 and int8 groups 32 / 64 /
// 128 (channelwise scales replicated to one of those groups), fp16 and bf16,
// folded zero points, act-order (activation columns gathered into the
// workspace first, prep::gather_columns), bias; K and N multiples of 128; any
// M >= 1. Every result is bit-identical run to run (no atomics; split-K
// partials are reduced in a fixed order). sm100a / sm110a (compute capability
// 10.0 / 11.0): the same formats through 2-SM tcgen05 pairs, deterministic
// too, but compiled, not run: can_implement() refuses unless
// SWORDFISH_SM100_PREFILL=1 (prefill_sm100_launch.h). Elsewhere it says the
// device has no prefill mainloop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/common/problem.h"

namespace swordfish {
namespace prefill {

// "" when the prefill path can run p on its device, else the reason naming the
// offending value. Reads shapes, flags and device facts; checks the alignment
// of the pointers that are set (TMA and bulk copies need 16-byte alignment).
std::string can_implement(const GemmProblem& p);

// "" when p's format and shape are what every prefill mainloop takes (bits 4 /
// 8, group 32 / 64 / 128, K and N multiples of 128, K a multiple of the group,
// fp16 / bf16, M >= 0), else the reason. The architectures' can_implement ask
// it after their own device checks; defined in prefill_launch.cpp.
std::string format_reason(const GemmProblem& p);

// Scratch bytes launch() needs for p: the gathered activations under
// act-order and the fp32 split-K partials. 0 when none.
size_t workspace_bytes(const GemmProblem& p);

// Enqueue p on `stream` (a cudaStream_t; no host synchronisation, no
// allocation; safe under CUDA-graph capture). "" on success, else the error.
std::string launch(const GemmProblem& p, void* stream);

// One line naming the configuration launch() would use for p, e.g.
// "prefill sm90 int4 bf16 tile=128x256 k=64 stages=4 splits=1 split_tiles=0
// items=512 grid=132 band=4".
std::string describe(const GemmProblem& p);

// How evenly the architecture's plan for p spreads over the device's SMs: the
// plan's work at its per-slice rate divided evenly over the SMs, over the
// plan's estimated time (1: perfect). 1 on architectures without a plan model
// (anything but compute capability 9.0 today). What the dispatcher's
// unbalanced-plan rule reads (heuristics.hpp, Availability::prefill_balance).
// Reads p.M, K, N, bits, sm_count, the compute capability and whether p.perm
// is set. Defined in prefill_plan.cpp (plain C++: the dispatcher's CPU tests
// link it).
double plan_balance(const GemmProblem& p);

// A grouped GEMM over stacked experts (the MoE layer's grouped path,
// kernels/moe/moe_dense.cu): y[r] = x[r] @ W[e(r)]^T, where rows come in runs
// of `tile_rows` rows that all belong to one expert, tile_expert[i] naming
// the expert of run i.
//   gemm: one expert's K, N, bits, group, dtype and device; packed, scales
//     and zeros hold all `experts` experts stacked (E, N / 64, K / block_k,
//     512) and (E, K / group, N); x is (M, K) and y (M, N) with M a multiple
//     of tile_rows (the allocation: an upper bound); no perm, no bias.
//   rows_dev: the rows in use, on the device (a multiple of tile_rows, <= M):
//     runs past it, and runs whose expert lies outside [0, experts), are
//     neither read nor written.
// sm90a only today; elsewhere grouped_can_implement says so.
struct GroupedProblem {
  GemmProblem gemm;
  const int32_t* tile_expert = nullptr;  // (M / tile_rows)
  const int32_t* rows_dev = nullptr;
  int experts = 0;
  int tile_rows = 0;  // grouped_tile_rows()
};

// The run length (token tile) the grouped GEMM takes for experts that hold
// about avg_rows rows each, 0 where the device has no grouped GEMM. Plain C++.
int grouped_tile_rows(const GemmProblem& expert, double avg_rows);

// "" when the grouped GEMM can run g, else the reason naming the value.
std::string grouped_can_implement(const GroupedProblem& g);

// Enqueue g on `stream` (a cudaStream_t; no host synchronisation, no
// allocation, CUDA-graph safe). "" on success, else the error.
std::string grouped_launch(const GroupedProblem& g, void* stream);

// One line naming the grouped GEMM's configuration.
std::string grouped_describe(const GroupedProblem& g);

}  // namespace prefill
}  // namespace swordfish
