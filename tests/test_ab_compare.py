"""benchmarks/ab_compare.py on the CPU: minimum over rounds, ratios to the baseline, both result formats."""

from __future__ import annotations

import json
import math

import pytest
import repo_scripts


@pytest.fixture(scope="module")
def abc():
    return repo_scripts.load("benchmarks/ab_compare.py")


def _bench(rows):
    return {"config": {"bits": 4}, "rows": [
        {"model": "llama-3-70b", "layer": layer, "M": m, "impl": "prefill", "status": "ok", "us": us}
        for layer, m, us in rows]}


def _decode(recs):
    return {"records": [{"shape": shape, "bits": 8, "M": m, "path": "decode", "us": us} for shape, m, us in recs]}


def test_min_over_rounds_and_ratio_to_base(abc, tmp_path):
    (tmp_path / "main_1.json").write_text(json.dumps(_bench([("o", 64, 10.0), ("qkv", 128, 40.0)])))
    (tmp_path / "main_2.json").write_text(json.dumps(_bench([("o", 64, 12.0), ("qkv", 128, 44.0)])))
    (tmp_path / "fast_1.json").write_text(json.dumps(_bench([("o", 64, 8.0), ("qkv", 128, 20.0)])))
    (tmp_path / "fast_2.json").write_text(json.dumps(_bench([("o", 64, 9.0)])))
    (tmp_path / "notes.json").write_text("{}")  # not VARIANT_ROUND.json: ignored
    lines, gm = abc.table(abc.load(tmp_path), "main")
    row = next(line for line in lines if line.startswith("70b o"))
    assert "10.0" in row and "8.0" in row and "0.800" in row
    assert "20.0%" in row  # the spread of main's two rounds (12 - 10) / 10
    assert gm["fast"] == pytest.approx(math.sqrt(0.8 * 0.5))


def test_reads_bench_decode_records(abc, tmp_path):
    (tmp_path / "a_1.json").write_text(json.dumps(_decode([("70b_gate_up", 1, 100.0)])))
    (tmp_path / "b_1.json").write_text(json.dumps(_decode([("70b_gate_up", 1, 110.0)])))
    lines, gm = abc.table(abc.load(tmp_path), "a")
    assert lines[1].startswith("70b gate_up") and "1.100" in lines[1]
    assert gm == {"b": pytest.approx(1.1)}


def test_reads_moe_bench_rows(abc, tmp_path):
    def moe(us):
        return {"config": {"bits": 4}, "rows": [{"model": "qwen3-30b-a3b", "T": 16, "impl": "fused", "status": "ok",
                                                 "us": us}]}
    (tmp_path / "a_1.json").write_text(json.dumps(moe(80.0)))
    (tmp_path / "b_1.json").write_text(json.dumps(moe(60.0)))
    lines, gm = abc.table(abc.load(tmp_path), "a")
    assert lines[1].startswith("qwen3-30b-a3b moe") and "0.750" in lines[1]
    assert gm == {"b": pytest.approx(0.75)}


def test_unknown_baseline_and_empty_directory_say_what_is_wrong(abc, tmp_path):
    with pytest.raises(SystemExit, match="no VARIANT_ROUND.json files"):
        abc.load(tmp_path)
    (tmp_path / "x_1.json").write_text(json.dumps(_decode([("8b_o", 1, 5.0)])))
    with pytest.raises(SystemExit, match="no baseline 'main'; variants are \\['x'\\]"):
        abc.table(abc.load(tmp_path), "main")
