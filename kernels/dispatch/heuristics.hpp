// The dispatcher's decision, as a pure function of a problem, the paths that
// can run it, and a per-architecture table of crossovers
// (heuristics_sm90.hpp, heuristics_sm100.hpp, kConservative below).
//
// Header-only and constexpr, plain C++17 with no CUDA: dispatch.cpp uses it
// and tests/test_dispatch.py compiles it on the CPU
// (kernels/dispatch/tests/select_table_main.cpp) to check every boundary.
//
// The decision, in order:
//   1. Dense tier, when it can run the problem and M reaches the table's
//      threshold for (bits, K-heavy; int8 also per layer size where a table
//      says so) or, with act-order and N <= 2K, the act-order threshold (per
//      layer size where a table says so), whichever is lower. Two sets of
//      thresholds: one against the fused paths when the prefill mainloop can
//      run the problem, one against decode alone when it cannot (no prefill
//      for the arch in this build, or a problem prefill cannot run).
//   2. With prefill available: decode when M <= decode_max_m (per bit width,
//      and per layer size and K >= 2N where a table says so); or M <=
//      unbalanced_max_m while the prefill plan's balance is below min_balance;
//      or M <= decode_underfill_max_m while the prefill grid (one CTA per
//      prefill_tile_n output columns) has fewer CTAs than the device has SMs;
//      or K >= 2N and M <= decode_k_heavy_max_m. Otherwise prefill.
//   3. Without prefill: decode, else whichever path can run.
// Keys not in the tables (dtype, group, channelwise, zero points) showed no
// effect on the crossovers in the write-up's measurements; they enter only
// through what the paths can run (Availability). Add a key when a
// measurement shows one.
#pragma once

#include <climits>

#include "kernels/common/problem.h"

