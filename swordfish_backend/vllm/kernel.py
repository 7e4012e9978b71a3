"""SwordfishLinearKernel: vLLM's MPLinearKernel served by Swordfish.

vLLM's GPTQ, AWQ and compressed-tensors WNA16 linear methods build an
``MPLinearLayerConfig`` and ask ``choose_mp_linear_kernel`` for a kernel
class; this is one. At load (``process_weights_after_loading``) it builds a
``swordfish_backend.QuantizedWeight`` from the layer's loaded parameters on
their own device (which prepacks there) and replaces the checkpoint-format
parameters with the packed tensors. ``apply_weights`` calls the one
registered op ``torch.ops.swordfish.gemm`` (the op ``swordfish_backend.ops.gemm``
wraps); the C++ dispatcher picks the kernel path per call from the true M.

Layouts handed to an MPLinearKernel by vLLM 0.33 (the same ones its Marlin
kernel reads): the quantized weight is a parameter tagged with
input_dim / output_dim / packed_dim (GPTQ ``(K / pack, N)`` or
compressed-tensors ``(N, K / pack)``, packed along K); the scales are tagged
``(K / group, N)`` or ``(N, K / group)``; zero points, when present, are
``(N / pack, K / group)`` packed along N, unsigned, in the same code domain as
the weight (AWQ is converted to that by vLLM before the kernel sees it).
"""

from __future__ import annotations

import torch
from vllm.logger import init_logger
from vllm.model_executor.kernels.linear.mixed_precision.MPLinearKernel import (
    MPLinearKernel,
    MPLinearLayerConfig,
)
from vllm.model_executor.utils import replace_parameter

import swordfish_backend as sf

from . import selection

logger = init_logger("vllm.swordfish")

PERM_PARAM = "swordfish_perm"  # act-order permutation registered on the layer
ZEROS_PARAM = "swordfish_zeros"  # folded zero points when the layer had no zero-point parameter name


def _dtype_name(dtype: torch.dtype | None) -> str | None:
    return None if dtype is None else str(dtype).removeprefix("torch.")


