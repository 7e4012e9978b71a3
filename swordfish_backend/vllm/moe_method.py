"""Swordfish's fused MoE as a vLLM 0.33 fused-MoE method.

How a MoE layer reaches it: vLLM builds every routed-experts layer
(``RoutedExperts``) and asks ``RoutedExperts._get_quant_method`` for its
method; patch P4 (patches.py) asks ``choose`` here first. ``choose`` reads the
layer's checkpoint format from its quantization config (GPTQ, AWQ,
compressed-tensors pack-quantized WNA16, and the plugin's act-order configs
of act_order.py) and returns a Swordfish method, or None for vLLM's own
choice (after one warning per reason when ``--moe-backend swordfish`` asked
for Swordfish).

The methods subclass vLLM's own WNA16 MoE methods (``AutoGPTQMoEMethod``,
``AutoAWQMoEMethod``, ``CompressedTensorsWNA16MoEMethod``) for one reason:
their ``create_weights``, so the expert weights are created in the
checkpoint's layout and filled by vLLM's ``RoutedExperts.weight_loader``
(w1 / w3 into w13, w2, per-expert shards, tensor-parallel slicing). Their
``__init__`` (which runs vLLM's WNA16 backend oracle) is not called.
Act-order layers add ``g_idx`` parameters ([E, K] per GEMM) with their own
loader (vLLM 0.33's loader has no g_idx case). Under tensor parallelism the
w2 g_idx loader takes this rank's rows and w2's scales (and zero points) are
loaded whole: each rank's w2 is packed in the padded act-order layout
(docs/FORMAT.md "Act-order shards", issue #36).

``process_weights_after_loading`` builds ``sf.QuantizedExperts`` from the
loaded tensors on their device (which prepacks there), replaces the
checkpoint tensors with the packed ones and builds vLLM's modular kernel
(``mk.FusedMoEKernel``): vLLM's prepare/finalize for the parallel layout
around ``SwordfishExperts``, whose ``apply`` is one ``sf.fused_moe`` call
(router weights and the sum over top-k included). vLLM's router / top-k
stays vLLM's.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from fractions import Fraction

import torch
from vllm.logger import init_logger
from vllm.model_executor.layers.fused_moe import modular_kernel as mk
from vllm.model_executor.layers.fused_moe.activation import MoEActivation
from vllm.model_executor.layers.fused_moe.config import FusedMoEConfig, FusedMoEParallelConfig
from vllm.model_executor.layers.fused_moe.fused_moe_method_base import FusedMoEMethodBase
from vllm.model_executor.layers.fused_moe.oracle.int_wna16 import make_wna16_moe_quant_config
from vllm.model_executor.layers.fused_moe.topk_weight_and_reduce import TopKWeightAndReduceNoOP
from vllm.model_executor.layers.quantization.auto_awq import AutoAWQConfig, AutoAWQMoEMethod
from vllm.model_executor.layers.quantization.auto_gptq import AutoGPTQConfig, AutoGPTQMoEMethod
from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import (
    CompressedTensorsConfig,
)
from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe.compressed_tensors_moe_wna16 import (  # noqa: E501
    CompressedTensorsWNA16MoEMethod,
)
from vllm.model_executor.layers.quantization.compressed_tensors.schemes.compressed_tensors_wNa16 import (
    WNA16_SUPPORTED_TYPES_MAP,
    WNA16_ZP_SUPPORTED_TYPES_MAP,
)
from vllm.model_executor.layers.quantization.utils.gptq_utils import get_dynamic_override, override_config
from vllm.model_executor.layers.quantization.utils.quant_utils import is_layer_skipped
from vllm.scalar_type import scalar_types

import swordfish_backend as sf

from . import kernel, selection

logger = init_logger("vllm.swordfish")

BACKEND = "swordfish"
_GROUP_ACTORDER = ("group", "dynamic")
_warned_reasons: set[str] = set()  # one warning per distinct reason (the first layer is named)


# ------------------------------------------------------------------ the experts


@dataclasses.dataclass
class ExpertWeights:
    """The two packed GEMMs of one layer; their tensors are the layer's registered parameters."""

    w13: sf.QuantizedExperts  # K = H, N = 2I ([gate | up])
    w2: sf.QuantizedExperts  # K = I, N = H


