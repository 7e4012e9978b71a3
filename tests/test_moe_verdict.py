"""benchmarks/moe_verdict.py on a synthetic swordfish-bench-moe result: the numbers it reads, the crossover it
finds and the targets it judges (each built so that one point passes and one fails)."""

from __future__ import annotations

import repo_scripts

from swordfish_backend import bench_moe, presets

FINE = presets.MoEPreset("fine", "a fine-grained layer", E=64, top_k=8, H=256, I=128, renormalize=True)
DEVICE = {"index": 0, "name": "Fake H100", "capability": "9.0", "sm_count": 132, "l2_bytes": 1 << 25,
          "memory_bytes": 1 << 36}
CEIL = {"hbm_read_gbps": 3000.0, "hbm_read_bytes": 1 << 31, "mma_tflops": 700.0, "mma_shape": [8192] * 3}
IMPLS = ["auto", "fused", "dense", "torch", "marlin_moe", "roofline"]

# T: (fused, dense, auto path, torch, marlin, roofline) in us. avg = T * 8 / 64 = T / 8.
TIMES = {
    1: (10.0, 40.0, "fused", 30.0, 25.0, 4.0),       # 2.5x Marlin: every target met
    256: (50.0, 55.0, "fused", 60.0, 55.0, 10.0),    # 1.1x Marlin, 20% roofline: the 1.2x-or-90% bar fails
    1024: (200.0, 150.0, "dense", 140.0, 400.0, 120.0),  # dense faster from avg 128; within 10% of torch
    4096: (800.0, 560.0, "fused", 500.0, 1500.0, 450.0),  # auto chose fused: 1.43x the fastest; 1.6x torch
}


def document():
    rows = []
    for T, (fused, dense, path, torch_us, marlin, roof) in TIMES.items():
        auto = fused if path == "fused" else dense
        for impl, us, ran in (("auto", auto, path), ("fused", fused, "fused"), ("dense", dense, "dense"),
                              ("torch", torch_us, None), ("marlin_moe", marlin, None), ("roofline", roof, None)):
            extra = {"hbm_floor_us": roof, "compute_floor_us": 0.0} if impl == "roofline" else {}
            rows.append(bench_moe.make_row(FINE, T, impl, us=us, path=ran, **extra))
    config = {"models": ["fine"], "tokens": sorted(TIMES), "bits": 4, "group": 128, "dtype": "bf16",
              "impls": IMPLS, "zero_points": False, "act_order": False, "deterministic": False,
              "torch_moe": "grouped_mm"}
    return bench_moe.make_result(rows, device=DEVICE, config=config, ceilings=CEIL, commit="feedbeef",
                                 torch_version="t", cuda_version="c")


def test_crossover_is_the_start_of_the_last_dense_run():
    v = repo_scripts.load("benchmarks/moe_verdict.py")
    assert v.crossover([(0.1, 1, 2), (16, 5, 4), (32, 5, 6), (128, 9, 8), (512, 9, 7)]) == 128
    assert v.crossover([(1, 1, 2), (2, 1, 3)]) is None
    assert v.crossover([(1, 3, 2), (2, 3, 2)]) == 1


def test_table_value_reads_the_committed_headers():
    v = repo_scripts.load("benchmarks/moe_verdict.py")
    assert v.table_value(v.ROOT / "kernels" / "dispatch" / "moe_sm90.hpp") == 128
    assert v.table_value(v.ROOT / "kernels" / "dispatch" / "moe_sm90.hpp", "block32_min_avg_tokens") == 16
    assert v.table_value(v.ROOT / "kernels" / "dispatch" / "moe_sm90.hpp", "grouped_min_avg_tokens") == 32


def test_verdict_on_a_synthetic_run(tmp_path, capsys):
    v = repo_scripts.load("benchmarks/moe_verdict.py")
    path = tmp_path / "moe.json"
    bench_moe.write_json(document(), path)
    assert v.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "fine: E 64, top-8, H 256, I 128" in out
    assert "dense at least as fast as fused from avg 128.00 tokens per expert" in out
    assert "table dense_min_avg_tokens = 128, grouped_min_avg_tokens = 32" in out
    assert "grouped" not in out.split("table ")[0]  # no grouped rows: no grouped column, no grouped crossover
    assert "auto within 3% of the fastest path: 3/4 points" in out
    # T=1: bar, never slower, 2x at batch 1 (3 ok); T=256: the bar fails, never slower ok; T=1024: bar, never
    # slower, within 10% of torch (3 ok); T=4096: bar and never slower ok, within 10% of torch fails
    assert "issue #39 targets met: 9/11 checks" in out
    assert " 1024  128.00      150.0    200.0    150.0 dense   1.00    140.0    400.0    2.67    80" in out
    assert "short: fine T=256: 1.2x Marlin MoE or 90% roofline (auto 50.0 us, Marlin MoE 55.0" in out
    assert "short: fine T=4096: within 10% of the bf16 grouped GEMM (auto 800.0 us" in out


def test_grouped_crossover(tmp_path, capsys):
    # grouped slower than fused at avg 0.125 and 32, faster from avg 128: its own crossover line
    v = repo_scripts.load("benchmarks/moe_verdict.py")
    doc = document()
    doc["config"]["impls"] = IMPLS + ["grouped"]
    for T, us in ((1, 90.0), (256, 70.0), (1024, 120.0), (4096, 420.0)):
        doc["rows"].append(bench_moe.make_row(FINE, T, "grouped", us=us, path="grouped"))
    path = tmp_path / "moe.json"
    bench_moe.write_json(doc, path)
    assert v.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "dense at least as fast as fused from avg 128.00 tokens per expert" in out
    assert "grouped at least as fast as fused from avg 128.00 tokens per expert" in out


def test_bad_input_names_the_file(tmp_path, capsys):
    v = repo_scripts.load("benchmarks/moe_verdict.py")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "swordfish-bench"}')
    assert v.main([str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err
