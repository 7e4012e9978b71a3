"""The --peers adapters against the installed vLLM 0.33, on CPU (skipped when vLLM is not installed).

vLLM's CPU build has no CUDA ops (torch.ops._C.marlin_gemm is not registered), so the contract is read from
vLLM's Python: each op of peers.OPS has a vllm._custom_ops wrapper with the same parameters, and the wrapper
forwards them to torch.ops.<ns>.<op> in that order (read from its source); the scalar-type ids, the Marlin
scale layout (vLLM's marlin_permute_scales runs on CPU), Machete's and Marlin's shape rules and the MoE block
size rule are vLLM's. Also: --peers loads vLLM and says which ops this build lacks; importing the bench does
not import vLLM.
"""

from __future__ import annotations

import pytest
import vllm_cpu  # noqa: F401 - first: vLLM's CPU platform (skips this module without vLLM)

import ast
import inspect
import pathlib
import subprocess
import sys
import textwrap

import torch

import vllm._custom_ops as vops
from swordfish_backend import peers

WRAPPED = [name for name in peers.OPS if name != "silu_and_mul"]


def forwarded(fn, ns: str, name: str) -> list:
    """The argument expressions the wrapper passes to torch.ops.<ns>.<name> (its longest such call), `.id` off."""
    calls = [node for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(fn))))
             if isinstance(node, ast.Call) and ast.unparse(node.func) == f"torch.ops.{ns}.{name}"]
    assert calls, f"{fn.__name__} does not call torch.ops.{ns}.{name}"
    call = max(calls, key=lambda c: len(c.args))
    assert not call.keywords
    return [ast.unparse(a).removesuffix(".id") for a in call.args]


@pytest.mark.parametrize("name", WRAPPED)
def test_adapter_args_match_vllm_wrappers(name):
    ns, args = peers.OPS[name]
    fn = getattr(vops, name)
    assert tuple(inspect.signature(fn).parameters) == args
    assert forwarded(fn, ns, name) == list(args)


def test_silu_and_mul_is_called_out_then_input():
    from vllm.model_executor.layers.activation import SiluAndMul

    src = inspect.getsource(SiluAndMul)
    assert "torch.ops._C.silu_and_mul" in src and "self.op(out, x)" in src
    assert peers.OPS["silu_and_mul"] == ("_C", ("out", "input"))


def test_scalar_type_ids():
    from vllm.scalar_type import scalar_types

    assert peers.SCALAR_TYPE_IDS == {4: scalar_types.uint4b8.id, 8: scalar_types.uint8b128.id}
    assert peers.ZP_SCALAR_TYPE_IDS == {4: scalar_types.uint4.id}


