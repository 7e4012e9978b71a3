"""Compile and run a small host C++ program against the repository's headers (the CPU tests of the
header-only parts: format.h, dense_smem.h, the dispatch tables). Skips the calling test when the
machine has no host C++ compiler."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def compiler() -> str | None:
    return shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")


def build(directory: pathlib.Path, source: str | pathlib.Path, what: str, flags: tuple = (),
          extra: tuple = ()) -> pathlib.Path:
    """Compile `source` (program text, or a .cpp path) and the `extra` .cpp paths (plain C++ parts of
    the library the program links, e.g. kernels/prefill/prefill_plan.cpp) with -I ROOT into
    `directory`; the executable."""
    cxx = compiler()
    if cxx is None:
        pytest.skip(f"no host C++ compiler for {what}")
    if isinstance(source, str):
        src = directory / "probe.cpp"
        src.write_text(source)
    else:
        src = source
    exe = directory / "probe"
    subprocess.run([cxx, "-std=c++17", *flags, "-I", str(ROOT), str(src), *map(str, extra), "-o", str(exe)],
                   check=True)
    return exe


def ask(exe: pathlib.Path, lines: list[str]) -> list[str]:
    """Feed a query driver (kernels/*/tests/*_main.cpp) one query per line; its one answer per line. A
    driver answers "error: ..." to a query it cannot read."""
    out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert len(out) == len(lines) and not any(o.startswith("error") for o in out), out
    return out


def run(directory: pathlib.Path, program: str, what: str) -> str:
    """Build `program` and return what it prints."""
    exe = build(directory, program, what)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
