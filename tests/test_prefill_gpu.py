"""GPU tests of the sm90 prefill path (path=3 forced): kernels/prefill/.

Same contract as the decode tests (tests/test_decode_gpu.py supplies the
random weight, the poisoning and the fp64 reference): fresh random codes,
scales, zero points, permutation, bias and activations per case; the output
poisoned with NaN before each call; an fp64 reference of the dequantized
weight (each weight rounded once to the dtype, as the Transform stage does).
The prefill kernels accumulate in fp32 and round once (split-K partials are
summed in fp32 in a fixed order), so the tolerance is the deterministic one:
2 u + K 2^-24.

Skips without an sm90 device: the kernels exist only in sm_90a SASS.

Sanitizers (small cases: one tile, split-K with the reduce, act-order gather):
    compute-sanitizer --tool memcheck  python -m pytest -q tests/test_prefill_gpu.py -m sanitize
    compute-sanitizer --tool racecheck python -m pytest -q tests/test_prefill_gpu.py -m sanitize
    compute-sanitizer --tool synccheck python -m pytest -q tests/test_prefill_gpu.py -m sanitize
"""

from __future__ import annotations

import re

import pytest
import torch

ops = pytest.importorskip("swordfish_backend.ops")

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available()
    or not ops.has_extension()
    or torch.cuda.get_device_capability() != (9, 0),
    reason="needs an sm90 (H100/H200) device and the compiled extension",
)

from test_decode_gpu import (  # noqa: E402
    PATH_DECODE, UNIT_ROUNDOFF, Weight, _bias, _check, _poison, _x, format_cases, format_weight)

PATH_PREFILL = ops.PATH_PREFILL
# The list, plus the M below 64 the sm90 table hands to prefill (from 33 on large layers, 49
# int4 / 65 int8 on the 8B-class ones: heuristics_sm90.hpp) and a forced M = 1 and 9: one BT 64
# tile whose x box loads round_up(M, 8) rows.
M_SWEEP = [1, 9, 33, 49, 63, 64, 65, 127, 128, 129, 255, 256, 333, 512, 1000, 1024, 2048, 4096]


def _gemm(w: Weight, x, bias=None):
    _poison(x.shape[0] * w.N, x.dtype)
    return ops.gemm(x, w.packed, w.scales, w.zeros, w.perm, bias, w.bits, w.group, w.channelwise, PATH_PREFILL, 0)


def _tol(w: Weight) -> float:
    return 2 * UNIT_ROUNDOFF[w.dtype] + w.K * 2.0**-24


def _ran_prefill():
    assert ops.last_path(torch.cuda.current_device()) == PATH_PREFILL


def _config(capfd, w: Weight, M: int) -> str:
    """The SWORDFISH_DEBUG line the dispatcher printed for this call (its kernel configuration)."""
    err = capfd.readouterr().err
    lines = [l for l in err.splitlines() if f"M={M} K={w.K} N={w.N}" in l and "-> prefill" in l]
    assert lines, f"no SWORDFISH_DEBUG line for M={M} K={w.K} N={w.N} in: {err!r}"
    return lines[-1]


def _check_planned(w: Weight, M: int, want: str, capfd, seed: int, note: str = ""):
    """One call with SWORDFISH_DEBUG on (the caller sets it): the plan line matches `want`, the result
    the fp64 reference."""
    x, bias = _x(M, w.K, w.dtype, seed), _bias(w.N, w.dtype, seed + 1)
    y = _gemm(w, x, bias)
    torch.cuda.synchronize()
    line = _config(capfd, w, M)
    assert re.search(want, line), line
    _check(y, w.reference(x, bias), _tol(w), note)


# ----------------------------------------------------------------------------- M sweep


@pytest.mark.parametrize("M", M_SWEEP)
def test_m_sweep_int4_bf16_g128(M):
    w = Weight(bits=4, K=1024, N=384, group=128, channelwise=False, zeros=False, act_order=False,
               dtype=torch.bfloat16, seed=M)
    x, bias = _x(M, w.K, w.dtype, 100 + M), _bias(w.N, w.dtype, 200 + M)
    y = _gemm(w, x, bias)
    _ran_prefill()
    assert y.shape == (M, w.N)
    _check(y, w.reference(x, bias), _tol(w), f"M={M}")


