"""Fused MoE: QuantizedExperts (E expert weights in one packed tensor), sf.fused_moe and its fp32 reference.

    import swordfish_backend as sf
    w13 = sf.QuantizedExperts.from_gptq(qweight13, scales13, bits=4, group_size=128).to("cuda")  # [E, H/8, 2I]
    w2 = sf.QuantizedExperts.from_gptq(qweight2, scales2, bits=4, group_size=128).to("cuda")     # [E, I/8, H]
    y = sf.fused_moe(x, w13, w2, topk_weights, topk_ids)                                        # [T, H]

The layer: for each token t and slot j with expert e = topk_ids[t, j],
``h = x[t] @ W13[e]^T`` (2I values, ``[gate | up]``), ``a = act(h[:I]) * h[I:]``,
``y[t] += topk_weights[t, j] * (a @ W2[e]^T)``. docs/MOE.md is the specification.

Each expert is converted by the same code as a single QuantizedWeight
(``checkpoints`` -> ``weight.weight_parts``); the experts' codes are then
prepacked in one pass over the whole stack. CPU tensors run ``reference_moe``
(the oracle of every test); CUDA tensors the ``swordfish::fused_moe`` op.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.nn.functional as F

from . import checkpoints
from . import format as fmt
from .weight import _ACTIVATION_DTYPES, QuantizedWeight, _PackedTensors, prepack_codes, weight_parts

# One prepack launch covers at most this many codes (E * K * N), so that no launch's flat index nears 2**31.
PREPACK_CHUNK_VALUES = 1 << 30
ACTIVATIONS = ("silu", "gelu")
ID_DTYPES = (torch.int32, torch.int64)


class QuantizedExperts(_PackedTensors):
    """E expert weights of one shape and format, stacked, in Swordfish's packed format v1.

    Build one with ``from_gptq``, ``from_awq``, ``from_compressed_tensors``
    (the per-expert checkpoint tensors stacked along a leading E dimension)
    or ``stack([QuantizedWeight, ...])``. Expert e represents the
    ``(out_features, in_features)`` weight ``self[e].dequantize()``.

    Attributes: ``num_experts`` (E), ``in_features`` (K), ``out_features``
    (N), ``bits``, ``group_size``, ``scale_group``, ``dtype``, ``device``,
    and the tensors the kernels read: ``packed`` int32 ``[E, N/64, K/block_k,
    512]`` (each expert's slab is the packed tensor of that expert alone),
    ``scales`` ``[E, K/scale_group, N]``, ``zeros`` (folded, like
    QuantizedWeight) or None, ``perm`` int32 ``[E, K]`` or None (present
    when any expert is act-order; the others then hold the identity).

    A row-parallel tensor-parallel shard of act-order experts (each expert's
    g_idx covers its own K_s rows, the scales the whole layer's groups) takes
    the padded act-order layout (docs/FORMAT.md "Act-order shards") per
    expert, every expert padded to the common ``padded_k`` (the largest
    expert's K_pad: extra rows are pad code with scale 0, zero 0, perm -1),
    so ``packed`` / ``scales`` / ``perm`` are ``[E, ..padded_k..]``.
    """

    _SCALE_ROW_AXIS = 1  # scales are [E, K / scale_group, N]

    @staticmethod
    def _prepack_codes(source: torch.Tensor, perm: torch.Tensor | None, bits: int) -> torch.Tensor:
        return prepack_experts(source, perm, bits)  # [E, K * bits / 32, N]: one pass over all experts

    # ---------------------------------------------------------------- builders

    @classmethod
    def from_gptq(cls, qweight, scales, g_idx=None, *, bits=4, group_size=128, dtype=None) -> "QuantizedExperts":
        """GPTQ: qweight int32 [E, K * bits / 32, N], scales [E, K / group, N], g_idx None or int [E, K]."""
        E = _expert_count("from_gptq", qweight=(qweight, 3, "[E, K * bits / 32, N]"),
                          scales=(scales, 3, "[E, K / group, N]"), g_idx=(g_idx, 2, "[E, K]"))
        return cls._from_experts("from_gptq", E, dtype, lambda e: checkpoints.from_gptq(
            qweight[e], scales[e], None if g_idx is None else g_idx[e], bits, group_size))

    @classmethod
    def from_awq(cls, qweight, qzeros, scales, *, group_size=128, dtype=None) -> "QuantizedExperts":
        """AWQ: qweight int32 [E, K, N / 8], qzeros int32 [E, K / group, N / 8], scales [E, K / group, N]."""
        E = _expert_count("from_awq", qweight=(qweight, 3, "[E, K, N / 8]"),
                          qzeros=(qzeros, 3, "[E, K / group, N / 8]"), scales=(scales, 3, "[E, K / group, N]"))
        return cls._from_experts("from_awq", E, dtype, lambda e: checkpoints.from_awq(
            qweight[e], qzeros[e], scales[e], group_size))

    @classmethod
    def from_compressed_tensors(cls, weight_packed, weight_scale, *, weight_shape, num_bits=4, group_size=128,
                                weight_zero_point=None, weight_g_idx=None, dtype=None) -> "QuantizedExperts":
        """compressed-tensors pack-quantized: weight_packed int32 [E, N, K * bits / 32], weight_scale
        [E, N, K / group]; weight_shape (N, K) of one expert; weight_zero_point [E, N * bits / 32, K / group]
        (packed along N, as compressed-tensors stores it) or integer [E, N, K / group]; weight_g_idx [E, K]."""
        E = _expert_count("from_compressed_tensors", weight_packed=(weight_packed, 3, "[E, N, K * bits / 32]"),
                          weight_scale=(weight_scale, 3, "[E, N, K / group]"),
                          weight_zero_point=(weight_zero_point, 3, "[E, N * bits / 32, K / group]"),
                          weight_g_idx=(weight_g_idx, 2, "[E, K]"))
        return cls._from_experts("from_compressed_tensors", E, dtype, lambda e: checkpoints.from_compressed_tensors(
            weight_packed[e], weight_scale[e], weight_shape, num_bits, group_size,
            None if weight_zero_point is None else weight_zero_point[e],
            None if weight_g_idx is None else weight_g_idx[e]))

    @classmethod
    def stack(cls, weights) -> "QuantizedExperts":
        """E QuantizedWeights of one shape, format, dtype and device -> one QuantizedExperts (copies)."""
        if isinstance(weights, QuantizedWeight) or not hasattr(weights, "__iter__"):
            raise TypeError(f"QuantizedExperts.stack needs a list of QuantizedWeight, got {type(weights).__name__}")
        weights = list(weights)
        if not weights:
            raise ValueError("QuantizedExperts.stack needs at least one QuantizedWeight, got an empty list")
        for i, w in enumerate(weights):
            if not isinstance(w, QuantizedWeight):
                raise TypeError(f"QuantizedExperts.stack: weights[{i}] must be a QuantizedWeight, "
                                f"got {type(w).__name__}")
        first = weights[0]
        for i, w in enumerate(weights[1:], 1):
            if (w.padded_k is None) != (first.padded_k is None):
                lay = lambda v: "the exact" if v.padded_k is None else "the padded act-order"  # noqa: E731
                raise ValueError(f"QuantizedExperts.stack: weights[{i}] has {lay(w)} layout but weights[0] has "
                                 f"{lay(first)} layout; experts must share one layout")
            for attr in ("in_features", "out_features", "bits", "group_size", "scale_group", "dtype", "device"):
                if getattr(w, attr) != getattr(first, attr):
                    raise ValueError(f"QuantizedExperts.stack: weights[{i}].{attr} is {getattr(w, attr)} but "
                                     f"weights[0].{attr} is {getattr(first, attr)}; experts must share it")
            if (w.zeros is None) != (first.zeros is None):
                has = lambda v: "has zero points" if v.zeros is not None else "has none"  # noqa: E731
                raise ValueError(f"QuantizedExperts.stack: weights[{i}] {has(w)} but weights[0] {has(first)}; "
                                 "experts must share one checkpoint format")
        unpacked = all(w._packed is None for w in weights)
        return cls._assemble(
            [dict(source=w._source if unpacked else None, packed=None if unpacked else w.packed, scales=w.scales,
                  zeros=w.zeros, perm=w.perm, padded_k=w.padded_k) for w in weights], first)

    @classmethod
    def _from_experts(cls, builder: str, E: int, dtype, canonical_of) -> "QuantizedExperts":
        parts = []
        for e in range(E):
            try:  # padded=None: a row-parallel shard of act-order experts takes the padded layout
                parts.append(weight_parts(canonical_of(e), dtype, padded=None))
            except (TypeError, ValueError) as err:
                raise type(err)(f"QuantizedExperts.{builder}: expert {e}: {err}") from None
        first = parts[0]
        for e, p in enumerate(parts[1:], 1):  # one builder call: only the zero points' presence could differ
            if (p["zeros"] is None) != (first["zeros"] is None):
                raise ValueError(f"QuantizedExperts.{builder}: expert {e} and expert 0 disagree on zero points")
            if ("padded_k" in p) != ("padded_k" in first):
                raise ValueError(f"QuantizedExperts.{builder}: expert {e} and expert 0 disagree on the padded "
                                 "act-order layout (a row-parallel shard's)")
        shape = QuantizedWeight(packed=None, **first)
        # on the device the tensors already live on: one pass over all experts
        return cls._assemble([dict(p, packed=None) for p in parts], shape)._prepack_off_cpu()

    @classmethod
    def _assemble(cls, parts: list, like) -> "QuantizedExperts":
        """Stack per-expert tensors (dicts of source/packed/scales/zeros/perm[/padded_k]) into one QuantizedExperts."""
        padded_k = None
        if parts[0].get("padded_k") is not None:  # the padded layout: every expert to the largest K_pad
            padded_k = max(p["padded_k"] for p in parts)
            parts = [_pad_expert(p, padded_k, like.bits) for p in parts]
        stack = lambda key: None if parts[0][key] is None else torch.stack([p[key] for p in parts])  # noqa: E731
        perm = None
        if any(p["perm"] is not None for p in parts):
            identity = torch.arange(like.in_features, dtype=torch.int32, device=like.device)
            perm = torch.stack([identity if p["perm"] is None else p["perm"].to(torch.int32) for p in parts])
        return cls(source=stack("source"), packed=stack("packed"), scales=stack("scales"), zeros=stack("zeros"),
                   perm=perm, bits=like.bits, group_size=like.group_size, in_features=like.in_features,
                   out_features=like.out_features, dtype=like.dtype, padded_k=padded_k)

    # ------------------------------------------------------------ properties

    @property
    def num_experts(self) -> int:
        return self.scales.shape[0]

    # ------------------------------------------------------------- experts

    def __len__(self) -> int:
        return self.num_experts

    def _expert(self, e: int) -> QuantizedWeight:
        """Expert e as a QuantizedWeight sharing this object's packed storage (perm kept as stored)."""
        packed = self.packed
        return QuantizedWeight(source=None, packed=packed[e], scales=self.scales[e],
                               zeros=None if self.zeros is None else self.zeros[e],
                               perm=None if self.perm is None else self.perm[e], bits=self.bits,
                               group_size=self.group_size, in_features=self.in_features,
                               out_features=self.out_features, dtype=self.dtype, padded_k=self.padded_k)

    def __getitem__(self, e) -> QuantizedWeight:
        """Expert e as a QuantizedWeight (views of this object's tensors; an identity perm becomes None)."""
        try:
            i = operator.index(e)
        except TypeError:
            raise TypeError(f"expert index must be an integer, got {type(e).__name__}") from None
        E = self.num_experts
        if not -E <= i < E:
            raise IndexError(f"expert index {i} is out of range for {E} experts")
        i %= E
        w = self._expert(i)
        if w.padded_k is None and w.perm is not None and torch.equal(
                w.perm, torch.arange(self.in_features, dtype=w.perm.dtype, device=w.perm.device)):
            w.perm = None
        return w

    # ------------------------------------------------------------- numerics

    def dequantize(self) -> torch.Tensor:
        """[E, out_features, in_features] in ``self.dtype``: each expert like nn.Linear.weight."""
        return torch.stack([self._expert(e).dequantize() for e in range(self.num_experts)])

    def _repr_head(self) -> str:
        return f"num_experts={self.num_experts}, "


def experts_from_op_args(packed: torch.Tensor, scales: torch.Tensor, zeros, perm, bits: int, group: int,
                         channelwise: bool, dtype: torch.dtype, in_features: int | None = None) -> QuantizedExperts:
    """The inverse of ``kernel_args``: a QuantizedExperts around one weight's op arguments (for tests and
    stand-ins of the op that compute the reference from what the op receives). ``in_features`` below the
    packed K marks w2's padded act-order layout (the op's I: w13's N / 2)."""
    K = packed.shape[2] * fmt.block_k(bits)
    padded = in_features is not None and in_features != K
    return QuantizedExperts(source=None, packed=packed, scales=scales, zeros=zeros, perm=perm, bits=bits,
                            group_size=fmt.CHANNELWISE if channelwise else group,
                            in_features=in_features if padded else K, out_features=packed.shape[1] * fmt.BLOCK_N,
                            dtype=dtype, padded_k=K if padded else None)


def _pad_expert(part: dict, K_pad: int, bits: int) -> dict:
    """One expert's padded-layout tensors grown to K_pad packed rows: pad code, scale 0 / zero 0 chunks, perm -1
    (all-pad chunks dequantize to exactly 0 and meet a zero activation)."""
    k = part["padded_k"]
    if k == K_pad:
        return part
    extra = K_pad - k
    scales = part["scales"]
    chunks = extra // fmt.ACT_ORDER_CHUNK
    grow = lambda t: None if t is None else torch.cat([t, t.new_zeros(chunks, t.shape[1])])  # noqa: E731
    perm = torch.cat([part["perm"].to(torch.int32),
                      torch.full((extra,), -1, dtype=torch.int32, device=part["perm"].device)])
    out = dict(part, scales=grow(scales), zeros=grow(part["zeros"]), perm=perm, padded_k=K_pad)
    pad_codes = torch.full((extra, scales.shape[1]), fmt.bias(bits), dtype=torch.uint8, device=scales.device)
    if part.get("source") is not None:
        out["source"] = torch.cat([part["source"], fmt.pack_k(pad_codes, bits).to(part["source"].device)])
    if part.get("packed") is not None:  # (N/64, K/block_k, 512): whole K blocks append along dim 1
        tail = prepack_codes(fmt.pack_k(pad_codes, bits).to(part["packed"].device), None, bits)
        out["packed"] = torch.cat([part["packed"], tail], dim=1)
    return out


def _expert_count(builder: str, **tensors) -> int:
    """E of the stacked checkpoint tensors; each entry is (tensor or None, dims, layout in words)."""
    counts = {}
    for name, (t, dims, layout) in tensors.items():
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"QuantizedExperts.{builder}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != dims:
            raise ValueError(f"QuantizedExperts.{builder}: {name} must be {dims}-D {layout} (the per-expert "
                             f"tensors stacked along E), got shape {tuple(t.shape)}")
        counts[name] = t.shape[0]
    if len(set(counts.values())) > 1:
        listing = ", ".join(f"{name} has E = {n}" for name, n in counts.items())
        raise ValueError(f"QuantizedExperts.{builder}: the expert dimension disagrees: {listing}")
    E = next(iter(counts.values()))
    if E < 1:
        raise ValueError(f"QuantizedExperts.{builder}: need at least one expert, got E = {E}")
    return E


def prepack_experts(source: torch.Tensor, perm: torch.Tensor | None, bits: int) -> torch.Tensor:
    """K-packed codes [E, K * bits / 32, N] -> packed v1 [E, N/64, K/block_k, 512], in one pass per chunk.

    The experts of a chunk are packed as one tall weight of E * K rows (a
    block holds exactly its own tile's values, so a tall weight's blocks are
    the experts' blocks), with each expert's act-order permutation offset by
    its first row (a -1 pad entry stays -1); the (N/64, E, K/block_k) block grid is then reordered.
    """
    E, rows, N = source.shape
    K = rows * fmt.values_per_word(bits)
    bk = fmt.block_k(bits)
    per_chunk = max(1, PREPACK_CHUNK_VALUES // max(K * N, 1))
    out = []
    for e0 in range(0, E, per_chunk):
        n = min(per_chunk, E - e0)
        tall = source[e0:e0 + n].reshape(n * rows, N)
        tall_perm = None
        if perm is not None:
            first_row = torch.arange(n, dtype=torch.int32, device=perm.device).mul_(K).view(n, 1)
            chunk = perm[e0:e0 + n].to(torch.int32)
            tall_perm = torch.where(chunk >= 0, chunk + first_row, chunk).reshape(n * K)
        packed = prepack_codes(tall, tall_perm, bits)  # (N/64, n * K / bk, 512)
        out.append(packed.view(N // fmt.BLOCK_N, n, K // bk, fmt.BLOCK_WORDS).permute(1, 0, 2, 3))
    return torch.cat(out).contiguous()


# ------------------------------------------------------------------ validation


def _check_layer(name: str, x, w13, w2, topk_weights, topk_ids, activation, apply_router_weight_on_input,
                 expert_map, data_checks: bool) -> tuple[int, int, int, int]:
    """Raise (TypeError / ValueError, message starting `swordfish.<name>:`) for bad input; returns (T, H, I, k).

    ``data_checks`` also reads the routing's values (expert ids and map in range): a host sync, so the CUDA
    path leaves it to the op (out-of-range slots contribute nothing there, never read out of bounds)."""
    p = f"swordfish.{name}: "
    for wname, w in (("w13", w13), ("w2", w2)):
        if not isinstance(w, QuantizedExperts):
            raise TypeError(f"{p}{wname} must be a swordfish_backend.QuantizedExperts, got {type(w).__name__}")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{p}x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"{p}x must be 2-D [T, H], got shape {tuple(x.shape)}")
    if x.dtype not in _ACTIVATION_DTYPES:
        raise TypeError(f"{p}x must be torch.float16 or torch.bfloat16, got {x.dtype}")
    for wname, w in (("w13", w13), ("w2", w2)):
        if w.dtype != x.dtype:
            raise TypeError(f"{p}x is {x.dtype} but {wname} was built for {w.dtype} activations")
    T, H = x.shape
    if w13.num_experts != w2.num_experts:
        raise ValueError(f"{p}w13 has E = {w13.num_experts} experts but w2 has E = {w2.num_experts}")
    if w13.bits != w2.bits:
        raise ValueError(f"{p}w13 is int{w13.bits} but w2 is int{w2.bits}; one layer has one bit width")
    if w13.in_features != H:
        raise ValueError(f"{p}x has H = {H} features but w13.in_features is {w13.in_features}")
    I = w2.in_features  # noqa: E741
    if w13.out_features != 2 * I:
        raise ValueError(f"{p}w13.out_features must be 2 * I = {2 * I} ([gate | up]) for w2.in_features "
                         f"I = {I}, got {w13.out_features}")
    if w2.out_features != H:
        raise ValueError(f"{p}w2.out_features must be H = {H} (w2 maps I back to x's features), "
                         f"got {w2.out_features}")
    for tname, t in (("topk_weights", topk_weights), ("topk_ids", topk_ids)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{p}{tname} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{p}{tname} must be 2-D [T, k], got shape {tuple(t.shape)}")
    if topk_ids.dtype not in ID_DTYPES:
        raise TypeError(f"{p}topk_ids must be torch.int32 or torch.int64, got {topk_ids.dtype}")
    if topk_weights.dtype not in (torch.float32, x.dtype):
        raise TypeError(f"{p}topk_weights must be torch.float32 or x's dtype {x.dtype}, got {topk_weights.dtype}")
    if topk_weights.shape != topk_ids.shape:
        raise ValueError(f"{p}topk_weights {tuple(topk_weights.shape)} and topk_ids {tuple(topk_ids.shape)} "
                         "must have the same shape [T, k]")
    if topk_ids.shape[0] != T:
        raise ValueError(f"{p}topk_ids has {topk_ids.shape[0]} rows but x has T = {T} tokens")
    k = topk_ids.shape[1]
    if k < 1:
        raise ValueError(f"{p}top-k must be at least 1, got topk_ids of shape {tuple(topk_ids.shape)}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"{p}activation must be one of {ACTIVATIONS}, got {activation!r}")
    if apply_router_weight_on_input and k != 1:
        raise ValueError(f"{p}apply_router_weight_on_input needs top-k 1, got k = {k}")
    if expert_map is not None:
        if not isinstance(expert_map, torch.Tensor):
            raise TypeError(f"{p}expert_map must be a torch.Tensor or None, got {type(expert_map).__name__}")
        if expert_map.dtype not in ID_DTYPES:
            raise TypeError(f"{p}expert_map must be torch.int32 or torch.int64, got {expert_map.dtype}")
        if expert_map.dim() != 1 or expert_map.numel() < 1:
            raise ValueError(f"{p}expert_map must be 1-D [global E], got shape {tuple(expert_map.shape)}")
    devices = {"x": x.device, "w13": w13.device, "w2": w2.device, "topk_weights": topk_weights.device,
               "topk_ids": topk_ids.device}
    if expert_map is not None:
        devices["expert_map"] = expert_map.device
    if len(set(devices.values())) > 1:
        listing = ", ".join(f"{n} on {d}" for n, d in devices.items())
        raise ValueError(f"{p}all tensors must be on one device, got {listing}")
    if data_checks and T and x.device.type != "meta":
        E = w13.num_experts
        ids = topk_ids
        lo, hi = int(ids.min()), int(ids.max())
        if expert_map is None:
            if lo < 0 or hi >= E:
                raise ValueError(f"{p}topk_ids must lie in [0, {E}) (the experts of w13), got [{lo}, {hi}]")
        else:
            G = expert_map.numel()
            if lo < 0 or hi >= G:
                raise ValueError(f"{p}topk_ids must lie in [0, {G}) (global experts of expert_map), got [{lo}, {hi}]")
            mlo, mhi = int(expert_map.min()), int(expert_map.max())
            if mlo < -1 or mhi >= E:
                raise ValueError(f"{p}expert_map values must be -1 or a local expert in [0, {E}), "
                                 f"got [{mlo}, {mhi}]")
    return T, H, I, k


# ------------------------------------------------------------------ the layer


def fused_moe(x: torch.Tensor, w13: QuantizedExperts, w2: QuantizedExperts, topk_weights: torch.Tensor,
              topk_ids: torch.Tensor, *, activation: str = "silu", apply_router_weight_on_input: bool = False,
              expert_map: torch.Tensor | None = None, path: str = "auto",
              deterministic: bool | None = None) -> torch.Tensor:
    """The MoE layer [T, H] in x.dtype (the module doc and docs/MOE.md give the math).

    x [T, H] fp16/bf16; w13 experts [E, 2I, H] as ``[gate | up]`` along N; w2
    experts [E, H, I]; topk_weights fp32 or x.dtype and topk_ids int32/int64,
    both [T, k] (global expert ids with ``expert_map``, an int [global E]
    tensor of local index or -1; a slot mapped to -1 contributes nothing).
    ``activation``: "silu" or "gelu" (erf) on the gate half.
    ``apply_router_weight_on_input``: the router weight scales the token before
    w13 instead of the expert's output (top-k 1 only). CPU tensors run
    ``reference_moe``; CUDA tensors the Swordfish kernels, the path chosen by
    the C++ MoE dispatcher unless ``path`` forces one (``ops.moe_paths()``);
    ``deterministic`` overrides SWORDFISH_DETERMINISTIC.
    """
    T, H, I, k = _check_layer("fused_moe", x, w13, w2, topk_weights, topk_ids, activation,  # noqa: E741
                              apply_router_weight_on_input, expert_map,
                              data_checks=isinstance(x, torch.Tensor) and x.device.type == "cpu")
    from . import ops

    paths = ops.moe_paths()
    if path not in paths:
        raise ValueError(f"swordfish.fused_moe: path must be one of {list(paths)}, got {path!r}")
    if deterministic is not None and not isinstance(deterministic, bool):
        raise TypeError(f"swordfish.fused_moe: deterministic must be None, True or False, got {deterministic!r}")
    if x.device.type == "cpu":
        if path != "auto":
            raise ValueError(f"swordfish.fused_moe: path={path!r} names a CUDA kernel path; CPU tensors run the "
                             "reference")
        return _reference(x, w13, w2, topk_weights, topk_ids, activation, apply_router_weight_on_input,
                          expert_map, x.dtype)
    if x.device.type != "cuda":
        raise ValueError(f"swordfish.fused_moe: Swordfish runs on CPU (reference) or CUDA tensors, got {x.device}")
    if T == 0:
        return x.new_empty((0, H))
    return ops.fused_moe(*op_args(x, w13, w2, topk_weights, topk_ids, activation=activation,
                                  apply_router_weight_on_input=apply_router_weight_on_input, expert_map=expert_map,
                                  path=paths[path], deterministic=deterministic))


def op_args(x, w13: QuantizedExperts, w2: QuantizedExperts, topk_weights, topk_ids, *, activation="silu",
            apply_router_weight_on_input=False, expert_map=None, path: int = 0, deterministic=None) -> tuple:
    """The ``swordfish::fused_moe`` arguments in schema order, for inputs already validated.

    Routing ids (int32 / int64) and weights (fp32 / x.dtype) go to the op as
    they come; an int64 expert map becomes int32 (the op's type).
    """
    emap = expert_map
    if emap is not None and emap.dtype != torch.int32:
        emap = emap.to(torch.int32)
    det = -1 if deterministic is None else int(bool(deterministic))
    p13, s13, z13, perm13, bits, g13, cw13 = w13.kernel_args()
    p2, s2, z2, perm2, _, g2, cw2 = w2.kernel_args()
    from . import ops

    return (x.contiguous(), p13, s13, z13, perm13, p2, s2, z2, perm2, topk_weights.contiguous(),
            topk_ids.contiguous(), None if emap is None else emap.contiguous(),
            bits, g13, cw13, g2, cw2, ops.MOE_ACTIVATIONS[activation], bool(apply_router_weight_on_input), path,
            det)


# ------------------------------------------------------------------ the reference


def reference_moe(x: torch.Tensor, w13: QuantizedExperts, w2: QuantizedExperts, topk_weights: torch.Tensor,
                  topk_ids: torch.Tensor, *, activation: str = "silu", apply_router_weight_on_input: bool = False,
                  expert_map: torch.Tensor | None = None, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The exact fp32 MoE layer on the tensors' own device: the oracle every kernel is tested against.

    A loop over the experts that tokens were routed to: each expert's weights
    dequantized through the reference (read from the packed tensor, rounded
    once to the activation dtype), both GEMMs, the activation, the router
    weights and the sum over top-k all in fp32; the result is rounded once to
    ``dtype`` (default x.dtype; pass torch.float32 for the unrounded value).
    """
    _check_layer("reference_moe", x, w13, w2, topk_weights, topk_ids, activation, apply_router_weight_on_input,
                 expert_map, data_checks=True)
    return _reference(x, w13, w2, topk_weights, topk_ids, activation, apply_router_weight_on_input, expert_map,
                      x.dtype if dtype is None else dtype)


def _reference(x, w13, w2, topk_weights, topk_ids, activation, on_input, expert_map, dtype) -> torch.Tensor:
    from . import reference

    T, H = x.shape
    I = w2.in_features  # noqa: E741
    ids = topk_ids.to(torch.int64)
    local = ids if expert_map is None else expert_map.to(torch.int64)[ids]
    act = F.silu if activation == "silu" else (lambda g: F.gelu(g, approximate="none"))
    xf = x.to(torch.float32)
    out = torch.zeros(T, H, dtype=torch.float32, device=x.device)
    for e in torch.unique(local[local >= 0]).tolist():
        rows, slots = (local == e).nonzero(as_tuple=True)
        weight = topk_weights[rows, slots].to(torch.float32).unsqueeze(1)
        h = xf[rows] @ reference.dequantize(w13._expert(e)).t()  # [rows, 2I]
        if on_input:
            h = h * weight
        y = (act(h[:, :I]) * h[:, I:]) @ reference.dequantize(w2._expert(e)).t()  # [rows, H]
        if not on_input:
            y = y * weight
        out.index_add_(0, rows, y)
    return out.to(dtype)


def output_error(y: torch.Tensor, ref: torch.Tensor, *, H: int, I: int, top_k: int,  # noqa: E741
                 dtype: torch.dtype | None = None) -> float:
    """Worst ratio of a kernel's error to the MoE tolerance (<= 1 passes; NaN or Inf gives inf).

    ``ref`` is reference_moe(..., dtype=torch.float32) (or fp64). With u the
    unit roundoff of the activation dtype (2^-8 bf16, 2^-11 fp16), an element
    passes when |y - ref| <= 2u|ref| + ((16 + k) u + (H + I) 2^-24) rms(ref)
    and the whole output when ||y - ref|| <= 4u ||ref||: output rounding; the
    kernels' roundings of h and of the activation to the MMA operand dtype,
    of split-K partial sums and of the sum over the k slots; fp32 accumulation
    over H and I. ``swordfish check``'s bound (check.py) plus the MoE terms.
    """
    dtype = y.dtype if dtype is None else dtype
    u = 2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -11
    y64 = y.to(torch.float64)
    if not bool(torch.isfinite(y64).all()):
        return math.inf
    ref64 = ref.to(torch.float64)
    diff = (y64 - ref64).abs()
    if diff.numel() == 0:
        return 0.0
    rms = float(ref64.pow(2).mean().sqrt()) or 1e-30
    elem = diff / (2 * u * ref64.abs() + ((16 + top_k) * u + (H + I) * 2.0 ** -24) * rms)
    norm = float(diff.norm()) / (float(ref64.norm()) * 4 * u or 1e-30)
    return max(float(elem.max()), norm)
