"""When vLLM picks Swordfish on its own, and the one list of what the plugin supports.

Pure Python, no vLLM import: the plugin's can_implement() and the tests read
these tables, and docs/VLLM.md describes them (it does not restate them).

Only "Swordfish or not" is decided here. Which Swordfish kernel path serves a
call (decode, dense, prefill) is decided per call by the C++ dispatcher.
"""

from __future__ import annotations

from .. import envs
from .. import format as fmt
from .. import moe

# Weight types the MPLinearKernel accepts, keyed by vLLM ScalarType name:
# (bits, has_zero_points). uint4b8 / uint8b128 are symmetric GPTQ-style codes
# (implicit zero 8 / 128); uint4 carries explicit zero points (AWQ, asymmetric
# compressed-tensors).
WEIGHT_TYPES = {
    "uint4b8": (4, False),
    "uint8b128": (8, False),
    "uint4": (4, True),
}

ACTIVATION_DTYPES = ("float16", "bfloat16")

# The CUDA architectures of the CMake default (SWORDFISH_CUDA_ARCHS), assumed
# when the installed extension does not report its own (ops.build_info()).
DEFAULT_CUDA_ARCHS = ("90a", "100a", "110a")

# With --linear-backend auto, may vLLM pick Swordfish on this major capability?
# Blackwell (sm100 / sm110): yes. Hopper (sm90): off until the H200
# measurements show Swordfish faster than Machete / Marlin for the shape;
# the per-shape answer belongs to kernels/dispatch/heuristics_sm90 and will be
# read from the extension once it exports it. Users opt in with
# --linear-backend swordfish.
AUTO_SELECT = {9: False, 10: True, 11: True}

# With --moe-backend auto, may vLLM pick Swordfish's fused MoE for every
# layer on this major capability? Blackwell (sm100 / sm110): yes, since the
# MoE kernels passed their GPU tests (H100 and H200, benchmarks/RESULTS.md
# [moe]; the same mma.sync code is compiled for sm_100a / sm_110a). Hopper
# (sm90): per weight format, MOE_AUTO_FORMATS below. The linear table above
# is separate: the two decisions are measured separately.
MOE_AUTO_SELECT = {9: False, 10: True, 11: True}

# The (bits, zero points, group size) formats --moe-backend auto picks on an
# architecture that MOE_AUTO_SELECT leaves off: the ones timed at least as
# fast as vLLM's Marlin MoE at every point (4 models, T 1-4096; group -1 =
# channelwise). sm90: int4 without zero points (GPTQ / compressed-tensors) at
# group 128 (H100 and H200 baselines, benchmarks/baselines/*/bench_moe.txt),
# 64, 32 and channelwise (H100, benchmarks/RESULTS.md [moe] 2026-12-07-g:
# 0.98x at worst, within the runs' noise). int8 loses up to 0.92x at 16-24
# routed tokens per expert; AWQ zero points are untimed against Marlin MoE:
# both opt-in with --moe-backend swordfish.
MOE_AUTO_FORMATS = {9: frozenset({(4, False, 128), (4, False, 64), (4, False, 32), (4, False, -1)})}

# Gated activations the fused-MoE op computes on the gate half (the op's own
# list; vLLM's MoEActivation values use the same names).
MOE_ACTIVATIONS = moe.ACTIVATIONS


def disabled() -> bool:
    """SWORDFISH_DISABLE (swordfish_backend.envs; read at every call, never cached) turns the plugin off."""
    return envs.disabled()


def support_reason(*, bits: int, has_zero_points: bool, group_size: int, act_dtype: str,
                   out_dtype: str | None, in_features: int, out_features: int) -> str | None:
    """None when Swordfish can serve this layer partition, else why not. Device-independent.

    The plugin's own rules (activation and output dtypes, zero points for int4
    only: WEIGHT_TYPES), then the packed format's: shapes through
    swordfish_backend.format.check_shape, groups through format.GROUP_SIZES
    (format.py is checked against format.h). Where the extension is loaded on a
    CUDA device, library_reason() asks the C++ predicate itself;
    tests/test_ops_gpu.py checks that the two agree.
    """
    return (_type_reason(bits=bits, has_zero_points=has_zero_points, group_size=group_size, act_dtype=act_dtype,
                         out_dtype=out_dtype)
            or _shape_reason(bits=bits, group_size=group_size, in_features=in_features, out_features=out_features))


