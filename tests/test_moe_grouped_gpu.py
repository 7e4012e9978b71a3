"""GPU tests of the grouped MoE path (path code 3, "grouped": kernels/moe/moe_dense.cu grouped_*,
the sm90 prefill mainloop's grouped GEMM in kernels/prefill/sm90/).

The same oracle, poisoning and tolerance as tests/test_moe_kernels_gpu.py (its helpers are imported):
an fp32 reference of the dequantized experts, fresh random codes and routing per case, the caching
allocator filled with NaN before the op allocates. The path is forced (auto picks it only from 32
routed tokens per expert), and the debug line must name it, so every case below really runs the grouped GEMM. Runs
are padded to the prefill's token tile (64, 128 or 256 rows by the average rows per expert): the
cases cross those choices, leave experts without tokens, route everything to one expert, and drop
slots through an expert map. The grouped path has no atomics: two runs must agree bit for bit, and a
CUDA graph replayed with new routing must equal the eager call.

Sanitizers: compute-sanitizer --tool memcheck python -m pytest -q -m sanitize tests/test_moe_grouped_gpu.py
"""

from __future__ import annotations

import pytest
import torch

from test_moe_kernels_gpu import (FORMATS, H, I, check_close, check_routed, fused, layer, ops_fused_moe, ref_moe,
                                  routing, xin)

ops = pytest.importorskip("swordfish_backend.ops")


def _is_sm90a():
    if not torch.cuda.is_available() or not ops.has_extension():
        return False
    return torch.cuda.get_device_capability() == (9, 0) and "90a" in ops.build_info().get("cuda_archs", [])


pytestmark = pytest.mark.skipif(not _is_sm90a(), reason="the grouped MoE path runs on sm90a (H100 / H200) only")

PATH_GROUPED = 3


def grouped(x, w13, w2, weights, ids, **kw):
    y = fused(x, w13, w2, weights, ids, path=PATH_GROUPED, **kw)
    assert torch.ops.swordfish.last_moe_path(x.device.index) == PATH_GROUPED
    return y


def test_path_is_named():
    assert ops.moe_paths()["grouped"] == PATH_GROUPED


# avg rows per expert = T k / E; int4 tiles (prefill_sm90_plan.h grouped_tile_rows): 64 rows below 61, 128 below 421
@pytest.mark.parametrize("T,k,E", [(1, 2, 8), (7, 2, 8), (33, 4, 60), (64, 8, 128), (255, 2, 8), (1024, 2, 8),
                                   (2048, 2, 8), (4096, 8, 128)])
def test_tokens(T, k, E):
    check_routed(grouped, T, k, E, x_seed=T, seed=T, what=f"grouped T={T} E={E} k={k}")


@pytest.mark.parametrize("T,block", [(16, "block_m=64 "), (1024, "block_m=128 "), (2048, "block_m=256 ")])
def test_tile_follows_the_average(T, block, monkeypatch, capfd):
    """The debug line names the grouped path and the run length the average rows per expert asks for."""
    monkeypatch.setenv("SWORDFISH_DEBUG", "1")
    w13, w2 = layer(8)
    x = xin(T, torch.bfloat16, 3)
    ids, weights = routing(T, 2, 8, seed=3)
    grouped(x, w13, w2, weights, ids)
    torch.cuda.synchronize()
    err = capfd.readouterr().err
    assert "-> grouped (grouped: " + block in err, err


@pytest.mark.parametrize("kind", ["skewed", "dup"])
@pytest.mark.parametrize("T,k,E", [(1, 1, 8), (300, 2, 8), (1024, 4, 60)])
def test_routing_kinds(T, k, E, kind):
    check_routed(grouped, T, k, E, kind=kind, x_seed=7 + T, seed=T + 11, what=f"grouped {kind} T={T} E={E} k={k}")


def test_one_expert_takes_everything():
    w13, w2 = layer(8)
    T = 600
    x = xin(T, torch.bfloat16, 5)
    ids = torch.full((T, 1), 5, dtype=torch.int32, device="cuda")
    weights = torch.ones(T, 1, device="cuda")
    y = grouped(x, w13, w2, weights, ids)
    check_close(y, ref_moe(x, w13, w2, weights, ids), torch.bfloat16, "one expert")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("bits,group", FORMATS, ids=[f"int{b}-{'cw' if g < 0 else 'g%d' % g}" for b, g in FORMATS])
