"""The compiled extension: loading, typed op wrappers and fake implementations.

``_C.so`` is one shared library built by CMake against the torch stable ABI
(torch 2.11 and later). It is not a Python extension module: it is loaded
with ``torch.ops.load_library`` and registers the ops of the ``swordfish``
namespace (schemas in ``kernels/torch/ops_format.cpp`` and
``kernels/torch/ops_gemm.cpp``). The wrappers below follow those schemas
argument for argument. What the C++ side knows Python reads from it rather
than restating: the format constants (abi_info, checked against format.py),
the path names (path_names, checked against PATH_NAMES_FALLBACK) and the
support predicate (can_implement).

Loading is attempted once, at import; it maps the library but never
initialises CUDA. Without the library (a source checkout, a build with
``SWORDFISH_BUILD_CUDA=OFF``, a CPU-only torch) the module still imports:
``has_extension()`` is False, ``extension_error()`` says why, and calling a
CUDA op raises RuntimeError naming the build command.

Argument errors raised inside the ops (wrong dtype, shape, device, ...) come
back as exceptions whose message starts with ``swordfish.<op>:`` and names
the offending value.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import threading
from typing import Optional

import torch

from . import format as fmt

NAMESPACE = "swordfish"
LIBRARY_NAME = "_C.so"

BUILD_HINT = (
    "build it from the source tree with `pip install --no-build-isolation -e .` "
    "(needs nvcc, torch, scikit-build-core, ninja and nvidia-cutlass; see README.md)"
)

# Order of the values abi_info() returns (kernels/torch/ops_format.cpp kAbiInfo;
# swordfish_backend/format.py ABI_INFO holds the expected values).
ABI_INFO_FIELDS = (
    "version", "block_n", "block_bytes", "block_words", "subtiles", "subtile_bytes", "lanes", "lane_words",
    "block_k4", "block_k8", "bias4", "bias8",
    "nibble_of_fragment4_0", "nibble_of_fragment4_1", "nibble_of_fragment4_2", "nibble_of_fragment4_3",
    "nibble_of_fragment4_4", "nibble_of_fragment4_5", "nibble_of_fragment4_6", "nibble_of_fragment4_7",
    "byte_of_fragment8_0", "byte_of_fragment8_1", "byte_of_fragment8_2", "byte_of_fragment8_3",
)

# The kernel paths in swordfish::Path order (a name's index is its value as the `path` argument and
# in select_path()/last_path()). The extension's path_names() op is the source; this copy serves
# when there is no extension (the CPU reference path) and is checked against the op when the
# extension loads (a mismatch refuses it, like a format mismatch) and by tests/test_ops_surface.py,
# which also compiles problem.h on the CPU.
PATH_NAMES_FALLBACK = ("auto", "decode", "dense", "prefill")
PATH_NAMES = dict(enumerate(PATH_NAMES_FALLBACK))
PATHS = {name: value for value, name in PATH_NAMES.items()}
PATH_AUTO, PATH_DECODE, PATH_DENSE, PATH_PREFILL = (PATHS[n] for n in ("auto", "decode", "dense", "prefill"))

# Values of select_path's `dtype` argument (swordfish::DType in problem.h).
DTYPE_CODES = {torch.float16: 0, torch.bfloat16: 1}

_lock = threading.RLock()
_state: dict = {"tried": False, "loaded": False, "path": None, "error": None}


# --------------------------------------------------------------- loading


def library_path() -> Optional[pathlib.Path]:
    """Where ``_C.so`` is, or None. Regular installs keep it beside this file;
    editable installs keep it in site-packages, found through the import system."""
    here = pathlib.Path(__file__).resolve().with_name(LIBRARY_NAME)
    if here.is_file():
        return here
    try:
        spec = importlib.util.find_spec(f"{__package__}._C")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin and pathlib.Path(spec.origin).is_file():
        return pathlib.Path(spec.origin)
    return None


def _load() -> None:
    with _lock:
        if _state["tried"]:
            return
        _state["tried"] = True
        path = library_path()
        if path is None:
            _state["error"] = f"swordfish_backend/{LIBRARY_NAME} is not built: {BUILD_HINT}"
            return
        _state["path"] = path
        try:
            torch.ops.load_library(str(path))
        except (OSError, RuntimeError) as e:
            _state["error"] = f"loading {path} failed ({e}); rebuild it: {BUILD_HINT}"
            return
        try:
            _register_fakes()
        except Exception as e:  # noqa: BLE001 - report, do not break the import
            _state["error"] = f"{path} loaded but its ops are incomplete ({e}); rebuild it: {BUILD_HINT}"
            return
        _state["loaded"] = True
        try:
            fmt.check_against_extension(torch.ops.swordfish.abi_info().tolist())
            check_path_names(torch.ops.swordfish.path_names())
        except (RuntimeError, AttributeError) as e:  # AttributeError: an op this build lacks
            _state["loaded"] = False
            _state["error"] = str(e)


def check_path_names(names: str) -> None:
    """Raise RuntimeError unless the extension's path_names() is PATH_NAMES_FALLBACK's order."""
    if tuple(names.split(",")) != PATH_NAMES_FALLBACK:
        raise RuntimeError(
            f"swordfish_backend._C numbers its kernel paths {names!r}, this package "
            f"{','.join(PATH_NAMES_FALLBACK)!r}; rebuild the extension from this source tree: {BUILD_HINT}"
        )


def has_extension() -> bool:
    """True when ``_C.so`` is loaded and its format and path names match this package's."""
    _load()
    return bool(_state["loaded"])