class SwordfishExperts(mk.FusedMoEExpertsModular):
    """vLLM's modular experts interface over ``sf.fused_moe``: the whole layer, weighted and reduced.

    Standard activation format (tokens in, tokens out, global top-k ids with
    vLLM's expert map under expert parallelism). The output is final
    (``TopKWeightAndReduceNoOP``), as Marlin's is.
    """

    def __init__(self, moe_config: FusedMoEConfig, quant_config, weights: ExpertWeights) -> None:
        super().__init__(moe_config=moe_config, quant_config=quant_config)
        self.weights = weights

    @staticmethod
    def activation_format() -> mk.FusedMoEActivationFormat:
        return mk.FusedMoEActivationFormat.Standard

    @staticmethod
    def _supports_current_device() -> bool:
        # choose() has decided already (kernel.runtime_reason: kill switch, CUDA, extension, arch); CPU tensors
        # run the op's exact reference (tests, CPU-resident weights).
        return True

    @staticmethod
    def _supports_no_act_and_mul() -> bool:
        return False

    @staticmethod
    def _supports_quant_scheme(weight_key, activation_key) -> bool:
        return activation_key is None  # weight-only: activations stay fp16 / bf16

    @staticmethod
    def _supports_activation(activation: MoEActivation) -> bool:
        return activation.value in selection.MOE_ACTIVATIONS

    @staticmethod
    def _supports_parallel_config(moe_parallel_config: FusedMoEParallelConfig) -> bool:
        # Tokens stay in the standard layout with global expert ids: TP, EP through the expert map, and
        # DP + EP with vLLM's all-gather / reduce-scatter. Dispatching all2all kernels (DeepEP, ...) are not.
        return not moe_parallel_config.use_all2all_kernels or moe_parallel_config.use_ag_rs_all2all_kernels

    def finalize_weight_and_reduce_impl(self) -> mk.TopKWeightAndReduce:
        return TopKWeightAndReduceNoOP()

    def moe_problem_size(self, a1, w1, w2, topk_ids) -> tuple[int, int, int, int, int]:
        # The packed weights are 4-D ([E, N/64, K/block_k, 512]): read the sizes from the experts.
        M = a1.size(0) if a1.dim() == 2 else a1.size(1)
        return (self.weights.w13.num_experts, M, self.weights.w2.in_features, a1.size(-1), topk_ids.size(1))

    def workspace_shapes(self, M, N, K, topk, global_num_experts, local_num_experts, expert_tokens_meta,
                         activation):
        return (0,), (0,), (M, K)  # the op takes its scratch from torch's allocator

    def apply(self, output, hidden_states, w1, w2, topk_weights, topk_ids, activation, global_num_experts,
              expert_map, a1q_scale, a2_scale, workspace13, workspace2, expert_tokens_meta,
              apply_router_weight_on_input):
        if self._uses_post_gemm2_hook(hidden_states.shape[0]):
            raise NotImplementedError("Swordfish's fused MoE returns the reduced output; it has no "
                                      "post-GEMM2 hook")
        if apply_router_weight_on_input:
            # vLLM's prepare step has scaled each token by its (top-1) router weight already.
            topk_weights = torch.ones_like(topk_weights, dtype=torch.float32)
        y = sf.fused_moe(hidden_states, self.weights.w13, self.weights.w2, topk_weights, topk_ids,
                         activation=activation.value, expert_map=expert_map)
        output.copy_(y)
        return None


# ------------------------------------------------------------------ the methods


