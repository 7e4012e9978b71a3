"""docs/DECODE.md's kernel table against decode_config.h: the ring depths and CTAs per SM it states
are what the header computes (compiled here with the host C++ compiler), so the page cannot drift
from the constants."""

from __future__ import annotations

import pathlib
import re

import host_cxx

ROOT = pathlib.Path(__file__).resolve().parents[1]

PROGRAM = r"""
#include <cstdio>
#include "kernels/decode/decode_config.h"
using namespace swordfish::decode;
int main() {
  std::printf("swap %d %d\n", swap_stages(4), swap_stages(8));
  for (int mt = 1; mt <= 4; ++mt)
    std::printf("gemm %d %d %d %d %d\n", mt, gemm_stages(4, mt, kShareActs), gemm_stages(8, mt, kShareActs),
                ctas_per_sm(gemm_smem_bytes(4, mt, true, kShareActs)),
                ctas_per_sm(gemm_smem_bytes(8, mt, true, kShareActs)));
  std::printf("swapctas %d %d\n", ctas_per_sm(swap_smem_bytes(4, true)), ctas_per_sm(swap_smem_bytes(8, true)));
  std::printf("swapmax %d share %d\n", kSwapMaxM, kShareActs ? 1 : 0);
  std::printf("foldmt2 %d\n", gemm_min_ctas(2, kShareActs, true));
}
"""


def _table_rows() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "DECODE.md").read_text()
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\| (1-8|9-16|17-64\+) \|(.*)\|$", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in m.group(2).split("|")]
    return rows


def test_decode_doc_table_matches_the_header(tmp_path):
    out = host_cxx.run(tmp_path, PROGRAM, "decode_config.h").split("\n")
    swap = [int(v) for v in out[0].split()[1:]]
    gemm = {int(l.split()[1]): [int(v) for v in l.split()[2:]] for l in out[1:5]}
    swap_ctas = [int(v) for v in out[5].split()[1:]]
    assert out[6].split() == ["swapmax", "8", "share", "1"], out[6]
    rows = _table_rows()
    assert set(rows) == {"1-8", "9-16", "17-64+"}, rows
    # ring depths "int4 / int8"
    assert rows["1-8"][2] == f"{swap[0]} / {swap[1]}"
    assert rows["9-16"][2] == f"{gemm[1][0]} / {gemm[1][1]}"
    lo4, hi4 = min(gemm[m][0] for m in (2, 3, 4)), max(gemm[m][0] for m in (2, 3, 4))
    lo8, hi8 = min(gemm[m][1] for m in (2, 3, 4)), max(gemm[m][1] for m in (2, 3, 4))
    want8 = f"{lo8}" if lo8 == hi8 else f"{lo8}-{hi8}"
    assert rows["17-64+"][2] == f"{lo4}-{hi4} / {want8}"
    # CTAs per SM by shared memory (with zero points, the larger stage), int4 and int8
    assert rows["1-8"][3] == str(min(swap_ctas)) and min(swap_ctas) == max(swap_ctas)
    assert rows["9-16"][3] == str(min(gemm[1][2:]))
    mt2 = min(gemm[2][2:])
    mt34 = sorted({*gemm[3][2:], *gemm[4][2:]})
    fold_mt2 = int(out[7].split()[1])  # gemm_min_ctas of the folded MT = 2 instances (registers)
    assert rows["17-64+"][3] == f"{mt2} (MT 2; {fold_mt2} when folded), {mt34[0]}-{mt34[-1]} (MT 3-4)"
