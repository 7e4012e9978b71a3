"""The vLLM plugin on CPU, against the real vLLM 0.33 (skipped when vLLM is not installed).

Covers: register() (idempotent, CUDA-free, kill switch, version gate), the
CLI / config surface of --linear-backend and --moe-backend, which
quantization config claims which checkpoint, can_implement reasons,
selection under faked CUDA platforms, and vLLM's own linear layers loading a
checkpoint written here by an independent packer, prepacking, and matching
the fp64 reference on CPU (the reference path), tensor parallelism simulated
rank by rank.
"""

from __future__ import annotations

import pytest
import vllm_cpu  # first: vLLM's CPU platform, the plugin registered (skips this module without vLLM)
from vllm_cpu import AWQ_ORDER, pack_cols, pack_rows  # noqa: E402 (the checkpoint layouts)

import contextlib
import pathlib

import torch

import swordfish_backend.vllm as plugin
import vllm.model_executor.kernels.linear as vlinear
import vllm.model_executor.layers.linear as vlayers
import vllm.model_executor.parameter as vparam
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.config.kernel import KernelConfig
from vllm.model_executor.layers.quantization.auto_awq import AutoAWQConfig
from vllm.model_executor.layers.quantization.auto_gptq import AutoGPTQConfig
from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import (
    CompressedTensorsConfig,
)
from vllm.platforms import PlatformEnum
from vllm.scalar_type import scalar_types

from swordfish_backend.vllm import act_order, kernel, moe_method, patches, selection
from swordfish_backend.vllm.kernel import SwordfishLinearKernel

REPO = pathlib.Path(__file__).resolve().parents[1]


# --------------------------------------------------------------- helpers


@pytest.fixture
def cuda_platform(monkeypatch):
    """fake(capability): make vLLM's kernel selection and ours see a CUDA device; the extension counts as built."""
    return vllm_cpu.cuda_faker(monkeypatch, vlinear)


@contextlib.contextmanager
def tensor_parallel(rank: int, size: int):
    """Simulate tensor-parallel rank `rank` of `size` for vLLM's layers and parameters (no process group)."""
    saved = [(m, n, getattr(m, n)) for m in (vlayers, vparam)
             for n in ("get_tensor_model_parallel_rank", "get_tensor_model_parallel_world_size")]
    for m in (vlayers, vparam):
        m.get_tensor_model_parallel_rank = lambda: rank
        m.get_tensor_model_parallel_world_size = lambda: size
    try:
        yield
    finally:
        for m, n, f in saved:
            setattr(m, n, f)


def mp_config(K=4096, N=4096, wtype=scalar_types.uint4b8, act=torch.float16, group=128, zp=False):
    return vlinear.MPLinearLayerConfig(full_weight_shape=(K, N), partition_weight_shape=(K, N), weight_type=wtype,
                                       act_type=act, group_size=group, zero_points=zp)


# ------------------------------------------------------ registration


def test_register_is_idempotent_and_cuda_free():
    kernels = list(vlinear._POSSIBLE_KERNELS[PlatformEnum.CUDA])
    mapped = set(vlinear._LINEAR_BACKEND_KERNEL_MAP["swordfish"])
    plugin.register()
    patches.apply_all(SwordfishLinearKernel, moe_method.choose)  # even re-applying every patch changes nothing
    act_order.register_configs()
    assert vlinear._POSSIBLE_KERNELS[PlatformEnum.CUDA] == kernels
    assert kernels[0] is SwordfishLinearKernel and kernels.count(SwordfishLinearKernel) == 1
    assert vlinear._LINEAR_BACKEND_KERNEL_MAP["swordfish"] == mapped
    assert SwordfishLinearKernel in mapped and vlinear.MarlinLinearKernel in mapped
    import typing

    import vllm.config.kernel as kc
    assert typing.get_args(kc.LinearBackend).count("swordfish") == 1
    assert typing.get_args(kc.MoEBackend).count("swordfish") == 1
    assert not patches.extend_backend_literals()
    assert not torch.cuda.is_initialized()