class _SwordfishMoEMethod:
    """What the three format methods share: g_idx parameters, prepack, the modular kernel, apply."""

    act_order: bool
    keeps_g_idx: bool  # the checkpoint's g_idx tensors reach this layer (loaded, or accepted and dropped)
    bits: int
    group_size: int
    # names of the checkpoint-layout parameters of (w13, w2) for _experts_from_layer; deleted after prepack
    checkpoint_params: tuple[str, ...]
    g_idx_names: tuple[str, str]
    # w2's per-group parameters and their group axis: an act-order row-parallel shard loads them whole
    w2_group_params: tuple[tuple[str, int], ...] = ()

    @property
    def method_name(self) -> str:
        return "SwordfishMoEMethod"

    # ------------------------------------------------------------- weights

    def _w2_row_shard(self) -> tuple[int, int] | None:
        """(rank, ranks) when w2 is a row-parallel shard of act-order experts (tensor parallel, no expert
        parallelism), else None: its g_idx rows are this rank's, its scales the whole layer's."""
        pc = self.moe.moe_parallel_config
        return (pc.tp_rank, pc.tp_size) if self.act_order and pc.tp_size > 1 else None

    def _create_g_idx(self, layer: torch.nn.Module, num_experts: int, hidden_size: int,
                      intermediate_size_per_partition: int) -> None:
        if not self.keeps_g_idx:
            return
        shard = self._w2_row_shard()
        for name, K, rows in zip(self.g_idx_names, (hidden_size, intermediate_size_per_partition), (None, shard)):
            shape = (num_experts, K) if self.act_order else (0,)  # not act-order: accepted and dropped
            param = torch.nn.Parameter(torch.empty(shape, dtype=torch.int32), requires_grad=False)
            param.weight_loader = _g_idx_loader(layer, self.act_order, rows)
            layer.register_parameter(name, param)
        layer._swordfish_g_idx_loaded = {}
        if shard is not None:
            self._load_w2_groups_whole(layer, intermediate_size_per_partition * shard[1])

    def _load_w2_groups_whole(self, layer: torch.nn.Module, intermediate_size: int) -> None:
        """Re-register w2's per-group parameters with the whole layer's groups and a loader that keeps them
        whole: a row-parallel act-order shard's rows belong to any group (the padded layout, issue #36)."""
        groups = intermediate_size // self.group_size
        for name, axis in self.w2_group_params:
            old = getattr(layer, name, None)
            if old is None:
                continue
            shape = list(old.shape)
            shape[axis] = groups
            param = torch.nn.Parameter(torch.empty(shape, dtype=old.dtype, device=old.device), requires_grad=False)
            param.weight_loader = _whole_loader(layer)
            delattr(layer, name)
            layer.register_parameter(name, param)

    def _g_idx(self, layer: torch.nn.Module, name: str) -> torch.Tensor | None:
        if not self.act_order:
            return None
        loaded = layer._swordfish_g_idx_loaded.get(name, set())
        E = layer.local_num_experts
        if len(loaded) != E:
            missing = sorted(set(range(E)) - loaded)
            raise ValueError(f"MoE layer {layer.layer_name}: act-order checkpoint without {name} for local "
                             f"experts {missing[:8]}{'...' if len(missing) > 8 else ''}")
        return getattr(layer, name).data

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        self._check_biases(layer)
        device = getattr(layer, self.checkpoint_params[0]).device
        w13, w2 = (w.to(device) for w in self._experts_from_layer(layer))
        for name in (*self.checkpoint_params, *(self.g_idx_names if self.keeps_g_idx else ())):
            if hasattr(layer, name):
                delattr(layer, name)
        weights = ExpertWeights(_register(layer, "w13", w13), _register(layer, "w2", w2))
        self._setup_kernel(layer, weights)

    def _check_biases(self, layer: torch.nn.Module) -> None:
        for name in ("w13_bias", "w2_bias"):
            bias = getattr(layer, name, None)
            if bias is None:
                continue
            if name in getattr(layer, "_loaded_expert_biases", ()) and bool(bias.data.ne(0).any()):
                raise ValueError(f"MoE layer {layer.layer_name}: the checkpoint has expert biases ({name}), which "
                                 "Swordfish's fused MoE does not apply; serve it with --moe-backend marlin")
            delattr(layer, name)

    def _setup_kernel(self, layer: torch.nn.Module, weights: ExpertWeights) -> None:
        from vllm.model_executor.layers.fused_moe.all2all_utils import maybe_make_prepare_finalize

        self.moe_quant_config = self.get_fused_moe_quant_config(layer)
        prepare_finalize = maybe_make_prepare_finalize(
            moe=self.moe, quant_config=self.moe_quant_config, routing_tables=layer._expert_routing_tables(),
            allow_new_interface=True, use_monolithic=False)
        self.moe_kernel = mk.FusedMoEKernel(prepare_finalize,
                                            SwordfishExperts(self.moe, self.moe_quant_config, weights))

    def get_fused_moe_quant_config(self, layer: torch.nn.Module):
        # Informational for vLLM (activations are not quantized: prepare passes them through); the experts
        # read the packed weights themselves.
        return make_wna16_moe_quant_config(w1_scale=layer.w13_swordfish_scales, w2_scale=layer.w2_swordfish_scales,
                                           group_size=self.group_size, num_bits=self.bits)

    def apply(self, layer, x, topk_weights, topk_ids, shared_experts, shared_experts_input):
        assert self.moe_kernel is not None, "process_weights_after_loading has not run"
        return self.moe_kernel.apply(
            hidden_states=x, w1=layer.w13_weight, w2=layer.w2_weight, topk_weights=topk_weights,
            topk_ids=topk_ids, activation=layer.activation, global_num_experts=layer.global_num_experts,
            expert_map=layer.expert_map, apply_router_weight_on_input=layer.apply_router_weight_on_input,
            shared_experts=shared_experts, shared_experts_input=shared_experts_input)

    @property
    def supports_eplb(self) -> bool:
        return False


