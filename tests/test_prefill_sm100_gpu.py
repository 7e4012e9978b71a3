"""GPU tests of the Blackwell tcgen05 prefill (kernels/prefill/sm100/; path=3 forced on compute capability
10.0 / 11.0). WRITTEN, NOT RUN: no Blackwell GPU has executed them; they skip everywhere else.

The path is compiled, not run, so it serves a problem only while SWORDFISH_SM100_PREFILL=1
(prefill_sm100_launch.h); every test here sets it (autouse fixture) except the ones about the knob.
scripts/blackwell_check.sh runs this file first, then the CPU tests, swordfish check and the benchmark.

Same contract as the sm90 prefill tests (tests/test_prefill_gpu.py, helpers from tests/test_decode_gpu.py):
fresh random weights per case, the output poisoned with NaN before each call, an fp64 reference of the
dequantized weight (each weight rounded once to the dtype, as the Transform does), ops.last_path asserted
(the forced path really ran), and the deterministic tolerance 2 u + K 2^-24: the kernel accumulates in
fp32 in TMEM and rounds once, with no atomics and no split-K.

Order of the first run on a new device: test_first_light (one tile, one k stage) before anything larger;
a hang there is the 2-SM barrier wiring (docs/PREFILL.md "What to look at first").
"""

from __future__ import annotations

import re

import pytest
import torch

ops = pytest.importorskip("swordfish_backend.ops")

CC = torch.cuda.get_device_capability() if torch.cuda.is_available() else (0, 0)
pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or not ops.has_extension() or CC not in ((10, 0), (11, 0)),
    reason="needs a B200 / GB200 (sm100, compute capability 10.0) or Jetson Thor (sm110, 11.0) and the compiled "
           "extension built with SWORDFISH_CUDA_ARCHS listing 100a / 110a",
)

from test_decode_gpu import (  # noqa: E402
    UNIT_ROUNDOFF, Weight, _bias, _check, _poison, _x, format_cases, format_weight)

PATH_PREFILL = 3
KNOB = "SWORDFISH_SM100_PREFILL"
# Every boundary of the tile choice (BT 128 at M <= 128, 256 above for int4), partial tiles, several
# waves of pairs on 148 SMs (74 clusters) and on Thor's 20 (10 clusters).
M_SWEEP = [1, 7, 64, 127, 128, 129, 255, 256, 257, 333, 512, 1000, 2048, 4096]


@pytest.fixture(autouse=True)
def _enable(monkeypatch):
    monkeypatch.setenv(KNOB, "1")


def _gemm(w: Weight, x, bias=None):
    _poison(x.shape[0] * w.N, x.dtype)
    return ops.gemm(x, w.packed, w.scales, w.zeros, w.perm, bias, w.bits, w.group, w.channelwise, PATH_PREFILL, 0)


def _tol(w: Weight) -> float:
    return 2 * UNIT_ROUNDOFF[w.dtype] + w.K * 2.0**-24


def _ran_prefill():
    assert ops.last_path(torch.cuda.current_device()) == PATH_PREFILL


def _sms() -> int:
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def _config(capfd, w: Weight, M: int) -> str:
    err = capfd.readouterr().err
    lines = [l for l in err.splitlines() if f"M={M} K={w.K} N={w.N}" in l and "-> prefill" in l]
    assert lines, f"no SWORDFISH_DEBUG line for M={M} K={w.K} N={w.N} in: {err!r}"
    return lines[-1]


def _check_case(w: Weight, M: int, seed: int, note: str = "", bias=True):
    x = _x(M, w.K, w.dtype, seed)
    b = _bias(w.N, w.dtype, seed + 1) if bias else None
    y = _gemm(w, x, b)
    torch.cuda.synchronize()
    _ran_prefill()
    assert y.shape == (M, w.N)
    _check(y, w.reference(x, b), _tol(w), note)


# ----------------------------------------------------------------------------- first light


