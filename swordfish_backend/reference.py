"""The reference path: exact dequantization and an fp32 matmul.

This is the oracle every kernel is tested against and the path
``sf.matmul`` takes for CPU tensors. It reads the packed v1 tensor through
the pure-torch unpacker, so it also checks the format end to end.
"""

from __future__ import annotations

import torch

from . import format as fmt


def dequantize(w, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(N, K) weight in original input-feature order, computed in fp32.

    ``(q - bias) * s + zs`` is exact in fp32 for int4/int8 codes and fp16/bf16
    scales; the result is cast to ``dtype`` (one rounding) at the end.
    """
    K, N = w.packed_k, w.out_features  # packed rows: in_features, or K_pad under the padded act-order layout
    codes = fmt.unpack_reference(w.packed, w.bits, K, N).to(torch.float32)  # (K, N), packed row order
    rows = torch.arange(K, device=codes.device) // w.scale_group
    scales = w.scales.to(torch.float32)[rows]
    sorted_w = (codes - fmt.bias(w.bits)) * scales
    if w.zeros is not None:
        sorted_w = sorted_w + w.zeros.to(torch.float32)[rows]
    # Round once to the activation dtype: the value the kernels feed the MMA.
    sorted_w = sorted_w.to(w.dtype).to(torch.float32)
    if w.perm is not None:
        perm = w.perm.to(torch.int64)
        real = (perm >= 0) & (perm < w.in_features)  # a pad row (-1) of the padded layout feeds no input
        out = torch.zeros(w.in_features, N, dtype=sorted_w.dtype, device=sorted_w.device)
        out[perm[real]] = sorted_w[real]
        sorted_w = out
    return sorted_w.t().contiguous().to(dtype)


def matmul(x: torch.Tensor, w, bias: torch.Tensor | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """x @ W^T (+ bias) with W = dequantize(w) rounded to w.dtype, accumulated in `dtype` (fp32 or fp64)."""
    weight = dequantize(w, dtype)
    y = x.to(dtype) @ weight.t()
    if bias is not None:
        y = y + bias.to(dtype)
    return y
