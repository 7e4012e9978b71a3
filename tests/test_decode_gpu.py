"""GPU tests of the decode path (path=1 forced): kernels/decode/.

Every case: fresh random codes, scales, zero points, permutation, bias and
activations; the packed weight from the pure-torch packer
(format.pack_reference); the output's memory poisoned with NaN through the
caching allocator before the call (the op allocates y, so any element the
kernels fail to write, or a zeroing pass that did not happen, reads NaN);
compared with an fp64 reference of the dequantized weight (each weight
rounded once to the dtype, as the kernels and swordfish_backend.reference do).

Tolerances come from the dtype's unit roundoff u (2^-8 bf16, 2^-11 fp16) and
K: the atomic epilogue rounds the running output once per contribution, at
most one per k-block (K / block_k), giving a relative Frobenius error of about
u * sqrt(contributions); the deterministic epilogue sums in fp32 and rounds
once.

Sanitizers (small cases of every kernel: atomic, direct and partials modes,
int4/int8, swap (M = 1), MT 1 FOLD / 3, two m-groups, act-order prep, reduce;
M = 20 and 67 run gemm_kernel's CTA-shared activation tile, kShareActs):
    compute-sanitizer --tool memcheck  python -m pytest -q tests/test_decode_gpu.py -k test_odd_shapes
    compute-sanitizer --tool racecheck python -m pytest -q tests/test_decode_gpu.py -k "test_odd_shapes and 64-64"
    compute-sanitizer --tool synccheck python -m pytest -q tests/test_decode_gpu.py -k "test_odd_shapes and 64-64"
"""

from __future__ import annotations

import functools
import math
import pathlib
import re

import pytest
import torch

from swordfish_backend import format as fmt

ops = pytest.importorskip("swordfish_backend.ops")

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or not ops.has_extension(),
    reason="needs a CUDA device and the compiled extension",
)

PATH_DECODE = ops.PATH_DECODE
# The list, plus 200 and 223: where prefill cannot run, the sm90 table keeps decode through
# M = 207-223 (heuristics_sm90.hpp, dense_vs_decode).
M_SWEEP = [1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 47, 48, 49, 55, 56, 63, 64, 65, 96, 127, 128, 200, 223]
UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


def format_cases(test):
    """Parametrize `test` over every format: bits x dtype x group (-1 = channelwise) x zero points x
    act-order (the prefill tests use the same cross product)."""
    axes = [
        ("act_order", [False, True], ["sorted", "act_order"]),
        ("zeros", [False, True], ["sym", "zeros"]),
        ("group", [32, 64, 128, -1], ["g32", "g64", "g128", "cw"]),
        ("dtype", [torch.float16, torch.bfloat16], ["fp16", "bf16"]),
        ("bits", [4, 8], None),
    ]
    for name, values, ids in axes:
        test = pytest.mark.parametrize(name, values, ids=ids)(test)
    return test


def format_weight(bits, dtype, group, zeros, act_order, M, K, N) -> Weight:
    """The Weight of one format_cases point, seeded from the point."""
    seed = bits * 100000 + (dtype == torch.bfloat16) * 50000 + (group % 1000) * 100 + zeros * 20 + act_order * 10 + M
    return Weight(bits=bits, K=K, N=N, group=group, channelwise=group == -1, zeros=zeros, act_order=act_order,
                  dtype=dtype, seed=seed)


