"""The `swordfish` command: parsing, presets, no-GPU behaviour, the bench JSON schema, `check` on CPU.

No test here times anything. The GPU tests at the end are skipped without a
CUDA device and the compiled extension.
"""

import io
import json
import os
import pathlib
import statistics
import subprocess
import sys

import pytest
import torch

from swordfish_backend import bench, check, cli, envs, presets

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_cli(*argv, capsys=None):
    code = cli.main(list(argv))
    if capsys is None:
        return code
    out, err = capsys.readouterr()
    return code, out, err


def no_gpu(monkeypatch):
    monkeypatch.setattr(cli, "gpu_status", lambda device_index=None: (False, "no CUDA GPU: test says so"))


def subprocess_cli(*argv, env_extra=None):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "swordfish_backend", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


# ------------------------------------------------------------------ parsing


def test_bench_defaults():
    args = cli.build_parser().parse_args(["bench"])
    assert (args.model, args.bits, args.group, args.dtype) == ("llama-3-8b", 4, 128, "bf16")
    assert args.m is None and args.shapes is None and args.json == "swordfish-bench.json"
    assert args.func is cli.cmd_bench


def test_check_and_info_defaults():
    args = cli.build_parser().parse_args(["check"])
    assert (args.dtype, args.deterministic, args.require_gpu, args.cpu) == ("both", "both", False, False)
    args = cli.build_parser().parse_args(["info", "--json"])
    assert args.json and args.device is None


@pytest.mark.parametrize("argv", [
    [],                                  # no subcommand
    ["frobnicate"],                      # unknown subcommand
    ["bench", "--bits", "3"],
    ["bench", "--group", "96"],
    ["bench", "--group", "abc"],
    ["bench", "--dtype", "fp32"],
    ["bench", "--device", "-1"],
    ["check", "--dtype", "int8"],
    ["check", "--deterministic", "maybe"],
])
def test_usage_errors_exit_2(argv, capsys):
    code, _, err = run_cli(*argv, capsys=capsys)
    assert code == cli.EXIT_USAGE == 2
    assert "error" in err


def test_help_and_version_exit_0(capsys):
    code, out, _ = run_cli("--help", capsys=capsys)
    assert code == 0 and "bench" in out and "exit codes" in out
    code, out, _ = run_cli("--version", capsys=capsys)
    assert code == 0 and out.startswith("swordfish ")
    code, out, _ = run_cli("bench", "--help", capsys=capsys)
    assert code == 0 and "--shapes" in out and "3  needs a CUDA GPU" in out


# ------------------------------------------------------------------ presets


def test_preset_shapes_from_published_configs():
    shapes = {name: {l.name: (l.K, l.N) for l in p.layers} for name, p in presets.PRESETS.items()}
    assert shapes["llama-3-8b"] == {"qkv": (4096, 6144), "o": (4096, 4096), "gate_up": (4096, 28672),
                                    "down": (14336, 4096)}
    assert shapes["llama-3-70b"] == {"qkv": (8192, 10240), "o": (8192, 8192), "gate_up": (8192, 57344),
                                     "down": (28672, 8192)}
    assert shapes["qwen-2.5-7b"] == {"qkv": (3584, 4608), "o": (3584, 3584), "gate_up": (3584, 37888),
                                     "down": (18944, 3584)}
    assert shapes["qwen-2.5-72b"] == {"qkv": (8192, 10240), "o": (8192, 8192), "gate_up": (8192, 59136),
                                      "down": (29568, 8192)}
    assert shapes["mixtral-8x7b"] == {"expert_gate_up": (4096, 28672), "expert_down": (14336, 4096)}


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
@pytest.mark.parametrize("bits,group", [(4, 128), (4, 32), (8, 128), (4, -1)])
def test_every_preset_fits_the_format(name, bits, group):
    for layer in presets.PRESETS[name].layers:
        presets.check_layer(layer, bits, group)  # raises if not
        assert layer.K % 128 == 0 and layer.N % 128 == 0  # prefill's requirement too


def test_preset_lists():
    layers = presets.preset_layers("llama-3-8b, mixtral-8x7b")
    assert [m for m, _ in layers] == ["llama-3-8b"] * 4 + ["mixtral-8x7b"] * 2
    with pytest.raises(ValueError, match="unknown preset 'llama-9'"):
        presets.preset_layers("llama-9")
    with pytest.raises(ValueError, match="no preset"):
        presets.preset_layers(" , ")


def test_parse_shapes():
    layers = presets.parse_shapes(" 4096,6144 ; 14336, 4096;")
    assert [(l.name, l.K, l.N) for l in layers] == [("4096x6144", 4096, 6144), ("14336x4096", 14336, 4096)]


