"""Checkpoint layouts -> the canonical integer form every QuantizedWeight is built from.

The canonical form (``Canonical``) is GPTQ's: unsigned codes K-packed into
int32 ``(K * bits / 32, N)`` with the implicit zero point 8 / 128, scales
``(K / group, N)`` (one row when channelwise), optional integer zero points
``(K / group, N)`` and an optional ``g_idx`` ``(K)``. Converting to it costs
at most one unpack/repack of the codes and runs on the tensors' own device.

Validation here names every offending value; QuantizedWeight does the rest
(group size, act-order grouping, packing).
"""

from __future__ import annotations

import dataclasses

import torch

from . import format as fmt

# AWQ's GEMM kernels pack column 8c + AWQ_ORDER[i] into nibble i of word c.
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


@dataclasses.dataclass
class Canonical:
    qweight: torch.Tensor  # int32 (K * bits / 32, N), unsigned codes, zero point 8 / 128
    scales: torch.Tensor  # (groups, N), floating point
    zeros: torch.Tensor | None  # integer (groups, N) zero points in [0, 2**bits), or None
    g_idx: torch.Tensor | None  # integer (K) group of each input row, or None
    bits: int
    group_size: int


def _require_tensor(t, name: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    return t


def _require_int32(t, name: str) -> torch.Tensor:
    _require_tensor(t, name)
    if t.dtype != torch.int32:
        raise TypeError(f"{name} must be int32 (packed words), got {t.dtype}")
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(t.shape)}")
    return t


def _same_device(**tensors) -> None:
    devices = {name: t.device for name, t in tensors.items() if t is not None}
    if len(set(devices.values())) > 1:
        listing = ", ".join(f"{name} on {dev}" for name, dev in devices.items())
        raise ValueError(f"all tensors of a weight must be on one device, got {listing}")


def _unpack_rows(words: torch.Tensor, bits: int, order=None) -> torch.Tensor:
    """int32 (R, C) packed along dim 1 -> codes (R, C * 32 / bits), int64."""
    vpw = 32 // bits
    shifts = torch.arange(vpw, device=words.device, dtype=torch.int64) * bits
    if order is not None:
        # value for column offset j sits in field position(j)
        position = [order.index(j) for j in range(vpw)]
        shifts = shifts[torch.tensor(position, device=words.device)]
    codes = ((words.to(torch.int64).unsqueeze(-1) & 0xFFFFFFFF) >> shifts) & ((1 << bits) - 1)
    return codes.reshape(words.shape[0], words.shape[1] * vpw)


def unpack_awq(words: torch.Tensor) -> torch.Tensor:
    """AWQ's int32 words (R, C), eight 4-bit codes each in AWQ_ORDER -> codes (R, 8 C) in column order, int64."""
    return _unpack_rows(words, 4, AWQ_ORDER)


def from_gptq(qweight, scales, g_idx, bits: int, group_size: int) -> Canonical:
    _require_int32(qweight, "qweight")
    _require_tensor(scales, "scales")
    if g_idx is not None:
        _require_tensor(g_idx, "g_idx")
    _same_device(qweight=qweight, scales=scales, g_idx=g_idx)
    fmt._check_bits(bits)
    return Canonical(qweight.contiguous(), scales, None, g_idx, bits, group_size)


def from_awq(qweight, qzeros, scales, group_size: int) -> Canonical:
    bits = 4
    _require_int32(qweight, "qweight")
    _require_int32(qzeros, "qzeros")
    _require_tensor(scales, "scales")
    _same_device(qweight=qweight, qzeros=qzeros, scales=scales)
    K, n_words = qweight.shape
    N = n_words * 8
    if scales.dim() != 2 or scales.shape[1] != N:
        raise ValueError(f"AWQ scales must be (K / group, {N}) for qweight {tuple(qweight.shape)}, got {tuple(scales.shape)}")
    if qzeros.shape != (scales.shape[0], n_words):
        raise ValueError(
            f"AWQ qzeros must be ({scales.shape[0]}, {n_words}) (one packed row per scale row), got {tuple(qzeros.shape)}"
        )
    if K % 8:
        raise ValueError(f"AWQ in_features K must be a multiple of 8, got K = {K}")
    q = unpack_awq(qweight)
    zeros = unpack_awq(qzeros)
    return Canonical(fmt.pack_k(q, bits), scales, zeros, None, bits, group_size)


def from_compressed_tensors(
    weight_packed, weight_scale, weight_shape, num_bits: int, group_size: int, weight_zero_point, weight_g_idx
) -> Canonical:
    fmt._check_bits(num_bits)
    _require_int32(weight_packed, "weight_packed")
    _require_tensor(weight_scale, "weight_scale")
    _same_device(weight_packed=weight_packed, weight_scale=weight_scale, weight_zero_point=weight_zero_point,
                 weight_g_idx=weight_g_idx)
    try:
        N, K = (int(v) for v in weight_shape)
    except (TypeError, ValueError):
        raise ValueError(f"weight_shape must be (out_features, in_features), got {weight_shape!r}") from None
    vpw = 32 // num_bits
    if K % vpw or tuple(weight_packed.shape) != (N, K // vpw):
        raise ValueError(
            f"weight_packed for weight_shape (N={N}, K={K}) at {num_bits} bits must be ({N}, {K // vpw}) "
            f"with K % {vpw} == 0, got {tuple(weight_packed.shape)}"
        )
    if weight_scale.dim() != 2 or weight_scale.shape[0] != N:
        raise ValueError(f"weight_scale must be ({N}, K / group), got {tuple(weight_scale.shape)}")
    zeros = None
    if weight_zero_point is not None:
        zp = _require_tensor(weight_zero_point, "weight_zero_point")
        G = weight_scale.shape[1]
        if zp.dtype == torch.int32 and tuple(zp.shape) == (N // vpw, G) and N % vpw == 0:
            # packed along the output dim (dim 0), codes stored with the +2**(bits-1) offset
            zeros = _unpack_rows(zp.t().contiguous(), num_bits).t()
        elif not zp.dtype.is_floating_point and tuple(zp.shape) == (N, G):
            # unpacked signed zero points in [-2**(bits-1), 2**(bits-1))
            zeros = zp.to(torch.int64) + (1 << (num_bits - 1))
        else:
            raise ValueError(
                f"weight_zero_point must be int32 ({N // vpw}, {G}) packed along out_features, or integer ({N}, {G}) "
                f"unpacked; got {zp.dtype} {tuple(zp.shape)}"
            )
        zeros = zeros.t().contiguous()
    return Canonical(weight_packed.t().contiguous(), weight_scale.t(), zeros, weight_g_idx, num_bits, group_size)
