"""`swordfish bench --peers` on CPU: the flags, the messages when vLLM or its ops are absent, the peers' GPTQ
and AWQ inputs against the reference (a pure-torch stand-in for a peer), Marlin's zero-point layout, and the
table / JSON / PNG with peer columns.

No test here times anything; tests/test_peers_vllm.py checks the adapters against the installed vLLM 0.33.
"""

import importlib.util
import json

import pytest
import torch

from swordfish_backend import bench, bench_moe, checkpoints, cli, peers, presets, reference
from swordfish_backend import format as sffmt

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def no_gpu(monkeypatch):
    monkeypatch.setattr(cli, "gpu_status", lambda device_index=None: (False, "no CUDA GPU: test says so"))


# ------------------------------------------------------------------ flags


def test_peers_flag_parse():
    parse = cli.build_parser().parse_args
    assert parse(["bench"]).peers is None and parse(["bench"]).peers_from is None
    assert parse(["bench", "--peers"]).peers == "all"
    assert parse(["bench", "--peers", "machete", "--m", "1"]).peers == "machete"
    args = parse(["bench", "--moe", "--peers", "--peers-from", "/x"])
    assert args.moe and args.peers == "all" and args.peers_from == "/x"


def test_peer_names():
    assert peers.parse("all", moe=False) == ("marlin", "machete")
    assert peers.parse(None, moe=True) == ("marlin_moe",)
    assert peers.parse("machete,marlin,machete", moe=False) == ("marlin", "machete")  # canonical order, once
    with pytest.raises(ValueError, match="marlin is for the dense bench"):
        peers.parse("marlin", moe=True)
    with pytest.raises(ValueError, match="choose 'all' or from marlin, machete"):
        peers.parse("cutlass", moe=False)


@pytest.mark.parametrize("argv,match", [
    (["--peers", "cutlass"], "--peers 'cutlass'"),
    (["--moe", "--peers", "machete"], "machete is for the dense bench"),
    (["--peers", "--from-json", "r.json"], "does not go with --from-json"),
    (["--peers", "--checkpoint", "/ckpt"], "does not go with --from-json, --checkpoint"),
])
def test_peers_usage_errors(argv, match, capsys, monkeypatch):
    no_gpu(monkeypatch)
    code, _, err = run_cli(capsys, "bench", *argv)
    assert code == cli.EXIT_USAGE and match in err


def test_with_peers_puts_them_before_the_roofline():
    assert cli._with_peers(list(bench.IMPLS), ("marlin", "machete"))[-3:] == ["marlin", "machete", "roofline"]
    assert cli._with_peers(["auto", "cublas"], ("marlin",)) == ["auto", "cublas", "marlin"]
    assert cli._with_peers(["auto", "roofline"], ()) == ["auto", "roofline"]


# ------------------------------------------------------------------ vLLM absent, ops missing


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_vllm_absent_message(capsys, monkeypatch):
    source = peers.load()
    assert source.label is None and source.error.startswith(peers.NOT_INSTALLED)
    assert "--peers-from" in source.error and "vllm==0.33" in source.error
    assert peers.reason("marlin", source, device=None) == source.error  # every peer's column says it
    no_gpu(monkeypatch)
    code, out, err = run_cli(capsys, "bench", "--peers", "--m", "1")
    assert code == cli.EXIT_UNAVAILABLE  # then no GPU: bench still says why it cannot time
    assert peers.NOT_INSTALLED in err and "the rest runs" in err and "no CUDA GPU" in err


def test_peers_from_a_folder_without_libraries(tmp_path, capsys, monkeypatch):
    assert "no such folder" in peers.load(str(tmp_path / "nope")).error
    src = peers.load(str(tmp_path))
    assert src.label is None and "_C_stable_libtorch.abi3.so" in src.error and "moe_c_stable.so.xz" in src.error
    no_gpu(monkeypatch)
    code, _, err = run_cli(capsys, "bench", "--peers-from", str(tmp_path / "empty2"))
    assert code == cli.EXIT_UNAVAILABLE and "no such folder" in err


