"""Swordfish's fused MoE inside vLLM 0.33, on CPU (skipped when vLLM is not installed).

vLLM's own MoE layers (``FusedMoEFactory`` -> ``MoERunner`` / ``RoutedExperts``)
of tiny Mixtral-, Qwen-MoE- and DeepSeek-shaped models are built with the
quantization config of each checkpoint format, loaded through vLLM's weight
loaders from checkpoint tensors written here (GPTQ and AWQ by packers written
from their documented layouts; compressed-tensors by compressed-tensors' own
``PackedQuantizationCompressor``), prepacked, and run through the method's
``apply`` on the op's CPU reference path; the result is compared with an fp64
MoE computed here from the integer codes. Tensor and expert parallelism are
simulated rank by rank (the ranks' outputs summed must equal the unsharded
layer). Also: ``--moe-backend`` through the real ``vllm serve`` parser, the
selection table, the fallback rules and their warnings, and patch P4.

A GPU twin of these tests is not possible on our GPU machine (no vLLM
there): the CUDA path of the same layer is ``sf.fused_moe``'s, tested in
tests/test_moe_gpu.py.
"""

from __future__ import annotations

import pytest
import vllm_cpu  # first: vLLM's CPU platform, the plugin registered (skips this module without vLLM)
from vllm_cpu import AWQ_ORDER, pack_cols, pack_rows  # noqa: E402 (the checkpoint layouts)

import contextlib
import dataclasses
import logging

import torch

import swordfish_backend.vllm as plugin
import vllm.model_executor.layers.fused_moe.config as vmoe_config
from vllm.config import ParallelConfig, VllmConfig, set_current_vllm_config
from vllm.config.kernel import KernelConfig
from vllm.model_executor.layers.fused_moe import FusedMoEFactory
from vllm.model_executor.layers.fused_moe.routed_experts import RoutedExperts
from vllm.model_executor.layers.quantization import auto_gptq
from vllm.model_executor.layers.quantization.auto_awq import AutoAWQConfig
from vllm.model_executor.layers.quantization.auto_gptq import AutoGPTQConfig
from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import (
    CompressedTensorsConfig,
)

from swordfish_backend.vllm import act_order, kernel, moe_method, patches, selection

MOE_OPS_REASON = moe_method._moe_ops_reason  # the real check (the cuda fixture replaces it)

# --------------------------------------------------------------- platform


@pytest.fixture
def cuda(monkeypatch):
    """cuda(capability): Swordfish's selection sees a CUDA device with the extension built. vLLM's own modules
    keep the real CPU platform they imported (so its CPU code paths run the layer)."""
    monkeypatch.setattr(moe_method, "_moe_ops_reason", lambda: None)
    return vllm_cpu.cuda_faker(monkeypatch)


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(moe_method, "_warned_reasons", set())


@pytest.fixture
def warnings_seen():
    """The messages Swordfish's logger warns with during the test."""
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                seen.append(record.getMessage())

    handler = Collect()
    log = logging.getLogger("vllm.swordfish")
    log.addHandler(handler)
    yield seen
    log.removeHandler(handler)


@contextlib.contextmanager
def engine(moe_backend="swordfish", *, tp_rank=0, expert_parallel=False):
    """vLLM's config context of one simulated rank (tensor-parallel rank `tp_rank`)."""
    saved = vmoe_config.get_tensor_model_parallel_rank
    vmoe_config.get_tensor_model_parallel_rank = lambda: tp_rank
    try:
        with set_current_vllm_config(VllmConfig(kernel_config=KernelConfig(moe_backend=moe_backend),
                                                parallel_config=ParallelConfig(
                                                    enable_expert_parallel=expert_parallel))):
            yield
    finally:
        vmoe_config.get_tensor_model_parallel_rank = saved


# ------------------------------------------------------------ the models


@dataclasses.dataclass(frozen=True)
class Model:
    """The MoE layer of a tiny model of this shape (what its vLLM model file passes to FusedMoEFactory)."""

    name: str
    experts: int
    top_k: int
    hidden: int
    intermediate: int
    ckpt_names: tuple[str, str, str]  # gate, down, up as the checkpoint names them
    renormalize: bool = True
    grouped: bool = False  # DeepSeek: grouped top-k over sigmoid scores with a correction bias
    scaling: float = 1.0  # routed_scaling_factor


MIXTRAL = Model("mixtral", 8, 2, 256, 256, ("w1", "w2", "w3"))
QWEN_MOE = Model("qwen_moe", 16, 4, 128, 128, ("gate_proj", "down_proj", "up_proj"), renormalize=False)
DEEPSEEK = Model("deepseek", 16, 4, 256, 128, ("gate_proj", "down_proj", "up_proj"), grouped=True, scaling=2.5)
MODELS = {m.name: m for m in (MIXTRAL, QWEN_MOE, DEEPSEEK)}

_layer_ids = iter(range(10**6))


