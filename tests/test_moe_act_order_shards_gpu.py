"""GPU tests of act-order MoE experts whose w2 is a row-parallel tensor-parallel shard (issues #36 / #34).

Each rank's w2 holds I / TP input rows of every expert in the padded act-order layout (K2 = padded_k > I
packed rows, perm -1 on pad rows, group-32 scales); the op reads it with K = K2 (the fused path's act kernel
writes a K2-wide activation through perm, the dense path dequantizes K2 rows into I-wide rows). Every case:
sf.fused_moe on CUDA, auto and each path forced, against reference_moe on the same experts, the output and
the scratch poisoned with NaN first (tests/test_moe_gpu.py's run_case), and the ranks' outputs summed
against the unsharded layer.

    python -m pytest -q tests/test_moe_act_order_shards_gpu.py
    compute-sanitizer --tool memcheck python -m pytest -q tests/test_moe_act_order_shards_gpu.py -m sanitize
"""

from __future__ import annotations

import math

import pytest
import torch

import swordfish_backend as sf
from swordfish_backend import format as fmt
from swordfish_backend import moe, ops
from test_act_order_shards import gptq_g_idx
from test_moe_gpu import DEV, activations, kernel_paths, routing, run_case

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or not ops.has_moe(),
    reason=f"needs a CUDA device and the extension's MoE ops ({ops.moe_error()})")]

BF16, FP16 = torch.bfloat16, torch.float16


