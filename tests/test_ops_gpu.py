"""The op layer on CUDA: torch.library.opcheck over every op, CUDA-graph capture,
side streams, argument checks, and the path the dispatcher reports.

Numerics per path are the kernel tests' job; here every gemm result is only
compared with an fp32 reference at a loose bound (relative Frobenius error
< 1e-2) to catch wiring mistakes (wrong pointer, wrong stream, wrong dtype).
"""

from __future__ import annotations

import pytest
import torch

from swordfish_backend import format as fmt
from swordfish_backend import ops

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(not ops.has_extension(), reason=f"needs the extension: {ops.extension_error()}"),
]


class Problem:
    """Random op arguments for one (M, K, N, bits, group, dtype) problem, and its fp32 reference."""

    def __init__(self, M=8, K=256, N=192, bits=4, group=128, dtype=torch.bfloat16, zeros=False, act_order=False,
                 bias=False, seed=0):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        self.M, self.K, self.N, self.bits, self.group, self.dtype = M, K, N, bits, group, dtype
        self.q = torch.randint(0, 1 << bits, (K, N), generator=gen, device="cuda").to(torch.uint8)
        self.perm = (torch.randperm(K, generator=gen, device="cuda").to(torch.int32) if act_order else None)
        sorted_q = self.q if self.perm is None else self.q[self.perm.long()]
        self.packed = fmt.pack_reference(sorted_q, bits)
        scale = 0.02 if bits == 4 else 0.002
        self.scales = (torch.rand((K // group, N), generator=gen, device="cuda") * scale + scale / 4).to(dtype)
        self.zeros = ((torch.rand((K // group, N), generator=gen, device="cuda") - 0.5) * scale).to(dtype) if zeros \
            else None
        self.bias = torch.randn((N,), generator=gen, device="cuda").to(dtype) if bias else None
        self.x = torch.randn((M, K), generator=gen, device="cuda").to(dtype)

    def weight_args(self):
        return (self.packed, self.scales, self.zeros, self.perm, self.bits, self.group, False)

    def gemm_args(self, path=ops.PATH_AUTO, deterministic=1):
        return (self.x, self.packed, self.scales, self.zeros, self.perm, self.bias, self.bits, self.group, False,
                path, deterministic)

    def weight_ref(self) -> torch.Tensor:
        """(N, K) fp32, original input-feature order, each value rounded once to dtype."""
        rows = torch.arange(self.K, device="cuda") // self.group
        sorted_q = (self.q if self.perm is None else self.q[self.perm.long()]).float()
        w = (sorted_q - fmt.bias(self.bits)) * self.scales.float()[rows]
        if self.zeros is not None:
            w = w + self.zeros.float()[rows]
        w = w.to(self.dtype).float()
        if self.perm is not None:
            out = torch.empty_like(w)
            out[self.perm.long()] = w
            w = out
        return w.t().contiguous()

    def gemm_ref(self) -> torch.Tensor:
        y = self.x.float() @ self.weight_ref().t()
        return y if self.bias is None else y + self.bias.float()


def rel_frobenius(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30))


# ------------------------------------------------------------------ opcheck


@pytest.mark.parametrize("bits", [4, 8])
def test_opcheck_gemm(bits):
    p = Problem(bits=bits, zeros=True, bias=True)
    torch.library.opcheck(torch.ops.swordfish.gemm.default, p.gemm_args())


def test_opcheck_gemm_act_order():
    p = Problem(act_order=True)
    torch.library.opcheck(torch.ops.swordfish.gemm.default, p.gemm_args())


@pytest.mark.parametrize("bits", [4, 8])
def test_opcheck_dequantize(bits):
    p = Problem(bits=bits, zeros=True, act_order=True)
    torch.library.opcheck(torch.ops.swordfish.dequantize.default, (*p.weight_args(), p.K))


def test_opcheck_prepack():
    p = Problem()
    torch.library.opcheck(torch.ops.swordfish.prepack.default, (fmt.pack_k(p.q, 4), p.perm, 4))


def test_opcheck_int_ops():
    # No tensor arguments: only the schema test applies.
    torch.library.opcheck(torch.ops.swordfish.select_path.default, (1, 4096, 4096, 4, 128, False, False, False, 1, 0),
                          test_utils="test_schema")
    torch.library.opcheck(torch.ops.swordfish.can_implement.default,
                          (1, 4096, 4096, 4, 128, False, False, False, 1, 0, 0), test_utils="test_schema")
    torch.library.opcheck(torch.ops.swordfish.last_path.default, (0,), test_utils="test_schema")
    torch.library.opcheck(torch.ops.swordfish.abi_info.default, (), test_utils="test_schema")
    torch.library.opcheck(torch.ops.swordfish.path_names.default, (), test_utils="test_schema")


# ------------------------------------------------------ results and paths


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M", [1, 16, 33, 256])
def test_gemm_matches_reference(M, dtype):
    p = Problem(M=M, dtype=dtype, zeros=True, bias=True, act_order=M == 33)
    y = ops.gemm(*p.gemm_args())
    assert y.shape == (M, p.N) and y.dtype == dtype and y.device == p.x.device
    assert rel_frobenius(y, p.gemm_ref()) < 1e-2
    chosen = ops.last_path(p.x.device.index)
    assert chosen in (ops.PATH_DECODE, ops.PATH_DENSE, ops.PATH_PREFILL)
    expected = ops.select_path(M, p.K, p.N, p.bits, p.group, False, True, p.perm is not None,
                               ops.DTYPE_CODES[dtype], p.x.device.index)
    assert chosen == expected


def test_gemm_m0_returns_empty():
    p = Problem(M=1)
    x = p.x[:0]
    y = ops.gemm(x, *p.gemm_args()[1:])
    assert y.shape == (0, p.N)


def test_dequantize_matches_reference():
    p = Problem(zeros=True, act_order=True)
    w = ops.dequantize(*p.weight_args(), p.K)
    assert w.shape == (p.N, p.K) and w.dtype == p.dtype
    assert torch.equal(w.float(), p.weight_ref())


@pytest.mark.parametrize("path", [ops.PATH_DECODE, ops.PATH_DENSE, ops.PATH_PREFILL])
@pytest.mark.parametrize("N", [256, 320])  # 320: not a multiple of 128 (no prefill)
def test_forced_path_runs_or_names_why(path, N):
    """gemm runs a forced path exactly when can_implement says it can, and otherwise raises with
    can_implement's reason."""
    p = Problem(M=64, K=512, N=N)
    expected = ops.can_implement(p.M, p.K, p.N, p.bits, p.group, False, False, False, ops.DTYPE_CODES[p.dtype],
                                 path, p.x.device.index)
    why = None
    try:
        y = ops.gemm(*p.gemm_args(path=path))
    except ValueError as e:
        why = str(e)
    if why is None:
        assert expected == ""
        assert ops.last_path(p.x.device.index) == path
        assert rel_frobenius(y, p.gemm_ref()) < 1e-2
    else:
        assert expected != "" and why.startswith("swordfish.gemm: path ")
        assert why.endswith("cannot run this problem: " + expected), (why, expected)


def test_can_implement_auto_names_the_selected_path():
    """can_implement(path=auto) answers for the path select_path picks; on this device's table
    every (shape, M) of a small grid has a runnable path."""
    dev = torch.cuda.current_device()
    for M in (1, 16, 64, 256, 4096):
        for K, N in ((512, 256), (4096, 4096), (4096, 4160)):
            assert ops.can_implement(M, K, N, 4, 128, False, False, False, 1, ops.PATH_AUTO, dev) == ""
            chosen = ops.select_path(M, K, N, 4, 128, False, False, False, 1, dev)
            assert ops.can_implement(M, K, N, 4, 128, False, False, False, 1, chosen, dev) == ""


def test_plugin_support_rules_agree_with_the_library():
    """swordfish_backend.vllm.selection.support_reason (format.py's rules, what Python can say without
    the extension) accepts a layer exactly when the C++ predicate does (library_reason)."""
    from swordfish_backend.vllm import selection

    dev = torch.cuda.current_device()
    for bits, has_zp in ((4, False), (8, False), (4, True)):
        for group in (32, 64, 128, -1, 96):
            for K, N in ((4096, 4096), (4096 + 64, 4096), (4000, 4096), (4096, 4100), (14336, 4160), (96, 64)):
                kwargs = dict(bits=bits, has_zero_points=has_zp, group_size=group, act_dtype="bfloat16",
                              in_features=K, out_features=N)
                fallback = selection.support_reason(out_dtype=None, **kwargs)
                library = selection.library_reason(device_index=dev, **kwargs)
                assert (fallback is None) == (library is None), (kwargs, fallback, library)


def test_deterministic_env_read_per_call(monkeypatch):
    p = Problem(M=16)
    monkeypatch.setenv("SWORDFISH_DETERMINISTIC", "1")
    runs = [ops.gemm(*p.gemm_args(deterministic=-1)) for _ in range(5)]
    assert all(torch.equal(runs[0], r) for r in runs[1:])
    monkeypatch.setenv("SWORDFISH_DETERMINISTIC", "maybe")
    with pytest.raises(ValueError, match="SWORDFISH_DETERMINISTIC must be 0 or 1 .*got 'maybe'"):
        ops.gemm(*p.gemm_args(deterministic=-1))
    monkeypatch.setenv("SWORDFISH_DETERMINISTIC", "0")
    ops.gemm(*p.gemm_args(deterministic=-1))


# ------------------------------------------------------ streams and graphs


def test_gemm_and_dequantize_on_side_stream():
    p = Problem(M=16, zeros=True)
    ref_y, ref_w = ops.gemm(*p.gemm_args()), ops.dequantize(*p.weight_args(), p.K)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = ops.gemm(*p.gemm_args())
        w = ops.dequantize(*p.weight_args(), p.K)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    assert torch.equal(y, ref_y) and torch.equal(w, ref_w)


def test_cuda_graph_mixed_m():
    """One graph holding gemms at several M (different paths) and a dequantize replays like eager."""
    problems = [Problem(M=m, K=512, N=256, seed=m) for m in (1, 16, 48, 96, 512)]
    eager = [ops.gemm(*p.gemm_args()) for p in problems]
    eager_w = ops.dequantize(*problems[0].weight_args(), problems[0].K)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for p in problems:
            ops.gemm(*p.gemm_args())
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = [ops.gemm(*p.gemm_args()) for p in problems]
        out_w = ops.dequantize(*problems[0].weight_args(), problems[0].K)
    for o in outs:
        o.fill_(float("nan"))
    out_w.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    for o, e in zip(outs, eager):
        assert torch.equal(o, e)
    assert torch.equal(out_w, eager_w)


# --------------------------------------------------------------- bad input


def _bad(p: Problem, **overrides):
    args = dict(zip(("x", "packed", "scales", "zeros", "perm", "bias", "bits", "group", "channelwise", "path",
                     "deterministic"), p.gemm_args()))
    args.update(overrides)
    return tuple(args.values())


@pytest.mark.parametrize(
    "override, match",
    [
        (lambda p: dict(x=p.x.float()), "x must be torch.float16 or torch.bfloat16, got torch.float32"),
        (lambda p: dict(x=p.x.cpu()), "x must be a CUDA tensor, got one on cpu"),
        (lambda p: dict(x=p.x.t()), "x must be contiguous"),
        (lambda p: dict(x=p.x[:, :128].contiguous()), r"x.size\(1\) must equal the packed weight's K = 256.*got 128"),
        (lambda p: dict(x=p.x[:, :192].contiguous()), r"x.size\(1\) must equal the packed weight's K = 256.*got 192"),
        (lambda p: dict(x=p.x[:, :100].contiguous()), r"K = 256.*got 100"),
        (lambda p: dict(x=p.x[:, :128].contiguous(), perm=torch.arange(256, dtype=torch.int32, device="cuda")),
         None),  # act-order: x may be narrower than the packed K (the padded layout); not an error
        (lambda p: dict(scales=p.scales.half()), "scales.dtype must equal x.dtype"),
        (lambda p: dict(scales=p.scales[:1]), r"scales must have shape \(2, 192\), got \(1, 192\)"),
        (lambda p: dict(zeros=p.scales[:, :64].contiguous()), r"zeros must have shape \(2, 192\)"),
        (lambda p: dict(perm=torch.arange(256, device="cuda")), "perm must be torch.int32, got torch.int64"),
        (lambda p: dict(perm=torch.arange(128, dtype=torch.int32, device="cuda")), r"perm must have shape \(256,\)"),
        (lambda p: dict(bias=torch.zeros(64, dtype=p.dtype, device="cuda")), r"bias must have shape \(192,\)"),
        (lambda p: dict(bias=torch.zeros(192, device="cuda")), "bias.dtype must equal x.dtype"),
        (lambda p: dict(bits=3), "bits must be 4 or 8, got 3"),
        (lambda p: dict(group=96), "group must be 32, 64 or 128"),
        (lambda p: dict(packed=p.packed.float()), "packed must be torch.int32"),
        (lambda p: dict(path=7), "path must be 0 .auto., 1 .decode., 2 .dense. or 3 .prefill., got 7"),
        (lambda p: dict(deterministic=2), "deterministic must be -1"),
    ],
)
def test_gemm_bad_input(override, match):
    p = Problem()
    if match is None:
        ops.gemm(*_bad(p, **override(p)))
        return
    with pytest.raises(ValueError, match=match):
        ops.gemm(*_bad(p, **override(p)))


def test_select_path_bad_input():
    with pytest.raises(ValueError, match="dtype must be 0 .float16. or 1 .bfloat16., got 2"):
        ops.select_path(1, 4096, 4096, 4, 128, False, False, False, 2, 0)
    with pytest.raises(ValueError, match="N = 100"):
        ops.select_path(1, 4096, 100, 4, 128, False, False, False, 1, 0)
    with pytest.raises(RuntimeError, match="cannot query CUDA device"):
        ops.select_path(1, 4096, 4096, 4, 128, False, False, False, 1, torch.cuda.device_count())
