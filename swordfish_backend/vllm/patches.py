"""Every change Swordfish makes to vLLM internals, in one place.

vLLM 0.33 has public hooks for quantization configs
(``register_quantization_config``, used in ``act_order.py``) and for adding
a mixed-precision kernel (``register_linear_kernel``, which only appends).
Everything below has no public hook. Each patch says what it changes, why,
for which versions, and how it is tested; all are idempotent (applying them
twice changes nothing) and none touches CUDA.

Tested versions: vLLM 0.33.0 (``TESTED_VLLM`` in ``__init__.py`` gates
``register()`` to [0.33, 0.34)). Tests: ``tests/test_vllm_plugin.py``,
``tests/test_vllm_moe.py``.

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
    MoE: the value reaches each layer's ``FusedMoEConfig.moe_backend``; P4
    routes the layer to Swordfish, or (a layer Swordfish cannot serve) warns
    and resets that layer's value to "auto", so vLLM's own MoE oracle never
    sees "swordfish" (it would raise "moe_backend='swordfish' is not
    supported for WNA16 MoE").

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

P4  RoutedExperts._get_quant_method asks Swordfish first
    What: wrap ``vllm.model_executor.layers.fused_moe.routed_experts.
    RoutedExperts._get_quant_method(self, prefix, quant_config, moe_config)``
    (the one place every routed-experts layer gets its fused-MoE method) so
    that ``moe_method.choose`` decides first: a Swordfish method for the
    layer, or the original call (vLLM's own choice). The wrapper is marked
    and keeps the original as ``__wrapped__``; a second application changes
    nothing; a signature other than 0.33's raises RuntimeError naming it.
    Why: vLLM 0.33 picks a MoE method inside each quantization config's
    ``get_quant_method`` (GPTQ, AWQ, compressed-tensors each build their own
    WNA16 MoE method, whose constructor runs the WNA16 backend oracle, and
    that oracle's backends are a closed enum). The public hooks do not reach
    it: ``register_quantization_config`` would mean claiming every GPTQ /
    AWQ / compressed-tensors checkpoint with a renamed config, and the
    out-of-tree ``RoutedExperts`` class (``PluggableLayer.register_oot``)
    skips its in-tree subclasses and allows one plugin only. The methods
    themselves are vLLM's extension points (``FusedMoEMethodBase`` subclasses
    of vLLM's WNA16 methods, ``mk.FusedMoEExpertsModular``, ``FusedMoEKernel``).
    Model-specific subclasses that override ``_get_quant_method`` (ROCm
    DeepSeek-V4, MuseSpark) keep their own choice.
    Tested: ``tests/test_vllm_moe.py`` builds vLLM's MoE layers
    (``FusedMoEFactory``) for GPTQ / AWQ / compressed-tensors checkpoints
    under ``--moe-backend swordfish`` / ``auto`` and faked CUDA platforms,
    checks which method each layer gets, the fallback warnings, idempotence,
    and the signature check.

Private names read (no patch, but they can move between vLLM releases):
``vllm.model_executor.kernels.linear._get_linear_backend``; for MoE
(moe_method.py) ``CompressedTensorsConfig._add_fused_moe_to_target_scheme_map``,
``RoutedExperts._map_global_expert_id_to_local_expert_id`` /
``_expert_routing_tables`` / ``_loaded_expert_biases``, and the attributes
that vLLM's WNA16 MoE ``create_weights`` read from their method.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
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


MOE_HOOK_PARAMS = ("self", "prefix", "quant_config", "moe_config")  # RoutedExperts._get_quant_method in 0.33


def route_moe_layers(choose) -> bool:
    """P4: `choose(layer, prefix, quant_config, moe_config)` returns a method or None. True if it changed anything."""
    from vllm.model_executor.layers.fused_moe.routed_experts import RoutedExperts

    current = RoutedExperts.__dict__.get("_get_quant_method")
    if getattr(current, "__swordfish__", False):
        return False
    params = tuple(inspect.signature(current).parameters) if current is not None else ()
    if params != MOE_HOOK_PARAMS:
        raise RuntimeError(
            f"Swordfish cannot route MoE layers on this vLLM: RoutedExperts._get_quant_method has parameters "
            f"{params}, expected {MOE_HOOK_PARAMS} (vLLM 0.33, the tested series)")
    original = current

    @functools.wraps(original)
    def _get_quant_method(self, prefix, quant_config, moe_config):
        method = choose(self, prefix, quant_config, moe_config)
        return method if method is not None else original(self, prefix, quant_config, moe_config)

    _get_quant_method.__swordfish__ = True
    RoutedExperts._get_quant_method = _get_quant_method
    return True


def apply_all(kernel_cls, choose_moe) -> None:
    extend_backend_literals()
    map_linear_backend(kernel_cls)
    put_kernel_first(kernel_cls)
    route_moe_layers(choose_moe)
