"""benchmarks/bench_dispatch.py on the CPU: options, the interleaved-round statistics, the
auto-vs-best verdict, and a --dry-run through the tables, JSON (validated) and PNG."""

from __future__ import annotations

import json

import pytest
import repo_scripts

from swordfish_backend import bench


@pytest.fixture(scope="module")
def bd():
    return repo_scripts.load("benchmarks/bench_dispatch.py")


def test_quick_covers_the_issue_sweep(bd):
    a = bd.parse_args(["--quick"])
    assert a.bits == [4] and a.dtype == "bf16" and a.rounds == bd.QUICK_ROUNDS
    assert a.shape_names == list(bd.SHAPES) and len(a.shape_names) == 8
    assert a.m_values == [1, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048, 4096, 8192]
    assert a.impls == ["auto", "decode", "prefill", "dense", "cublas"]


def test_bits_and_formats(bd):
    assert bd.parse_args([]).bits == [4, 8]
    assert bd.parse_args(["--bits", "8"]).bits == [8]
    assert bd.parse_args(["--bits", "8", "4"]).bits == [4, 8]
    assert bd.parse_args(["--formats", "int8"]).bits == [8]
    with pytest.raises(SystemExit):
        bd.parse_args(["--bits", "8", "--formats", "int4"])
    with pytest.raises(SystemExit):
        bd.parse_args(["--paths", "decode,bogus"])
    assert bd.parse_args(["--paths", "cublas,dense"]).impls == ["dense", "cublas"]
    assert bd.parse_args(["--act-order"]).suffix == "_act"


def test_round_stats_spread():
    s = bench.round_stats([10.0, 11.0, 10.5, 12.0, 10.2])
    assert s["us"] == 10.5 and s["us_min"] == 10.0 and s["us_max"] == 12.0
    assert s["spread"] == pytest.approx(0.2)


def test_graph_calls_whole_passes_and_enough_work(bd):
    n = bd.graph_calls(eager_us=5.0, n_list=10, graph_ms=2.0)
    assert n % 10 == 0 and n * 5.0 >= 2000 or n == bd.MAX_CALLS // 10 * 10
    assert bd.graph_calls(eager_us=50_000.0, n_list=2, graph_ms=2.0) == 2  # one pass at least
    assert bd.graph_calls(eager_us=1.0, n_list=3, graph_ms=2.0) <= bd.MAX_CALLS


def _row(impl, M, rounds, path=None, status="ok"):
    from swordfish_backend.presets import Layer

    if status != "ok":
        return bench.make_row("m", Layer("l", 64, 64), M, impl, status=status, note=f"{impl}: why")
    s = bench.round_stats(rounds)
    return bench.make_row("m", Layer("l", 64, 64), M, impl, us=s.pop("us"), path=path or impl, rounds_us=rounds, **s)


def test_auto_verdict_uses_medians_and_reports_noise(bd):
    rows = [
        _row("decode", 64, [10.0, 10.1, 9.9]),
        _row("dense", 64, [12.0, 12.0, 12.0]),
        _row("prefill", 64, [], status="unavailable"),
        _row("auto", 64, [10.2, 10.2, 10.0], path="decode"),   # 1.02 x best: ok
        _row("decode", 128, [20.0, 20.0, 20.0]),
        _row("dense", 128, [15.0, 15.5, 14.5]),
        _row("auto", 128, [20.1, 19.9, 20.0], path="decode"),  # 1.33 x dense: a miss
    ]
    v = {x["M"]: x for x in bd.auto_verdicts(rows, "m", "l")}
    assert v[64]["ok"] and v[64]["best_path"] == "decode" and v[64]["ratio"] == pytest.approx(10.2 / 10.0)
    assert v[64]["paired"] == pytest.approx(10.0 / 9.9)  # median of the same-round ratios 1.02, 1.0099, 1.0101
    assert v[64]["noise"] == pytest.approx(10.1 / 9.9 - 1)
    assert not v[128]["ok"] and v[128]["best_path"] == "dense"
    misses = bd.auto_check(rows, "m", "l")
    assert [m["M"] for m in misses] == [128]


def test_prune_only_decode(bd):
    assert bd.should_prune(2.0, "decode", 50.0, 20.0)
    assert not bd.should_prune(2.0, "decode", 30.0, 20.0)
    assert not bd.should_prune(2.0, "dense", 500.0, 20.0)  # dense gets better with M: never pruned
    assert not bd.should_prune(0.0, "decode", 500.0, 20.0)


def test_act_order_suggestion_takes_shapes_with_n_le_2k(bd):
    cs = [dict(shape="gate_up", K=4096, N=28672, bits=4, k_heavy=False, m=48, interpolated=40),
          dict(shape="o", K=4096, N=4096, bits=4, k_heavy=False, m=96, interpolated=80),
          dict(shape="down", K=14336, N=4096, bits=4, k_heavy=True, m=64, interpolated=60)]
    s = bd.suggest(cs, 4, True)
    assert list(s) == ["act_order"] and s["act_order"]["value"] == 64  # gate_up (N > 2K) does not count


@pytest.mark.parametrize("extra", [["--quick"], ["--bits", "8", "--act-order", "--shapes", "8b_o,70b_down",
                                                 "--m", "1,64,128,4096", "--rounds", "3", "--prune-decode", "2"]],
                         ids=["quick", "int8_act_order"])
def test_dry_run_writes_validated_results(bd, tmp_path, extra, capsys):
    assert bd.main(["--dry-run", "--out", str(tmp_path)] + extra) == 0
    args = bd.parse_args(extra)
    for bits in args.bits:
        doc = bench.load_json(tmp_path / f"dispatch_int{bits}{args.suffix}.json")  # validates the schema
        assert doc["config"]["act_order"] == args.act_order and doc["timing"]["rounds"] == args.rounds
        ok = [r for r in doc["rows"] if r["status"] == "ok" and r["impl"] != "roofline"]
        assert ok and all(len(r["rounds_us"]) == args.rounds and r["us_min"] <= r["us"] <= r["us_max"] for r in ok)
        assert {r["impl"] for r in ok} >= {"auto", "decode", "dense", "cublas"}
        unavailable = [r for r in doc["rows"] if r["status"] == "unavailable"]
        assert unavailable and all(r["us"] is None and r["impl"] == "prefill" and r["note"] for r in unavailable)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            continue
        assert (tmp_path / f"dispatch_int{bits}{args.suffix}.png").stat().st_size > 10_000
    summary = json.loads((tmp_path / f"dispatch_summary{args.suffix}.json").read_text())
    assert summary["copy_probe"]["copy_gbps"] == summary["copy_gbps"]
    assert summary["auto_verdicts"] and all("noise" in v and "paired" in v for v in summary["auto_verdicts"])
    assert {"crossovers", "suggested_sm90", "auto_misses", "auto_vs_cublas", "dequant"} <= set(summary)
    text = (tmp_path / f"dispatch_summary{args.suffix}.txt").read_text()
    assert "auto within 3% of the fastest path at" in text and "spread" in text
    if args.prune_decode:
        assert summary["pruned"] and all(p["impl"] == "decode" for p in summary["pruned"])


def test_without_a_gpu_it_says_so(bd, tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert bd.main(["--quick", "--out", str(tmp_path)]) == 2
    assert "needs a CUDA device" in capsys.readouterr().err
