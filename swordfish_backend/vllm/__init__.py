"""The vLLM plugin: ``register()`` is the ``vllm.general_plugins`` entry point.

    [project.entry-points."vllm.general_plugins"]
    swordfish = "swordfish_backend.vllm:register"

vLLM calls it in every process (API server, engine core, workers), so it is
idempotent, imports vLLM lazily (importing this package imports no vLLM) and
never touches CUDA. ``SWORDFISH_DISABLE=1`` (read at each call) makes it do
nothing; so does a vLLM outside the tested series, with one log line saying so.

What it registers (docs/VLLM.md is the user guide):

* ``SwordfishLinearKernel`` (kernel.py), first among vLLM's CUDA
  mixed-precision kernels: GPTQ, AWQ and compressed-tensors WNA16 layers go
  to Swordfish with ``--linear-backend swordfish`` everywhere, and with
  ``auto`` on the architectures in ``selection.AUTO_SELECT``.
* Swordfish's fused MoE (moe_method.py) for the MoE layers of GPTQ, AWQ and
  compressed-tensors WNA16 checkpoints: with ``--moe-backend swordfish``
  everywhere, and with ``auto`` on the architectures in
  ``selection.MOE_AUTO_SELECT`` and for the formats in
  ``selection.MOE_AUTO_FORMATS`` (sm90: the ones timed against Marlin MoE).
* ``--linear-backend swordfish`` / ``--moe-backend swordfish`` and the MoE
  layers' route to Swordfish (patches.py, every patch of vLLM internals
  lives there).
* ``swordfish_gptq`` and ``swordfish_compressed_tensors`` quantization
  configs (act_order.py) for the act-order checkpoints vLLM 0.33 refuses.
"""

from __future__ import annotations

import importlib.metadata

from .selection import disabled

# The vLLM release series this plugin is tested against: [0.33, 0.34).
TESTED_VLLM = ((0, 33), (0, 34))

_registered = False


def _logger():
    from vllm.logger import init_logger
    return init_logger("vllm.swordfish")


def version_reason(version: str) -> str | None:
    """None when `version` of vLLM is in the tested series, else why the plugin stays off."""
    from packaging.version import InvalidVersion, Version
    try:
        release = Version(version).release
    except InvalidVersion:
        return f"cannot parse the vLLM version {version!r}"
    lo, hi = TESTED_VLLM
    if not (lo <= tuple(release[:2]) < hi):
        return (f"vLLM {version} is outside the tested range [{'.'.join(map(str, lo))}, "
                f"{'.'.join(map(str, hi))}); install vllm==0.33.* (or this checkout's .[vllm] extra) for a tested pair")
    return None


def register() -> None:
    """Register Swordfish with vLLM (the general-plugin entry point)."""
    global _registered
    if disabled():
        _logger().info("Swordfish: SWORDFISH_DISABLE is set, the plugin registers nothing")
        return
    if _registered:
        return
    reason = version_reason(importlib.metadata.version("vllm"))
    if reason is not None:
        _logger().warning("Swordfish plugin disabled: %s", reason)
        return
    from . import act_order, moe_method, patches
    from .kernel import SwordfishLinearKernel

    patches.apply_all(SwordfishLinearKernel, moe_method.choose)
    act_order.register_configs()
    _registered = True
    from .. import __version__
    from .selection import auto_archs, moe_auto_archs
    _logger().info("Swordfish %s registered: --linear-backend swordfish, auto-selected on %s; --moe-backend "
                   "swordfish, auto-selected on %s; act-order GPTQ / compressed-tensors served", __version__,
                   auto_archs(), moe_auto_archs())