def _register(layer: torch.nn.Module, prefix: str, w: sf.QuantizedExperts) -> sf.QuantizedExperts:
    """Register the packed experts' tensors on the layer (``{prefix}_weight`` is what vLLM's kernel call
    passes); returns experts viewing exactly those tensors."""
    def param(name, t):
        if t is None:
            return None
        p = torch.nn.Parameter(t, requires_grad=False)
        layer.register_parameter(name, p)
        return p

    packed = param(f"{prefix}_weight", w.packed)
    scales = param(f"{prefix}_swordfish_scales", w.scales)
    zeros = param(f"{prefix}_swordfish_zeros", w.zeros)
    perm = param(f"{prefix}_swordfish_perm", w.perm)
    return sf.QuantizedExperts(source=None, packed=packed, scales=scales, zeros=zeros, perm=perm, bits=w.bits,
                               group_size=w.group_size, in_features=w.in_features, out_features=w.out_features,
                               dtype=w.dtype, padded_k=w.padded_k)


def _whole_loader(layer: torch.nn.Module) -> Callable:
    """Loader of a w2 scale / zero-point parameter of an act-order row-parallel shard: the expert's whole
    tensor, unsliced (its rows may belong to any group)."""

    def weight_loader(param, loaded_weight, weight_name, shard_id, expert_id, return_success=False):
        local = layer._map_global_expert_id_to_local_expert_id(expert_id)
        if local == -1:
            return False if return_success else None
        row = param.data[local]
        if loaded_weight.shape != row.shape:
            raise ValueError(f"MoE layer {layer.layer_name}: {weight_name.rsplit('.', 1)[-1]} of expert {expert_id} "
                             f"has shape {tuple(loaded_weight.shape)}, expected the whole layer's {tuple(row.shape)} "
                             "(an act-order w2 shard keeps every group)")
        row.copy_(loaded_weight.to(device=row.device, dtype=row.dtype))
        return True if return_success else None

    weight_loader.supports_moe_loading = True
    return weight_loader


def _g_idx_loader(layer: torch.nn.Module, act_order: bool, rows: tuple[int, int] | None = None) -> Callable:
    """Loader of a w13 / w2 g_idx parameter: the expert's whole row order, or with ``rows`` = (rank, ranks)
    (w2, row-parallel) this rank's contiguous slice of it. w1 and w3 share their input, so their g_idx must
    agree."""

    def weight_loader(param, loaded_weight, weight_name, shard_id, expert_id, return_success=False):
        if not act_order:  # desc_act off for this layer: groups are contiguous, the order is not needed
            return True if return_success else None
        local = layer._map_global_expert_id_to_local_expert_id(expert_id)
        if local == -1:
            return False if return_success else None
        name = weight_name.rsplit(".", 1)[-1]
        row = param.data[local]
        if rows is not None and loaded_weight.dim() == 1 and loaded_weight.shape[0] == row.shape[0] * rows[1]:
            loaded_weight = loaded_weight.narrow(0, rows[0] * row.shape[0], row.shape[0])  # this rank's rows
        if loaded_weight.shape != row.shape:
            raise ValueError(f"MoE layer {layer.layer_name}: {name} of expert {expert_id} ({shard_id}) has shape "
                             f"{tuple(loaded_weight.shape)}, expected {tuple(row.shape)}")
        loaded = layer._swordfish_g_idx_loaded.setdefault(name, set())
        value = loaded_weight.to(device=row.device, dtype=row.dtype)
        if local in loaded and not torch.equal(row, value):
            raise ValueError(f"MoE layer {layer.layer_name}: expert {expert_id}'s gate and up projections carry "
                             "different g_idx; Swordfish needs one activation order per w13 (as GPTQ and "
                             "llm-compressor write it)")
        row.copy_(value)
        loaded.add(local)
        return True if return_success else None

    weight_loader.supports_moe_loading = True
    return weight_loader