class Weight:
    """Random quantized weight in packed (sorted) row order, on the GPU, with its fp64 dequantization."""

    def __init__(self, *, bits, K, N, group, channelwise, zeros, act_order, dtype, seed):
        gen = torch.Generator().manual_seed(seed)
        self.bits, self.K, self.N, self.dtype = bits, K, N, dtype
        self.channelwise = channelwise
        if channelwise:
            group = next(g for g in (128, 64, 32) if K % g == 0)  # the replica group (weight.py)
        self.group = group
        ngroups = K // group
        q = torch.randint(0, 1 << bits, (K, N), generator=gen)
        # scales ~ 1/sqrt(K) keep |y| near 1 whatever K is
        s = ((torch.rand(ngroups, N, generator=gen) + 0.5) * (2.0 / (1 << bits)) / math.sqrt(K)).to(dtype)
        z = None
        if zeros:
            zp = torch.randint(0, 1 << bits, (ngroups, N), generator=gen)
            z = ((fmt.bias(bits) - zp).to(torch.float32) * s.to(torch.float32)).to(dtype)  # folded (B - zp) * s
        rows = torch.zeros(K, dtype=torch.int64) if channelwise else torch.arange(K) // group
        w = (q.to(torch.float64) - fmt.bias(bits)) * s.to(torch.float64)[rows]
        if z is not None:
            w = w + z.to(torch.float64)[rows]
        self.w_sorted = w.to(dtype).to(torch.float64).cuda()  # (K, N), row k = packed row k, rounded once
        if channelwise:
            # Decode reads scale row 0 only: poison the replicas it must not read.
            s = s.clone()
            s[1:] = float("nan")
            if z is not None:
                z = z.clone()
                z[1:] = float("nan")
        self.scales = s.cuda()
        self.zeros = None if z is None else z.cuda()
        self.perm = torch.randperm(K, generator=gen).to(torch.int32).cuda() if act_order else None
        self.packed = fmt.pack_reference(q, bits).cuda()

    def reference(self, x, bias=None):
        xs = x.to(torch.float64)
        if self.perm is not None:
            xs = xs[:, self.perm.long()]
        y = xs @ self.w_sorted
        if bias is not None:
            y = y + bias.to(torch.float64)
        return y

    def dense(self):
        """(N, K) weight in original input-feature order, dtype values."""
        w = self.w_sorted
        if self.perm is not None:
            out = torch.empty_like(w)
            out[self.perm.long()] = w
            w = out
        return w.t()

    def gemm(self, x, bias=None, deterministic=0):
        _poison(x.shape[0] * self.N, x.dtype)
        return ops.gemm(x, self.packed, self.scales, self.zeros, self.perm, bias, self.bits, self.group,
                        self.channelwise, PATH_DECODE, deterministic)


def _poison(numel, dtype):
    """Leave a NaN-filled block of exactly the output's size at the top of the caching allocator."""
    if numel > 0:
        torch.full((numel,), float("nan"), dtype=dtype, device="cuda")


def _tolerance(w: Weight, deterministic: bool) -> float:
    u = UNIT_ROUNDOFF[w.dtype]
    fp32 = w.K * 2.0**-24
    if deterministic:
        return 2 * u + fp32
    contributions = w.K // fmt.block_k(w.bits) + 1
    return u * (1 + math.sqrt(contributions)) + fp32


def _check(y, ref, tol, what=""):
    assert y.dtype in (torch.float16, torch.bfloat16)
    assert torch.isfinite(y).all(), f"{what}: non-finite outputs (unwritten or poisoned elements)"
    err = y.to(torch.float64) - ref
    rel = (err.norm() / ref.norm().clamp_min(1e-30)).item()
    assert rel <= tol, f"{what}: relative Frobenius error {rel:.3e} > {tol:.3e}"
    rms = ref.pow(2).mean().sqrt().item()
    worst = (err.abs() - 4 * tol * rms - 2 * UNIT_ROUNDOFF[y.dtype] * ref.abs()).max().item()
    assert worst <= 0, f"{what}: an element is off by {worst:.3e} beyond its bound (rms {rms:.3e})"


