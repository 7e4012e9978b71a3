"""benchmarks/table_verdict.py on the committed H200 sweep: the table the tree has now, judged on CPU."""

from __future__ import annotations

import pathlib
import re
import shutil

import pytest
import repo_scripts

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The newest GPU sweep (2026-12-04-c call 4, the 192-token tile on 5b1b963; 3 rounds, M <= 8192); the
# decode / prefill crossovers and the dense / decode set come from 2026-12-03-d, int8's dense-vs-prefill
# thresholds (8192 on the 8B-class layers, 12288 on the rest) from 2026-12-04-d call 2 and this sweep,
# and hold on it: 167/168 int4 and 168/168 int8 points within 3% of the fastest path, and 168/168 and
# 167/168 with prefill left out.
SWEEP_DIR = ROOT / "benchmarks" / "results" / "h200" / "2026-12-04-c" / "call4_logs" / "dispatch"
SWEEP = SWEEP_DIR / "dispatch_int4.json"
MS = [1, 16, 24, 32, 40, 48, 56, 64, 72, 80, 96, 128, 192, 256, 384, 512, 768, 1024, 2048, 4096, 8192]

pytestmark = pytest.mark.skipif(
    not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")) or not SWEEP.exists(),
    reason="needs a host C++ compiler and the committed sweep",
)


@pytest.mark.parametrize("bits, floor", [(4, 167), (8, 168)])
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
    # layers (K * N <= 4096 * 14336), where the dense tier starts (12288 on the other int8 layers, 16384 int4).
    rows = [l for l in out.splitlines() if l.startswith("llama-3-")]
    assert len(rows) == 8
    small = {"llama-3-8b qkv", "llama-3-8b o", "llama-3-8b down"}
    for row in rows:
        cells = row[26:].split()
        assert len(cells) == len(MS), row
        assert cells[0].startswith("de") and cells[MS.index(1024)].startswith("pr"), row
        dense_at_8192 = bits == 8 and row[:26].rsplit(" int", 1)[0] in small
        assert cells[-1].startswith("de" if dense_at_8192 else "pr"), row


@pytest.mark.parametrize("bits, floor", [(4, 168), (8, 167)])
def test_verdict_without_prefill(capsys, bits, floor):
    """The dense-vs-decode thresholds (problems prefill cannot run) judged on the same sweep with the
    prefill times left out: 168/168 int4, 167/168 int8 (int8 70B gate_up M = 192, decode 1.04x
    dense)."""
    table_verdict = repo_scripts.load("benchmarks/table_verdict.py")
    assert table_verdict.main(["--no-prefill", str(SWEEP_DIR / f"dispatch_int{bits}.json")]) == 0
    out = capsys.readouterr().out
    assert "prefill unavailable" in out
    m = re.search(r"within 3% of the fastest path: (\d+)/(\d+) points", out)
    assert m and int(m.group(2)) == 8 * len(MS), out
    assert int(m.group(1)) >= floor, out
    rows = [l for l in out.splitlines() if l.startswith("llama-3-")]
    assert rows and not any(" pr" in row for row in rows), "prefill chosen although unavailable"