def test_unpacked_xz(tmp_path):
    import lzma

    src = tmp_path / "c_stable.so.xz"
    src.write_bytes(lzma.compress(b"not really a library"))
    out = peers._unpacked(src)
    assert out.read_bytes() == b"not really a library" and out.name.endswith("c_stable.so")
    assert peers._unpacked(out) == out  # a plain file is used as it is


def test_op_table_and_call():
    for name, (ns, args) in peers.OPS.items():
        assert ns in peers.LIBRARY_FILES and len(set(args)) == len(args), name
    assert "is not registered" in peers.op_missing("marlin_gemm") or hasattr(torch.ops._C, "marlin_gemm")
    with pytest.raises(TypeError, match=r"missing \['is_a_8bit'\]"):
        peers.call("gptq_marlin_repack", b_q_weight=None, size_k=1, size_n=1, num_bits=4)


def test_support_reasons():
    m, mc, moe = peers.ADAPTERS["marlin"], peers.ADAPTERS["machete"], peers.ADAPTERS["marlin_moe"]
    kw = dict(bits=4, group=128, dtype=torch.bfloat16)
    assert m.supports(4096, 6144, **kw) is None and mc.supports(4096, 6144, **kw) is None
    assert m.supports(4096, 6144, **kw, zero_points=True) is None  # AWQ: uint4 with zero points
    assert "zero-point path is not wired" in mc.supports(4096, 6144, **kw, zero_points=True)
    assert "int4 only" in m.supports(4096, 6144, bits=8, group=128, dtype=torch.bfloat16, zero_points=True)
    assert moe.supports(128, 2048, 768, **kw, zero_points=True) is None
    assert "act-order" in mc.supports(4096, 6144, **kw, act_order=True)
    assert "group -1, 64 or 128" in mc.supports(4096, 6144, bits=8, group=32, dtype=torch.bfloat16)
    assert "N % 64" in m.supports(4096, 6176, **kw)
    assert moe.supports(128, 2048, 768, **kw) is None
    assert "for w2" in moe.supports(8, 2048, 96, bits=4, group=32, dtype=torch.bfloat16)


def test_marlin_scales_layout():
    s = torch.arange(2 * 128, dtype=torch.float32).reshape(2, 128)
    g = peers.marlin_scales(s, K=256, group=128)
    assert torch.equal(g[0, :64], torch.arange(64).reshape(8, 8).t().reshape(-1).float())  # 8x8 transposed
    c = peers.marlin_scales(s[:1], K=256, group=-1)
    assert c[0, :8].tolist() == [0, 1, 8, 9, 16, 17, 24, 25]
    assert sorted(c[0].tolist()) == s[0].tolist()
    batched = peers.marlin_scales(torch.stack([s, s + 1000]), K=256, group=128)  # MoE: per expert
    assert torch.equal(batched[1], g + 1000)


def test_marlin_zero_points_layout():
    # value i of word c is column 8 c + MARLIN_ZP_ORDER[i] of the row with each 64-column run transposed 8x8
    gen = torch.Generator().manual_seed(3)
    z = torch.randint(0, 16, (2, 3, 128), generator=gen)  # (experts, rows, N)
    packed = peers.marlin_zero_points(z)
    assert packed.dtype == torch.int32 and packed.shape == (2, 3, 16)
    words = packed.to(torch.int64) & 0xFFFFFFFF
    nibbles = torch.stack([(words >> (4 * i)) & 15 for i in range(8)], -1)  # (2, 3, 16, 8)
    t = z.reshape(2, 3, 2, 8, 8).transpose(-1, -2).reshape(2, 3, 16, 8)
    assert torch.equal(nibbles, t[..., list(peers.MARLIN_ZP_ORDER)])
    assert torch.equal(peers.marlin_zero_points(z[1]), packed[1])  # per expert = batched
    assert (packed < 0).any()  # words with the top nibble >= 8 wrap to negative int32, as vLLM's packing


