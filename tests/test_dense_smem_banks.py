"""The dense dequant kernel's shared-memory staging map (kernels/dense/dense_smem.h), on the CPU.

The header is compiled with the host C++ compiler (its static_asserts run there too) and prints
the word address of every lane of every shared access the kernel makes, from the same constexpr
functions the kernel calls. This file re-checks, independently of the header's own checks:
  * bank conflicts: each 32-bit warp access costs one wavefront (lanes on one word share it),
    each 16-byte access is conflict-free per quarter warp (4 wavefronts, the ideal);
  * coverage: the stage stores write every data word of the 64 x 64 tile exactly once and never
    the pad, and the write-out reads each data word exactly once;
  * values: an emulation of the KN exchange (shuffle with lane ^ 4, prmt with the printed
    selector) puts every (k, n) value at halfword k * stride + n, and the NK stores put it at
    n * stride + k;
and that the checker is not vacuous (the unpadded 64-element row has 8-way conflicts).
"""

from __future__ import annotations

import pathlib
from collections import Counter

import pytest

import host_cxx

ROOT = pathlib.Path(__file__).resolve().parents[1]
BANKS = 32

PROGRAM = r"""
#include <cstdio>
#include "kernels/dense/dense_smem.h"
using namespace swordfish::dense;
int main() {
  printf("%d %d %d %d %d %d %d %d %d\n", kTileK, kTileN, kWarps, kThreads, kSmemStride, kRowWords, kSmemRows,
         kChunksPerRow, kRowsPerPass);
  for (int w = 0; w < kWarps; ++w)
    for (int l = 0; l < 32; ++l)
      for (int c = 0; c < 8; ++c)
        for (int h = 0; h < 2; ++h)
          printf("S %d %d %d %d %d %d %u\n", w, l, c, h, smem::stage_nk(w, l, c, h), smem::stage_kn(w, l, c, h),
                 smem::exchange_selector(l));
  for (int tid = 0; tid < kThreads; ++tid)
    for (int i = 0; i < kSmemRows / kRowsPerPass; ++i)
      printf("O %d %d %d %d %d\n", tid, i, smem::out_row(tid, i), smem::out_chunk(tid), smem::out_word(tid, i));
  for (int r = 0; r < kSmemRows; ++r)
    for (int l = 0; l < 32; ++l)
      for (int h = 0; h < 2; ++h) printf("A %d %d %d %d\n", r, l, h, smem::scatter_elem(r, l, h));
  printf("X %d\n", kExchangeLaneXor);
  return 0;
}
"""


@pytest.fixture(scope="module")
def smem_map(tmp_path_factory):
    lines = host_cxx.run(tmp_path_factory.mktemp("dense_smem"), PROGRAM, "kernels/dense/dense_smem.h").splitlines()
    names = ("tile_k", "tile_n", "warps", "threads", "stride", "row_words", "rows", "chunks", "rows_per_pass")
    m = dict(zip(names, map(int, lines[0].split())))
    m["stage"], m["out"], m["scatter"] = {}, {}, {}
    for line in lines[1:]:
        tag, *v = line.split()
        v = [int(x) for x in v]
        if tag == "S":
            w, l, c, h, nk, kn, sel = v
            m["stage"][(w, l, c, h)] = (nk, kn, sel)
        elif tag == "O":
            tid, i, row, chunk, word = v
            m["out"][(tid, i)] = (row, chunk, word)
        elif tag == "A":
            r, l, h, elem = v
            m["scatter"][(r, l, h)] = elem
        elif tag == "X":
            m["xor"] = v[0]
    return m


def wavefronts_32(words):
    """Wavefronts of one warp access of 4-byte words: the busiest bank's count of distinct words."""
    per_bank = Counter(w % BANKS for w in set(words))
    return max(per_bank.values())


