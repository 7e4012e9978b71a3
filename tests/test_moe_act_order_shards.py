"""Act-order MoE experts whose w2 is a row-parallel tensor-parallel shard (issues #36 / #34), on CPU.

Rank r of TP holds w13's columns [gate_r | up_r] (column-parallel: exact layout) and w2's input rows
[r I / TP, (r + 1) I / TP) with the whole layer's scales: every expert's w2 g_idx covers all groups unevenly
(GPTQ's Hessian order), so QuantizedExperts packs each expert in the padded act-order layout
(docs/FORMAT.md "Act-order shards") and pads every expert to the largest K_pad. The contracts: the ranks'
reference_moe outputs summed (the all-reduce) are the unsharded layer's; each expert equals the
QuantizedWeight of that expert's shard alone; pad rows contribute exactly zero; bad shapes name the value.
"""

from __future__ import annotations

import pytest
import torch

import swordfish_backend as sf
from swordfish_backend import format as fmt
from swordfish_backend import moe, reference
from test_act_order_shards import gptq_g_idx

E, H, I, T, TOP_K = 4, 128, 1024, 9, 2  # noqa: E741  (I / 8 = 128 rows per rank at TP 8)


class Layer:
    """One MoE layer's checkpoint tensors: w13 plain GPTQ / compressed-tensors, w2 act-order per expert."""

    def __init__(self, bits=4, group=128, zp=False, dtype=torch.float16, seed=0):
        gen = torch.Generator().manual_seed(seed)
        self.bits, self.group, self.zp, self.dtype = bits, group, zp, dtype
        G = I // group
        self.q13 = torch.randint(0, 1 << bits, (E, H, 2 * I), generator=gen)
        self.s13 = (torch.rand(E, H // group, 2 * I, generator=gen) * 0.02 + 0.002).to(dtype)
        self.q2 = torch.randint(0, 1 << bits, (E, I, H), generator=gen)
        self.s2 = (torch.rand(E, G, H, generator=gen) * 0.02 + 0.002).to(dtype)
        self.z2 = torch.randint(0, 1 << bits, (E, G, H), generator=gen) if zp else None
        self.g2 = torch.stack([gptq_g_idx(I, group, gen) for _ in range(E)])  # argsort of a Hessian diagonal
        self.x = torch.randn(T, H, generator=gen).to(dtype)
        self.wts = torch.rand(T, TOP_K, generator=gen)
        self.ids = torch.stack([torch.randperm(E, generator=gen)[:TOP_K] for _ in range(T)]).to(torch.int32)

    def w13(self, cols=None) -> sf.QuantizedExperts:
        q, s = (self.q13, self.s13) if cols is None else (self.q13[:, :, cols], self.s13[:, :, cols])
        return sf.QuantizedExperts.from_gptq(torch.stack([fmt.pack_k(t, self.bits) for t in q]), s,
                                             bits=self.bits, group_size=self.group)

    def w2(self, rows=slice(None)) -> sf.QuantizedExperts:
        q, g = self.q2[:, rows], self.g2[:, rows]
        if not self.zp:
            return sf.QuantizedExperts.from_gptq(torch.stack([fmt.pack_k(t, self.bits) for t in q]), self.s2, g,
                                                 bits=self.bits, group_size=self.group)
        signed = self.z2 - (1 << (self.bits - 1))  # compressed-tensors' unpacked signed zero points
        return sf.QuantizedExperts.from_compressed_tensors(
            torch.stack([fmt.pack_k(t, self.bits).t().contiguous() for t in q]), self.s2.transpose(1, 2).contiguous(),
            weight_shape=(H, q.shape[1]), num_bits=self.bits, group_size=self.group,
            weight_zero_point=signed.transpose(1, 2).contiguous(), weight_g_idx=g)

    def w2_expert(self, e: int, rows) -> sf.QuantizedWeight:
        """Expert e's w2 shard as a single QuantizedWeight (its own padded layout)."""
        q, g = self.q2[e, rows], self.g2[e, rows]
        if not self.zp:
            return sf.QuantizedWeight.from_gptq(fmt.pack_k(q, self.bits), self.s2[e], g, bits=self.bits,
                                                group_size=self.group)
        signed = self.z2[e] - (1 << (self.bits - 1))
        return sf.QuantizedWeight.from_compressed_tensors(
            fmt.pack_k(q, self.bits).t().contiguous(), self.s2[e].t().contiguous(), weight_shape=(H, q.shape[0]),
            num_bits=self.bits, group_size=self.group, weight_zero_point=signed.t().contiguous(), weight_g_idx=g)

    @staticmethod
    def rank(r: int, tp: int):
        I_s = I // tp  # noqa: N806
        rows = slice(r * I_s, (r + 1) * I_s)
        cols = torch.cat([torch.arange(r * I_s, (r + 1) * I_s), I + torch.arange(r * I_s, (r + 1) * I_s)])
        return rows, cols


FORMATS = [(4, False), (8, False), (4, True)]
FORMAT_IDS = ["gptq-int4", "gptq-int8", "ct-int4-zp"]


@pytest.mark.parametrize("bits, zp", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("tp", [2, 4, 8])
def test_shards_sum_to_the_unsharded_layer(tp, bits, zp):
    layer = Layer(bits=bits, zp=zp, seed=tp)
    ref = moe.reference_moe(layer.x, layer.w13(), layer.w2(), layer.wts, layer.ids, dtype=torch.float64)
    out = torch.zeros_like(ref)
    for r in range(tp):
        rows, cols = layer.rank(r, tp)
        w2 = layer.w2(rows)
        assert w2.in_features == I // tp and w2.padded_k is not None and w2.padded_k % fmt.ACT_ORDER_K_ALIGN == 0
        assert w2.scale_group == fmt.ACT_ORDER_CHUNK and tuple(w2.perm.shape) == (E, w2.padded_k)
        assert tuple(w2.packed.shape) == (E, H // fmt.BLOCK_N, w2.padded_k // fmt.block_k(bits), fmt.BLOCK_WORDS)
        out += moe.reference_moe(layer.x, layer.w13(cols), w2, layer.wts, layer.ids, dtype=torch.float64)
    # reference_moe accumulates in fp32: the shards sum the I terms in another order
    assert float((out - ref).abs().max()) <= (H + I) * 2.0 ** -24 * float(ref.abs().max())


@pytest.mark.parametrize("bits, zp", FORMATS, ids=FORMAT_IDS)
def test_each_expert_is_its_shard_alone_and_pads_to_the_largest(bits, zp):
    """Experts of different K_pad: every expert reads as the QuantizedWeight of its shard alone; the shorter
    ones end in all-pad chunks (perm -1, scale 0, zero 0, pad code)."""
    layer = Layer(bits=bits, zp=zp, group=128, seed=3)
    layer.g2[0] = torch.arange(I, dtype=torch.int32) // 128  # expert 0: contiguous groups, the smallest K_pad
    rows = slice(0, I // 8)
    w2 = layer.w2(rows)
    alone = [layer.w2_expert(e, rows) for e in range(E)]
    assert w2.padded_k == max(w.padded_k for w in alone) > alone[0].padded_k
    for e, w in enumerate(alone):
        assert torch.equal(w2[e].dequantize(), w.dequantize()), e
        k = w.padded_k
        assert torch.equal(w2.perm[e, :k], w.perm) and bool((w2.perm[e, k:] == -1).all())
        assert torch.equal(w2.scales[e, :k // 32], w.scales) and bool((w2.scales[e, k // 32:] == 0).all())
        if zp:
            assert bool((w2.zeros[e, k // 32:] == 0).all())
        tail = fmt.unpack_reference(w2.packed[e], bits, w2.padded_k, H)[k:]
        assert bool((tail == fmt.bias(bits)).all())
    stacked = sf.QuantizedExperts.stack(alone)  # the same layout from single weights
    assert stacked.padded_k == w2.padded_k
    for name in ("packed", "scales", "perm"):
        assert torch.equal(getattr(stacked, name), getattr(w2, name)), name


def test_pad_rows_contribute_zero():
    """A pad row's dequantized weight is exactly 0 (symmetric codes; all-pad chunks: scale 0), so poisoning
    the activation a pad row would meet cannot change the output; reference_moe drops them."""
    layer = Layer(seed=5)
    rows, cols = layer.rank(1, 4)
    w2 = layer.w2(rows)
    for e in range(E):
        ex = w2[e]
        codes = fmt.unpack_reference(ex.packed, ex.bits, ex.packed_k, H).to(torch.float32)
        s = ex.scales.to(torch.float32)[torch.arange(ex.packed_k) // ex.scale_group]
        sorted_w = (codes - fmt.bias(ex.bits)) * s
        pad = ex.perm < 0
        assert int(pad.sum()) == ex.packed_k - I // 4 and bool((sorted_w[pad] == 0).all())
    # The full dequantized expert has exactly I / 4 input columns, in feature order.
    assert tuple(reference.dequantize(w2[0]).shape) == (H, I // 4)


def test_prepack_keeps_pad_entries_at_minus_one():
    """The tall prepack offsets each expert's perm by its first row, except -1 entries (pad rows), which
    stay -1 (code 0) instead of naming the previous expert's last row."""
    gen = torch.Generator().manual_seed(7)
    K, N, bits = 128, 64, 4
    codes = torch.randint(1, 16, (2, K, N), generator=gen)
    perm = torch.stack([torch.arange(K, dtype=torch.int32).flip(0)] * 2)
    perm[1, :32] = -1
    packed = moe.prepack_experts(torch.stack([fmt.pack_k(c, bits) for c in codes]), perm, bits)
    got = fmt.unpack_reference(packed[1], bits, K, N)
    assert bool((got[:32] == 0).all())
    assert torch.equal(got[32:], codes[1][perm[1, 32:].long()])


def test_op_args_round_trip_the_padded_w2():
    """experts_from_op_args with in_features = I (w13's N / 2) rebuilds the padded w2 the op receives."""
    layer = Layer(seed=9)
    rows, cols = layer.rank(0, 2)
    w2 = layer.w2(rows)
    back = moe.experts_from_op_args(*w2.kernel_args(), w2.dtype, in_features=I // 2)
    assert back.padded_k == w2.padded_k and back.in_features == I // 2 and back.scale_group == 32
    assert torch.equal(back.dequantize(), w2.dequantize())


def test_bad_shapes_name_the_value():
    layer = Layer(seed=11)
    rows, _ = layer.rank(0, 2)
    q = torch.stack([fmt.pack_k(t, 4) for t in layer.q2[:, rows]])
    with pytest.raises(ValueError, match=r"expert 0: g_idx must have shape \(512,\)"):
        sf.QuantizedExperts.from_gptq(q, layer.s2, layer.g2[:, :100], bits=4, group_size=128)
    with pytest.raises(ValueError, match=r"g_idx values must lie in \[0, 8\)"):
        sf.QuantizedExperts.from_gptq(q, layer.s2, layer.g2[:, rows] + 1, bits=4, group_size=128)
    alone = [layer.w2_expert(0, rows), sf.QuantizedWeight.from_gptq(
        fmt.pack_k(layer.q2[1, :128], 4), layer.s2[1, :1], None, bits=4, group_size=128)]
    with pytest.raises(ValueError, match="padded act-order layout but weights\\[0\\] has the exact layout|"
                                         "weights\\[1\\] has the exact layout"):
        sf.QuantizedExperts.stack(alone)