class SwordfishGPTQMoEMethod(_SwordfishMoEMethod, AutoGPTQMoEMethod):
    """GPTQ experts (``quant_method: gptq``; the gptq / gptq_marlin / auto_gptq configs and swordfish_gptq)."""

    checkpoint_params = ("w13_qweight", "w13_scales", "w13_qzeros", "w2_qweight", "w2_scales", "w2_qzeros")
    g_idx_names = ("w13_g_idx", "w2_g_idx")
    w2_group_params = (("w2_scales", 1),)  # (E, I / group, H); symmetric GPTQ's qzeros are not read

    def __init__(self, quant_config: AutoGPTQConfig, moe: FusedMoEConfig, *, act_order: bool,
                 keeps_g_idx: bool) -> None:
        FusedMoEMethodBase.__init__(self, moe)  # not AutoGPTQMoEMethod.__init__: it runs vLLM's backend oracle
        self.quant_config = quant_config
        self.input_dtype = None
        self.use_marlin = False
        self.experts_cls = SwordfishExperts
        self.act_order, self.keeps_g_idx = act_order, keeps_g_idx
        self.bits, self.group_size = quant_config.weight_bits, quant_config.group_size

    def create_weights(self, layer, num_experts, hidden_size, intermediate_size_per_partition, params_dtype,
                       **extra_weight_attrs):
        super().create_weights(layer, num_experts, hidden_size, intermediate_size_per_partition, params_dtype,
                               **extra_weight_attrs)
        self._create_g_idx(layer, num_experts, hidden_size, intermediate_size_per_partition)

    def _experts_from_layer(self, layer):
        dtype = self.moe.in_dtype
        return tuple(sf.QuantizedExperts.from_gptq(getattr(layer, f"{w}_qweight").data,
                                                   getattr(layer, f"{w}_scales").data,
                                                   self._g_idx(layer, f"{w}_g_idx"), bits=self.bits,
                                                   group_size=self.group_size, dtype=dtype)
                     for w in ("w13", "w2"))


class SwordfishAWQMoEMethod(_SwordfishMoEMethod, AutoAWQMoEMethod):
    """AWQ experts (``quant_method: awq``, GEMM layout, int4 with zero points)."""

    checkpoint_params = ("w13_qweight", "w13_scales", "w13_qzeros", "w2_qweight", "w2_scales", "w2_qzeros")
    g_idx_names = ("", "")
    act_order = keeps_g_idx = False

    def __init__(self, quant_config: AutoAWQConfig, moe: FusedMoEConfig) -> None:
        FusedMoEMethodBase.__init__(self, moe)  # not AutoAWQMoEMethod.__init__: it runs vLLM's backend oracle
        self.quant_config = quant_config
        self.quant_type = scalar_types.uint4
        self.input_dtype = None
        self.use_marlin = False
        self.experts_cls = SwordfishExperts
        self.bits, self.group_size = 4, quant_config.group_size

    def _experts_from_layer(self, layer):
        return tuple(sf.QuantizedExperts.from_awq(getattr(layer, f"{w}_qweight").data,
                                                  getattr(layer, f"{w}_qzeros").data,
                                                  getattr(layer, f"{w}_scales").data,
                                                  group_size=self.group_size, dtype=self.moe.in_dtype)
                     for w in ("w13", "w2"))


