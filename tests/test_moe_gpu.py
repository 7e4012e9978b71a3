"""GPU tests of the MoE layer: sf.fused_moe on CUDA against moe.reference_moe on the same data.

Every case: fresh random codes and scales (O(1) outputs for O(1) inputs) built through the public
QuantizedExperts builders on the GPU; seeded routing; the memory of the output and of the scratch the op
takes from torch's allocator poisoned with NaN before the call (any element the kernels fail to write reads
NaN); the result compared with reference_moe (fp32, unrounded) through moe.output_error, whose tolerance
comes from the dtype's unit roundoff, H, I and top-k (docs/MOE.md, "The layer's math"). Each case runs auto
(which must run the path moe_select_path predicts) and every path forced (last_moe_path must say so); a
forced path that answers "cannot run this problem" is skipped with its reason, any other error fails.

About 1-2 minutes on an H100:
    python -m pytest -q tests/test_moe_gpu.py
Small cases for compute-sanitizer (memcheck / racecheck):
    compute-sanitizer --tool memcheck python -m pytest -q tests/test_moe_gpu.py -m sanitize
"""

from __future__ import annotations

import functools
import math
import os
import warnings

import pytest
import torch

import swordfish_backend as sf
from swordfish_backend import check, moe, ops
from swordfish_backend import format as fmt

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or not ops.has_moe(),
    reason=f"needs a CUDA device and the extension's MoE ops ({ops.moe_error()})")]

DEV = "cuda"
BF16, FP16 = torch.bfloat16, torch.float16
TOKENS = (1, 2, 7, 16, 33, 64, 255, 256, 1024, 4096)
UNAVAILABLE = "cannot run this problem: "


def kernel_paths() -> list[str]:
    return [p for p in ops.moe_paths() if p != "auto"]


# ------------------------------------------------------------------ weights


def _spread(bits: int, zero_points: bool) -> float:
    s = ((1 << (2 * bits)) - 1) / 12.0 + 0.25  # E[(q - bias)^2], uniform codes
    return 2 * s if zero_points else s


def build(kind: str, bits: int, group: int, E: int, K: int, N: int, dtype, seed: int):
    """QuantizedExperts [E, N, K] of format `kind` (gptq | act-order | awq | ct | ct-asym | ct-act) on the GPU."""
    gen = torch.Generator(device=DEV)
    gen.manual_seed(seed)
    G = 1 if group == -1 else K // group
    zp = kind in ("awq", "ct-asym")
    q = torch.randint(0, 1 << bits, (E, K, N), generator=gen, device=DEV)
    s = ((torch.rand(E, G, N, generator=gen, device=DEV) * 0.5 + 0.75) / math.sqrt(_spread(bits, zp) * K)).to(dtype)
    rows = torch.arange(K, device=DEV) // (K if group == -1 else group)
    g_idx = torch.stack([rows[torch.randperm(K, generator=gen, device=DEV)] for _ in range(E)]).to(torch.int32)
    if kind == "gptq":
        return sf.QuantizedExperts.from_gptq(torch.stack([fmt.pack_k(t, bits) for t in q]), s, bits=bits,
                                             group_size=group)
    if kind == "act-order":
        return sf.QuantizedExperts.from_gptq(torch.stack([fmt.pack_k(t, bits) for t in q]), s, g_idx, bits=bits,
                                             group_size=group)
    if kind == "awq":
        z = torch.randint(0, 16, (E, G, N), generator=gen, device=DEV)
        return sf.QuantizedExperts.from_awq(torch.stack([check._awq_pack(t) for t in q]),
                                            torch.stack([check._awq_pack(t) for t in z]), s, group_size=group)
    packed = torch.stack([fmt.pack_k(t, bits).t().contiguous() for t in q])  # [E, N, K*bits/32]
    scale = s.transpose(1, 2).contiguous()                                   # [E, N, G]
    zero = None
    if kind == "ct-asym":
        zero = torch.randint(-8, 8, (E, N, G), generator=gen, device=DEV, dtype=torch.int8)  # unpacked, signed
    return sf.QuantizedExperts.from_compressed_tensors(
        packed, scale, weight_shape=(N, K), num_bits=bits, group_size=group, weight_zero_point=zero,
        weight_g_idx=g_idx if kind == "ct-act" else None)


@functools.lru_cache(maxsize=8)
def experts(kind="gptq", bits=4, group=128, E=8, H=256, I=128, dtype=BF16, seed=0):  # noqa: E741
    return (build(kind, bits, group, E, H, 2 * I, dtype, seed), build(kind, bits, group, E, I, H, dtype, seed + 1))