@pytest.mark.parametrize("text,match", [
    ("4096", "must be K,N"),
    ("4096,6144,1", "must be K,N"),
    ("4096,x", "integer"),
    ("0,4096", "positive"),
    ("-64,4096", "positive"),
    (";", "names no shape"),
])
def test_parse_shapes_errors(text, match):
    with pytest.raises(ValueError, match=match):
        presets.parse_shapes(text)


def test_parse_m():
    assert presets.parse_m("256, 1,16,16") == [1, 16, 256]
    for text, match in [("0", "must lie in"), ("1,x", "not an integer"), ("", "names no M"),
                        (str(presets.MAX_M + 1), "must lie in")]:
        with pytest.raises(ValueError, match=match):
            presets.parse_m(text)


def test_check_layer_names_the_problem():
    with pytest.raises(ValueError, match="N must be a positive multiple of 64"):
        presets.check_layer(presets.Layer("x", 4096, 100), 4, 128)
    with pytest.raises(ValueError, match="group 128 does not divide K = 4032"):
        presets.check_layer(presets.Layer("x", 4032, 128), 4, 128)


# ------------------------------------------------------------------ bench without a GPU


@pytest.mark.parametrize("argv,match", [
    (["--model", "nope"], "unknown preset 'nope'"),
    (["--shapes", "4096,100"], "N = 100"),
    (["--shapes", "4096"], "must be K,N"),
    (["--m", "0"], "--m value 0"),
    (["--paths", "auto,fast"], "--paths"),
    (["--zero-points", "--bits", "8"], "int4 only"),
    (["--act-order", "--group", "-1"], "channelwise"),
    (["--from-json", "/nonexistent/result.json"], "--from-json"),
])
def test_bench_usage_errors_come_before_the_gpu_probe(argv, match, capsys, monkeypatch):
    no_gpu(monkeypatch)
    code, _, err = run_cli("bench", *argv, capsys=capsys)
    assert code == cli.EXIT_USAGE
    assert match in err


def test_bench_without_gpu_exits_3_and_says_why(capsys, monkeypatch):
    no_gpu(monkeypatch)
    code, out, err = run_cli("bench", capsys=capsys)
    assert code == cli.EXIT_UNAVAILABLE == 3
    assert "no CUDA GPU" in err and "swordfish check" in err and out == ""


def test_bench_without_gpu_real_process():
    """No monkeypatching: a process that sees no CUDA device."""
    proc = subprocess_cli("bench", "--quiet")
    assert proc.returncode == 3, proc.stderr
    assert "no CUDA GPU" in proc.stderr


def test_bench_list_presets(capsys):
    code, out, _ = run_cli("bench", "--list-presets", capsys=capsys)
    assert code == 0
    assert "llama-3-70b" in out and "N=57344" in out and "expert_down" in out


# ------------------------------------------------------------------ the bench result document


def synthetic_doc(with_error=True):
    layer = presets.Layer("qkv", 4096, 6144)
    ceilings = {"hbm_read_gbps": 4000.0, "hbm_read_bytes": 2 << 30, "mma_tflops": 700.0, "mma_shape": [8192] * 3}
    wbytes = bench.quantized_bytes(4096, 6144, 4, 128, False, False)
    rows = []
    for M, auto_us in [(1, 5.0), (16, 6.0), (256, 20.0)]:
        rows.append(bench.make_row("llama-3-8b", layer, M, "auto", us=auto_us, path="decode", weight_bytes=wbytes,
                                   copies=10, calls=120, replays=7))
        rows.append(bench.make_row("llama-3-8b", layer, M, "decode", us=auto_us, path="decode", weight_bytes=wbytes,
                                   copies=10, calls=120, replays=7))
        rows.append(bench.make_row("llama-3-8b", layer, M, "dense", us=40.0, path="dense", weight_bytes=wbytes,
                                   copies=10, calls=120, replays=7))
        if with_error:
            rows.append(bench.make_row("llama-3-8b", layer, M, "prefill", status="unavailable",
                                       note="prefill: not built for sm_90", weight_bytes=wbytes))
        rows.append(bench.make_row("llama-3-8b", layer, M, "cublas", us=16.0, weight_bytes=4096 * 6144 * 2,
                                   copies=2, calls=24, replays=7))
        roof, hbm, compute = bench.roofline_us(M, 4096, 6144, wbytes, ceilings)
        rows.append(bench.make_row("llama-3-8b", layer, M, "roofline", us=roof, weight_bytes=wbytes,
                                   hbm_floor_us=hbm, compute_floor_us=compute))
    device = {"index": 0, "name": "Test GPU", "capability": "9.0", "sm_count": 132, "l2_bytes": 60 << 20,
              "memory_bytes": 141 << 30}
    config = {"models": ["llama-3-8b"], "bits": 4, "group": 128, "dtype": "bf16", "m": [1, 16, 256],
              "impls": list(bench.IMPLS), "zero_points": False, "act_order": False, "deterministic": False}
    return bench.make_result(rows, device=device, config=config, ceilings=ceilings, commit="abc123",
                             torch_version="2.11.0", cuda_version="13.0", created="2026-12-02T10:00:00Z")


