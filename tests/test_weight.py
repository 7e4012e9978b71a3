"""Packing round trips, checkpoint converters and the reference path (CPU).

Every checkpoint test writes its input with a small independent packer written
here from the checkpoint format's own description (loops over values, not the
library's helpers) and checks ``dequantize()`` against the values it encoded.
"""

import itertools

import pytest
import torch

import swordfish_backend as sf
from swordfish_backend import format as fmt

GROUPS = (32, 64, 128, -1)


def codes(K, N, bits, gen):
    return torch.randint(0, 1 << bits, (K, N), generator=gen, dtype=torch.int64)


def scales_for(K, N, group, dtype, gen):
    G = 1 if group == -1 else K // group
    return (torch.rand(G, N, generator=gen) * 0.02 + 0.001).to(dtype)


def expand_groups(t, K, group):
    """(G, N) per-group tensor -> (K, N) per-row."""
    return t.repeat_interleave(K if group == -1 else group, dim=0)


# ----------------------------------------------------------- independent packers


def gptq_pack(q, bits):
    """GPTQ: value i of word (r, n) is row (32 / bits) * r + i."""
    K, N = q.shape
    vpw = 32 // bits
    out = torch.zeros(K // vpw, N, dtype=torch.int64)
    for i in range(vpw):
        out |= q[i::vpw] << (bits * i)
    return torch.where(out >= 2**31, out - 2**32, out).to(torch.int32)


def awq_pack(q):
    """AWQ GEMM layout: column 8c + order[i] sits in nibble i of word c (order = 0 2 4 6 1 3 5 7)."""
    R, N = q.shape
    order = [0, 2, 4, 6, 1, 3, 5, 7]
    out = torch.zeros(R, N // 8, dtype=torch.int64)
    for i, col in enumerate(order):
        out |= q[:, col::8] << (4 * i)
    return torch.where(out >= 2**31, out - 2**32, out).to(torch.int32)


def ct_pack(q_signed, bits, dim):
    """compressed-tensors pack_to_int32: add 2**(bits-1), pack consecutive values along `dim` little-end first."""
    v = q_signed + (1 << (bits - 1))
    if dim == 0:
        v = v.t()
    R, C = v.shape
    vpw = 32 // bits
    out = torch.zeros(R, C // vpw, dtype=torch.int64)
    for i in range(vpw):
        out |= v[:, i::vpw] << (bits * i)
    out = torch.where(out >= 2**31, out - 2**32, out).to(torch.int32)
    return out.t().contiguous() if dim == 0 else out


# ----------------------------------------------------------------- format


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("kb,nb", [(1, 1), (3, 5), (2, 7)])
def test_pack_round_trip(bits, kb, nb):
    gen = torch.Generator().manual_seed(bits * 100 + kb * 10 + nb)
    K, N = kb * fmt.block_k(bits), nb * 64
    q = codes(K, N, bits, gen)
    packed = fmt.pack_reference(q, bits)
    assert packed.shape == fmt.packed_shape(bits, K, N) and packed.dtype == torch.int32
    assert torch.equal(fmt.unpack_reference(packed, bits, K, N).long(), q)
    assert torch.equal(fmt.unpack_k(fmt.pack_k(q, bits), bits).long(), q)
    assert torch.equal(fmt.pack_k(q, bits), gptq_pack(q, bits))


def test_block_is_contiguous_linear_byte_range():
    # Block (nb, kb) of a tensor holds exactly the values of its tile: pack one tile alone and compare.
    gen = torch.Generator().manual_seed(3)
    K, N = 192, 128
    q = codes(K, N, 4, gen)
    packed = fmt.pack_reference(q, 4)
    for nb, kb in itertools.product(range(2), range(3)):
        tile = q[kb * 64:(kb + 1) * 64, nb * 64:(nb + 1) * 64]
        assert torch.equal(packed[nb, kb], fmt.pack_reference(tile, 4)[0, 0])


def test_pack_rejects_bad_input():
    with pytest.raises(ValueError, match="K = 96"):
        fmt.pack_reference(torch.zeros(96, 64, dtype=torch.int64), 4)
    with pytest.raises(ValueError, match="N = 96"):
        fmt.pack_reference(torch.zeros(64, 96, dtype=torch.int64), 4)
    with pytest.raises(ValueError, match=r"\[0, 15\]"):
        fmt.pack_reference(torch.full((64, 64), 16), 4)
    with pytest.raises(TypeError, match="integer codes"):
        fmt.pack_reference(torch.zeros(64, 64), 4)
    with pytest.raises(ValueError, match="bits must be 4 or 8"):
        fmt.pack_reference(torch.zeros(64, 64, dtype=torch.int64), 3)


# ------------------------------------------------------------ checkpoints


@pytest.mark.parametrize("bits,group,act_order,dtype", [
    (b, g, a, d) for b, g, a, d in itertools.product((4, 8), GROUPS, (False, True), (torch.float16, torch.bfloat16))
    if not (a and g == -1)
])
def test_gptq_dequantize_matches_encoded_values(bits, group, act_order, dtype):
    gen = torch.Generator().manual_seed(hash((bits, group, act_order, str(dtype))) % 2**31)
    K, N = 256, 192
    q = codes(K, N, bits, gen)
    s = scales_for(K, N, group, dtype, gen)
    g_idx = None
    if act_order:
        g_idx = (torch.arange(K) // group)[torch.randperm(K, generator=gen)].to(torch.int32)
        row_scale = s.float()[g_idx.long()]
    else:
        row_scale = expand_groups(s.float(), K, group)
    w = sf.QuantizedWeight.from_gptq(gptq_pack(q, bits), s, g_idx, bits=bits, group_size=group)
    assert (w.in_features, w.out_features, w.bits, w.group_size, w.dtype) == (K, N, bits, group, dtype)
    assert (w.perm is not None) == act_order
    expected = ((q.float() - (1 << (bits - 1))) * row_scale).to(dtype).t()
    assert torch.equal(w.dequantize(), expected)


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_awq_dequantize_matches_encoded_values(group, dtype):
    gen = torch.Generator().manual_seed(group + 7)
    K, N = 256, 128
    G = 1 if group == -1 else K // group
    q = codes(K, N, 4, gen)
    z = codes(G, N, 4, gen)
    s = scales_for(K, N, group, dtype, gen)
    w = sf.QuantizedWeight.from_awq(awq_pack(q), awq_pack(z), s, group_size=group)
    assert w.zeros is not None and w.perm is None
    exact = (q.float() - expand_groups(z.float(), K, group)) * expand_groups(s.float(), K, group)
    # Zero points are folded to (8 - z) * s in the activation dtype: one extra rounding of that term.
    folded = ((q.float() - 8) * expand_groups(s.float(), K, group)
              + expand_groups(((8 - z.float()) * s.float()).to(dtype).float(), K, group))
    assert torch.equal(w.dequantize(), folded.to(dtype).t())
    eps = torch.finfo(dtype).eps
    assert torch.allclose(w.dequantize().float(), exact.t(), rtol=2 * eps, atol=16 * eps * float(s.float().max()))


@pytest.mark.parametrize("bits,group,asym,act_order", [
    (4, 128, False, False), (8, 128, False, False), (4, 32, True, False), (4, 64, False, True),
    (8, 32, False, True), (4, -1, False, False), (8, -1, False, False), (4, 128, True, True), (4, -1, True, False),
])
def test_compressed_tensors_dequantize_matches_encoded_values(bits, group, asym, act_order):
    gen = torch.Generator().manual_seed(bits * 1000 + group * 10 + asym * 3 + act_order)
    dtype = torch.bfloat16
    K, N = 256, 128
    G = 1 if group == -1 else K // group
    half = 1 << (bits - 1)
    q_signed = codes(K, N, bits, gen) - half  # llm-compressor stores signed codes
    scale_nk = scales_for(K, N, group, dtype, gen).t().contiguous()  # (N, G)
    zp_signed = codes(N, G, bits, gen) - half if asym else None
    g_idx = (torch.arange(K) // group)[torch.randperm(K, generator=gen)].to(torch.int32) if act_order else None
    w = sf.QuantizedWeight.from_compressed_tensors(
        ct_pack(q_signed.t().contiguous(), bits, dim=1), scale_nk, weight_shape=(N, K), num_bits=bits,
        group_size=group, weight_zero_point=None if zp_signed is None else ct_pack(zp_signed, bits, dim=0),
        weight_g_idx=g_idx)
    rows = g_idx.long() if act_order else torch.arange(K) // (K if group == -1 else group)
    s_rows = scale_nk.t().float()[rows]
    if asym:
        zs = ((-zp_signed.t().float()) * scale_nk.t().float()).to(dtype).float()[rows]  # (half - z_u) * s
        expected = q_signed.float() * s_rows + zs
    else:
        expected = q_signed.float() * s_rows
    assert torch.equal(w.dequantize(), expected.to(dtype).t())


def test_compressed_tensors_accepts_unpacked_zero_points():
    gen = torch.Generator().manual_seed(11)
    K, N, group = 128, 64, 64
    q_signed = codes(K, N, 4, gen) - 8
    zp = codes(N, K // group, 4, gen) - 8
    s = scales_for(K, N, group, torch.float16, gen).t().contiguous()
    packed = ct_pack(q_signed.t().contiguous(), 4, dim=1)
    a = sf.QuantizedWeight.from_compressed_tensors(packed, s, weight_shape=(N, K), group_size=group,
                                                   weight_zero_point=ct_pack(zp, 4, dim=0))
    b = sf.QuantizedWeight.from_compressed_tensors(packed, s, weight_shape=(N, K), group_size=group,
                                                   weight_zero_point=zp.to(torch.int8))
    assert torch.equal(a.dequantize(), b.dequantize())


def test_channelwise_scales_are_replicated_for_grouped_paths():
    gen = torch.Generator().manual_seed(5)
    for K, replica in ((256, 128), (192, 64), (96, 32)):
        q = codes(K, 64, 8, gen)
        w = sf.QuantizedWeight.from_gptq(gptq_pack(q, 8), scales_for(K, 64, -1, torch.float16, gen), bits=8,
                                         group_size=-1)
        assert w.scale_group == replica and w.scales.shape == (K // replica, 64)
        assert torch.equal(w.scales, w.scales[:1].expand_as(w.scales))


def test_trivial_g_idx_is_not_act_order():
    gen = torch.Generator().manual_seed(9)
    q = codes(128, 64, 4, gen)
    w = sf.QuantizedWeight.from_gptq(gptq_pack(q, 4), scales_for(128, 64, 32, torch.float16, gen),
                                     (torch.arange(128) // 32).to(torch.int32), group_size=32)
    assert w.perm is None


# ------------------------------------------------------------ reference path


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M", [1, 5, 33])
def test_reference_matmul_within_rounding_of_fp64(dtype, M):
    gen = torch.Generator().manual_seed(M)
    K, N = 512, 128
    q = codes(K, N, 4, gen)
    s = scales_for(K, N, 128, dtype, gen)
    g_idx = (torch.arange(K) // 128)[torch.randperm(K, generator=gen)].to(torch.int32)
    w = sf.QuantizedWeight.from_gptq(gptq_pack(q, 4), s, g_idx)
    x = torch.randn(2, M, K, generator=gen).to(dtype)
    bias = torch.randn(N, generator=gen).to(dtype)
    y = sf.matmul(x, w, bias)
    assert y.shape == (2, M, N) and y.dtype == dtype
    exact = x.double() @ w.dequantize().double().t() + bias.double()
    # fp32 accumulation error is negligible; the output is rounded once to dtype.
    err = (y.double() - exact).abs()
    bound = torch.finfo(dtype).eps * exact.abs() + 1e-6 * K
    assert bool((err <= bound).all())
    rel = torch.linalg.norm(y.double() - exact) / torch.linalg.norm(exact)
    assert rel < 1e-2


# -------------------------------------------------------------- bad input


def _gptq_args(K=128, N=64, bits=4, group=64, dtype=torch.float16):
    gen = torch.Generator().manual_seed(0)
    return gptq_pack(codes(K, N, bits, gen), bits), scales_for(K, N, group, dtype, gen)


def test_bad_group_size():
    qw, s = _gptq_args()
    with pytest.raises(ValueError, match="group_size must be one of .* got 16"):
        sf.QuantizedWeight.from_gptq(qw, s, group_size=16)
    qw, s = _gptq_args(K=192, group=64)
    with pytest.raises(ValueError, match="group_size 128 does not divide in_features K = 192"):
        sf.QuantizedWeight.from_gptq(qw, s[:1], group_size=128)


def test_bad_shapes():
    qw, s = _gptq_args(K=128, N=64)
    with pytest.raises(ValueError, match=r"scales must be \(2, 64\).*got \(3, 64\)"):
        sf.QuantizedWeight.from_gptq(qw, torch.cat([s, s[:1]]), group_size=64)
    with pytest.raises(ValueError, match="multiple of 64, got N = 32"):
        sf.QuantizedWeight.from_gptq(qw[:, :32], s[:, :32], group_size=64)
    with pytest.raises(ValueError, match="multiple of 64, got K = 96"):
        sf.QuantizedWeight.from_gptq(qw[:12], s[:, :], group_size=32)
    with pytest.raises(ValueError, match="qzeros must be"):
        sf.QuantizedWeight.from_awq(torch.zeros(128, 8, dtype=torch.int32), torch.zeros(3, 8, dtype=torch.int32),
                                    torch.ones(2, 64, dtype=torch.float16), group_size=64)
    with pytest.raises(ValueError, match=r"weight_packed for weight_shape \(N=64, K=128\)"):
        sf.QuantizedWeight.from_compressed_tensors(torch.zeros(64, 8, dtype=torch.int32),
                                                   torch.ones(64, 1, dtype=torch.float16), weight_shape=(64, 128))


def test_bad_dtypes():
    qw, s = _gptq_args()
    with pytest.raises(TypeError, match="qweight must be int32"):
        sf.QuantizedWeight.from_gptq(qw.to(torch.int64), s, group_size=64)
    with pytest.raises(TypeError, match="pass dtype="):
        sf.QuantizedWeight.from_gptq(qw, s.float(), group_size=64)
    with pytest.raises(TypeError, match="dtype must be torch.float16 or torch.bfloat16"):
        sf.QuantizedWeight.from_gptq(qw, s, group_size=64, dtype=torch.float32)
    w = sf.QuantizedWeight.from_gptq(qw, s.float(), group_size=64, dtype=torch.bfloat16)
    assert w.scales.dtype == torch.bfloat16
    with pytest.raises(TypeError, match="x.dtype must be the weight's activation dtype"):
        sf.matmul(torch.randn(2, 128, dtype=torch.float16), w)
    with pytest.raises(TypeError, match="g_idx must be an integer tensor"):
        sf.QuantizedWeight.from_gptq(qw, s, torch.zeros(128), group_size=64)


def test_bad_g_idx():
    qw, s = _gptq_args()
    with pytest.raises(ValueError, match=r"g_idx must have shape \(128,\)"):
        sf.QuantizedWeight.from_gptq(qw, s, torch.zeros(64, dtype=torch.int32), group_size=64)
    with pytest.raises(ValueError, match=r"g_idx values must lie in \[0, 2\)"):
        sf.QuantizedWeight.from_gptq(qw, s, torch.full((128,), 2, dtype=torch.int32), group_size=64)
    g = (torch.arange(128) // 64).to(torch.int32)
    g[0] = 1
    with pytest.raises(ValueError, match="group 0 has 63 rows, every group needs 64"):
        sf.QuantizedWeight.from_gptq(qw, s, g, group_size=64)


def test_bad_matmul_inputs():
    qw, s = _gptq_args()
    w = sf.QuantizedWeight.from_gptq(qw, s, group_size=64)
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., 128\), got \(2, 64\)"):
        sf.matmul(torch.randn(2, 64, dtype=torch.float16), w)
    with pytest.raises(ValueError, match=r"bias must be a torch.float16 tensor of shape \(64,\)"):
        sf.matmul(torch.randn(2, 128, dtype=torch.float16), w, torch.zeros(65, dtype=torch.float16))
    with pytest.raises(ValueError, match="path must be one of"):
        sf.matmul(torch.randn(2, 128, dtype=torch.float16), w, path="fast")
    with pytest.raises(TypeError, match="QuantizedWeight"):
        sf.matmul(torch.randn(2, 128, dtype=torch.float16), torch.zeros(64, 128))


def test_mixed_devices_rejected():
    qw, s = _gptq_args()
    with pytest.raises(ValueError, match="one device"):
        sf.QuantizedWeight.from_gptq(qw, s.to("meta"), group_size=64)


def test_zero_points_out_of_range():
    with pytest.raises(ValueError, match=r"zero points must lie in \[0, 15\]"):
        sf.QuantizedWeight.from_compressed_tensors(
            torch.zeros(64, 16, dtype=torch.int32), torch.ones(64, 1, dtype=torch.float16), weight_shape=(64, 128),
            group_size=-1, weight_zero_point=torch.full((64, 1), 9, dtype=torch.int8))
