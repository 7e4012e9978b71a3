"""Every environment variable Swordfish reads, in one place.

Each knob is read when its function is called, never cached, so a test (or a
user) can set it between two calls and be obeyed. This module is the only
Python reader of the environment (``_flag``); the C++ side has one parser too,
``kernels/common/env.h``, read at call time with the same spellings.

    SWORDFISH_DEBUG          1: log the dispatcher's path choice once per problem (stderr)
    SWORDFISH_DETERMINISTIC  1: no atomic epilogues, bit-identical results (on the H200's
                             decode path about 1.2x the time, 1.03-1.4x by layer:
                             docs/DECODE.md); read per call by the gemm op when its
                             ``deterministic`` argument is -1
    SWORDFISH_DISABLE        1: the vLLM plugin registers nothing (kill switch)
    SWORDFISH_SM100_PREFILL  1: let the Blackwell tcgen05 prefill (sm100a / sm110a; compiled, not
                             run on any Blackwell GPU yet) serve problems, forced or auto; off:
                             B200 / Thor use decode and the dense tier only (read per call by
                             the C++ prefill router, kernels/prefill/sm100/prefill_sm100_launch.h)

Off is ``0/false/off/no/""`` (any case) or unset. SWORDFISH_DETERMINISTIC and
SWORDFISH_SM100_PREFILL are strict, like the op that reads it: on is ``1/true/on/yes`` and anything else
raises ValueError naming the variable and the value. SWORDFISH_DEBUG and
SWORDFISH_DISABLE are lenient (any other value is on), as the C++ debug
switch is: a debug switch never fails a GEMM, and an unclear kill switch
errs on the side of off-the-road.

Build-time knobs (read by CMake during ``pip install``, not at run time; see
CMakeLists.txt): SWORDFISH_CUDA_ARCHS (default ``90a;100a;110a``),
SWORDFISH_BUILD_CUDA (OFF: pure-Python install), SWORDFISH_PTXAS_VERBOSE,
SWORDFISH_CCACHE. They are listed in BUILD_KNOBS for reference.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Knob:
    name: str
    default: bool
    meaning: str
    strict: bool = False  # unrecognised values raise instead of meaning "on"


KNOBS: tuple[Knob, ...] = (
    Knob("SWORDFISH_DEBUG", False, "log each problem's path and kernel configuration once, on stderr"),
    Knob("SWORDFISH_DETERMINISTIC", False,
         "deterministic mode: no atomic epilogues; each output tile is written by one CTA or reduced from fp32 partials in a fixed order (bit-identical runs)",
         strict=True),
    Knob("SWORDFISH_DISABLE", False, "kill switch: the vLLM plugin registers nothing"),
    Knob("SWORDFISH_SM100_PREFILL", False,
         "opt in to the Blackwell tcgen05 prefill (B200 / Thor; compiled, not run on hardware yet); off: decode and "
         "the dense tier serve those devices", strict=True),
)

# Read by CMake at build time only (documentation; nothing here reads them).
BUILD_KNOBS: dict[str, str] = {
    "SWORDFISH_CUDA_ARCHS": "SASS targets, default 90a;100a;110a (an H200 needs 90a only)",
    "SWORDFISH_BUILD_CUDA": "OFF: build no extension (pure-Python install, CPU reference path only)",
    "SWORDFISH_PTXAS_VERBOSE": "ON: print ptxas register/spill reports",
    "SWORDFISH_CCACHE": "OFF: do not compile through ccache",
}

_TRUE = ("1", "true", "on", "yes")
_FALSE = ("", "0", "false", "off", "no")


_BY_NAME = {k.name: k for k in KNOBS}


def _flag(name: str) -> bool:
    knob = _BY_NAME[name]
    raw = os.environ.get(name)
    if raw is None:
        return knob.default
    value = raw.strip().lower()
    if value in _FALSE:
        return False
    if value in _TRUE or not knob.strict:
        return True
    raise ValueError(f"{name} must be 0 or 1 (or false/true, off/on, no/yes), got {raw!r}")


def debug() -> bool:
    """SWORDFISH_DEBUG: log dispatch decisions (any value but 0/false/off/no/"" is on)."""
    return _flag("SWORDFISH_DEBUG")


def deterministic() -> bool:
    """SWORDFISH_DETERMINISTIC: the value the gemm op uses when called with deterministic=-1."""
    return _flag("SWORDFISH_DETERMINISTIC")


def disabled() -> bool:
    """SWORDFISH_DISABLE: the vLLM plugin's kill switch (any value but 0/false/off/no/"" disables)."""
    return _flag("SWORDFISH_DISABLE")


def sm100_prefill() -> bool:
    """SWORDFISH_SM100_PREFILL: the Blackwell tcgen05 prefill may serve problems (strict: anything but an on / off
    spelling raises here; the C++ router reads such a value as off and says so)."""
    return _flag("SWORDFISH_SM100_PREFILL")


def describe() -> list[dict]:
    """Each runtime knob with its raw value (None when unset), what it resolves to, or the parse error."""
    out = []
    for knob in KNOBS:
        raw = os.environ.get(knob.name)
        try:
            value: object = _flag(knob.name)
        except ValueError as e:
            value = f"invalid: {e}"
        out.append({"name": knob.name, "raw": raw, "value": value, "meaning": knob.meaning})
    return out
