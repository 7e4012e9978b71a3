"""Every change Swordfish makes to vLLM internals, in one place.

vLLM 0.33 has public hooks for quantization configs
(``register_quantization_config``, used in ``act_order.py``) and for adding
a mixed-precision kernel (``register_linear_kernel``, which only appends).
Everything below has no public hook. Each patch says what it changes, why,
for which versions, and how it is tested; all are idempotent (applying them
twice changes nothing) and none touches CUDA.

Tested versions: vLLM 0.33.0 (``TESTED_VLLM`` in ``__init__.py`` gates
``register()`` to [0.33, 0.34)). Tests: ``tests/test_vllm_plugin.py``.

P1  --linear-backend / --moe-backend choices
    What: add "swordfish" to the ``LinearBackend`` and ``MoEBackend`` Literals
    of ``vllm.config.kernel``: the module aliases, the annotations and
    dataclass field types of ``KernelConfig.linear_backend``,
    ``linear_backend_per_quant`` and ``moe_backend``; rebuild the pydantic
    dataclasses ``KernelConfig`` and ``VllmConfig`` (which embeds its schema);
    clear ``vllm.engine.arg_utils._compute_kwargs`` (an lru_cache of argparse
    kwargs built from those field types).
    Why: the CLI choices, ``--kernel-config`` JSON and ``KernelConfig(...)``
    validate against the Literal; there is no hook to extend it.
    Tested: the real ``vllm serve`` parser accepts ``--linear-backend
    swordfish --moe-backend swordfish`` and still rejects a misspelt value;
    ``--kernel-config`` JSON, ``KernelConfig(...)`` and ``EngineArgs`` kwargs
    reach ``KernelConfig``.
    MoE: the value parses; a MoE layer then fails in vLLM's MoE oracle with
    "moe_backend='swordfish' is not supported for WNA16 MoE" until the
    Swordfish MoE experts class exists (no silent fallback).

P2  _LINEAR_BACKEND_KERNEL_MAP["swordfish"]
    What: map the backend name to SwordfishLinearKernel plus every other
    CUDA mixed-precision kernel vLLM lists, Swordfish first.
    Why: ``--linear-backend X`` keeps only the kernels mapped to X. With
    Swordfish alone, a layer it cannot serve (say N % 64 != 0, or W4A8) would
    fail to load; with the others kept behind it such a layer goes to vLLM's
    own choice, and ``can_implement`` logs once per reason why.
    Tested: the map entry, and a layer Swordfish refuses falls back.

P3  Swordfish first in _POSSIBLE_KERNELS[PlatformEnum.CUDA]
    What: insert SwordfishLinearKernel at index 0 (``register_linear_kernel``
    appends, which would put it behind Machete and Marlin forever).
    Why: with ``auto`` it must win on sm100/sm110; its ``can_implement``
    declines on other archs (sm90: opt-in until measured), so vLLM's order
    is unchanged there.
    Tested: ``choose_mp_linear_kernel`` under a faked CUDA platform of
    capability 10.0 / 11.0 picks Swordfish, 9.0 does not unless
    ``--linear-backend swordfish``.

Private names read (no patch, but they can move between vLLM releases):
``vllm.model_executor.kernels.linear._get_linear_backend``.
"""

from __future__ import annotations

import dataclasses
import sys
import typing

BACKEND = "swordfish"


def _with_swordfish(literal):
    values = typing.get_args(literal)
    return literal if BACKEND in values else typing.Literal[(*values, BACKEND)]


def extend_backend_literals() -> bool:
    """P1. Returns True if it changed anything."""
    import vllm.config.kernel as kernel_cfg
    from pydantic.dataclasses import rebuild_dataclass
    from vllm.config import VllmConfig

    kc = kernel_cfg.KernelConfig
    linear = _with_swordfish(kernel_cfg.LinearBackend)
    moe = _with_swordfish(kernel_cfg.MoEBackend)
    wanted = {
        "linear_backend": linear,
        "linear_backend_per_quant": dict[str, linear] | None,
        "moe_backend": moe,
    }
    fields = {f.name: f for f in dataclasses.fields(kc)}
    if all(BACKEND in typing.get_args(fields[name].type) for name in ("linear_backend", "moe_backend")):
        return False
    for name, annotation in wanted.items():
        kc.__annotations__[name] = annotation
        fields[name].type = annotation
    kernel_cfg.LinearBackend = linear
    kernel_cfg.MoEBackend = moe
    rebuild_dataclass(kc, force=True)
    rebuild_dataclass(VllmConfig, force=True)
    arg_utils = sys.modules.get("vllm.engine.arg_utils")
    if arg_utils is not None:  # not imported yet: nothing cached yet
        arg_utils._compute_kwargs.cache_clear()
    return True


def map_linear_backend(kernel_cls) -> None:
    """P2."""
    from vllm.model_executor.kernels import linear
    from vllm.platforms import PlatformEnum

    others = [k for k in linear._POSSIBLE_KERNELS.get(PlatformEnum.CUDA, []) if k is not kernel_cls]
    linear._LINEAR_BACKEND_KERNEL_MAP[BACKEND] = {kernel_cls, *others}


def put_kernel_first(kernel_cls) -> None:
    """P3."""
    from vllm.model_executor.kernels import linear
    from vllm.platforms import PlatformEnum

    kernels = linear._POSSIBLE_KERNELS.setdefault(PlatformEnum.CUDA, [])
    if kernel_cls in kernels:
        kernels.remove(kernel_cls)
    kernels.insert(0, kernel_cls)


def requested_linear_backend() -> str:
    """The --linear-backend in force for mixed-precision layers ("auto" outside an engine)."""
    from vllm.model_executor.kernels.linear import _get_linear_backend

    return _get_linear_backend(quantization="mixed_precision")


def apply_all(kernel_cls) -> None:
    extend_backend_literals()
    map_linear_backend(kernel_cls)
    put_kernel_first(kernel_cls)
