"""`swordfish check --checkpoint` / `swordfish bench --checkpoint` on small checkpoints written here (CPU, CI).

tests/ckpt_writers.py writes GPTQ, AWQ and compressed-tensors checkpoints from
round-to-nearest codes with its own packers; nothing here times anything.
"""

import json
import re

import pytest
import torch

import ckpt_writers as cw
from swordfish_backend import bench, bench_checkpoint, check_checkpoint, checkpoint_scan, cli

CASES = {  # name -> (method, writer keywords)
    "gptq-int4-g128": ("gptq", dict(bits=4, group=128)),
    "gptq-int4-act": ("gptq", dict(bits=4, group=64, act_order=True)),
    "gptq-int8-cw": ("gptq", dict(bits=8, group=-1)),
    "awq-int4-g64": ("awq", dict(group=64)),
    "ct-int4-g128": ("compressed-tensors", dict(bits=4, group=128)),
    "ct-int4-asym-act": ("compressed-tensors", dict(bits=4, group=64, sym=False, act_order=True)),
    "ct-int8-channel": ("compressed-tensors", dict(bits=8, group=-1)),
}


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(cli, "gpu_status", lambda device_index=None: (False, "no CUDA GPU: test says so"))


def table_rows(out: str) -> dict:
    """{layer name: the table line's fields} from check's table."""
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^(\S+)(?: \(x\d+\))?\s+(\S+ int\d(?: zp)?(?: act)?)\s+(\d+ x \d+)\s+(\S+)\s+(\S+)\s+(\S+)", line)
        if m:
            rows[m.group(1)] = m.groups()[1:]
    return rows


# ------------------------------------------------------------------ scanning


@pytest.mark.parametrize("case", list(CASES))
def test_scan_finds_every_layer_with_its_format(tmp_path, case):
    method, kw = CASES[case]
    root = cw.tiny_model(tmp_path / case, method, **kw)
    ck = checkpoint_scan.scan(root)
    assert ck.method == method and ck.act_dtype == "bf16"
    assert [layer.name for layer in ck.layers] == [f"model.layers.{i}.{n}" for i in range(2) for n in sorted(cw.DENSE)]
    by = {layer.name: layer for layer in ck.layers}
    down = by["model.layers.1.mlp.down_proj"]
    assert (down.K, down.N) == (cw.INTER, cw.HIDDEN) and down.served
    assert down.bits == kw.get("bits", 4) and down.group == kw.get("group", 128)
    assert down.act_order == kw.get("act_order", False)
    assert down.zero_points == (method == "awq" or not kw.get("sym", True))
    assert ck.unquantized == ["lm_head"] and not ck.expert_groups


def test_sharded_with_index_and_moe_experts(tmp_path):
    root = cw.tiny_model(tmp_path / "moe", "gptq", experts=2, shards=3)
    assert (root / "model.safetensors.index.json").exists() and len(list(root.glob("*.safetensors"))) == 3
    ck = checkpoint_scan.scan(root)
    assert len(ck.shards) == 3
    assert [g.name for g in ck.expert_groups] == [f"model.layers.0.mlp.experts.*.{p}"
                                                  for p in ("down_proj", "gate_proj", "up_proj")]
    assert all(g.num_experts == 2 and g.reason is None for g in ck.expert_groups)
    assert [e.expert for e in ck.expert_groups[1].experts] == [("model.layers.0.mlp.experts.*.gate_proj", 0),
                                                               ("model.layers.0.mlp.experts.*.gate_proj", 1)]
    assert not any("experts" in layer.name for layer in ck.layers)
    assert ck.num_quantized == 4 + 7 + 6