def build(model: Model, qcfg, dtype, *, tp=1, top_k=None, on_input=False, activation="silu"):
    """One MoE layer through vLLM's factory (call inside engine()); returns vLLM's MoERunner."""
    extra = {}
    if model.grouped:
        extra = dict(use_grouped_topk=True, num_expert_group=4, topk_group=2, scoring_func="sigmoid",
                     routed_scaling_factor=model.scaling,
                     e_score_correction_bias=torch.zeros(model.experts, dtype=torch.float32))
    return FusedMoEFactory(num_experts=model.experts, top_k=top_k or model.top_k, hidden_size=model.hidden,
                           intermediate_size=model.intermediate, params_dtype=dtype, renormalize=model.renormalize,
                           quant_config=qcfg, tp_size=tp, dp_size=1, pcp_size=1,
                           prefix=f"model.layers.{next(_layer_ids)}.mlp.experts", ckpt_names=model.ckpt_names,
                           apply_router_weight_on_input=on_input, activation=activation, **extra)


def route(model: Model, x: torch.Tensor, top_k: int, gen) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k routing of random router logits, computed here the way each model routes (fp32)."""
    logits = torch.randn(x.shape[0], model.experts, generator=gen)
    if model.grouped:
        scores = logits.sigmoid()
        groups = scores.view(x.shape[0], 4, -1).topk(2, dim=-1).values.sum(-1)
        keep = torch.zeros_like(groups).scatter_(1, groups.topk(2, dim=-1).indices, 1.0)
        masked = scores.masked_fill(~keep.bool().repeat_interleave(model.experts // 4, 1), 0.0)
        ids = masked.topk(top_k, dim=-1).indices
        weights = scores.gather(1, ids)
        weights = weights / weights.sum(-1, keepdim=True) * model.scaling
    else:
        weights, ids = logits.softmax(-1).topk(top_k, dim=-1)
        if model.renormalize:
            weights = weights / weights.sum(-1, keepdim=True)
    return weights.float(), ids.to(torch.int32)


def reference(x, w13, w2, weights, ids, *, on_input=False, expert_map=None, activation="silu"):
    """fp64 MoE: y[t] = sum_j w[t,j] * W2[e] @ (act(W13_gate[e] x) * W13_up[e] x), e = ids[t,j]."""
    act = torch.nn.functional.silu if activation == "silu" else torch.nn.functional.gelu
    I = w2.shape[2]  # noqa: E741
    x64, out = x.double(), torch.zeros(x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            if expert_map is not None and int(expert_map[e]) < 0:
                continue
            w = float(weights[t, j])
            h = w13[e] @ (x64[t] * w if on_input else x64[t])
            out[t] += (1.0 if on_input else w) * (w2[e] @ (act(h[:I]) * h[I:]))
    return out


def unit_roundoff(dtype) -> float:
    """u of the activation dtype. The tests' bound 2u: the op's reference rounds each dequantized weight once to
    the activation dtype (<= u/2 relative, in w13 and in w2) and the output once (u/2); its fp32 accumulation
    over H + I terms adds (H + I) 2^-24, far below u at these sizes."""
    return 2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -11


def rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    return float((y.double() - ref).norm() / ref.norm())


# ------------------------------------------------------ checkpoint writers

@dataclasses.dataclass(frozen=True)
class Fmt:
    kind: str  # "gptq", "awq", "ct"
    bits: int = 4
    group: int = 128
    act_order: bool = False
    symmetric: bool = True

    @property
    def label(self) -> str:
        sym = "" if self.kind != "ct" else ("-sym" if self.symmetric else "-asym")
        return (f"{self.kind}{sym}-int{self.bits}-g{self.group}{'-actorder' if self.act_order else ''}")


def quant_config(f: Fmt, *, input_activations=None):
    if f.kind == "gptq":
        cfg = {"quant_method": "gptq", "bits": f.bits, "group_size": f.group, "desc_act": f.act_order, "sym": True}
        return (act_order.SwordfishGPTQConfig if f.act_order else AutoGPTQConfig).from_config(cfg)
    if f.kind == "awq":
        return AutoAWQConfig.from_config({"quant_method": "awq", "bits": 4, "group_size": f.group,
                                          "zero_point": True, "version": "gemm"})
    weights = {"num_bits": f.bits, "type": "int", "symmetric": f.symmetric,
               "strategy": "channel" if f.group == -1 else "group",
               "group_size": None if f.group == -1 else f.group, "dynamic": False,
               "actorder": "group" if f.act_order else None}
    cfg = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
           "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                         "input_activations": input_activations}}}
    return (act_order.SwordfishCompressedTensorsConfig if f.act_order else CompressedTensorsConfig).from_config(cfg)


def ct_scheme(f: Fmt):
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

    return QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(
        num_bits=f.bits, type="int", symmetric=f.symmetric, strategy="channel" if f.group == -1 else "group",
        group_size=None if f.group == -1 else f.group, actorder="group" if f.act_order else None))


def write_projection(f: Fmt, out_f: int, in_f: int, dtype, gen, g_idx=None) -> tuple[dict, torch.Tensor]:
    """Checkpoint tensors of one expert projection W (out_f, in_f) in format f, and W exactly (fp64).

    `g_idx`: the act order to use (the gate and up projections share their input, so GPTQ and llm-compressor
    give them one order); None draws one."""
    K, N, bits = in_f, out_f, f.bits
    group = K if f.group == -1 else f.group
    G = K // group
    if g_idx is None:
        g_idx = torch.arange(K) // group
        if f.act_order:
            g_idx = g_idx[torch.randperm(K, generator=gen)]  # desc_act: rows quantized in a Hessian order
    q = torch.randint(0, 1 << bits, (K, N), generator=gen)  # unsigned codes
    s = (torch.rand(G, N, generator=gen) * 0.02 + 0.002).to(dtype)
    if f.kind == "awq" or not f.symmetric:
        z = torch.randint(0, 1 << bits, (G, N), generator=gen)
    else:
        z = torch.full((G, N), 1 << (bits - 1))
    W = ((q - z[g_idx]).double() * s.double()[g_idx]).t().contiguous()  # (N, K)
    if f.kind == "gptq":
        t = {"qweight": pack_rows(q, bits), "scales": s, "qzeros": pack_cols(z - 1, bits),  # GPTQ stores z - 1
             "g_idx": g_idx.to(torch.int32)}  # written always (trivial without desc_act)
    elif f.kind == "awq":
        t = {"qweight": pack_cols(q, bits, AWQ_ORDER), "qzeros": pack_cols(z, bits, AWQ_ORDER), "scales": s}
    else:  # compressed-tensors' own packer, from the float weight and its quantization parameters
        from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor

        offset = 1 << (bits - 1)
        state = {"weight": W.float(), "weight_scale": s.t().contiguous().float()}
        if not f.symmetric:
            state["weight_zero_point"] = (z - offset).t().contiguous().to(torch.int8)
        if f.act_order:
            state["weight_g_idx"] = g_idx.to(torch.int32)
        t = dict(PackedQuantizationCompressor.compress(state, ct_scheme(f)))
        t["weight_scale"] = s.t().contiguous()
        assert torch.equal(t["weight_packed"], pack_cols(q.t().contiguous(), bits)), "compressor disagrees"
    return t, W


@dataclasses.dataclass
class Checkpoint:
    tensors: list[tuple[str, torch.Tensor]]  # names relative to the experts module, e.g. "3.w1.qweight"
    w13: torch.Tensor  # (E, 2I, H) fp64, [gate | up]
    w2: torch.Tensor  # (E, H, I) fp64


def write_checkpoint(model: Model, f: Fmt, dtype, gen) -> Checkpoint:
    gate_name, down_name, up_name = model.ckpt_names
    H, I = model.hidden, model.intermediate  # noqa: E741
    tensors, w13, w2 = [], [], []
    for e in range(model.experts):
        gate, Wg = write_projection(f, I, H, dtype, gen)
        order = (gate.get("g_idx", gate.get("weight_g_idx")) if f.act_order else None)
        up, Wu = write_projection(f, I, H, dtype, gen, None if order is None else order.long())
        down, Wd = write_projection(f, H, I, dtype, gen)
        for proj, t in ((gate_name, gate), (up_name, up), (down_name, down)):
            tensors += [(f"{e}.{proj}.{k}", v) for k, v in t.items()]
        w13.append(torch.cat([Wg, Wu]))
        w2.append(Wd)
    return Checkpoint(tensors, torch.stack(w13), torch.stack(w2))


# --------------------------------------------------------- load and run


def load(runner, qcfg, ckpt: Checkpoint) -> set[str]:
    """vLLM's loading path: the config's checkpoint mapper, the runner's load_weights (RoutedExperts'
    weight loaders), then the method's process_weights_after_loading."""
    loaded = set(runner.load_weights(qcfg.get_checkpoint_weight_mapper().apply(ckpt.tensors)))
    experts = runner.routed_experts
    experts.quant_method.process_weights_after_loading(experts)
    return loaded


