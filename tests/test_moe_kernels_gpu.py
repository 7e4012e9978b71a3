"""GPU tests of the fused-MoE ops (kernels/moe/, kernels/dispatch/moe_*, kernels/torch/ops_moe.cpp).

moe_align against a pure-torch reference (stable: slots ascend inside each expert, so the
comparison is exact): sizes, padding, sentinels, expert_map -1, out-of-range ids dropped,
int32 and int64 ids, one case past 64K slots.

fused_moe against an fp32 reference built here from the dequantized experts
(swordfish_backend.reference.dequantize of each expert, which reads the packed tensor
through the pure-torch unpacker): h = x W13^T, a = act(h_gate) * h_up rounded once to
the dtype (as the kernels and vLLM do), y = sum_j w_j a_j W2^T. Every case draws fresh
random codes, scales, zero points, permutations, activations and routing; the caching
allocator is poisoned with NaN before the op allocates its output and workspace (an
element never written, or an accumulator never zeroed, reads NaN). Tolerance:
swordfish_backend.check.output_error with K = H + I (the two chained reductions) and the
dtype's unit roundoff. CUDA-graph capture replayed with other routing must give the eager
result; deterministic mode must be bit-identical run to run.

Sanitizers (the cases marked `sanitize`, small shapes of every kernel):
    compute-sanitizer --tool memcheck python -m pytest -q -m sanitize tests/test_moe_kernels_gpu.py
"""

from __future__ import annotations

import functools

import pytest
import torch

from swordfish_backend import check as sfcheck
from swordfish_backend import format as fmt
from swordfish_backend import reference

ops = pytest.importorskip("swordfish_backend.ops")
import swordfish_backend as sf  # noqa: E402

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or not ops.has_extension(),
    reason="needs a CUDA device and the compiled extension",
)

PATH_AUTO, PATH_FUSED, PATH_DENSE, PATH_GROUPED = 0, 1, 2, 3
H, I = 384, 256  # w13: K = 384, N = 512; w2: K = 256, N = 384 (six n64 columns: a partial n256 quad)


# ------------------------------------------------------------------ helpers


def _poison(*numels_f32):
    """Leave NaN-filled free blocks in the caching allocator (small and large pools): the op's output
    and workspace are carved from them, so whatever the kernels fail to write or zero reads NaN."""
    for n in numels_f32 + (1 << 18, 1 << 24):
        torch.full((int(n),), float("nan"), dtype=torch.float32, device="cuda")


def _poison_int():
    for n in (1 << 12, 1 << 18, 1 << 22):
        torch.full((n,), -7, dtype=torch.int32, device="cuda")


