"""Act-order checkpoints that vLLM 0.33 refuses, served by Swordfish.

vLLM 0.33 raises on GPTQ ``desc_act=True`` with groups (gptq_utils.py) and on
compressed-tensors ``actorder: "group"`` / ``"dynamic"`` (its config parser):
its MPLinearKernel interface has no g_idx. Swordfish sorts the rows by group
at load and keeps the permutation for the activations, so it serves them.

Two quantization configs, registered with vLLM's public
``register_quantization_config``; their ``override_quantization_method``
claims exactly those checkpoints (vLLM probes registered configs before the
built-in ones), so ``vllm serve <model>`` needs no ``--quantization`` flag:

* ``swordfish_gptq`` subclasses ``AutoGPTQConfig``: ``quant_method: gptq``
  with ``desc_act: true`` and a group size (or a ``dynamic`` rule enabling it).
* ``swordfish_compressed_tensors`` subclasses ``CompressedTensorsConfig``:
  ``quant_method: compressed-tensors`` with a config group whose weights have
  ``actorder`` group / dynamic. Other groups of the same checkpoint keep
  vLLM's own schemes.

Tensor parallelism: column-parallel shards hold every input row, so the
whole g_idx and every group's scales: served. A row-parallel shard (o_proj,
down_proj) holds rows of every group: each rank loads its rows of qweight and
g_idx (sharded by input dim) and the whole layer's scales and zero points
(loaded whole, not sharded), and prepacks them in the padded act-order
layout (docs/FORMAT.md "Act-order shards": each group's rows padded to
32-row chunks, read as group 32): served, where vLLM 0.33 has no act-order
kernel at all.

MoE layers of these checkpoints never reach the configs' get_quant_method:
patch P4 hands them to moe_method.choose, which serves act-order experts
(per-expert g_idx [E, K]), a row-parallel w2 shard in the padded act-order
layout as above (its g_idx rows sliced per rank, its scales loaded whole);
the guards below only name that route if it is missing.

GPTQ checkpoints' ``.g_idx`` tensors: vLLM 0.33 drops them while loading
(``QuantizationConfig.get_checkpoint_weight_mapper``); ``swordfish_gptq``
keeps them, and every layer it quantizes has a g_idx parameter to take them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from vllm.logger import init_logger
from vllm.model_executor.kernels.linear import (
    MPLinearLayerConfig,
    choose_mp_linear_kernel,
)
from vllm.model_executor.layers.fused_moe import RoutedExperts
from vllm.model_executor.layers.linear import (
    WEIGHT_LOADER_V2_SUPPORTED,
    LinearMethodBase,
    register_weight_loader_v2_supported_method,
)
from vllm.model_executor.layers.quantization import register_quantization_config
from vllm.model_executor.layers.quantization.auto_gptq import AutoGPTQConfig
from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import (
    CompressedTensorsConfig,
)
from vllm.model_executor.layers.quantization.compressed_tensors.schemes import (
    CompressedTensorsWNA16,
)
from vllm.model_executor.layers.quantization.utils.gptq_utils import (
    get_dynamic_override,
    get_linear_quant_method,
)
from vllm.model_executor.parameter import (
    BasevLLMParameter,
    ChannelQuantScaleParameter,
    GroupQuantScaleParameter,
    PackedColumnParameter,
    PackedvLLMParameter,
    RowvLLMParameter,
)

from . import selection
from .kernel import SwordfishLinearKernel, layer_reason, runtime_reason

logger = init_logger("vllm.swordfish")

GPTQ_NAME = "swordfish_gptq"
CT_NAME = "swordfish_compressed_tensors"
_GROUP_ACTORDER = ("group", "dynamic")


class GIdxParameter(RowvLLMParameter):
    """g_idx (K) of an act-order layer. The shards of a fused layer (q/k/v, gate/up) share their input and so
    their activation order: each shard loads the same g_idx, and a shard that differs is an error."""

    def _assert_and_load(self, loaded_weight: torch.Tensor) -> None:
        if getattr(self, "_swordfish_loaded", False) and not torch.equal(self.data, loaded_weight.to(self.data)):
            raise ValueError("the shards of a fused act-order layer carry different g_idx; Swordfish needs one "
                             "activation order per fused layer (as GPTQ and llm-compressor write it)")
        super()._assert_and_load(loaded_weight)
        self._swordfish_loaded = True


def _moe_route_error(prefix: str, fmt: str) -> str:
    return (f"MoE layer {prefix or '<unnamed>'}: the experts of an act-order {fmt} checkpoint are served by "
            "Swordfish's fused MoE (swordfish_backend.vllm.moe_method, reached through patches.P4), which did not "
            "handle this layer; vLLM 0.33 has no act-order MoE kernel")


def _require_swordfish(c: MPLinearLayerConfig, prefix: str, what: str, row_shard: bool = False) -> None:
    reason = layer_reason(c, act_order_shard=row_shard) or runtime_reason()
    if reason is not None:
        raise ValueError(f"{what} layer {prefix or '<unnamed>'} needs Swordfish (vLLM 0.33 has no act-order "
                         f"kernel), which cannot serve it: {reason}")


# ------------------------------------------------------------------- GPTQ


def gptq_needs_act_order(cfg: Mapping[str, Any]) -> bool:
    """True for a GPTQ quantization_config that vLLM 0.33 refuses for act-order."""
    group = cfg.get("group_size", -1)
    if cfg.get("desc_act") and group != -1:
        return True
    for pattern, override in (cfg.get("dynamic") or {}).items():
        if pattern.startswith("-:") or not isinstance(override, Mapping):
            continue
        if override.get("desc_act", cfg.get("desc_act")) and override.get("group_size", group) != -1:
            return True
    return False


class SwordfishGPTQConfig(AutoGPTQConfig):
    """GPTQ with act-order (desc_act) and groups, served by Swordfish."""

    def __init__(self, weight_bits: int, group_size: int, desc_act: bool, is_sym: bool, lm_head_quantized: bool,
                 dynamic: dict[str, dict[str, int | bool]], full_config: dict[str, Any],
                 modules_in_block_to_quantize: list[str] | None = None) -> None:
        # The base class refuses act-order in __init__; give it a desc_act-free view, then restore.
        plain = {p: ({k: v for k, v in o.items() if k != "desc_act"} if isinstance(o, Mapping) else o)
                 for p, o in (dynamic or {}).items()}
        super().__init__(weight_bits, group_size, False, is_sym, lm_head_quantized, plain, full_config,
                         modules_in_block_to_quantize)
        self.desc_act = bool(desc_act) and group_size != -1
        self.dynamic = dynamic or {}

    def __repr__(self) -> str:
        return f"SwordfishGPTQConfig(quant_type={self.quant_type}, group_size={self.group_size}, desc_act={self.desc_act})"

    @classmethod
    def get_name(cls) -> str:
        return GPTQ_NAME

    @classmethod
    def override_quantization_method(cls, hf_quant_cfg, user_quant, hf_config=None) -> str | None:
        if selection.disabled() or str(hf_quant_cfg.get("quant_method", "")).lower() != "gptq":
            return None
        if user_quant == GPTQ_NAME:
            return GPTQ_NAME
        if user_quant not in (None, "gptq", "gptq_marlin", "auto_gptq", "marlin"):
            return None
        return GPTQ_NAME if gptq_needs_act_order(hf_quant_cfg) else None

    @staticmethod
    def get_checkpoint_weight_mapper():
        from vllm.model_executor.models.utils import WeightsMapper

        return WeightsMapper()  # keep ``.g_idx`` (vLLM's default mapper drops it)

    def get_quant_method(self, layer: torch.nn.Module, prefix: str):
        if isinstance(layer, RoutedExperts):
            if get_dynamic_override(self, layer_name=prefix) is False:
                return super().get_quant_method(layer, prefix)  # experts a dynamic rule leaves unquantized
            raise ValueError(_moe_route_error(prefix, "GPTQ"))
        return get_linear_quant_method(self, layer, prefix, SwordfishGPTQLinearMethod)


class SwordfishGPTQLinearMethod(LinearMethodBase):
    """GPTQ linear layers of an act-order checkpoint: qweight, scales, qzeros and g_idx."""

    def __init__(self, quant_config: SwordfishGPTQConfig) -> None:
        self.quant_config = quant_config
        self.kernel = None

    def create_weights(self, layer: torch.nn.Module, input_size_per_partition: int,
                       output_partition_sizes: list[int], input_size: int, output_size: int,
                       params_dtype: torch.dtype, **extra_weight_attrs) -> None:
        cfg = self.quant_config
        prefix = getattr(layer, "prefix", "")
        K, N = input_size_per_partition, sum(output_partition_sizes)
        row_parallel = input_size != input_size_per_partition
        act_order = cfg.desc_act and cfg.group_size != -1
        loader = extra_weight_attrs.get("weight_loader")
        c = MPLinearLayerConfig(full_weight_shape=(input_size, output_size), partition_weight_shape=(K, N),
                                weight_type=cfg.quant_type, act_type=params_dtype, group_size=cfg.group_size,
                                zero_points=False)
        if act_order:
            _require_swordfish(c, prefix, "Act-order GPTQ", row_shard=row_parallel)
        pack = cfg.pack_factor
        # One scale row (channelwise), or an act-order shard's rows of any group: scales and zero points
        # loaded whole on every rank (the tagged-by-output-only parameters below are not row-sharded).
        whole = row_parallel and (cfg.group_size == -1 or act_order)
        groups = 1 if cfg.group_size == -1 else (input_size if whole else K) // cfg.group_size
        qweight = PackedvLLMParameter(data=torch.empty(K // pack, N, dtype=torch.int32), input_dim=0, output_dim=1,
                                      packed_dim=0, packed_factor=pack, weight_loader=loader)
        scale_data = torch.empty(groups, N, dtype=params_dtype)
        zero_data = torch.empty(groups, N // pack, dtype=torch.int32)
        if cfg.group_size == -1 or whole:
            scales = ChannelQuantScaleParameter(data=scale_data, output_dim=1, weight_loader=loader)
            qzeros = PackedColumnParameter(data=zero_data, output_dim=1, packed_dim=1, packed_factor=pack,
                                           weight_loader=loader)
        else:
            scales = GroupQuantScaleParameter(data=scale_data, input_dim=0, output_dim=1, weight_loader=loader)
            qzeros = PackedvLLMParameter(data=zero_data, input_dim=0, output_dim=1, packed_dim=1,
                                         packed_factor=pack, weight_loader=loader)
        g_idx = GIdxParameter(data=torch.empty(K, dtype=torch.int32), input_dim=0, weight_loader=loader)
        layer.register_parameter("qweight", qweight)
        layer.register_parameter("scales", scales)
        layer.register_parameter("qzeros", qzeros)  # symmetric: loaded and freed, never read
        layer.register_parameter("g_idx", g_idx)
        if act_order:
            self.kernel = SwordfishLinearKernel(c, "qweight", "scales", "qzeros", w_gidx_param_name="g_idx")
        else:  # a layer a dynamic rule quantized without act-order: vLLM's usual choice
            self.kernel = choose_mp_linear_kernel(c)(c, w_q_param_name="qweight", w_s_param_name="scales",
                                                     w_zp_param_name="qzeros")

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        if not isinstance(self.kernel, SwordfishLinearKernel) and getattr(layer, "g_idx", None) is not None:
            layer.register_parameter("g_idx", None)
        self.kernel.process_weights_after_loading(layer)

    def apply(self, layer: torch.nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return self.kernel.apply_weights(layer, x, bias)


# ------------------------------------------------------- compressed-tensors


def _weights_actorder(group: Mapping[str, Any]) -> str | None:
    weights = group.get("weights") or {}
    order = weights.get("actorder") if isinstance(weights, Mapping) else None
    return None if order is None else str(order).lower()


def ct_needs_act_order(cfg: Mapping[str, Any]) -> bool:
    """True for a compressed-tensors quantization_config with group activation ordering."""
    return any(_weights_actorder(g) in _GROUP_ACTORDER for g in (cfg.get("config_groups") or {}).values()
               if isinstance(g, Mapping))


class SwordfishCompressedTensorsConfig(CompressedTensorsConfig):
    """compressed-tensors with actorder group; weight-only pack-quantized groups are served by Swordfish."""

    def get_name(self) -> str:
        return CT_NAME

    @classmethod
    def override_quantization_method(cls, hf_quant_cfg, user_quant, hf_config=None) -> str | None:
        if selection.disabled() or str(hf_quant_cfg.get("quant_method", "")).lower() != "compressed-tensors":
            return None
        if user_quant == CT_NAME:
            return CT_NAME
        if user_quant not in (None, "compressed-tensors"):
            return None
        return CT_NAME if ct_needs_act_order(hf_quant_cfg) else None

    @classmethod
    def _quantization_scheme_map_from_config(cls, config: dict[str, Any]):
        # The base parser refuses group actorder: parse an actorder-free copy, then put it back.
        plain = copy.deepcopy(config)
        ordered_targets: list[str] = []
        for group in (plain.get("config_groups") or {}).values():
            if _weights_actorder(group) in _GROUP_ACTORDER:
                group["weights"]["actorder"] = None
                ordered_targets.extend(group.get("targets") or [])
        scheme_map = super()._quantization_scheme_map_from_config(plain)
        for target in ordered_targets:
            weights = scheme_map[target]["weights"]
            scheme_map[target]["weights"] = weights.model_copy(update={"actorder": "group"})
        return scheme_map

    def _get_scheme_from_parts(self, weight_quant, input_quant, output_quant=None, format=None, layer_name=None):
        scheme = super()._get_scheme_from_parts(weight_quant, input_quant, output_quant, format, layer_name)
        order = getattr(weight_quant, "actorder", None)
        if order is None or str(getattr(order, "value", order)) not in _GROUP_ACTORDER:
            return scheme
        if type(scheme) is not CompressedTensorsWNA16:
            raise ValueError(f"layer {layer_name}: group activation ordering is served for weight-only "
                             f"pack-quantized int (WNA16) layers only, this one is {type(scheme).__name__}")
        return SwordfishCompressedTensorsWNA16(strategy=scheme.strategy, num_bits=scheme.num_bits,
                                               group_size=scheme.group_size, symmetric=scheme.symmetric,
                                               layer_name=layer_name)

    def get_quant_method(self, layer: torch.nn.Module, prefix: str):
        if isinstance(layer, RoutedExperts):
            scheme = self.get_scheme_dict(layer, layer_name=f"{prefix}.0.{layer.ckpt_down_proj_name}") or {}
            order = getattr(scheme.get("weights"), "actorder", None)
            if order is not None and str(getattr(order, "value", order)) in _GROUP_ACTORDER:
                raise ValueError(_moe_route_error(prefix, "compressed-tensors"))
        return super().get_quant_method(layer, prefix)


class SwordfishCompressedTensorsWNA16(CompressedTensorsWNA16):
    """A pack-quantized WNA16 layer with weight_g_idx (actorder group)."""

    @classmethod
    def get_min_capability(cls) -> int:
        return SwordfishLinearKernel.get_min_capability()

    def create_weights(self, layer: torch.nn.Module, output_size: int, input_size: int,
                       output_partition_sizes: list[int], input_size_per_partition: int,
                       params_dtype: torch.dtype, weight_loader, **kwargs) -> None:
        K, N = input_size_per_partition, sum(output_partition_sizes)
        prefix = self.layer_name or ""
        layer.input_size_per_partition = K
        layer.output_size_per_partition = N
        layer.output_partition_sizes = output_partition_sizes
        layer.params_dtype = params_dtype
        self.use_batch_invariant = False
        c = MPLinearLayerConfig(full_weight_shape=(input_size, output_size), partition_weight_shape=(K, N),
                                weight_type=self.quant_type, act_type=params_dtype, group_size=self.group_size,
                                zero_points=not self.symmetric)
        row_shard = input_size != input_size_per_partition and self.group_size != -1
        _require_swordfish(c, prefix, "Group-actorder compressed-tensors", row_shard=row_shard)
        pack = 32 // self.num_bits
        # A row-parallel shard holds rows of any group: the whole layer's scales and zero points, loaded
        # whole on every rank (parameters tagged by output dim only are not row-sharded).
        groups = 1 if self.group_size == -1 else (input_size if row_shard else K) // self.group_size
        layer.register_parameter("weight_packed", PackedvLLMParameter(
            data=torch.empty(N, K // pack, dtype=torch.int32), input_dim=1, output_dim=0, packed_dim=1,
            packed_factor=pack, weight_loader=weight_loader))
        scale = torch.empty(N, groups, dtype=params_dtype)
        if self.group_size == -1 or row_shard:
            layer.register_parameter("weight_scale", ChannelQuantScaleParameter(
                data=scale, output_dim=0, weight_loader=weight_loader))
        else:
            layer.register_parameter("weight_scale", GroupQuantScaleParameter(
                data=scale, input_dim=1, output_dim=0, weight_loader=weight_loader))
        if not self.symmetric and row_shard:
            layer.register_parameter("weight_zero_point", PackedColumnParameter(
                data=torch.zeros(N // pack, groups, dtype=torch.int32), output_dim=0, packed_dim=0,
                packed_factor=pack, weight_loader=weight_loader))
        elif not self.symmetric:
            layer.register_parameter("weight_zero_point", PackedvLLMParameter(
                data=torch.zeros(N // pack, groups, dtype=torch.int32), input_dim=1, output_dim=0, packed_dim=0,
                packed_factor=pack, weight_loader=weight_loader))
        layer.register_parameter("weight_shape", BasevLLMParameter(
            data=torch.empty(2, dtype=torch.int64), weight_loader=weight_loader))
        layer.register_parameter("weight_g_idx", GIdxParameter(
            data=torch.empty(K, dtype=torch.int32), input_dim=0, weight_loader=weight_loader))
        self.kernel = SwordfishLinearKernel(c, "weight_packed", "weight_scale",
                                            None if self.symmetric else "weight_zero_point",
                                            w_gidx_param_name="weight_g_idx")

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        self.kernel.process_weights_after_loading(layer)

    def apply_weights(self, layer: torch.nn.Module, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return self.kernel.apply_weights(layer, x, bias)


def register_configs() -> None:
    """Register both configs with vLLM (idempotent: re-registering maps the same name to the same class)."""
    if SwordfishGPTQLinearMethod.__name__ not in WEIGHT_LOADER_V2_SUPPORTED:
        # our parameters are vLLM's BasevLLMParameter classes, loaded by the layers' weight_loader_v2
        register_weight_loader_v2_supported_method(SwordfishGPTQLinearMethod)
    register_quantization_config(GPTQ_NAME)(SwordfishGPTQConfig)
    register_quantization_config(CT_NAME)(SwordfishCompressedTensorsConfig)