def run(model: Model, f: Fmt, dtype, *, ranks=1, expert_parallel=False, tokens=7, seed=0, top_k=None,
        on_input=False, activation="silu", qcfg=None):
    """The layer's output summed over the simulated ranks (fp64), the fp64 reference, and rank 0's runner."""
    gen = torch.Generator().manual_seed(seed)
    k = top_k or model.top_k
    ckpt = write_checkpoint(model, f, dtype, gen)
    x = (torch.randn(tokens, model.hidden, generator=gen) * 0.5).to(dtype)
    weights, ids = route(model, x, k, gen)
    out, first = torch.zeros(tokens, model.hidden, dtype=torch.float64), None
    for rank in range(ranks):
        with engine("swordfish", tp_rank=rank, expert_parallel=expert_parallel):
            config = qcfg or quant_config(f)
            runner = build(model, config, dtype, tp=ranks, top_k=k, on_input=on_input, activation=activation)
            load(runner, config, ckpt)
        experts = runner.routed_experts
        assert isinstance(experts.quant_method, moe_method._SwordfishMoEMethod), type(experts.quant_method)
        y = experts.quant_method.apply(experts, x, weights, ids, None, None)
        assert y.dtype == dtype and y.shape == x.shape
        out += y.double()
        first = first or runner
    ref = reference(x, ckpt.w13, ckpt.w2, weights, ids, on_input=on_input, activation=activation)
    return out, ref, first


