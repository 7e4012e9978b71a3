"""benchmarks/table_verdict.py on the committed H200 sweep: the table the tree has now, judged on CPU."""

from __future__ import annotations

import pathlib
import re
import shutil

import pytest
import repo_scripts

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The newest GPU sweep: the table was read from 2026-12-03 and first run on the GPU in 2026-12-03-b
# (151/152 there; 150/152 on 2026-12-03).
SWEEP = ROOT / "benchmarks" / "results" / "h200" / "2026-12-03-b" / "dispatch" / "dispatch_int4.json"

pytestmark = pytest.mark.skipif(
    not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")) or not SWEEP.exists(),
    reason="needs a host C++ compiler and the committed sweep",
)


def test_verdict_of_the_committed_table(capsys):
    table_verdict = repo_scripts.load("benchmarks/table_verdict.py")
    assert table_verdict.main([str(SWEEP)]) == 0
    out = capsys.readouterr().out
    m = re.search(r"within 3% of the fastest path: (\d+)/(\d+) points", out)
    assert m, out
    within, total = int(m.group(1)), int(m.group(2))
    assert total == 8 * 19  # eight Llama-3 shapes x the 19 M of the sweep
    # The table agrees with this sweep: most points must match the fastest path. A table
    # edit that drops below this is a regression to explain (or a reason for a new sweep).
    assert within >= 150, out
    # M = 1 is decode on every shape, M = 1024 and M = 8192 prefill (int4 dense starts at 16384).
    rows = [l for l in out.splitlines() if l.startswith("llama-3-")]
    assert len(rows) == 8
    for row in rows:
        cells = row[26:].split()
        assert cells[0].startswith("de") and cells[-1].startswith("pr") and cells[15].startswith("pr"), row