def routing(T, E, k, seed, kind="softmax"):
    """(topk_ids int32, topk_weights fp32) [T, k] on the GPU. Kinds: softmax (top-k of random logits), uniform
    (round robin: every expert the same load), one (slot 0 of every token on expert 3), few (only experts
    0..k used: the rest get zero tokens), dup (each token's slot 1 repeats slot 0)."""
    gen = torch.Generator(device=DEV)
    gen.manual_seed(seed)
    weights, ids = torch.topk(torch.softmax(torch.randn(T, E, generator=gen, device=DEV), -1), k, -1)
    if kind == "uniform":
        ids = torch.arange(T * k, device=DEV).view(T, k) % E  # k consecutive experts: distinct when k <= E
    elif kind == "one":
        others = torch.stack([torch.randperm(E - 1, generator=gen, device=DEV)[:k - 1] for _ in range(T)]) \
            if k > 1 else ids[:, :0]
        others = others + (others >= 3).long()
        ids = torch.cat([torch.full((T, 1), 3, device=DEV, dtype=torch.long), others], 1)
    elif kind == "few":
        ids = torch.stack([torch.randperm(k + 1, generator=gen, device=DEV)[:k] for _ in range(T)])
    elif kind == "dup" and k > 1:
        ids = ids.clone()
        ids[:, 1] = ids[:, 0]
    return ids.to(torch.int32).contiguous(), weights.float().contiguous()


# ------------------------------------------------------------------ running a case


def poison(T, H, I, k, dtype):  # noqa: E741
    """NaN into the caching allocator's blocks of the output's and the scratch's sizes, then freed."""
    junk = [torch.full((T, H), float("nan"), dtype=dtype, device=DEV)]
    for cols in (2 * I, I, H):
        junk.append(torch.full((T * k, cols), float("nan"), dtype=dtype, device=DEV))
        junk.append(torch.full((T * k, cols), float("nan"), dtype=torch.float32, device=DEV))
    del junk


def run_case(x, w13, w2, wts, ids, path, ref=None, **kw):
    """Run sf.fused_moe with `path` and check it; returns the output, or None if the forced path cannot run."""
    T, H = x.shape
    k, I = ids.shape[1], w2.in_features  # noqa: E741
    if ref is None:
        ref = moe.reference_moe(x, w13, w2, wts, ids, dtype=torch.float32,
                                **{a: v for a, v in kw.items() if a != "deterministic"})
    poison(T, H, I, k, x.dtype)
    try:
        y = sf.fused_moe(x, w13, w2, wts, ids, path=path, **kw)
    except Exception as e:  # noqa: BLE001
        if path != "auto" and UNAVAILABLE in str(e):
            return None
        raise
    torch.cuda.synchronize()
    ran = ops.moe_path_name(ops.last_moe_path(torch.cuda.current_device()))
    if path == "auto":
        emap = kw.get("expert_map")
        E = w13.num_experts if emap is None else emap.numel()  # the dispatcher averages over global experts
        act_order = w13.perm is not None or w2.perm is not None
        predicted = ops.moe_path_name(ops.moe_select_path(T, k, E, H, I, w13.bits, w13.scale_group,
                                                          ops.DTYPE_CODES[x.dtype], torch.cuda.current_device(),
                                                          act_order))
        assert ran == predicted, f"auto ran {ran} but moe_select_path predicts {predicted}"
    else:
        assert ran == path, f"forced {path} but last_moe_path says {ran}"
    assert y.shape == (T, H) and y.dtype == x.dtype and y.device == x.device
    err = moe.output_error(y, ref, H=H, I=I, top_k=k)
    assert err <= 1, f"path {path} ({ran}): error {err:.3g}x the tolerance"
    return y


def run_paths(x, w13, w2, wts, ids, **kw):
    """auto and every path forced on one input against one reference; a forced path that cannot run the
    problem is reported as a warning (the summary lists them), any other failure fails."""
    ref = moe.reference_moe(x, w13, w2, wts, ids, dtype=torch.float32,
                            **{a: v for a, v in kw.items() if a != "deterministic"})
    for path in ["auto"] + kernel_paths():
        if run_case(x, w13, w2, wts, ids, path, ref=ref, **kw) is None:
            warnings.warn(f"forced MoE path {path} cannot run T={x.shape[0]} k={ids.shape[1]} E={w13.num_experts} "
                          f"H={x.shape[1]} I={w2.in_features} int{w13.bits} g{w13.group_size} {x.dtype}")


def activations(T, H, dtype, seed):
    gen = torch.Generator(device=DEV)
    gen.manual_seed(seed)
    return torch.randn(T, H, generator=gen, device=DEV).to(dtype)


