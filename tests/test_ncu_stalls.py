"""benchmarks/ncu_stalls.py on a small synthetic ncu source export (CPU only)."""

from __future__ import annotations

import csv
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
          "stall_long_sb", "stall_wait", "stall_long_sb (Not Issued)"]


def test_summary_names_the_hot_wait(tmp_path):
    path = tmp_path / "k_sass.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Kernel Name", "void k()"])
        w.writerow(HEADER)
        w.writerow(["0x0", "LDS R1, [R2]", "10", "100", "0", "10", "0"])
        w.writerow(["0x10", "SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR4+0x100], R0", "5", "100", "0", "5", "0"])
        w.writerow(["0x20", "@!P1 BRA 0x900", "85", "100", "80", "5", "0"])
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ncu_stalls.py"), str(path), "--top", "2"],
                         capture_output=True, text=True, check=True).stdout
    assert "100 stall samples over 3 instructions" in out
    assert re.search(r"long_sb +80.0%", out), out
    # The TRYWAIT and its spin branch are one wait holding 90% of the samples.
    wait = [l for l in out.splitlines() if "TRYWAIT" in l and "executed" in l]
    assert len(wait) == 1 and " 90.0%" in wait[0], out


def test_bank_conflicts_are_listed_per_instruction(tmp_path):
    path = tmp_path / "k_sass.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Kernel Name", "void k()"])
        w.writerow(["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed", "stall_wait",
                    "L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal", "L1 Wavefronts Shared Excessive"])
        w.writerow(["0x0", "LDS.128 R4, [R2]", "10", "100", "10", "400", "400", "0"])
        w.writerow(["0x10", "STS [R3], R1", "5", "100", "5", "200", "100", "100"])
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ncu_stalls.py"), str(path)],
                         capture_output=True, text=True, check=True).stdout
    assert "beyond the ideal (bank conflicts): 100 in 1 instructions" in out
    listed = [l for l in out.splitlines() if "excess" in l]
    assert len(listed) == 1 and "STS [R3], R1" in listed[0], out
