"""The dispatcher's choice run at every crossover: for each format, the M where this device's table
switches path (select_path), and M - 1, M and M + 1 through the automatic path against the fp64
reference of the dequantized weight, with last_path naming what select_path chose. The table tests
(test_dispatch.py) check the choice; these check that each chosen kernel is correct right at its
edge of the M axis, on both sides of it.

The boundary search (`switches`) is plain Python and is tested on the CPU; the GPU cases skip
without CUDA and the compiled extension.
"""

from __future__ import annotations

import pytest
import torch

from swordfish_backend import ops
from test_decode_gpu import _bias, _check, _poison, _tolerance, _x, format_cases, format_weight

M_MAX = 1 << 16  # past every crossover of every table (the largest is 16384)


def switches(path_of, hi: int = M_MAX) -> list[int]:
    """The M in [2, hi] where path_of(M) != path_of(M - 1), for a path that changes only a few times
    along M: probe a grid of ratio 2^(1/8), then bisect each interval whose ends differ, again from
    each change found, so that two changes inside one interval are both found."""
    grid = sorted({1, hi} | {min(hi, round(2 ** (e / 8))) for e in range(8 * hi.bit_length() + 1)})
    cache: dict[int, int] = {}

    def at(m: int) -> int:
        if m not in cache:
            cache[m] = path_of(m)
        return cache[m]

    found = []
    for a, b in zip(grid, grid[1:]):
        while at(a) != at(b):
            lo, hi_ = a, b  # at(lo) == at(a) != at(hi_): the first change lies in (lo, hi_]
            while hi_ - lo > 1:
                mid = (lo + hi_) // 2
                if at(mid) == at(a):
                    lo = mid
                else:
                    hi_ = mid
            found.append(hi_)
            a = hi_
    return found


def test_switches_finds_every_change():
    """CPU: changes one apart, at the grid's points, between them, at 2 and at the end; none."""
    for edges in ([49, 16384], [33, 34], [2], [M_MAX], [64, 65, 66], [], [1000, 1001, 40000]):
        calls = []

        def path_of(m, edges=edges):
            calls.append(m)
            return sum(m >= e for e in edges)

        assert switches(path_of) == edges
        assert len(set(calls)) < 300  # a search, not a scan


needs_gpu = pytest.mark.skipif(
    not torch.cuda.is_available() or not ops.has_extension(),
    reason="needs a CUDA device and the compiled extension",
)


def _run_crossovers(w):
    dev = torch.cuda.current_device()
    code = ops.DTYPE_CODES[w.dtype]
    zeros, act = w.zeros is not None, w.perm is not None

    def path_of(M):
        return ops.select_path(M, w.K, w.N, w.bits, w.group, w.channelwise, zeros, act, code, dev)

    edges = switches(path_of)
    assert edges, "one path for every M: no crossover to run"
    for m in edges:
        for M in (m - 1, m, m + 1):
            x, bias = _x(M, w.K, w.dtype, M), _bias(w.N, w.dtype, M)
            _poison(M * w.N, w.dtype)
            y = ops.gemm(x, w.packed, w.scales, w.zeros, w.perm, bias, w.bits, w.group, w.channelwise,
                         ops.PATH_AUTO, 0)
            ran = ops.last_path(dev)
            assert ran == path_of(M), f"M={M}: ran path {ran}, select_path says {path_of(M)}"
            _check(y, w.reference(x, bias), _tolerance(w, False), f"M={M} (crossover {m}, path {ran})")


@needs_gpu
@pytest.mark.gpu
@format_cases
def test_every_crossover_small_layer(bits, dtype, group, zeros, act_order):
    """A 256 x 256 layer (the table's small-layer rules) in every format."""
    w = format_weight(bits, dtype, group, zeros, act_order, 0, K=256, N=256)
    _run_crossovers(w)


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("K,N", [(4096, 16384), (8192, 8192)], ids=["4096x16384", "8192x8192"])
@pytest.mark.parametrize("bits,zeros,act_order", [(4, False, False), (8, False, False), (4, True, True)],
                         ids=["int4", "int8", "int4_zeros_act_order"])
def test_every_crossover_large_layer(bits, zeros, act_order, K, N):
    """Above the small-layer bound (4096 x 14336 weights). On the H200: 4096 x 16384 leaves decode
    after M = 32; 8192 x 8192 (70B o) keeps it through 48 (its prefill plan balances poorly) and, with
    act-order (N <= 2K), goes dense from 4096 instead of 16384."""
    w = format_weight(bits, torch.bfloat16, 128, zeros, act_order, 0, K=K, N=N)
    _run_crossovers(w)
    torch.cuda.empty_cache()