# ------------------------------------------------------------------ token counts, top-k, experts


@pytest.mark.parametrize("E,k", [(8, 2), (60, 4), (64, 6), (128, 8), (8, 1)])
@pytest.mark.parametrize("T", TOKENS)
def test_tokens_topk_experts(T, E, k):
    w13, w2 = experts(E=E, H=512, I=256)
    ids, wts = routing(T, E, k, seed=T * 131 + E)
    run_paths(activations(T, 512, BF16, T), w13, w2, wts, ids)


@pytest.mark.parametrize("kind,bits,group", [
    ("gptq", 4, 128), ("gptq", 4, 32), ("gptq", 4, 64), ("gptq", 4, -1), ("gptq", 8, 128), ("gptq", 8, -1),
    ("act-order", 4, 128), ("act-order", 8, 64), ("awq", 4, 128), ("awq", 4, 64),
    ("ct", 4, 128), ("ct", 8, 32), ("ct-asym", 4, 128), ("ct-act", 4, 64)])
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("T", [1, 33, 256])
def test_formats(kind, bits, group, dtype, T):
    w13, w2 = experts(kind, bits, group, E=8, H=256, I=128, dtype=dtype, seed=bits + group)
    ids, wts = routing(T, 8, 2, seed=T)
    run_paths(activations(T, 256, dtype, T + 1), w13, w2, wts, ids)


@pytest.mark.parametrize("kind", ["uniform", "one", "few", "dup"])
@pytest.mark.parametrize("T", [7, 256, 1024])
def test_routing_shapes(kind, T):
    w13, w2 = experts(E=64, H=512, I=256)
    ids, wts = routing(T, 64, 6, seed=T, kind=kind)
    if kind == "few":
        assert int(torch.unique(ids).numel()) <= 7  # 57+ experts with zero tokens
    run_paths(activations(T, 512, BF16, T + 2), w13, w2, wts, ids)


@pytest.mark.parametrize("model", ["mixtral-8x7b", "qwen1.5-moe-a2.7b", "qwen3-30b-a3b", "deepseek-v2-lite"])
@pytest.mark.parametrize("T", [1, 64, 1024])
def test_model_shapes(model, T):
    from swordfish_backend import presets

    p = presets.MOE_PRESETS[model]
    w13, w2 = experts(E=p.E, H=p.H, I=p.I, seed=7)
    ids, wts = routing(T, p.E, p.top_k, seed=T)
    run_paths(activations(T, p.H, BF16, T + 3), w13, w2, wts, ids)


# ------------------------------------------------------------------ options


@pytest.mark.parametrize("T", [1, 16, 300])
def test_gelu_and_router_weight_on_input(T):
    w13, w2 = experts(E=8, H=256, I=128)
    x = activations(T, 256, BF16, T)
    ids, wts = routing(T, 8, 2, seed=T)
    run_paths(x, w13, w2, wts, ids, activation="gelu")
    ids1, wts1 = routing(T, 8, 1, seed=T + 1)
    run_paths(x, w13, w2, wts1, ids1, apply_router_weight_on_input=True)


@pytest.mark.parametrize("T", [1, 64, 1024])
def test_expert_map_and_out_of_range_slots(T):
    """Two expert-parallel ranks sum to the unsharded layer; slots mapped to -1 or out of range contribute
    nothing and are never read out of bounds (the CUDA path does not check ids on the host)."""
    E = 16
    w13, w2 = experts(E=E, H=256, I=128)
    x = activations(T, 256, BF16, T)
    ids, wts = routing(T, E, 4, seed=T)
    full = moe.reference_moe(x, w13, w2, wts, ids, dtype=torch.float32)
    total = torch.zeros_like(full)
    for rank in (0, 1):
        mine = [e for e in range(E) if e % 2 == rank]
        emap = torch.full((E,), -1, dtype=torch.int32, device=DEV)
        emap[mine] = torch.arange(len(mine), dtype=torch.int32, device=DEV)
        l13 = sf.QuantizedExperts.stack([w13[e] for e in mine])
        l2 = sf.QuantizedExperts.stack([w2[e] for e in mine])
        for path in ["auto"] + kernel_paths():
            y = run_case(x, l13, l2, wts, ids, path, expert_map=emap)
            if path == "auto":
                total += y.float()
    # each rank passed its own elementwise bound in run_case; where the ranks' halves cancel, an element of
    # the sum can exceed the elementwise bound taken from the sum's smaller |ref|: the sum gets the norm bound
    u = 2.0 ** -8
    assert float((total - full).norm()) <= 4 * u * 2 * float(full.norm())  # two ranks' output roundings
    bad = ids.clone()
    bad[:, -1] = E + 5  # out of range: left out
    zeroed = wts.clone()
    zeroed[:, -1] = 0
    ref = moe.reference_moe(x, w13, w2, zeroed, ids, dtype=torch.float32)
    for path in ["auto"] + kernel_paths():
        run_case(x, w13, w2, wts, bad, path, ref=ref)