class SwordfishCompressedTensorsMoEMethod(_SwordfishMoEMethod, CompressedTensorsWNA16MoEMethod):
    """compressed-tensors ``pack-quantized`` W4A16 / W8A16 experts (symmetric, or asymmetric int4)."""

    checkpoint_params = ("w13_weight_packed", "w13_weight_scale", "w13_weight_zero_point", "w13_weight_shape",
                         "w2_weight_packed", "w2_weight_scale", "w2_weight_zero_point", "w2_weight_shape")
    g_idx_names = ("w13_weight_g_idx", "w2_weight_g_idx")
    w2_group_params = (("w2_weight_scale", 2), ("w2_weight_zero_point", 2))  # (E, H[/pack], I / group)

    def __init__(self, weight_quant, input_quant, moe: FusedMoEConfig, *, act_order: bool) -> None:
        # not CompressedTensorsWNA16MoEMethod.__init__: it runs vLLM's backend oracle. These are the attributes
        # its create_weights reads.
        FusedMoEMethodBase.__init__(self, moe)
        self.weight_quant, self.input_quant = weight_quant, input_quant
        self.symmetric = weight_quant.symmetric
        self.num_bits = weight_quant.num_bits
        self.packed_factor = Fraction(32, weight_quant.num_bits)
        self.strategy = weight_quant.strategy
        self.group_size = -1 if weight_quant.group_size is None else weight_quant.group_size
        self.quant_type = (WNA16_SUPPORTED_TYPES_MAP if self.symmetric else WNA16_ZP_SUPPORTED_TYPES_MAP)[self.num_bits]
        self.is_marlin = False
        self.is_transposed = False
        self.input_dtype = None
        self.experts_cls = SwordfishExperts
        self.act_order = self.keeps_g_idx = act_order
        self.bits = self.num_bits

    def create_weights(self, layer, num_experts, hidden_size, intermediate_size_per_partition, params_dtype,
                       **extra_weight_attrs):
        super().create_weights(layer, num_experts, hidden_size, intermediate_size_per_partition, params_dtype,
                               **extra_weight_attrs)
        self._create_g_idx(layer, num_experts, hidden_size, intermediate_size_per_partition)

    def _experts_from_layer(self, layer):
        H, I = layer.hidden_size, layer.intermediate_size_per_partition  # noqa: E741
        zp = (lambda w: None) if self.symmetric else (lambda w: getattr(layer, f"{w}_weight_zero_point").data)
        return tuple(sf.QuantizedExperts.from_compressed_tensors(
            getattr(layer, f"{w}_weight_packed").data, getattr(layer, f"{w}_weight_scale").data,
            weight_shape=shape, num_bits=self.bits, group_size=self.group_size, weight_zero_point=zp(w),
            weight_g_idx=self._g_idx(layer, f"{w}_weight_g_idx"), dtype=self.moe.in_dtype)
            for w, shape in (("w13", (2 * I, H)), ("w2", (H, I))))


# ------------------------------------------------------------------ choosing


@dataclasses.dataclass
class Plan:
    """What a layer's checkpoint is, and how to build the Swordfish method for it."""

    fmt: str  # "gptq", "awq", "compressed-tensors"
    bits: int
    has_zero_points: bool
    group_size: int
    act_order: bool
    build: Callable[[], FusedMoEMethodBase]
    reason: str | None = None  # the checkpoint itself rules Swordfish out (W4A8, ...)
    # Why only Swordfish can serve these experts (act-order; a swordfish_gptq checkpoint's g_idx tensors), or None
    swordfish_only: str | None = None


def plan_layer(layer: torch.nn.Module, prefix: str, quant_config, moe_config: FusedMoEConfig) -> Plan | str:
    """The Swordfish plan for this MoE layer's checkpoint format, or why Swordfish does not serve the format."""
    if quant_config is None:
        return "the experts are not quantized (Swordfish serves int4 / int8 weight-only experts)"
    if isinstance(quant_config, AutoGPTQConfig):
        return _plan_gptq(prefix, quant_config, moe_config)
    if isinstance(quant_config, AutoAWQConfig):
        return _plan_awq(prefix, quant_config, moe_config)
    if isinstance(quant_config, CompressedTensorsConfig):
        return _plan_compressed_tensors(layer, prefix, quant_config, moe_config)
    return (f"{quant_config.get_name()} checkpoints are not served by Swordfish's fused MoE (GPTQ, AWQ and "
            "compressed-tensors pack-quantized W4A16 / W8A16 are)")


def _plan_gptq(prefix: str, quant_config: AutoGPTQConfig, moe_config: FusedMoEConfig) -> Plan | str:
    if get_dynamic_override(quant_config, layer_name=prefix) is False:
        return "a GPTQ dynamic rule leaves these experts unquantized"
    from . import act_order

    cfg = copy.deepcopy(quant_config)
    if prefix:
        override_config(cfg, prefix)  # the layer's dynamic rule (bits, group size, desc_act)
    ordered = bool(getattr(cfg, "desc_act", False)) and cfg.group_size != -1
    keeps = isinstance(quant_config, act_order.SwordfishGPTQConfig)  # its checkpoints keep their g_idx tensors
    plan = Plan("gptq", cfg.weight_bits, False, cfg.group_size, ordered,
                lambda: SwordfishGPTQMoEMethod(cfg, moe_config, act_order=ordered, keeps_g_idx=keeps))
    if ordered:
        plan.swordfish_only = "act-order (desc_act) GPTQ experts"
    elif keeps:
        plan.swordfish_only = "experts of an act-order GPTQ checkpoint (their g_idx tensors are loaded)"
    from vllm import envs

    marlin_input = envs.VLLM_MARLIN_INPUT_DTYPE
    if marlin_input:
        plan.reason = (f"VLLM_MARLIN_INPUT_DTYPE={marlin_input} asks for W{cfg.weight_bits}A8 (quantized "
                       "activations); Swordfish is weight-only with float16 / bfloat16 activations")
    return plan