def test_kill_switch_and_version_gate(monkeypatch):
    calls = []
    monkeypatch.setattr(plugin, "_registered", False)
    monkeypatch.setattr(patches, "apply_all", lambda *a: calls.append("patches"))
    monkeypatch.setattr(act_order, "register_configs", lambda: calls.append("configs"))
    monkeypatch.setenv("SWORDFISH_DISABLE", "1")
    plugin.register()
    assert calls == [] and not plugin._registered
    monkeypatch.setenv("SWORDFISH_DISABLE", "0")
    monkeypatch.setattr(plugin.importlib.metadata, "version", lambda name: "0.34.0")
    plugin.register()
    assert calls == [] and not plugin._registered
    assert "outside the tested range" in plugin.version_reason("0.34.0")
    assert "outside the tested range" in plugin.version_reason("0.32.9")
    assert plugin.version_reason("0.33.0") is None and plugin.version_reason("0.33.2.dev5+g1234") is None
    monkeypatch.setattr(plugin.importlib.metadata, "version", lambda name: "0.33.1")
    plugin.register()
    assert calls == ["patches", "configs"] and plugin._registered


def test_kill_switch_is_read_at_call_time(monkeypatch, cuda_platform):
    cuda_platform((10, 0))
    assert SwordfishLinearKernel.can_implement(mp_config()) == (True, None)
    monkeypatch.setenv("SWORDFISH_DISABLE", "1")
    ok, reason = SwordfishLinearKernel.can_implement(mp_config())
    assert not ok and "SWORDFISH_DISABLE" in reason
    assert act_order.SwordfishGPTQConfig.override_quantization_method(
        {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True, "sym": True}, None) is None


def test_entry_point_declared_in_pyproject():
    tomllib = pytest.importorskip("tomllib", reason="Python < 3.11")
    project = tomllib.loads((REPO / "pyproject.toml").read_text()).get("project", {})
    plugins = project.get("entry-points", {}).get("vllm.general_plugins", {})
    if "swordfish" not in plugins:
        pytest.skip("pyproject.toml does not declare the vllm.general_plugins entry point yet")
    assert plugins["swordfish"] == "swordfish_backend.vllm:register"
    import importlib
    module, attr = plugins["swordfish"].split(":")
    assert getattr(importlib.import_module(module), attr) is plugin.register


# ------------------------------------------------------- CLI and config


def test_serve_parser_accepts_swordfish_backends():
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    args = parser.parse_args(["--model", "m", "--linear-backend", "swordfish", "--moe-backend", "Swordfish"])
    assert (args.linear_backend, args.moe_backend) == ("swordfish", "swordfish")
    args = parser.parse_args(["--model", "m", "--kernel-config", '{"linear_backend": "swordfish"}'])
    assert args.kernel_config.linear_backend == "swordfish"
    with pytest.raises(SystemExit):
        parser.parse_args(["--model", "m", "--linear-backend", "swordfsh"])


def test_kwargs_and_json_reach_kernel_config():
    from pydantic import TypeAdapter, ValidationError
    from vllm.engine.arg_utils import EngineArgs

    assert KernelConfig(linear_backend="swordfish").linear_backend == "swordfish"
    assert KernelConfig(linear_backend_per_quant={"mixed_precision": "swordfish"}).linear_backend_per_quant
    assert TypeAdapter(KernelConfig).validate_json('{"moe_backend": "swordfish"}').moe_backend == "swordfish"
    assert VllmConfig(kernel_config={"linear_backend": "swordfish"}).kernel_config.linear_backend == "swordfish"
    assert EngineArgs(model="m", linear_backend="swordfish").linear_backend == "swordfish"
    assert EngineArgs(model="m", kernel_config={"linear_backend": "swordfish"}).kernel_config.linear_backend == \
        "swordfish"
    with pytest.raises(ValidationError):
        KernelConfig(linear_backend="swordfsh")


# ---------------------------------------------------- checkpoint claims

GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
CT_GROUP = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128,
            "dynamic": False, "actorder": None}


def ct_config(weights: dict, **extra) -> dict:
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": dict(weights),
                                          "input_activations": None, **extra}}}


@pytest.mark.parametrize("cfg, user, claimed", [
    ({**GPTQ, "desc_act": True}, None, True),
    ({**GPTQ, "desc_act": True}, "gptq_marlin", True),
    ({**GPTQ, "desc_act": True, "bits": 8}, None, True),
    ({**GPTQ, "desc_act": True}, "awq", False),
    ({**GPTQ, "desc_act": True, "group_size": -1}, None, False),  # act-order is a no-op: vLLM serves it
    (GPTQ, None, False),
    (GPTQ, "swordfish_gptq", True),
    ({**GPTQ, "dynamic": {r"+:.*\.1\..*": {"desc_act": True}}}, None, True),
    ({**GPTQ, "dynamic": {r"-:.*\.1\..*": {"desc_act": True}}}, None, False),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, None, False),
])
def test_gptq_claims(cfg, user, claimed):
    got = act_order.SwordfishGPTQConfig.override_quantization_method(cfg, user)
    assert got == (act_order.GPTQ_NAME if claimed else None)