@pytest.mark.parametrize("K,N,group", [(256, 128, 128), (512, 192, 64), (256, 128, 32), (128, 64, 128)])
def test_marlin_zero_points_match_vllm(K, N, group):
    # AWQ's packed qzeros -> Marlin's zero points, as vLLM's AWQ Marlin path makes them (pure torch, runs on CPU)
    from vllm.model_executor.layers.quantization.utils import marlin_utils

    from swordfish_backend import checkpoints

    gen = torch.Generator().manual_seed(K + N + group)
    rows = K // group
    qzeros = torch.randint(-2**31, 2**31, (rows, N // 8), generator=gen, dtype=torch.int64).to(torch.int32)
    want = marlin_utils.awq_to_marlin_zero_points(qzeros, rows, N, 4)
    assert torch.equal(peers.marlin_zero_points(checkpoints.unpack_awq(qzeros)), want)
    experts = torch.randint(-2**31, 2**31, (3, rows, N // 8), generator=gen, dtype=torch.int64).to(torch.int32)
    want = marlin_utils.moe_awq_to_marlin_zero_points(experts, rows, N, 4)
    got = torch.stack([peers.marlin_zero_points(checkpoints.unpack_awq(z)) for z in experts])
    assert torch.equal(got, want)


def test_awq_marlin_preparation_is_vllms():
    # vLLM's AWQ Marlin MoE weights: awq_marlin_moe_repack and moe_awq_to_marlin_zero_points per weight; AWQ is uint4
    from vllm.model_executor.layers.fused_moe.oracle import int_wna16
    from vllm.model_executor.layers.quantization import auto_awq

    src = inspect.getsource(int_wna16._process_awq_weights_marlin)
    assert src.count("ops.awq_marlin_moe_repack(") == 2 and src.count("moe_awq_to_marlin_zero_points(") == 2
    assert "self.quant_type = scalar_types.uint4\n" in inspect.getsource(auto_awq)


@pytest.mark.parametrize("K,N,group", [(256, 128, 128), (512, 192, 64), (256, 128, 32), (256, 128, -1),
                                       (128, 64, 128)])
def test_marlin_scales_match_vllm(K, N, group):
    from vllm.model_executor.layers.quantization.utils import marlin_utils

    rows = 1 if group in (-1, K) else K // group
    s = torch.randn(rows, N).to(torch.bfloat16)
    assert torch.equal(peers.marlin_scales(s, K, group), marlin_utils.marlin_permute_scales(s, K, N, group))
    e = torch.randn(3, rows, N).to(torch.bfloat16)
    assert torch.equal(peers.marlin_scales(e, K, group), marlin_utils.marlin_moe_permute_scales(e, K, N, group))


def test_shape_and_group_rules_are_vllms():
    from vllm.model_executor.layers.quantization.utils import machete_utils, marlin_utils

    assert machete_utils.query_machete_supported_group_sizes(torch.bfloat16) == [-1, 64, 128]
    assert machete_utils.MACHETE_PREPACKED_BLOCK_SHAPE == [64, 128]
    assert (marlin_utils.GPTQ_MARLIN_MIN_THREAD_N, marlin_utils.GPTQ_MARLIN_MIN_THREAD_K) == (64, 128)
    assert marlin_utils.MARLIN_MAX_BLOCKS_PER_SM == peers.MARLIN_LOCKS_PER_SM
    kw = dict(bits=4, group=128, dtype=torch.bfloat16)
    assert "K % 64" in peers.ADAPTERS["machete"].supports(4000, 128, **kw)
    assert "K % 128" in peers.ADAPTERS["marlin"].supports(4000, 128, **kw)


def test_marlin_moe_sequence_is_vllms():
    from vllm.model_executor.layers.fused_moe.experts import marlin_moe

    src = inspect.getsource(marlin_moe.fused_marlin_moe)
    assert "for block_size_m in [8, 16, 32, 48, 64]:" in src and "M * topk / E / block_size_m < 0.9" in src
    inner = inspect.getsource(marlin_moe._fused_marlin_moe)
    assert inner.count("use_fp32_reduce=True") == 2 and inner.count("use_atomic_add=False") == 2
    assert "top_k=1" in inner  # the second GEMM: one row per routed slot, router weights applied in it


def test_load_vllm_and_name_the_missing_ops():
    source = peers.load()
    assert source.error is None and source.label.startswith("vLLM 0.33")
    why = peers.reason("marlin", source, device=None)
    if not hasattr(torch.ops._C, "gptq_marlin_repack"):  # the CPU build: CUDA ops absent
        assert why == ("torch.ops._C.gptq_marlin_repack is not registered; "
                       "torch.ops._C.awq_marlin_repack is not registered; "
                       "torch.ops._C.marlin_gemm is not registered")
    moe_why = peers.reason("marlin_moe", source, device=None)
    assert moe_why is None or "is not registered" in moe_why


def test_bench_does_not_import_vllm():
    root = str(pathlib.Path(__file__).resolve().parents[1])
    code = ("import sys; sys.path.insert(0, %r); "
            # this tree, not an editable install of another checkout (its import hook comes before sys.path)
            "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__]; "
            "import swordfish_backend.cli, swordfish_backend.bench, swordfish_backend.bench_moe, "
            "swordfish_backend.peers; assert swordfish_backend.peers.__file__.startswith(%r); "
            "assert 'vllm' not in sys.modules, 'vllm imported'") % (root, root)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