@pytest.mark.parametrize("M", [64, 129, 333, 1000])
def test_m_sweep_int8_fp16_g128_zeros_act_order(M):
    w = Weight(bits=8, K=768, N=256, group=128, channelwise=False, zeros=True, act_order=True,
               dtype=torch.float16, seed=1000 + M)
    x = _x(M, w.K, w.dtype, 1100 + M)
    _check(_gemm(w, x), w.reference(x), _tol(w), f"M={M}")
    _ran_prefill()


# ----------------------------------------------------------------------------- format cross product


@pytest.mark.parametrize("M", [64, 200])
@format_cases
def test_formats(bits, dtype, group, zeros, act_order, M):
    w = format_weight(bits, dtype, group, zeros, act_order, M, K=384, N=256)
    x, bias = _x(M, w.K, dtype, M), _bias(w.N, dtype, M)
    _check(_gemm(w, x, bias), w.reference(x, bias), _tol(w))
    _ran_prefill()


# ----------------------------------------------------------------------------- shapes, tiles, split-K


@pytest.mark.parametrize(
    "bits,K,N,group",
    [
        (4, 128, 128, 128), (8, 128, 128, 32),        # smallest legal sizes: one stage pair, one n tile
        (4, 640, 384, 64), (8, 1152, 896, 128),       # odd multiples of 128
        (4, 8192, 256, 128), (8, 4096, 128, 64),      # K-heavy, few tiles: split-K and the reduce
    ],
)
@pytest.mark.parametrize("M", [64, 65, 300])
def test_odd_shapes(bits, K, N, group, M):
    w = Weight(bits=bits, K=K, N=N, group=group, channelwise=False, zeros=True, act_order=False,
               dtype=torch.bfloat16, seed=K + N + M)
    x, bias = _x(M, K, w.dtype, K * M), _bias(N, w.dtype, N)
    _check(_gemm(w, x, bias), w.reference(x, bias), _tol(w))


@pytest.mark.parametrize("bits,M,K,N,want", [
    (4, 64, 8192, 256, r"splits=[2-8]"),    # 2 tiles on >= 100 SMs: split-K
    (4, 64, 8192, 10240, r"splits=[3-8]"),  # 80 tiles on 132 SMs: more split items than SMs (2 rounds of 3-way splits)
    (4, 4096, 1024, 2048, r"splits=1"),     # 256 tiles: no split
    # Stage depth (sm90::slices_for): k128 stages for the small tiles, k64 at BT 256; at least four
    # stages, int8 staging its BT 128 and 256 epilogues in two passes of half the rows to fit them
    # (sm90::epi_rows; the last m tile's second pass clipped by TMA at M = 3250, past M at 1950).
    (4, 100, 1024, 1024, r"tile=128x(64 k=128 stages=8|128 k=128 stages=4) splits"),
    (8, 100, 1024, 1024, r"tile=128x(64 k=128 stages=6|128 k=128 stages=4 epi_rows=64) splits"),
    (8, 64, 1024, 1024, r"tile=128x64 k=128 "),
    # The last m tile loads only its rows of x, rounded up to 8 (sm90::last_tile_x_rows): 3250 - 12 * 256
    # = 178 -> 184, 1950 - 15 * 128 = 30 -> 32 (the producer zeros its other rows once per ring slot).
    (4, 3250, 1024, 1024, r"tile=128x256 k=64 stages=4 splits.* x_tail_rows=184"),
    (8, 3250, 1024, 1024, r"tile=128x256 k=64 stages=4 epi_rows=128 splits"),
    (8, 1950, 1024, 1024, r"tile=128x128 k=128 stages=4 epi_rows=64 splits.* x_tail_rows=32"),
])
def test_plan_and_split_paths(bits, M, K, N, want, monkeypatch, capfd):
    """The planner picks what the comment says, and each such plan is correct (split-K through the reduce)."""
    monkeypatch.setenv("SWORDFISH_DEBUG", "1")
    w = Weight(bits=bits, K=K, N=N, group=128, channelwise=False, zeros=False, act_order=False,
               dtype=torch.bfloat16, seed=M + K + N)
    _check_planned(w, M, want, capfd, seed=7 * M)


# ----------------------------------------------------------------------------- the 192-column tile