@pytest.mark.parametrize("T", [3, 700])
def test_formats(T, bits, group, dtype):
    check_routed(grouped, T, 2, 8, bits=bits, group=group, dtype=dtype, x_seed=T + bits, seed=T + group,
                 what=f"grouped int{bits} g{group} {dtype}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("group", [32, 128])
@pytest.mark.parametrize("T", [5, 700])
def test_zero_points(T, group, dtype):
    check_routed(grouped, T, 2, 8, group=group, fmt="zeros", dtype=dtype, x_seed=T, seed=T + 3,
                 what=f"grouped zeros g{group} {dtype}")


@pytest.mark.parametrize("T", [1, 50])
def test_gelu_and_weights_on_input(T):
    w13, w2 = layer(8)
    x = xin(T, torch.bfloat16, T)
    ids, weights = routing(T, 2, 8, seed=T)
    y = grouped(x, w13, w2, weights, ids, activation=1)
    check_close(y, ref_moe(x, w13, w2, weights, ids, activation="gelu"), torch.bfloat16, "grouped gelu")
    ids1, weights1 = routing(T, 1, 8, seed=T + 1)
    y = grouped(x, w13, w2, weights1, ids1, weights_on_input=True)
    check_close(y, ref_moe(x, w13, w2, weights1, ids1, weights_on_input=True), torch.bfloat16,
                "grouped weights on input")


@pytest.mark.parametrize("T", [1, 300])
def test_expert_map(T):
    """8 local experts of 24: slots of other ranks' experts and out-of-range ids contribute nothing."""
    gen = torch.Generator(device="cuda").manual_seed(T)
    w13, w2 = layer(8)
    expert_map = torch.full((24,), -1, dtype=torch.int32, device="cuda")
    expert_map[torch.randperm(24, generator=gen, device="cuda")[:8]] = torch.arange(8, dtype=torch.int32,
                                                                                   device="cuda")
    ids, weights = routing(T, 4, 24, seed=T + 5)
    if T > 1:
        ids[0, 0] = 99
        ids[1, :] = int(torch.nonzero(expert_map < 0)[0])
    x = xin(T, torch.bfloat16, T)
    y = grouped(x, w13, w2, weights, ids, expert_map=expert_map)
    check_close(y, ref_moe(x, w13, w2, weights, ids, expert_map), torch.bfloat16, "grouped expert_map")
    if T > 1:
        assert torch.equal(y[1], torch.zeros_like(y[1]))


def test_bit_stable():
    w13, w2 = layer(60)
    T = 500
    x = xin(T, torch.bfloat16, 2)
    ids, weights = routing(T, 4, 60, seed=2)
    assert torch.equal(grouped(x, w13, w2, weights, ids), grouped(x, w13, w2, weights, ids))


def test_act_order_is_refused_by_name():
    w13, w2 = layer(8, 4, 128, "act")
    x = xin(4, torch.bfloat16)
    ids, weights = routing(4, 2, 8)
    with pytest.raises((ValueError, RuntimeError), match="grouped MoE path takes no act-order experts"):
        fused(x, w13, w2, weights, ids, path=PATH_GROUPED)


@pytest.mark.parametrize("T,k,E", [(16, 4, 60), (700, 2, 8)])
def test_cuda_graph_replay(T, k, E):
    """Capture with one routing, replay with others (sizes never depend on the routing)."""
    w13, w2 = layer(E)
    x = xin(T, torch.bfloat16, 1)
    ids, weights = routing(T, k, E, seed=1)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        grouped(x, w13, w2, weights, ids)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = ops_fused_moe(x, w13.packed, w13.scales, w13.zeros, w13.perm, w2.packed, w2.scales, w2.zeros, w2.perm,
                          weights, ids, None, w13.bits, w13.group, w13.channelwise, w2.group, w2.channelwise, 0,
                          False, PATH_GROUPED, 0)
    for seed, kind in ((2, "uniform"), (3, "skewed"), (4, "dup")):
        ids2, weights2 = routing(T, k, E, kind, seed=seed)
        x2 = xin(T, torch.bfloat16, seed)
        ids.copy_(ids2)
        weights.copy_(weights2)
        x.copy_(x2)
        g.replay()
        eager = grouped(x2, w13, w2, weights2, ids2)
        torch.cuda.synchronize()
        assert torch.equal(y, eager), f"graph replay ({kind}) differs from eager"
        check_close(y, ref_moe(x2, w13, w2, weights2, ids2), torch.bfloat16, f"grouped graph replay {kind}")


@pytest.mark.sanitize
@pytest.mark.parametrize("bits,group,kind,T", [(4, 64, "zeros", 5), (8, 128, "gptq", 300)],
                         ids=["int4-zeros-grouped", "int8-grouped"])
def test_sanitize_grouped(bits, group, kind, T):
    """align, index, gather, the grouped GEMM (w13, w2), activation and sum, once each."""
    w13, w2 = layer(8, bits, group, kind)
    x = xin(T, torch.bfloat16, 1)
    ids, weights = routing(T, 2, 8, "skewed", seed=2)
    y = grouped(x, w13, w2, weights, ids)
    check_close(y, ref_moe(x, w13, w2, weights, ids), torch.bfloat16, "sanitize grouped")


def test_shapes_of_the_file():
    assert (H, I) == (384, 256)  # multiples of 128 (the prefill's K and N), a 3-tile w2 N
