"""Fused MoE on the CPU: the QuantizedExperts builders, reference_moe, sf.fused_moe's validation, the MoE ops'
Python surface and fake implementations, and `swordfish bench --moe` without a GPU.

Expert checkpoints are written with test_weight.py's independent packers; the fp64 oracle here computes the
layer from the generated integer codes and scales, token by token and slot by slot, not through the library.
"""

import io
import math
import sys

import pytest
import torch

import swordfish_backend as sf
from swordfish_backend import bench, bench_moe, cli, moe, ops, presets
from swordfish_backend import format as fmt
from test_weight import awq_pack, codes, ct_pack, gptq_pack, scales_for

MOE_SCHEMAS = {  # docs/MOE.md and kernels/torch/ops_moe.cpp
    "moe_align": "swordfish::moe_align(Tensor topk_ids, int num_experts, int block_m, Tensor? expert_map) -> "
                 "(Tensor, Tensor, Tensor)",
    "fused_moe": "swordfish::fused_moe(Tensor x, Tensor w13_packed, Tensor w13_scales, Tensor? w13_zeros, "
                 "Tensor? w13_perm, Tensor w2_packed, Tensor w2_scales, Tensor? w2_zeros, Tensor? w2_perm, "
                 "Tensor topk_weights, Tensor topk_ids, Tensor? expert_map, int bits, int group13, "
                 "bool channelwise13, int group2, bool channelwise2, int activation, bool weights_on_input, "
                 "int path, int deterministic) -> Tensor",
    "moe_select_path": "swordfish::moe_select_path(int T, int top_k, int E, int H, int I, int bits, int group, "
                       "int dtype, int device, bool act_order) -> int",
    "last_moe_path": "swordfish::last_moe_path(int device) -> int",
    "moe_path_names": "swordfish::moe_path_names() -> str",
}
needs_moe = pytest.mark.skipif(not ops.has_moe(), reason=f"no MoE ops: {ops.moe_error()}")
BF16, FP16 = torch.bfloat16, torch.float16


# ------------------------------------------------------------------ helpers


def gptq_experts(E, K, N, bits, group, dtype, gen, act_order=False, trivial=()):
    """(qweight [E, K*bits/32, N], scales [E, G, N], g_idx [E, K] or None, codes [E, K, N], row group [E, K])."""
    q = torch.stack([codes(K, N, bits, gen) for _ in range(E)])
    s = torch.stack([scales_for(K, N, group, dtype, gen) for _ in range(E)])
    rows = torch.arange(K) // (K if group == -1 else group)
    row_group = torch.stack([rows if (not act_order or e in trivial) else rows[torch.randperm(K, generator=gen)]
                             for e in range(E)])
    g_idx = row_group.to(torch.int32) if act_order else None
    return torch.stack([gptq_pack(q[e], bits) for e in range(E)]), s, g_idx, q, row_group


def truth(q, s, row_group, bits, dtype):
    """fp64 (N, K) weight from codes (K, N): (q - bias) * s, rounded once to dtype (the MMA operand)."""
    w = (q.double() - (1 << (bits - 1))) * s.double()[row_group]
    return w.to(dtype).double().t()


def act64(name, g):
    if name == "silu":
        return g / (1 + torch.exp(-g))
    return 0.5 * g * (1 + torch.erf(g / math.sqrt(2.0)))


def oracle(x, W13, W2, ids, wts, activation="silu", on_input=False, expert_map=None):
    """fp64 layer, one (token, slot) at a time; W13 [E, 2I, H], W2 [E, H, I] fp64."""
    T, H = x.shape
    I = W2.shape[2]  # noqa: E741
    out = torch.zeros(T, H, dtype=torch.float64)
    for t in range(T):
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            if expert_map is not None:
                e = int(expert_map[e])
                if e < 0:
                    continue
            w = float(wts[t, j])
            h = x[t].double() @ W13[e].t()
            if on_input:
                h = h * w
            y = (act64(activation, h[:I]) * h[I:]) @ W2[e].t()
            out[t] += y if on_input else w * y
    return out


def routing(T, E, k, gen, renormalize=True):
    logits = torch.randn(T, E, generator=gen)
    w, ids = torch.topk(torch.softmax(logits, -1), k, -1)
    if renormalize:
        w = w / w.sum(-1, keepdim=True)
    return ids.to(torch.int32), w.float()


def layer(E=4, H=128, I=64, bits=4, group=64, dtype=BF16, seed=0, act_order=False):  # noqa: E741
    """(w13, w2, W13 fp64 [E, 2I, H], W2 fp64 [E, H, I]) of random GPTQ experts."""
    gen = torch.Generator().manual_seed(seed)
    qw13, s13, g13, q13, r13 = gptq_experts(E, H, 2 * I, bits, group, dtype, gen, act_order)
    qw2, s2, g2, q2, r2 = gptq_experts(E, I, H, bits, group, dtype, gen, act_order)
    w13 = sf.QuantizedExperts.from_gptq(qw13, s13, g13, bits=bits, group_size=group)
    w2 = sf.QuantizedExperts.from_gptq(qw2, s2, g2, bits=bits, group_size=group)
    W13 = torch.stack([truth(q13[e], s13[e], r13[e], bits, dtype) for e in range(E)])
    W2 = torch.stack([truth(q2[e], s2[e], r2[e], bits, dtype) for e in range(E)])
    return w13, w2, W13, W2


def assert_same_weight(ex, e, w):
    """Expert e of `ex` holds bit for bit what QuantizedWeight `w` holds."""
    assert torch.equal(ex.packed[e], w.packed)
    assert torch.equal(ex.scales[e], w.scales)
    assert (ex.zeros is None) == (w.zeros is None)
    if w.zeros is not None:
        assert torch.equal(ex.zeros[e], w.zeros)
    if w.perm is None:
        assert ex.perm is None or torch.equal(ex.perm[e], torch.arange(ex.in_features, dtype=torch.int32))
        assert ex[e].perm is None
    else:
        assert torch.equal(ex.perm[e], w.perm) and torch.equal(ex[e].perm, w.perm)
    got = ex[e]
    assert isinstance(got, sf.QuantizedWeight) and torch.equal(got.packed, w.packed)
    assert (got.in_features, got.out_features, got.bits, got.group_size, got.scale_group, got.dtype) == \
        (w.in_features, w.out_features, w.bits, w.group_size, w.scale_group, w.dtype)


# ------------------------------------------------------------------ builders


@pytest.mark.parametrize("bits,group,act_order", [
    (4, 128, False), (4, 32, True), (8, 64, False), (8, 128, True), (4, -1, False), (8, -1, False)])