def _plan_awq(prefix: str, quant_config: AutoAWQConfig, moe_config: FusedMoEConfig) -> Plan | str:
    if is_layer_skipped(prefix, getattr(quant_config, "modules_to_not_convert", []) or [], match_mode="substring"):
        return "AWQ's modules_to_not_convert leaves these experts unquantized"
    plan = Plan("awq", quant_config.weight_bits, True, quant_config.group_size, False,
                lambda: SwordfishAWQMoEMethod(quant_config, moe_config))
    if not quant_config.zero_point:
        plan.reason = "AWQ without zero points (zero_point: false) is not served by Swordfish's fused MoE"
    return plan


def _plan_compressed_tensors(layer, prefix: str, quant_config: CompressedTensorsConfig,
                             moe_config: FusedMoEConfig) -> Plan | str:
    # The scheme lookup of vLLM's CompressedTensorsMoEMethod.get_moe_method: the experts' unfused names.
    quant_config._add_fused_moe_to_target_scheme_map()
    names = [f"{prefix}.0.{p}" for p in (layer.ckpt_gate_proj_name, layer.ckpt_up_proj_name,
                                         layer.ckpt_down_proj_name) if p is not None]
    schemes = [quant_config.get_scheme_dict(layer, n) for n in names]
    scheme = schemes[-1]
    if any(s != scheme for s in schemes):
        return "the experts' projections have different quantization schemes"  # vLLM raises on it too
    if scheme is None:
        return "compressed-tensors' ignore list leaves these experts unquantized"
    weights, inputs, layout = scheme.get("weights"), scheme.get("input_activations"), scheme.get("format")
    if weights is None:
        return "compressed-tensors leaves these experts' weights unquantized"
    wtype = str(getattr(weights.type, "value", weights.type))
    strategy = str(getattr(weights.strategy, "value", weights.strategy))
    if wtype != "int" or strategy not in ("group", "channel") or weights.dynamic:
        return (f"compressed-tensors weights of type {wtype}, strategy {strategy} are not served by Swordfish's "
                "fused MoE (static int group / channel weights are)")
    order = getattr(weights, "actorder", None)
    ordered = order is not None and str(getattr(order, "value", order)) in _GROUP_ACTORDER
    group = -1 if weights.group_size is None or strategy == "channel" else weights.group_size
    plan = Plan("compressed-tensors", weights.num_bits, not weights.symmetric, group, ordered,
                lambda: SwordfishCompressedTensorsMoEMethod(weights, inputs, moe_config, act_order=ordered),
                swordfish_only="group-actorder compressed-tensors experts" if ordered else None)
    if inputs is not None:
        in_type = str(getattr(inputs.type, "value", inputs.type))
        plan.reason = (f"W{weights.num_bits}A{inputs.num_bits} ({in_type} activations): Swordfish is weight-only "
                       "with float16 / bfloat16 activations")
    elif layout != "pack-quantized":
        plan.reason = f"compressed-tensors format {layout!r} (Swordfish serves pack-quantized)"
    return plan


def layer_reason(plan: Plan, moe_config: FusedMoEConfig) -> str | None:
    """Why Swordfish cannot serve this layer on this rank (None: it can). Device-independent."""
    if plan.reason is not None:
        return plan.reason
    pc = moe_config.moe_parallel_config
    # act-order w2 across row-parallel shards: served in the padded act-order layout per rank (issue #36)
    if not moe_config.activation.is_gated or moe_config.activation.value not in selection.MOE_ACTIVATIONS:
        return (f"activation {moe_config.activation.value} (Swordfish's fused MoE computes "
                f"{' / '.join(a + '_and_mul' for a in selection.MOE_ACTIVATIONS)})")
    if any(v is not None for v in (moe_config.swiglu_limit, moe_config.swiglu_alpha, moe_config.swiglu_beta)):
        return "a clamped / scaled SwiGLU (swiglu_limit / alpha / beta)"
    if moe_config.has_bias:
        return "expert biases"
    if pc.enable_eplb:
        return "expert-parallel load balancing (EPLB)"
    supported, why = SwordfishExperts.is_supported_config(SwordfishExperts, moe_config, None, None,
                                                         mk.FusedMoEActivationFormat.Standard)
    if not supported:
        return why
    return selection.moe_support_reason(bits=plan.bits, has_zero_points=plan.has_zero_points,
                                        group_size=plan.group_size, act_dtype=kernel._dtype_name(moe_config.in_dtype),
                                        hidden_size=moe_config.hidden_dim,
                                        intermediate_size=moe_config.intermediate_size_per_partition)