namespace swordfish {
namespace dispatch {
namespace heuristics {

inline constexpr int kNever = INT_MAX;  // a threshold M never reaches

// Which paths can run the problem on this device in this build (their
// can_implement() came back empty).
struct Availability {
  bool decode = true;
  bool dense = true;
  bool prefill = false;
  // The prefill plan's balance for the problem, when prefill can run it (arch_tables.hpp
  // prefill_balance: the plan's work spread evenly over the SMs at its per-slice rate, over the
  // plan's estimated time; 1 where no rule reads it or the architecture has no plan model).
  double prefill_balance = 1.0;
};

inline constexpr int kSame = -1;  // a refinement that defers to the general value

// Dense-tier thresholds: the smallest M that goes dense.
struct DenseFrom {
  int int4 = kNever;
  int int4_k_heavy = kNever;  // K >= 2N
  int int8 = kNever;
  int int8_k_heavy = kNever;  // K >= 2N
  int act_order = kNever;     // act-order weights with N <= 2K (either bit width)
  int act_order_large = kSame;  // ... on layers with K * N > Table::small_kn: this instead of act_order
  int int8_small = kSame;       // int8 on layers with K * N <= Table::small_kn: this instead of int8 /
                                // int8_k_heavy
};

struct Table {
  const char* name = "";
  // Decode against prefill (consulted only when prefill can run).
  int decode_max_m = 0;
  int decode_underfill_max_m = 0;
  int prefill_tile_n = 128;
  int decode_k_heavy_max_m = 0;
  DenseFrom dense_vs_fused;   // when prefill can run the problem
  DenseFrom dense_vs_decode;  // when it cannot (no prefill in this build, or an ineligible format)
  // Refinements of decode_max_m that one architecture's measurements asked for (off by default):
  int decode_max_m_int8 = kSame;  // int8 weights: decode keeps M <= this instead
  long long small_kn = 0;         // K * N <= small_kn ("small" layers): decode keeps M <= small_max_m
  int small_max_m = 0;            //   (int4; int8: small_max_m_int8) instead of the values above
  int small_max_m_int8 = kSame;
  int small_k_heavy_max_m_int8 = kSame;  // int8 on small layers with K >= 2N: this instead of small_max_m_int8
  // Decode also keeps M <= unbalanced_max_m where the prefill plan's balance
  // (Availability::prefill_balance) is below min_balance: where prefill's tiles
  // divide poorly over the SMs. Off when unbalanced_max_m is 0.
  int unbalanced_max_m = 0;
  double min_balance = 0.0;
};

// Cost keys read the packed K (what the kernels stream, K_pad under the padded act-order layout); K_in only
// scales the dense crossover (padded_dense_from).
constexpr bool k_heavy(const GemmProblem& p) { return static_cast<long long>(p.K) >= 2LL * p.N; }

// The padded act-order layout (K_in < K packed rows): decode and prefill stream and compute all K rows, the
// dense tier's GEMM only K_in, so the dense crossover moves down by K_in / K (first principles, not measured:
// RESULTS.md [act-order-tp]). 1 at the least; kNever stays.
constexpr int padded_dense_from(int m, const GemmProblem& p) {
  const long long k_in = input_width(p);
  if (m == kNever || p.perm == nullptr || k_in >= p.K) return m;
  const long long scaled = (static_cast<long long>(m) * k_in + p.K - 1) / p.K;
  return scaled < 1 ? 1 : static_cast<int>(scaled);
}

// The dense threshold that applies to p under `d` (small_kn: the table's small-layer bound).
constexpr int dense_from(const DenseFrom& d, const GemmProblem& p, long long small_kn) {
  const bool heavy = k_heavy(p);
  const bool large = static_cast<long long>(p.K) * p.N > small_kn;
  int m = p.bits == 4 ? (heavy ? d.int4_k_heavy : d.int4) : (heavy ? d.int8_k_heavy : d.int8);
  if (p.bits == 8 && !large && d.int8_small != kSame) m = d.int8_small;
  if (p.perm != nullptr && static_cast<long long>(p.N) <= 2LL * p.K) {
    const int act = large && d.act_order_large != kSame ? d.act_order_large : d.act_order;
    if (act < m) m = act;
  }
  return padded_dense_from(m, p);
}

// The largest M decode keeps against prefill for p's bit width and layer size.
constexpr int decode_max_m(const Table& t, const GemmProblem& p) {
  const bool int8 = p.bits == 8;
  if (static_cast<long long>(p.K) * p.N <= t.small_kn) {
    if (int8 && k_heavy(p) && t.small_k_heavy_max_m_int8 != kSame) return t.small_k_heavy_max_m_int8;
    return int8 && t.small_max_m_int8 != kSame ? t.small_max_m_int8 : t.small_max_m;
  }
  return int8 && t.decode_max_m_int8 != kSame ? t.decode_max_m_int8 : t.decode_max_m;
}

// True when decode keeps p although prefill could run it.
constexpr bool decode_over_prefill(const Table& t, const GemmProblem& p, const Availability& a) {
  if (p.M <= decode_max_m(t, p)) return true;
  if (p.M <= t.unbalanced_max_m && a.prefill_balance < t.min_balance) return true;
  const long long prefill_ctas = (static_cast<long long>(p.N) + t.prefill_tile_n - 1) / t.prefill_tile_n;
  if (p.M <= t.decode_underfill_max_m && prefill_ctas < p.sm_count) return true;
  if (k_heavy(p) && p.M <= t.decode_k_heavy_max_m) return true;
  return false;
}

// The path for p. Never kAuto. When no path can run p it returns decode, and
// run() reports decode's reason.
constexpr Path choose(const Table& t, const GemmProblem& p, const Availability& a) {
  const int dense_m = dense_from(a.prefill ? t.dense_vs_fused : t.dense_vs_decode, p, t.small_kn);
  if (a.dense && p.M >= dense_m) return Path::kDense;
  if (a.prefill && !decode_over_prefill(t, p, a)) return Path::kPrefill;
  if (a.decode) return Path::kDecode;
  if (a.prefill) return Path::kPrefill;
  if (a.dense) return Path::kDense;
  return Path::kDecode;
}

// Architectures without a table of their own (sm80, sm86, sm89, sm120, ...):
// decode and dense only, with the dense tier engaging late so that nothing
// measured elsewhere is assumed. UNMEASURED: twice the pre-measurement H200
// estimates (the measured H200 dense-vs-decode crossovers are 208-224 since
// 2026-12-03-d, 96-128 before the decode gains: see heuristics_sm90.hpp);
// measure with benchmarks/bench_dispatch.py on such a device before trusting
// them.
inline constexpr Table kConservative = {
    "conservative (sm80/sm89/sm120 and unknown; unmeasured)",
    /*decode_max_m=*/0, /*decode_underfill_max_m=*/0, /*prefill_tile_n=*/128, /*decode_k_heavy_max_m=*/0,
    /*dense_vs_fused=*/DenseFrom{},  // no prefill on these architectures
    /*dense_vs_decode=*/DenseFrom{/*int4=*/1024, /*int4_k_heavy=*/1024, /*int8=*/512, /*int8_k_heavy=*/512,
                                  /*act_order=*/512},
};

}  // namespace heuristics
}  // namespace dispatch
}  // namespace swordfish
