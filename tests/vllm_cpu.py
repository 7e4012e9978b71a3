"""What the vLLM CPU tests share (test_vllm_plugin.py, test_vllm_moe.py): vLLM on its CPU platform with the
plugin registered, and a faked CUDA platform for the selection tests.

Import it first, before any vLLM module: it sets VLLM_TARGET_DEVICE and registers the plugin, and it skips
the importing test module when vLLM is not installed.
"""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # no GPU here: vLLM's CPU platform
pytest.importorskip("vllm", reason="vLLM is not installed (docs/VLLM.md, \"Tests\": a venv with vllm==0.33.*)")

import swordfish_backend.vllm as plugin  # noqa: E402

plugin.register()

import vllm.platforms as vplatforms  # noqa: E402
from vllm.platforms import PlatformEnum  # noqa: E402
from vllm.platforms.interface import DeviceCapability  # noqa: E402

from swordfish_backend import ops  # noqa: E402
from swordfish_backend.vllm import kernel, selection  # noqa: E402


class FakeCuda:
    """vLLM's current platform, pretending to be CUDA of a given capability."""

    _enum = PlatformEnum.CUDA

    def __init__(self, real, capability):
        self._real, self._cap = real, capability

    def is_cuda(self):
        return True

    def is_cpu(self):
        return False

    def get_device_capability(self, device_id=0):
        return DeviceCapability(*self._cap)

    def __getattr__(self, name):
        return getattr(self._real, name)


def cuda_faker(monkeypatch, *modules):
    """fake(capability=(10, 0)) -> FakeCuda: vLLM's current platform (and the ``current_platform`` that each
    of `modules` imported) becomes a FakeCuda of that capability; Swordfish sees the extension as built."""
    real = vplatforms.current_platform

    def fake(capability=(10, 0)):
        platform = FakeCuda(real, capability)
        monkeypatch.setattr(vplatforms, "_current_platform", platform)
        for module in modules:
            monkeypatch.setattr(module, "current_platform", platform)
        return platform

    monkeypatch.setattr(kernel, "_extension_reason", lambda: None)
    # ... built for the default architectures, whatever build sits in the source tree (a local sm_90a-only
    # _C.so would otherwise refuse the faked sm100 / sm110 devices)
    monkeypatch.setattr(ops, "build_info", lambda: {"cuda_archs": list(selection.DEFAULT_CUDA_ARCHS)})
    return fake


# ------------------------------------------------------ checkpoint packers (GPTQ / AWQ layouts)

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # AWQ's GEMM layout: column 8c + AWQ_ORDER[i] in nibble i of word c


def to_int32(words: torch.Tensor) -> torch.Tensor:
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def pack_rows(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """(R, C) codes -> int32 (R * bits / 32, C), GPTQ's qweight: value i of word r is row (32 / bits) * r + i."""
    vpw = 32 // bits
    words = torch.zeros(codes.shape[0] // vpw, codes.shape[1], dtype=torch.int64)
    for i in range(vpw):
        words |= codes[i::vpw].to(torch.int64) << (bits * i)
    return to_int32(words)


def pack_cols(codes: torch.Tensor, bits: int, order=None) -> torch.Tensor:
    """(R, C) codes -> int32 (R, C * bits / 32): field i of word c is column vpw * c + order[i]."""
    vpw = 32 // bits
    order = order or tuple(range(vpw))
    words = torch.zeros(codes.shape[0], codes.shape[1] // vpw, dtype=torch.int64)
    for i in range(vpw):
        words |= codes[:, order[i]::vpw].to(torch.int64) << (bits * i)
    return to_int32(words)