def conflict_free_128(words):
    """16-byte accesses (first word per lane): 8 distinct bank quads in every quarter warp."""
    for q in range(4):
        quarter = words[8 * q: 8 * q + 8]
        if any(w % 4 for w in quarter):
            return False
        distinct = set(quarter)
        if len({(w % BANKS) // 4 for w in distinct}) != len(distinct):
            return False
    return True


def test_constants(smem_map):
    m = smem_map
    assert (m["tile_k"], m["tile_n"], m["warps"], m["threads"]) == (64, 64, 4, 128)
    assert m["stride"] == 72 and m["row_words"] == 36 and m["row_words"] % BANKS == 4
    assert m["rows"] * m["row_words"] * 4 == 9216  # the 9216 bytes of smem ptxas reports


@pytest.mark.parametrize("layout", [0, 1], ids=["NK", "KN"])
def test_stage_stores_are_conflict_free(smem_map, layout):
    m = smem_map
    for w in range(m["warps"]):
        for c in range(8):
            for h in range(2):
                words = [m["stage"][(w, lane, c, h)][layout] for lane in range(32)]
                assert len(set(words)) == 32, (w, c, h)  # one word per lane: no two lanes share a word
                assert wavefronts_32(words) == 1, (w, c, h, sorted(x % BANKS for x in words))


def test_write_out_loads_are_conflict_free(smem_map):
    m = smem_map
    for w in range(m["warps"]):
        for i in range(m["rows"] // m["rows_per_pass"]):
            words = [m["out"][(32 * w + lane, i)][2] for lane in range(32)]
            assert conflict_free_128(words), (w, i)


def test_act_order_scatter_loads_are_conflict_free(smem_map):
    m = smem_map
    for r in range(m["rows"]):
        for h in range(2):
            words = [m["scatter"][(r, lane, h)] // 2 for lane in range(32)]
            assert wavefronts_32(words) == 1, (r, h)


@pytest.mark.parametrize("layout", [0, 1], ids=["NK", "KN"])
def test_stage_covers_the_tile_once(smem_map, layout):
    m = smem_map
    hits = Counter(v[layout] for v in m["stage"].values())
    data = {r * m["row_words"] + j for r in range(m["rows"]) for j in range(32)}
    assert set(hits) == data  # every data word, never the pad
    assert set(hits.values()) == {1}


def test_write_out_reads_each_word_once(smem_map):
    m = smem_map
    chunks = Counter()
    for (tid, i), (row, chunk, word) in m["out"].items():
        assert word == row * m["row_words"] + 4 * chunk
        chunks[(row, chunk)] += 1
    assert set(chunks) == {(r, c) for r in range(m["rows"]) for c in range(m["chunks"])}
    assert set(chunks.values()) == {1}
    for (r, lane, h), elem in m["scatter"].items():
        assert elem == r * m["stride"] + lane + 32 * h


def prmt(a, b, sel):
    """PTX prmt.b32 on byte lists (lsb first): byte i of the result is byte (sel >> 4i) & 7 of {b, a}."""
    src = a + b
    return [src[(sel >> (4 * i)) & 7] for i in range(4)]


def test_stage_values_land_where_the_layouts_say(smem_map):
    """Emulate the stage: each lane's pairs (symbolic (k, n) values), the KN shuffle and prmt."""
    m = smem_map
    stride = m["stride"]
    for w in range(m["warps"]):
        for c in range(8):
            for h in range(2):
                pairs = {}
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    k, n = 16 * w + 2 * t + 8 * h, 8 * c + g
                    # two 16-bit values as four bytes (value, byte index), low half = row k
                    pairs[lane] = [((k, n), 0), ((k, n), 1), ((k + 1, n), 0), ((k + 1, n), 1)]
                for lane in range(32):
                    nk, kn, sel = m["stage"][(w, lane, c, h)]
                    lo, hi = pairs[lane][0][0], pairs[lane][2][0]
                    assert (lo[1] * stride + lo[0], hi[1] * stride + hi[0]) == (2 * nk, 2 * nk + 1)
                    word = prmt(pairs[lane], pairs[lane ^ m["xor"]], sel)
                    assert [b for _, b in word] == [0, 1, 0, 1], "whole 16-bit values only"
                    (k_lo, n_lo), (k_hi, n_hi) = word[0][0], word[2][0]
                    assert k_lo * stride + n_lo == 2 * kn, (w, c, h, lane)
                    assert k_hi * stride + n_hi == 2 * kn + 1, (w, c, h, lane)


def test_checker_is_not_vacuous():
    """The unpadded tile (stride 64 elements = 32 words) puts the NK stores 8 lanes to a bank."""
    words = [(8 * 0 + lane // 4) * 32 + lane % 4 for lane in range(32)]
    assert wavefronts_32(words) == 8
    assert not conflict_free_128([0, 4, 8, 12, 16, 20, 24, 32] + list(range(0, 96, 4)))


def test_kernel_uses_the_map():
    """dense_dequant.cuh addresses its tile only through dense_smem.h (no second formula to drift)."""
    src = (ROOT / "kernels" / "dense" / "dense_dequant.cuh").read_text()
    assert '#include "kernels/dense/dense_smem.h"' in src
    uses = [line for line in src.splitlines() if "tile[" in line or "tile16[" in line]
    assert uses and all("smem::" in line or "__shared__" in line for line in uses), uses