def test_first_light():
    """One pair tile (256 x 128), one k64 stage, no bias: the smallest launch of the 2-SM pipeline."""
    w = Weight(bits=4, K=128, N=256, group=128, channelwise=False, zeros=False, act_order=False,
               dtype=torch.bfloat16, seed=1)
    _check_case(w, 100, 2, "first light", bias=False)


# ----------------------------------------------------------------------------- M sweep, both tiles


@pytest.mark.parametrize("M", M_SWEEP)
def test_m_sweep_int4_bf16_g128(M):
    w = Weight(bits=4, K=1024, N=768, group=128, channelwise=False, zeros=False, act_order=False,
               dtype=torch.bfloat16, seed=M)
    _check_case(w, M, 100 + M, f"M={M}")


@pytest.mark.parametrize("M", [64, 129, 333, 1000])
def test_m_sweep_int8_fp16_g128_zeros_act_order(M):
    w = Weight(bits=8, K=768, N=512, group=128, channelwise=False, zeros=True, act_order=True,
               dtype=torch.float16, seed=1000 + M)
    _check_case(w, M, 1100 + M, f"M={M}")


# ----------------------------------------------------------------------------- every format


@pytest.mark.parametrize("M", [100, 300])  # BT 128 and (int4) BT 256
@format_cases
def test_formats(bits, dtype, group, zeros, act_order, M):
    w = format_weight(bits, dtype, group, zeros, act_order, M, K=384, N=512)
    _check_case(w, M, M)


# ----------------------------------------------------------------------------- shapes and plans


@pytest.mark.parametrize("bits,K,N,group", [
    (4, 128, 128, 128), (8, 128, 128, 32),     # one k stage; N = 128: the pair's second half past N
    (4, 640, 384, 64), (8, 1152, 896, 128),    # N % 256 = 128: the last pair tile's rank-1 half past N
    (4, 16384, 4096, 128),                     # K-heavy int4: the 256 x 128 instruction
    (4, 4096, 14336, 32), (8, 14336, 4096, 64),  # llama-like
])
@pytest.mark.parametrize("M", [65, 300])
def test_shapes(bits, K, N, group, M):
    w = Weight(bits=bits, K=K, N=N, group=group, channelwise=False, zeros=True, act_order=False,
               dtype=torch.bfloat16, seed=K + N + M)
    _check_case(w, M, K * M)


@pytest.mark.parametrize("bits,M,K,N,want", [
    (4, 4096, 4096, 4096, r"tile=256x256 .* tmem_cols=512 "),
    (4, 128, 4096, 4096, r"tile=256x128 .* tmem_cols=256 "),
    (4, 4096, 14336, 4096, r"tile=256x128 "),  # K-heavy
    (8, 4096, 4096, 4096, r"tile=256x128 "),
])
def test_plan_line(bits, M, K, N, want, monkeypatch, capfd):
    """The SWORDFISH_DEBUG line names the tile the write-up's rules pick, and that plan is correct."""
    monkeypatch.setenv("SWORDFISH_DEBUG", "1")
    w = Weight(bits=bits, K=K, N=N, group=128, channelwise=False, zeros=False, act_order=False,
               dtype=torch.bfloat16, seed=M + K)
    _check_case(w, M, 7 * M)
    assert re.search(want, _config(capfd, w, M))


def test_thor_l2_chunks(monkeypatch, capfd):
    """Thor runs M in chunks whose activation slab fits half its 32 MB L2 (the write-up's M = 2048, K = 14336
    case: several launches); B200 runs it in one."""
    monkeypatch.setenv("SWORDFISH_DEBUG", "1")
    w = Weight(bits=4, K=14336, N=1024, group=128, channelwise=False, zeros=False, act_order=True,
               dtype=torch.bfloat16, seed=5)
    _check_case(w, 2048, 6)
    chunks = int(re.search(r"chunks=(\d+)x", _config(capfd, w, 2048)).group(1))
    assert (chunks > 1) == (CC[0] == 11)