@pytest.mark.parametrize("actorder, claimed", [("group", True), ("dynamic", True), ("weight", False),
                                               ("static", False), (None, False)])
def test_compressed_tensors_claims(actorder, claimed):
    cfg = ct_config({**CT_GROUP, "actorder": actorder})
    got = act_order.SwordfishCompressedTensorsConfig.override_quantization_method(cfg, None)
    assert got == (act_order.CT_NAME if claimed else None)
    assert act_order.SwordfishGPTQConfig.override_quantization_method(cfg, None) is None


def test_vllm_refuses_what_the_plugin_claims():
    with pytest.raises(ValueError, match="desc_act"):
        AutoGPTQConfig.from_config({**GPTQ, "desc_act": True})
    with pytest.raises(ValueError, match="actorder"):
        CompressedTensorsConfig.from_config(ct_config({**CT_GROUP, "actorder": "group"}))
    gptq = act_order.SwordfishGPTQConfig.from_config({**GPTQ, "desc_act": True})
    assert gptq.desc_act and gptq.get_name() == "swordfish_gptq"
    ct = act_order.SwordfishCompressedTensorsConfig.from_config(ct_config({**CT_GROUP, "actorder": "group"}))
    assert ct.target_scheme_map["Linear"]["weights"].actorder == "group"


def test_registered_with_vllm():
    from vllm.model_executor.layers.quantization import (
        QUANTIZATION_METHODS,
        get_quantization_config,
    )
    for name, cls in ((act_order.GPTQ_NAME, act_order.SwordfishGPTQConfig),
                      (act_order.CT_NAME, act_order.SwordfishCompressedTensorsConfig)):
        assert name in QUANTIZATION_METHODS and get_quantization_config(name) is cls


# ------------------------------------------------ can_implement / selection


@pytest.mark.parametrize("kwargs, reason", [
    ({}, None),
    ({"act": torch.bfloat16, "group": 32}, None),
    ({"wtype": scalar_types.uint8b128, "group": -1}, None),
    ({"wtype": scalar_types.uint4, "zp": True, "group": 64}, None),
    ({"act": torch.int8}, "weight-only"),
    ({"act": torch.float8_e4m3fn}, "weight-only"),
    ({"group": 256}, "group size 256"),
    ({"N": 4100}, "multiple of 64"),
    ({"K": 4000}, "multiple of 64"),
    ({"K": 4096 + 64, "group": 128}, "does not divide"),
    ({"wtype": scalar_types.uint4, "zp": False}, "needs zero points"),
    ({"wtype": scalar_types.uint4b8, "zp": True}, "takes no zero points"),
    ({"wtype": scalar_types.uint8, "zp": True}, "weight type uint8"),
    ({"wtype": scalar_types.uint2b2}, "weight type uint2b2"),
])
def test_layer_reasons(kwargs, reason):
    got = kernel.layer_reason(mp_config(**kwargs))
    if reason is None:
        assert got is None
    else:
        assert got is not None and reason in got, got


def test_not_cuda_is_refused():
    ok, reason = SwordfishLinearKernel.can_implement(mp_config())
    assert not ok and "CUDA" in reason


@pytest.mark.parametrize("capability", [(10, 0), (11, 0)])
def test_auto_picks_swordfish_on_blackwell(cuda_platform, capability):
    cuda_platform(capability)
    assert vlinear.choose_mp_linear_kernel(mp_config()) is SwordfishLinearKernel
    assert vlinear.choose_mp_linear_kernel(mp_config(wtype=scalar_types.uint4, zp=True)) is SwordfishLinearKernel


def test_sm90_is_opt_in(cuda_platform):
    with set_current_vllm_config(VllmConfig(kernel_config=KernelConfig(linear_backend="swordfish"))):
        cuda_platform((9, 0))
        assert vlinear.choose_mp_linear_kernel(mp_config()) is SwordfishLinearKernel
    assert not selection.AUTO_SELECT[9]  # flip when the H200 measurements say so (docs/VLLM.md)
    ok, reason = SwordfishLinearKernel.can_implement(mp_config())
    assert not ok and "opt-in" in reason and "--linear-backend swordfish" in reason
    try:
        chosen = vlinear.choose_mp_linear_kernel(mp_config())
    except ValueError as e:  # vLLM's own CUDA kernels do not import on a CPU-only build
        assert "opt-in" in str(e)
    else:
        assert chosen is not SwordfishLinearKernel