def test_mixtral_style_expert_names(tmp_path):
    gen = torch.Generator().manual_seed(0)
    tensors = {}
    for e in range(2):
        for proj, (K, N) in {"w1": (128, 256), "w2": (256, 128), "w3": (128, 256)}.items():
            tensors.update(cw.ct_tensors(f"model.layers.0.block_sparse_moe.experts.{e}.{proj}",
                                         torch.randn(N, K, generator=gen) * 0.05))
    tensors.update(cw.ct_tensors("model.layers.0.self_attn.o_proj", torch.randn(128, 128, generator=gen)))
    root = cw.write(tmp_path / "mixtral", {"torch_dtype": "float16", "quantization_config": cw.ct_config()}, tensors)
    ck = checkpoint_scan.scan(root)
    assert [(g.proj, g.num_experts) for g in ck.expert_groups] == [("w1", 2), ("w2", 2), ("w3", 2)]
    assert [layer.name for layer in ck.layers] == ["model.layers.0.self_attn.o_proj"] and ck.act_dtype == "fp16"


def test_not_servable_layers_carry_the_reason(tmp_path):
    root = cw.tiny_model(tmp_path / "odd", "gptq", layers=1, odd_layer=True)
    odd = {layer.name: layer for layer in checkpoint_scan.scan(root).layers}["model.extra_proj"]
    assert not odd.served and "multiple of 64" in odd.reason and "N = 96" in odd.reason
    root = cw.tiny_model(tmp_path / "asym", "gptq", layers=1, sym=False)
    assert all("sym=false" in layer.reason for layer in checkpoint_scan.scan(root).layers)
    w8a8 = cw.ct_config(bits=8, strategy="channel")
    w8a8["config_groups"]["group_0"]["input_activations"] = {"num_bits": 8, "type": "int"}
    root = cw.tiny_model(tmp_path / "w8a8", "compressed-tensors", layers=1, bits=8, group=-1, quant_config=w8a8)
    assert all("W8A8" in layer.reason for layer in checkpoint_scan.scan(root).layers)


def test_oracle_matches_the_writers_codes(tmp_path):
    """oracle_weight reads each layout back to the writer's (codes - zeros) * scales."""
    w = torch.randn(128, 256, generator=torch.Generator().manual_seed(1)) * 0.05
    for method, kw in (("gptq", dict(bits=4, group=64, act_order=True)), ("awq", dict(group=64)),
                       ("compressed-tensors", dict(bits=4, group=64, sym=False, act_order=True)),
                       ("gptq", dict(bits=8, group=-1))):
        tensors = cw.quantize(method, "x", w, **kw)
        g_idx = None
        if kw.get("act_order"):
            g_idx = (tensors.get("x.g_idx") if method == "gptq" else tensors["x.weight_g_idx"]).to(torch.int64)
        sym = method != "awq" and kw.get("sym", True)
        codes, scales, zeros, g = cw.rtn(w, kw.get("bits", 4), kw["group"], sym, g_idx)
        expect = ((codes - zeros[g]).double() * scales.to(torch.bfloat16).double()[g]).to(torch.bfloat16).double().t()
        layer = checkpoint_scan.Layer(name="x", method=method, bits=kw.get("bits", 4), group=kw["group"],
                                      zero_points=not sym, act_order=bool(g_idx is not None), K=256, N=128,
                                      tensors={}, zero_offset=1 if method == "gptq" else 0)
        got, _ = checkpoint_scan.oracle_weight(layer, {k[2:]: v for k, v in tensors.items()}, torch.bfloat16)
        assert torch.equal(got, expect), (method, kw)


# ------------------------------------------------------------------ check


@pytest.mark.parametrize("case", list(CASES))
def test_check_passes_on_cpu_and_says_no_kernel_ran(tmp_path, capsys, no_gpu, case):
    method, kw = CASES[case]
    root = cw.tiny_model(tmp_path / case, method, layers=1, **kw)
    code, out, _ = run_cli(capsys, "check", "--checkpoint", str(root), "--quiet")
    assert code == cli.EXIT_OK, out
    rows = table_rows(out)
    assert len(rows) == 7
    fmt, shape, group, err, status = rows["model.layers.0.mlp.down_proj"]
    assert shape == f"{cw.INTER} x {cw.HIDDEN}" and status == "ok" and float(err) <= 1
    assert group == ("cw" if kw.get("group") == -1 else str(kw.get("group", 128)))
    assert fmt.startswith({"gptq": "gptq", "awq": "awq", "compressed-tensors": "ct"}[method])
    assert "NO GPU KERNELS WERE RUN" in out and "M = 1, 16" in out
    assert "verdict: PASS: all 7 servable layers" in out and "NO GPU KERNEL WAS RUN" in out


