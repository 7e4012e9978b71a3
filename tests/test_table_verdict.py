"""benchmarks/table_verdict.py on the committed H200 baseline: the table the tree has now, judged on CPU."""

from __future__ import annotations

import pathlib
import re
import shutil

import pytest
import repo_scripts

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The H200 baseline (benchmarks/baselines/h200: every path, int4 + int8, M = 1-12288, 5 interleaved
# rounds, measured on 73d7dd4). The table's values were read from earlier sweeps (benchmarks/RESULTS.md
# names them) and hold on this one: 184/184 int4 and 183/184 int8 points within 3% of the fastest path,
# 183/184 for both with prefill left out.
SWEEP_DIR = ROOT / "benchmarks" / "baselines" / "h200"
SWEEP = SWEEP_DIR / "dispatch_int4.json"
MS = [1, 16, 24, 32, 40, 48, 56, 64, 72, 80, 96, 128, 192, 256, 384, 512, 768, 1024, 2048, 4096, 6144, 8192,
      12288]

needs_cxx = pytest.mark.skipif(
    not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")),
    reason="needs a host C++ compiler",
)


def test_the_baseline_is_committed():
    """The sweep these tests judge the table on is part of the tree (a moved baseline must fail here,
    not skip every verdict)."""
    assert SWEEP.exists() and (SWEEP_DIR / "dispatch_int8.json").exists(), SWEEP_DIR


@needs_cxx
@pytest.mark.parametrize("bits, floor", [(4, 184), (8, 183)])
def test_verdict_of_the_committed_table(capsys, bits, floor):
    table_verdict = repo_scripts.load("benchmarks/table_verdict.py")
    assert table_verdict.main([str(SWEEP_DIR / f"dispatch_int{bits}.json")]) == 0
    out = capsys.readouterr().out
    m = re.search(r"within 3% of the fastest path: (\d+)/(\d+) points", out)
    assert m, out
    within, total = int(m.group(1)), int(m.group(2))
    assert total == 8 * len(MS)  # eight Llama-3 shapes x the M of the sweep
    # The table agrees with this sweep: most points must match the fastest path. A table
    # edit that drops below this is a regression to explain (or a reason for a new sweep).
    assert within >= floor, out
    # M = 1 is decode on every shape, M = 1024 prefill; M = 8192 prefill but for int8 on the three 8B-class
    # layers (K * N <= 4096 * 14336), where the dense tier starts; M = 12288 dense on every int8 layer (the
    # others start there) and prefill on int4 (dense from 16384).
    rows = [l for l in out.splitlines() if l.startswith("llama-3-")]
    assert len(rows) == 8
    small = {"llama-3-8b qkv", "llama-3-8b o", "llama-3-8b down"}
    for row in rows:
        cells = row[26:].split()
        assert len(cells) == len(MS), row
        assert cells[0].startswith("de") and cells[MS.index(1024)].startswith("pr"), row
        dense_at_8192 = bits == 8 and row[:26].rsplit(" int", 1)[0] in small
        assert cells[MS.index(8192)].startswith("de" if dense_at_8192 else "pr"), row
        assert cells[MS.index(12288)].startswith("de" if bits == 8 else "pr"), row


@needs_cxx
@pytest.mark.parametrize("bits, floor", [(4, 183), (8, 183)])
def test_verdict_without_prefill(capsys, bits, floor):
    """The dense-vs-decode thresholds (problems prefill cannot run) judged on the same sweep with the
    prefill times left out: 183/184 for both (the miss: 70B gate_up M = 192, decode 1.05x dense on int4,
    1.06x on int8)."""
    table_verdict = repo_scripts.load("benchmarks/table_verdict.py")
    assert table_verdict.main(["--no-prefill", str(SWEEP_DIR / f"dispatch_int{bits}.json")]) == 0
    out = capsys.readouterr().out
    assert "prefill unavailable" in out
    m = re.search(r"within 3% of the fastest path: (\d+)/(\d+) points", out)
    assert m and int(m.group(2)) == 8 * len(MS), out
    assert int(m.group(1)) >= floor, out
    rows = [l for l in out.splitlines() if l.startswith("llama-3-")]
    assert rows and not any(" pr" in row for row in rows), "prefill chosen although unavailable"