CASES = [  # (model, format, dtype)
    (MIXTRAL, Fmt("gptq", 4, 128), torch.float16),
    (QWEN_MOE, Fmt("gptq", 8, 64), torch.bfloat16),
    (DEEPSEEK, Fmt("gptq", 4, -1), torch.bfloat16),
    (MIXTRAL, Fmt("gptq", 4, 64, act_order=True), torch.float16),
    (QWEN_MOE, Fmt("awq", 4, 64), torch.float16),
    (DEEPSEEK, Fmt("awq", 4, 128), torch.bfloat16),
    (MIXTRAL, Fmt("ct", 4, 32), torch.bfloat16),
    (QWEN_MOE, Fmt("ct", 8, -1), torch.float16),
    (DEEPSEEK, Fmt("ct", 4, 128, symmetric=False), torch.float16),
    (QWEN_MOE, Fmt("ct", 4, 64, act_order=True), torch.bfloat16),
]


@pytest.mark.parametrize("model, f, dtype", CASES,
                         ids=[f"{m.name}-{f.label}-{str(d)[6:]}" for m, f, d in CASES])
def test_layer_matches_fp64_reference(cuda, model, f, dtype):
    cuda((10, 0))
    out, ref, _ = run(model, f, dtype)
    assert rel_err(out, ref) < 2 * unit_roundoff(dtype)


TP_CASES = [
    (MIXTRAL, Fmt("gptq", 4, 64), torch.float16),
    (MIXTRAL, Fmt("gptq", 8, -1), torch.bfloat16),  # channelwise w2 scales: every rank holds them whole
    (DEEPSEEK, Fmt("awq", 4, 64), torch.bfloat16),
    (QWEN_MOE, Fmt("ct", 4, 32, symmetric=False), torch.float16),
]


@pytest.mark.parametrize("model, f, dtype", TP_CASES,
                         ids=[f"{m.name}-{f.label}-{str(d)[6:]}" for m, f, d in TP_CASES])
def test_tensor_parallel_shards_sum_to_the_layer(cuda, model, f, dtype):
    """w13 column-parallel and w2 row-parallel over 2 ranks: vLLM's loader slices I, each rank prepacks and
    runs its shard, and the all-reduce (the sum here) of the ranks' outputs is the unsharded layer."""
    cuda((10, 0))
    out, ref, runner = run(model, f, dtype, ranks=2)
    experts = runner.routed_experts
    w = experts.quant_method.moe_kernel.fused_experts.weights
    I_part = model.intermediate // 2
    assert (w.w13.in_features, w.w13.out_features) == (model.hidden, 2 * I_part)
    assert (w.w2.in_features, w.w2.out_features) == (I_part, model.hidden)
    assert rel_err(out, ref) < 2 * unit_roundoff(dtype)


@pytest.mark.parametrize("f", [Fmt("ct", 4, 128), Fmt("gptq", 4, 64, act_order=True)], ids=lambda f: f.label)
def test_expert_parallel_ranks_sum_to_the_layer(cuda, f):
    """--enable-expert-parallel over 2 ranks: each rank loads its experts, vLLM's expert map goes to
    sf.fused_moe, tokens routed elsewhere contribute nothing; the sum is the layer (act-order included: the
    experts are whole on their rank)."""
    cuda((10, 0))
    out, ref, runner = run(MIXTRAL, f, torch.float16, ranks=2, expert_parallel=True, tokens=11)
    experts = runner.routed_experts
    assert experts.local_num_experts == MIXTRAL.experts // 2 and experts.expert_map is not None
    assert experts.quant_method.moe_kernel.fused_experts.weights.w13.num_experts == MIXTRAL.experts // 2
    assert rel_err(out, ref) < 2 * unit_roundoff(torch.float16)


def test_router_weight_on_input_and_gelu(cuda):
    """Top-1 with the router weight on the input (Llama-4 style; vLLM's prepare step scales x) and a GELU MoE."""
    cuda((10, 0))
    out, ref, _ = run(MIXTRAL, Fmt("ct", 4, 64), torch.bfloat16, top_k=1, on_input=True)
    assert rel_err(out, ref) < 2 * unit_roundoff(torch.bfloat16)
    out, ref, _ = run(QWEN_MOE, Fmt("gptq", 4, 64), torch.float16, activation="gelu")
    assert rel_err(out, ref) < 2 * unit_roundoff(torch.float16)


