"""The TMA behaviour the sm100 prefill relies on, probed on whatever TMA GPU is present (H100 / H200 as
well as B200 / Thor): kernels/prefill/sm100/tests/tma_probe_main.cu, built with nvcc for this GPU and run.
It loads the kernel's own tensor maps (kernels/common/tma_desc.h) and checks that a box taller than the
tensor encodes, that a box partly or wholly past the tensor completes its barrier with the whole box's
bytes (what the kernel's expect_tx counts: the pair's half past N, the last m tile past M) and lands
zeros there, and that the activation box lands in the 128-byte-swizzled layout the UMMA descriptors read.
The 2-SM TMA itself (SM100_TMA_2SM_LOAD) exists only on Blackwell and is not probed here."""

from __future__ import annotations

import shutil
import subprocess

import host_cxx
import pytest

torch = pytest.importorskip("torch")

ROOT = host_cxx.ROOT
PROBE = ROOT / "kernels" / "prefill" / "sm100" / "tests" / "tma_probe_main.cu"
ARCH = {(9, 0): "90a", (10, 0): "100a", (11, 0): "110a"}


def test_tma_boxes_past_the_tensor(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU with TMA (sm90a, sm100a or sm110a)")
    cc = torch.cuda.get_device_capability()
    if cc not in ARCH:
        pytest.skip(f"no TMA probe build for compute capability {cc}")
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    exe = tmp_path / "tma_probe"
    build = subprocess.run([nvcc, "-std=c++17", "-O2", f"-gencode=arch=compute_{ARCH[cc]},code=sm_{ARCH[cc]}", "-I",
                            str(ROOT), str(PROBE), str(ROOT / "kernels" / "common" / "tma_desc.cpp"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-4000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert run.stdout.strip().endswith("8 cases, 0 bad"), run.stdout