def test_routing_dtypes_and_empty_batch():
    w13, w2 = experts(E=8, H=256, I=128)
    x = activations(40, 256, BF16, 1)
    ids, wts = routing(40, 8, 2, seed=1)
    wts16 = wts.to(BF16)
    a = sf.fused_moe(x, w13, w2, wts16.float(), ids, deterministic=True)
    b = sf.fused_moe(x, w13, w2, wts16, ids.long(), deterministic=True)
    assert torch.equal(a, b)
    empty = sf.fused_moe(x[:0], w13, w2, wts[:0], ids[:0])
    assert empty.shape == (0, 256) and empty.device.type == "cuda"
    with pytest.raises(ValueError, match="swordfish.fused_moe: all tensors must be on one device"):
        sf.fused_moe(x, w13, w2, wts.cpu(), ids)


# ------------------------------------------------------------------ determinism and CUDA graphs


@pytest.mark.parametrize("T", [1, 33, 256, 2048])
def test_deterministic_mode_is_bit_stable(T, monkeypatch):
    w13, w2 = experts(E=60, H=512, I=256)
    x = activations(T, 512, BF16, T)
    ids, wts = routing(T, 60, 4, seed=T)
    for path in ["auto"] + kernel_paths():
        first = run_case(x, w13, w2, wts, ids, path, deterministic=True)
        if first is None:
            continue
        again = sf.fused_moe(x, w13, w2, wts, ids, path=path, deterministic=True)
        assert torch.equal(first.view(torch.int16), again.view(torch.int16)), path
        monkeypatch.setenv("SWORDFISH_DETERMINISTIC", "1")  # deterministic=None reads it per call
        from_env = sf.fused_moe(x, w13, w2, wts, ids, path=path)
        monkeypatch.delenv("SWORDFISH_DETERMINISTIC")
        assert torch.equal(first.view(torch.int16), from_env.view(torch.int16)), path


@pytest.mark.parametrize("T", [1, 64, 1024])
def test_cuda_graph_replay_with_new_routing_equals_eager(T):
    E, k = 64, 6
    w13, w2 = experts(E=E, H=512, I=256)
    for path in ["auto"] + kernel_paths():
        x = activations(T, 512, BF16, T)
        ids, wts = routing(T, E, k, seed=T)
        try:
            sf.fused_moe(x, w13, w2, wts, ids, path=path, deterministic=True)
        except Exception as e:  # noqa: BLE001
            if path != "auto" and UNAVAILABLE in str(e):
                continue
            raise
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            sf.fused_moe(x, w13, w2, wts, ids, path=path, deterministic=True)  # warm-up on the capture stream
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = sf.fused_moe(x, w13, w2, wts, ids, path=path, deterministic=True)
        for seed in (1, 2):  # new routing and input, copied into the captured buffers
            new_ids, new_wts = routing(T, E, k, seed=T + 100 * seed, kind="few" if seed == 2 else "softmax")
            new_x = activations(T, 512, BF16, T + seed)
            ids.copy_(new_ids)
            wts.copy_(new_wts)
            x.copy_(new_x)
            graph.replay()
            torch.cuda.synchronize()
            eager = sf.fused_moe(new_x, w13, w2, new_wts, new_ids, path=path, deterministic=True)
            assert torch.equal(out.view(torch.int16), eager.view(torch.int16)), (path, seed)
            ref = moe.reference_moe(new_x, w13, w2, new_wts, new_ids, dtype=torch.float32)
            assert moe.output_error(out, ref, H=512, I=256, top_k=k) <= 1, (path, seed)


def test_torch_compile_traces_the_layer():
    w13, w2 = experts(E=8, H=256, I=128)

    def layer(x, wts, ids):
        return sf.fused_moe(x, w13, w2, wts, ids, deterministic=True)

    compiled = torch.compile(layer, dynamic=True)
    for T in (7, 33):
        x = activations(T, 256, BF16, T)
        ids, wts = routing(T, 8, 2, seed=T)
        assert torch.equal(compiled(x, wts, ids), layer(x, wts, ids))


# ------------------------------------------------------------------ building on the GPU