def _x(M, K, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(M, K, generator=gen).to(dtype).cuda()


def _bias(N, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(N, generator=gen) * 0.5).to(dtype).cuda()


# ----------------------------------------------------------------------------- M sweep


@pytest.mark.parametrize("deterministic", [0, 1], ids=["atomic", "deterministic"])
@pytest.mark.parametrize("M", M_SWEEP)
def test_m_sweep_int4_bf16_g128(M, deterministic):
    w = Weight(bits=4, K=1024, N=448, group=128, channelwise=False, zeros=False, act_order=False,
               dtype=torch.bfloat16, seed=M)
    x, bias = _x(M, w.K, w.dtype, 100 + M), _bias(w.N, w.dtype, 200 + M)
    y = w.gemm(x, bias, deterministic)
    assert y.shape == (M, w.N)
    _check(y, w.reference(x, bias), _tolerance(w, bool(deterministic)), f"M={M}")


@pytest.mark.parametrize("deterministic", [0, 1], ids=["atomic", "deterministic"])
@pytest.mark.parametrize("M", M_SWEEP)
def test_m_sweep_int8_fp16_g64_zeros_act_order(M, deterministic):
    w = Weight(bits=8, K=576, N=320, group=64, channelwise=False, zeros=True, act_order=True,
               dtype=torch.float16, seed=1000 + M)
    x = _x(M, w.K, w.dtype, 1100 + M)
    y = w.gemm(x, None, deterministic)
    _check(y, w.reference(x), _tolerance(w, bool(deterministic)), f"M={M}")


# ----------------------------------------------------------------------------- format cross product


@pytest.mark.parametrize("M", [1, 6, 16, 24, 33, 64, 100])  # 24: MT = 2, folded on this small layer
@format_cases
def test_formats(bits, dtype, group, zeros, act_order, M):
    w = format_weight(bits, dtype, group, zeros, act_order, M, K=384, N=320)
    x, bias = _x(M, w.K, dtype, M), _bias(w.N, dtype, M)
    y = w.gemm(x, bias)
    _check(y, w.reference(x, bias), _tolerance(w, False))


# ----------------------------------------------------------------------------- shapes


@pytest.mark.parametrize(
    "bits,K,N,group",
    [
        (4, 64, 64, 32), (4, 64, 64, 64), (8, 32, 64, 32),          # smallest legal sizes
        (4, 448, 832, 64), (8, 480, 832, 32), (4, 192, 64 * 9, -1),  # non-power-of-two multiples, partial quads
        (8, 96, 64 * 6, 32), (4, 4096, 128, 128),                    # K-heavy
    ],
)
@pytest.mark.parametrize("M", [1, 20, 67])
def test_odd_shapes(bits, K, N, group, M):
    w = Weight(bits=bits, K=K, N=N, group=group, channelwise=group == -1, zeros=True, act_order=False,
               dtype=torch.bfloat16, seed=K + N + M)
    x, bias = _x(M, K, w.dtype, K * M), _bias(N, w.dtype, N)
    for det in (0, 1):
        _check(w.gemm(x, bias, det), w.reference(x, bias), _tolerance(w, bool(det)), f"det={det}")


@pytest.mark.parametrize("M", [17, 32])
@pytest.mark.parametrize("bits,dtype,zeros", [(4, torch.bfloat16, False), (8, torch.float16, True)])
def test_mt2_on_a_large_layer(bits, dtype, zeros, M):
    """M = 17-32 (two m16 tiles) on a layer above kFoldMt2MaxWeightsPerSm x SMs (decode_config.h:
    2^19 weights per SM, 69 M on 132 SMs; this one is 70B qkv's 4096 x 20480 = 84 M): the unfolded
    MT = 2 instances, which the small layers of the other tests (FOLD at MT = 2) never reach, in both
    epilogues."""
    w = Weight(bits=bits, K=4096, N=20480, group=128, channelwise=False, zeros=zeros, act_order=False,
               dtype=dtype, seed=50 + M)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    if w.K * w.N <= _config_weights_per_sm() * sms:
        pytest.skip(f"{sms} SMs: this layer is below the FOLD bound, so it would test FOLD again")
    x, bias = _x(M, w.K, dtype, 60 + M), _bias(w.N, dtype, 70 + M)
    ref = w.reference(x, bias)
    for det in (0, 1):
        _check(w.gemm(x, bias, det), ref, _tolerance(w, bool(det)), f"M={M} det={det}")


def test_m_zero():
    w = Weight(bits=4, K=128, N=128, group=128, channelwise=False, zeros=False, act_order=False,
               dtype=torch.float16, seed=0)
    y = w.gemm(torch.empty(0, 128, dtype=torch.float16, device="cuda"))
    assert y.shape == (0, 128)


# ----------------------------------------------------------------------------- contracts


@pytest.mark.parametrize("rows", [5, 12, 24, 40], ids=["swap", "mt1_fold", "mt2", "mt3"])
@pytest.mark.parametrize("deterministic", [0, 1], ids=["atomic", "deterministic"])
@pytest.mark.parametrize("bits,dtype,zeros,act_order", [
    (4, torch.bfloat16, False, False), (4, torch.float16, True, True), (4, torch.bfloat16, True, False),
    (8, torch.bfloat16, True, False), (8, torch.float16, False, True), (8, torch.float16, True, False),
])
def test_one_hot_reproduces_dequantized_weight_exactly(bits, dtype, zeros, act_order, deterministic, rows):
    """x = rows of the identity: y must equal rows of the dequantized weight bit for bit.

    Products with 1 and 0 are exact, fp32 sums of one value and zeros are exact,
    and the value is already a dtype number, so no rounding may change it. The
    FOLD kernels (M <= 16, swap kernels at M <= 8 included) compute s * (q - B)
    (+ zs) in fp32 and round once: the same value.
    """
    w = Weight(bits=bits, K=512, N=256, group=64, channelwise=False, zeros=zeros, act_order=act_order,
               dtype=dtype, seed=7 + bits)
    ks = torch.randperm(w.K)[:rows]
    x = torch.zeros(len(ks), w.K, dtype=dtype, device="cuda")
    x[torch.arange(len(ks)), ks.cuda()] = 1
    y = w.gemm(x, None, deterministic)
    expect = w.dense()[:, ks.cuda()].t().to(dtype)
    assert torch.equal(y, expect)


@pytest.mark.parametrize("M", [1, 24, 70])
@pytest.mark.parametrize("bits", [4, 8])
def test_deterministic_is_bit_identical(bits, M):
    for K, N in ((1024, 256), (2048, 4096)):  # many parts per segment, and few
        w = Weight(bits=bits, K=K, N=N, group=128, channelwise=False, zeros=True, act_order=M == 24,
                   dtype=torch.bfloat16, seed=M + K)
        x, bias = _x(M, K, w.dtype, M), _bias(N, w.dtype, M)
        first = w.gemm(x, bias, 1)
        _check(first, w.reference(x, bias), _tolerance(w, True))
        for _ in range(9):
            assert torch.equal(w.gemm(x, bias, 1), first)


@pytest.mark.parametrize("M,K,N,mode", [
    (1, 8192, 4096, "partials"),     # 2,048 units: a whole number of CTAs per segment (uniform piece counts)
    (1, 1024, 57344, "partials"),    # 224 segments, too many to align: CTAs straddle segments, pieces counted
    (70, 2048, 4096, "partials"),    # two m-groups
    (8192, 128, 16384, "direct"),    # one fp32 plane is 512 MB, past kMaxPartialBytes: one CTA per segment
])
def test_deterministic_modes(M, K, N, mode, monkeypatch, capfd):
    """Both deterministic epilogues, named by the SWORDFISH_DEBUG line: the atomic mode's balanced split with
    fp32 pieces reduced in CTA order, and direct stores; each bit-identical run to run and exact."""
    monkeypatch.setenv("SWORDFISH_DEBUG", "1")
    w = Weight(bits=4, K=K, N=N, group=128, channelwise=False, zeros=False, act_order=False,
               dtype=torch.bfloat16, seed=M + N)
    x, bias = _x(M, K, w.dtype, M + 1), _bias(N, w.dtype, N)
    first = w.gemm(x, bias, 1)
    torch.cuda.synchronize()
    lines = [l for l in capfd.readouterr().err.splitlines() if f"M={M} K={K} N={N}" in l and "-> decode" in l]
    assert lines and f"mode={mode}" in lines[-1], lines
    if mode == "partials":
        assert int(re.search(r"pieces=(\d+)", lines[-1]).group(1)) >= 2, lines[-1]
    _check(first, w.reference(x, bias), _tolerance(w, True))
    for _ in range(2):
        assert torch.equal(w.gemm(x, bias, 1), first)


def test_deterministic_env_is_read_per_call(monkeypatch):
    w = Weight(bits=4, K=1024, N=256, group=128, channelwise=False, zeros=False, act_order=False,
               dtype=torch.bfloat16, seed=3)
    x = _x(5, w.K, w.dtype, 3)
    monkeypatch.setenv("SWORDFISH_DETERMINISTIC", "1")
    a = w.gemm(x, None, -1)
    b = w.gemm(x, None, -1)
    assert torch.equal(a, b)
    _check(a, w.reference(x), _tolerance(w, True))


@pytest.mark.parametrize("deterministic", [0, 1], ids=["atomic", "deterministic"])
@pytest.mark.parametrize("M,act_order", [(1, False), (16, True), (40, False), (90, True)])
def test_cuda_graph_replay_equals_eager(M, act_order, deterministic):
    w = Weight(bits=4, K=2048, N=512, group=128, channelwise=False, zeros=True, act_order=act_order,
               dtype=torch.bfloat16, seed=M)
    x, bias = _x(M, w.K, w.dtype, M), _bias(w.N, w.dtype, M)
    eager = w.gemm(x, bias, deterministic)
    ref = w.reference(x, bias)
    _check(eager, ref, _tolerance(w, bool(deterministic)), "eager")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):  # warm-up outside capture (first-call attribute setup)
            w.gemm(x, bias, deterministic)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.gemm(x, w.packed, w.scales, w.zeros, w.perm, bias, w.bits, w.group, w.channelwise, PATH_DECODE,
                       deterministic)
    for trial in range(3):
        x.copy_(_x(M, w.K, w.dtype, 1000 * trial + M))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        replay = out.clone()
        eager = w.gemm(x, bias, deterministic)
        if deterministic:
            assert torch.equal(replay, eager)
        _check(replay, w.reference(x, bias), _tolerance(w, bool(deterministic)), f"replay {trial}")