def test_result_schema_round_trip(tmp_path):
    doc = synthetic_doc()
    assert doc["schema"] == "swordfish-bench" and doc["version"] == 1
    path = tmp_path / "out" / "r.json"
    bench.write_json(doc, path)
    again = bench.load_json(path)
    assert again == json.loads(json.dumps(doc))
    row_keys = set(bench._ROW)
    for row in again["rows"]:
        assert row_keys <= set(row)


def test_derived_metrics():
    doc = synthetic_doc()
    by = {(r["M"], r["impl"]): r for r in doc["rows"]}
    auto = by[(1, "auto")]
    assert auto["vs_cublas"] == pytest.approx(16.0 / 5.0)
    assert auto["tflops"] == pytest.approx(2 * 1 * 6144 * 4096 / 5.0 / 1e6)
    assert auto["weight_gbps"] == pytest.approx(auto["weight_bytes"] / 5.0 / 1e3)
    roof = by[(1, "roofline")]["us"]
    assert auto["pct_roofline"] == pytest.approx(100 * roof / 5.0)
    # int4 g128 4096x6144 at M=1: packed 12.58 MB + scales 0.39 MB (+ x and y) over 4 TB/s
    assert by[(1, "roofline")]["hbm_floor_us"] == pytest.approx((4096 * 6144 / 2 + 32 * 6144 * 2 + 2 * (4096 + 6144))
                                                                 / 4000.0 / 1e3)
    assert by[(1, "cublas")]["vs_cublas"] == pytest.approx(1.0)
    assert by[(1, "prefill")]["tflops"] is None and by[(1, "prefill")]["us"] is None


@pytest.mark.parametrize("mutate,match", [
    (lambda d: d.pop("rows"), "lacks 'rows'"),
    (lambda d: d.update(version=2), "version must be 1"),
    (lambda d: d.update(schema="other"), "schema"),
    (lambda d: d["device"].pop("sm_count"), "sm_count"),
    (lambda d: d["config"].update(bits=True), "bits must be int"),
    (lambda d: d["config"].update(zero_points=0), "zero_points must be bool"),
    (lambda d: d["rows"][0].update(impl="magic"), "impl must be one of"),
    (lambda d: d["rows"][0].update(status="meh"), "status must be one of"),
    (lambda d: d["rows"][0].update(us=None), "status ok but no time"),
    (lambda d: d["rows"][0].update(M="1"), "M must be int"),
    (lambda d: [r.pop("hbm_floor_us") for r in d["rows"] if r["impl"] == "roofline"], "hbm_floor_us"),
])
def test_schema_rejects(mutate, match):
    doc = synthetic_doc()
    mutate(doc)
    with pytest.raises(ValueError, match=match):
        bench.validate_result(doc)


def test_table_lists_every_implementation_and_why_one_is_missing():
    text = bench.format_table(synthetic_doc())
    assert "llama-3-8b qkv  (K=4096, N=6144)" in text
    assert "xcuBLAS" in text and "%roof" in text and "cublas" in text
    line_m1 = next(l for l in text.splitlines() if l.strip().startswith("1 "))
    assert "decode" in line_m1 and "3.20" in line_m1 and "n/a[1]" in line_m1
    assert "[1] prefill: not built for sm_90" in text
    assert "4000 GB/s" in text


def test_from_json_renders_without_gpu(tmp_path, capsys, monkeypatch):
    no_gpu(monkeypatch)
    path = tmp_path / "r.json"
    bench.write_json(synthetic_doc(), path)
    png = tmp_path / "r.png"
    code, out, err = run_cli("bench", "--from-json", str(path), "--png", str(png), capsys=capsys)
    assert code == 0
    assert "llama-3-8b qkv" in out
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib is not installed" in err and not png.exists()
    else:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_so(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *a, **k):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib here")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    why = bench.plot(synthetic_doc(), tmp_path / "p.png")
    assert "matplotlib is not installed" in why and not (tmp_path / "p.png").exists()