class Experts:
    """E stacked experts of one shape (N, K) and format, on the GPU, and their fp32 dequantization."""

    def __init__(self, E, K, N, bits, group, kind, dtype, seed):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        ws = []
        for _ in range(E):
            G = 1 if group == -1 else K // group
            q = torch.randint(0, 1 << bits, (K, N), generator=gen, device="cuda")
            s = (torch.rand(G, N, generator=gen, device="cuda") * 0.02 + 0.002).to(dtype)
            if kind == "zeros":
                z = torch.randint(0, 16, (G, N), generator=gen, device="cuda")
                w = sf.QuantizedWeight.from_awq(sfcheck._awq_pack(q), sfcheck._awq_pack(z), s, group_size=group,
                                                dtype=dtype)
            else:
                g_idx = None
                if kind == "act":
                    perm = torch.randperm(K, generator=gen, device="cuda")
                    g_idx = (torch.arange(K, device="cuda") // group)[perm].to(torch.int32)
                w = sf.QuantizedWeight.from_gptq(fmt.pack_k(q, bits), s, g_idx, bits=bits, group_size=group,
                                                 dtype=dtype)
            ws.append(w)
        self.E, self.K, self.N, self.bits, self.dtype = E, K, N, bits, dtype
        self.group = ws[0].scale_group
        self.channelwise = group == -1
        self.packed = torch.stack([w.packed for w in ws]).contiguous()
        self.scales = torch.stack([w.scales for w in ws]).contiguous()
        self.zeros = torch.stack([w.zeros for w in ws]).contiguous() if ws[0].zeros is not None else None
        if kind == "act":
            ident = torch.arange(K, dtype=torch.int32, device="cuda")
            self.perm = torch.stack([w.perm if w.perm is not None else ident for w in ws]).contiguous()
        else:
            self.perm = None
        self.W = torch.stack([reference.dequantize(w) for w in ws])  # (E, N, K) fp32, rounded to dtype once


@functools.lru_cache(maxsize=None)
def layer(E, bits=4, group=128, kind="gptq", dtype=torch.bfloat16, group2=None, kind2=None, seed=0):
    w13 = Experts(E, H, 2 * I, bits, group, kind, dtype, seed)
    w2 = Experts(E, I, H, bits, group if group2 is None else group2, kind if kind2 is None else kind2, dtype,
                 seed + 1)
    return w13, w2


def routing(T, k, E, kind="uniform", seed=0, weights_dtype=torch.float32):
    gen = torch.Generator(device="cuda").manual_seed(1000 + seed)
    if kind == "uniform":  # k distinct experts per token
        ids = torch.rand(T, E, generator=gen, device="cuda").topk(k, dim=1).indices
    elif kind == "skewed":  # most slots on two experts, duplicates allowed
        p = torch.full((E,), 0.2 / max(E - 2, 1), device="cuda")
        p[:2] = 0.4
        ids = torch.multinomial(p.expand(T, E).contiguous(), k, replacement=True, generator=gen)
    else:  # "dup": uniform with replacement (duplicate ids inside a row)
        ids = torch.randint(0, E, (T, k), generator=gen, device="cuda")
    w = torch.softmax(torch.randn(T, k, generator=gen, device="cuda"), dim=1).to(weights_dtype)
    return ids.to(torch.int32).contiguous(), w.contiguous()


def local_ids(ids, E, expert_map=None):
    ids = ids.to(torch.int64)
    bound = E if expert_map is None else expert_map.numel()
    ok = (ids >= 0) & (ids < bound)
    e = torch.where(ok, ids, torch.zeros_like(ids))
    if expert_map is not None:
        e = expert_map.to(torch.int64)[e]
    ok &= (e >= 0) & (e < E)
    return torch.where(ok, e, torch.full_like(e, -1))


def ref_moe(x, w13, w2, weights, ids, expert_map=None, activation="silu", weights_on_input=False):
    T, k = ids.shape
    e = local_ids(ids, w13.E, expert_map).flatten()
    xs = x.float()
    y = torch.zeros(T, H, dtype=torch.float64, device="cuda")
    wf = weights.float().flatten()
    for ex in torch.unique(e[e >= 0]).tolist():
        slots = torch.nonzero(e == ex).flatten()
        tok = slots // k
        h = xs[tok] @ w13.W[ex].t()
        if weights_on_input:
            h = h * wf[slots, None]
        g, u = h[:, :I], h[:, I:]
        act = torch.nn.functional.silu(g) if activation == "silu" else torch.nn.functional.gelu(g)
        a = (act * u).to(x.dtype).float()
        o = a @ w2.W[ex].t()
        if not weights_on_input:
            o = o * wf[slots, None]
        y.index_add_(0, tok, o.double())
    return y


def fused(x, w13, w2, weights, ids, expert_map=None, activation=0, weights_on_input=False, path=PATH_FUSED,
          deterministic=0):
    _poison(x.shape[0] * H)
    return ops_fused_moe(x, w13.packed, w13.scales, w13.zeros, w13.perm, w2.packed, w2.scales, w2.zeros, w2.perm,
                         weights, ids, expert_map, w13.bits, w13.group, w13.channelwise, w2.group, w2.channelwise,
                         activation, weights_on_input, path, deterministic)


def ops_fused_moe(*args):
    return torch.ops.swordfish.fused_moe(*args)


def check_close(y, ref, dtype, what=""):
    assert y.dtype == dtype and y.shape == ref.shape, what
    err = sfcheck.output_error(y, ref, sfcheck.unit_roundoff(dtype), H + I)
    assert err <= 1.0, f"{what}: error {err:.3g}x the tolerance (inf: NaN or Inf in the output)"


def xin(T, dtype, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(2000 + seed)
    return torch.randn(T, H, generator=gen, device="cuda").to(dtype)


def check_routed(run, T, k, E, *, x_seed, seed, what, kind="uniform", bits=4, group=128, fmt="gptq",
                 dtype=torch.bfloat16):
    """One layer of fresh experts and routing through `run` (fused, or another path's wrapper), checked against
    the fp32 reference."""
    w13, w2 = layer(E, bits, group, fmt, dtype)
    x = xin(T, dtype, x_seed)
    ids, weights = routing(T, k, E, kind, seed=seed)
    y = run(x, w13, w2, weights, ids)
    check_close(y, ref_moe(x, w13, w2, weights, ids), dtype, what)


# ------------------------------------------------------------------ moe_align


def ref_align(ids, E, bm, expert_map=None):
    flat = ids.flatten()
    slots = flat.numel()
    e = local_ids(flat, E, expert_map)
    valid = e >= 0
    key = torch.where(valid, e, torch.full_like(e, E))
    order = torch.sort(key, stable=True).indices[: int(valid.sum())]
    counts = torch.bincount(e[valid], minlength=E)
    padded = (counts + bm - 1) // bm * bm
    offs = torch.cumsum(padded, 0) - padded
    starts = torch.cumsum(counts, 0) - counts
    es = e[order]
    rank = torch.arange(order.numel(), device=ids.device) - starts[es]
    length = slots + E * (bm - 1)
    sorted_ids = torch.full((length,), slots, dtype=torch.int64, device=ids.device)
    sorted_ids[offs[es] + rank] = order
    npp = int(padded.sum())
    blocks = (length + bm - 1) // bm
    expert_ids = torch.full((blocks,), -1, dtype=torch.int64, device=ids.device)
    expert_ids[: npp // bm] = torch.repeat_interleave(torch.arange(E, device=ids.device), padded // bm)
    return sorted_ids.to(torch.int32), expert_ids.to(torch.int32), npp


def run_align(ids, E, bm, expert_map=None):
    _poison_int()
    s, eids, npp = torch.ops.swordfish.moe_align(ids, E, bm, expert_map)
    rs, reids, rnpp = ref_align(ids, E, bm, expert_map)
    assert int(npp.item()) == rnpp
    assert s.shape == rs.shape and eids.shape == reids.shape
    assert torch.equal(s, rs), "sorted_ids differ"
    assert torch.equal(eids, reids), "expert_ids differ"


@pytest.mark.parametrize("bm", [8, 16, 32, 64, 128, 256])
@pytest.mark.parametrize("E", [8, 60, 128])
@pytest.mark.parametrize("k", [1, 2, 8])
@pytest.mark.parametrize("T", [1, 7, 256, 4096])
def test_align(T, k, E, bm):
    if k > E:
        pytest.skip("top_k > E")
    ids, _ = routing(T, k, E, "skewed" if T == 256 else "uniform", seed=T + k)
    run_align(ids, E, bm)


@pytest.mark.sanitize
@pytest.mark.parametrize("bm", [8, 16, 32])
@pytest.mark.parametrize("E", [8, 128])
@pytest.mark.parametrize("T,k", [(32, 1), (16, 2), (4, 8), (33, 1), (11, 3)])
def test_align_one_warp_boundary(T, k, E, bm):
    """32 slots sort on one warp (align_sort_warp), 33 on the CTA: both give the contract's output."""
    gen = torch.Generator(device="cuda").manual_seed(T * k + E + bm)
    run_align(torch.randint(0, E, (T, k), generator=gen, device="cuda", dtype=torch.int32), E, bm)


@pytest.mark.parametrize("id_dtype", [torch.int32, torch.int64])
def test_align_map_and_out_of_range(id_dtype):
    gen = torch.Generator(device="cuda").manual_seed(5)
    E_global, E = 24, 8
    expert_map = torch.full((E_global,), -1, dtype=torch.int32, device="cuda")
    expert_map[torch.randperm(E_global, generator=gen, device="cuda")[:E]] = torch.arange(E, dtype=torch.int32,
                                                                                           device="cuda")
    ids = torch.randint(-3, E_global + 5, (37, 3), generator=gen, device="cuda").to(id_dtype)
    run_align(ids, E, 16, expert_map)
    run_align(ids, E, 32, expert_map)
    run_align(ids[:10].contiguous(), E, 8, expert_map)  # 30 slots: the one-warp sort
    ids_no_map = torch.randint(-2, E + 4, (37, 3), generator=gen, device="cuda").to(id_dtype)
    run_align(ids_no_map, E, 16)


def test_align_beyond_one_cta_sweet_spot():
    ids, _ = routing(16384, 8, 128, "dup", seed=3)  # 131072 slots
    run_align(ids, 128, 32)


def test_align_empty():
    ids = torch.full((4, 2), -1, dtype=torch.int32, device="cuda")
    run_align(ids, 8, 16)


# ------------------------------------------------------------------ fused_moe: routing and sizes

TOKENS = [1, 2, 7, 16, 33, 64, 255, 256, 1024]


@pytest.mark.parametrize("E,k", [(8, 2), (60, 4), (128, 8)], ids=["E8k2", "E60k4", "E128k8"])
@pytest.mark.parametrize("T", TOKENS)
def test_tokens(T, E, k):
    check_routed(fused, T, k, E, x_seed=T, seed=T, what=f"T={T} E={E} k={k}")
    assert torch.ops.swordfish.last_moe_path(torch.cuda.current_device()) == PATH_FUSED


@pytest.mark.parametrize("kind", ["skewed", "dup"])
@pytest.mark.parametrize("T,k,E", [(1, 1, 8), (33, 2, 8), (256, 2, 8), (1024, 4, 60), (255, 8, 128)])
def test_routing_kinds(T, k, E, kind):
    """Skewed routing (most slots on two experts: 32-row blocks, many experts with no token) and
    duplicate ids inside a row."""
    check_routed(fused, T, k, E, kind=kind, x_seed=7 + T, seed=T + 11, what=f"{kind} T={T} E={E} k={k}")


# ------------------------------------------------------------------ fused_moe: formats

FORMATS = [(b, g) for b in (4, 8) for g in (32, 64, 128, -1)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("bits,group", FORMATS, ids=[f"int{b}-{'cw' if g < 0 else 'g%d' % g}" for b, g in FORMATS])
@pytest.mark.parametrize("T", [3, 40])
def test_formats(T, bits, group, dtype):
    check_routed(fused, T, 2, 8, bits=bits, group=group, dtype=dtype, x_seed=T + bits, seed=T + group,
                 what=f"int{bits} g{group} {dtype}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("T", [5, 40, 64])
def test_zero_points(T, group, dtype):
    """AWQ int4 with zero points folded into a scale-shaped tensor."""
    check_routed(fused, T, 2, 8, group=group, fmt="zeros", dtype=dtype, x_seed=T, seed=T + 3,
                 what=f"zeros g{group} {dtype}")


@pytest.mark.parametrize("bits,group", [(4, 128), (4, 32), (8, 128)])
@pytest.mark.parametrize("T", [7, 40, 64, 300])
def test_act_order(T, bits, group):
    """GPTQ act-order per expert: w13's input gathered per slot in its expert's order, w2's input
    written permuted by the activation kernel."""
    check_routed(fused, T, 2, 8, bits=bits, group=group, fmt="act", x_seed=T, seed=T + bits,
                 what=f"act-order int{bits} g{group}")


def test_act_order_w2_only():
    w13, w2 = layer(8, 4, 128, "gptq", torch.bfloat16, kind2="act")
    x = xin(20, torch.bfloat16, 1)
    ids, weights = routing(20, 2, 8, "uniform", seed=9)
    check_close(fused(x, w13, w2, weights, ids), ref_moe(x, w13, w2, weights, ids), torch.bfloat16)


# ------------------------------------------------------------------ fused_moe: options


@pytest.mark.parametrize("T", [1, 50])
def test_gelu(T):
    w13, w2 = layer(8)
    x = xin(T, torch.bfloat16, 3)
    ids, weights = routing(T, 2, 8, seed=4)
    y = fused(x, w13, w2, weights, ids, activation=1)
    check_close(y, ref_moe(x, w13, w2, weights, ids, activation="gelu"), torch.bfloat16, "gelu")


@pytest.mark.parametrize("T", [1, 64])
def test_weights_on_input(T):
    w13, w2 = layer(8)
    x = xin(T, torch.bfloat16, 5)
    ids, weights = routing(T, 1, 8, seed=6)
    y = fused(x, w13, w2, weights, ids, weights_on_input=True)
    check_close(y, ref_moe(x, w13, w2, weights, ids, weights_on_input=True), torch.bfloat16, "weights_on_input")


def test_weights_in_dtype_and_int64_ids():
    w13, w2 = layer(8)
    x = xin(9, torch.bfloat16, 8)
    ids, weights = routing(9, 2, 8, seed=7, weights_dtype=torch.bfloat16)
    y = fused(x, w13, w2, weights, ids.to(torch.int64))
    check_close(y, ref_moe(x, w13, w2, weights, ids), torch.bfloat16, "bf16 weights, int64 ids")


@pytest.mark.parametrize("T", [1, 33, 256])
def test_expert_map(T):
    """Expert parallelism: 8 local experts of 24 global; slots of non-local experts (and out-of-range
    ids) contribute nothing; a token with no local expert gets 0."""
    gen = torch.Generator(device="cuda").manual_seed(T)
    w13, w2 = layer(8)
    expert_map = torch.full((24,), -1, dtype=torch.int32, device="cuda")
    expert_map[torch.randperm(24, generator=gen, device="cuda")[:8]] = torch.arange(8, dtype=torch.int32,
                                                                                   device="cuda")
    ids, weights = routing(T, 4, 24, seed=T + 5)
    if T > 1:
        ids[0, 0] = 99  # out of range: dropped
        ids[1, :] = int(torch.nonzero(expert_map < 0)[0])  # no local expert at all
    x = xin(T, torch.bfloat16, T)
    y = fused(x, w13, w2, weights, ids, expert_map=expert_map)
    check_close(y, ref_moe(x, w13, w2, weights, ids, expert_map), torch.bfloat16, "expert_map")
    if T > 1:
        assert torch.equal(y[1], torch.zeros_like(y[1]))


@pytest.mark.parametrize("T,block", [(4, "block_m=8 swap"), (30, "block_m=8 swap"), (40, "block_m=16 "),
                                     (64, "block_m=32 ")])
def test_block_size_follows_the_table(T, block, monkeypatch, capfd):
    """Top-2 of 8 experts: T / 4 routed tokens per expert on average; below the MoE tables'
    block16_min_avg_tokens (8) the 8-row swapped-operand kernel runs, then 16- and 32-row blocks. Named by
    the SWORDFISH_DEBUG line, checked against the reference; skewed routing puts most slots on two
    experts, so blocks hold 8 real rows and a padded tail."""
    monkeypatch.setenv("SWORDFISH_DEBUG", "1")
    w13, w2 = layer(8, 4, 128, "gptq", torch.float16)
    x = xin(T, torch.float16, T)
    for kind in ("uniform", "skewed"):
        ids, weights = routing(T, 2, 8, kind, seed=T)
        y = fused(x, w13, w2, weights, ids)
        check_close(y, ref_moe(x, w13, w2, weights, ids), torch.float16, f"{kind} T={T}")
    torch.cuda.synchronize()
    lines = [ln for ln in capfd.readouterr().err.splitlines() if f"moe T={T} top_k=2 E=8 " in ln and "fused" in ln]
    assert lines and block in lines[-1], lines


@pytest.mark.parametrize("T,k,E", [(1, 8, 128), (4, 2, 8), (30, 2, 8)])
def test_w2_starts_early(T, k, E, monkeypatch, capfd):
    """8-row blocks: w2 copies its first weights before its dependency wait (moe_swap.cuh EARLY), reading
    the sort's outputs while w13 and act still run; the result must not depend on it (poisoned workspace,
    three routings, both modes)."""
    monkeypatch.setenv("SWORDFISH_DEBUG", "1")
    w13, w2 = layer(E)
    x = xin(T, torch.bfloat16, T)
    for seed, kind in ((1, "uniform"), (2, "skewed"), (3, "dup")):
        ids, weights = routing(T, k, E, kind, seed=seed)
        for det in (0, 1):
            y = fused(x, w13, w2, weights, ids, deterministic=det)
            check_close(y, ref_moe(x, w13, w2, weights, ids), torch.bfloat16, f"early w2 {kind} det={det}")
    torch.cuda.synchronize()
    lines = [ln for ln in capfd.readouterr().err.splitlines() if f"moe T={T} top_k={k} E={E} " in ln]
    assert lines and all("block_m=8 swap" in ln and " early]" in ln for ln in lines), lines


@pytest.mark.parametrize("det", [0, 1], ids=["atomic", "deterministic"])
@pytest.mark.parametrize("T", [1, 5])
def test_no_token_routed(T, det):
    """No slot routed (8-row blocks): every CTA of both GEMMs is idle, and the early w2's CTA 0 still waits
    for act before the grid ends (moe_swap.cuh): the output is exact zeros, by ids out of range and by an
    expert map with no local expert among the ids (expert parallelism at batch 1)."""
    w13, w2 = layer(8)
    x = xin(T, torch.bfloat16)
    ids = torch.full((T, 2), -1, dtype=torch.int32, device="cuda")
    y = fused(x, w13, w2, torch.ones(T, 2, device="cuda"), ids, deterministic=det)
    assert torch.equal(y, torch.zeros_like(y))
    expert_map = torch.full((24,), -1, dtype=torch.int32, device="cuda")
    expert_map[16:] = torch.arange(8, dtype=torch.int32, device="cuda")  # experts 16..23 are local
    ids = torch.randint(0, 16, (T, 2), dtype=torch.int32, device="cuda")  # none of them
    y = fused(x, w13, w2, torch.ones(T, 2, device="cuda"), ids, expert_map=expert_map, deterministic=det)
    assert torch.equal(y, torch.zeros_like(y))


def test_zero_tokens():
    w13, w2 = layer(8)
    x = torch.empty(0, H, dtype=torch.bfloat16, device="cuda")
    y = fused(x, w13, w2, torch.empty(0, 2, device="cuda"), torch.empty(0, 2, dtype=torch.int32, device="cuda"))
    assert y.shape == (0, H)


# ------------------------------------------------------------------ determinism, graphs, dispatch


@pytest.mark.parametrize("T,k,E,kind", [(1, 8, 128, "gptq"), (33, 2, 8, "gptq"), (256, 2, 8, "gptq"),
                                        (64, 2, 8, "act"), (1024, 4, 60, "gptq")])
def test_deterministic(T, k, E, kind):
    w13, w2 = layer(E, 4, 128, kind)
    x = xin(T, torch.bfloat16, T)
    ids, weights = routing(T, k, E, "skewed" if T == 256 else "uniform", seed=T)
    y1 = fused(x, w13, w2, weights, ids, deterministic=1)
    check_close(y1, ref_moe(x, w13, w2, weights, ids), torch.bfloat16, "deterministic")
    for _ in range(3):
        torch.empty(int(torch.randint(1, 1 << 20, (1,))), device="cuda")  # shift the allocator
        y2 = fused(x, w13, w2, weights, ids, deterministic=1)
        assert torch.equal(y1, y2), "deterministic mode is not bit-stable"


def test_deterministic_env(monkeypatch):
    w13, w2 = layer(8)
    x = xin(17, torch.bfloat16)
    ids, weights = routing(17, 2, 8, seed=1)
    monkeypatch.setenv("SWORDFISH_DETERMINISTIC", "1")
    y1 = fused(x, w13, w2, weights, ids, deterministic=-1)
    y2 = fused(x, w13, w2, weights, ids, deterministic=-1)
    assert torch.equal(y1, y2)
    monkeypatch.setenv("SWORDFISH_DETERMINISTIC", "maybe")
    with pytest.raises((ValueError, RuntimeError), match="SWORDFISH_DETERMINISTIC"):
        fused(x, w13, w2, weights, ids, deterministic=-1)


@pytest.mark.parametrize("det", [0, 1], ids=["atomic", "deterministic"])
@pytest.mark.parametrize("T,k,E", [(1, 8, 128), (16, 4, 60), (256, 2, 8)])
def test_cuda_graph_replay(T, k, E, det):
    """Capture with one routing, replay with others: the captured sizes never depend on the routing."""
    w13, w2 = layer(E)
    x = xin(T, torch.bfloat16, 1)
    ids, weights = routing(T, k, E, seed=1)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fused(x, w13, w2, weights, ids, deterministic=det)  # warm-up outside the graph
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = ops_fused_moe(x, w13.packed, w13.scales, w13.zeros, w13.perm, w2.packed, w2.scales, w2.zeros, w2.perm,
                          weights, ids, None, w13.bits, w13.group, w13.channelwise, w2.group, w2.channelwise, 0,
                          False, PATH_FUSED, det)
    for seed, kind in ((2, "uniform"), (3, "skewed"), (4, "dup")):
        ids2, weights2 = routing(T, k, E, kind, seed=seed)
        x2 = xin(T, torch.bfloat16, seed)
        ids.copy_(ids2)
        weights.copy_(weights2)
        x.copy_(x2)
        g.replay()
        eager = fused(x2, w13, w2, weights2, ids2, deterministic=det)
        torch.cuda.synchronize()
        if det:
            assert torch.equal(y, eager), f"graph replay ({kind}) differs from eager"
        check_close(y, ref_moe(x2, w13, w2, weights2, ids2), torch.bfloat16, f"graph replay {kind}")


def test_dispatch_surface():
    dev = torch.cuda.current_device()
    assert torch.ops.swordfish.moe_path_names() == "fused,dense,grouped"
    if torch.cuda.get_device_capability(dev)[0] == 9:
        # bf16, top-8 of 128 experts on Hopper: grouped from 32 routed tokens per expert (moe_sm90.hpp), T = 512
        for T, path in ((1, PATH_FUSED), (16, PATH_FUSED), (256, PATH_FUSED), (511, PATH_FUSED), (512, PATH_GROUPED),
                        (4096, PATH_GROUPED)):
            assert torch.ops.swordfish.moe_select_path(T, 8, 128, 2048, 768, 4, 128, 1, dev, False) == path, T
            # act-order experts, which grouped refuses: fused, then dense from 128 per expert (T = 2048)
            act_order_path = PATH_DENSE if T >= 2048 else PATH_FUSED
            assert torch.ops.swordfish.moe_select_path(T, 8, 128, 2048, 768, 4, 128, 1, dev, True) == act_order_path, T
    w13, w2 = layer(8)
    x = xin(4, torch.bfloat16)
    ids, weights = routing(4, 2, 8)
    y = fused(x, w13, w2, weights, ids, path=PATH_DENSE)  # forced: runs at any token count
    assert torch.ops.swordfish.last_moe_path(dev) == PATH_DENSE
    check_close(y, ref_moe(x, w13, w2, weights, ids), torch.bfloat16, "dense")
    with pytest.raises((ValueError, RuntimeError), match="path must be"):
        fused(x, w13, w2, weights, ids, path=7)
    with pytest.raises((ValueError, RuntimeError), match="k mismatch"):
        fused(x, w13, w2, weights[:, :1].contiguous(), ids)
    with pytest.raises((ValueError, RuntimeError), match="E mismatch"):
        ops_fused_moe(x, w13.packed, w13.scales, None, None, w2.packed[:4].contiguous(), w2.scales[:4].contiguous(),
                      None, None, weights, ids, None, 4, w13.group, False, w2.group, False, 0, False, PATH_FUSED, 0)
    with pytest.raises((ValueError, RuntimeError), match="top_k == 1"):
        fused(x, w13, w2, weights, ids, weights_on_input=True)
    y = fused(x, w13, w2, weights, ids, path=PATH_AUTO)
    assert torch.ops.swordfish.last_moe_path(dev) == PATH_FUSED
    check_close(y, ref_moe(x, w13, w2, weights, ids), torch.bfloat16, "auto")


# ------------------------------------------------------------------ sanitizer cases


@pytest.mark.sanitize
@pytest.mark.parametrize("det", [0, 1], ids=["atomic", "deterministic"])
@pytest.mark.parametrize("bits,group,kind,T", [(4, 64, "zeros", 5), (8, 128, "act", 3), (4, 128, "gptq", 40),
                                               (4, 128, "gptq", 64)],
                         ids=["int4-zeros-swap", "int8-act-order-fold-swap", "int4-mt1", "int4-mt2"])
def test_sanitize_small(bits, group, kind, T, det):
    """Every kernel once per mode: align (+ zeroing, + the act-order gather), the expert GEMM on 8-row
    blocks (the swap kernel, plain and FOLD: T = 3, 5 of top-2 of 8), MT = 1 (T = 40: 10 tokens per expert
    on average, 16-row blocks) and MT = 2 (T = 64: 16, 32-row blocks), activation (+ permuted write),
    finalize."""
    w13, w2 = layer(8, bits, group, kind)
    x = xin(T, torch.bfloat16, 1)
    ids, weights = routing(T, 2, 8, "skewed" if T == 64 else "uniform", seed=2)
    y = fused(x, w13, w2, weights, ids, deterministic=det)
    check_close(y, ref_moe(x, w13, w2, weights, ids), torch.bfloat16, "sanitize")
