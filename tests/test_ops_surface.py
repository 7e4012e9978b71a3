"""swordfish_backend.ops on the CPU: imports with or without the extension, says
plainly why an op cannot run, and (when the extension is built) exposes the
op surface with the agreed schemas, format constants and fake implementations.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap

import host_cxx
import pytest
import torch

from swordfish_backend import format as fmt
from swordfish_backend import ops

needs_extension = pytest.mark.skipif(not ops.has_extension(), reason=f"extension not built: {ops.extension_error()}")

SCHEMAS = {
    "abi_info": "swordfish::abi_info() -> Tensor",
    "path_names": "swordfish::path_names() -> str",
    "prepack": "swordfish::prepack(Tensor qweight, Tensor? perm, int bits) -> Tensor",
    "gemm": "swordfish::gemm(Tensor x, Tensor packed, Tensor scales, Tensor? zeros, Tensor? perm, Tensor? bias, "
            "int bits, int group, bool channelwise, int path, int deterministic) -> Tensor",
    "dequantize": "swordfish::dequantize(Tensor packed, Tensor scales, Tensor? zeros, Tensor? perm, int bits, "
                  "int group, bool channelwise, int K) -> Tensor",
    "select_path": "swordfish::select_path(int M, int K, int N, int bits, int group, bool channelwise, "
                   "bool has_zeros, bool act_order, int dtype, int device_index, int K_in=0) -> int",
    "can_implement": "swordfish::can_implement(int M, int K, int N, int bits, int group, bool channelwise, "
                     "bool has_zeros, bool act_order, int dtype, int path, int device_index, int K_in=0) -> str",
    "last_path": "swordfish::last_path(int device_index) -> int",
}


def _run_isolated(code: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter that imports swordfish_backend from this source tree
    without the compiled extension (no site-packages .pth redirect, no _C.so beside the sources)."""
    src_root = os.path.dirname(os.path.dirname(os.path.abspath(ops.__file__)))
    torch_parent = os.path.dirname(os.path.dirname(torch.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src_root, torch_parent]))
    return subprocess.run([sys.executable, "-S", "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, timeout=120)


def _source_tree_has_library() -> bool:
    return (ops.library_path() is not None
            and os.path.dirname(str(ops.library_path())) == os.path.dirname(os.path.abspath(ops.__file__)))


@pytest.mark.skipif(_source_tree_has_library(), reason="_C.so sits in the source tree (non-editable in-place build)")
def test_import_without_extension_and_clear_errors():
    r = _run_isolated("""
        import torch
        import swordfish_backend.ops as o
        assert not o.has_extension()
        err = o.extension_error()
        assert "_C.so is not built" in err and "pip install --no-build-isolation" in err, err
        for call in (lambda: o.prepack(torch.zeros(8, 64, dtype=torch.int32), None, 4),
                     lambda: o.gemm(None, None, None, None, None, None, 4, 128, False),
                     lambda: o.dequantize(None, None, None, None, 4, 128, False, 64),
                     lambda: o.select_path(1, 64, 64, 4, 64, False, False, False, 1, 0),
                     lambda: o.can_implement(1, 64, 64, 4, 64, False, False, False, 1, 0, 0),
                     lambda: o.last_path(0), o.abi_info, o.path_names):
            try:
                call()
            except RuntimeError as e:
                assert "needs the compiled extension" in str(e) and "pip install" in str(e), e
            else:
                raise AssertionError("no error without the extension")
        assert o.build_info() == {}
        assert o.PATHS == {n: i for i, n in enumerate(o.PATH_NAMES_FALLBACK)}  # the fallback serves
        assert not torch.cuda.is_initialized()
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_import_does_not_initialise_cuda():
    r = subprocess.run([sys.executable, "-c", "import torch, swordfish_backend.ops as o; o.has_extension(); "
                        "print(torch.cuda.is_initialized())"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stdout + r.stderr


def test_abi_info_fields_match_format_py():
    assert len(ops.ABI_INFO_FIELDS) == len(fmt.ABI_INFO) == 24
    assert len(set(ops.ABI_INFO_FIELDS)) == len(ops.ABI_INFO_FIELDS)


def test_path_and_dtype_codes():
    assert ops.PATH_NAMES == dict(enumerate(ops.PATH_NAMES_FALLBACK))
    assert ops.PATHS == {name: value for value, name in ops.PATH_NAMES.items()}
    assert [ops.PATH_NAMES[v] for v in (ops.PATH_AUTO, ops.PATH_DECODE, ops.PATH_DENSE, ops.PATH_PREFILL)] == [
        "auto", "decode", "dense", "prefill"]
    assert ops.DTYPE_CODES == {torch.float16: 0, torch.bfloat16: 1}


def test_path_names_fallback_matches_problem_h(tmp_path):
    """The fallback list is swordfish::Path's order and names (problem.h compiled on the CPU), so
    Python without the extension numbers the paths as the extension does."""
    out = host_cxx.run(tmp_path, """
        #include <cstdio>
        #include "kernels/common/problem.h"
        int main() {
          for (int i = 0; i < swordfish::kPathCount; ++i)
            std::printf("%s%s", i ? "," : "", swordfish::path_name(static_cast<swordfish::Path>(i)));
          std::printf("\\n");
        }
    """, "problem.h")
    assert tuple(out.strip().split(",")) == ops.PATH_NAMES_FALLBACK


def test_wrappers_follow_schema_order():
    for name, schema in SCHEMAS.items():
        args = schema.split("(", 1)[1].split(")", 1)[0]
        schema_names = [a.split()[-1].split("=")[0] for a in args.split(",") if a.strip()]
        wrapper_names = list(inspect.signature(getattr(ops, name)).parameters)
        assert wrapper_names == schema_names, name


# ---------------------------------------------------------- with the extension


@needs_extension
def test_schemas():
    for name, schema in SCHEMAS.items():
        assert str(getattr(torch.ops.swordfish, name).default._schema) == schema


@needs_extension
def test_path_names_op_matches_fallback():
    assert ops.path_names() == ",".join(ops.PATH_NAMES_FALLBACK)
    ops.check_path_names(ops.path_names())
    with pytest.raises(RuntimeError, match="rebuild the extension"):
        ops.check_path_names("auto,decode,prefill,dense")


@needs_extension
def test_can_implement_argument_errors_raise():
    """Codes that name nothing raise; everything else is an answer (GPU tests check the answers)."""
    with pytest.raises((ValueError, RuntimeError), match="path must be 0 \\(auto\\), 1 \\(decode\\), 2 "
                       "\\(dense\\) or 3 \\(prefill\\), got 7"):
        ops.can_implement(1, 4096, 4096, 4, 128, False, False, False, 1, 7, 0)
    with pytest.raises((ValueError, RuntimeError), match="dtype must be 0"):
        ops.can_implement(1, 4096, 4096, 4, 128, False, False, False, 5, 0, 0)
    # A shape rule is an answer, given before the device is looked at (none is needed for it).
    assert "group must be 32, 64 or 128" in ops.can_implement(1, 4096, 4096, 4, 96, False, False, False, 1, 0, 0)
    assert "multiple of 64" in ops.can_implement(1, 4096, 4100, 4, 128, False, False, False, 1, 0, 0)


@needs_extension
def test_abi_info_matches_format():
    info = ops.abi_info()
    assert info.dtype == torch.int64 and info.device.type == "cpu"
    assert tuple(info.tolist()) == fmt.ABI_INFO
    d = ops.abi_info_dict()
    assert d["block_k4"] == fmt.BLOCK_K4 and d["bias8"] == fmt.BIAS8
    assert [d[f"nibble_of_fragment4_{i}"] for i in range(8)] == list(fmt.NIBBLE_OF_FRAGMENT4)


@needs_extension
def test_build_info():
    info = ops.build_info()
    assert set(info) >= {"cuda_archs", "cuda_version", "torch_built_against", "torch_stable_abi_target", "git_commit"}
    assert info["git_commit"]  # the commit benchmark results record (or "unknown" outside git)
    assert info["cuda_archs"] and all(a[:2].isdigit() for a in info["cuda_archs"])


@needs_extension
@pytest.mark.parametrize("bits, rows, N, expected", [(4, 16, 128, (2, 2, 512)), (8, 16, 192, (3, 2, 512)),
                                                     (4, 8, 64, (1, 1, 512)), (8, 8, 64, (1, 1, 512))])
def test_fake_prepack(bits, rows, N, expected):
    q = torch.empty((rows, N), dtype=torch.int32, device="meta")
    out = torch.ops.swordfish.prepack(q, None, bits)
    assert tuple(out.shape) == expected and out.dtype == torch.int32 and out.device.type == "meta"


@needs_extension
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fake_gemm_and_dequantize(dtype):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty((7, 256), dtype=dtype)
        packed = torch.empty((3, 4, 512), dtype=torch.int32)
        scales = torch.empty((2, 192), dtype=dtype)
        y = ops.gemm(x, packed, scales, None, None, None, 4, 128, False, ops.PATH_AUTO, -1)
        assert tuple(y.shape) == (7, 192) and y.dtype == dtype
        w = ops.dequantize(packed, scales, None, None, 4, 128, False, 256)
        assert tuple(w.shape) == (192, 256) and w.dtype == dtype
        qweight = torch.empty((32, 192), dtype=torch.int32)
        assert tuple(ops.prepack(qweight, None, 4).shape) == (3, 4, 512)


@needs_extension
def test_fake_gemm_symbolic_m():
    """torch.compile with a dynamic M traces through the fake implementation."""
    packed = torch.empty((3, 4, 512), dtype=torch.int32, device="meta")
    scales = torch.empty((2, 192), dtype=torch.bfloat16, device="meta")

    def f(x):
        return torch.ops.swordfish.gemm(x, packed, scales, None, None, None, 4, 128, False, 0, -1)

    from torch._dynamo.testing import EagerAndRecordGraphs

    backend = EagerAndRecordGraphs()
    compiled = torch.compile(f, backend=backend, dynamic=True, fullgraph=True)
    for m in (7, 11):  # sizes that equal no weight dimension (duck sizing would tie them)
        y = compiled(torch.empty((m, 256), dtype=torch.bfloat16, device="meta"))
        assert tuple(y.shape) == (m, 192)
    assert len(backend.graphs) == 1


@needs_extension
@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ops.prepack(torch.zeros((8, 64), dtype=torch.int32), None, 4), "qweight must be a CUDA tensor"),
        (lambda: ops.prepack(torch.zeros((8, 64), dtype=torch.int32), None, 5), "bits must be 4 or 8, got 5"),
        (lambda: ops.gemm(torch.zeros((1, 64), dtype=torch.half), torch.zeros((1, 1, 512), dtype=torch.int32),
                          torch.zeros((1, 64), dtype=torch.half), None, None, None, 4, 64, False),
         "x must be a CUDA tensor, got one on cpu"),
        (lambda: ops.dequantize(torch.zeros((1, 1, 512), dtype=torch.int32), torch.zeros((1, 64), dtype=torch.half),
                                None, None, 4, 64, False, 64), "scales must be a CUDA tensor, got one on cpu"),
        (lambda: ops.select_path(1, 100, 64, 4, 64, False, False, False, 1, 0), "K = 100"),
        (lambda: ops.select_path(1, 128, 64, 4, 96, False, False, False, 1, 0), "group must be 32, 64 or 128"),
        (lambda: ops.select_path(1, 128, 64, 4, 256, True, False, False, 1, 0), "group must divide K = 128"),
        (lambda: ops.select_path(1, 128, 64, 4, 64, False, False, False, 3, 0), "dtype must be 0 .float16. or 1"),
        (lambda: ops.last_path(-1), r"device index must be in \[0, 256\), got -1"),
    ],
)
def test_cpu_side_argument_errors(call, match):
    """Errors raised before any CUDA work: ValueError starting with the op name."""
    with pytest.raises(ValueError, match=match) as info:
        call()
    assert str(info.value).startswith("swordfish.")