def test_rotation_copies_exceed_the_l2():
    l2 = 60 << 20
    assert bench._copies(8 << 20, l2, 100 << 30) == 15       # 8 MB weights: 15 copies > 2 x 60 MB
    assert bench._copies(500 << 20, l2, 100 << 30) == 2      # big weights: still two to rotate
    assert bench._copies(1 << 10, l2, 100 << 30) == bench.MAX_CALLS
    assert bench._copies(8 << 20, l2, 64 << 20) == 2          # little free memory: as many as fit, at least 2


def test_quantized_bytes():
    assert bench.quantized_bytes(4096, 4096, 4, 128, False, False) == 4096 * 4096 // 2 + 32 * 4096 * 2
    assert bench.quantized_bytes(4096, 4096, 8, -1, False, False) == 4096 * 4096 + 4096 * 2
    assert bench.quantized_bytes(4096, 4096, 4, 64, True, True) == 4096 * 4096 // 2 + 2 * 64 * 4096 * 2 + 4096 * 4


def test_progress_without_a_terminal():
    stream = io.StringIO()
    p = bench.Progress(3, stream=stream)
    for i in range(3):
        p.step(f"item {i}")
    p.close()
    lines = stream.getvalue().splitlines()
    assert lines and lines[-1].startswith("[") and "3/3" in lines[-1] and "item 2" in lines[-1]
    quiet = io.StringIO()
    p = bench.Progress(3, enabled=False, stream=quiet)
    p.step("x")
    assert quiet.getvalue() == ""


def test_bench_run_orchestration_with_fake_device(monkeypatch):
    """bench.run end to end on CPU with the device, the timer and the op faked: rows, paths, errors, schema."""
    from swordfish_backend import ops

    info = {"index": 0, "name": "Fake", "capability": "9.0", "sm_count": 132, "l2_bytes": 1 << 20,
            "memory_bytes": 1 << 34}
    monkeypatch.setattr(bench, "_setup", lambda index: (torch.device("cpu"), info))
    monkeypatch.setattr(bench, "_free_bytes", lambda device: 1 << 34)
    monkeypatch.setattr(bench, "measure_ceilings", lambda device, dtype: {
        "hbm_read_gbps": 4000.0, "hbm_read_bytes": 1 << 31, "mma_tflops": 700.0, "mma_shape": [8192] * 3})
    captured, rounds_asked = [], []

    def fake_capture(calls, stream, n_calls_for):
        for c in calls:  # the warm-up: an unavailable or failing path raises here
            c()
        n = n_calls_for(5.0)
        captured.append((len(calls), n))
        return object(), n

    def fake_rounds(graphs, rounds):  # ms per replay: round r of every graph, 10 us a call but round 0 slow
        rounds_asked.append(rounds)
        return {k: [(30.0 if r == 0 else 10.0 + r * 0.1) * n / 1e3 for r in range(rounds)]
                for k, n in zip(graphs, [n for _, n in captured[-len(graphs):]])}

    monkeypatch.setattr(bench, "capture_graph", fake_capture)
    monkeypatch.setattr(bench, "replay_rounds", fake_rounds)
    last = {"path": 0}

    def fake_gemm(x, packed, scales, zeros, perm, bias, bits, group, channelwise, path, det):
        if path == ops.PATH_PREFILL:
            raise ValueError("swordfish.gemm: path prefill cannot run this problem: prefill needs sm_100a")
        if path == ops.PATH_DENSE and x.shape[0] == 16:
            raise RuntimeError("swordfish.gemm: path dense: CUDA error: an illegal memory access")
        last["path"] = path or (ops.PATH_DECODE if x.shape[0] <= 16 else ops.PATH_DENSE)
        assert packed.dtype == torch.int32 and det == 0 and bias is None
        return x.new_zeros(x.shape[0], scales.shape[1])

    monkeypatch.setattr(ops, "gemm", fake_gemm)
    monkeypatch.setattr(ops, "last_path", lambda index: last["path"])
    cfg = bench.Config(layers=[("custom", presets.Layer("256x128", 256, 128))], m=[1, 16, 64], models=["custom"],
                       commit="feedbeef", rounds=5)
    progress = bench.Progress(bench.total_steps(cfg), stream=io.StringIO())
    doc = bench.run(cfg, progress)
    bench.validate_result(doc)
    assert doc["commit"] == "feedbeef" and doc["device"]["name"] == "Fake"
    by = {(r["M"], r["impl"]): r for r in doc["rows"]}
    assert len(doc["rows"]) == 3 * len(bench.IMPLS)
    assert by[(1, "auto")]["path"] == "decode" and by[(64, "auto")]["path"] == "dense"
    assert by[(1, "prefill")]["status"] == "unavailable" and "needs sm_100a" in by[(1, "prefill")]["note"]
    assert by[(16, "dense")]["status"] == "error" and "illegal memory access" in by[(16, "dense")]["note"]
    # the median of the rounds (10.1 .. 10.4 and one slow 30.0 -> 10.3), with its spread and every round kept
    assert by[(64, "cublas")]["us"] == pytest.approx(10.3) and by[(64, "auto")]["vs_cublas"] == pytest.approx(1.0)
    assert by[(64, "auto")]["replays"] == 5 and by[(64, "auto")]["us_max"] == pytest.approx(30.0)
    assert by[(64, "auto")]["spread"] == pytest.approx(30.0 / 10.1 - 1) and len(by[(64, "auto")]["rounds_us"]) == 5
    assert rounds_asked == [5, 5, 5] and doc["timing"]["rounds"] == 5
    assert all(n % copies == 0 for copies, n in captured)  # whole passes over the weight copies
    # 1 MiB L2, 16.5 KiB int4 weight (16 KiB codes + 2 scale rows): 2 MiB / 16896 B -> 125 copies
    assert by[(1, "auto")]["copies"] == 125 and by[(1, "cublas")]["copies"] == 32
    assert progress.done == bench.total_steps(cfg) == 3 * 5