@pytest.mark.parametrize("capability", [(12, 0), (10, 3), (8, 0)])
def test_unbuilt_arch_is_refused(cuda_platform, capability):
    cuda_platform(capability)
    ok, reason = SwordfishLinearKernel.can_implement(mp_config())
    assert not ok and f"sm{capability[0]}{capability[1]}" in reason


def test_arch_table():
    assert selection.runs_on("100a", (10, 0)) and not selection.runs_on("100a", (10, 3))
    assert selection.runs_on("90", (9, 0)) and not selection.runs_on("90", (10, 0))
    assert selection.arch_reason((9, 0), ["90a"]) is None and "sm_90a" in selection.arch_reason((10, 0), ["90a"])


def test_swordfish_backend_falls_back_per_layer(cuda_platform):
    with set_current_vllm_config(VllmConfig(kernel_config=KernelConfig(linear_backend="swordfish"))):
        cuda_platform((10, 0))
        filtered = vlinear._resolve_backend_kernels(vlinear._POSSIBLE_KERNELS[PlatformEnum.CUDA], "mp",
                                                    quantization="mixed_precision")
        assert filtered[0] is SwordfishLinearKernel and len(filtered) > 1  # vLLM's kernels stay behind it
        ok, reason = SwordfishLinearKernel.can_implement(mp_config(N=4100))
        assert not ok and "multiple of 64" in reason


# -------------------------------------------- end to end through vLLM layers



def make_g_idx(K: int, group: int, act_order_: bool, gen) -> torch.Tensor:
    """Group of each input row: contiguous, or as act-order (desc_act) quantization writes it: rows taken in
    the order of a (random) Hessian diagonal, the i-th joining group i // group, so groups interleave."""
    g_idx = torch.arange(K) // (K if group == -1 else group)
    if not act_order_:
        return g_idx
    order = torch.argsort(torch.rand(K, generator=gen), descending=True)
    out = torch.empty_like(g_idx)
    out[order] = g_idx
    return out


def make_shard(fmt: str, K: int, N: int, bits: int, group: int, dtype, g_idx: torch.Tensor, act_order_: bool,
               gen) -> tuple[dict, torch.Tensor]:
    """Checkpoint tensors of one (unfused) linear weight, and its dense fp64 value W (N, K)."""
    G = 1 if group == -1 else K // group
    q = torch.randint(0, 1 << bits, (K, N), generator=gen)
    s = (torch.rand(G, N, generator=gen) * 0.02 + 0.002).to(dtype)
    if fmt == "awq" or fmt == "ct_asym":
        z = torch.randint(0, 1 << bits, (G, N), generator=gen)
    else:
        z = torch.full((G, N), 1 << (bits - 1))
    W = (q.double() - z.double()[g_idx]) * s.double()[g_idx]
    if fmt == "gptq":
        tensors = {"qweight": pack_rows(q, bits), "scales": s, "qzeros": pack_cols(z - 1, bits)}
        if act_order_:
            tensors["g_idx"] = g_idx.to(torch.int32)
    elif fmt == "awq":
        tensors = {"qweight": pack_cols(q, bits, AWQ_ORDER), "qzeros": pack_cols(z, bits, AWQ_ORDER),
                   "scales": s}
    else:
        tensors = {"weight_packed": pack_cols(q.t().contiguous(), bits), "weight_scale": s.t().contiguous(),
                   "weight_shape": torch.tensor([N, K])}
        if fmt == "ct_asym":
            tensors["weight_zero_point"] = pack_rows(z.t().contiguous(), bits)
        if act_order_:
            tensors["weight_g_idx"] = g_idx.to(torch.int32)
    return tensors, W.t()


def quant_config(fmt: str, bits: int, group: int, act_order_: bool):
    if fmt == "gptq":
        cfg = {**GPTQ, "bits": bits, "group_size": group, "desc_act": act_order_}
        return (act_order.SwordfishGPTQConfig if act_order_ else AutoGPTQConfig).from_config(cfg)
    if fmt == "awq":
        return AutoAWQConfig.from_config({"quant_method": "awq", "bits": bits, "group_size": group,
                                          "zero_point": True, "version": "gemm"})
    weights = {**CT_GROUP, "num_bits": bits, "symmetric": fmt == "ct_sym",
               "strategy": "channel" if group == -1 else "group", "group_size": None if group == -1 else group,
               "actorder": "group" if act_order_ else None}
    cls = act_order.SwordfishCompressedTensorsConfig if act_order_ else CompressedTensorsConfig
    return cls.from_config(ct_config(weights))