@pytest.mark.parametrize("model", [MIXTRAL, QWEN_MOE, DEEPSEEK], ids=lambda m: m.name)
def test_runner_forward_with_vllms_router(cuda, model):
    """The whole vLLM MoE layer (MoERunner.forward: vLLM's router and top-k, then the method's apply) against the
    fp64 MoE of the experts vLLM's router chose."""
    from vllm.config import get_current_vllm_config
    from vllm.forward_context import set_forward_context

    cuda((10, 0))
    f, dtype = Fmt("ct", 4, 64), torch.bfloat16
    gen = torch.Generator().manual_seed(7)
    ckpt = write_checkpoint(model, f, dtype, gen)
    x = torch.randn(6, model.hidden, generator=gen).to(dtype)
    logits = torch.randn(6, model.experts, generator=gen).to(dtype)
    with engine("swordfish"):
        runner = build(model, quant_config(f), dtype)
        load(runner, quant_config(f), ckpt)
        weights, ids = runner.router.select_experts(hidden_states=x, router_logits=logits)
        with set_forward_context(None, get_current_vllm_config()):
            y = runner(x, logits)
    assert y.dtype == dtype and y.shape == x.shape
    assert rel_err(y, reference(x, ckpt.w13, ckpt.w2, weights, ids)) < 2 * unit_roundoff(dtype)


