// CPU driver for tests/test_prefill_plan.py: the sm90 prefill plan and layout
// without a GPU or the CUDA runtime (prefill_sm90_plan.h is plain C++).
//
// stdin, one query per line:
//   plan M K N BITS SM_COUNT ACT_ORDER
//       -> bt m_tiles n_tiles k_stages dp_tiles splits split_tiles items grid group_m ws_x ws_partials est_ns
//          cg tile_n
//   layout BITS BT CG
//       -> ks stages stage_bytes smem_bytes threads epi_rows
// Not part of the extension (CMake skips tests/ folders).
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "kernels/prefill/sm90/prefill_sm90_plan.h"

using namespace swordfish;
using namespace swordfish::prefill::sm90;

namespace {
const int32_t kPresent = 0;

template <int BITS, int BT, int CG>
void print_layout() {
  constexpr int ks = slices_for<BITS, BT, CG>();
  static_assert(ks == slices(BITS, BT, CG), "the run-time KS is the kernel's");
  using L = Layout<BITS, BT, ks, CG>;
  std::printf("%d %d %d %d %d %d\n", ks, L::kStages, L::kStageBytes, L::kSmemBytes, threads_for(CG), L::kEpiRows);
}

template <int BITS>
bool layout_of(int bt, int cg) {
  if (cg == 2 && bt == 64) print_layout<BITS, 64, 2>();
  else if (cg == 2 && bt == 128) print_layout<BITS, 128, 2>();
  else if (cg == 2 && bt == 192) print_layout<BITS, 192, 2>();
  else if (cg == 2 && bt == 256) print_layout<BITS, 256, 2>();
  else if (cg == 3 && bt == 64) print_layout<BITS, 64, 3>();
  else if (cg == 3 && bt == 128) print_layout<BITS, 128, 3>();
  else return false;
  return true;
}
}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd == "plan") {
      GemmProblem p;
      int act = 0;
      in >> p.M >> p.K >> p.N >> p.bits >> p.sm_count >> act;
      if (!in) {
        std::printf("error: bad query '%s'\n", line.c_str());
        return 2;
      }
      p.perm = act ? &kPresent : nullptr;
      const Plan t = make_plan(p);
      std::printf("%d %d %d %d %d %d %d %d %d %d %zu %zu %.1f %d %d\n", t.bt, t.m_tiles, t.n_tiles, t.k_stages,
                  t.dp_tiles, t.splits, t.split_tiles, t.items, t.grid, t.group_m, t.ws_x, t.ws_partials, t.est_ns, t.cg,
                  t.tile_n());
    } else if (cmd == "layout") {
      int bits = 0, bt = 0, cg = 0;
      in >> bits >> bt >> cg;
      const bool ok = bits == 4 ? layout_of<4>(bt, cg) : bits == 8 ? layout_of<8>(bt, cg) : false;
      if (!ok) {
        std::printf("error: no layout for bits %d BT %d CG %d\n", bits, bt, cg);
        return 2;
      }
    } else if (!cmd.empty()) {
      std::printf("error: unknown command '%s'\n", cmd.c_str());
      return 2;
    }
    std::fflush(stdout);
  }
  return 0;
}