HIDDEN, HEAD = 256, 64

CASES = [  # (format, bits, group, act-order, layer kind, dtype)
    ("gptq", 4, 128, False, "qkv", torch.float16),
    ("gptq", 8, 64, False, "merged", torch.bfloat16),
    ("gptq", 4, -1, False, "row", torch.float16),
    ("gptq", 4, 128, True, "qkv", torch.bfloat16),
    ("gptq", 8, 32, True, "merged", torch.float16),
    ("awq", 4, 128, False, "merged", torch.float16),
    ("awq", 4, 64, False, "row", torch.bfloat16),
    ("ct_sym", 4, 32, False, "qkv", torch.bfloat16),
    ("ct_sym", 8, -1, False, "merged", torch.float16),
    ("ct_asym", 4, 128, False, "row", torch.float16),
    ("ct_sym", 4, 128, True, "qkv", torch.float16),
    ("ct_asym", 4, 64, True, "merged", torch.bfloat16),
    ("gptq", 4, 128, True, "row", torch.float16),  # act-order row-parallel shards (issue #36)
    ("gptq", 8, 64, True, "row", torch.bfloat16),
    ("ct_sym", 4, 32, True, "row", torch.bfloat16),
    ("ct_asym", 4, 128, True, "row", torch.float16),
]


def build_layer(kind: str, qcfg, dtype, prefix: str):
    if kind == "qkv":
        return vlayers.QKVParallelLinear(HIDDEN, HEAD, 2, 1, bias=False, quant_config=qcfg, params_dtype=dtype,
                                         prefix=prefix + ".qkv_proj")
    if kind == "merged":
        return vlayers.MergedColumnParallelLinear(HIDDEN, [128, 192], bias=False, quant_config=qcfg,
                                                  params_dtype=dtype, prefix=prefix + ".gate_up_proj")
    return vlayers.RowParallelLinear(HIDDEN, 128, bias=True, quant_config=qcfg, params_dtype=dtype,
                                     prefix=prefix + ".down_proj")


def shard_specs(kind: str):
    """(shard id for the weight loader, out_features) of each checkpoint tensor of the fused layer."""
    if kind == "qkv":
        return [("q", 2 * HEAD), ("k", HEAD), ("v", HEAD)]
    if kind == "merged":
        return [(0, 128), (1, 192)]
    return [(None, 128)]


def load(layer, shards):
    params = dict(layer.named_parameters())
    for shard_id, tensors in shards:
        for name, t in tensors.items():
            param = params[name]
            if shard_id is None:
                param.weight_loader(param, t)
            else:
                param.weight_loader(param, t, shard_id)


@pytest.mark.parametrize("fmt, bits, group, ordered, kind, dtype", CASES,
                         ids=[f"{c[0]}-int{c[1]}-g{c[2]}{'-actorder' if c[3] else ''}-{c[4]}-{str(c[5])[6:]}"
                              for c in CASES])
def test_vllm_layer_end_to_end(cuda_platform, monkeypatch, fmt, bits, group, ordered, kind, dtype, ranks=None):
    from vllm.model_executor.layers.quantization import auto_gptq
    monkeypatch.setattr(auto_gptq, "verify_marlin_supported", lambda **kw: None)  # reads the real (CPU) platform
    gen = torch.Generator().manual_seed(1234)
    shards, dense = [], []
    g_idx = make_g_idx(HIDDEN, group, ordered, gen)  # the shards of a fused layer share their input order
    for shard_id, n in shard_specs(kind):
        tensors, W = make_shard(fmt, HIDDEN, n, bits, group, dtype, g_idx, ordered, gen)
        shards.append((shard_id, tensors))
        dense.append(W)
    W = torch.cat(dense, dim=0)  # (N, K) fp64
    x = torch.randn(3, 5, HIDDEN, generator=gen).to(dtype)
    bias = (torch.randn(W.shape[0], generator=gen) * 0.1).to(dtype) if kind == "row" else None
    expected = x.double() @ W.t() + (0 if bias is None else bias.double())
    qcfg = quant_config(fmt, bits, group, ordered)
    ranks = ranks or (2 if kind == "row" else 1)
    out = torch.zeros(*x.shape[:-1], W.shape[0], dtype=torch.float64)
    with set_current_vllm_config(VllmConfig()):
        cuda_platform((10, 0))
        for rank in range(ranks):
            with tensor_parallel(rank, ranks):
                layer = build_layer(kind, qcfg, dtype, "model.layers.0.mlp")
                load(layer, shards)
                if bias is not None:
                    layer.bias.data.copy_(bias)
                layer.quant_method.process_weights_after_loading(layer)
            owner = getattr(layer, "scheme", None) or layer.quant_method
            assert isinstance(owner.kernel, SwordfishLinearKernel), type(owner.kernel)
            assert getattr(layer, owner.kernel.w_q_name).dim() == 3  # prepacked format v1
            if ordered and kind == "row":  # a row-parallel act-order shard: the padded layout, read as group 32
                assert owner.kernel.scale_group == 32 and bool((getattr(layer, kernel.PERM_PARAM) < 0).any())
            K_part = HIDDEN // ranks
            xs = x[..., rank * K_part:(rank + 1) * K_part]
            y = layer.quant_method.apply(layer, xs, layer.bias if rank == 0 else None)
            assert y.dtype == dtype and y.shape == out.shape
            out += y.double()
    err = (out - expected).norm() / expected.norm()
    assert err < 1e-2, f"relative Frobenius error {err:.2e}"