def extension_error() -> Optional[str]:
    """Why the extension is unavailable (None when it is loaded)."""
    _load()
    return None if _state["loaded"] else _state["error"]


def build_info() -> dict:
    """Facts recorded at build time (CUDA architectures, CUDA and torch versions), {} if unknown."""
    _load()
    path = _state["path"]
    if path is None:
        return {}
    info_file = pathlib.Path(path).with_name("_C_build.json")
    try:
        return json.loads(info_file.read_text())
    except (OSError, ValueError):
        return {}


def _require(op: str) -> None:
    if not has_extension():
        raise RuntimeError(f"swordfish.{op} needs the compiled extension: {extension_error()}")


# ----------------------------------------------------- typed wrappers
# One per op, arguments in schema order.


def abi_info() -> torch.Tensor:
    """int64 CPU tensor of the packed-format constants compiled into ``_C.so`` (order: ABI_INFO_FIELDS)."""
    _require("abi_info")
    return torch.ops.swordfish.abi_info()


def abi_info_dict() -> dict:
    """abi_info() as {field name: value}."""
    return dict(zip(ABI_INFO_FIELDS, abi_info().tolist()))


def path_names() -> str:
    """The extension's kernel path names, comma-separated in swordfish::Path order (PATH_NAMES_FALLBACK)."""
    _require("path_names")
    return torch.ops.swordfish.path_names()


def prepack(qweight: torch.Tensor, perm: Optional[torch.Tensor], bits: int) -> torch.Tensor:
    """GPTQ K-packed int32 (K * bits / 32, N) -> packed format v1 int32 (N / 64, K / block_k, 512), on the GPU.

    With ``perm`` (int32 (K)), packed row k takes source row perm[k].
    """
    _require("prepack")
    return torch.ops.swordfish.prepack(qweight, perm, bits)