def _wide_n(kind: str) -> int:
    """An N whose 192-column tiles fill one wave of this device's SMs where 128-column ones need two
    (so the planner takes the wide tile whatever its fitted slice cost), N a multiple of 128: N % 192 =
    0 (`even`), 64 (the last tile's top two warpgroups lie past N) or 128 (its top one)."""
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    if kind == "even":
        return 192 * sms
    rest = {"ragged64": 256, "ragged128": 128}[kind]  # N = 384 j + rest: N % 128 = 0, N % 192 = rest % 192
    return 384 * ((192 * sms - rest) // 384) + rest


@pytest.mark.parametrize("kind", ["even", "ragged64", "ragged128"])
@pytest.mark.parametrize("bits", [4, 8])
def test_wide_tile_whole(kind, bits, monkeypatch, capfd):
    monkeypatch.setenv("SWORDFISH_DEBUG", "1")
    N = _wide_n(kind)
    w = Weight(bits=bits, K=256, N=N, group=64, channelwise=False, zeros=True, act_order=False,
               dtype=torch.bfloat16, seed=N + bits)
    _check_planned(w, 128, r"tile=192x128 .* splits=1 ", capfd, seed=N, note=f"N={N}")


@pytest.mark.parametrize("bits,M,K,N", [(4, 64, 2048, 384), (8, 64, 2048, 768), (4, 33, 2048, 512),
                                        (4, 64, 2048, 640)])
def test_wide_tile_split(bits, M, K, N, monkeypatch, capfd):
    """Split-K items of the 192-column tile and their reduce (N = 512 / 640: the last tile's top one / two
    warpgroups lie past N). The plans are the cost model's choices (prefill_sm90_plan.h): a refit may
    move them."""
    monkeypatch.setenv("SWORDFISH_DEBUG", "1")
    w = Weight(bits=bits, K=K, N=N, group=128, channelwise=False, zeros=False, act_order=False,
               dtype=torch.float16, seed=M + K + N + bits)
    _check_planned(w, M, r"tile=192x64 .* splits=[2-8] ", capfd, seed=3 * M)


@pytest.mark.parametrize("tile", ["wide", "bt192"])
@format_cases
def test_tile_formats(tile, bits, dtype, group, zeros, act_order):
    """Every format through the 192-column tile (M = 128 on a ragged N that its tiles fill in one
    wave) and through the 192-token tile (M = 700, N = 4096, where the H200's planner takes it:
    test_token_tile_192 pins that plan)."""
    M, N = (128, _wide_n("ragged64")) if tile == "wide" else (700, 4096)
    w = format_weight(bits, dtype, group, zeros, act_order, M, K=256, N=N)
    x, bias = _x(M, w.K, dtype, M), _bias(w.N, dtype, M)
    _check(_gemm(w, x, bias), w.reference(x, bias), _tol(w))
    _ran_prefill()


# ----------------------------------------------------------------------------- the 192-token tile


@pytest.mark.parametrize("bits,M,K,N,want", [
    (4, 700, 1024, 4096, r"tile=128x192 k=64 stages=6 splits=1 .* x_tail_rows=128"),  # 4 x 32 tiles, ragged
    (8, 576, 1024, 4096, r"tile=128x192 k=64 stages=5 splits=1 .* x_tail_rows=192"),  # 3 x 32, whole
    (4, 330, 8192, 2048, r"tile=128x192 k=64 stages=6 splits=4 .* x_tail_rows=144"),  # 2 x 16, split-K
    (8, 700, 4096, 1024, r"tile=128x192 k=64 stages=5 splits=4 "),                    # 4 x 8
])
def test_token_tile_192(bits, M, K, N, want, monkeypatch, capfd):
    """BT = 192 (wgmma n192: 96 accumulators per consumer thread), whole and split. The plans are the
    cost model's choices on 132 SMs (prefill_sm90_plan.h): a refit may move them."""
    if _sms() != 132:
        pytest.skip("the plans pinned here are the H200's (132 SMs)")
    monkeypatch.setenv("SWORDFISH_DEBUG", "1")
    w = Weight(bits=bits, K=K, N=N, group=128, channelwise=False, zeros=False, act_order=False,
               dtype=torch.bfloat16, seed=M + K + N + bits)
    _check_planned(w, M, want, capfd, seed=9 * M)


# ----------------------------------------------------------------------------- the act-order gather


def _sms() -> int:
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def _act_order_weight(K: int) -> Weight:
    return Weight(bits=4, K=K, N=128, group=128, channelwise=False, zeros=False, act_order=True,
                  dtype=torch.bfloat16, seed=K)


def _check_act_order(w: Weight, M: int, x_seed: int, bias_seed: int):
    """One forced-prefill call of act-order weight w at M rows against the reference."""
    x, bias = _x(M, w.K, w.dtype, x_seed), _bias(w.N, w.dtype, bias_seed)
    _check(_gemm(w, x, bias), w.reference(x, bias), _tol(w), f"K={w.K} M={M}")
    _ran_prefill()


@pytest.mark.parametrize("K", [4096, 49280], ids=["staged_row", "row_too_long"])
def test_act_order_gather(K):
    """prep::gather_columns (kernels/prep/gather_launch.cu): from M = the SM count, rows of up to
    kGatherMaxSmem / 2 columns go through gather_kernel (a row staged in shared memory); fewer rows, or
    longer ones (K = 49280 > 49152), through gather_elements_kernel."""
    w = _act_order_weight(K)
    for M in (64, _sms() + 7):
        _check_act_order(w, M, K + M, M)


def test_act_order_gather_longer_row_after_shorter():
    """gather_kernel's shared memory is K * 2 bytes, so its dynamic shared-memory limit depends on the
    call. cudaFuncSetAttribute also lowers that limit: a long row, then a shorter one, then the long one
    again was refused ("gather kernel launch failed: invalid argument", found by `swordfish check` on
    the H200, 2026-12-05-b) while a cache remembered the long row's limit as set. Odd K values, so no
    other test in the process has set them first."""
    for K in (11904, 640, 11904):
        _check_act_order(_act_order_weight(K), _sms() + 7, K + 1, K + 2)


@pytest.mark.sanitize
@pytest.mark.parametrize("rows", ["few", "per_sm"])
@pytest.mark.parametrize("path", [PATH_DECODE, PATH_PREFILL], ids=["decode", "prefill"])
def test_act_order_perm_outside_k_reads_nothing_out_of_bounds(path, rows):
    """perm must be a permutation of [0, K) (device data: not checked per call). An entry outside it
    gathers a zero activation column instead of reading outside x (memcheck watches this case), so the
    packed rows it names contribute nothing. Every gather: decode's prep_kernel, and on the prefill path
    gather_elements_kernel (few rows) and gather_kernel (M >= the SM count)."""
    w = Weight(bits=4, K=1024, N=256, group=128, channelwise=False, zeros=False, act_order=True,
               dtype=torch.bfloat16, seed=31)
    bad = w.perm.clone()
    bad[5], bad[700] = w.K + 100000, -3
    x = _x(5 if rows == "few" else _sms() + 3, w.K, w.dtype, 32)
    _poison(x.shape[0] * w.N, x.dtype)
    y = ops.gemm(x, w.packed, w.scales, w.zeros, bad, None, w.bits, w.group, False, path, 1)
    xs = x.to(torch.float64)[:, bad.long().clamp(0, w.K - 1)]
    xs[:, [5, 700]] = 0
    _check(y, xs @ w.w_sorted, _tol(w))  # deterministic mode on both paths: one rounding


# ----------------------------------------------------------------------------- exactness, determinism, graphs


@pytest.mark.parametrize("bits,dtype,zeros", [(4, torch.bfloat16, False), (4, torch.float16, True),
                                              (8, torch.bfloat16, True), (8, torch.float16, False)])
def test_one_hot_reproduces_dequantized_weight_exactly(bits, dtype, zeros):
    """x = rows of the identity: y[i] must equal dequantized weight row i bit for bit (+ nothing)."""
    w = Weight(bits=bits, K=256, N=256, group=64, channelwise=False, zeros=zeros, act_order=True, dtype=dtype,
               seed=bits + zeros)
    M = 96
    idx = torch.randint(0, w.K, (M,), generator=torch.Generator().manual_seed(5))
    x = torch.zeros(M, w.K, dtype=dtype)
    x[torch.arange(M), idx] = 1
    x = x.cuda()
    y = _gemm(w, x)
    ref = w.reference(x)  # exactly the selected dequantized weights (each a dtype value)
    assert torch.equal(y.to(torch.float64), ref), "one-hot output differs from the dequantized weight"


@pytest.mark.parametrize("M,K,N", [(200, 2048, 512), (64, 8192, 256)], ids=["one_split", "split_k"])
def test_bit_identical_across_runs(M, K, N):
    w = Weight(bits=4, K=K, N=N, group=128, channelwise=False, zeros=True, act_order=False,
               dtype=torch.bfloat16, seed=3)
    x = _x(M, K, w.dtype, 4)
    first = _gemm(w, x)
    for _ in range(9):
        assert torch.equal(_gemm(w, x), first)


@pytest.mark.parametrize("act_order", [False, True])
def test_cuda_graph_replay_equals_eager(act_order):
    w = Weight(bits=4, K=1024, N=512, group=128, channelwise=False, zeros=False, act_order=act_order,
               dtype=torch.bfloat16, seed=11)
    bias = _bias(w.N, w.dtype, 12)
    xs = [_x(M, w.K, w.dtype, 13 + M) for M in (64, 300, 1000)]
    eager = [_gemm(w, x, bias) for x in xs]
    static_x = [x.clone() for x in xs]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for x in static_x:  # warm up outside capture (workspace sizes, function attributes)
            ops.gemm(x, w.packed, w.scales, w.zeros, w.perm, bias, w.bits, w.group, False, PATH_PREFILL, 0)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = [ops.gemm(x, w.packed, w.scales, w.zeros, w.perm, bias, w.bits, w.group, False, PATH_PREFILL, 0)
                for x in static_x]
    for o in outs:
        o.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    for o, e in zip(outs, eager):
        assert torch.equal(o, e)


def test_side_stream():
    w = Weight(bits=8, K=512, N=256, group=128, channelwise=False, zeros=False, act_order=False,
               dtype=torch.float16, seed=21)
    x = _x(300, w.K, w.dtype, 22)
    ref = w.reference(x)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = _gemm(w, x)
    s.synchronize()
    _check(y, ref, _tol(w))


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("K,N,group,match", [
    (192, 256, 64, r"K to be a multiple of 128, got K = 192"),
    (256, 192, 64, r"N to be a multiple of 128, got N = 192"),
])
def test_forced_prefill_names_the_offending_value(K, N, group, match):
    w = Weight(bits=4, K=K, N=N, group=group, channelwise=False, zeros=False, act_order=False,
               dtype=torch.bfloat16, seed=1)
    x = _x(64, K, w.dtype, 2)
    with pytest.raises(ValueError, match=match):  # the ops raise ValueError for a problem a path cannot run
        _gemm(w, x)


# ----------------------------------------------------------------------------- sanitizer cases


@pytest.mark.sanitize
@pytest.mark.parametrize("bits,M,K,N,act_order", [(4, 70, 256, 256, False), (4, 64, 4096, 128, True),
                                                   (4, 33, 2048, 512, False), (8, 150, 2048, 128, False)],
                         ids=["one_tile", "split_k_act_order", "wide_tile_split_ragged", "bt192_split_ragged"])
def test_prefill_small_sanitize(bits, M, K, N, act_order):
    """Small cases of the prefill kernels' plans (on 132 SMs: one tile; split-K with the act-order gather;
    the 192-column tile's split items past N; BT 192 split 8 ways, 150 of its 192 rows inside M)."""
    w = Weight(bits=bits, K=K, N=N, group=128, channelwise=False, zeros=True, act_order=act_order,
               dtype=torch.bfloat16, seed=M)
    x, bias = _x(M, K, w.dtype, 1), _bias(N, w.dtype, 2)
    _check(_gemm(w, x, bias), w.reference(x, bias), _tol(w))


@pytest.mark.sanitize
@pytest.mark.parametrize("M", [3250, 1950], ids=["bt256_two_pass", "bt128_two_pass_past_m"])
def test_int8_two_pass_epilogue_sanitize(M):
    """int8's half-height epilogue staging (two TMA stores per tile; the planner's tiles are pinned by
    test_plan_and_split_paths on the same shapes)."""
    w = Weight(bits=8, K=1024, N=1024, group=128, channelwise=False, zeros=False, act_order=False,
               dtype=torch.bfloat16, seed=M)
    x, bias = _x(M, w.K, w.dtype, 5), _bias(w.N, w.dtype, 6)
    _check(_gemm(w, x, bias), w.reference(x, bias), _tol(w))


@pytest.mark.sanitize
def test_wide_tile_ragged_sanitize():
    """The 192-column tile on whole tiles, its last tile's top warpgroup past N (zero-filled boxes, no store)."""
    N = _wide_n("ragged128")
    w = Weight(bits=4, K=256, N=N, group=128, channelwise=False, zeros=True, act_order=False,
               dtype=torch.bfloat16, seed=9)
    x, bias = _x(128, w.K, w.dtype, 3), _bias(N, w.dtype, 4)
    _check(_gemm(w, x, bias), w.reference(x, bias), _tol(w))