@pytest.mark.parametrize("tp", [4, 8])
@pytest.mark.parametrize("fmt, bits, group", [("gptq", 4, 128), ("gptq", 8, 32), ("ct_asym", 4, 64)])
def test_row_parallel_act_order_shards(cuda_platform, monkeypatch, fmt, bits, group, tp):
    """RowParallelLinear of an act-order checkpoint at TP = 4, 8 (2 runs in test_vllm_layer_end_to_end):
    every rank loads its g_idx rows and the whole scales, prepacks the padded layout, and the sum of the
    ranks' apply() outputs (the all-reduce) matches the unsharded fp64 layer."""
    test_vllm_layer_end_to_end(cuda_platform, monkeypatch, fmt, bits, group, True, "row",
                               torch.bfloat16 if fmt == "ct_asym" else torch.float16, ranks=tp)


def test_row_parallel_act_order_layer_parameters(cuda_platform):
    """A row-parallel act-order shard registers g_idx sharded by input dim and the whole layer's scales
    (and zero points): the loader gives each rank its rows of g_idx and every group's scales."""
    with set_current_vllm_config(VllmConfig()):
        cuda_platform((10, 0))
        for qcfg, scale_name, shape in ((quant_config("gptq", 4, 128, True), "scales", (HIDDEN // 128, 128)),
                                        (quant_config("ct_asym", 4, 64, True), "weight_scale", (128, HIDDEN // 64))):
            with tensor_parallel(1, 2):
                layer = build_layer("row", qcfg, torch.float16, "model.layers.0.mlp")
            params = dict(layer.named_parameters())
            g_idx = params["g_idx" if "scales" == scale_name else "weight_g_idx"]
            assert tuple(g_idx.shape) == (HIDDEN // 2,) and isinstance(g_idx, vparam.RowvLLMParameter)
            assert tuple(params[scale_name].shape) == shape
            assert not isinstance(params[scale_name], vparam.RowvLLMParameter)  # loaded whole on every rank
            with tensor_parallel(0, 2):  # column-parallel shards of the same checkpoint are served as before
                build_layer("qkv", qcfg, torch.float16, "model.layers.0.self_attn")


def test_act_order_layer_swordfish_cannot_serve_is_refused(cuda_platform):
    with set_current_vllm_config(VllmConfig()):
        cuda_platform((10, 0))
        qcfg = quant_config("gptq", 4, 128, True)
        with tensor_parallel(0, 1), pytest.raises(ValueError, match="multiple of 64"):
            vlayers.ColumnParallelLinear(HIDDEN, 100, bias=False, quant_config=qcfg, params_dtype=torch.float16,
                                         prefix="model.layers.0.odd")


def test_fused_shards_with_different_act_order_are_refused(cuda_platform):
    gen = torch.Generator().manual_seed(5)
    with set_current_vllm_config(VllmConfig()):
        cuda_platform((10, 0))
        with tensor_parallel(0, 1):
            layer = build_layer("merged", quant_config("gptq", 4, 128, True), torch.float16, "model.layers.0.mlp")
        shards = [(sid, make_shard("gptq", HIDDEN, n, 4, 128, torch.float16, make_g_idx(HIDDEN, 128, True, gen),
                                   True, gen)[0]) for sid, n in shard_specs("merged")]
        with pytest.raises(ValueError, match="different g_idx"):
            load(layer, shards)