def test_from_gptq_matches_per_expert_weights(bits, group, act_order):
    gen = torch.Generator().manual_seed(bits * 100 + group + act_order)
    E, K, N = 3, 256, 192
    qw, s, g, _, _ = gptq_experts(E, K, N, bits, group, FP16, gen, act_order, trivial={1})
    ex = sf.QuantizedExperts.from_gptq(qw, s, g, bits=bits, group_size=group)
    assert (ex.num_experts, len(ex), ex.in_features, ex.out_features, ex.bits, ex.group_size, ex.dtype) == \
        (E, E, K, N, bits, group, FP16)
    assert ex.device == torch.device("cpu") and ex.scale_group == (128 if group == -1 else group)
    assert ex.packed.shape == (E, N // 64, K // fmt.block_k(bits), 512) and ex.packed.dtype == torch.int32
    assert ex.scales.shape == (E, K // ex.scale_group, N)
    assert (ex.perm is not None) == act_order
    for e in range(E):
        w = sf.QuantizedWeight.from_gptq(qw[e], s[e], None if g is None else g[e], bits=bits, group_size=group)
        assert_same_weight(ex, e, w)


@pytest.mark.parametrize("group", [32, 128, -1])
def test_from_awq_matches_per_expert_weights(group):
    gen = torch.Generator().manual_seed(group + 3)
    E, K, N = 3, 256, 128
    G = 1 if group == -1 else K // group
    q = [codes(K, N, 4, gen) for _ in range(E)]
    z = [codes(G, N, 4, gen) for _ in range(E)]
    qweight = torch.stack([awq_pack(t) for t in q])
    qzeros = torch.stack([awq_pack(t) for t in z])
    s = torch.stack([scales_for(K, N, group, BF16, gen) for _ in range(E)])
    ex = sf.QuantizedExperts.from_awq(qweight, qzeros, s, group_size=group)
    assert ex.zeros is not None and ex.zeros.shape == ex.scales.shape and ex.perm is None
    for e in range(E):
        assert_same_weight(ex, e, sf.QuantizedWeight.from_awq(qweight[e], qzeros[e], s[e], group_size=group))


@pytest.mark.parametrize("bits,group,asym,act_order", [
    (4, 128, False, False), (8, 64, False, True), (4, 32, True, False), (4, 128, True, True), (8, -1, False, False)])
def test_from_compressed_tensors_matches_per_expert_weights(bits, group, asym, act_order):
    gen = torch.Generator().manual_seed(bits * 7 + group + 2 * asym + act_order)
    E, K, N = 3, 256, 128
    G = 1 if group == -1 else K // group
    half = 1 << (bits - 1)
    packed = torch.stack([ct_pack(codes(K, N, bits, gen).t().contiguous() - half, bits, dim=1) for _ in range(E)])
    scale = torch.stack([scales_for(K, N, group, BF16, gen).t().contiguous() for _ in range(E)])  # [E, N, G]
    zp_signed = [codes(N, G, bits, gen) - half for _ in range(E)] if asym else None
    zp = None if zp_signed is None else torch.stack([ct_pack(t, bits, dim=0) for t in zp_signed])  # [E, N/8, G]
    g_idx = None
    if act_order:
        g_idx = torch.stack([(torch.arange(K) // group)[torch.randperm(K, generator=gen)] for _ in range(E)])
    ex = sf.QuantizedExperts.from_compressed_tensors(packed, scale, weight_shape=(N, K), num_bits=bits,
                                                     group_size=group, weight_zero_point=zp, weight_g_idx=g_idx)
    for e in range(E):
        w = sf.QuantizedWeight.from_compressed_tensors(
            packed[e], scale[e], weight_shape=(N, K), num_bits=bits, group_size=group,
            weight_zero_point=None if zp is None else zp[e], weight_g_idx=None if g_idx is None else g_idx[e])
        assert_same_weight(ex, e, w)
    if asym:  # unpacked signed zero points [E, N, G] give the same experts
        again = sf.QuantizedExperts.from_compressed_tensors(
            packed, scale, weight_shape=(N, K), num_bits=bits, group_size=group,
            weight_zero_point=torch.stack(zp_signed).to(torch.int8), weight_g_idx=g_idx)
        assert torch.equal(again.zeros, ex.zeros) and torch.equal(again.packed, ex.packed)


def test_stack_matches_the_builder_and_mixes_act_order():
    gen = torch.Generator().manual_seed(21)
    E, K, N = 4, 128, 128
    qw, s, g, _, _ = gptq_experts(E, K, N, 4, 32, BF16, gen, act_order=True, trivial={0, 2})
    singles = [sf.QuantizedWeight.from_gptq(qw[e], s[e], g[e], bits=4, group_size=32) for e in range(E)]
    assert [w.perm is None for w in singles] == [True, False, True, False]
    built = sf.QuantizedExperts.from_gptq(qw, s, g, bits=4, group_size=32)
    stacked = sf.QuantizedExperts.stack(singles)
    assert stacked._packed is None  # CPU weights not packed yet: packed once, for the whole stack
    for e in range(E):
        assert_same_weight(stacked, e, singles[e])
    assert torch.equal(stacked.packed, built.packed) and torch.equal(stacked.perm, built.perm)
    singles[1].packed  # noqa: B018 - one weight already packed: stack copies the packed tensors
    assert torch.equal(sf.QuantizedExperts.stack(singles).packed, built.packed)
    plain = sf.QuantizedExperts.stack([sf.QuantizedWeight.from_gptq(qw[0], s[0], bits=4, group_size=32)] * 2)
    assert plain.perm is None and plain.num_experts == 2


def test_prepack_in_chunks_gives_the_same_tensor(monkeypatch):
    gen = torch.Generator().manual_seed(4)
    E, K, N = 5, 128, 128
    qw, s, g, _, _ = gptq_experts(E, K, N, 8, 64, FP16, gen, act_order=True)
    whole = sf.QuantizedExperts.from_gptq(qw, s, g, bits=8, group_size=64).packed
    for per_chunk in (1, 2):
        monkeypatch.setattr(moe, "PREPACK_CHUNK_VALUES", per_chunk * K * N)
        assert torch.equal(sf.QuantizedExperts.from_gptq(qw, s, g, bits=8, group_size=64).packed, whole)


def test_dequantize_round_trip_and_indexing():
    gen = torch.Generator().manual_seed(8)
    E, K, N = 3, 128, 64
    qw, s, g, q, row_group = gptq_experts(E, K, N, 4, 64, BF16, gen, act_order=True)
    ex = sf.QuantizedExperts.from_gptq(qw, s, g, bits=4, group_size=64)
    d = ex.dequantize()
    assert d.shape == (E, N, K) and d.dtype == BF16
    for e in range(E):
        assert torch.equal(d[e].double(), truth(q[e], s[e], row_group[e], 4, BF16))
        assert torch.equal(ex[e].dequantize(), d[e])
    assert torch.equal(ex[-1].dequantize(), d[E - 1])
    assert len(list(ex)) == E  # iteration stops at IndexError
    with pytest.raises(IndexError, match="expert index 3 is out of range for 3 experts"):
        ex[3]
    with pytest.raises(IndexError, match="expert index -4 is out of range"):
        ex[-4]
    with pytest.raises(TypeError, match="expert index must be an integer, got float"):
        ex[1.0]
    assert ex.to("cpu") is ex and "num_experts=3" in repr(ex) and "act_order" in repr(ex)
    assert ex.kernel_args()[4:] == (4, 64, False)


# ------------------------------------------------------------------ builder errors


def _small_gptq(E=2, K=128, N=64, group=64):
    gen = torch.Generator().manual_seed(0)
    qw, s, _, _, _ = gptq_experts(E, K, N, 4, group, FP16, gen)
    return qw, s


@pytest.mark.parametrize("call, exc, match", [
    (lambda qw, s: sf.QuantizedExperts.from_gptq(qw[0], s, group_size=64), ValueError,
     r"from_gptq: qweight must be 3-D \[E, K \* bits / 32, N\] .* got shape \(16, 64\)"),
    (lambda qw, s: sf.QuantizedExperts.from_gptq(qw, s[:1], group_size=64), ValueError,
     "the expert dimension disagrees: qweight has E = 2, scales has E = 1"),
    (lambda qw, s: sf.QuantizedExperts.from_gptq(qw, s, torch.zeros(3, 128, dtype=torch.int32), group_size=64),
     ValueError, "qweight has E = 2, scales has E = 2, g_idx has E = 3"),
    (lambda qw, s: sf.QuantizedExperts.from_gptq(qw, s, torch.zeros(128, dtype=torch.int32), group_size=64),
     ValueError, r"g_idx must be 2-D \[E, K\]"),
    (lambda qw, s: sf.QuantizedExperts.from_gptq(qw[:0], s[:0], group_size=64), ValueError,
     "need at least one expert, got E = 0"),
    (lambda qw, s: sf.QuantizedExperts.from_gptq(qw.tolist(), s, group_size=64), TypeError,
     "qweight must be a torch.Tensor, got list"),
    (lambda qw, s: sf.QuantizedExperts.from_gptq(qw.long(), s, group_size=64), TypeError,
     "from_gptq: expert 0: qweight must be int32"),
    (lambda qw, s: sf.QuantizedExperts.from_gptq(qw, s, group_size=16), ValueError,
     "expert 0: group_size must be one of .* got 16"),
    (lambda qw, s: sf.QuantizedExperts.from_gptq(qw, s, group_size=32), ValueError,
     r"expert 0: scales must be \(4, 64\) for K = 128, N = 64, group_size = 32, got \(2, 64\)"),
    (lambda qw, s: sf.QuantizedExperts.from_gptq(qw, s, group_size=64, dtype=torch.float32), TypeError,
     "dtype must be torch.float16 or torch.bfloat16"),
    (lambda qw, s: sf.QuantizedExperts.from_gptq(qw[:, :, :32], s[:, :, :32], group_size=64), ValueError,
     "expert 0: out_features N must be a positive multiple of 64, got N = 32"),
    (lambda qw, s: sf.QuantizedExperts.from_awq(torch.zeros(2, 128, 8, dtype=torch.int32),
                                                torch.zeros(2, 3, 8, dtype=torch.int32), s, group_size=64),
     ValueError, r"from_awq: expert 0: AWQ qzeros must be \(2, 8\)"),
    (lambda qw, s: sf.QuantizedExperts.from_awq(torch.zeros(2, 128, 8, dtype=torch.int32),
                                                torch.zeros(1, 2, 8, dtype=torch.int32), s, group_size=64),
     ValueError, "qweight has E = 2, qzeros has E = 1, scales has E = 2"),
    (lambda qw, s: sf.QuantizedExperts.from_compressed_tensors(
        torch.zeros(2, 64, 8, dtype=torch.int32), torch.ones(2, 64, 1, dtype=FP16), weight_shape=(64, 128)),
     ValueError, r"from_compressed_tensors: expert 0: weight_packed for weight_shape \(N=64, K=128\)"),
    (lambda qw, s: sf.QuantizedExperts.from_compressed_tensors(
        torch.zeros(2, 64, 16, dtype=torch.int32), torch.ones(2, 64), weight_shape=(64, 128)),
     ValueError, r"weight_scale must be 3-D \[E, N, K / group\]"),
])
def test_builder_errors_name_the_value(call, exc, match):
    qw, s = _small_gptq()
    with pytest.raises(exc, match=match):
        call(qw, s)


def test_invalid_g_idx_names_the_expert():
    qw, s = _small_gptq()
    g = (torch.arange(128) // 64).repeat(2, 1).to(torch.int32)
    g[1, 0] = 1
    with pytest.raises(ValueError, match="expert 1: g_idx is not a valid grouping: group 0 has 63 rows"):
        sf.QuantizedExperts.from_gptq(qw, s, g, group_size=64)
    g[1, 0] = 2
    with pytest.raises(ValueError, match=r"expert 1: g_idx values must lie in \[0, 2\), got \[0, 2\]"):
        sf.QuantizedExperts.from_gptq(qw, s, g, group_size=64)
    with pytest.raises(TypeError, match="expert 0: g_idx must be an integer tensor"):
        sf.QuantizedExperts.from_gptq(qw, s, g.float(), group_size=64)


def test_stack_errors():
    qw, s = _small_gptq()
    w = sf.QuantizedWeight.from_gptq(qw[0], s[0], group_size=64)
    with pytest.raises(ValueError, match="needs at least one QuantizedWeight, got an empty list"):
        sf.QuantizedExperts.stack([])
    with pytest.raises(TypeError, match="needs a list of QuantizedWeight, got QuantizedWeight"):
        sf.QuantizedExperts.stack(w)
    with pytest.raises(TypeError, match=r"weights\[1\] must be a QuantizedWeight, got Tensor"):
        sf.QuantizedExperts.stack([w, qw[1]])
    other = sf.QuantizedWeight.from_gptq(torch.cat([qw[1], qw[1]]), torch.cat([s[1], s[1]]), group_size=64)
    with pytest.raises(ValueError, match=r"weights\[1\].in_features is 256 but weights\[0\].in_features is 128"):
        sf.QuantizedExperts.stack([w, other])
    with pytest.raises(ValueError, match=r"weights\[1\].dtype is torch.bfloat16 but weights\[0\].dtype is torch.fl"):
        sf.QuantizedExperts.stack([w, sf.QuantizedWeight.from_gptq(qw[1], s[1], group_size=64, dtype=BF16)])
    with pytest.raises(ValueError, match=r"weights\[1\].bits is 8"):
        sf.QuantizedExperts.stack([w, sf.QuantizedWeight.from_gptq(torch.cat([qw[1], qw[1]]), s[1], bits=8,
                                                                   group_size=64)])
    awq = sf.QuantizedWeight.from_awq(torch.zeros(128, 8, dtype=torch.int32), torch.zeros(2, 8, dtype=torch.int32),
                                      s[1], group_size=64)
    with pytest.raises(ValueError, match=r"weights\[1\] has zero points but weights\[0\] has none"):
        sf.QuantizedExperts.stack([w, awq])


# ------------------------------------------------------------------ the reference against fp64


@pytest.mark.parametrize("dtype", [BF16, FP16])
@pytest.mark.parametrize("activation", ["silu", "gelu"])
@pytest.mark.parametrize("E,k,act_order", [(4, 2, False), (8, 3, True), (3, 1, False)])
def test_reference_moe_matches_fp64(dtype, activation, E, k, act_order):
    gen = torch.Generator().manual_seed(E * 10 + k)
    w13, w2, W13, W2 = layer(E=E, dtype=dtype, seed=E + k, act_order=act_order)
    T = 13
    x = torch.randn(T, 128, generator=gen).to(dtype)
    ids, wts = routing(T, E, k, gen)
    exact = oracle(x, W13, W2, ids, wts, activation)
    y32 = moe.reference_moe(x, w13, w2, wts, ids, activation=activation, dtype=torch.float32)
    rms = float(exact.pow(2).mean().sqrt())
    assert y32.dtype == torch.float32 and float((y32.double() - exact).abs().max()) <= 1e-5 * rms
    y = sf.fused_moe(x, w13, w2, wts, ids, activation=activation)
    assert y.shape == (T, 128) and y.dtype == dtype
    assert torch.equal(y, moe.reference_moe(x, w13, w2, wts, ids, activation=activation))
    assert torch.equal(y, y32.to(dtype))  # rounded once
    u = 2.0 ** -8 if dtype == BF16 else 2.0 ** -11
    assert bool(((y.double() - exact).abs() <= u * exact.abs() + 1e-5 * rms).all())


@pytest.mark.parametrize("activation", ["silu", "gelu"])
def test_one_hot_through_one_expert_reproduces_the_up_weight(activation):
    """x = e_j, gate column j = 64 (act(64) == 64 exactly in fp32), w2 = identity, router weight 1/64:
    the output is column j of expert 2's up half, the dequantized weight exactly."""
    gen = torch.Generator().manual_seed(1)
    E, H, I, dtype = 3, 128, 128, BF16  # noqa: E741
    q13 = torch.stack([codes(H, 2 * I, 4, gen) for _ in range(E)])
    s13 = torch.stack([scales_for(H, 2 * I, 128, dtype, gen) for _ in range(E)])
    q13[2, :, :I] = 12
    s13[2, :, :I] = 16.0  # gate = (12 - 8) * 16 = 64
    q2 = torch.full((E, I, H), 8)
    q2[:, torch.arange(I), torch.arange(H)] = 9  # (9 - 8) * 1 on the diagonal
    s2 = torch.ones(E, 1, H, dtype=dtype)
    w13 = sf.QuantizedExperts.from_gptq(torch.stack([gptq_pack(t, 4) for t in q13]), s13, group_size=128)
    w2 = sf.QuantizedExperts.from_gptq(torch.stack([gptq_pack(t, 4) for t in q2]), s2, group_size=128)
    assert torch.equal(w2.dequantize()[2], torch.eye(H, dtype=dtype))
    up = w13.dequantize()[2, I:]  # [I, H]
    for j in (0, 5, 127):
        x = torch.zeros(2, H, dtype=dtype)
        x[:, j] = 1
        ids = torch.tensor([[2], [2]], dtype=torch.int32)
        y = sf.fused_moe(x, w13, w2, torch.full((2, 1), 1 / 64), ids, activation=activation)
        assert torch.equal(y[0], up[:, j]) and torch.equal(y[1], up[:, j])


def test_one_hot_through_one_expert_reproduces_the_down_weight():
    """gate = 64 everywhere, up one-hot at row i (value 1/64): the output is column i of w2's expert."""
    gen = torch.Generator().manual_seed(2)
    E, H, I, dtype = 4, 128, 64, FP16  # noqa: E741
    i0 = 37
    q13 = torch.full((E, H, 2 * I), 8)
    s13 = torch.ones(E, 1, 2 * I, dtype=dtype)
    q13[:, :, :I] = 12
    s13[:, :, :I] = 16.0  # gate 64 for any one-hot x
    q13[:, :, I + i0] = 9
    s13[:, :, I + i0] = 1 / 64  # up = 1/64 at row i0, 0 elsewhere
    qw2, s2, _, _, _ = gptq_experts(E, I, H, 4, 64, dtype, gen)
    w13 = sf.QuantizedExperts.from_gptq(torch.stack([gptq_pack(t, 4) for t in q13]), s13, group_size=-1)
    w2 = sf.QuantizedExperts.from_gptq(qw2, s2, group_size=64)
    W2 = w2.dequantize()
    x = torch.zeros(E, H, dtype=dtype)
    x[torch.arange(E), torch.tensor([3, 50, 99, 127])] = 1
    ids = torch.arange(E, dtype=torch.int64).view(E, 1)
    y = sf.fused_moe(x, w13, w2, torch.ones(E, 1), ids)
    for e in range(E):
        assert torch.equal(y[e], W2[e, :, i0])
    # the gate is the first half: putting the 64s in the second half gives something else
    swapped_codes = torch.stack([gptq_pack(torch.cat([t[:, I:], t[:, :I]], 1), 4) for t in q13])
    swapped = sf.QuantizedExperts.from_gptq(swapped_codes, torch.cat([s13[:, :, I:], s13[:, :, :I]], 2), group_size=-1)
    assert not torch.equal(sf.fused_moe(x, swapped, w2, torch.ones(E, 1), ids), y)


def test_router_weight_on_input():
    gen = torch.Generator().manual_seed(5)
    w13, w2, W13, W2 = layer(E=4, seed=5)
    x = torch.randn(9, 128, generator=gen).to(BF16)
    ids, wts = routing(9, 4, 1, gen, renormalize=False)
    y = moe.reference_moe(x, w13, w2, wts, ids, apply_router_weight_on_input=True, dtype=torch.float32)
    exact = oracle(x, W13, W2, ids, wts, on_input=True)
    assert float((y.double() - exact).abs().max()) <= 1e-5 * float(exact.pow(2).mean().sqrt())
    after = oracle(x, W13, W2, ids, wts, on_input=False)
    assert float((exact - after).abs().max()) > 1e-3 * float(after.abs().max())  # SiLU is not linear
    assert torch.equal(sf.fused_moe(x, w13, w2, wts, ids, apply_router_weight_on_input=True), y.to(BF16))


def test_expert_parallel_ranks_sum_to_the_unsharded_layer():
    gen = torch.Generator().manual_seed(6)
    E = 8
    w13, w2, W13, W2 = layer(E=E, seed=6)
    x = torch.randn(17, 128, generator=gen).to(BF16)
    ids, wts = routing(17, E, 3, gen)
    full = moe.reference_moe(x, w13, w2, wts, ids, dtype=torch.float32)
    for owner in ([e // 4 for e in range(E)], [e % 2 for e in range(E)]):  # contiguous halves; interleaved
        total = torch.zeros_like(full)
        for rank in (0, 1):
            mine = [e for e in range(E) if owner[e] == rank]
            expert_map = torch.full((E,), -1, dtype=torch.int32)
            expert_map[mine] = torch.arange(len(mine), dtype=torch.int32)
            l13 = sf.QuantizedExperts.stack([w13[e] for e in mine])
            l2 = sf.QuantizedExperts.stack([w2[e] for e in mine])
            part = moe.reference_moe(x, l13, l2, wts, ids, expert_map=expert_map, dtype=torch.float32)
            exact = oracle(x, W13, W2, ids, wts, expert_map=torch.tensor([e if owner[e] == rank else -1
                                                                          for e in range(E)]))
            assert float((part.double() - exact).abs().max()) <= 1e-5 * float(exact.pow(2).mean().sqrt())
            # slots of other ranks' experts contribute nothing: the same as giving them weight 0
            zeroed = torch.where(torch.tensor(owner)[ids.long()] == rank, wts, torch.zeros_like(wts))
            assert torch.equal(part, moe.reference_moe(x, w13, w2, zeroed, ids, dtype=torch.float32))
            total += part
        assert torch.allclose(total, full, rtol=1e-5, atol=1e-5 * float(full.abs().max()))
    nobody = torch.full((E,), -1, dtype=torch.int64)
    out = sf.fused_moe(x, w13, w2, wts, ids, expert_map=nobody)
    assert out.dtype == BF16 and not bool(out.any())


def test_duplicate_ids_and_zero_token_experts():
    gen = torch.Generator().manual_seed(7)
    E = 4
    w13, w2, W13, W2 = layer(E=E, seed=7)
    x = torch.randn(6, 128, generator=gen).to(BF16)
    ids = torch.tensor([[0, 0], [2, 2], [0, 2], [2, 0], [0, 0], [2, 0]], dtype=torch.int32)
    wts = torch.rand(6, 2, generator=gen)
    y = moe.reference_moe(x, w13, w2, wts, ids, dtype=torch.float32)
    exact = oracle(x, W13, W2, ids, wts)
    assert float((y.double() - exact).abs().max()) <= 1e-5 * float(exact.pow(2).mean().sqrt())
    merged = moe.reference_moe(x[:2], w13, w2, wts[:2].sum(1, keepdim=True), ids[:2, :1], dtype=torch.float32)
    assert torch.allclose(y[:2], merged, rtol=1e-5, atol=1e-6)
    # experts 1 and 3 get no token: their weights cannot matter
    o13, o2, _, _ = layer(E=E, seed=70)
    mix13 = sf.QuantizedExperts.stack([w13[0], o13[1], w13[2], o13[3]])
    mix2 = sf.QuantizedExperts.stack([w2[0], o2[1], w2[2], o2[3]])
    assert torch.equal(sf.fused_moe(x, mix13, mix2, wts, ids), sf.fused_moe(x, w13, w2, wts, ids))


def test_routing_dtypes_and_empty_batches():
    gen = torch.Generator().manual_seed(9)
    w13, w2, _, _ = layer(E=4, seed=9)
    x = torch.randn(5, 128, generator=gen).to(BF16)
    ids, wts = routing(5, 4, 2, gen)
    wts16 = wts.to(BF16)
    y = sf.fused_moe(x, w13, w2, wts16.float(), ids)
    assert torch.equal(sf.fused_moe(x, w13, w2, wts16, ids.long()), y)
    empty = sf.fused_moe(x[:0], w13, w2, wts[:0], ids[:0])
    assert empty.shape == (0, 128) and empty.dtype == BF16


def test_peer_adapter_call_form():
    """shared/peers/peer_moe.py's project_moe_setup: from_gptq(qweight [E, K/8, N], scales [E, K/128, N], bits=4,
    group_size=128, dtype=bf16).to(device), then fused_moe(x, w13, w2, topk_weights, topk_ids); its check is a
    relative Frobenius error < 2e-2 against an fp32 MoE of (q - 8) * s."""
    gen = torch.Generator().manual_seed(10)
    E, k, H, I, T = 4, 2, 256, 128, 9  # noqa: E741

    def words(*shape):
        return torch.randint(-2**31, 2**31, shape, generator=gen, dtype=torch.int64).to(torch.int32)

    def scales(*shape, K):
        return ((torch.rand(*shape, generator=gen) * 0.5 + 0.75) / math.sqrt(21.5 * K)).to(BF16)

    qw13, s13 = words(E, H // 8, 2 * I), scales(E, H // 128, 2 * I, K=H)
    qw2, s2 = words(E, I // 8, H), scales(E, I // 128, H, K=I)
    w13 = sf.QuantizedExperts.from_gptq(qw13, s13, bits=4, group_size=128, dtype=torch.bfloat16).to("cpu")
    w2 = sf.QuantizedExperts.from_gptq(qw2, s2, bits=4, group_size=128, dtype=torch.bfloat16).to("cpu")
    topk_ids, topk_weights = routing(T, E, k, gen)
    x = torch.randn(T, H, generator=gen).to(BF16)
    y = sf.fused_moe(x, w13, w2, topk_weights, topk_ids)
    assert y.shape == (T, H) and y.dtype == BF16

    def deq(qw, s):  # [K/8, N] words -> [K, N] fp32, nibble i of word r = row 8r + i
        w = qw.to(torch.int64) & 0xFFFFFFFF
        q = torch.stack([(w >> (4 * i)) & 15 for i in range(8)], dim=1).reshape(-1, qw.shape[1])
        return (q.float() - 8) * s.float().repeat_interleave(128, 0)

    def peer_ref(swap):
        out = torch.zeros(T, H)
        for t in range(T):
            for j in range(k):
                e = int(topk_ids[t, j])
                h = x[t].float() @ deq(qw13[e], s13[e])
                gate, up = (h[I:], h[:I]) if swap else (h[:I], h[I:])
                out[t] += topk_weights[t, j] * ((torch.nn.functional.silu(gate) * up) @ deq(qw2[e], s2[e]))
        return out

    def rel(a, b):
        return float((a.float() - b).norm() / b.norm())

    assert rel(y, peer_ref(False)) < 2e-2 < rel(y, peer_ref(True))


# ------------------------------------------------------------------ fused_moe's validation


def _valid():
    gen = torch.Generator().manual_seed(11)
    w13, w2, _, _ = layer(E=4, seed=11)
    ids, wts = routing(5, 4, 2, gen)
    return dict(x=torch.randn(5, 128, generator=gen).to(BF16), w13=w13, w2=w2, topk_weights=wts, topk_ids=ids)


def _experts(E=4, K=128, N=128, bits=4, dtype=BF16):
    gen = torch.Generator().manual_seed(12)
    qw, s, _, _, _ = gptq_experts(E, K, N, bits, 64, dtype, gen)
    return sf.QuantizedExperts.from_gptq(qw, s, bits=bits, group_size=64)


@pytest.mark.parametrize("change, exc, match", [
    (dict(w13="w"), TypeError, "w13 must be a swordfish_backend.QuantizedExperts, got str"),
    (lambda a: dict(w2=a["w2"][0]), TypeError, "w2 must be a swordfish_backend.QuantizedExperts, got QuantizedWeight"),
    (lambda a: dict(x=a["x"][0]), ValueError, r"x must be 2-D \[T, H\], got shape \(128,\)"),
    (lambda a: dict(x=a["x"].float()), TypeError, "x must be torch.float16 or torch.bfloat16, got torch.float32"),
    (lambda a: dict(x=a["x"].half()), TypeError, "x is torch.float16 but w13 was built for torch.bfloat16"),
    (lambda a: dict(x=a["x"].tolist()), TypeError, "x must be a torch.Tensor, got list"),
    (lambda a: dict(w2=_experts(E=3, K=64)), ValueError, "w13 has E = 4 experts but w2 has E = 3"),
    (lambda a: dict(w2=_experts(K=64, bits=8)), ValueError, "w13 is int4 but w2 is int8"),
    (lambda a: dict(x=torch.zeros(5, 256, dtype=BF16)), ValueError,
     "x has H = 256 features but w13.in_features is 128"),
    (lambda a: dict(w2=_experts(K=128)), ValueError,
     r"w13.out_features must be 2 \* I = 256 \(\[gate \| up\]\) for w2.in_features I = 128, got 128"),
    (lambda a: dict(w2=_experts(K=64, N=192)), ValueError, "w2.out_features must be H = 128 .* got 192"),
    (lambda a: dict(topk_ids=a["topk_ids"].float()), TypeError, "topk_ids must be torch.int32 or torch.int64"),
    (lambda a: dict(topk_weights=a["topk_weights"].half()), TypeError,
     "topk_weights must be torch.float32 or x's dtype torch.bfloat16, got torch.float16"),
    (lambda a: dict(topk_weights=a["topk_weights"][:, :1]), ValueError,
     r"topk_weights \(5, 1\) and topk_ids \(5, 2\) must have the same shape \[T, k\]"),
    (lambda a: dict(topk_weights=a["topk_weights"][:4], topk_ids=a["topk_ids"][:4]), ValueError,
     "topk_ids has 4 rows but x has T = 5 tokens"),
    (lambda a: dict(topk_weights=a["topk_weights"][:, :0], topk_ids=a["topk_ids"][:, :0]), ValueError,
     r"top-k must be at least 1, got topk_ids of shape \(5, 0\)"),
    (lambda a: dict(topk_ids=a["topk_ids"][0]), ValueError, r"topk_ids must be 2-D \[T, k\], got shape \(2,\)"),
    (lambda a: dict(topk_weights=None), TypeError, "topk_weights must be a torch.Tensor, got NoneType"),
    (dict(activation="relu"), ValueError, r"activation must be one of \('silu', 'gelu'\), got 'relu'"),
    (dict(apply_router_weight_on_input=True), ValueError, "apply_router_weight_on_input needs top-k 1, got k = 2"),
    (dict(expert_map=torch.zeros(4)), TypeError, "expert_map must be torch.int32 or torch.int64, got torch.float32"),
    (dict(expert_map=[0, 1]), TypeError, "expert_map must be a torch.Tensor or None, got list"),
    (dict(expert_map=torch.zeros(2, 4, dtype=torch.int32)), ValueError, r"expert_map must be 1-D \[global E\]"),
    (lambda a: dict(topk_ids=a["topk_ids"].to("meta")), ValueError,
     "all tensors must be on one device, got x on cpu, w13 on cpu, w2 on cpu, topk_weights on cpu, topk_ids on meta"),
    (lambda a: dict(topk_ids=torch.full_like(a["topk_ids"], 4)), ValueError,
     r"topk_ids must lie in \[0, 4\) \(the experts of w13\), got \[4, 4\]"),
    (lambda a: dict(topk_ids=a["topk_ids"] - 1), ValueError, r"topk_ids must lie in \[0, 4\)"),
    (lambda a: dict(topk_ids=a["topk_ids"] + 6, expert_map=torch.arange(8, dtype=torch.int32) % 4), ValueError,
     r"topk_ids must lie in \[0, 8\) \(global experts of expert_map\)"),
    (dict(expert_map=torch.tensor([0, 1, 2, -2], dtype=torch.int32)), ValueError,
     r"expert_map values must be -1 or a local expert in \[0, 4\), got \[-2, 2\]"),
    (dict(expert_map=torch.tensor([0, 1, 2, 4], dtype=torch.int32)), ValueError, r"got \[0, 4\]"),
    (dict(path="fast"), ValueError, r"path must be one of \['auto', 'fused'.*\], got 'fast'"),
    (dict(path="fused"), ValueError, "path='fused' names a CUDA kernel path; CPU tensors run the reference"),
    (dict(deterministic="yes"), TypeError, "deterministic must be None, True or False, got 'yes'"),
])
def test_fused_moe_errors_name_the_value(change, exc, match):
    args = _valid()
    kwargs = change(args) if callable(change) else dict(change)
    layer_keys = ("x", "w13", "w2", "topk_weights", "topk_ids")
    args.update({key: value for key, value in kwargs.items() if key in layer_keys})
    extra = {key: value for key, value in kwargs.items() if key not in layer_keys}
    with pytest.raises(exc, match=match) as info:
        sf.fused_moe(args["x"], args["w13"], args["w2"], args["topk_weights"], args["topk_ids"], **extra)
    assert str(info.value).startswith("swordfish.fused_moe: ")
    if "path" not in extra and "deterministic" not in extra:  # the reference validates the same way
        with pytest.raises(exc, match=match) as info:
            moe.reference_moe(args["x"], args["w13"], args["w2"], args["topk_weights"], args["topk_ids"], **extra)
        assert str(info.value).startswith("swordfish.reference_moe: ")


# ------------------------------------------------------------------ the tolerance


def test_output_error_scale():
    gen = torch.Generator().manual_seed(13)
    ref = torch.randn(64, 256, generator=gen, dtype=torch.float64)
    u = 2.0 ** -8
    assert moe.output_error(ref.to(BF16), ref, H=256, I=128, top_k=2) <= 0.5  # one rounding
    assert moe.output_error((ref * (1 + 6 * u)).to(BF16), ref, H=256, I=128, top_k=2) > 1  # 6u off everywhere
    bad = ref.clone()
    bad[3, 7] += 40 * u * float(ref.pow(2).mean().sqrt())
    assert moe.output_error(bad.to(BF16), ref, H=256, I=128, top_k=2) > 1  # one element far off
    nan = ref.to(BF16)
    nan[0, 0] = float("nan")
    assert moe.output_error(nan, ref, H=256, I=128, top_k=2) == math.inf
    assert moe.output_error(torch.zeros(3, 4, dtype=FP16), torch.zeros(3, 4), H=4, I=4, top_k=1) == 0.0


# ------------------------------------------------------------------ ops surface


def test_moe_wrappers_follow_schema_order():
    for name, schema in MOE_SCHEMAS.items():
        args = schema.split("(", 1)[1].split(")", 1)[0]
        schema_names = [a.split()[-1] for a in args.split(",") if a.strip()]
        assert list(__import__("inspect").signature(getattr(ops, name)).parameters) == schema_names, name


def test_moe_paths_and_codes():
    paths = ops.moe_paths()
    assert paths["auto"] == ops.MOE_PATH_AUTO == 0
    names = [n for n in paths if n != "auto"]
    assert [paths[n] for n in names] == list(range(1, len(names) + 1))
    assert ops.moe_path_name(0) == "none" and ops.moe_path_name(1) == names[0] and ops.moe_path_name(99) == "?99"
    assert ops.MOE_ACTIVATIONS == {"silu": 0, "gelu": 1} and set(ops.MOE_ACTIVATIONS) == set(moe.ACTIVATIONS)
    assert bench_moe.impls() == ("auto", *names, "torch", "roofline")


@pytest.mark.skipif(ops.has_moe(), reason="the MoE ops are built")
def test_moe_wrappers_say_what_is_missing():
    assert ops.moe_error()
    for call in (lambda: ops.moe_align(torch.zeros(1, 1, dtype=torch.int32), 4, 16),
                 lambda: ops.fused_moe(*([None] * 12), 4, 128, False, 128, False),
                 lambda: ops.moe_select_path(1, 2, 8, 256, 128, 4, 128, 1, 0),
                 lambda: ops.last_moe_path(0), ops.moe_path_names):
        with pytest.raises(RuntimeError, match="needs the compiled extension with the MoE ops"):
            call()
    assert ops.moe_paths() == {"auto": 0, **{n: i + 1 for i, n in enumerate(ops.MOE_PATH_NAMES_FALLBACK)}}


@needs_moe
def test_moe_schemas_and_path_names_match_the_extension():
    for name, schema in MOE_SCHEMAS.items():
        assert str(getattr(torch.ops.swordfish, name).default._schema) == schema
    names = ops.moe_path_names()  # the paths this build runs: the fallback list or a prefix (same codes)
    assert names and names == ops.MOE_PATH_NAMES_FALLBACK[:len(names)]
    assert ops.moe_paths() == {"auto": 0, **{n: i + 1 for i, n in enumerate(names)}}
    assert ops.has_extension()


@needs_moe
@pytest.mark.parametrize("dtype", [FP16, BF16])
def test_fake_moe_ops_under_fake_tensor_mode(dtype):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        ids = torch.empty((7, 2), dtype=torch.int32)
        sorted_ids, expert_ids, npad = ops.moe_align(ids, 8, 16, None)
        assert sorted_ids.shape == (14 + 8 * 15,) and expert_ids.shape == (math.ceil(134 / 16),)
        assert npad.shape == (1,) and sorted_ids.dtype == expert_ids.dtype == npad.dtype == torch.int32
        y = ops.fused_moe(*_op_arg_tensors(7, 2, dtype))
        assert y.shape == (7, 256) and y.dtype == dtype


def _op_arg_tensors(T, k, dtype, E=8, H=256, I=128, device=None):  # noqa: E741
    """fused_moe op arguments of the right shapes (contents arbitrary), int4 group 128, on `device`."""
    kw = dict(device=device)
    return (torch.empty((T, H), dtype=dtype, **kw),
            torch.empty((E, 2 * I // 64, H // 64, 512), dtype=torch.int32, **kw),
            torch.empty((E, H // 128, 2 * I), dtype=dtype, **kw), None, None,
            torch.empty((E, H // 64, I // 64, 512), dtype=torch.int32, **kw),
            torch.empty((E, I // 128, H), dtype=dtype, **kw), None, None,
            torch.empty((T, k), dtype=torch.float32, **kw), torch.empty((T, k), dtype=torch.int32, **kw), None,
            4, 128, False, 128, False, 0, False, 0, -1)


def test_fake_implementations_give_the_contract_shapes():
    for T, k, E, block_m in ((1, 1, 8, 16), (7, 2, 60, 16), (33, 8, 128, 32), (0, 4, 64, 32)):
        ids = torch.empty((T, k), dtype=torch.int32, device="meta")
        sorted_ids, expert_ids, npad = ops._moe_align_fake(ids, E, block_m, None)
        length = T * k + E * (block_m - 1)
        assert sorted_ids.shape == (length,) and expert_ids.shape == (-(-length // block_m),) and npad.shape == (1,)
        assert {t.dtype for t in (sorted_ids, expert_ids, npad)} == {torch.int32}
    y = ops._fused_moe_fake(*_op_arg_tensors(5, 2, BF16, device="meta"))
    assert y.shape == (5, 256) and y.dtype == BF16 and y.device.type == "meta"


# A library with the contract's schemas and reference CPU kernels, so that the fake implementations registered by
# ops._register_moe_fakes meet torch.library.opcheck and torch.compile without the extension.
TEST_NS = "swordfish_moetest"


def align_reference(topk_ids, num_experts, block_m, expert_map):
    """moe_align's contract on the CPU: slots grouped by local expert (ascending slot within an expert), each run
    padded to block_m with the sentinel T * k; expert_ids -1 past num_post_pad; out-of-range / -1 slots left out."""
    T, k = topk_ids.shape
    slots = T * k
    flat = topk_ids.reshape(-1).long()
    if expert_map is not None:
        inside = (flat >= 0) & (flat < expert_map.numel())
        flat = torch.where(inside, expert_map.long()[flat.clamp(0, expert_map.numel() - 1)], -1)
    length = slots + num_experts * (block_m - 1)
    sorted_ids = torch.full((length,), slots, dtype=torch.int32)
    expert_ids = torch.full((-(-length // block_m),), -1, dtype=torch.int32)
    pos = 0
    for e in range(num_experts):
        idx = torch.nonzero(flat == e).flatten()
        if idx.numel():
            padded = -(-idx.numel() // block_m) * block_m
            sorted_ids[pos:pos + idx.numel()] = idx.to(torch.int32)
            expert_ids[pos // block_m:(pos + padded) // block_m] = e
            pos += padded
    return sorted_ids, expert_ids, torch.tensor([pos], dtype=torch.int32)


def fused_reference_kernel(x, p13, s13, z13, perm13, p2, s2, z2, perm2, topk_weights, topk_ids, expert_map, bits,
                           group13, cw13, group2, cw2, activation, weights_on_input, path, deterministic):
    """The fused_moe op's contract computed by reference_moe from the op's own arguments."""
    w13 = moe.experts_from_op_args(p13, s13, z13, perm13, bits, group13, cw13, x.dtype)
    I = p13.shape[1] * fmt.BLOCK_N // 2  # noqa: E741  (w2's packed K may exceed it: the padded act-order layout)
    w2 = moe.experts_from_op_args(p2, s2, z2, perm2, bits, group2, cw2, x.dtype, in_features=I)
    name = {v: n for n, v in ops.MOE_ACTIVATIONS.items()}[activation]
    return moe.reference_moe(x, w13, w2, topk_weights, topk_ids, activation=name,
                             apply_router_weight_on_input=weights_on_input, expert_map=expert_map)


@pytest.fixture(scope="module")
def test_ops():
    lib = torch.library.Library(TEST_NS, "DEF")
    for name, kernel in (("moe_align", align_reference), ("fused_moe", fused_reference_kernel)):
        lib.define(MOE_SCHEMAS[name].split("::", 1)[1])
        lib.impl(name, kernel, "CPU")
    ops._register_moe_fakes(TEST_NS)
    yield getattr(torch.ops, TEST_NS)
    lib._destroy()


def test_align_reference_semantics():
    ids = torch.tensor([[3, 1], [1, 1], [0, 3], [2, 9]], dtype=torch.int32)
    emap = torch.tensor([-1, 0, 1, 2, -1, -1, -1, -1, -1, -1], dtype=torch.int32)  # global 1, 2, 3 on this rank
    s, e, n = align_reference(ids, 3, 4, emap)
    assert n.item() == 12 and s[:12].tolist() == [1, 2, 3, 8, 6, 8, 8, 8, 0, 5, 8, 8]
    assert e.tolist() == [0, 1, 2] + [-1] * (e.numel() - 3) and s.numel() == 8 + 3 * 3


@pytest.mark.parametrize("T,k,with_map", [(5, 2, False), (9, 1, True)])
def test_fakes_pass_opcheck(test_ops, T, k, with_map):
    gen = torch.Generator().manual_seed(T)
    w13, w2, _, _ = layer(E=4, seed=T)
    x = torch.randn(T, 128, generator=gen).to(BF16)
    ids, wts = routing(T, 4, k, gen)
    emap = torch.tensor([1, -1, 0, 2], dtype=torch.int32) if with_map else None
    torch.library.opcheck(test_ops.moe_align.default, (ids, 4, 16, emap))
    args = moe.op_args(x, w13, w2, wts, ids, expert_map=emap, apply_router_weight_on_input=(k == 1))
    torch.library.opcheck(test_ops.fused_moe.default, args)
    y = test_ops.fused_moe(*args)
    assert torch.equal(y, sf.fused_moe(x, w13, w2, wts, ids, expert_map=emap, apply_router_weight_on_input=(k == 1)))


def test_fake_fused_moe_traces_a_symbolic_token_count(test_ops):
    from torch._dynamo.testing import EagerAndRecordGraphs

    args = _op_arg_tensors(1, 2, BF16, device="meta")

    def f(x, topk_weights, topk_ids):
        y = test_ops.fused_moe(x, *args[1:9], topk_weights, topk_ids, *args[11:])
        sorted_ids, _, _ = test_ops.moe_align(topk_ids, 8, 16, None)
        return y, sorted_ids

    backend = EagerAndRecordGraphs()
    compiled = torch.compile(f, backend=backend, dynamic=True, fullgraph=True)
    for T in (7, 11):  # no weight dimension equals these (duck sizing would tie them)
        y, sorted_ids = compiled(torch.empty((T, 256), dtype=BF16, device="meta"),
                                 torch.empty((T, 2), device="meta"), torch.empty((T, 2), dtype=torch.int32,
                                                                                 device="meta"))
        assert y.shape == (T, 256) and sorted_ids.shape == (2 * T + 8 * 15,)
    assert len(backend.graphs) == 1


# ------------------------------------------------------------------ presets


def test_moe_presets():
    shapes = {n: (p.E, p.top_k, p.H, p.I) for n, p in presets.MOE_PRESETS.items()}
    assert shapes == {"mixtral-8x7b": (8, 2, 4096, 14336), "qwen1.5-moe-a2.7b": (60, 4, 2048, 1408),
                      "qwen3-30b-a3b": (128, 8, 2048, 768), "deepseek-v2-lite": (64, 6, 2048, 1408)}
    assert presets.DEFAULT_TOKENS == (1, 4, 16, 64, 256, 1024, 4096)
    assert presets.moe_presets(None) == list(presets.MOE_PRESETS.values())
    assert [p.name for p in presets.moe_presets("qwen3-30b-a3b, mixtral-8x7b,qwen3-30b-a3b")] == \
        ["qwen3-30b-a3b", "mixtral-8x7b"]
    with pytest.raises(ValueError, match="unknown MoE preset 'llama-3-8b'"):
        presets.moe_presets("llama-3-8b")
    for p in presets.MOE_PRESETS.values():
        for bits in (4, 8):
            for layer_ in p.layers:
                presets.check_layer(layer_, bits, 128)
    assert presets.MOE_PRESETS["qwen3-30b-a3b"].layers[0] == presets.Layer("w13", 2048, 1536)


# ------------------------------------------------------------------ swordfish bench --moe without a GPU


def run_cli(*argv, capsys):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def no_gpu(monkeypatch):
    monkeypatch.setattr(cli, "gpu_status", lambda device_index=None: (False, "no CUDA GPU: test says so"))


def test_bench_moe_parsing():
    args = cli.build_parser().parse_args(["bench", "--moe"])
    assert args.moe and args.tokens is None and args.given == frozenset() and args.func is cli.cmd_bench
    args = cli.build_parser().parse_args(["bench", "--moe", "--model", "qwen3-30b-a3b", "--tokens", "1,64",
                                          "--json", "out.json", "--paths", "auto,torch"])
    assert args.given == {"model", "json"} and (args.model, args.tokens, args.json) == ("qwen3-30b-a3b", "1,64",
                                                                                        "out.json")
    assert presets.parse_m(args.tokens, "--tokens") == [1, 64]


@pytest.mark.parametrize("argv, match", [
    (["--moe", "--model", "llama-3-8b"], "unknown MoE preset 'llama-3-8b'"),
    (["--moe", "--tokens", "0"], "--tokens value 0 must lie in"),
    (["--moe", "--tokens", "a"], "--tokens value 'a' is not an integer"),
    (["--moe", "--paths", "auto,cublas"], "--paths 'auto,cublas': choose from auto, "),
    (["--moe", "--m", "16"], "--m is for the dense bench; --moe takes --tokens"),
    (["--moe", "--shapes", "4096,4096"], "--shapes is for the dense bench"),
    (["--moe", "--zero-points", "--bits", "8"], "int4 only"),
    (["--moe", "--from-json", "x.json"], "drop --moe"),
    (["--moe", "--group", "64", "--bits", "8", "--model", "qwen3-30b-a3b"], None),  # valid: reaches the GPU probe
    (["--tokens", "16"], "--tokens needs --moe"),
])
def test_bench_moe_usage_errors_come_before_the_gpu_probe(argv, match, capsys, monkeypatch):
    no_gpu(monkeypatch)
    code, _, err = run_cli("bench", *argv, capsys=capsys)
    if match is None:
        assert code == cli.EXIT_UNAVAILABLE
    else:
        assert code == cli.EXIT_USAGE and match in err


def test_bench_moe_without_gpu_exits_3(capsys, monkeypatch):
    no_gpu(monkeypatch)
    code, out, err = run_cli("bench", "--moe", capsys=capsys)
    assert code == cli.EXIT_UNAVAILABLE == 3 and "no CUDA GPU" in err and out == ""
    monkeypatch.setattr(cli, "gpu_status", lambda device_index=None: (True, ""))
    monkeypatch.setattr(ops, "has_moe", lambda: False)
    monkeypatch.setattr(ops, "moe_error", lambda: "built before the MoE ops")
    code, _, err = run_cli("bench", "--moe", capsys=capsys)
    assert code == 3 and "the compiled extension has no MoE ops: built before the MoE ops" in err


def test_bench_moe_without_gpu_real_process():
    import os
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-m", "swordfish_backend", "bench", "--moe", "--quiet"], cwd=root,
                          env=dict(os.environ, CUDA_VISIBLE_DEVICES=""), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert "no CUDA GPU" in proc.stderr or "extension" in proc.stderr


def test_bench_moe_list_presets(capsys):
    code, out, _ = run_cli("bench", "--moe", "--list-presets", capsys=capsys)
    assert code == 0 and "qwen1.5-moe-a2.7b" in out and "E=128" in out and "I=14336" in out


TINY = presets.MoEPreset("tiny", "a small MoE layer", E=8, top_k=2, H=128, I=64, renormalize=True)


def test_bench_moe_run_with_a_fake_device(monkeypatch, tmp_path, capsys):
    """bench_moe.run end to end on CPU: the device, ceilings, timer and op faked; the checks, rows, paths, error
    classification, roofline, JSON schema, table and --from-json are real."""
    info = {"index": 0, "name": "Fake", "capability": "9.0", "sm_count": 132, "l2_bytes": 1 << 16,
            "memory_bytes": 1 << 34}
    monkeypatch.setattr(bench, "_setup", lambda index: (torch.device("cpu"), info))
    monkeypatch.setattr(bench, "_free_bytes", lambda device: 1 << 34)
    monkeypatch.setattr(bench, "measure_ceilings", lambda device, dtype: {
        "hbm_read_gbps": 4000.0, "hbm_read_bytes": 1 << 31, "mma_tflops": 700.0, "mma_shape": [8192] * 3})
    captured = []

    def fake_capture(calls, stream, n_calls_for):
        for c in calls:
            c()
        n = n_calls_for(5.0)
        captured.append(n)
        return object(), n

    monkeypatch.setattr(bench, "capture_graph", fake_capture)
    monkeypatch.setattr(bench, "replay_rounds", lambda graphs, rounds: {
        key: [(12.0 + r) * n / 1e3 for r in range(rounds)] for key, n in zip(graphs, captured[-len(graphs):])})
    paths = {"auto": 0, **{n: i + 1 for i, n in enumerate(ops.MOE_PATH_NAMES_FALLBACK)}}  # every path defined
    monkeypatch.setattr(ops, "moe_paths", lambda: paths)
    last = {"path": 0}

    def fake_op(*args):
        x, path, T = args[0], args[19], args[0].shape[0]
        if path == paths["fused"] and T == 16:
            raise ValueError("swordfish.fused_moe: path fused cannot run this problem: a reason the test gives")
        last["path"] = path or (paths["fused"] if T <= 16 else paths["dense"])
        if path == paths["dense"] and T == 1:
            return torch.zeros_like(x)  # a wrong result: recorded as an error, not timed
        return fused_reference_kernel(*args)

    monkeypatch.setattr(ops, "fused_moe", fake_op)
    monkeypatch.setattr(ops, "last_moe_path", lambda device: last["path"])
    cfg = bench_moe.Config(models=[TINY], tokens=[1, 16, 64], group=64, commit="feedbeef", rounds=3)
    progress = bench.Progress(bench_moe.total_steps(cfg), stream=io.StringIO())
    doc = bench_moe.run(cfg, progress)
    bench_moe.validate_result(doc)
    assert progress.done == bench_moe.total_steps(cfg) == 3 * (len(cfg.impls) - 1)  # every impl but the roofline
    by = {(r["T"], r["impl"]): r for r in doc["rows"]}
    assert len(doc["rows"]) == 3 * len(cfg.impls) and doc["config"]["torch_moe"] in ("grouped_mm", "loop")
    assert by[(1, "auto")]["path"] == "fused" and by[(64, "auto")]["path"] == "dense"
    assert by[(64, "fused")]["path"] == "fused" and by[(64, "torch")]["path"] is None
    assert by[(16, "fused")]["status"] == "unavailable" and "a reason the test gives" in by[(16, "fused")]["note"]
    assert by[(1, "dense")]["status"] == "error" and "wrong result" in by[(1, "dense")]["note"]
    assert by[(1, "dense")]["err"] > 1 and 0 <= by[(1, "auto")]["err"] <= 1 and by[(1, "torch")]["err"] <= 1
    assert by[(64, "auto")]["us"] == pytest.approx(13.0) and by[(64, "auto")]["replays"] == 3
    assert by[(64, "auto")]["vs_torch"] == pytest.approx(1.0)
    roof = by[(64, "roofline")]
    assert roof["us"] == pytest.approx(max(roof["hbm_floor_us"], roof["compute_floor_us"]))
    assert by[(64, "auto")]["pct_roofline"] == pytest.approx(100 * roof["us"] / 13.0)
    assert 2 <= by[(1, "auto")]["touched_experts"] <= 2 and by[(64, "auto")]["touched_experts"] <= 8
    per_expert = bench_moe.expert_bytes(128, 64, 4, 64, False, False)
    assert by[(1, "roofline")]["touched_bytes"] == 2 * per_expert
    assert by[(1, "roofline")]["hbm_floor_us"] == pytest.approx((2 * per_expert + 2 * 128 * 2) / 4e6)
    assert by[(1, "auto")]["copies"] >= 2  # rotating routing sets
    text = bench_moe.format_table(doc)
    assert "tiny  (E=8, top-2, H=128, I=64)" in text and "n/a[" in text and "ERR[" in text
    path = tmp_path / "moe.json"
    bench_moe.write_json(doc, path)
    assert bench_moe.load_json(path)["rows"] == doc["rows"]
    code, out, _ = run_cli("bench", "--from-json", str(path), "--png", "", capsys=capsys)
    assert code == 0 and "swordfish bench --moe" in out
    why = bench_moe.plot(doc, tmp_path / "moe.png")
    assert why is None or "matplotlib" in why
    bad = dict(doc, rows=[dict(doc["rows"][0], impl="cublas")])
    with pytest.raises(ValueError, match=r"rows\[0\].impl must be one of config.impls"):
        bench_moe.validate_result(bad)


def test_torch_moe_baselines_agree_with_the_reference():
    gen = torch.Generator().manual_seed(14)
    w13, w2, _, _ = layer(E=4, seed=14)
    x = torch.randn(10, 128, generator=gen).to(BF16)
    ids, wts = routing(10, 4, 2, gen)
    ref = moe.reference_moe(x, w13, w2, wts, ids, dtype=torch.float32)
    counts = torch.bincount(ids.reshape(-1).long(), minlength=4).tolist()
    loop = bench_moe.torch_moe(x, w13.dequantize(), w2.dequantize(), wts, ids, False, counts)
    assert moe.output_error(loop, ref, H=128, I=64, top_k=2) <= 1
    if bench_moe._grouped_mm_works(torch.device("cpu"), BF16):
        grouped = bench_moe.torch_moe(x, w13.dequantize(), w2.dequantize(), wts, ids, True)
        assert moe.output_error(grouped, ref, H=128, I=64, top_k=2) <= 1


def test_info_moe_lines():
    base = {"devices": [], "moe": {"ops": False, "error": "not built", "probe": None}}
    assert "sf.fused_moe runs the CPU reference" in cli.format_moe_info(base)[0]
    base["devices"] = [{"index": 0}]
    assert "no GPU paths (not built)" in cli.format_moe_info(base)[0]
    base.update(device_index=0, moe={"ops": True, "error": None, "probe": {
        "paths": {"int4 g128": {"fused": "available", "dense": "unavailable: why"}},
        "dispatch": [{"model": "qwen3-30b-a3b", "segments": [{"first_m": 1, "last_m": 63, "path": "fused"},
                                                             {"first_m": 64, "last_m": None, "path": "dense"}]}]}})
    text = "\n".join(cli.format_moe_info(base))
    assert "fused available   dense unavailable: why" in text and "qwen3-30b-a3b      fused 1-63 | dense 64+" in text


def test_package_exports():
    assert {"QuantizedExperts", "fused_moe"} <= set(sf.__all__)
    assert sf.fused_moe is moe.fused_moe and sf.QuantizedExperts is moe.QuantizedExperts


def test_docs_state_the_op_schemas():
    """docs/MOE.md lists every MoE op with the schema the tests hold the extension to."""
    import pathlib

    text = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "MOE.md").read_text()
    for schema in MOE_SCHEMAS.values():
        assert schema in text, schema
    assert "docs/MOE.md" in (pathlib.Path(__file__).resolve().parents[1] / "docs" / "FORMAT.md").read_text()


def test_schemas_match_the_registration_source():
    """The op definitions in kernels/torch/ops_moe.cpp (when this tree has it) are MOE_SCHEMAS, without building."""
    import pathlib
    import re

    source = pathlib.Path(__file__).resolve().parents[1] / "kernels" / "torch" / "ops_moe.cpp"
    if not source.is_file():
        pytest.skip("kernels/torch/ops_moe.cpp is not in this tree (branch moe-cuda)")
    defs = {}
    for literals in re.findall(r'm\.def\(\s*((?:"[^"]*"\s*)+)\)', source.read_text()):
        schema = "".join(re.findall(r'"([^"]*)"', literals))
        defs[schema.split("(", 1)[0]] = "swordfish::" + schema
    assert defs == MOE_SCHEMAS