# ----------------------------------------------------------------------------- exactness, determinism, graphs


@pytest.mark.parametrize("bits,dtype,zeros", [(4, torch.bfloat16, False), (4, torch.float16, True),
                                              (8, torch.bfloat16, True), (8, torch.float16, False)])
def test_one_hot_reproduces_dequantized_weight_exactly(bits, dtype, zeros):
    w = Weight(bits=bits, K=256, N=256, group=64, channelwise=False, zeros=zeros, act_order=True, dtype=dtype,
               seed=bits + zeros)
    M = 300
    idx = torch.randint(0, w.K, (M,), generator=torch.Generator().manual_seed(5))
    x = torch.zeros(M, w.K, dtype=dtype)
    x[torch.arange(M), idx] = 1
    x = x.cuda()
    y = _gemm(w, x)
    _ran_prefill()
    assert torch.equal(y.to(torch.float64), w.reference(x)), "one-hot output differs from the dequantized weight"


def test_bit_identical_across_runs():
    w = Weight(bits=4, K=2048, N=1024, group=128, channelwise=False, zeros=True, act_order=False,
               dtype=torch.bfloat16, seed=3)
    x = _x(700, w.K, w.dtype, 4)
    first = _gemm(w, x)
    for _ in range(9):
        assert torch.equal(_gemm(w, x), first)


def test_cuda_graph_replay_equals_eager():
    w = Weight(bits=4, K=1024, N=512, group=128, channelwise=False, zeros=False, act_order=True,
               dtype=torch.bfloat16, seed=11)
    bias = _bias(w.N, w.dtype, 12)
    xs = [_x(M, w.K, w.dtype, 13 + M) for M in (64, 300, 1000)]
    eager = [_gemm(w, x, bias) for x in xs]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for x in xs:
            ops.gemm(x, w.packed, w.scales, w.zeros, w.perm, bias, w.bits, w.group, False, PATH_PREFILL, 0)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = [ops.gemm(x, w.packed, w.scales, w.zeros, w.perm, bias, w.bits, w.group, False, PATH_PREFILL, 0)
                for x in xs]
    for o in outs:
        o.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    for o, e in zip(outs, eager):
        assert torch.equal(o, e)


# ----------------------------------------------------------------------------- the knob and the router


def test_knob_off_refuses_and_auto_keeps_decode_and_dense(monkeypatch):
    """Without SWORDFISH_SM100_PREFILL the forced path names the knob, and auto never picks prefill."""
    monkeypatch.delenv(KNOB)
    w = Weight(bits=4, K=1024, N=512, group=128, channelwise=False, zeros=False, act_order=False,
               dtype=torch.bfloat16, seed=2)
    x = _x(300, w.K, w.dtype, 3)
    with pytest.raises(ValueError, match=KNOB):
        _gemm(w, x)
    dev = torch.cuda.current_device()
    for M in (64, 300, 2048, 8192):
        assert ops.select_path(M, w.K, w.N, 4, 128, False, False, False, 1, dev) != PATH_PREFILL


def test_knob_on_auto_takes_prefill_in_its_range():
    """With the knob, the sm100 / Thor tables' prefill range (the write-up's thresholds) is live."""
    dev = torch.cuda.current_device()
    assert ops.select_path(1024, 4096, 14336, 4, 128, False, False, False, 1, dev) == PATH_PREFILL
    assert ops.select_path(1, 4096, 14336, 4, 128, False, False, False, 1, dev) != PATH_PREFILL


# ----------------------------------------------------------------------------- sanitizer cases


@pytest.mark.sanitize
@pytest.mark.parametrize("bits,M,K,N", [(4, 70, 256, 384), (4, 300, 256, 256), (8, 150, 512, 128)])
def test_prefill_sm100_small_sanitize(bits, M, K, N):
    w = Weight(bits=bits, K=K, N=N, group=128, channelwise=False, zeros=True, act_order=True,
               dtype=torch.bfloat16, seed=M)
    _check_case(w, M, 1)