def test_method_uses_vllm_interfaces(cuda):
    """vLLM's own create_weights (checkpoint layout, vLLM's loader), then the packed tensors and vLLM's
    modular kernel around SwordfishExperts."""
    from vllm.model_executor.layers.fused_moe import modular_kernel as mk
    from vllm.model_executor.layers.fused_moe.prepare_finalize.no_dp_ep import MoEPrepareAndFinalizeNoDPEPModular

    cuda((10, 0))
    f, dtype = Fmt("gptq", 4, 128), torch.float16
    with engine("swordfish"):
        runner = build(MIXTRAL, quant_config(f), dtype)
    experts = runner.routed_experts
    method = experts.quant_method
    assert isinstance(method, auto_gptq.AutoGPTQMoEMethod) and isinstance(method, moe_method.SwordfishGPTQMoEMethod)
    E, H, I = MIXTRAL.experts, MIXTRAL.hidden, MIXTRAL.intermediate  # noqa: E741
    shapes = {n: tuple(p.shape) for n, p in experts.named_parameters()}
    assert shapes["w13_qweight"] == (E, H // 8, 2 * I) and shapes["w2_qweight"] == (E, I // 8, H)
    assert getattr(experts.w13_qweight, "is_transposed", False)  # vLLM's loader flips the shard dim
    load(runner, quant_config(f), write_checkpoint(MIXTRAL, f, dtype, torch.Generator().manual_seed(1)))
    names = {n for n, _ in experts.named_parameters()}
    assert "w13_qweight" not in names and "w2_scales" not in names  # checkpoint layout freed
    assert experts.w13_weight.dim() == 4 and experts.w13_weight.dtype == torch.int32  # packed format v1
    assert method.supports_internal_mk and not method.is_monolithic
    assert isinstance(method.moe_kernel, mk.FusedMoEKernel)
    assert isinstance(method.moe_kernel.fused_experts, moe_method.SwordfishExperts)
    assert isinstance(method.moe_kernel.fused_experts, mk.FusedMoEExpertsModular)
    assert isinstance(method.moe_kernel.prepare_finalize, MoEPrepareAndFinalizeNoDPEPModular)
    assert method.moe_kernel.fused_experts.weights.w13.packed is experts.w13_weight
    assert not torch.cuda.is_initialized()


# ------------------------------------------------------------ the flag


def test_serve_parser_accepts_moe_backend_swordfish():
    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    args = parser.parse_args(["--model", "m", "--moe-backend", "swordfish"])
    assert args.moe_backend == "swordfish"
    args = parser.parse_args(["--model", "m", "--kernel-config", '{"moe_backend": "swordfish"}'])
    assert args.kernel_config.moe_backend == "swordfish"
    assert EngineArgs(model="m", moe_backend="swordfish").moe_backend == "swordfish"
    with pytest.raises(SystemExit):
        parser.parse_args(["--model", "m", "--moe-backend", "swordfsh"])


# ------------------------------------------------------------ selection


class Chosen(Exception):
    """Raised by a spy in place of vLLM's own MoE method: vLLM was asked to choose."""


def vllm_choice_spy(monkeypatch, qcfg):
    """Make the config's get_quant_method (vLLM's own choice) record the layer's moe_backend and raise Chosen."""
    seen = []

    def spy(layer, prefix):
        seen.append((prefix, layer.moe_config.moe_backend))
        raise Chosen(prefix)

    if qcfg is not None:
        monkeypatch.setattr(qcfg, "get_quant_method", spy)
    else:
        from vllm.model_executor.layers.fused_moe import routed_experts

        def unquantized(moe_config):
            seen.append(("unquantized", moe_config.moe_backend))
            raise Chosen("unquantized")

        monkeypatch.setattr(routed_experts, "UnquantizedFusedMoEMethod", unquantized)
    return seen


def method_of(model, qcfg, backend, dtype=torch.float16, **kw):
    with engine(backend, **kw):
        return type(build(model, qcfg, dtype).routed_experts.quant_method)


def test_moe_auto_table():
    # auto on Blackwell since the MoE kernels passed their GPU tests (RESULTS.md [moe]); on Hopper for the formats
    # timed at least as fast as Marlin MoE (int4 without zero points, every group), opt-in for the rest
    assert selection.MOE_AUTO_SELECT == {9: False, 10: True, 11: True}
    assert selection.MOE_AUTO_FORMATS == {9: frozenset({(4, False, 128), (4, False, 64), (4, False, 32),
                                                         (4, False, -1)})}
    for cap in ((10, 0), (10, 3), (11, 0)):
        assert selection.moe_auto_select_reason(cap) is None, cap
        assert selection.moe_auto_select_reason(cap, (8, True, 32)) is None, cap
    for group in (128, 64, 32, -1):
        assert selection.moe_auto_select_reason((9, 0), (4, False, group)) is None, group
    for fmt, name in (((8, False, 128), "int8 group 128 experts"), ((4, True, 128), "with zero points"),
                      ((8, False, -1), "int8 channelwise experts"), ((4, True, 32), "int4 group 32 with zero")):
        reason = selection.moe_auto_select_reason((9, 0), fmt)
        assert name in reason and "opt-in" in reason and "--moe-backend swordfish" in reason, reason
        assert "int4 group 128" in reason and "int4 channelwise" in reason and "Marlin MoE" in reason, reason
    assert "opt-in" in selection.moe_auto_select_reason((9, 0))  # no format: no blanket yes on sm90
    assert "not an auto-selected architecture" in selection.moe_auto_select_reason((12, 0), (4, False, 128))
    assert "unknown" in selection.moe_auto_select_reason(None, (4, False, 128))
    assert selection.moe_auto_archs() == ("sm10x, sm11x, sm9x (int4 channelwise, int4 group 32, int4 group 64, "
                                          "int4 group 128)")


@pytest.mark.parametrize("capability, backend, swordfish", [
    ((10, 0), "auto", True), ((11, 0), "auto", True), ((9, 0), "auto", "int4 sym"), ((9, 0), "swordfish", True),
    ((10, 0), "swordfish", True), ((11, 0), "swordfish", True),
    ((10, 0), "marlin", False),
])
def test_selection(cuda, monkeypatch, warnings_seen, capability, backend, swordfish):
    """swordfish "int4 sym": only the formats MOE_AUTO_FORMATS names (sm90 auto: int4 without zero points)."""
    cuda(capability)
    for f in (Fmt("gptq"), Fmt("ct", 4, 128), Fmt("awq"), Fmt("ct", 8, 64), Fmt("gptq", 4, 32)):
        qcfg = quant_config(f)
        seen = vllm_choice_spy(monkeypatch, qcfg)
        picked = swordfish is True or (swordfish == "int4 sym" and f.bits == 4 and f.kind != "awq")
        if picked:
            assert issubclass(method_of(MIXTRAL, qcfg, backend), moe_method._SwordfishMoEMethod)
            assert seen == []
        else:
            with pytest.raises(Chosen):
                method_of(MIXTRAL, qcfg, backend)
            assert seen[0][1] == backend  # vLLM's choice, untouched
    assert warnings_seen == []  # auto / another backend: nothing to warn about


def test_forced_fallback_warns_once_per_reason_and_resets_backend(cuda, monkeypatch, warnings_seen):
    """--moe-backend swordfish and a layer Swordfish cannot hold (H = 96: not a multiple of 64): one warning
    naming the layer and why, then vLLM's own choice with moe_backend 'auto' (vLLM's oracle would raise on
    'swordfish')."""
    cuda((10, 0))
    odd = dataclasses.replace(MIXTRAL, hidden=96)
    qcfg = quant_config(Fmt("gptq", 4, 32))
    seen = vllm_choice_spy(monkeypatch, qcfg)
    for _ in range(3):
        with pytest.raises(Chosen):
            method_of(odd, qcfg, "swordfish")
    assert [backend for _, backend in seen] == ["auto"] * 3
    assert len(warnings_seen) == 1, warnings_seen
    assert seen[0][0] in warnings_seen[0] and "K = 96" in warnings_seen[0]
    assert "vLLM's own choice" in warnings_seen[0]


@pytest.mark.parametrize("case", ["ct-w4a8", "ct-w8a8", "gptq-marlin-int8-input", "unquantized", "kill-switch",
                                  "fp8-checkpoint", "no-moe-ops"])
def test_what_falls_back(cuda, monkeypatch, warnings_seen, case):
    cuda((10, 0))
    if case == "no-moe-ops":  # an extension built without the MoE kernels still serves the GEMMs
        from swordfish_backend import ops
        monkeypatch.setattr(moe_method, "_moe_ops_reason", MOE_OPS_REASON)
        monkeypatch.setattr(ops, "has_moe", lambda: False)
        monkeypatch.setattr(ops, "moe_error", lambda: "no swordfish::fused_moe")
    int8_tokens = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token", "dynamic": True}
    expect = {"ct-w4a8": "W4A8", "ct-w8a8": "W8A8", "gptq-marlin-int8-input": "VLLM_MARLIN_INPUT_DTYPE=int8",
              "unquantized": "not quantized", "kill-switch": "SWORDFISH_DISABLE", "fp8-checkpoint": "fp8",
              "no-moe-ops": "no MoE ops"}[case]
    if case == "ct-w4a8":
        qcfg = quant_config(Fmt("ct", 4, 128), input_activations=int8_tokens)
    elif case == "ct-w8a8":
        qcfg = quant_config(Fmt("ct", 8, -1), input_activations=int8_tokens)
    elif case == "gptq-marlin-int8-input":
        monkeypatch.setenv("VLLM_MARLIN_INPUT_DTYPE", "int8")
        qcfg = quant_config(Fmt("gptq", 8, 128))
    elif case == "unquantized":
        qcfg = None
    elif case == "no-moe-ops":
        qcfg = quant_config(Fmt("gptq", 4, 128))
    elif case == "kill-switch":
        monkeypatch.setenv("SWORDFISH_DISABLE", "1")
        qcfg = quant_config(Fmt("awq", 4, 128))
    else:
        from vllm.model_executor.layers.quantization.fp8 import Fp8Config
        qcfg = Fp8Config(is_checkpoint_fp8_serialized=True)
    seen = vllm_choice_spy(monkeypatch, qcfg)
    with pytest.raises(Chosen):
        method_of(MIXTRAL, qcfg, "swordfish")
    assert seen[0][1] == "auto"
    assert len(warnings_seen) == 1 and expect in warnings_seen[0], warnings_seen


ACT_ORDER_TP_CASES = [  # (format, dtype, ranks)
    (Fmt("gptq", 4, 64, act_order=True), torch.float16, 2),
    (Fmt("gptq", 8, 32, act_order=True), torch.bfloat16, 4),
    (Fmt("ct", 4, 64, act_order=True), torch.bfloat16, 2),
    (Fmt("ct", 4, 32, act_order=True), torch.float16, 4),
]


@pytest.mark.parametrize("f, dtype, ranks", ACT_ORDER_TP_CASES,
                         ids=[f"{f.label}-{str(d)[6:]}-tp{r}" for f, d, r in ACT_ORDER_TP_CASES])
def test_act_order_row_parallel_w2_shards_sum_to_the_layer(cuda, f, dtype, ranks):
    """Act-order w2 across row-parallel shards (issue #36): each rank loads its g_idx rows and the whole
    layer's w2 scales, packs the padded act-order layout (every expert to one K_pad), and the ranks' outputs
    summed (the all-reduce) are the unsharded layer, on the op's CPU reference path."""
    cuda((10, 0))
    out, ref, runner = run(MIXTRAL, f, dtype, ranks=ranks)
    w = runner.routed_experts.quant_method.moe_kernel.fused_experts.weights
    I_part = MIXTRAL.intermediate // ranks
    assert (w.w2.in_features, w.w2.out_features) == (I_part, MIXTRAL.hidden)
    assert w.w2.padded_k is not None and w.w2.padded_k % 128 == 0 and w.w2.padded_k >= I_part
    assert tuple(w.w2.perm.shape) == (MIXTRAL.experts, w.w2.padded_k) and w.w2.scale_group == 32
    assert rel_err(out, ref) < 2 * unit_roundoff(dtype)


def test_act_order_is_served_whatever_the_backend_flag(cuda):
    """vLLM has no act-order MoE kernel: such experts are Swordfish's under auto on sm90 and under another
    --moe-backend too (as the act-order linear layers are)."""
    cuda((9, 0))
    for backend in ("auto", "marlin"):
        method = method_of(MIXTRAL, quant_config(Fmt("gptq", 4, 128, act_order=True)), backend)
        assert issubclass(method, moe_method.SwordfishGPTQMoEMethod)
    with pytest.raises(ValueError, match="multiple of 64"):  # and one Swordfish cannot hold is an error
        method_of(dataclasses.replace(MIXTRAL, hidden=96), quant_config(Fmt("gptq", 4, 32, act_order=True)),
                  "auto")


def test_gate_and_up_with_different_act_orders_are_refused(cuda):
    cuda((10, 0))
    f = Fmt("gptq", 4, 64, act_order=True)
    gen = torch.Generator().manual_seed(3)
    ckpt = write_checkpoint(MIXTRAL, f, torch.float16, gen)
    tensors = [(n, torch.flip(t, [0]) if n.endswith(".w3.g_idx") else t) for n, t in ckpt.tensors]
    with engine("swordfish"):
        runner = build(MIXTRAL, quant_config(f), torch.float16)
        with pytest.raises(ValueError, match="different g_idx"):
            load(runner, quant_config(f), Checkpoint(tensors, ckpt.w13, ckpt.w2))


def test_act_order_checkpoint_with_experts_a_dynamic_rule_keeps_in_order(cuda):
    """An act-order GPTQ checkpoint (swordfish_gptq keeps its g_idx tensors) whose dynamic rule turns desc_act off
    for the experts: their (trivial) g_idx tensors are accepted and dropped, the experts served plainly."""
    cuda((10, 0))
    qcfg = act_order.SwordfishGPTQConfig.from_config({
        "quant_method": "gptq", "bits": 4, "group_size": 64, "desc_act": True, "sym": True,
        "dynamic": {r"+:.*\.mlp\.experts": {"desc_act": False}}})
    out, ref, runner = run(MIXTRAL, Fmt("gptq", 4, 64), torch.float16, qcfg=qcfg)
    method = runner.routed_experts.quant_method
    assert (method.act_order, method.keeps_g_idx) == (False, True)
    assert method.moe_kernel.fused_experts.weights.w13.perm is None
    assert rel_err(out, ref) < 2 * unit_roundoff(torch.float16)


def test_act_order_gptq_keeps_g_idx_through_the_checkpoint_mapper():
    """vLLM 0.33 drops '.g_idx' tensors while loading (its default checkpoint mapper); the act-order GPTQ config
    keeps them, for its linear layers and experts alike."""
    weights = [("model.layers.0.mlp.experts.0.w1.g_idx", torch.zeros(1)), ("x.qweight", torch.zeros(1))]
    plain = AutoGPTQConfig.from_config({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False,
                                        "sym": True})
    ordered = quant_config(Fmt("gptq", 4, 128, act_order=True))
    assert [n for n, _ in plain.get_checkpoint_weight_mapper().apply(weights)] == ["x.qweight"]
    assert [n for n, _ in ordered.get_checkpoint_weight_mapper().apply(weights)] == [n for n, _ in weights]


@pytest.mark.parametrize("change, reason", [
    (dict(hidden=96), "K = 96"),
    (dict(intermediate=96), "multiple of 64"),
    (dict(activation="gelu_tanh"), "activation gelu_tanh"),
    (dict(has_bias=True), "expert biases"),
    (dict(swiglu_limit=7.0), "SwiGLU"),
    (dict(all2all="deepep_high_throughput"), "parallel config"),
    (dict(eplb=True), "EPLB"),
    (dict(lora=True), "LoRA"),
])
def test_layer_reasons(change, reason):
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.fused_moe.config import FusedMoEConfig, FusedMoEParallelConfig, RoutingMethodType

    pc = FusedMoEParallelConfig(tp_size=1, pcp_size=1, dp_size=2 if "all2all" in change else 1,
                                ep_size=2 if "all2all" in change else 1, tp_rank=0, pcp_rank=0, dp_rank=0,
                                ep_rank=0, sp_size=1, use_ep="all2all" in change,
                                all2all_backend=change.get("all2all", "allgather_reducescatter"),
                                enable_eplb=change.get("eplb", False))
    cfg = FusedMoEConfig(num_experts=8, experts_per_token=2, hidden_dim=change.get("hidden", 256),
                         intermediate_size=change.get("intermediate", 256), num_local_experts=8,
                         num_logical_experts=8, activation=MoEActivation.from_str(change.get("activation", "silu")),
                         device="cpu", routing_method=RoutingMethodType.Renormalize, moe_parallel_config=pc,
                         in_dtype=torch.float16, has_bias=change.get("has_bias", False),
                         swiglu_limit=change.get("swiglu_limit"), is_lora_enabled=change.get("lora", False))
    plan = moe_method.Plan("gptq", 4, False, 32, False, build=lambda: None)
    got = moe_method.layer_reason(plan, cfg)
    assert got is not None and reason in got, got
    if change == dict(hidden=96):
        assert moe_method.layer_reason(plan, dataclasses.replace(cfg, hidden_dim=256)) is None


def test_moe_support_reason_names_the_gemm():
    ok = dict(bits=4, has_zero_points=False, group_size=128, act_dtype="float16")
    assert selection.moe_support_reason(**ok, hidden_size=4096, intermediate_size=1792) is None  # Mixtral TP 8
    assert "w2" in selection.moe_support_reason(**ok, hidden_size=4096, intermediate_size=96)
    assert "does not divide" in selection.moe_support_reason(**ok, hidden_size=4096, intermediate_size=192)
    assert "W4A8" in selection.moe_support_reason(**{**ok, "act_dtype": "int8"}, hidden_size=4096,
                                                  intermediate_size=1792)
    assert "zero points" in selection.moe_support_reason(**{**ok, "bits": 8, "has_zero_points": True},
                                                         hidden_size=4096, intermediate_size=1792)


# ------------------------------------------------------------ patch P4


def test_p4_is_idempotent_and_version_checked(monkeypatch):
    hook = RoutedExperts.__dict__["_get_quant_method"]
    assert hook.__swordfish__ and tuple(__import__("inspect").signature(hook.__wrapped__).parameters) == \
        patches.MOE_HOOK_PARAMS
    plugin.register()
    assert not patches.route_moe_layers(moe_method.choose)
    assert RoutedExperts.__dict__["_get_quant_method"] is hook

    def changed(self, prefix, quant_config, moe_config, extra):
        raise AssertionError

    monkeypatch.setattr(RoutedExperts, "_get_quant_method", changed)
    with pytest.raises(RuntimeError, match="expected .*vLLM 0.33"):
        patches.route_moe_layers(moe_method.choose)


def test_registration_stays_cuda_free():
    assert not torch.cuda.is_initialized()
