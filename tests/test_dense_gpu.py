"""The dense tier on the GPU: the dequantize op bit for bit, the forced dense GEMM path against
an fp32 reference, and the contracts around it (bias epilogue, act-order, graph capture,
determinism, alignment, errors).

Numerics contract (kernels/dense/dense_dequant.cuh): every dequantized value is ONE rounding of
the exact (q - B) * s + zs to the activation dtype: (q - B) comes out of the magic-number LOP3
path exactly, then one hmul2 (no zero points) or one hfma2 (fused, single rounding) scales it.
``reference.dequantize`` computes (q - B) * s exactly in fp32, adds zs in fp32 and rounds to the
dtype. The two agree bit for bit whenever that fp32 sum is exact, which holds for every folded
zero point zs = round((B - z) * s) that the checkpoint loaders produce: zs and (q - B) * s are
both multiples of ulp(s), and |sum| < 2**10 * |s|, so the sum needs at most 21 significant bits
(fp16: 11 + 10; bf16: 8 + 10). Those are the zero points tested for exactness here; arbitrary zs
(not a loader output) get a 1-ulp bound instead.
"""

from __future__ import annotations

import math
import types

import pytest
import torch

from swordfish_backend import format as fmt
from swordfish_backend import ops
from swordfish_backend import reference

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)
if not ops.has_extension():
    pytest.skip(f"needs the compiled extension: {ops.extension_error()}", allow_module_level=True)

DEV = torch.device("cuda", torch.cuda.current_device())
DTYPES = (torch.float16, torch.bfloat16)
GROUPS = (32, 64, 128, -1)  # -1: channelwise
PATH_DENSE = ops.PATH_DENSE