@pytest.mark.parametrize("bits,group,act_order", [(4, 128, False), (4, 32, True), (8, 128, True), (8, -1, False),
                                                   (4, 64, False)])
def test_prepack_on_the_gpu_matches_the_cpu_packer(bits, group, act_order):
    """.to("cuda") prepacks all experts in one launch (the tall-weight trick through the extension's prepack
    op): the bytes of the pure-torch packer on CPU and of each expert prepacked alone on the GPU."""
    gen = torch.Generator().manual_seed(bits + group)
    E, K, N = 5, 256, 192
    q = torch.randint(0, 1 << bits, (E, K, N), generator=gen)
    s = (torch.rand(E, 1 if group == -1 else K // group, N, generator=gen) * 0.01 + 0.001).to(BF16)
    g_idx = None
    if act_order:
        rows = torch.arange(K) // group
        g_idx = torch.stack([rows if e == 2 else rows[torch.randperm(K, generator=gen)] for e in range(E)]).int()
    qweight = torch.stack([fmt.pack_k(t, bits) for t in q])
    on_cpu = sf.QuantizedExperts.from_gptq(qweight, s, g_idx, bits=bits, group_size=group)
    moved = on_cpu.to("cuda")  # before on_cpu.packed exists: packed on the device
    assert moved.device.type == "cuda" and moved._source is None
    assert torch.equal(moved.packed.cpu(), on_cpu.packed)
    for e in range(E):
        g = None if g_idx is None else g_idx[e].cuda()
        single = sf.QuantizedWeight.from_gptq(qweight[e].cuda(), s[e].cuda(), g, bits=bits, group_size=group)
        assert torch.equal(moved.packed[e], single.packed)
    assert torch.equal(moved.dequantize().cpu(), on_cpu.dequantize())


@pytest.mark.sanitize
@pytest.mark.parametrize("path", ["auto"] + kernel_paths())
def test_sanitize_small(path):
    """A small case of each path for compute-sanitizer (memcheck / racecheck)."""
    w13, w2 = experts(E=8, H=256, I=128)
    for T, kind in ((3, "softmax"), (40, "few")):
        ids, wts = routing(T, 8, 2, seed=T, kind=kind)
        run_case(activations(T, 256, BF16, T), w13, w2, wts, ids, path)


def test_peer_adapter_call_form_on_gpu():
    """shared/peers/peer_moe.py's project_moe_setup on the GPU: CPU GPTQ tensors, .to("cuda"), fused_moe."""
    gen = torch.Generator().manual_seed(5)
    E, k, H, I, T = 8, 2, 512, 256, 16  # noqa: E741

    def words(*shape):
        return torch.randint(-2**31, 2**31, shape, generator=gen, dtype=torch.int64).to(torch.int32)

    def scales(*shape, K):
        return ((torch.rand(*shape, generator=gen) * 0.5 + 0.75) / math.sqrt(21.5 * K)).to(BF16)

    qw13, s13, qw2, s2 = words(E, H // 8, 2 * I), scales(E, H // 128, 2 * I, K=H), words(E, I // 8, H), \
        scales(E, I // 128, H, K=I)
    w13 = sf.QuantizedExperts.from_gptq(qw13, s13, bits=4, group_size=128, dtype=torch.bfloat16).to("cuda")
    w2 = sf.QuantizedExperts.from_gptq(qw2, s2, bits=4, group_size=128, dtype=torch.bfloat16).to("cuda")
    ids, wts = routing(T, E, k, seed=9)
    x = activations(T, H, BF16, 9)
    y = sf.fused_moe(x, w13, w2, wts, ids)
    ref = moe.reference_moe(x, w13, w2, wts, ids, dtype=torch.float32)
    assert moe.output_error(y, ref, H=H, I=I, top_k=k) <= 1
    cpu = moe.reference_moe(x.cpu(), w13.to("cpu"), w2.to("cpu"), wts.cpu(), ids.cpu(), dtype=torch.float32)
    assert torch.allclose(ref.cpu(), cpu, rtol=1e-4, atol=1e-4 * float(cpu.abs().max()))


def test_environment_knob_is_not_cached(monkeypatch):
    monkeypatch.setenv("SWORDFISH_DETERMINISTIC", "maybe")
    w13, w2 = experts(E=8, H=256, I=128)
    ids, wts = routing(4, 8, 2, seed=4)
    with pytest.raises(Exception, match="SWORDFISH_DETERMINISTIC"):
        sf.fused_moe(activations(4, 256, BF16, 4), w13, w2, wts, ids)
    assert os.environ["SWORDFISH_DETERMINISTIC"] == "maybe"
