"""format.py against kernels/common/format.h, and the format's fragment contract.

The header is compiled with the host C++ compiler and asked for its constants
and its locate() table, so a change on one side without the other fails here.
The fragment tests check, independently of locate(), that the shifts and masks
the kernels use (four LOP3 per int4 word, two byte permutes per int8 word)
land every value in the mma.sync.m16n8k16 B-fragment register the PTX ISA
assigns it.
"""

import pytest

import host_cxx
from swordfish_backend import format as fmt


PROGRAM = r"""
#include <cstdio>
#include <initializer_list>
#include "kernels/common/format.h"
using namespace swordfish::format;
int main() {
  printf("%d %d %d %d %d %d %d %d %d %d %d %d %d\n", kVersion, kBlockN, kBlockBytes, kBlockWords, kSubtiles,
         kSubtileBytes, kLanes, kLaneWords, kFragmentK, kBlockK4, kBlockK8, kBias4, kBias8);
  for (int i = 0; i < 8; ++i) printf("%d ", kNibbleOfFragment4[i]);
  printf("\n");
  for (int i = 0; i < 4; ++i) printf("%d ", kByteOfFragment8[i]);
  printf("\n");
  for (int g : kGroupSizes) printf("%d ", g);
  printf("\n%d\n", kChannelwiseReplicaGroup);
  for (int bits : {4, 8})
    for (int k = 0; k < block_k(bits); ++k)
      for (int n = 0; n < kBlockN; ++n) {
        Slot s = locate(bits, k, n);
        printf("%d %d\n", s.word, s.shift);
      }
  return 0;
}
"""


@pytest.fixture(scope="module")
def header_output(tmp_path_factory):
    return host_cxx.run(tmp_path_factory.mktemp("format_header"), PROGRAM, "kernels/common/format.h").split("\n")


def test_constants_match_header(header_output):
    consts = [int(v) for v in header_output[0].split()]
    assert consts == [fmt.VERSION, fmt.BLOCK_N, fmt.BLOCK_BYTES, fmt.BLOCK_WORDS, fmt.SUBTILES, fmt.SUBTILE_BYTES,
                      fmt.LANES, fmt.LANE_WORDS, fmt.FRAGMENT_K, fmt.BLOCK_K4, fmt.BLOCK_K8, fmt.BIAS4, fmt.BIAS8]
    assert tuple(int(v) for v in header_output[1].split()) == fmt.NIBBLE_OF_FRAGMENT4
    assert tuple(int(v) for v in header_output[2].split()) == fmt.BYTE_OF_FRAGMENT8
    assert tuple(int(v) for v in header_output[3].split()) == fmt.GROUP_SIZES
    assert int(header_output[4]) == fmt.CHANNELWISE_REPLICA_GROUP


def test_locate_matches_header(header_output):
    rows = iter(header_output[5:])
    for bits in (4, 8):
        for k in range(fmt.block_k(bits)):
            for n in range(fmt.BLOCK_N):
                word, shift = (int(v) for v in next(rows).split())
                assert (word, shift) == fmt.locate(bits, k, n), (bits, k, n)


def _b_fragment_coordinate(lane: int, element: int) -> tuple[int, int]:
    """(row k, column n) of B-fragment element `element` (0: b0.lo, 1: b0.hi, 2: b1.lo, 3: b1.hi)
    held by `lane` for mma.sync.m16n8k16 with 16-bit operands (PTX ISA, "Matrix Fragments for mma.m16n8k16")."""
    row = (lane % 4) * 2 + (element % 2) + 8 * (element // 2)
    return row, lane // 4


def test_int4_words_dequantize_into_fragment_registers_without_shuffles():
    # Build the inverse map once: (k, n) -> (word, shift).
    where = {fmt.locate(4, k, n): (k, n) for k in range(64) for n in range(64)}
    for s in range(fmt.SUBTILES):
        for lane in range(fmt.LANES):
            for j in range(fmt.LANE_WORDS):
                word = s * 128 + lane * 4 + j
                # LOP3 i extracts bits [4i, 4i+4) (low half) and [16+4i, 20+4i) (high half).
                for i in range(4):
                    tile = 2 * j + i // 2  # pairs 0, 1 -> tile 2j; pairs 2, 3 -> tile 2j + 1
                    register = i % 2  # b0 or b1
                    for half, shift in enumerate((4 * i, 16 + 4 * i)):
                        k, n = where[(word, shift)]
                        row, col = _b_fragment_coordinate(lane, 2 * register + half)
                        assert (k, n) == (16 * s + row, 8 * tile + col), (s, lane, j, i, half)


def test_int8_words_dequantize_into_fragment_registers_without_shuffles():
    where = {fmt.locate(8, k, n): (k, n) for k in range(32) for n in range(64)}
    for s in range(fmt.SUBTILES):
        for lane in range(fmt.LANES):
            for j in range(fmt.LANE_WORDS):
                word = s * 128 + lane * 4 + j
                tile = 4 * (s % 2) + j
                # byte permute {0, 2} -> b0 (lo, hi); {1, 3} -> b1 (lo, hi)
                for register, byte_pair in enumerate(((0, 2), (1, 3))):
                    for half, byte in enumerate(byte_pair):
                        k, n = where[(word, 8 * byte)]
                        row, col = _b_fragment_coordinate(lane, 2 * register + half)
                        assert (k, n) == (16 * (s // 2) + row, 8 * tile + col), (s, lane, j, register, half)


def test_subtile_is_one_lane_major_512_byte_run():
    # Every value of k16 slice s (int4) lies in words [128 s, 128 s + 128) and a lane's words are contiguous.
    for k in range(64):
        for n in range(64):
            word, _ = fmt.locate(4, k, n)
            assert word // 128 == k // 16
            lane = 4 * ((n % 8)) + (k % 8) // 2
            assert (word % 128) // 4 == lane
