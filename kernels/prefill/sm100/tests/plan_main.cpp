// CPU driver for tests/test_prefill_sm100_host.py: the sm100 prefill's plan,
// layout, TMEM column plan, 2-SM pairing, tile scheduler, L2 chunking and the
// Transform's byte-domain store addresses (prefill_sm100_plan.h is plain C++),
// without a GPU or the CUDA runtime. Not part of the extension (CMake skips
// tests/ folders).
//
// stdin, one query per line; one answer line each ("error: ..." for a bad query):
//   plan M K N BITS SMS CC_MAJOR CC_MINOR ACT GROUP CHANNELWISE
//       -> bt x_stages tmem_cols smem chunk_rows chunks m_tiles n_tiles k_stages tiles clusters group_m
//          scale_rows ws_x
//   layout BITS BT   -> x_stages a_bytes x_bytes w_bytes s_bytes off_a off_x off_w off_s off_z off_bar
//                       off_tmem smem threads
//   wtx BITS BT SCALE_ROWS ZEROS -> the weight stage's transaction bytes, then the pair's x bytes
//   tile T M_TILES N_TILES GROUP_M -> m_tile n_tile
//   part M_TILE N_TILE RANK BT -> n0 x_row m0
//   count TILES CLUSTER CLUSTERS -> tiles that cluster takes
//   umma ROW K -> byte offset (and the element-domain closed form, in bytes)
//   store C N_LO T KK REG -> row k byte_offset
//   tmem BASE STAGE BT LANE COL -> address
//   chunk M K BT L2_BYTES -> rows
//   scale KB GROUP CHANNELWISE C N_LO -> scale_row rows_per_stage col_bytes row1_bytes (row_bytes 256)
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "kernels/prefill/sm100/prefill_sm100_plan.h"

using namespace swordfish;
using namespace swordfish::prefill::sm100;

namespace {
const int32_t kPresent = 0;

template <int BITS, int BT>
void print_layout() {
  using L = Layout<BITS, BT>;
  std::printf("%d %d %d %d %d %d %d %d %d %d %d %d %d %d\n", L::kXStages, kABytes, L::kXBytes, L::kWBytes, L::kSBytes,
              L::kOffA, L::kOffX, L::kOffW, L::kOffS, L::kOffZ, L::kOffBar, L::kOffTmemSlot, L::kSmemBytes, kThreads);
}

template <int BITS, int BT>
void print_wtx(int rows, bool zeros) {
  using L = Layout<BITS, BT>;
  std::printf("%u %u\n", L::w_tx(rows, zeros), L::kXPairTx);
}

bool bad(const std::string& line) {
  std::printf("error: bad query '%s'\n", line.c_str());
  return false;
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
      int act = 0, cw = 0;
      in >> p.M >> p.K >> p.N >> p.bits >> p.sm_count >> p.cc_major >> p.cc_minor >> act >> p.group >> cw;
      if (!in) return bad(line), 2;
      p.perm = act ? &kPresent : nullptr;
      p.channelwise = cw != 0;
      const Plan t = make_plan(p);
      std::printf("%d %d %d %d %d %d %d %d %d %d %d %d %d %zu\n", t.bt, t.x_stages, t.tmem_cols, t.smem_bytes,
                  t.chunk_rows, t.chunks, t.m_tiles, t.n_tiles, t.k_stages, t.tiles, t.clusters, t.group_m,
                  t.scale_rows, t.ws_x);
    } else if (cmd == "layout") {
      int bits = 0, bt = 0;
      in >> bits >> bt;
      if (bits == 4 && bt == 256) print_layout<4, 256>();
      else if (bits == 4 && bt == 128) print_layout<4, 128>();
      else if (bits == 8 && bt == 128) print_layout<8, 128>();
      else return bad(line), 2;
    } else if (cmd == "wtx") {
      int bits = 0, bt = 0, rows = 0, zeros = 0;
      in >> bits >> bt >> rows >> zeros;
      if (bits == 4 && bt == 256) print_wtx<4, 256>(rows, zeros != 0);
      else if (bits == 4 && bt == 128) print_wtx<4, 128>(rows, zeros != 0);
      else if (bits == 8 && bt == 128) print_wtx<8, 128>(rows, zeros != 0);
      else return bad(line), 2;
    } else if (cmd == "tile") {
      int t = 0, mt = 0, nt = 0, g = 0;
      in >> t >> mt >> nt >> g;
      if (!in) return bad(line), 2;
      const TileCoord c = tile_coords(t, mt, nt, g);
      std::printf("%d %d\n", c.m_tile, c.n_tile);
    } else if (cmd == "part") {
      int mt = 0, nt = 0, rank = 0, bt = 0;
      in >> mt >> nt >> rank >> bt;
      if (!in) return bad(line), 2;
      const CtaPart c = cta_part(TileCoord{mt, nt}, rank, bt);
      std::printf("%d %d %d\n", c.n0, c.x_row, c.m0);
    } else if (cmd == "count") {
      int tiles = 0, cl = 0, cls = 0;
      in >> tiles >> cl >> cls;
      if (!in) return bad(line), 2;
      std::printf("%d\n", cluster_tile_count(tiles, cl, cls));
    } else if (cmd == "umma") {
      int row = 0, k = 0;
      in >> row >> k;
      if (!in) return bad(line), 2;
      std::printf("%u %u\n", umma_a_offset(row, k), 2 * umma_a_offset_elements(row, k));
    } else if (cmd == "store") {
      int c = 0, n_lo = 0, t = 0, kk = 0, reg = 0;
      in >> c >> n_lo >> t >> kk >> reg;
      if (!in) return bad(line), 2;
      const AStore s = a_store(c, n_lo, t, kk, reg);
      std::printf("%d %d %u\n", s.row, s.k, a_store_offset(c, n_lo, t, kk, reg));
    } else if (cmd == "tmem") {
      unsigned base = 0;
      int stage = 0, bt = 0, lane = 0, col = 0;
      in >> base >> stage >> bt >> lane >> col;
      if (!in) return bad(line), 2;
      std::printf("%u\n", tmem_address(base, stage, bt, lane, col));
    } else if (cmd == "chunk") {
      long long M = 0, K = 0, l2 = 0;
      int bt = 0;
      in >> M >> K >> bt >> l2;
      if (!in) return bad(line), 2;
      std::printf("%d\n", chunk_rows(M, K, bt, l2));
    } else if (cmd == "scale") {
      int kb = 0, group = 0, cw = 0, c = 0, n_lo = 0;
      in >> kb >> group >> cw >> c >> n_lo;
      if (!in) return bad(line), 2;
      std::printf("%d %d %u %u\n", scale_row(kb, group, cw != 0), scale_rows(group, cw != 0), scale_col_bytes(c, n_lo),
                  scale_row1_bytes(group, cw != 0, Layout<4, 256>::kSRowBytes));
    } else if (!cmd.empty()) {
      std::printf("error: unknown command '%s'\n", cmd.c_str());
      return 2;
    }
    std::fflush(stdout);
  }
  return 0;
}
