// CPU driver for tests/test_dispatch.py: answers the dispatcher's table
// questions without a GPU or the CUDA runtime (the heuristics headers, linked
// with kernels/prefill/prefill_plan.cpp for the prefill plan's balance).
//
// stdin, one query per line:
//   choose CC_MAJOR CC_MINOR SM_COUNT M K N BITS ACT_ORDER DECODE_OK DENSE_OK PREFILL_OK [K_IN]
//       -> the Path value heuristics::choose returns (K_IN: x's width under the padded act-order layout)
//   table CC_MAJOR CC_MINOR
//       -> name|decode_max_m decode_underfill_max_m prefill_tile_n decode_k_heavy_max_m
//          fused: int4 int4_k_heavy int8 int8_k_heavy act_order act_order_large int8_small
//          decode: int4 int4_k_heavy int8 int8_k_heavy act_order act_order_large int8_small
//          (kNever and kSame printed as -1)
//          decode_max_m_int8 small_kn small_max_m small_max_m_int8 small_k_heavy_max_m_int8
//          (kSame printed as -1) unbalanced_max_m min_balance x 1000 (an integer)
//   balance CC_MAJOR CC_MINOR SM_COUNT M K N BITS
//       -> prefill_balance(table, p) x 1000, rounded down (what choose() compares with min_balance;
//          1000 above the table's unbalanced_max_m, where no plan is built)
//   grouped_tile CC_MAJOR CC_MINOR BITS AVG_ROWS
//       -> prefill::grouped_tile_rows (the grouped MoE GEMM's token tile; 0: none on that device)
// Not part of the extension (CMake skips tests/ folders).
#include <climits>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "kernels/dispatch/arch_tables.hpp"
#include "kernels/prefill/prefill.h"

using namespace swordfish;
using namespace swordfish::dispatch::heuristics;

namespace {
const int32_t kPresent = 0;

long long shown(int v) { return v == kNever ? -1 : v; }

void print_dense(const DenseFrom& d) {
  std::printf(" %lld %lld %lld %lld %lld %lld %lld", shown(d.int4), shown(d.int4_k_heavy), shown(d.int8),
              shown(d.int8_k_heavy), shown(d.act_order), shown(d.act_order_large),
              shown(d.int8_small));  // kSame is -1 already
}
}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd == "choose") {
      GemmProblem p;
      int act = 0, dec = 0, den = 0, pre = 0;
      in >> p.cc_major >> p.cc_minor >> p.sm_count >> p.M >> p.K >> p.N >> p.bits >> act >> dec >> den >> pre;
      if (!in) {
        std::printf("error: bad query '%s'\n", line.c_str());
        return 2;
      }
      p.perm = act ? &kPresent : nullptr;
      int k_in = 0;
      if (in >> k_in) p.K_in = k_in;
      Availability a;
      a.decode = dec != 0;
      a.dense = den != 0;
      a.prefill = pre != 0;
      const Table& t = table_for(p.cc_major, p.cc_minor);
      if (a.prefill) a.prefill_balance = prefill_balance(t, p);
      std::printf("%d\n", static_cast<int>(choose(t, p, a)));
    } else if (cmd == "table") {
      int major = 0, minor = 0;
      in >> major >> minor;
      const Table& t = table_for(major, minor);
      std::printf("%s|%d %d %d %d", t.name, t.decode_max_m, t.decode_underfill_max_m, t.prefill_tile_n,
                  t.decode_k_heavy_max_m);
      print_dense(t.dense_vs_fused);
      print_dense(t.dense_vs_decode);
      std::printf(" %d %lld %d %d %d", t.decode_max_m_int8, t.small_kn, t.small_max_m, t.small_max_m_int8,
                  t.small_k_heavy_max_m_int8);
      std::printf(" %d %d\n", t.unbalanced_max_m, static_cast<int>(t.min_balance * 1000 + 0.5));
    } else if (cmd == "balance") {
      GemmProblem p;
      in >> p.cc_major >> p.cc_minor >> p.sm_count >> p.M >> p.K >> p.N >> p.bits;
      if (!in) {
        std::printf("error: bad query '%s'\n", line.c_str());
        return 2;
      }
      std::printf("%d\n", static_cast<int>(prefill_balance(table_for(p.cc_major, p.cc_minor), p) * 1000));
    } else if (cmd == "grouped_tile") {
      GemmProblem p;
      double avg = 0;
      in >> p.cc_major >> p.cc_minor >> p.bits >> avg;
      if (!in) {
        std::printf("error: bad query '%s'\n", line.c_str());
        return 2;
      }
      std::printf("%d\n", prefill::grouped_tile_rows(p, avg));
    } else if (!cmd.empty()) {
      std::printf("error: unknown command '%s'\n", cmd.c_str());
      return 2;
    }
    std::fflush(stdout);
  }
  return 0;
}