def test_replay_rounds_rotates_the_order(monkeypatch):
    """Each round starts with the next implementation, so a slow first replay after a pause (a clock dip after
    a large-M point) lands on every implementation's rounds in turn and the medians stay equal."""
    log = []

    class Event:
        def __init__(self, enable_timing=False):
            self.at = None

        def record(self, stream=None):
            self.at = len(log)
            log.append(("event", self))

        def elapsed_time(self, end):  # ms: the replay recorded between the two events
            kind, key, first = log[self.at + 1]
            return 1.2 if first else 1.0

    class Graph:
        def __init__(self, key):
            self.key = key

        def replay(self):  # the first replay of each round is the slow one
            done = sum(1 for e in log if e[0] == "replay")
            log.append(("replay", self.key, done % len(keys) == 0))

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    keys = ["auto", "decode", "dense", "prefill", "cublas"]
    ms = bench.replay_rounds({k: Graph(k) for k in keys}, 7)
    replays = [key for kind, key, *_ in (e for e in log if e[0] == "replay")]
    assert [replays[5 * r] for r in range(7)] == [keys[r % 5] for r in range(7)]
    assert all(sorted(replays[5 * r:5 * r + 5]) == sorted(keys) for r in range(7))
    assert all(len(v) == 7 for v in ms.values())
    assert {k: statistics.median(v) for k, v in ms.items()} == {k: 1.0 for k in keys}
    assert sum(v.count(1.2) for v in ms.values()) == 7  # one slow replay per round, spread over the keys


# ------------------------------------------------------------------ check


def test_check_on_cpu_passes(capsys):
    code, out, _ = run_cli("check", "--cpu", "--quiet", capsys=capsys)
    assert code == cli.EXIT_OK, out
    assert "NO GPU KERNELS WERE CHECKED" in out
    assert "0 failed" in out and "CPU reference path only" in out
    for name in ("gptq-int4 g128 bf16", "gptq-int8 cw fp16", "awq-int4 g32 bf16", "act-order-int8 g128 fp16",
                 "ct-asym-int4 g128 bf16"):
        assert name in out


def test_check_without_gpu_falls_back_to_cpu(capsys, monkeypatch):
    no_gpu(monkeypatch)
    code, out, _ = run_cli("check", "--quiet", "--formats", "gptq", "--bits", "4", "--group", "128", capsys=capsys)
    assert code == 0
    assert "no CUDA GPU: test says so" in out and "NO GPU KERNELS WERE CHECKED" in out


def test_check_require_gpu_exits_3(capsys, monkeypatch):
    no_gpu(monkeypatch)
    code, _, err = run_cli("check", "--require-gpu", capsys=capsys)
    assert code == cli.EXIT_UNAVAILABLE and "nothing was checked" in err