def test_check_lists_unservable_layers_and_checks_moe_experts(tmp_path, capsys, no_gpu):
    root = cw.tiny_model(tmp_path / "mix", "awq", experts=2, odd_layer=True, shards=2, group=64)
    code, out, _ = run_cli(capsys, "check", "--checkpoint", str(root), "--quiet", "--m", "1")
    assert code == cli.EXIT_OK, out
    rows = table_rows(out)
    assert rows["model.extra_proj"][4].startswith("n/a[")
    assert "out_features N must be a positive multiple of 64" in out and "1 not served by Swordfish" in out
    for proj in ("gate_proj", "up_proj", "down_proj"):
        assert rows[f"model.layers.0.mlp.experts.*.{proj}"][4] == "ok"
    assert "model.layers.0.mlp.experts.*.gate_proj (x2)" in out
    fmt, shape, _, err, status = rows["model.layers.0.mlp.experts:fused_moe"]
    assert shape == f"{cw.HIDDEN} x {cw.INTER}" and status == "ok" and float(err) <= 1
    assert "verdict: PASS: all 11 servable layers and 4 MoE expert checks" in out


def test_expert_groups_outside_a_block_are_listed(tmp_path, capsys, no_gpu):
    gen = torch.Generator().manual_seed(0)
    tensors = {}
    for e in range(2):  # gate and up experts, no down: not an MoE layer this command can run
        for proj in ("gate_proj", "up_proj"):
            tensors.update(cw.gptq_tensors(f"model.layers.0.mlp.experts.{e}.{proj}", torch.randn(256, 128, generator=gen)))
    tensors.update(cw.gptq_tensors("model.layers.0.self_attn.o_proj", torch.randn(128, 128, generator=gen)))
    root = cw.write(tmp_path / "half", {"torch_dtype": "bfloat16", "quantization_config": cw.gptq_config()}, tensors)
    code, out, _ = run_cli(capsys, "check", "--checkpoint", str(root), "--quiet", "--m", "1")
    assert code == cli.EXIT_OK
    assert table_rows(out)["model.layers.0.mlp.experts.*.up_proj"][4].startswith("moe[")
    assert check_checkpoint.MOE_NOTE in out and "2 MoE expert groups not checked here" in out


