"""QuantizedWeight: one prepacked weight, read by every kernel path, and sf.matmul."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from . import checkpoints
from . import format as fmt

if TYPE_CHECKING:
    from typing_extensions import Self

_ACTIVATION_DTYPES = (torch.float16, torch.bfloat16)


def _resolve_dtype(dtype, scales: torch.Tensor) -> torch.dtype:
    if dtype is None:
        if scales.dtype not in _ACTIVATION_DTYPES:
            raise TypeError(
                f"scales are {scales.dtype}; pass dtype=torch.float16 or torch.bfloat16 to choose the activation dtype"
            )
        return scales.dtype
    if dtype not in _ACTIVATION_DTYPES:
        raise TypeError(f"dtype must be torch.float16 or torch.bfloat16, got {dtype}")
    return dtype


def _replica_group(K: int) -> int:
    """Group that channelwise scales are replicated to for the grouped paths."""
    for group in (fmt.CHANNELWISE_REPLICA_GROUP, 64, 32):
        if K % group == 0:
            return group
    raise ValueError(f"channelwise weights need K % 32 == 0, got K = {K}")


def _check_g_idx(g_idx: torch.Tensor, K: int, groups: int) -> torch.Tensor:
    """g_idx as int64 after the checks every act-order layout shares (shape, dtype, range)."""
    if g_idx.dim() != 1 or g_idx.shape[0] != K:
        raise ValueError(f"g_idx must have shape ({K},) (one group per input row), got {tuple(g_idx.shape)}")
    if g_idx.dtype.is_floating_point or g_idx.dtype == torch.bool:
        raise TypeError(f"g_idx must be an integer tensor, got {g_idx.dtype}")
    g = g_idx.to(torch.int64)
    if K and (bool((g < 0).any()) or bool((g >= groups).any())):
        raise ValueError(f"g_idx values must lie in [0, {groups}), got [{int(g.min())}, {int(g.max())}]")
    return g


def _act_order_permutation(g_idx: torch.Tensor, K: int, group_size: int, groups: int) -> torch.Tensor | None:
    """Row order that makes groups contiguous, or None when g_idx is already trivial."""
    if group_size == fmt.CHANNELWISE:
        g = _check_g_idx(g_idx, K, 1)  # every value 0
        return None
    g = _check_g_idx(g_idx, K, groups)
    counts = torch.bincount(g, minlength=groups)
    if bool((counts != group_size).any()):
        bad = int(torch.nonzero(counts != group_size)[0])
        raise ValueError(
            f"g_idx is not a valid grouping: group {bad} has {int(counts[bad])} rows, every group needs {group_size}"
        )
    trivial = torch.arange(K, device=g.device) // group_size
    if torch.equal(g, trivial):
        return None
    return torch.argsort(g, stable=True).to(torch.int32)


def _padded_parts(c: checkpoints.Canonical, K: int, N: int, groups: int, scales: torch.Tensor,
                  zeros: torch.Tensor | None) -> dict:
    """The padded act-order layout (docs/FORMAT.md "Act-order shards") of a shard's codes, scales and zeros.

    Returns source (codes K-packed in packed row order, K_pad rows, pad rows holding their pad code),
    scales / zeros expanded to one row per 32-row chunk, perm (K_pad, -1 for pad rows) and padded_k.
    """
    g = _check_g_idx(c.g_idx, K, groups)
    counts = torch.bincount(g, minlength=groups)
    if bool((counts > c.group_size).any()):
        bad = int(torch.nonzero(counts > c.group_size)[0])
        raise ValueError(f"g_idx is not a valid grouping: group {bad} has {int(counts[bad])} rows, more than "
                         f"group_size {c.group_size}")
    perm, chunk_groups = fmt.act_order_padded_layout(g, groups)
    K_pad = perm.numel()
    fmt.check_shape(c.bits, K_pad, N)
    real_chunk = chunk_groups != fmt.PAD_GROUP  # all-pad tail chunks get scale 0 and zero point 0: exact zeros
    pick = chunk_groups.clamp(min=0)

    def expand(t: torch.Tensor) -> torch.Tensor:
        return torch.where(real_chunk.view(-1, 1), t[pick], torch.zeros((), dtype=t.dtype, device=t.device))

    # Pad code: the one that dequantizes to 0, (q - z) * s = 0: the bias (8 / 128) for symmetric codes,
    # the column's zero point for asymmetric ones (its folded form (bias - z) * s rounds once, so such a
    # pad row is within one rounding of 0; the gathered activation there is exactly 0 either way).
    row_chunk = torch.arange(K_pad, device=perm.device) // fmt.ACT_ORDER_CHUNK
    if c.zeros is None:
        padded = torch.full((K_pad, N), fmt.bias(c.bits), dtype=torch.uint8, device=perm.device)
    else:
        z = c.zeros.to(device=perm.device, dtype=torch.uint8)
        padded = torch.where(real_chunk[row_chunk].view(-1, 1), z[pick[row_chunk]],
                             torch.full((), fmt.bias(c.bits), dtype=torch.uint8, device=perm.device))
    real = perm >= 0
    padded[real] = fmt.unpack_k(c.qweight, c.bits)[perm[real].to(torch.int64)]
    return dict(source=fmt.pack_k(padded, c.bits), scales=expand(scales).contiguous(),
                zeros=None if zeros is None else expand(zeros).contiguous(), perm=perm, padded_k=K_pad)


def _wants_padding(c: checkpoints.Canonical, K: int, padded: bool | None) -> bool:
    """Whether the weight takes the padded act-order layout: asked for, or (padded=None) a row-parallel
    shard of an act-order layer, whose scales cover more rows (groups * group_size) than it holds."""
    act_order = c.g_idx is not None and c.group_size not in (fmt.CHANNELWISE, None)
    if padded:
        if not act_order:
            raise ValueError("the padded act-order layout needs a g_idx and a group size (not channelwise)")
        return True
    if padded is False or not act_order or not isinstance(c.scales, torch.Tensor) or c.scales.dim() != 2:
        return False
    return c.scales.shape[0] * c.group_size > K


def weight_parts(c: checkpoints.Canonical, dtype, padded: bool | None = False) -> dict:
    """Validate a canonical weight and make the tensors a weight keeps, short of packing the codes.

    Returns the keyword arguments of ``QuantizedWeight(packed=None, ...)``:
    ``source`` (the K-packed codes), ``scales`` / ``zeros`` (folded, in the
    activation dtype, channelwise rows replicated to the scale group),
    ``perm`` (act-order row order or None), ``bits``, ``group_size``,
    ``in_features``, ``out_features``, ``dtype``, and, for the padded
    act-order layout, ``padded_k``. ``padded``: None takes the padded layout
    for a row-parallel shard of an act-order layer (g_idx with scales for more
    rows than the weight holds), True always (act-order only), False never (a
    shard's scales are then an error). ``QuantizedExperts`` builds each expert
    through this with None, then pads the experts to one K_pad.
    """
    bits, group_size = c.bits, c.group_size
    fmt._check_bits(bits)
    if group_size not in fmt.GROUP_SIZES:
        raise ValueError(f"group_size must be one of {fmt.GROUP_SIZES}, got {group_size!r}")
    rows, N = c.qweight.shape
    K = rows * fmt.values_per_word(bits)
    pad = _wants_padding(c, K, padded)
    if pad:
        groups = c.scales.shape[0]  # the whole layer's groups: a shard's rows may belong to any of them
        if groups < 1 or groups * group_size < K:
            raise ValueError(f"scales of an act-order shard must have at least K / group_size = "
                             f"{-(-K // group_size)} rows for K = {K}, got {tuple(c.scales.shape)}")
    else:
        fmt.check_shape(bits, K, N)
        if group_size != fmt.CHANNELWISE and K % group_size:
            raise ValueError(f"group_size {group_size} does not divide in_features K = {K}")
        groups = 1 if group_size == fmt.CHANNELWISE else K // group_size
    dtype = _resolve_dtype(dtype, c.scales)
    if c.scales.dim() != 2 or tuple(c.scales.shape) != (groups, N):
        raise ValueError(
            f"scales must be ({groups}, {N}) for K = {K}, N = {N}, group_size = {group_size}, "
            f"got {tuple(c.scales.shape)}"
        )
    if not c.scales.dtype.is_floating_point:
        raise TypeError(f"scales must be floating point, got {c.scales.dtype}")
    scales = c.scales.to(dtype)
    zeros = None
    if c.zeros is not None:
        z = c.zeros
        if tuple(z.shape) != (groups, N):
            raise ValueError(f"zero points must be ({groups}, {N}), got {tuple(z.shape)}")
        if z.numel() and (int(z.min()) < 0 or int(z.max()) >= 1 << bits):
            raise ValueError(f"int{bits} zero points must lie in [0, {(1 << bits) - 1}], "
                             f"got [{int(z.min())}, {int(z.max())}]")
        # (q - z) * s == (q - bias) * s + (bias - z) * s: one fused multiply-add in the kernels
        zeros = ((fmt.bias(bits) - z.to(torch.float32)) * scales.to(torch.float32)).to(dtype)
    if pad:
        return dict(_padded_parts(c, K, N, groups, scales, zeros), bits=bits, group_size=group_size,
                    in_features=K, out_features=N, dtype=dtype)
    perm = None
    if c.g_idx is not None:
        perm = _act_order_permutation(c.g_idx, K, group_size, groups)
    scale_group = group_size
    if group_size == fmt.CHANNELWISE:
        scale_group = _replica_group(K)
        scales = scales.expand(K // scale_group, N)
        zeros = None if zeros is None else zeros.expand(K // scale_group, N)
    return dict(source=c.qweight, scales=scales.contiguous(), zeros=None if zeros is None else zeros.contiguous(),
                perm=perm, bits=bits, group_size=group_size, in_features=K, out_features=N, dtype=dtype)


def prepack_codes(source: torch.Tensor, perm: torch.Tensor | None, bits: int) -> torch.Tensor:
    """K-packed codes (K * bits / 32, N) -> packed format v1, on their device.

    CUDA tensors use the extension's prepack op when it is loaded; otherwise
    (CPU, or no extension) the pure-torch reference packer. With ``perm``
    (int32 (K)), packed row k takes source row perm[k] (code 0 for an entry outside [0, K)).
    """
    if source.device.type == "cuda":
        from . import ops
        if ops.has_extension():
            return ops.prepack(source, perm, bits)
    codes = fmt.unpack_k(source, bits)
    if perm is not None:  # an entry outside [0, K) gives code 0, as the CUDA prepack kernel does
        p = perm.to(torch.int64)
        ok = ((p >= 0) & (p < codes.shape[0])).view(-1, 1)
        codes = torch.where(ok, codes[p.clamp(0, codes.shape[0] - 1)], torch.zeros((), dtype=codes.dtype))
    return fmt.pack_reference(codes, bits)


class _PackedTensors:
    """What QuantizedWeight and QuantizedExperts share: the tensors the kernels read, packed lazily.

    A subclass sets the two things that differ: ``_prepack_codes`` (K-packed
    codes, perm, bits -> packed format v1) and ``_SCALE_ROW_AXIS`` (the axis
    of ``scales`` that holds the K / scale_group rows).
    """

    _SCALE_ROW_AXIS = 0
    _prepack_codes = staticmethod(prepack_codes)

    def __init__(self, *, source: torch.Tensor | None, packed: torch.Tensor | None, scales: torch.Tensor,
                 zeros: torch.Tensor | None, perm: torch.Tensor | None, bits: int, group_size: int,
                 in_features: int, out_features: int, dtype: torch.dtype, padded_k: int | None = None):
        self._source = source  # K-packed codes awaiting prepack on the first device that needs them
        self._packed = packed
        self.scales = scales
        self.zeros = zeros
        self.perm = perm
        self.bits = bits
        self.group_size = group_size
        self.in_features = in_features
        self.out_features = out_features
        self.dtype = dtype
        # The padded act-order layout's packed rows (K_pad >= in_features), else None. Its source codes
        # are already in packed row order (pad rows included): prepack then applies no permutation.
        self.padded_k = padded_k

    @property
    def device(self) -> torch.device:
        return self.scales.device

    @property
    def packed_k(self) -> int:
        """Rows of the packed weight: in_features, or K_pad under the padded act-order layout."""
        return self.in_features if self.padded_k is None else self.padded_k

    @property
    def scale_group(self) -> int:
        return self.packed_k // self.scales.shape[self._SCALE_ROW_AXIS]

    @property
    def packed(self) -> torch.Tensor:
        """The format-v1 tensor, packed on first use on the tensors' device."""
        if self._packed is None:
            self._prepack()
        return self._packed

    def _prepack(self) -> None:
        perm = None if self.padded_k is not None else self.perm  # padded: the source is in packed order
        self._packed = self._prepack_codes(self._source, perm, self.bits)
        self._source = None

    def _prepack_off_cpu(self) -> Self:
        """Prepack now unless already packed or on the CPU (there packing waits for first use); returns self."""
        if self._packed is None and self.device.type != "cpu":
            self._prepack()
        return self

    def to(self, device) -> Self:
        """A copy on `device`; tensors not yet packed are prepacked there (in one pass)."""
        device = torch.device(device)
        if device == self.device:
            return self
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return type(self)(source=move(self._source), packed=move(self._packed), scales=move(self.scales),
                          zeros=move(self.zeros), perm=move(self.perm), bits=self.bits,
                          group_size=self.group_size, in_features=self.in_features,
                          out_features=self.out_features, dtype=self.dtype,
                          padded_k=self.padded_k)._prepack_off_cpu()

    def cuda(self, device: int | None = None) -> Self:
        return self.to(torch.device("cuda") if device is None else torch.device("cuda", device))

    def kernel_args(self) -> tuple:
        """(packed, scales, zeros, perm, bits, group, channelwise): one weight's op arguments in schema order."""
        return (self.packed, self.scales, self.zeros, self.perm, self.bits, self.scale_group,
                self.group_size == fmt.CHANNELWISE)

    def _repr_head(self) -> str:
        return ""

    def __repr__(self) -> str:
        order = ", act_order" if self.perm is not None else ""
        if self.padded_k is not None:
            order += f", padded_k={self.padded_k}"
        zp = ", zero_points" if self.zeros is not None else ""
        return (f"{type(self).__name__}({self._repr_head()}in_features={self.in_features}, "
                f"out_features={self.out_features}, bits={self.bits}, group_size={self.group_size}, "
                f"dtype={self.dtype}, device={self.device}{zp}{order})")


class QuantizedWeight(_PackedTensors):
    """A weight-only quantized linear weight in Swordfish's packed format v1.

    Build one with ``from_gptq``, ``from_awq`` or ``from_compressed_tensors``.
    The weight represents ``W[n, k] = (q[k, n] - zero) * scale`` of shape
    ``(out_features, in_features)``, like ``nn.Linear.weight``.

    Attributes: ``in_features`` (K), ``out_features`` (N), ``bits`` (4 or 8),
    ``group_size`` (32, 64, 128, or -1 for channelwise), ``dtype`` (the
    activation dtype), ``device``; and the tensors the kernels read:
    ``packed`` (int32, format v1, rows sorted by group under act-order),
    ``scales`` ``(K / scale_group, N)``, ``zeros`` (folded ``(zero_point_bias - z) * s``
    or None), ``perm`` (int32 ``(K)`` act-order permutation or None: packed
    row k is input feature ``perm[k]``) and ``scale_group`` (rows per stored
    scale row; channelwise scales are replicated to it).
    """

    # ---------------------------------------------------------------- builders

    @classmethod
    def from_gptq(cls, qweight, scales, g_idx=None, *, bits=4, group_size=128, dtype=None,
                  pad_act_order=False) -> "QuantizedWeight":
        """Symmetric GPTQ (uint4b8 / uint8b128): qweight int32 (K * bits / 32, N) packed along K.

        A row-parallel shard of an act-order layer passes its own rows' qweight and g_idx (K_s) with the
        whole layer's scales (K / group_size rows): it takes the padded act-order layout
        (docs/FORMAT.md), as does any act-order weight with ``pad_act_order=True``.
        """
        canonical = checkpoints.from_gptq(qweight, scales, g_idx, bits, group_size)
        return cls._from_canonical(canonical, dtype, pad_act_order)

    @classmethod
    def from_awq(cls, qweight, qzeros, scales, *, group_size=128, dtype=None) -> "QuantizedWeight":
        """AWQ GEMM layout: qweight int32 (K, N / 8), qzeros int32 (K / group, N / 8), scales (K / group, N)."""
        return cls._from_canonical(checkpoints.from_awq(qweight, qzeros, scales, group_size), dtype)

    @classmethod
    def from_compressed_tensors(cls, weight_packed, weight_scale, *, weight_shape, num_bits=4, group_size=128,
                                weight_zero_point=None, weight_g_idx=None, dtype=None,
                                pad_act_order=False) -> "QuantizedWeight":
        """compressed-tensors pack-quantized: weight_packed int32 (N, K * bits / 32), weight_scale (N, K / group).

        An act-order shard (weight_shape (N, K_s), weight_g_idx (K_s), the layer's whole weight_scale and
        zero points) takes the padded act-order layout, like ``from_gptq``'s.
        """
        canonical = checkpoints.from_compressed_tensors(
            weight_packed, weight_scale, weight_shape, num_bits, group_size, weight_zero_point, weight_g_idx)
        return cls._from_canonical(canonical, dtype, pad_act_order)

    @classmethod
    def _from_canonical(cls, c: checkpoints.Canonical, dtype, pad_act_order: bool = False) -> "QuantizedWeight":
        parts = weight_parts(c, dtype, padded=True if pad_act_order else None)
        return cls(packed=None, **parts)._prepack_off_cpu()  # on the device they live on

    # ------------------------------------------------------------- numerics

    def dequantize(self) -> torch.Tensor:
        """The (out_features, in_features) weight in ``self.dtype``, like nn.Linear.weight.

        Each value is one rounding of the exact ``(q - bias) * s + zs`` (fp32
        arithmetic, exact for these operand widths, then cast).
        """
        if self.device.type == "cuda":
            from . import ops
            if ops.has_extension():
                return ops.dequantize(*self.kernel_args(), self.in_features)
        from . import reference
        return reference.dequantize(self).to(self.dtype)


def matmul(x: torch.Tensor, w: QuantizedWeight, bias: torch.Tensor | None = None, *, path: str = "auto",
           deterministic: bool | None = None) -> torch.Tensor:
    """y = x @ w.dequantize().T (+ bias) for x of shape (..., in_features).

    CPU tensors take the fp32 reference path; CUDA tensors the Swordfish
    kernels, the path chosen per call by the C++ dispatcher from the true M.
    ``path`` forces one ("decode", "dense", "prefill": for tests and
    benchmarks); ``deterministic`` overrides SWORDFISH_DETERMINISTIC.
    """
    if not isinstance(w, QuantizedWeight):
        raise TypeError(f"w must be a swordfish_backend.QuantizedWeight, got {type(w).__name__}")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype != w.dtype:
        raise TypeError(f"x.dtype must be the weight's activation dtype {w.dtype}, got {x.dtype}")
    if x.dim() < 1 or x.shape[-1] != w.in_features:
        raise ValueError(f"x must have shape (..., {w.in_features}), got {tuple(x.shape)}")
    if x.device != w.device:
        raise ValueError(f"x is on {x.device} but the weight is on {w.device}; move one of them")
    if bias is not None:
        if not isinstance(bias, torch.Tensor) or bias.dtype != w.dtype or tuple(bias.shape) != (w.out_features,):
            got = f"{bias.dtype} {tuple(bias.shape)}" if isinstance(bias, torch.Tensor) else type(bias).__name__
            raise ValueError(f"bias must be a {w.dtype} tensor of shape ({w.out_features},), got {got}")
        if bias.device != w.device:
            raise ValueError(f"bias is on {bias.device} but the weight is on {w.device}")
    from . import ops  # the path names (ops.PATHS: the extension's, or its checked fallback)
    if path not in ops.PATHS:
        raise ValueError(f"path must be one of {sorted(ops.PATHS)}, got {path!r}")
    if x.device.type == "cpu":
        if ops.PATHS[path] != ops.PATH_AUTO:
            raise ValueError(f"path={path!r} names a CUDA kernel path; CPU tensors run the reference path")
        from . import reference
        return reference.matmul(x, w, bias).to(w.dtype)
    if x.device.type != "cuda":
        raise ValueError(f"Swordfish runs on CPU (reference) or CUDA tensors, got device {x.device}")
    lead = x.shape[:-1]
    x2 = x.reshape(-1, w.in_features).contiguous()
    det = -1 if deterministic is None else int(bool(deterministic))
    y = ops.gemm(x2, *w.kernel_args()[:4], bias, w.bits, w.scale_group, w.group_size == fmt.CHANNELWISE,
                 ops.PATHS[path], det)
    return y.reshape(*lead, w.out_features)