def _type_reason(*, bits: int, has_zero_points: bool, group_size: int, act_dtype: str,
                 out_dtype: str | None) -> str | None:
    if act_dtype not in ACTIVATION_DTYPES:
        return (f"activations are {act_dtype}: Swordfish is weight-only with float16/bfloat16 activations "
                "(W4A8 / W8A8 layers stay on vLLM's kernels)")
    if out_dtype is not None and out_dtype != act_dtype:
        return f"output dtype {out_dtype} differs from the activation dtype {act_dtype}"
    if bits not in fmt.BITS:
        return f"int{bits} weights are not supported (int4 and int8 are)"
    if has_zero_points and bits != 4:
        return f"zero points are supported for int4 weights only, got int{bits}"
    if group_size not in fmt.GROUP_SIZES:
        return f"group size {group_size} is not supported (supported: {list(fmt.GROUP_SIZES)}, -1 = channelwise)"
    return None


def _shape_reason(*, bits: int, group_size: int, in_features: int, out_features: int) -> str | None:
    try:
        fmt.check_shape(bits, in_features, out_features)
    except ValueError as e:
        return f"partition shape (K={in_features}, N={out_features}): {e}"
    if group_size != fmt.CHANNELWISE and in_features % group_size:
        return f"group size {group_size} does not divide this partition's in_features K = {in_features}"
    return None


def library_reason(*, bits: int, has_zero_points: bool, group_size: int, act_dtype: str, in_features: int,
                   out_features: int, act_order: bool = False, device_index: int) -> str | None:
    """None when the compiled library accepts this layer partition on CUDA device ``device_index``,
    else its reason: the predicate the gemm op applies (``ops.can_implement``: the op layer's shape
    rules, the dispatcher's and the paths' can_implement, the device's compute capability), asked for
    a one-row call on the path the dispatcher picks. Channelwise scales go in replicated to the group
    QuantizedWeight uses. Needs the extension (ops.has_extension())."""
    import torch

    from .. import ops
    from ..weight import _replica_group

    channelwise = group_size == fmt.CHANNELWISE
    group = group_size
    if channelwise:
        try:
            group = _replica_group(in_features)
        except ValueError as e:
            return str(e)
    dtype = ops.DTYPE_CODES.get(getattr(torch, act_dtype, None))
    if dtype is None:
        return f"activations are {act_dtype}: the kernels take float16 or bfloat16"
    why = ops.can_implement(1, in_features, out_features, bits, group, channelwise, has_zero_points, act_order, dtype,
                            ops.PATH_AUTO, device_index)
    return why or None


def moe_support_reason(*, bits: int, has_zero_points: bool, group_size: int, act_dtype: str,
                       hidden_size: int, intermediate_size: int) -> str | None:
    """None when Swordfish's fused MoE can hold experts of this shape on one rank, else why not.

    `intermediate_size` is this rank's share I (tensor parallelism shards it).
    The layer's two GEMMs are w13 (K = H, N = 2I, ``[gate | up]``) and w2
    (K = I, N = H); each must be a shape the packer accepts, with the same
    rules as a linear layer partition (support_reason).
    """
    reason = _type_reason(bits=bits, has_zero_points=has_zero_points, group_size=group_size, act_dtype=act_dtype,
                          out_dtype=None)
    if reason is not None:
        return reason
    for name, K, N in (("w13", hidden_size, 2 * intermediate_size), ("w2", intermediate_size, hidden_size)):
        reason = _shape_reason(bits=bits, group_size=group_size, in_features=K, out_features=N)
        if reason is not None:
            return f"{name} {reason}"
    return None