def test_check_catches_a_wrong_result(capsys, monkeypatch, tmp_path):
    """A reference path that drops one output column must fail check with exit code 1."""
    from swordfish_backend import weight

    real = weight.matmul

    def broken(x, w, bias=None, **kw):
        y = real(x, w, bias, **kw)
        y[:, 5] = 0
        return y

    monkeypatch.setattr(weight, "matmul", broken)
    report = tmp_path / "check.json"
    code, out, _ = run_cli("check", "--cpu", "-q", "--formats", "gptq", "--bits", "8", "--group", "64",
                           "--dtype", "bf16", "--json", str(report), capsys=capsys)
    assert code == cli.EXIT_FAILED == 1
    assert "FAIL 6/6" in out and "failures (6)" in out
    saved = json.loads(report.read_text())
    assert saved["gpu"] is False and saved["summary"]["FAIL"] == 6


def test_check_catches_a_wrong_dequantization(monkeypatch):
    from swordfish_backend import weight

    real = weight.QuantizedWeight.dequantize
    monkeypatch.setattr(weight.QuantizedWeight, "dequantize", lambda self: real(self) * 1.01)
    cases = check.run(gpu=False, formats=check.select_formats(["awq"], None, [128]), dtypes=["fp16"])
    assert [c.status for c in cases if c.column == "dequant"] == ["FAIL"]


def test_check_tolerance_is_tight_enough():
    torch.manual_seed(0)
    ref = torch.randn(16, 512, dtype=torch.float64)
    u = check.unit_roundoff(torch.bfloat16)
    assert check.output_error(ref.to(torch.bfloat16), ref, u, 1024) <= 1       # one rounding passes
    wrong = ref.clone()
    wrong[3, 7] += 0.2 * ref.pow(2).mean().sqrt()                              # one element 20% of rms off
    assert check.output_error(wrong, ref, u, 1024) > 1
    nan = ref.clone()
    nan[0, 0] = float("nan")
    assert check.output_error(nan, ref, u, 1024) == float("inf")


@pytest.mark.parametrize("argv,match", [
    (["--formats", "marlin"], "--formats"),
    (["--formats", "awq", "--bits", "8"], "no supported format"),
    (["--group", "96"], "--group"),
    (["--paths", "auto"], "--paths"),
    (["--shapes", "4000,128"], "K"),
    (["--m", "-3"], "--m value"),
])
def test_check_usage_errors(argv, match, capsys):
    code, _, err = run_cli("check", "--cpu", *argv, capsys=capsys)
    assert code == cli.EXIT_USAGE and match in err


def test_dispatch_segments_and_boundaries():
    def select(M):
        if M <= 55:
            return 1
        if M < 96:
            return 3
        if M < 100:
            return 1
        return 3 if M < 4096 else 2

    segs = check.dispatch_segments(select)
    assert segs == [(1, 55, 1), (56, 95, 3), (96, 99, 1), (100, 4095, 3), (4096, None, 2)]
    assert check.boundary_ms(segs) == [55, 56, 57, 95, 96, 97, 99, 100, 101, 4095, 4096, 4097]
    assert check.dispatch_segments(lambda M: 1) == [(1, None, 1)]


# ------------------------------------------------------------------ info and envs


def test_info_without_gpu_real_process():
    proc = subprocess_cli("info")
    assert proc.returncode == 0, proc.stderr
    assert "swordfish " in proc.stdout and "torch " in proc.stdout
    assert "device     none" in proc.stdout and "no CUDA GPU" in proc.stdout
    assert "SWORDFISH_DETERMINISTIC" in proc.stdout and "built for:" in proc.stdout