def _shard_width(K: int) -> int:
    """The smallest packed K of an act-order shard of K rows (the padded layout, docs/FORMAT.md)."""
    return -(-K // sf.format.ACT_ORDER_K_ALIGN) * sf.format.ACT_ORDER_K_ALIGN


def layer_reason(c: MPLinearLayerConfig, act_order_shard: bool = False) -> str | None:
    """Why Swordfish cannot hold this layer partition (None: it can). Device-independent.

    ``act_order_shard``: a row-parallel shard of an act-order layer, packed in the padded layout: its
    K_s rows need only K-packing (K_s % (32 / bits) == 0); the packed K is K_s padded to 128 or more.
    """
    wtype = str(c.weight_type)
    if wtype not in selection.WEIGHT_TYPES:
        return (f"weight type {wtype} is not supported "
                f"(supported: {', '.join(selection.WEIGHT_TYPES)})")
    bits, has_zp = selection.WEIGHT_TYPES[wtype]
    if bool(c.zero_points) != has_zp:
        return f"weight type {wtype} {'needs' if has_zp else 'takes no'} zero points, config says zero_points={c.zero_points}"
    K, N = c.partition_weight_shape
    if act_order_shard:
        if K % (32 // bits):
            return f"an act-order shard's K = {K} rows must be a multiple of {32 // bits} (int{bits} K-packing)"
        K = _shard_width(K)
    return selection.support_reason(bits=bits, has_zero_points=has_zp, group_size=c.group_size,
                                     act_dtype=_dtype_name(c.act_type), out_dtype=_dtype_name(c.out_type),
                                     in_features=K, out_features=N)


def library_reason(c: MPLinearLayerConfig) -> str | None:
    """The compiled library's own predicate for this layer on the current CUDA device (None: it
    accepts). Asked after runtime_reason(), so the extension is there; None without a usable CUDA
    device (layer_reason's device-independent rules are then all there is to ask)."""
    if not torch.cuda.is_available():
        return None
    bits, has_zp = selection.WEIGHT_TYPES[str(c.weight_type)]
    K, N = c.partition_weight_shape
    return selection.library_reason(bits=bits, has_zero_points=has_zp, group_size=c.group_size,
                                    act_dtype=_dtype_name(c.act_type), in_features=K, out_features=N,
                                    device_index=torch.cuda.current_device())


def _capability() -> tuple[int, int] | None:
    from vllm.platforms import current_platform
    cap = current_platform.get_device_capability()
    return None if cap is None else (cap[0], cap[1])


def _extension_reason() -> str | None:
    try:
        from swordfish_backend import ops
    except ImportError as e:  # the op wrappers are missing from this install
        return f"swordfish_backend.ops cannot be imported ({e})"
    if not ops.has_extension():
        return "the compiled extension swordfish_backend._C is not available (reinstall swordfish-backend with CUDA)"
    return None


def runtime_reason() -> str | None:
    """Why Swordfish cannot run here at all (None: it can): kill switch, platform, arch, extension."""
    from vllm.platforms import current_platform
    if selection.disabled():
        return "SWORDFISH_DISABLE is set"
    if not current_platform.is_cuda():
        return "Swordfish runs on NVIDIA CUDA devices only"
    reason = _extension_reason()
    if reason is not None:
        return reason
    from swordfish_backend import ops
    return selection.arch_reason(_capability(), ops.build_info().get("cuda_archs"))


def policy_reason() -> str | None:
    """Why vLLM should not pick Swordfish for a layer it could serve (None: pick it)."""
    from . import patches
    if patches.requested_linear_backend() == "swordfish":
        return None
    return selection.auto_select_reason(_capability())


class SwordfishLinearKernel(MPLinearKernel):
    """Weight-only int4/int8 GEMM (GPTQ, AWQ, compressed-tensors WNA16) for fp16/bf16 activations."""

    @classmethod
    def get_min_capability(cls) -> int:
        return 90

    @classmethod
    def can_implement(cls, c: MPLinearLayerConfig) -> tuple[bool, str | None]:
        reason = layer_reason(c) or runtime_reason() or library_reason(c) or policy_reason()
        if reason is None:
            return True, None
        from . import patches
        if patches.requested_linear_backend() == "swordfish":
            logger.warning_once("--linear-backend swordfish: this %s layer goes to vLLM's own kernels: %s",
                                c.weight_type, reason)
        else:
            logger.debug_once("Swordfish not selected for a %s layer: %s", c.weight_type, reason)
        return False, reason

    def __init__(self, c: MPLinearLayerConfig, w_q_param_name: str, w_s_param_name: str,
                 w_zp_param_name: str | None = None, w_gidx_param_name: str | None = None) -> None:
        super().__init__(c, w_q_param_name, w_s_param_name, w_zp_param_name)
        self.w_gidx_name = w_gidx_param_name
        self.bits, self.has_zero_points = selection.WEIGHT_TYPES[str(c.weight_type)]
        self.scale_group = 0  # rows per stored scale row, known after prepack
        self._zeros_name: str | None = None
        self._gemm = None

    # ----------------------------------------------------------------- load

    def _weight_from_layer(self, layer: torch.nn.Module) -> sf.QuantizedWeight:
        c = self.config
        K, N = c.partition_weight_shape
        qweight = _in_layout(getattr(layer, self.w_q_name), input_dim=0, output_dim=1)  # (K / pack, N)
        scales = _in_layout(getattr(layer, self.w_s_name), input_dim=0, output_dim=1)  # (K / group, N)
        g_idx = None
        if self.w_gidx_name is not None and getattr(layer, self.w_gidx_name, None) is not None:
            g_idx = getattr(layer, self.w_gidx_name).data
        if self.has_zero_points:
            zp = getattr(layer, self.w_zp_name).data  # (N / pack, K / group) packed along N
            # GPTQ words (K / pack, N) transposed are compressed-tensors words (N, K / pack): same packing along K.
            return sf.QuantizedWeight.from_compressed_tensors(
                qweight.t(), scales.t(), weight_shape=(N, K), num_bits=self.bits, group_size=c.group_size,
                weight_zero_point=zp.contiguous(), weight_g_idx=g_idx, dtype=c.act_type)
        return sf.QuantizedWeight.from_gptq(qweight.contiguous(), scales, g_idx, bits=self.bits,
                                            group_size=c.group_size, dtype=c.act_type)

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        w = self._weight_from_layer(layer)
        self.scale_group = w.scale_group
        replace_parameter(layer, self.w_q_name, w.packed)
        replace_parameter(layer, self.w_s_name, w.scales)
        if w.zeros is not None:
            self._zeros_name = self.w_zp_name or ZEROS_PARAM
            replace_parameter(layer, self._zeros_name, w.zeros)
        elif self.w_zp_name is not None and getattr(layer, self.w_zp_name, None) is not None:
            replace_parameter(layer, self.w_zp_name, None)  # e.g. GPTQ's unused qzeros: free it
        if self.w_gidx_name is not None and getattr(layer, self.w_gidx_name, None) is not None:
            replace_parameter(layer, self.w_gidx_name, None)
        replace_parameter(layer, PERM_PARAM, w.perm)
        if w.device.type == "cuda":
            from swordfish_backend import ops
            if not ops.has_extension():
                raise RuntimeError(f"Swordfish: {ops.extension_error()}")
            # The registered op itself (schema order = ops.gemm's): nothing in the forward for torch.compile
            # to trace but one custom-op call (ops.gemm's extension check takes a lock).
            self._gemm = torch.ops.swordfish.gemm

    # -------------------------------------------------------------- forward

    def apply_weights(self, layer: torch.nn.Module, x: torch.Tensor,
                      bias: torch.Tensor | None = None) -> torch.Tensor:
        K, N = self.config.partition_weight_shape
        packed = getattr(layer, self.w_q_name)
        scales = getattr(layer, self.w_s_name)
        zeros = getattr(layer, self._zeros_name) if self._zeros_name is not None else None
        perm = getattr(layer, PERM_PARAM, None)
        x2 = x.reshape(-1, K).contiguous()
        channelwise = self.config.group_size == -1
        if self._gemm is not None:
            y = self._gemm(x2, packed, scales, zeros, perm, bias, self.bits, self.scale_group, channelwise, 0, -1)
        else:  # CPU-resident weights (tests, CPU offload): the exact reference path
            packed_k = packed.shape[1] * sf.format.block_k(self.bits)  # K_pad under the padded act-order layout
            w = sf.QuantizedWeight(source=None, packed=packed.data, scales=scales.data,
                                   zeros=None if zeros is None else zeros.data,
                                   perm=None if perm is None else perm.data, bits=self.bits,
                                   group_size=self.config.group_size, in_features=K, out_features=N,
                                   dtype=scales.dtype, padded_k=None if packed_k == K else packed_k)
            y = sf.matmul(x2, w, bias)
        return y.reshape(*x.shape[:-1], N)


def _in_layout(param: torch.Tensor, *, input_dim: int, output_dim: int) -> torch.Tensor:
    """The parameter's data viewed with its input dim at `input_dim` (vLLM dim tags; untagged: as is)."""
    cur_in = getattr(param, "input_dim", None)
    cur_out = getattr(param, "output_dim", None)
    if cur_in is None and cur_out is None:
        return param.data
    if cur_in is None:
        cur_in = 1 - cur_out
    if cur_out is None:
        cur_out = 1 - cur_in
    if (cur_in, cur_out) == (input_dim, output_dim):
        return param.data
    return param.data.t()