def _auto_reason(table: dict[int, bool], flag: str, capability: tuple[int, int] | None) -> str | None:
    if capability is None:
        return "the device capability is unknown"
    major, minor = capability
    if not table.get(major, False):
        if major == 9:
            return (f"on sm{major}{minor} Swordfish is opt-in until H200 measurements show it faster "
                    f"than vLLM's choice; pass {flag} swordfish to use it")
        return f"sm{major}{minor} is not an auto-selected architecture (auto: {_archs(table)})"
    return None


def auto_select_reason(capability: tuple[int, int] | None) -> str | None:
    """None when --linear-backend auto may pick Swordfish on this device, else why not."""
    return _auto_reason(AUTO_SELECT, "--linear-backend", capability)


def moe_auto_select_reason(capability: tuple[int, int] | None,
                           fmt: tuple[int, bool, int] | None = None) -> str | None:
    """None when --moe-backend auto may pick Swordfish's fused MoE on this device for experts of format
    ``fmt`` = (bits, has_zero_points, group_size), else why not (fmt None: the architecture's whole-table
    answer)."""
    reason = _auto_reason(MOE_AUTO_SELECT, "--moe-backend", capability)
    if reason is None or capability is None:
        return reason
    major, minor = capability
    if fmt is not None and tuple(fmt) in MOE_AUTO_FORMATS.get(major, ()):
        return None
    timed = moe_auto_formats(major)
    if timed:
        what = f"{moe_format_name(*fmt)} experts are" if fmt is not None else "this layer's format is"
        return (f"on sm{major}{minor} --moe-backend auto picks Swordfish only for the formats timed faster than "
                f"vLLM's Marlin MoE ({timed}); {what} opt-in: pass --moe-backend swordfish to use it")
    return reason


def moe_auto_formats(major: int) -> str:
    """The formats MOE_AUTO_FORMATS lets --moe-backend auto pick on this major capability, named ("" if none)."""
    return ", ".join(moe_format_name(*f) for f in sorted(MOE_AUTO_FORMATS.get(major, ())))


def moe_format_name(bits: int, has_zero_points: bool, group_size: int) -> str:
    """An expert format as messages name it: "int4 group 128", "int8 channelwise with zero points"."""
    group = "channelwise" if group_size == -1 else f"group {group_size}"
    return f"int{bits} {group}{' with zero points' if has_zero_points else ''}"


def runs_on(arch: str, capability: tuple[int, int]) -> bool:
    """Does SASS built for `arch` ("90a", "100a", "120", ...) run on a device of `capability`?

    Arch-specific ("a") code runs on exactly that capability (sm_100a code does
    not run on sm103); plain code on the same major with an equal or newer minor.
    """
    digits = arch.rstrip("af")
    if not digits.isdigit() or len(digits) < 2:
        return False
    major, minor = int(digits[:-1]), int(digits[-1])
    if arch.endswith("a"):
        return (major, minor) == tuple(capability)
    return major == capability[0] and minor <= capability[1]


def arch_reason(capability: tuple[int, int] | None, cuda_archs=None) -> str | None:
    """None when the extension has code for this device, else why not."""
    if capability is None:
        return None
    archs = tuple(cuda_archs or DEFAULT_CUDA_ARCHS)
    if not any(runs_on(a, capability) for a in archs):
        return (f"the extension is built for {', '.join('sm_' + a for a in archs)}; this device is "
                f"sm{capability[0]}{capability[1]} (rebuild with SWORDFISH_CUDA_ARCHS)")
    return None


def _archs(table: dict[int, bool]) -> str:
    return ", ".join(f"sm{m}x" for m, on in sorted(table.items()) if on)


def auto_archs() -> str:
    return _archs(AUTO_SELECT)


def moe_auto_archs() -> str:
    """Where --moe-backend auto picks Swordfish: whole architectures, then the per-format ones."""
    per_format = [f"sm{m}x ({moe_auto_formats(m)})"
                  for m, fs in sorted(MOE_AUTO_FORMATS.items()) if fs and not MOE_AUTO_SELECT.get(m, False)]
    return ", ".join(filter(None, [_archs(MOE_AUTO_SELECT)] + per_format))
