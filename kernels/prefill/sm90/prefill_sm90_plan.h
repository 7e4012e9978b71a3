// The sm90 prefill launch plan: token tile, split-K and grid, as a pure
// function of the problem and the device's SM count. Plain C++ (no CUDA):
// prefill_sm90_launch.cu launches what it says, and tests/test_prefill_plan.py
// checks it on the CPU (kernels/prefill/sm90/tests/plan_main.cpp).
//
// Plan (a pure function of the problem and the device's SM count G):
//   For each tile, CG consumer warpgroups (64 CG columns: 128, or 192 with
//   BT <= 128) by token tile BT in {256, 192, 128, 64}: T = n_tiles * m_tiles
//   tiles (n_tiles = ceil(N / 64 CG)) of k_stages stages each; a stage is
//   KS = sm90::slices_for<BITS, BT, CG>() k64 slices (k128 for BT <= 128
//   where four such stages fit) and costs stage = KS * slice_ns(BITS, BT, CG).
//     whole tiles only:  time = ceil(T / G) * (k_stages * stage(BT) + item)
//     split tail:        the floor(T / G) full waves run whole tiles; the
//                        r = T mod G tiles left (all T when T < G) are split
//                        into s in 2..8 k ranges (>= 4 stages each), fp32
//                        partials reduced in split order by a second kernel:
//                        time = (floor(T / G) * k_stages + ceil(r s / G) *
//                        ceil(k_stages / s)) * stage(BT) + (floor(T / G) +
//                        ceil(r s / G)) * item + reduce(r, s, BT)
//   and the cheapest wins (ties: 128 columns, larger BT, then no split).
//   item is a work item's fixed cost (pipeline fill, epilogue); reduce = launch gap +
//   partial bytes written and read at L2 rate.
//   The constants are a least-squares fit (relative error) to 123 H200
//   timings (shape, M, plan; best of 2-3 rounds) of the k128-stage kernels
//   under two earlier plan models, on the eight Llama-3 shapes at
//   M = 1 ... 1024, int4 g128 bf16 (cb85925:benchmarks/experiments/
//   fit_prefill_plan.py): rms error 5%.
//   Then checked in a separate 3-round A/B against the previous constants:
//   each of the 25 plans the fit changed (M = 96 ... 2048) ran 0.81-1.01x the
//   time, geometric mean 0.989 over all 96 points
//   (cb85925:benchmarks/results/h200/2026-12-02-f/experiments/). int8 has its own
//   slice constants (below).
//   grid = min(items, G), one CTA per SM (the kernel uses ~all shared memory).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <cmath>
#include <cstddef>

#include "kernels/common/problem.h"
#include "kernels/prefill/sm90/prefill_sm90_layout.h"

namespace swordfish {
namespace prefill {
namespace sm90 {

// The cost model (fitted, see above), per k64 slice. A 192-column slice does
// 1.5x the dequantization and MMA work of a 128-column one on the same staged
// x and measured 1.56x (BT 128) and 1.74x (BT 64, which loses its k128
// stages): the wide tile is for wave quantization, not a faster slice. Its two
// constants are fitted with the others held (160 timed H200 plans of both
// tiles, int4, the eight Llama-3 shapes at M = 33 ... 2048; of the 80 points
// timed under two plans the model orders 75 right,
// cb85925:benchmarks/results/h200/2026-12-03-e/experiments/ab_cg3/fit.txt).
// int8 has its own slice costs (twice the weight bytes and dequantization per
// slice): 1.11-1.25x int4's, fitted (when its BT 128 tile still had k64
// stages; k128 since 2026-12-03-g: a refit to 450 ns moved 28 plans to
// 0.992x with 8 of them up to 1.08x slower, so 505 stays,
// cb85925:benchmarks/results/h200/2026-12-03-h/ call 3) on the same
// 2026-12-03-e timings (int8, item and reduce held); with the int4 constants
// the model named the faster of two timed int8 plans at 70 of 80 points, with
// its own at 76. BT 192's two constants are fitted with the rest held on the
// timings of its first build, which priced them halfway between BT 128's and
// 256's (581 / 662 ns; 36 int4 and 27 int8 timed BT 192 plans, eight layers,
// M = 192-1536, cb85925:benchmarks/results/h200/2026-12-04-c/ call 3): 3.2 ns per token
// of a slice at BT 192 against 2.9 at BT 256 and 3.3 at BT 128 (int4).
inline constexpr double slice_ns(int bits, int bt, int cg) {
  if (bits == 8) {
    if (cg == 3) return bt <= 64 ? 547.0 : 718.0;
    return bt <= 64 ? 365.0 : bt <= 128 ? 505.0 : bt <= 192 ? 670.0 : 820.0;
  }
  if (cg == 3) return bt <= 64 ? 508.0 : 655.0;
  return bt <= 64 ? 292.0 : bt <= 128 ? 420.0 : bt <= 192 ? 617.0 : 742.0;
}
inline constexpr int kConsumerGroups[] = {2, 3};
inline constexpr double kItemNs = 135.0;             // per work item an SM runs
inline constexpr double kReduceLaunchNs = 4900.0;    // the extra kernel and its dependency
inline constexpr double kReduceBytesPerNs = 6250.0;  // partials through L2, written + read
inline constexpr int kMaxSplits = 8;
inline constexpr int kMinStagesPerSplit = 4;
inline constexpr int kTokenTiles[] = {256, 192, 128, 64};

inline long long plan_ceil_div(long long a, long long b) { return (a + b - 1) / b; }
inline size_t plan_align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// What launch() runs (Params takes the same names).
struct Plan {
  int cg = 2;                      // consumer warpgroups: tile_n() = 64 cg output columns per tile
  int bt = 0;                      // token tile
  int m_tiles = 0, n_tiles = 0;    // tiles along M (BT rows) and N (tile_n columns; the last may
                                   // reach past N when tile_n does not divide it)
  int k_stages = 0;                // pipeline stages per whole tile: K / (64 KS)
  int dp_tiles = 0;                // tiles run whole, a multiple of the grid (or all of them)
  int splits = 1;                  // k ranges of each remaining tile (1: none remain split)
  int split_tiles = 0;             // m_tiles * n_tiles - dp_tiles
  int items = 0;                   // dp_tiles + split_tiles * splits
  int grid = 0;                    // min(items, G)
  int group_m = 1;                 // raster band, in m tiles
  double est_ns = 0;               // the cost model's time
  double balance = 0;              // the tiles' slices at this plan's rate spread evenly over the SMs,
                                   // over est_ns (1: perfect; the dispatcher's unbalanced_max_m reads it)
  size_t ws_x = 0, ws_partials = 0;  // workspace bytes: gathered x (act-order), fp32 partials

