"""Act-order weights on row-parallel tensor-parallel shards (issue #36), on the CPU reference path.

A shard of a GPTQ desc_act layer holds K_s = K / TP contiguous input rows whose g_idx covers every
group unevenly. QuantizedWeight packs it in the padded act-order layout (docs/FORMAT.md "Act-order
shards"): rows sorted by group, each group's run padded to 32-row chunks, K padded to 128, read as
a group-32 layer with expanded scales and a perm of -1 for pad rows. The contracts: each shard's
dequantized rows are the fp32 reference's bit for bit; the sum of the shards' outputs (a simulated
all-reduce) is the unsharded layer's; pad rows are zeros; bad inputs name the offending value.
"""

from __future__ import annotations

import statistics

import pytest
import torch

import swordfish_backend as sf
from swordfish_backend import format as fmt
from swordfish_backend import reference

# M at the CPU-visible dispatch boundaries of docs/DISPATCH.md's tables (the reference has no paths:
# these only vary the shapes the shards and the all-reduce see).
BOUNDARY_M = (1, 16, 17, 32, 33, 48, 49, 64, 65, 127, 128, 207, 208, 223, 224)


def gptq_g_idx(K: int, group: int, gen: torch.Generator) -> torch.Tensor:
    """GPTQ desc_act's g_idx: quantization order = argsort of the Hessian diagonal (descending), and the
    i-th quantized row joins group i // group: every group's rows scatter over K unevenly."""
    order = torch.argsort(torch.rand(K, generator=gen), descending=True)
    g_idx = torch.empty(K, dtype=torch.int32)
    g_idx[order] = (torch.arange(K) // group).to(torch.int32)
    return g_idx


class Layer:
    """One act-order layer's checkpoint tensors and its exact (K, N) weight in input-feature order."""

    def __init__(self, K=1024, N=128, bits=4, group=128, zp=False, dtype=torch.float16, seed=0):
        gen = torch.Generator().manual_seed(seed)
        self.K, self.N, self.bits, self.group, self.zp, self.dtype = K, N, bits, group, zp, dtype
        self.g_idx = gptq_g_idx(K, group, gen)
        self.q = torch.randint(0, 1 << bits, (K, N), generator=gen)
        G = K // group
        self.s = (torch.rand(G, N, generator=gen) * 0.02 + 0.002).to(dtype)
        self.z = torch.randint(0, 1 << bits, (G, N), generator=gen) if zp else None
        g = self.g_idx.long()
        zero = self.z.float()[g] if zp else float(fmt.bias(bits))
        if zp:  # the folded form the kernels read: (q - B) * s + round((B - z) * s)
            zs = ((fmt.bias(bits) - self.z.float()) * self.s.float()).to(dtype).float()
            w = (self.q.float() - fmt.bias(bits)) * self.s.float()[g] + zs[g]
        else:
            w = (self.q.float() - zero) * self.s.float()[g]
        self.W = w.to(dtype).float()  # (K, N): one rounding to the activation dtype

    def weight(self, rows=slice(None), **kw) -> sf.QuantizedWeight:
        """The QuantizedWeight of input rows `rows` (a shard) with the whole layer's scales / zero points."""
        q, g = self.q[rows], self.g_idx[rows]
        if not self.zp:
            return sf.QuantizedWeight.from_gptq(fmt.pack_k(q, self.bits), self.s, g, bits=self.bits,
                                                group_size=self.group, **kw)
        signed = self.z - (1 << (self.bits - 1))  # compressed-tensors' unpacked signed zero points (N, G)
        packed = fmt.pack_k(q, self.bits).t().contiguous()
        return sf.QuantizedWeight.from_compressed_tensors(
            packed, self.s.t().contiguous(), weight_shape=(self.N, q.shape[0]), num_bits=self.bits,
            group_size=self.group, weight_zero_point=signed.t().contiguous(), weight_g_idx=g, **kw)

    def shards(self, tp: int):
        K_s = self.K // tp
        return [slice(r * K_s, (r + 1) * K_s) for r in range(tp)]


FORMATS = [(4, False), (8, False), (4, True)]  # int4 / int8 symmetric, int4 with AWQ-style zero points
FORMAT_IDS = ["int4", "int8", "int4-zp"]


# ------------------------------------------------------------------ the layout


@pytest.mark.parametrize("tp", [2, 4, 8])
@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("bits, zp", FORMATS, ids=FORMAT_IDS)
def test_shard_dequantize_is_the_reference_rows(bits, zp, group, tp):
    layer = Layer(bits=bits, group=group, zp=zp, dtype=torch.bfloat16 if zp else torch.float16, seed=tp + group)
    for r, rows in enumerate(layer.shards(tp)):
        w = layer.weight(rows)
        K_s = rows.stop - rows.start
        assert w.in_features == K_s and w.padded_k is not None and w.packed_k % fmt.ACT_ORDER_K_ALIGN == 0
        assert w.scale_group == fmt.ACT_ORDER_CHUNK and w.packed.shape[1] * fmt.block_k(bits) == w.packed_k
        assert torch.equal(w.dequantize().float().t(), layer.W[rows]), f"rank {r}"


@pytest.mark.parametrize("tp", [2, 4, 8])
@pytest.mark.parametrize("bits, zp", FORMATS, ids=FORMAT_IDS)
def test_simulated_all_reduce_is_the_unsharded_layer(bits, zp, tp):
    layer = Layer(bits=bits, group=64, zp=zp, seed=7 * tp)
    full = layer.weight()  # TP = 1: today's exact layout, no padding
    assert full.padded_k is None and full.perm is not None and full.perm.numel() == layer.K
    shards = [(rows, layer.weight(rows)) for rows in layer.shards(tp)]
    gen = torch.Generator().manual_seed(tp)
    for M in BOUNDARY_M:
        x = torch.randn(M, layer.K, generator=gen).to(layer.dtype)
        y = reference.matmul(x, full, dtype=torch.float64)
        reduced = sum(reference.matmul(x[:, rows], w, dtype=torch.float64) for rows, w in shards)
        assert torch.allclose(reduced, y, rtol=0, atol=1e-9 * float(y.abs().max())), f"M={M}"
        # sf.matmul rounds each shard's output to the dtype once: the all-reduce sums TP such roundings.
        summed = sum(sf.matmul(x[:, rows], w).double() for rows, w in shards)
        ulp = 2.0 ** -10 if layer.dtype == torch.float16 else 2.0 ** -7
        bound = tp * ulp * float(y.abs().max())
        assert float((summed - y).abs().max()) <= bound, f"M={M}"


@pytest.mark.parametrize("tp", [2, 8])
@pytest.mark.parametrize("bits, zp", FORMATS, ids=FORMAT_IDS)
def test_padded_layout_rows(bits, zp, tp):
    """perm names every input row once and -1 for pad rows; each 32-row chunk is one group's; pad rows hold
    the pad code and dequantize to 0 (exactly, or with zero points within one rounding of the folded zero
    point; the all-pad tail chunks have scale and zero point 0, so exactly)."""
    layer = Layer(bits=bits, group=128, zp=zp, seed=3)
    for rows in layer.shards(tp):
        w = layer.weight(rows)
        K_s, K_pad = rows.stop - rows.start, w.packed_k
        perm = w.perm.long()
        real = perm >= 0
        assert int(real.sum()) == K_s and torch.equal(perm[real].sort().values, torch.arange(K_s))
        g = layer.g_idx[rows].long()
        chunk_of_row = torch.arange(K_pad) // fmt.ACT_ORDER_CHUNK
        groups_in_chunk = torch.full((K_pad,), -1, dtype=torch.int64)
        groups_in_chunk[real] = g[perm[real]]
        for c in range(K_pad // fmt.ACT_ORDER_CHUNK):
            assert groups_in_chunk[chunk_of_row == c].unique().numel() <= 2  # one group (and maybe -1)
        codes = fmt.unpack_reference(w.packed, bits, K_pad, layer.N)
        sorted_w = ((codes.float() - fmt.bias(bits)) * w.scales.float()[chunk_of_row]
                    + (0 if w.zeros is None else w.zeros.float()[chunk_of_row]))
        pad = ~real
        if not zp:
            assert bool((codes[pad] == fmt.bias(bits)).all())
            assert bool((sorted_w[pad] == 0).all())
        else:
            bound = float(w.scales.float().abs().max()) * 16 * 2.0 ** -7  # one bf16 rounding of (B - z) * s
            assert float(sorted_w[pad].abs().max()) <= bound
            tail = chunk_of_row >= (chunk_of_row[real].max() + 1)
            assert bool((sorted_w[tail] == 0).all())
        x = torch.randn(3, K_s).to(layer.dtype)
        xp = torch.zeros(3, K_pad, dtype=torch.float64)
        xp[:, real] = x.double()[:, perm[real]]  # the gather: pad rows read 0
        y = xp @ sorted_w.to(layer.dtype).double()
        assert torch.allclose(y, reference.matmul(x, w, dtype=torch.float64), rtol=1e-12, atol=1e-12)


def test_padded_layout_at_tp1_on_request():
    """pad_act_order=True takes the padded layout for a whole layer: same weight, same products."""
    layer = Layer(K=512, bits=4, group=128, seed=11)
    exact, padded = layer.weight(), layer.weight(pad_act_order=True)
    assert exact.padded_k is None and padded.padded_k == fmt.act_order_padded_layout(layer.g_idx, 4)[0].numel()
    assert torch.equal(exact.dequantize(), padded.dequantize())
    x = torch.randn(5, 512).half()
    assert torch.equal(sf.matmul(x, exact), sf.matmul(x, padded))


def test_layout_survives_to_and_repr():
    layer = Layer(K=256, N=64, group=32, seed=2)
    w = layer.weight(slice(0, 128))
    w2 = w.to("cpu")
    assert w2 is w  # same device: itself
    assert "padded_k=" in repr(w) and f"in_features=128" in repr(w)


# ------------------------------------------------------------------ errors


def test_bad_shard_inputs():
    layer = Layer(K=512, N=64, group=128, seed=5)
    rows = slice(0, 256)
    q, g = fmt.pack_k(layer.q[rows], 4), layer.g_idx[rows]
    with pytest.raises(ValueError, match=r"g_idx must have shape \(256,\)"):
        sf.QuantizedWeight.from_gptq(q, layer.s, g[:100], group_size=128)
    bad = g.clone()
    bad[7] = 4
    with pytest.raises(ValueError, match=r"g_idx values must lie in \[0, 4\), got \[0, 4\]"):
        sf.QuantizedWeight.from_gptq(q, layer.s, bad, group_size=128)
    bad[7] = -1
    with pytest.raises(ValueError, match=r"g_idx values must lie in \[0, 4\), got \[-1, 3\]"):
        sf.QuantizedWeight.from_gptq(q, layer.s, bad, group_size=128)
    crowded = torch.zeros(256, dtype=torch.int32)  # 256 rows in group 0 of size 128
    with pytest.raises(ValueError, match="group 0 has 256 rows, more than group_size 128"):
        sf.QuantizedWeight.from_gptq(q, layer.s, crowded, group_size=128)
    with pytest.raises(TypeError, match="g_idx must be an integer tensor"):
        sf.QuantizedWeight.from_gptq(q, layer.s, g.float(), group_size=128)
    with pytest.raises(ValueError, match="padded act-order layout needs a g_idx"):
        sf.QuantizedWeight.from_gptq(q, layer.s[:2], None, group_size=128, pad_act_order=True)
    w = sf.QuantizedWeight.from_gptq(q, layer.s, g, group_size=128)
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., 256\), got \(2, 512\)"):
        sf.matmul(torch.randn(2, 512).half(), w)  # the shard's width, not the packed K_pad


def test_unsharded_uneven_g_idx_is_still_an_error():
    """A whole layer (scales for exactly K rows) whose g_idx gives a group the wrong row count is a broken
    checkpoint, not a shard: the exact layout's error stands."""
    layer = Layer(K=256, N=64, group=64, seed=1)
    g = layer.g_idx.clone()
    g[g == 1] = 0
    with pytest.raises(ValueError, match="group 0 has 128 rows, every group needs 64"):
        sf.QuantizedWeight.from_gptq(fmt.pack_k(layer.q, 4), layer.s, g, group_size=64)


def test_moe_experts_take_the_padded_layout():
    """QuantizedExperts serve act-order shards too (a row-parallel w2, issue #36; tests/test_moe_act_order_shards.py):
    stack and from_gptq give one padded layout; an exact and a padded weight do not stack."""
    layer = Layer(K=256, N=64, group=64, seed=1)
    w = layer.weight(slice(0, 128))
    stacked = sf.QuantizedExperts.stack([w, w])
    q = fmt.pack_k(layer.q[:128], 4)
    built = sf.QuantizedExperts.from_gptq(q[None].expand(2, -1, -1), layer.s[None].expand(2, -1, -1),
                                          layer.g_idx[None, :128].expand(2, -1), group_size=64)
    assert stacked.padded_k == built.padded_k == w.padded_k
    assert torch.equal(stacked.packed, built.packed) and torch.equal(built[1].dequantize(), w.dequantize())
    whole = sf.QuantizedWeight.from_gptq(fmt.pack_k(layer.q[:128], 4), layer.s[:2], None, group_size=64)
    with pytest.raises(ValueError, match=r"weights\[1\] has the exact layout but weights\[0\] has the padded"):
        sf.QuantizedExperts.stack([w, whole])


# ------------------------------------------------------------------ memory note


def test_padding_overhead_on_llama3_70b_shapes():
    """Issue #36's memory note: K_pad / K_s at TP = 2, 4, 8 for o_proj (K = 8192) and down_proj
    (K = 28672), g128, GPTQ-statistics g_idx, mean over 3 seeds and all ranks. A group holds ~128 / TP
    rows of a shard, padded up to a multiple of 32: ~1.25x, ~1.5x, 2.0x."""
    expected = {2: (1.2, 1.3), 4: (1.43, 1.52), 8: (1.99, 2.01)}
    for K in (8192, 28672):
        for tp, (lo, hi) in expected.items():
            ratio = statistics.mean(fmt.act_order_padding(K, 128, tp, seed) for seed in range(3))
            assert lo <= ratio <= hi, (K, tp, ratio)