def unit_roundoff(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps / 2


def make_weight(bits, K, N, group, dtype, zeros=False, act_order=False, seed=0, arbitrary_zeros=False):
    """A random weight as the kernels take it, plus the SimpleNamespace reference.dequantize reads."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 1 << bits, (K, N), generator=gen, dtype=torch.int64)  # packed-row order
    channelwise = group == -1
    scale_group = group
    if channelwise:
        scale_group = next(g for g in (128, 64, 32) if K % g == 0)
    rows = K // scale_group
    sign = torch.where(torch.rand(rows, N, generator=gen) < 0.2, -1.0, 1.0)
    scales = (torch.rand(rows, N, generator=gen) * 0.02 + 0.001) * sign
    if channelwise:
        scales = scales[:1].expand(rows, N)
    scales = scales.to(dtype).contiguous()
    zs = None
    if zeros:
        if arbitrary_zeros:
            zs = (torch.randn(rows, N, generator=gen) * 0.05).to(dtype)
        else:
            z = torch.randint(0, 1 << bits, (rows, N), generator=gen)
            zs = ((fmt.bias(bits) - z.float()) * scales.float()).to(dtype)
        if channelwise:
            zs = zs[:1].expand(rows, N)
        zs = zs.contiguous()
    perm = torch.randperm(K, generator=gen).to(torch.int32) if act_order else None
    packed = fmt.pack_reference(q, bits)
    w = types.SimpleNamespace(
        in_features=K, out_features=N, bits=bits, scale_group=scale_group, dtype=dtype,
        packed=packed.to(DEV), scales=scales.to(DEV), zeros=None if zs is None else zs.to(DEV),
        perm=None if perm is None else perm.to(DEV), channelwise=channelwise, packed_k=K)
    return w


def args(w):
    """(packed, scales, zeros, perm, bits, group, channelwise): the op arguments in schema order."""
    return (w.packed, w.scales, w.zeros, w.perm, w.bits, w.scale_group, w.channelwise)


def ref_weight(w) -> torch.Tensor:
    """(N, K) in w.dtype: one rounding of (q - B) * s + zs, columns in input-feature order."""
    return reference.dequantize(w, torch.float32).to(w.dtype)


def bits_of(t: torch.Tensor) -> torch.Tensor:
    """Bit patterns with -0 folded into +0 (the sign of an exact zero is not part of the contract)."""
    return (t + 0).view(torch.int16)


def poison_next_allocation(shape, dtype):
    """Fill a block of this size with NaN and free it: the caching allocator hands the same block
    to the op's next allocation of that size, so an element the kernel misses stays NaN."""
    torch.full(shape, float("nan"), dtype=dtype, device=DEV)


def gemm(x, w, bias=None, path=PATH_DENSE, deterministic=0):
    return ops.gemm(x, w.packed, w.scales, w.zeros, w.perm, bias, w.bits, w.scale_group, w.channelwise, path,
                    deterministic)


def rel_frobenius(y: torch.Tensor, ref: torch.Tensor) -> float:
    return (y.float() - ref).norm().item() / max(ref.norm().item(), 1e-30)


def gemm_tolerance(K: int, dtype: torch.dtype) -> float:
    """Output rounding (<= u per element, so <= u in Frobenius norm) plus fp32 accumulation
    (<= K * 2**-24 per element relative to sum |x||w|, which is a few times |y| for random data)."""
    return unit_roundoff(dtype) + 4 * K * 2.0 ** -24


# ---------------------------------------------------------------- dequantize op, bit-exact


@pytest.mark.parametrize("act_order", [False, True], ids=["sorted", "act_order"])
@pytest.mark.parametrize("zeros", [False, True], ids=["sym", "zp"])
@pytest.mark.parametrize("group", GROUPS, ids=lambda g: f"g{g}")
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("bits", [4, 8])
def test_dequantize_bit_exact(bits, dtype, group, zeros, act_order):
    K, N = 256, 192
    w = make_weight(bits, K, N, group, dtype, zeros, act_order, seed=bits * 7 + group)
    poison_next_allocation((N, K), dtype)
    out = ops.dequantize(*args(w), K)
    ref = ref_weight(w)
    assert out.shape == (N, K) and out.dtype == dtype
    assert not torch.isnan(out).any()
    mismatch = (bits_of(out) != bits_of(ref)).sum().item()
    assert mismatch == 0, f"{mismatch} of {N * K} values differ from one rounding of (q - B) * s + zs"


@pytest.mark.parametrize("act_order", [False, True], ids=["sorted", "act_order"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_dequantize_int8_half_tile(dtype, act_order):
    """int8 with K % 64 == 32: the last CTA tile is half full."""
    K, N = 160, 128
    w = make_weight(8, K, N, 32, dtype, zeros=True, act_order=act_order, seed=3)
    out = ops.dequantize(*args(w), K)
    assert torch.equal(bits_of(out), bits_of(ref_weight(w)))


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_dequantize_arbitrary_zero_points_within_one_ulp(dtype):
    """Zero points that are not (B - z) * s: the fused hfma2 rounds once, the reference twice."""
    K, N = 256, 128
    w = make_weight(4, K, N, 64, dtype, zeros=True, arbitrary_zeros=True, seed=5)
    out = ops.dequantize(*args(w), K).float()
    exact = reference.dequantize(w, torch.float32)  # already one dtype rounding of the fp32 value
    ulp = torch.finfo(dtype).eps * exact.abs().clamp_min(torch.finfo(dtype).tiny)
    assert ((out - exact).abs() <= ulp).all()


def test_dequantize_large_shape():
    """A Llama-sized shape (many CTAs, 64-bit addressing of the output rows)."""
    K, N = 4096, 6144
    w = make_weight(4, K, N, 128, torch.bfloat16, seed=11)
    out = ops.dequantize(*args(w), K)
    assert torch.equal(bits_of(out), bits_of(ref_weight(w)))


# ---------------------------------------------------------------- the dense GEMM path


@pytest.mark.parametrize("act_order", [False, True], ids=["sorted", "act_order"])
@pytest.mark.parametrize("zeros", [False, True], ids=["sym", "zp"])
@pytest.mark.parametrize("group", GROUPS, ids=lambda g: f"g{g}")
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("bits", [4, 8])
def test_dense_gemm_matches_reference(bits, dtype, group, zeros, act_order):
    K, N = 256, 192
    w = make_weight(bits, K, N, group, dtype, zeros, act_order, seed=100 + bits + group)
    W = ref_weight(w).float()
    for M in (1, 17, 64, 129):
        x = torch.randn(M, K, device=DEV).to(dtype)
        poison_next_allocation((M, N), dtype)
        y = gemm(x, w)
        assert y.shape == (M, N) and y.dtype == dtype
        assert ops.last_path(DEV.index) == PATH_DENSE
        err = rel_frobenius(y, x.float() @ W.t())
        assert err < gemm_tolerance(K, dtype), f"M={M}: relative Frobenius error {err:.2e}"


@pytest.mark.parametrize("act_order", [False, True], ids=["sorted", "act_order"])
@pytest.mark.parametrize("bits", [4, 8])
def test_dense_one_hot_reproduces_weight(bits, act_order):
    """x = rows of the identity: y[m] is column k_m of the dequantized weight, exactly."""
    K, N = 256, 128
    w = make_weight(bits, K, N, 128, torch.bfloat16, zeros=True, act_order=act_order, seed=21)
    ks = torch.randperm(K)[:48].to(DEV)
    x = torch.zeros(len(ks), K, dtype=torch.bfloat16, device=DEV)
    x[torch.arange(len(ks), device=DEV), ks] = 1
    y = gemm(x, w)
    assert torch.equal(bits_of(y), bits_of(ref_weight(w)[:, ks].t().contiguous()))


@pytest.mark.parametrize("zeros", [False, True], ids=["sym", "zp"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("act_order", [False, True], ids=["NK", "KN_act_order"])
@pytest.mark.parametrize("bits, K", [(4, 256), (8, 224)], ids=["int4", "int8_half_tile"])
def test_dense_identity_reproduces_whole_weight(bits, K, act_order, dtype, zeros):
    """x = the K x K identity: y = W^T exactly, every value of the scratch weight the GEMM read.

    The act-order GEMM dequantizes into the (K, N) layout (lanes trade pairs through a shuffle
    before the staging stores, dense_smem.h), which the dequantize op never uses: this checks
    all of it, including an int8 tensor's half tile (K % 64 == 32)."""
    N = 192
    w = make_weight(bits, K, N, 32, dtype, zeros=zeros, act_order=act_order, seed=23 + bits)
    x = torch.eye(K, dtype=dtype, device=DEV)
    poison_next_allocation((K, N), dtype)
    y = gemm(x, w)
    assert ops.last_path(DEV.index) == PATH_DENSE
    assert not torch.isnan(y).any()
    mismatch = (bits_of(y) != bits_of(ref_weight(w).t().contiguous())).sum().item()
    assert mismatch == 0, f"{mismatch} of {K * N} values differ"


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_dense_bias_epilogue(dtype):
    K, N, M = 512, 256, 33
    w = make_weight(4, K, N, 128, dtype, seed=31)
    x = torch.randn(M, K, device=DEV).to(dtype)
    bias = torch.randn(N, device=DEV).to(dtype)
    y = gemm(x, w, bias=bias)
    ref = x.float() @ ref_weight(w).float().t() + bias.float()
    assert rel_frobenius(y, ref) < gemm_tolerance(K, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_dense_unaligned_bias(dtype):
    """A bias view 2 bytes into its allocation skips the BIAS epilogue (add_bias fallback)."""
    K, N, M = 256, 128, 20
    w = make_weight(8, K, N, 128, dtype, seed=33)
    x = torch.randn(M, K, device=DEV).to(dtype)
    bias = torch.randn(N + 1, device=DEV).to(dtype)[1:]
    assert bias.data_ptr() % 16 != 0
    y = gemm(x, w, bias=bias)
    ref = x.float() @ ref_weight(w).float().t() + bias.float()
    # one more rounding than the epilogue: y is rounded before the bias is added
    assert rel_frobenius(y, ref) < 2 * gemm_tolerance(K, dtype)


def test_dense_int8_half_tile_gemm():
    K, N, M = 160, 128, 40
    for act_order in (False, True):
        w = make_weight(8, K, N, 32, torch.float16, act_order=act_order, seed=41)
        x = torch.randn(M, K, device=DEV).to(torch.float16)
        y = gemm(x, w)
        assert rel_frobenius(y, x.float() @ ref_weight(w).float().t()) < gemm_tolerance(K, torch.float16)


def test_dense_unaligned_activations():
    """x starting 2 bytes into an allocation: cuBLASLt must be told the real alignment."""
    K, N, M = 256, 128, 24
    w = make_weight(4, K, N, 64, torch.bfloat16, seed=51)
    buf = torch.randn(M * K + 1, device=DEV).to(torch.bfloat16)
    x = buf[1:].view(M, K)
    assert x.data_ptr() % 16 != 0
    y = gemm(x, w)
    assert rel_frobenius(y, x.float() @ ref_weight(w).float().t()) < gemm_tolerance(K, torch.bfloat16)


def test_dense_deterministic_is_bitwise_repeatable():
    K, N, M = 4096, 512, 64  # K-heavy and small: where a split-K algorithm would be chosen
    w = make_weight(4, K, N, 128, torch.bfloat16, seed=61)
    x = torch.randn(M, K, device=DEV).to(torch.bfloat16)
    first = gemm(x, w, deterministic=1)
    for _ in range(3):
        assert torch.equal(gemm(x, w, deterministic=1).view(torch.int16), first.view(torch.int16))


def test_dense_cuda_graph_capture_and_replay():
    K, N = 512, 256
    w = make_weight(4, K, N, 128, torch.bfloat16, zeros=True, act_order=True, seed=71)
    W = ref_weight(w).float()
    xs = {M: torch.randn(M, K, device=DEV).to(torch.bfloat16) for M in (8, 200, 1024)}
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for x in xs.values():
            gemm(x, w)  # warm-up: handles, algorithm cache
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ys = {M: gemm(x, w) for M, x in xs.items()}
    for trial in range(2):
        for x in xs.values():
            x.copy_(torch.randn_like(x, dtype=torch.float32).to(torch.bfloat16))
        graph.replay()
        torch.cuda.synchronize()
        for M, x in xs.items():
            assert rel_frobenius(ys[M], x.float() @ W.t()) < gemm_tolerance(K, torch.bfloat16), (trial, M)


def test_dense_on_a_side_stream():
    K, N, M = 256, 128, 64
    w = make_weight(8, K, N, 64, torch.float16, seed=81)
    x = torch.randn(M, K, device=DEV).to(torch.float16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = gemm(x, w)
    s.synchronize()
    assert rel_frobenius(y, x.float() @ ref_weight(w).float().t()) < gemm_tolerance(K, torch.float16)


def test_dense_empty_batch():
    w = make_weight(4, 256, 128, 128, torch.bfloat16)
    y = gemm(torch.empty(0, 256, device=DEV, dtype=torch.bfloat16), w)
    assert y.shape == (0, 128)


# ---------------------------------------------------------------- bad inputs


def test_bad_group_names_the_value():
    w = make_weight(4, 256, 128, 64, torch.bfloat16)
    x = torch.randn(4, 256, device=DEV).to(torch.bfloat16)
    bad_scales = torch.ones(256 // 16, 128, device=DEV, dtype=torch.bfloat16)
    with pytest.raises((ValueError, RuntimeError), match="group"):
        ops.gemm(x, w.packed, bad_scales, None, None, None, 4, 16, False, PATH_DENSE, 0)
    with pytest.raises((ValueError, RuntimeError), match="group"):
        ops.dequantize(w.packed, bad_scales, None, None, 4, 16, False, 256)


def test_forced_prefill_says_why():
    # K = 192 is legal for the format but not for the prefill mainloop (K % 128), on any device.
    w = make_weight(4, 192, 128, 64, torch.bfloat16)
    x = torch.randn(4, 192, device=DEV).to(torch.bfloat16)
    with pytest.raises((ValueError, RuntimeError), match="prefill"):
        gemm(x, w, path=ops.PATH_PREFILL)


def test_dequantize_wrong_K_names_it():
    w = make_weight(8, 256, 128, 128, torch.float16)
    with pytest.raises((ValueError, RuntimeError), match="shape|K ="):
        ops.dequantize(*args(w), 128)


def test_dequantize_matches_quantized_weight_path():
    """QuantizedWeight.dequantize() on CUDA goes through the same op."""
    from swordfish_backend.weight import QuantizedWeight

    K, N = 256, 128
    gen = torch.Generator().manual_seed(9)
    q = torch.randint(0, 16, (K, N), generator=gen)
    scales = (torch.rand(K // 128, N, generator=gen) * 0.01 + 0.001).to(torch.bfloat16)
    qw = QuantizedWeight.from_gptq(fmt.pack_k(q, 4), scales, bits=4, group_size=128)
    cpu = qw.dequantize()
    gpu = qw.cuda(DEV.index).dequantize()
    assert torch.equal(bits_of(gpu.cpu()), bits_of(cpu))


def test_tolerance_is_not_vacuous():
    """The GEMM tolerance catches a weight off by one code in a single column."""
    K, N, M = 256, 128, 64
    w = make_weight(4, K, N, 128, torch.bfloat16, seed=91)
    W = ref_weight(w).float()
    W_bad = W.clone()
    W_bad[7] += w.scales[0, 7].float() * 4  # four codes off in one of 128 columns
    x = torch.randn(M, K, device=DEV).to(torch.bfloat16)
    y = gemm(x, w)
    assert rel_frobenius(y, x.float() @ W_bad.t()) > gemm_tolerance(K, torch.bfloat16)
    assert math.isfinite(rel_frobenius(y, x.float() @ W.t()))