def _moe_ops_reason() -> str | None:
    from swordfish_backend import ops

    if not ops.has_moe():
        return f"the compiled extension has no MoE ops ({ops.moe_error()}); rebuild swordfish-backend"
    return None


def runtime_reason() -> str | None:
    """Why Swordfish's fused MoE cannot run here (None: it can): the linear kernel's reasons (kill switch, CUDA,
    extension, architecture), then the extension's MoE ops."""
    return kernel.runtime_reason() or _moe_ops_reason()


def policy_reason(moe_config: FusedMoEConfig, plan: "Plan") -> str | None:
    """Why vLLM should not pick Swordfish for a MoE layer it could serve (None: pick it)."""
    backend = moe_config.moe_backend
    if backend == BACKEND:
        return None
    if backend != "auto":
        return f"--moe-backend {backend} asks for another backend"
    return selection.moe_auto_select_reason(kernel._capability(),
                                            (plan.bits, plan.has_zero_points, plan.group_size))


def choose(layer: torch.nn.Module, prefix: str, quant_config, moe_config: FusedMoEConfig):
    """The Swordfish method for this MoE layer, or None for vLLM's own choice (patch P4 calls it).

    ``--moe-backend swordfish``: every layer Swordfish can serve; any other layer gets one warning per reason
    (naming the first such layer) and ``moe_backend`` "auto" for vLLM's own choice. ``auto``: Swordfish where
    selection.MOE_AUTO_SELECT / MOE_AUTO_FORMATS say so. Act-order experts are Swordfish's or an error: vLLM
    0.33 has no act-order MoE kernel (its kernels would ignore g_idx and compute a wrong result).
    """
    forced = moe_config.moe_backend == BACKEND
    try:
        plan = plan_layer(layer, prefix, quant_config, moe_config)
    except Exception as e:  # noqa: BLE001 - a config this reader does not know must not break vLLM's own choice
        from . import act_order

        if isinstance(quant_config, (act_order.SwordfishGPTQConfig, act_order.SwordfishCompressedTensorsConfig)):
            raise
        plan = f"Swordfish could not read this layer's quantization config ({type(e).__name__}: {e})"
    if isinstance(plan, Plan):
        reason = layer_reason(plan, moe_config) or runtime_reason()
        if reason is None and plan.swordfish_only is None:
            reason = policy_reason(moe_config, plan)
        if reason is None:
            logger.debug("Swordfish fused MoE serves %s (%s int%d, group %d%s)", prefix, plan.fmt, plan.bits,
                         plan.group_size, ", act-order" if plan.act_order else "")
            return plan.build()
        if plan.swordfish_only is not None:
            raise ValueError(
                f"MoE layer {prefix or '<unnamed>'}: {plan.swordfish_only} need Swordfish, which cannot serve them: "
                f"{reason}. vLLM 0.33 has no act-order MoE kernel to fall back to. Use a checkpoint quantized "
                "without group activation ordering (GPTQ desc_act=false / compressed-tensors actorder 'weight').")
    else:
        reason = plan
    if forced:
        _fallback_warning(prefix, reason)
        moe_config.moe_backend = "auto"
    else:
        logger.debug("Swordfish fused MoE not selected for %s: %s", prefix, reason)
    return None


def _fallback_warning(prefix: str, reason: str) -> None:
    if reason in _warned_reasons:
        logger.debug("--moe-backend swordfish: MoE layer %s goes to vLLM's own choice: %s", prefix, reason)
        return
    _warned_reasons.add(reason)
    logger.warning("--moe-backend swordfish: MoE layer %s (and any later layer for the same reason) goes to "
                   "vLLM's own choice: %s", prefix or "<unnamed>", reason)
