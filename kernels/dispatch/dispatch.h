// The dispatcher: the one place that decides which path runs a GemmProblem.
// Host C++ only; no torch. The torch layer (kernels/torch/) fills a
// GemmProblem from tensors, asks for the path and its workspace, allocates the
// workspace from torch's allocator, and calls run().
//
// Every decision is a pure function of the problem (M, K, N, bits, group,
// channelwise, zeros, act-order, dtype) and of the device's compute
// capability and SM count: per-architecture tables live in
// heuristics_sm90.hpp / heuristics_sm100.hpp (arch_tables.hpp picks one;
// heuristics.hpp holds the decision rule itself, CPU-testable).
#pragma once

#include <cstddef>
#include <string>

#include "kernels/common/problem.h"

namespace swordfish {
namespace dispatch {

// Empty string when `path` can run `p` on p's device, else the reason, naming
// the offending value (for example "prefill needs K % 128 == 0, got K = 4160").
// Only shapes, dtypes and flags are read; pointers may be null. kAuto asks
// about the path select() would pick.
std::string can_implement(const GemmProblem& p, Path path);

// The path the tables pick for p (never kAuto). Pointers may be null.
Path select(const GemmProblem& p);

// Bytes of scratch `path` needs for p (0 when none).
size_t workspace_bytes(const GemmProblem& p, Path path);

// Launch `path` (not kAuto; the caller resolved it) on `stream` (a
// cudaStream_t), with p.device made current for the call. p.workspace must
// hold workspace_bytes(p, path) bytes (256-byte aligned for the dense tier).
// Returns "" on success, else an error message. Records `path` as the
// device's last path. Logs the choice per shape once when SWORDFISH_DEBUG=1
// (read at call time).
std::string run(const GemmProblem& p, Path path, void* stream);

// The path recorded by the most recent run() on `device` (kAuto if none).
Path last_path(int device);

// Dense-tier dequantization to an (N, K) fp16/bf16 tensor in original input
// feature order (act-order folded into the write addresses). Uses p.packed,
// p.scales, p.zeros, p.perm, p.K, p.N, p.bits, p.group, p.channelwise,
// p.dtype and writes `out` (16-byte aligned). Each value is one rounding of
// (q - B) * s + zs to the dtype. Returns "" or an error message.
std::string dequantize(const GemmProblem& p, void* out, void* stream);

}  // namespace dispatch
}  // namespace swordfish