def test_side_stream():
    w = Weight(bits=8, K=512, N=256, group=32, channelwise=False, zeros=False, act_order=True,
               dtype=torch.float16, seed=11)
    x = _x(9, w.K, w.dtype, 11)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = w.gemm(x)
    torch.cuda.current_stream().wait_stream(s)
    _check(y, w.reference(x), _tolerance(w, False))


def test_llama_shape_m1():
    """One real layer shape (8B qkv), both dtypes: the grid, split and flush logic at scale."""
    for dtype in (torch.bfloat16, torch.float16):
        w = Weight(bits=4, K=4096, N=6144, group=128, channelwise=False, zeros=False, act_order=False,
                   dtype=dtype, seed=5)
        for M in (1, 16, 64):
            x = _x(M, w.K, dtype, M)
            _check(w.gemm(x), w.reference(x), _tolerance(w, False), f"M={M} {dtype}")


# ----------------------------------------------------------------------------- kernel boundaries, long ranges

_CONFIG = pathlib.Path(__file__).resolve().parents[1] / "kernels" / "decode" / "decode_config.h"


def _config_value(ctype, name, pattern):
    """The value of `inline constexpr CTYPE NAME = ...;` in decode_config.h, read from the source the
    extension was built from."""
    m = re.search(rf"inline constexpr {ctype} {name} = ({pattern});", _CONFIG.read_text())
    assert m, f"{name} not found in {_CONFIG}"
    return m.group(1)