def test_moe_block_logic_with_a_faked_kernel(tmp_path, monkeypatch):
    """check_moe_block(gpu=True) on CPU with the MoE op faked: Mixtral names (w1 / w3 / w2), the path, a wrong
    result caught at one token count, and a layout misread by the experts' loader."""
    from swordfish_backend import checkpoints, moe, ops

    gen = torch.Generator().manual_seed(0)
    tensors = {}
    for e in range(4):
        for proj, (K, N) in {"w1": (128, 256), "w2": (256, 128), "w3": (128, 256)}.items():
            tensors.update(cw.ct_tensors(f"model.layers.0.block_sparse_moe.experts.{e}.{proj}",
                                         torch.randn(N, K, generator=gen) * 0.05, group=64, sym=False))
    root = cw.write(tmp_path / "mx", {"torch_dtype": "bfloat16", "num_experts_per_tok": 2, "hidden_act": "silu",
                                      "quantization_config": cw.ct_config(group=64, sym=False)}, tensors)
    ck = checkpoint_scan.scan(root)
    real = moe.fused_moe

    def fake_fused(x, w13, w2, weights, ids, **kw):
        assert (w13.num_experts, w13.in_features, w13.out_features, w2.in_features) == (4, 128, 512, 256)
        y = real(x, w13, w2, weights, ids, **kw)
        if x.shape[0] == 16:
            y = y.clone()
            y[2, 3] += 1.0
        return y

    monkeypatch.setattr(moe, "fused_moe", fake_fused)
    monkeypatch.setattr(ops, "last_moe_path", lambda device: 1)
    monkeypatch.setattr(ops, "moe_path_name", lambda code: "fused")
    results = check_checkpoint.run(ck, [1, 16], gpu=True, device=torch.device("cpu"))
    by = {r.name: r for r in results}
    fused = by["model.layers.0.block_sparse_moe.experts:fused_moe"]
    assert fused.paths == {1: "fused", 16: "fused"} and fused.errs["M=1"] <= 1
    assert fused.status == "FAIL" and fused.note.startswith("M=16: error")
    assert by["model.layers.0.block_sparse_moe.experts.*.w2"].status == "ok"
    monkeypatch.setattr(checkpoints, "_unpack_rows", lambda words, bits, order=None: torch.zeros(
        words.shape[0], words.shape[1] * 32 // bits, dtype=torch.int64))  # zero points read as 0
    results = check_checkpoint.run(ck, [1], gpu=False)
    assert all(r.status == "FAIL" and "dequant e" in r.note for r in results if ":" not in r.name)


def test_check_json(tmp_path, capsys, no_gpu):
    root = cw.tiny_model(tmp_path / "j", "compressed-tensors", layers=1, odd_layer=True)
    out_json = tmp_path / "check.json"
    code, _, _ = run_cli(capsys, "check", "--checkpoint", str(root), "--quiet", "--json", str(out_json))
    doc = json.loads(out_json.read_text())
    assert code == 0 and doc["gpu"] is False and "test says so" in doc["why_not_gpu"]
    assert doc["summary"] == {"ok": 7, "FAIL": 0, "n/a": 1, "moe": 0} and doc["verdict"].startswith("verdict: PASS")
    q = next(r for r in doc["layers"] if r["name"] == "model.layers.0.self_attn.q_proj")
    assert set(q["errs"]) == {"dequant", "M=1", "M=16"} and q["paths"] == {"1": "reference", "16": "reference"}


def test_check_catches_a_loader_that_misreads_the_layout(tmp_path, capsys, no_gpu, monkeypatch):
    """The oracle reads the checkpoint apart from the loaders: a wrong AWQ nibble order fails every layer."""
    from swordfish_backend import checkpoints

    root = cw.tiny_model(tmp_path / "awq", "awq", layers=1, group=64)
    monkeypatch.setattr(checkpoints, "AWQ_ORDER", tuple(range(8)))
    code, out, _ = run_cli(capsys, "check", "--checkpoint", str(root), "--quiet", "--m", "1")
    assert code == cli.EXIT_FAILED
    assert "verdict: FAIL: 7 of 7 checks failed" in out and "dequant: error" in out


def test_check_reports_a_layer_the_loader_rejects(tmp_path, capsys, no_gpu):
    from safetensors.torch import load_file, save_file

    root = cw.tiny_model(tmp_path / "bad", "gptq", layers=1, group=64, act_order=True)
    tensors = load_file(str(root / "model.safetensors"))
    tensors["model.layers.0.mlp.up_proj.g_idx"] = torch.zeros(cw.HIDDEN, dtype=torch.int32)  # one group of 128
    save_file(tensors, str(root / "model.safetensors"))
    code, out, _ = run_cli(capsys, "check", "--checkpoint", str(root), "--quiet", "--m", "1")
    assert code == cli.EXIT_FAILED
    assert table_rows(out)["model.layers.0.mlp.up_proj"][4].startswith("FAIL[")
    assert "loader: ValueError: g_idx is not a valid grouping" in out
    assert "verdict: FAIL: 1 of 7 checks failed (model.layers.0.mlp.up_proj)" in out


def test_check_require_gpu_exits_3(tmp_path, capsys, no_gpu):
    root = cw.tiny_model(tmp_path / "g", "gptq", layers=1)
    code, out, err = run_cli(capsys, "check", "--checkpoint", str(root), "--require-gpu")
    assert code == cli.EXIT_UNAVAILABLE and "nothing was checked" in err and "verdict" not in out


def test_check_kernel_logic_with_a_faked_op(tmp_path, monkeypatch):
    """check_checkpoint.run(gpu=True) on CPU with the op faked: the path per M, a wrong result caught."""
    from swordfish_backend import ops, weight

    root = cw.tiny_model(tmp_path / "k", "compressed-tensors", layers=1, group=64, sym=False)
    ck = checkpoint_scan.scan(root)
    real = weight.matmul
    state = {"last": 0}

    def fake_matmul(x, w, bias=None, **kw):
        state["last"] = ops.PATH_DECODE if x.shape[0] <= 16 else ops.PATH_PREFILL
        y = real(x, w, bias)
        if w.out_features == cw.INTER and x.shape[0] == 256:  # gate / up at M = 256: a wrong element
            y = y.clone()
            y[3, 5] += 1.0
        return y

    monkeypatch.setattr(weight, "matmul", fake_matmul)
    monkeypatch.setattr(ops, "last_path", lambda index: state["last"])
    results = check_checkpoint.run(ck, [1, 16, 256], gpu=True, device=torch.device("cpu"))
    by = {r.name: r for r in results}
    q = by["model.layers.0.self_attn.q_proj"]
    assert q.status == "ok" and q.paths == {1: "decode", 16: "decode", 256: "prefill"}
    gate = by["model.layers.0.mlp.gate_proj"]
    assert gate.status == "FAIL" and gate.note.startswith("M=256: error") and gate.errs["M=16"] <= 1
    table = check_checkpoint.format_table(results, [1, 16, 256], gpu=True)
    assert "path (M=1/16/256)" in table and "decode/decode/prefill" in table
    assert check_checkpoint.verdict(results, [1, 16, 256], gpu=True).startswith("verdict: FAIL: 2 of 7")


# ------------------------------------------------------------------ broken directories


def _ok(tmp_path):
    return cw.tiny_model(tmp_path / "ok", "gptq", layers=1)


def _edit_config(root, **changes):
    cfg = json.loads((root / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    (root / "config.json").write_text(json.dumps(cfg))


def broken_no_dir(tmp_path):
    return tmp_path / "nope", "not a directory"


def broken_no_config(tmp_path):
    root = _ok(tmp_path)
    (root / "config.json").unlink()
    return root, "no config.json"


def broken_not_quantized(tmp_path):
    root = _ok(tmp_path)
    _edit_config(root, quantization_config=None)
    return root, "has no quantization_config"


def broken_fp8(tmp_path):
    root = _ok(tmp_path)
    _edit_config(root, quantization_config={"quant_method": "fp8"})
    return root, "quant_method 'fp8' is not supported"


def broken_ct_format(tmp_path):
    root = _ok(tmp_path)
    q = cw.ct_config()
    q["format"] = "float-quantized"
    q["config_groups"]["group_0"]["format"] = "float-quantized"
    _edit_config(root, quantization_config=q)
    return root, "compressed-tensors format float-quantized is not supported"


def broken_awq_gemv(tmp_path):
    root = _ok(tmp_path)
    _edit_config(root, quantization_config=dict(cw.awq_config(), version="gemv"))
    return root, "AWQ version 'gemv' is not supported"


def broken_no_shards(tmp_path):
    root = _ok(tmp_path)
    (root / "model.safetensors").unlink()
    return root, "no *.safetensors files"


def broken_missing_shard(tmp_path):
    root = cw.tiny_model(tmp_path / "sh", "gptq", layers=1, shards=2)
    (root / "model-00002-of-00002.safetensors").unlink()
    return root, "names shard(s) that are missing: model-00002-of-00002.safetensors"


def broken_missing_scales(tmp_path):
    from safetensors.torch import load_file, save_file

    root = _ok(tmp_path)
    tensors = load_file(str(root / "model.safetensors"))
    del tensors["model.layers.0.self_attn.k_proj.scales"]
    save_file(tensors, str(root / "model.safetensors"))
    return root, "layer model.layers.0.self_attn.k_proj: model.layers.0.self_attn.k_proj.qweight has no " \
                 "model.layers.0.self_attn.k_proj.scales beside it"


def broken_wrong_method(tmp_path):
    root = _ok(tmp_path)
    _edit_config(root, quantization_config=cw.ct_config())
    return root, "quant_method compressed-tensors but no *.weight_packed tensor in the shards (found qweight tensors)"


def broken_not_safetensors(tmp_path):
    root = _ok(tmp_path)
    (root / "model.safetensors").write_bytes(b"\xff" * 64)
    return root, "not a safetensors file"


BROKEN = [broken_no_dir, broken_no_config, broken_not_quantized, broken_fp8, broken_ct_format, broken_awq_gemv,
          broken_no_shards, broken_missing_shard, broken_missing_scales, broken_wrong_method, broken_not_safetensors]


@pytest.mark.parametrize("make", BROKEN, ids=[b.__name__[7:] for b in BROKEN])
@pytest.mark.parametrize("command", ["check", "bench"])
def test_broken_directories_exit_2_naming_the_problem(tmp_path, capsys, no_gpu, make, command):
    root, expect = make(tmp_path)
    code, out, err = run_cli(capsys, command, "--checkpoint", str(root))
    assert code == cli.EXIT_USAGE == 2
    assert f"swordfish {command}: error: --checkpoint: " in err and expect in err, err
    assert "verdict" not in out


# ------------------------------------------------------------------ bench (no timing)


def test_distinct_shapes_fuse_like_vllm_and_count(tmp_path):
    root = cw.tiny_model(tmp_path / "b", "gptq", layers=3, experts=2, odd_layer=True, shards=2)
    ck = checkpoint_scan.scan(root)
    shapes, left_out = bench_checkpoint.distinct_shapes(ck)
    got = {(s.label, s.K, s.N, s.count) for s in shapes}
    assert got == {
        ("model.layers.*.self_attn.q_proj+k_proj+v_proj", 128, 256, 3),
        ("model.layers.*.self_attn.o_proj", 128, 128, 3),
        ("model.layers.*.mlp.gate_proj+up_proj", 128, 512, 2),  # layer 0's MLP is MoE
        ("model.layers.*.mlp.down_proj", 256, 128, 2),
    }
    qkv = next(s for s in shapes if s.N == 256)
    assert qkv.layers == [f"model.layers.{i}.self_attn.q_proj+k_proj+v_proj" for i in range(3)]
    what = dict(left_out)
    assert "multiple of 64" in what["model.extra_proj"]
    assert "bench --moe" in what["model.layers.0.mlp.experts.*.gate_proj (x2)"]
    assert any(w.startswith("1 unquantized linear layer(s), e.g. lm_head") for w in what)


def test_fusion_needs_every_sibling_with_the_same_format(tmp_path):
    layers = [checkpoint_scan.Layer(name=f"a.{n}", method="gptq", bits=4, group=128, zero_points=False,
                                    act_order=n == "v_proj", K=128, N=64, tensors={})
              for n in ("q_proj", "k_proj", "v_proj")]
    assert [g.name for g in bench_checkpoint.gemms(layers)] == ["a.q_proj", "a.k_proj", "a.v_proj"]
    layers[2].act_order = False
    assert [(g.name, g.N) for g in bench_checkpoint.gemms(layers)] == [("a.q_proj+k_proj+v_proj", 192)]
    assert [g.name for g in bench_checkpoint.gemms(layers[:2])] == ["a.q_proj", "a.k_proj"]


def test_same_names_different_sizes_get_told_apart(tmp_path):
    gen = torch.Generator().manual_seed(0)
    tensors = {}
    for i, N in enumerate((128, 256)):
        tensors.update(cw.gptq_tensors(f"model.layers.{i}.mlp.down_proj", torch.randn(N, 128, generator=gen)))
    ck = checkpoint_scan.scan(cw.write(tmp_path / "v", {"quantization_config": cw.gptq_config()}, tensors))
    shapes, _ = bench_checkpoint.distinct_shapes(ck)
    assert sorted(s.label for s in shapes) == ["model.layers.*.mlp.down_proj [128x128]",
                                               "model.layers.*.mlp.down_proj [128x256]"]


def test_totals_sum_count_times_time():
    shapes = [bench_checkpoint.Shape("a", 128, 256, 4, 128, False, False, count=3),
              bench_checkpoint.Shape("b", 256, 128, 4, 128, False, False, count=2)]
    us = {("a", 1, "auto"): 2.0, ("a", 1, "cublas"): 4.0, ("a", 1, "roofline"): 1.0,
          ("b", 1, "auto"): 5.0, ("b", 1, "cublas"): 5.0, ("b", 1, "roofline"): 2.5,
          ("a", 64, "auto"): 10.0, ("b", 64, "auto"): 20.0, ("a", 64, "cublas"): 8.0}
    rows = [{"layer": lbl, "K": s.K, "N": s.N, "M": M, "impl": impl, "status": "ok", "us": v}
            for (lbl, M, impl), v in us.items() for s in shapes if s.label == lbl]
    tot = {(r["M"], r["impl"]): r for r in bench_checkpoint.totals(shapes, [{"rows": rows}], [1, 64])}
    assert tot[(1, "auto")]["us"] == pytest.approx(3 * 2.0 + 2 * 5.0)
    assert tot[(1, "cublas")]["us"] == pytest.approx(22.0) and tot[(1, "roofline")]["us"] == pytest.approx(8.0)
    assert tot[(64, "auto")]["per_token_us"] == pytest.approx((30 + 40) / 64)
    assert tot[(64, "cublas")]["us"] is None and tot[(64, "cublas")]["missing"] == ["b"]
    text = bench_checkpoint.format_totals(list(tot.values()), 5)
    assert "16.0" in text and "1.38" in text  # 16 us, xcuBLAS 22 / 16


def test_bench_without_gpu_prints_the_shapes_and_exits_3(tmp_path, capsys, no_gpu):
    root = cw.tiny_model(tmp_path / "n", "compressed-tensors", layers=2)
    code, out, err = run_cli(capsys, "bench", "--checkpoint", str(root))
    assert code == cli.EXIT_UNAVAILABLE and "test says so" in err and "bench times the CUDA kernels" in err
    assert "8 GEMMs per forward step in 4 distinct shapes" in out
    assert re.search(r"^\s+2\s+128\s+512\s+int4 g128\s+model\.layers\.\*\.mlp\.gate_proj\+up_proj$", out, re.M)


@pytest.mark.parametrize("argv", [["bench", "--shapes", "128,128"], ["bench", "--zero-points"], ["bench", "--act-order"],
                                  ["bench", "--from-json", "x"], ["bench", "--moe"], ["check", "--shapes", "128,128"],
                                  ["check", "--formats", "gptq"], ["check", "--bits", "4"], ["check", "--quick"]])
def test_checkpoint_conflicting_flags(tmp_path, capsys, argv):
    root = cw.tiny_model(tmp_path / "c", "gptq", layers=1)
    code, _, err = run_cli(capsys, *argv, "--checkpoint", str(root))
    assert code == 2 and ("cannot be combined with --checkpoint" in err or "give one of them" in err)


def test_bench_checkpoint_end_to_end_with_a_faked_run(tmp_path, capsys, monkeypatch):
    """The command with bench.run faked: one bench.run per weight format, the JSON's checkpoint section."""
    monkeypatch.setattr(cli, "gpu_status", lambda device_index=None: (True, ""))
    ran = []

    def fake_run(cfg, progress=None):
        ran.append(cfg)
        rows = []
        for model, layer in cfg.layers:
            for M in cfg.m:
                for impl in cfg.impls:
                    us = layer.K * layer.N / 1e4 * (2.0 if impl == "cublas" else 1.0) * (0.5 if impl == "roofline"
                                                                                           else 1.0)
                    extra = {"hbm_floor_us": us, "compute_floor_us": 0.0} if impl == "roofline" else {}
                    rows.append(bench.make_row(model, layer, M, impl, us=us, path="decode", weight_bytes=1, **extra))
                    if progress is not None and impl != "roofline":
                        progress.step("x")
        info = {"index": 0, "name": "Fake", "capability": "9.0", "sm_count": 132, "l2_bytes": 1, "memory_bytes": 1}
        config = {"models": cfg.models, "bits": cfg.bits, "group": cfg.group, "dtype": cfg.dtype, "m": cfg.m,
                  "impls": list(cfg.impls), "zero_points": cfg.zero_points, "act_order": cfg.act_order,
                  "deterministic": cfg.deterministic}
        ceil = {"hbm_read_gbps": 1.0, "hbm_read_bytes": 1, "mma_tflops": 1.0, "mma_shape": [1, 1, 1]}
        return bench.make_result(rows, device=info, config=config, ceilings=ceil, commit="x", torch_version="t",
                                 cuda_version=None)

    monkeypatch.setattr(bench, "run", fake_run)
    # layer 0 int4 g128, layer 1 int4 g64: two formats, so two bench runs
    tensors = {}
    gen = torch.Generator().manual_seed(0)
    for i, group in enumerate((128, 64)):
        for name, (K, N) in cw.DENSE.items():
            tensors.update(cw.ct_tensors(f"model.layers.{i}.{name}", torch.randn(N, K, generator=gen) * 0.05,
                                         group=group))
    q = cw.ct_config()
    q["config_groups"]["group_1"] = json.loads(json.dumps(q["config_groups"]["group_0"]))
    q["config_groups"]["group_0"]["targets"] = ["re:model\\.layers\\.0\\..*"]
    q["config_groups"]["group_1"]["weights"]["group_size"] = 64
    root = cw.write(tmp_path / "two", {"torch_dtype": "bfloat16", "quantization_config": q}, tensors)
    out_json = tmp_path / "res" / "b.json"
    code, out, _ = run_cli(capsys, "bench", "--checkpoint", str(root), "--m", "1,16", "--json", str(out_json),
                           "--quiet")
    assert code == 0, out
    assert [(c.bits, c.group) for c in ran] == [(4, 128), (4, 64)]
    assert all(len(c.layers) == 4 and c.m == [1, 16] and c.dtype == "bf16" for c in ran)
    docs = [bench.load_json(tmp_path / "res" / f"b-int4-{g}.json") for g in ("g128", "g64")]
    section = docs[0]["checkpoint"]
    assert section == docs[1]["checkpoint"] and len(section["shapes"]) == 8
    tot = {(r["M"], r["impl"]): r["us"] for r in section["totals"]}
    expect = sum(K * N for K, N in [(128, 256), (128, 128), (128, 512), (256, 128)]) / 1e4 * 2
    assert tot[(1, "auto")] == pytest.approx(expect) and tot[(16, "cublas")] == pytest.approx(2 * expect)
    assert "whole-model GEMM time of one forward step (8 GEMMs" in out and "2.00" in out
    pngs = sorted(p.name for p in (tmp_path / "res").glob("*.png"))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert pngs == []
    else:
        assert pngs == ["b-int4-g128.png", "b-int4-g64.png", "b-model.png"]