def layer(E, H, I, bits, group, dtype, seed):  # noqa: E741
    """CPU checkpoint tensors of one layer: w13 plain GPTQ, w2 GPTQ act-order with a Hessian-order g_idx."""
    gen = torch.Generator().manual_seed(seed)
    spread = ((1 << (2 * bits)) - 1) / 12.0 + 0.25
    q13 = torch.randint(0, 1 << bits, (E, H, 2 * I), generator=gen)
    s13 = ((torch.rand(E, H // group, 2 * I, generator=gen) * 0.5 + 0.75) / math.sqrt(spread * H)).to(dtype)
    q2 = torch.randint(0, 1 << bits, (E, I, H), generator=gen)
    s2 = ((torch.rand(E, I // group, H, generator=gen) * 0.5 + 0.75) / math.sqrt(spread * I)).to(dtype)
    g2 = torch.stack([gptq_g_idx(I, group, gen) for _ in range(E)])
    return q13, s13, q2, s2, g2


def shard(tensors, r, tp, bits, group):
    """Rank r's (w13, w2) on the GPU: w13's [gate_r | up_r] columns, w2's rows with the whole scales."""
    q13, s13, q2, s2, g2 = tensors
    I = q2.shape[1]  # noqa: E741
    I_s = I // tp  # noqa: N806
    rows = slice(r * I_s, (r + 1) * I_s)
    cols = torch.cat([torch.arange(r * I_s, (r + 1) * I_s), I + torch.arange(r * I_s, (r + 1) * I_s)])
    pk = lambda q: torch.stack([fmt.pack_k(t, bits) for t in q])  # noqa: E731
    w13 = sf.QuantizedExperts.from_gptq(pk(q13[:, :, cols]), s13[:, :, cols], bits=bits, group_size=group)
    w2 = sf.QuantizedExperts.from_gptq(pk(q2[:, rows]), s2, g2[:, rows], bits=bits, group_size=group)
    assert w2.padded_k is not None and w2.padded_k > I_s
    return w13.to(DEV), w2.to(DEV)


def poison_k2(T, k, K2, dtype):
    """NaN into allocator blocks of the K2-wide activation scratch (wider than the I that run_case poisons)."""
    junk = [torch.full((T * k, K2), float("nan"), dtype=dtype, device=DEV),
            torch.full((T * k, K2), float("nan"), dtype=torch.float32, device=DEV)]
    del junk


def run_all_paths(x, w13, w2, wts, ids, **kw):
    ref = moe.reference_moe(x, w13, w2, wts, ids, dtype=torch.float32,
                            **{a: v for a, v in kw.items() if a != "deterministic"})
    outs = {}
    for path in ["auto"] + kernel_paths():
        poison_k2(x.shape[0], ids.shape[1], w2.padded_k, x.dtype)
        y = run_case(x, w13, w2, wts, ids, path, ref=ref, **kw)
        if y is not None:
            outs[path] = y
    return outs


@pytest.mark.parametrize("bits, group, dtype", [(4, 128, BF16), (4, 64, FP16), (8, 128, BF16), (8, 32, FP16)])
@pytest.mark.parametrize("tp", [2, 4, 8])
@pytest.mark.parametrize("T", [1, 33, 256])
def test_sharded_act_order_w2_on_every_path(tp, bits, group, dtype, T):
    E, H, I, k = 8, 256, 1024, 2  # noqa: E741
    tensors = layer(E, H, I, bits, group, dtype, seed=tp * 10 + bits)
    ids, wts = routing(T, E, k, seed=T + tp)
    x = activations(T, H, dtype, T + tp)
    for r in range(tp):
        w13, w2 = shard(tensors, r, tp, bits, group)
        run_all_paths(x, w13, w2, wts, ids)
        run_case(x, w13, w2, wts, ids, "auto", deterministic=True)


@pytest.mark.parametrize("tp", [2, 4])
def test_ranks_sum_to_the_unsharded_layer(tp):
    """The all-reduce: the ranks' CUDA outputs summed against the unsharded layer's reference."""
    E, H, I, k, T, bits, group = 8, 256, 1024, 2, 64, 4, 128  # noqa: E741
    tensors = layer(E, H, I, bits, group, BF16, seed=tp)
    q13, s13, q2, s2, g2 = tensors
    pk = lambda q: torch.stack([fmt.pack_k(t, bits) for t in q])  # noqa: E731
    whole13 = sf.QuantizedExperts.from_gptq(pk(q13), s13, bits=bits, group_size=group).to(DEV)
    whole2 = sf.QuantizedExperts.from_gptq(pk(q2), s2, g2, bits=bits, group_size=group).to(DEV)
    ids, wts = routing(T, E, k, seed=tp)
    x = activations(T, H, BF16, tp)
    ref = moe.reference_moe(x, whole13, whole2, wts, ids, dtype=torch.float32)
    for path in kernel_paths():
        total = torch.zeros(T, H, dtype=torch.float32, device=DEV)
        try:
            for r in range(tp):
                w13, w2 = shard(tensors, r, tp, bits, group)
                total += sf.fused_moe(x, w13, w2, wts, ids, path=path).float()
        except ValueError as e:
            if "cannot run this problem" in str(e):
                continue
            raise
        # each rank passes its own tolerance (test above); the sum adds tp output roundings: a norm bound
        u = 2.0 ** -8
        assert float((total - ref).norm()) <= 4 * u * tp * float(ref.norm()), path


def test_op_errors_name_the_values():
    E, H, I, bits, group = 4, 128, 512, 4, 128  # noqa: E741
    w13, w2 = shard(layer(E, H, I, bits, group, BF16, seed=1), 0, 4, bits, group)
    x = activations(3, H, BF16, 0)
    ids, wts = routing(3, E, 2, seed=0)
    args = list(moe.op_args(x, w13, w2, wts, ids))
    bad = list(args)
    bad[8] = w2.perm[:, :I // 4].contiguous()  # w2_perm of I columns, not K2
    with pytest.raises(ValueError, match=rf"w2_perm must have shape \({E}, {w2.padded_k}\)"):
        ops.fused_moe(*bad)
    bad = list(args)
    bad[8] = None  # a padded w2 without its perm: K2 must equal I
    with pytest.raises(ValueError, match=rf"I = {I // 4}\).*K = {w2.padded_k}.*only an act-order w2"):
        ops.fused_moe(*bad)


@pytest.mark.sanitize
@pytest.mark.parametrize("path", ["auto"] + kernel_paths())
def test_sanitize_small(path):
    """A small sharded act-order case of each path for compute-sanitizer (memcheck / racecheck)."""
    tensors = layer(8, 256, 512, 4, 128, BF16, seed=3)
    w13, w2 = shard(tensors, 1, 4, 4, 128)
    for T, kind in ((3, "softmax"), (40, "few")):
        ids, wts = routing(T, 8, 2, seed=T, kind=kind)
        poison_k2(T, 2, w2.padded_k, BF16)
        run_case(activations(T, 256, BF16, T), w13, w2, wts, ids, path)