def _config_flag(name):
    """A constexpr bool of decode_config.h."""
    return _config_value("bool", name, "true|false") == "true"


def _config_int(name):
    """A constexpr int of decode_config.h."""
    return int(_config_value("int", name, r"\d+"))


def _config_weights_per_sm():
    """kFoldMt2MaxWeightsPerSm of decode_config.h (written as 1LL << n)."""
    return 1 << int(_config_value("long long", "kFoldMt2MaxWeightsPerSm", r"1LL << \d+").split("<<")[1])


@pytest.mark.parametrize("M", [1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 48, 49, 64, 65])
def test_kernel_boundaries_name_their_kernel(M, monkeypatch, capfd):
    """Each M where decode_launch.cu switches kernels (swap for M <= 8, then gemm_kernel MT 1 -> 2 -> 3 -> 4
    -> two m-groups) is right on both sides, and the SWORDFISH_DEBUG line names the kernel and the
    activation staging decode_config.h selects: CTA-shared for the swap kernel from kSwapShareMinM
    (lane-local below), and for gemm_kernel when kShareActs."""
    w = Weight(bits=4, K=704, N=192, group=64, channelwise=False, zeros=True, act_order=False,
               dtype=torch.bfloat16, seed=77 + M)  # a shape no other test logs
    x, bias = _x(M, w.K, w.dtype, 77 + M), _bias(w.N, w.dtype, 77 + M)
    monkeypatch.setenv("SWORDFISH_DEBUG", "1")
    capfd.readouterr()
    for det in (0, 1):
        _check(w.gemm(x, bias, det), w.reference(x, bias), _tolerance(w, bool(det)), f"det={det}")
    torch.cuda.synchronize()
    lines = [l for l in capfd.readouterr().err.splitlines() if f"M={M} K=704 N=192" in l]
    assert lines, "no SWORDFISH_DEBUG line for the decode call"
    swap = M <= 8 and _config_flag("kSwapEnabled")
    shared = M >= _config_int("kSwapShareMinM") if swap else _config_flag("kShareActs")  # int4 (this weight)
    acts = "acts=cta" if shared else "acts=lane"
    mt = 1 if M <= 16 else min(4, -(-M // 16)) if M <= 64 else 3  # make_plan: M = 65 is 2 m-groups of MT 3
    assert all(f"mt={mt}" in l and (" swap" in l) == swap and acts in l for l in lines), lines


@functools.lru_cache(maxsize=2)
def _big_weight(bits):
    """An 8B-gate_up-sized weight built on the GPU: N = 28224 = 64 (4 * 110 + 1), so the last quad has one
    column; int4 with zero points, int8 without. Returns (packed, scales, zeros, W (K, N) fp32 of the
    dequantized dtype values)."""
    K, N, group, dtype = 4096, 28224, 128, torch.bfloat16
    gen = torch.Generator(device="cuda").manual_seed(40 + bits)
    q = torch.randint(0, 1 << bits, (K, N), generator=gen, device="cuda", dtype=torch.int32)
    s = ((torch.rand(K // group, N, generator=gen, device="cuda") + 0.5) * (2.0 / (1 << bits)) / math.sqrt(K)).to(dtype)
    z = None
    if bits == 4:
        zp = torch.randint(0, 16, (K // group, N), generator=gen, device="cuda")
        z = ((fmt.bias(bits) - zp).float() * s.float()).to(dtype)
    rows = torch.arange(K, device="cuda") // group
    w = (q.float() - fmt.bias(bits)) * s.float()[rows]
    if z is not None:
        w = w + z.float()[rows]
    return fmt.pack_reference(q, bits), s, z, w.to(dtype).float()


@pytest.mark.parametrize("deterministic", [0, 1], ids=["atomic", "deterministic"])
@pytest.mark.parametrize("M", [8, 9, 16, 17, 32, 33, 48, 64, 65])
@pytest.mark.parametrize("bits", [4, 8])
def test_long_ranges_wrap_the_ring(bits, M, deterministic):
    """Ranges of ~15-40 units per CTA (the stage ring wraps several times, segment ends mid-range), a
    one-column last quad, on an 8B-gate_up-sized layer: what the small shapes above never reach."""
    packed, s, z, w = _big_weight(bits)
    K, N = w.shape
    x = _x(M, K, torch.bfloat16, 500 + M)
    _poison(M * N, x.dtype)
    y = ops.gemm(x, packed, s, z, None, None, bits, 128, False, PATH_DECODE, deterministic)
    assert not torch.backends.cuda.matmul.allow_tf32, "the fp32 reference must not run in TF32"
    ref = (x.float() @ w).double()  # fp32: |error| ~ K 2^-24, far below the bf16 tolerance
    u = UNIT_ROUNDOFF[torch.bfloat16]
    tol = 2 * u + K * 2.0**-24 if deterministic else u * (1 + math.sqrt(K // fmt.block_k(bits) + 1)) + K * 2.0**-23
    _check(y, ref, tol, f"int{bits} M={M}")