def test_info_json_without_gpu(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, out, _ = run_cli("info", "--json", capsys=capsys)
    assert code == 0
    info = json.loads(out)
    assert info["devices"] == [] and info["paths"] is None and "no CUDA GPU" in info["gpu_error"]
    assert {k["name"] for k in info["env"]} == {"SWORDFISH_DEBUG", "SWORDFISH_DETERMINISTIC", "SWORDFISH_DISABLE",
                                                "SWORDFISH_SM100_PREFILL"}
    assert isinstance(info["extension"]["loaded"], bool)


def test_envs_are_read_at_call_time(monkeypatch):
    for name, fn in [("SWORDFISH_DEBUG", envs.debug), ("SWORDFISH_DETERMINISTIC", envs.deterministic),
                     ("SWORDFISH_DISABLE", envs.disabled), ("SWORDFISH_SM100_PREFILL", envs.sm100_prefill)]:
        monkeypatch.delenv(name, raising=False)
        assert fn() is False
        monkeypatch.setenv(name, "1")
        assert fn() is True
        monkeypatch.setenv(name, "Off")
        assert fn() is False
        monkeypatch.setenv(name, "")
        assert fn() is False
        monkeypatch.delenv(name)


def test_deterministic_is_strict_like_the_op(monkeypatch):
    monkeypatch.setenv("SWORDFISH_DETERMINISTIC", "maybe")
    with pytest.raises(ValueError, match="SWORDFISH_DETERMINISTIC must be 0 or 1.*'maybe'"):
        envs.deterministic()
    described = {k["name"]: k for k in envs.describe()}
    assert described["SWORDFISH_DETERMINISTIC"]["raw"] == "maybe"
    assert str(described["SWORDFISH_DETERMINISTIC"]["value"]).startswith("invalid")


def test_debug_and_kill_switch_are_lenient(monkeypatch):
    """Like the C++ debug switch: any value but 0/false/off/no/"" is on."""
    monkeypatch.setenv("SWORDFISH_DEBUG", "verbose")
    monkeypatch.setenv("SWORDFISH_DISABLE", "please")
    assert envs.debug() is True and envs.disabled() is True


def test_envs_module_lists_every_knob_the_sources_read():
    """Every SWORDFISH_* variable the sources read is listed in envs.py, and each language has one
    parser: in C++ only kernels/common/env.h calls getenv (its readers name the knob in
    env::flag / env::lenient / env::raw), in Python only swordfish_backend/envs.py touches
    os.environ."""
    import re

    listed = {k.name for k in envs.KNOBS} | set(envs.BUILD_KNOBS)
    read = set()
    cxx_getenv = set()
    for path in list((ROOT / "kernels").rglob("*.c*")) + list((ROOT / "kernels").rglob("*.h*")):
        text = path.read_text(errors="replace")
        if "getenv(" in text:
            cxx_getenv.add(path.relative_to(ROOT).as_posix())
        read |= set(re.findall(r'env::(?:flag|lenient|raw)\(\s*"(SWORDFISH_[A-Z0-9_]+)"\)', text))
    assert cxx_getenv == {"kernels/common/env.h"}
    py_environ = set()
    for path in (ROOT / "swordfish_backend").rglob("*.py"):
        text = path.read_text()
        if re.search(r"os\.environ|getenv\(", text):
            py_environ.add(path.relative_to(ROOT).as_posix())
        read |= set(re.findall(r'_flag\(\s*"(SWORDFISH_[A-Z0-9_]+)"', text))
    assert py_environ == {"swordfish_backend/envs.py"}
    assert read - listed == set()
    assert {"SWORDFISH_DEBUG", "SWORDFISH_DETERMINISTIC", "SWORDFISH_DISABLE", "SWORDFISH_SM100_PREFILL"} <= read


def test_no_cuda_at_import_time():
    code = (
        "import torch\n"
        "def boom(*a, **k):\n"
        "    raise AssertionError('CUDA initialised at import time')\n"
        "torch.cuda._lazy_init = boom\n"
        "import swordfish_backend.cli, swordfish_backend.bench, swordfish_backend.check\n"
        "import swordfish_backend.presets, swordfish_backend.envs\n"
        "swordfish_backend.cli.build_parser()\n"
        "assert not torch.cuda.is_initialized()\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


# ------------------------------------------------------------------ on a GPU (the lead runs these on the H200)

needs_gpu = pytest.mark.skipif(not cli.gpu_status()[0], reason="needs a CUDA GPU and the compiled extension")


@pytest.mark.gpu
@needs_gpu
def test_gpu_check_quick(capsys):
    code, out, _ = run_cli("check", "--quick", "--require-gpu", "-q", "--formats", "gptq,awq",
                           "--group", "128,-1", capsys=capsys)
    assert "GPU kernels on device 0" in out
    assert code == 0, out


@pytest.mark.gpu
@needs_gpu
def test_gpu_bench_small(tmp_path, capsys):
    path = tmp_path / "b.json"
    code, out, _ = run_cli("bench", "--shapes", "4096,4096", "--m", "1,256", "-q", "--json", str(path),
                           "--png", str(tmp_path / "b.png"), capsys=capsys)
    assert code == 0, out
    doc = bench.load_json(path)
    rows = {(r["M"], r["impl"]): r for r in doc["rows"]}
    assert rows[(1, "auto")]["status"] == "ok" and rows[(1, "auto")]["path"] in ("decode", "dense", "prefill")
    assert rows[(1, "cublas")]["us"] > 0 and doc["ceilings"]["hbm_read_gbps"] > 100


@pytest.mark.gpu
@needs_gpu
def test_gpu_info_lists_paths_and_dispatch(capsys):
    code, out, _ = run_cli("info", capsys=capsys)
    assert code == 0
    assert "paths on device" in out and "decode" in out and "dispatch table" in out


def test_check_kernel_logic_with_a_faked_op(monkeypatch):
    """check.run(gpu=True) on CPU with the op faked: boundaries from select_path, n/a, wrong path, det bits."""
    from swordfish_backend import ops, weight

    real = weight.matmul
    state = {"last": 0, "calls": 0}

    def select_value(M):
        return ops.PATH_DECODE if M <= 40 else ops.PATH_DENSE

    def fake_matmul(x, w, bias=None, *, path="auto", deterministic=None):
        state["calls"] += 1
        if path == "prefill":
            raise ValueError("swordfish.gemm: path prefill cannot run this problem: prefill needs sm_100a, got sm90")
        chosen = ops.PATHS[path] if path != "auto" else select_value(x.shape[0])
        if path == "auto" and x.shape[0] == 41:
            chosen = ops.PATH_DECODE  # the dispatcher disagreeing with select_path must fail
        state["last"] = chosen
        y = real(x, w, bias)
        if path == "dense" and deterministic and state["calls"] % 2:
            y = y.clone()
            y.view(torch.int16)[0, 0] ^= 1  # a flipped low bit: only the bit-identity check can see it
        return y

    monkeypatch.setattr(weight, "matmul", fake_matmul)
    monkeypatch.setattr(ops, "last_path", lambda index: state["last"])
    monkeypatch.setattr(check, "weight_selector", lambda w, index: select_value)
    cases = check.run(gpu=True, device="cpu", formats=check.select_formats(["gptq"], [4], [128]), dtypes=["bf16"],
                      shapes=[(256, 128)])
    ms = sorted({c.M for c in cases if c.column == "reference"})
    assert {40, 41, 42} <= set(ms) and 39 not in set(ms) and set(check.DECODE_MS) <= set(ms)
    by = {(c.M, c.column, c.det): c for c in cases}
    assert by[(1, "decode", 0)].status == "pass" and by[(1, "decode", 0)].ran == "decode"
    assert by[(1, "prefill", 0)].status == "n/a" and "needs sm_100a" in by[(1, "prefill", 0)].note
    assert by[(41, "auto", 0)].status == "FAIL" and "select_path predicts dense" in by[(41, "auto", 0)].note
    assert by[(42, "auto", 1)].status == "pass"
    assert any(c.status == "FAIL" and "different bits" in (c.note or "") for c in cases if c.column == "dense")
    table = check.format_table(cases)
    assert "n/a[1]" in table and "prefill needs sm_100a" in table and "FAIL" in table


def test_info_text_with_a_device():
    """format_info on what gather_info returns on a GPU machine (faked: no GPU here)."""
    info = {
        "swordfish": "0.1.0", "commit": "abc", "python": "3.12.0", "torch": "2.11.0+cu130", "torch_cuda": "13.0",
        "matplotlib": None,
        "extension": {"loaded": True, "error": None, "path": "/x/_C.so", "archs": "sm_90a",
                      "build": {"cuda_archs": ["90a"], "cuda_version": "13.0.88"}, "abi_info": {"version": 1}},
        "env": envs.describe(), "gpu_error": None, "device_index": 0,
        "devices": [{"index": 0, "name": "NVIDIA H200", "capability": "9.0", "sm_count": 132,
                     "l2_bytes": 60 << 20, "memory_bytes": 141 << 30}],
        "paths": {"decode": "available", "dense": "available",
                  "prefill": "unavailable: prefill is not built for sm90 in this build"},
        "dispatch": [{"format": "int4 g128", "layer": "qkv", "K": 4096, "N": 6144,
                      "segments": [{"first_m": 1, "last_m": 55, "path": "decode"},
                                   {"first_m": 56, "last_m": None, "path": "dense"}]}],
    }
    text = cli.format_info(info)
    assert "device 0   NVIDIA H200: compute capability 9.0, 132 SMs, 60 MiB L2" in text
    assert "built for: sm_90a" in text and "cuda_version: 13.0.88" in text
    assert "prefill  unavailable: prefill is not built for sm90" in text
    assert "decode 1-55 | dense 56+" in text
    assert "matplotlib not installed" in text
    assert "vLLM auto-selection on device 0 (sm90):" in text
    assert "--linear-backend auto  vLLM: on sm90 Swordfish is opt-in" in text
    assert ("--moe-backend auto     Swordfish for int4 channelwise, int4 group 32, int4 group 64, int4 group 128 "
            "experts; other formats vLLM's choice") in text
    blackwell = dict(info, devices=[dict(info["devices"][0], capability="10.0")])
    text = cli.format_info(blackwell)
    assert "--linear-backend auto  Swordfish" in text and "--moe-backend auto     Swordfish\n" in text
