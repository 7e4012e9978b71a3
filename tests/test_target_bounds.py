"""benchmarks/target_bounds.py: each cuBLAS-ratio target of issues #3 / #7 beside its roofline ceiling."""

from __future__ import annotations

import json
import pathlib

import pytest
import repo_scripts

ROOT = pathlib.Path(__file__).resolve().parents[1]
SWEEP_DIR = ROOT / "benchmarks" / "baselines" / "h200"


def sweep(tmp_path, bits, points):
    """A bench_dispatch.py-shaped JSON: points = {(model, layer, M): {impl: us}}."""
    rows = [dict(model=m, layer=l, M=M, impl=impl, us=us, status="ok")
            for (m, l, M), times in points.items() for impl, us in times.items()]
    path = tmp_path / f"dispatch_int{bits}.json"
    path.write_text(json.dumps({"config": {"bits": bits}, "rows": rows}))
    return path


def verdicts(out):
    return {tuple(l.split()[2:5]): l.split("  ")[-1].strip() for l in out.splitlines() if l.startswith("#")}


def test_met_short_and_beyond(tmp_path, capsys):
    tb = repo_scripts.load("benchmarks/target_bounds.py")
    path = sweep(tmp_path, 4, {
        # #3 M = 64 (2.2x on 70B): 2.5x measured -> met
        ("llama-3-70b", "o", 64): {"auto": 10.0, "prefill": 10.0, "cublas": 25.0, "roofline": 5.0},
        # #7 M = 256 (1.5x on 70B): the roofline allows 1.2x -> beyond, whatever was measured
        ("llama-3-70b", "o", 256): {"auto": 48.0, "prefill": 48.0, "cublas": 48.0, "roofline": 40.0},
        # #7 M = 512 (0.90): 0.80 measured, ceiling 1.25 -> short, needing 72% of the roofline
        ("llama-3-8b", "qkv", 512): {"auto": 50.0, "prefill": 50.0, "cublas": 40.0, "roofline": 32.0},
        # no cuBLAS time: not judged
        ("llama-3-8b", "o", 512): {"auto": 50.0, "roofline": 32.0},
    })
    assert tb.main([str(path)]) == 0
    out = capsys.readouterr().out
    v = verdicts(out)
    assert v[("70b", "o", "64")] == "met"
    assert v[("70b", "o", "256")] == "beyond the roofline"
    assert v[("8b", "qkv", "512")] == "short (needs 72% of roofline)"
    assert ("8b", "o", "512") not in v
    assert "points: 1 beyond the roofline, 1 met, 1 short" in out


def test_rejects_a_file_without_bits(tmp_path):
    tb = repo_scripts.load("benchmarks/target_bounds.py")
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"config": {}, "rows": []}))
    with pytest.raises(SystemExit, match="config.bits is None"):
        tb.main([str(path)])


def test_the_h200_baseline(capsys):
    """The counts benchmarks/RESULTS.md states for the H200 baseline (benchmarks/baselines/h200/
    target_bounds.txt): 88 target points, 55 met, 29 short, 4 beyond the roofline (#7's 1.5x at
    M = 256 on the four 70B layers)."""
    tb = repo_scripts.load("benchmarks/target_bounds.py")
    assert tb.main([str(SWEEP_DIR / "dispatch_int4.json"), str(SWEEP_DIR / "dispatch_int8.json")]) == 0
    out = capsys.readouterr().out
    assert "points: 4 beyond the roofline, 55 met, 29 short" in out
    beyond = [k for k, v in verdicts(out).items() if v == "beyond the roofline"]
    assert sorted(beyond) == [("70b", l, "256") for l in ("down", "gate_up", "o", "qkv")]
