"""Import one of the repository's scripts (benchmarks/*.py, scripts/*.py), which are not a package,
as a module for the CPU tests."""

from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load(relpath: str):
    """The module at ROOT / relpath (e.g. "benchmarks/bench_dispatch.py"), executed once per call."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