def test_marlin_moe_block_sizes():
    assert peers.marlin_moe_block_m(1, 8, 128) == 8
    assert peers.marlin_moe_block_m(4096, 2, 8) == 64
    assert peers.marlin_moe_block_m(64, 8, 64) == 16  # 8 rows per expert: 8 / 8 >= 0.9, 8 / 16 < 0.9
    assert peers.align_sizes(8, 8, 128) == (64, 8)  # fewer slots than experts: one block per slot at most
    assert peers.align_sizes(512, 16, 8) == (512 + 8 * 15, -(-(512 + 8 * 15) // 16))


# ------------------------------------------------------------------ the peers' inputs, checked (CPU stand-in)


class TorchPeer:
    """A pure-torch peer over the GPTQ tensors (optionally with its scale groups shifted: a wrong peer)."""

    name = "marlin"

    def __init__(self, wrong=False):
        self.wrong = wrong

    def available(self, device):
        return None

    def supports(self, K, N, **kw):
        return None

    def prepare(self, qweight, scales, *, bits, group, dtype, qzeros=None):
        if qzeros is None:
            K = qweight.shape[0] * 32 // bits
            words = qweight.to(torch.int64) & 0xFFFFFFFF
            q = torch.stack([(words >> (bits * i)) & ((1 << bits) - 1) for i in range(32 // bits)], 1).reshape(K, -1)
            zero = torch.tensor(float(sffmt.bias(bits)))
        else:  # AWQ: N-packed codes and zero points in AWQ's order
            K = qweight.shape[0]
            q, zero = checkpoints.unpack_awq(qweight), checkpoints.unpack_awq(qzeros).float()
            zero = zero.repeat_interleave(K // zero.shape[0], 0)
        s = scales.float().roll(1, 0) if self.wrong else scales.float()
        w = (q.float() - zero) * s.repeat_interleave(K // s.shape[0], 0)  # (K, N)
        return lambda x: (x.float() @ w.to(dtype).float()).to(dtype)


@pytest.mark.parametrize("bits, zero_points", [(4, False), (8, False), (4, True)])
def test_peer_gets_the_weights_swordfish_gets(bits, zero_points, monkeypatch):
    monkeypatch.setitem(peers.ADAPTERS, "marlin", TorchPeer())
    cfg = bench.Config(layers=[], m=[], bits=bits, group=128, zero_points=zero_points, peers=("marlin",))
    gen = torch.Generator().manual_seed(1)
    ckpt = bench.random_checkpoint(256, 128, cfg, "cpu", gen)
    w = bench.weight_of(ckpt, cfg)
    fns = bench.prepare_peers(cfg, {"marlin": None}, ckpt, 256, 128, copies=2)
    assert len(fns["marlin"]) == 2
    for M in (1, 100):
        x = torch.randn(M, 256, generator=gen).to(torch.bfloat16)
        idx = bench.check_rows(M, "cpu")
        assert idx[0] == 0 and idx[-1] == M - 1 and len(idx) == min(M, bench.CHECK_ROWS)
        ref = bench.reference_rows(x, idx, reference.dequantize(w))
        assert bench.checked_error(lambda: fns["marlin"][0](x), idx, ref, torch.bfloat16, 256) <= 1
    monkeypatch.setitem(peers.ADAPTERS, "marlin", TorchPeer(wrong=True))
    wrong = bench.prepare_peers(cfg, {"marlin": None}, ckpt, 256, 128, copies=1)["marlin"][0]
    assert bench.checked_error(lambda: wrong(x), idx, ref, torch.bfloat16, 256) > 1


def test_unavailable_peer_gets_its_reason():
    cfg = bench.Config(layers=[], m=[], zero_points=True, peers=("marlin", "machete"))
    ckpt = bench.random_checkpoint(256, 128, cfg, "cpu", torch.Generator().manual_seed(0))
    out = bench.prepare_peers(cfg, {"marlin": "torch.ops._C.marlin_gemm is not registered", "machete": None},
                              ckpt, 256, 128, copies=1)
    assert out["marlin"] == ("unavailable", "marlin: torch.ops._C.marlin_gemm is not registered")
    assert out["machete"][0] == "unavailable" and "zero-point path is not wired" in out["machete"][1]


def test_moe_sources_of_awq_experts():
    cfg = bench_moe.Config(models=[], tokens=[], bits=4, group=128, zero_points=True)
    sources = []
    w = bench_moe.random_experts(2, 256, 128, cfg, "cpu", torch.Generator().manual_seed(0), sources)
    (qweight, scales, qzeros), = sources
    assert qweight.shape == (2, 256, 16) and scales.shape == (2, 2, 128) and qzeros.shape == (2, 2, 16)
    for e in range(2):
        q, z = checkpoints.unpack_awq(qweight[e]).float(), checkpoints.unpack_awq(qzeros[e]).float()
        want = (q - z.repeat_interleave(128, 0)) * scales[e].float().repeat_interleave(128, 0)
        # the packed format folds the zero point into (8 - zero) * scale, rounded once more: bf16 roundings apart
        got = w.dequantize()[e].float().t()
        assert (got - want).norm() / want.norm() < 1e-2
        assert (got - want).abs().max() <= 16 * scales[e].float().max() * 2**-8


def test_moe_sources_are_the_experts_gptq_tensors():
    cfg = bench_moe.Config(models=[], tokens=[], bits=4, group=128)
    sources = []
    w = bench_moe.random_experts(2, 256, 128, cfg, "cpu", torch.Generator().manual_seed(0), sources)
    (qweight, scales), = sources
    assert qweight.shape == (2, 32, 128) and scales.shape == (2, 2, 128)
    for e in range(2):
        q = torch.stack([(qweight[e].to(torch.int64) >> (4 * i)) & 15 for i in range(8)], 1).reshape(256, 128)
        want = ((q.float() - 8) * scales[e].float().repeat_interleave(128, 0)).to(torch.bfloat16).t()
        assert torch.equal(w.dequantize()[e], want)


# ------------------------------------------------------------------ table, JSON, PNG with peer columns

DEVICE = {"index": 0, "name": "Test GPU", "capability": "9.0", "sm_count": 132, "l2_bytes": 60 << 20,
          "memory_bytes": 141 << 30}
CEILINGS = {"hbm_read_gbps": 4000.0, "hbm_read_bytes": 2 << 30, "mma_tflops": 700.0, "mma_shape": [8192] * 3}
SOURCE = peers.Source("vLLM 0.33.0 (/site-packages/vllm)")


def dense_doc():
    layer = presets.Layer("qkv", 4096, 6144)
    wbytes = bench.quantized_bytes(4096, 6144, 4, 128, False, False)
    rows = []
    for M, auto, marlin in [(1, 5.0, 10.0), (16, 6.0, 9.0), (256, 20.0, 18.0)]:
        timed = dict(weight_bytes=wbytes, copies=10, calls=120, replays=7, us_min=0.9, us_max=1.1)
        rows.append(bench.make_row("llama-3-8b", layer, M, "auto", us=auto, path="decode", err=0.3,
                                   **dict(timed, us_min=auto * 0.95, us_max=auto * 1.05)))
        rows.append(bench.make_row("llama-3-8b", layer, M, "cublas", us=16.0, weight_bytes=4096 * 6144 * 2))
        rows.append(bench.make_row("llama-3-8b", layer, M, "marlin", us=marlin, path="marlin", err=0.2,
                                   **dict(timed, us_min=marlin * 0.95, us_max=marlin * 1.05)))
        rows.append(bench.make_row("llama-3-8b", layer, M, "machete", status="unavailable", weight_bytes=wbytes,
                                   note="machete: Machete runs on compute capability 9.0 only (vLLM picks it on "
                                        "Hopper); this GPU is 10.0"))
        roof, hbm, compute = bench.roofline_us(M, 4096, 6144, wbytes, CEILINGS)
        rows.append(bench.make_row("llama-3-8b", layer, M, "roofline", us=roof, weight_bytes=wbytes,
                                   hbm_floor_us=hbm, compute_floor_us=compute))
    config = {"models": ["llama-3-8b"], "bits": 4, "group": 128, "dtype": "bf16", "m": [1, 16, 256],
              "impls": ["auto", "cublas", "marlin", "machete", "roofline"], "zero_points": False,
              "act_order": False, "deterministic": False, "peers": peers.describe(("marlin", "machete"), SOURCE)}
    return bench.make_result(rows, device=DEVICE, config=config, ceilings=CEILINGS, commit="abc123",
                             torch_version="2.11.0", cuda_version="13.0", created="2026-12-02T10:00:00Z")


def test_dense_table_json_png_with_peers(tmp_path, capsys):
    doc = dense_doc()
    by = {(r["M"], r["impl"]): r for r in doc["rows"]}
    assert by[(1, "marlin")]["vs_cublas"] == pytest.approx(1.6) and by[(1, "marlin")]["err"] == 0.2
    text = bench.format_table(doc)
    assert "vLLM 0.33.0" in text and "xpeer (best)" in text
    lines = {int(ln.split()[0]): ln for ln in text.splitlines() if ln.strip()[:1].isdigit() and "|" in ln}
    assert "2.00 (marlin)" in lines[1] and "1.50 (marlin)" in lines[16] and "0.90 (marlin)" in lines[256]
    assert "n/a[1]" in lines[1] and "[1] machete: Machete runs on compute capability 9.0 only" in text
    path = tmp_path / "r.json"
    bench.write_json(doc, path)
    assert bench.load_json(path)["config"]["peers"]["names"] == ["marlin", "machete"]
    assert cli.main(["bench", "--from-json", str(path), "--png", ""]) == 0 and "2.00 (marlin)" in capsys.readouterr()[0]
    bad = json.loads(path.read_text())
    bad["rows"][2]["impl"] = "cutlass"
    with pytest.raises(ValueError, match="impl must be one of"):
        bench.validate_result(bad)
    assert bench.peer_summary([r for r in doc["rows"] if r["status"] == "ok"], ["marlin", "machete"]) == \
        "\nbest peer / Swordfish: 1.39x geomean (0.90-2.00)"  # (2.0 * 1.5 * 0.9) ** (1 / 3)
    pytest.importorskip("matplotlib")
    assert bench.plot(doc, tmp_path / "r.png") is None and (tmp_path / "r.png").stat().st_size > 10000


def test_table_when_no_peer_ran():
    doc = dense_doc()
    doc["config"]["peers"] = peers.describe(("marlin", "machete"), peers.Source(None, "vLLM is not installed"))
    for r in doc["rows"]:
        if r["impl"] == "marlin":
            r.update(status="unavailable", note="marlin: vLLM is not installed", us=None)
    text = bench.format_table(doc)
    assert "none ran: vLLM is not installed" in text and "(marlin)" not in text
    assert bench.peer_summary([r for r in doc["rows"] if r["status"] == "ok"], ["marlin"]) == "\nno peer ran"


def test_moe_table_json_png_with_peers(tmp_path):
    p = presets.MOE_PRESETS["qwen3-30b-a3b"]
    rows = []
    for T, auto, marlin in [(1, 20.0, 30.0), (64, 100.0, 140.0)]:
        base = dict(touched=8.0, touched_bytes=1 << 20)
        rows.append(bench_moe.make_row(p, T, "auto", us=auto, path="fused", err=0.1, **base))
        rows.append(bench_moe.make_row(p, T, "torch", us=90.0, err=0.2, **base))
        rows.append(bench_moe.make_row(p, T, "marlin_moe", us=marlin, err=0.3, **base))
        rows.append(bench_moe.make_row(p, T, "roofline", us=5.0, hbm_floor_us=5.0, compute_floor_us=1.0, **base))
    config = {"models": [p.name], "tokens": [1, 64], "bits": 4, "group": 128, "dtype": "bf16",
              "impls": ["auto", "torch", "marlin_moe", "roofline"], "zero_points": False, "act_order": False,
              "deterministic": False, "torch_moe": "grouped_mm", "peers": peers.describe(("marlin_moe",), SOURCE)}
    doc = bench_moe.make_result(rows, device=DEVICE, config=config, ceilings=CEILINGS, commit=None,
                                torch_version="2.11.0", cuda_version="13.0", created="2026-12-02T10:00:00Z")
    text = bench_moe.format_table(doc)
    assert "1.50 (marlin_moe)" in text and "1.40 (marlin_moe)" in text and "vLLM 0.33.0" in text
    bench_moe.write_json(doc, tmp_path / "m.json")
    assert bench_moe.load_json(tmp_path / "m.json")["rows"][2]["impl"] == "marlin_moe"
    pytest.importorskip("matplotlib")
    assert bench_moe.plot(doc, tmp_path / "m.png") is None and (tmp_path / "m.png").is_file()