  int tile_n() const { return sm90::tile_n(cg); }
};

// Reads p.M, K, N, bits, sm_count and whether p.perm is set.
inline Plan make_plan(const GemmProblem& p) {
  Plan best;
  const long long sms = p.sm_count > 0 ? p.sm_count : 1;
  bool have = false;
  for (int cg : kConsumerGroups)
  for (int bt : kTokenTiles) {
    const int tn = tile_n(cg);
    if (!has_tile(cg, bt) || (cg > 2 && p.N < tn)) continue;  // a wide tile on fewer columns is mostly waste
    const int n_tiles = static_cast<int>(plan_ceil_div(p.N, tn));
    const long long m_tiles = plan_ceil_div(p.M, bt);
    const long long tiles = m_tiles * n_tiles;
    // A stage is KS k64 slices (the kernel's choice: slices_for).
    const int ks = slices(p.bits, bt, cg);
    const int k_stages = p.K / (kSliceK * ks);
    const double stage_ns = ks * slice_ns(p.bits, bt, cg);
    // Whole tiles only.
    Plan cand;
    cand.cg = cg;
    cand.n_tiles = n_tiles;
    cand.bt = bt;
    cand.k_stages = k_stages;
    cand.m_tiles = static_cast<int>(m_tiles);
    cand.dp_tiles = static_cast<int>(tiles);
    cand.splits = 1;
    cand.est_ns = static_cast<double>(plan_ceil_div(tiles, sms)) * (k_stages * stage_ns + kItemNs);
    Plan options[2] = {cand, cand};
    int n_options = 1;
    // Split tail: the r tiles left after the full waves, each split into s k ranges; r * s items
    // run in ceil(r * s / G) rounds of ceil(k_stages / s) stages (s need not divide G: 80 tiles
    // split 3 ways take 2 rounds of a third of the work, 0.67 of one full wave).
    const long long full = tiles / sms, r = tiles % sms;
    if (r > 0) {
      Plan split_best;
      bool have_split = false;
      for (int s = 2; s <= kMaxSplits && k_stages / s >= kMinStagesPerSplit; ++s) {
        Plan split = cand;
        split.dp_tiles = static_cast<int>(full * sms);
        split.splits = s;
        const double partial_bytes = static_cast<double>(r) * s * bt * tn * sizeof(float);
        const double rounds = static_cast<double>(plan_ceil_div(r * s, sms));
        split.est_ns = (static_cast<double>(full) * k_stages + rounds * static_cast<double>(plan_ceil_div(k_stages, s))) *
                           stage_ns +
                       (static_cast<double>(full) + rounds) * kItemNs + kReduceLaunchNs +
                       2.0 * partial_bytes / kReduceBytesPerNs;
        if (!have_split || split.est_ns < split_best.est_ns) {
          split_best = split;
          have_split = true;
        }
      }
      if (have_split) options[n_options++] = split_best;
    }
    for (int i = 0; i < n_options; ++i) {
      if (!have || options[i].est_ns < best.est_ns) {
        best = options[i];
        have = true;
      }
    }
  }
  // Raster band: the resident tiles (about G of them) span a m tiles x G / a
  // n tiles, touching a x slabs of bt * K * 2 bytes and G / a weight columns
  // of tile_n * K * bits / 8 bytes; the sum is smallest at
  // a = sqrt(G * tile_n * bits / 8 / (2 * bt)).
  {
    const double a = std::sqrt(static_cast<double>(sms) * best.tile_n() * p.bits / 8.0 / (2.0 * best.bt));
    int g = static_cast<int>(a + 0.5);
    if (g < 1) g = 1;
    if (g > best.m_tiles) g = best.m_tiles;
    best.group_m = g;
  }
  const long long tiles = static_cast<long long>(best.m_tiles) * best.n_tiles;
  best.balance = static_cast<double>(tiles) * best.k_stages * slices(p.bits, best.bt, best.cg) *
                 slice_ns(p.bits, best.bt, best.cg) / static_cast<double>(sms) / best.est_ns;
  best.split_tiles = static_cast<int>(tiles - best.dp_tiles);
  const long long items = best.dp_tiles + static_cast<long long>(best.split_tiles) * best.splits;
  best.items = static_cast<int>(items);
  best.grid = static_cast<int>(items < sms ? items : sms);
  if (p.perm != nullptr) best.ws_x = plan_align_up(static_cast<size_t>(p.M) * p.K * 2, 256);
  if (best.splits > 1)
    best.ws_partials = static_cast<size_t>(best.split_tiles) * best.splits * best.bt * best.tile_n() * sizeof(float);
  return best;
}

// The grouped GEMM over stacked experts (prefill.h GroupedProblem). Each
// expert's run pads to a multiple of the token tile: about avg + bt / 2 rows,
// at least one tile. The tile is the one whose padded rows cost least at the
// 128-column tiles' per-slice rate (slice_ns / bt per row): 64 rows below
// about 60 rows per expert, 128 below about 420, 256 from there (int8: 57,
// 213). The rates are the dense plan's; the layer was timed (RESULTS.md [moe]), this choice was not A/B-timed.
inline int grouped_tile_rows(int bits, double avg_rows) {
  int best = 64;
  double best_cost = 0;
  for (int bt : {64, 128, 256}) {
    const double rows = std::max<double>(bt, avg_rows + bt / 2.0);
    const double cost = rows * slice_ns(bits, bt, 2) / bt;
    if (bt == 64 || cost < best_cost) {
      best = bt;
      best_cost = cost;
    }
  }
  return best;
}

// Whole 128-column tiles over `rows` (an upper bound: the kernel skips runs
// past the device's row count), no split-K. The band is about one expert's
// runs (rows / experts of them, at most 8): the band's m tiles share each
// weight tile through L2 while the next expert's runs start.
inline Plan make_grouped_plan(const GemmProblem& expert, long long rows, int bt, int experts) {
  Plan plan;
  const long long sms = expert.sm_count > 0 ? expert.sm_count : 1;
  plan.cg = 2;
  plan.bt = bt;
  plan.n_tiles = static_cast<int>(plan_ceil_div(expert.N, plan.tile_n()));
  plan.m_tiles = static_cast<int>(rows / bt);
  plan.k_stages = expert.K / (kSliceK * slices(expert.bits, bt, plan.cg));
  const long long tiles = static_cast<long long>(plan.m_tiles) * plan.n_tiles;
  plan.dp_tiles = static_cast<int>(tiles);
  plan.items = static_cast<int>(tiles);
  plan.grid = static_cast<int>(std::max(1LL, std::min(tiles, sms)));
  const long long per_expert = plan_ceil_div(plan_ceil_div(rows, std::max(experts, 1)), bt);
  plan.group_m = static_cast<int>(std::max(1LL, std::min<long long>({per_expert, 8LL, std::max(1, plan.m_tiles)})));
  plan.balance = 1.0;
  return plan;
}

// Rows of x a stage loads for the last m tile: its rows inside M rounded up to
// 8 (whole 128-byte swizzle atoms); every other m tile loads BT. The producer
// fills the slot's other rows with zeros once, the first time the slot serves
// the last tile (gemm_kernel). A BT-row box that TMA zero-fills past M ran up to
// 1.29x the time (int4 8B qkv, 70B qkv / o at M = 160, two BT 128 tiles, the
// last with 32 rows); leaving the rows stale instead was slower at other M.
// Both measured in docs/PREFILL.md, "The last m tile's x box".
inline int last_tile_x_rows(const Plan& plan, long long M) {
  const long long rows = M - static_cast<long long>(plan.m_tiles - 1) * plan.bt;
  return static_cast<int>(std::min<long long>(plan.bt, (rows + 7) / 8 * 8));
}

}  // namespace sm90
}  // namespace prefill
}  // namespace swordfish