def gemm(
    x: torch.Tensor,
    packed: torch.Tensor,
    scales: torch.Tensor,
    zeros: Optional[torch.Tensor],
    perm: Optional[torch.Tensor],
    bias: Optional[torch.Tensor],
    bits: int,
    group: int,
    channelwise: bool,
    path: int = PATH_AUTO,
    deterministic: int = -1,
) -> torch.Tensor:
    """y (M, N) = x (M, K) @ W^T (+ bias), W dequantized from ``packed``.

    ``path``: PATH_AUTO (the dispatcher decides from the runtime M) or a forced
    path (an error names why it cannot run). ``deterministic``: -1 reads
    SWORDFISH_DETERMINISTIC at call time, 0 / 1 override it.
    """
    _require("gemm")
    return torch.ops.swordfish.gemm(x, packed, scales, zeros, perm, bias, bits, group, channelwise, path,
                                    deterministic)


def dequantize(
    packed: torch.Tensor,
    scales: torch.Tensor,
    zeros: Optional[torch.Tensor],
    perm: Optional[torch.Tensor],
    bits: int,
    group: int,
    channelwise: bool,
    K: int,
) -> torch.Tensor:
    """The (N, K) weight in scales.dtype, columns in original input-feature order."""
    _require("dequantize")
    return torch.ops.swordfish.dequantize(packed, scales, zeros, perm, bits, group, channelwise, K)


def select_path(
    M: int,
    K: int,
    N: int,
    bits: int,
    group: int,
    channelwise: bool,
    has_zeros: bool,
    act_order: bool,
    dtype: int,
    device_index: int,
) -> int:
    """The path (PATH_DECODE, PATH_DENSE, PATH_PREFILL) the dispatcher would pick for this problem."""
    _require("select_path")
    return torch.ops.swordfish.select_path(M, K, N, bits, group, channelwise, has_zeros, act_order, dtype,
                                           device_index)


def can_implement(
    M: int,
    K: int,
    N: int,
    bits: int,
    group: int,
    channelwise: bool,
    has_zeros: bool,
    act_order: bool,
    dtype: int,
    path: int,
    device_index: int,
) -> str:
    """"" when gemm with these arguments could run ``path`` (PATH_AUTO: the one select_path picks) on
    that CUDA device, else the reason gemm would give: the C++ predicate itself (the op layer's shape
    rules, then the dispatcher's and the path's can_implement). Raises ValueError only for a dtype or
    path code out of range."""
    _require("can_implement")
    return torch.ops.swordfish.can_implement(M, K, N, bits, group, channelwise, has_zeros, act_order, dtype, path,
                                             device_index)


def last_path(device_index: int) -> int:
    """The path of the most recent gemm on that device (PATH_AUTO if none yet)."""
    _require("last_path")
    return torch.ops.swordfish.last_path(device_index)


# ------------------------------------------------- fake implementations
# Shapes and dtypes only: what torch.compile / FakeTensor tracing needs.


def _register_fake(name: str):
    """torch.library.register_fake, tolerating a second registration (a reloaded module)."""
    def decorate(fn):
        try:
            torch.library.register_fake(f"{NAMESPACE}::{name}")(fn)
        except RuntimeError as e:
            if "already" not in str(e):
                raise
        return fn
    return decorate


def _register_fakes() -> None:
    # The packed geometry comes from format.py, which is checked against format.h and abi_info().
    @_register_fake("prepack")
    def _prepack_fake(qweight, perm, bits):
        if bits not in fmt.BITS:
            raise ValueError(f"swordfish.prepack: bits must be 4 or 8, got {bits}")
        K, N = qweight.shape[0] * fmt.values_per_word(bits), qweight.shape[1]
        return qweight.new_empty((N // fmt.BLOCK_N, K // fmt.block_k(bits), fmt.BLOCK_WORDS), dtype=torch.int32)

    @_register_fake("gemm")
    def _gemm_fake(x, packed, scales, zeros, perm, bias, bits, group, channelwise, path, deterministic):
        return x.new_empty((x.shape[0], packed.shape[0] * fmt.BLOCK_N))

    @_register_fake("dequantize")
    def _dequantize_fake(packed, scales, zeros, perm, bits, group, channelwise, K):
        return scales.new_empty((packed.shape[0] * fmt.BLOCK_N, K))


_load()
