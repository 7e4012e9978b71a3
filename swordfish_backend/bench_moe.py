"""`swordfish bench --moe`: the fused MoE layer against a bf16 torch MoE and the roofline, in one run.

Per model preset (presets.MOE_PRESETS: E experts, top-k, H, I) and token count T:

* Routing: top-k of a softmax of random logits (seeded; renormalised where
  the model does), fresh for every call in the graph: each call of a graph
  reads its own routing set, input and weight copy, and the weight copies
  together exceed twice the L2 at the fewest experts touched (T = 1), so the
  touched experts stream from HBM as in a served model.
* Implementations: ``auto`` (the C++ MoE dispatcher chooses; the path it
  chose is read back with ``ops.last_moe_path``), each MoE path forced
  (``ops.moe_paths()``: the extension's names), ``torch`` (the same layer in
  the activation dtype on the dequantized experts: ``torch._grouped_mm``
  where it runs, else a loop of ``torch.mm`` over experts) and ``roofline``.
* Every implementation is checked against ``moe.reference_moe`` on the first
  routing set of each point before it is timed (``moe.output_error`` <= 1);
  a wrong one is recorded as an error and not timed.
* With ``--peers``: vLLM's Marlin MoE (``marlin_moe``: swordfish_backend/peers.py)
  on each weight copy's GPTQ tensors, checked the same way, then timed in the
  same rounds; one that cannot run is an ``unavailable`` row saying why.
* Timing is ``bench.time_point``: one CUDA graph per implementation, replayed
  in interleaved rounds (bench.py's module doc says why).
* The roofline is the larger of two floors from ceilings measured in the same
  run (``bench.measure_ceilings``): bytes (the distinct experts this routing
  touches, w13 and w2 each: packed codes, scales, zero points, permutation;
  plus x and the output) over the HBM read bandwidth, and 6 T k H I FLOPs
  over the dense matmul rate. ``pct_roofline`` = 100 * roofline / time.

JSON result, schema ``swordfish-bench-moe`` version 1 (``validate_result``)::

    {"schema": "swordfish-bench-moe", "version": 1, "created", "swordfish", "commit", "torch", "cuda",
     "device": {...as swordfish-bench...}, "ceilings": {...as swordfish-bench...}, "timing": {...},
     "config": {"models": ["qwen3-30b-a3b"], "tokens": [1, 4, ...], "bits": 4, "group": 128, "dtype": "bf16",
                "impls": ["auto", "fused", "dense", "torch", "roofline"], "zero_points": false,
                "act_order": false, "deterministic": false, "torch_moe": "grouped_mm" | "loop"},
     "rows": [ROW, ...]}

    ROW = {"model": "qwen3-30b-a3b", "E": 128, "top_k": 8, "H": 2048, "I": 768, "T": 1,
           "impl": "auto" | <path> | "torch" | "marlin_moe" (--peers) | "roofline", "status": "ok" | "unavailable" | "error",
           "note": null | "why", "path": "fused" | null,   # the path that ran (auto: the dispatcher's choice)
           "us": 12.3 | null,                             # per MoE layer call (roofline: the floor)
           "pct_roofline", "vs_torch", "tflops": ... | null,  # vs_torch = torch us / us (> 1: faster)
           "touched_experts": 8.0, "touched_bytes": 18874368,  # mean over the routing sets
           "err": 0.12 | null,                             # error / tolerance on the checked routing set
           "copies": 7, "calls": 70, "replays": 7,         # rotating (routing, input, weights) sets, calls per
                                                           # graph, rounds: timed rows (0 otherwise)
           "us_min", "us_max", "spread", "rounds_us"}     # timed rows only
    # roofline rows carry "hbm_floor_us" and "compute_floor_us".
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from . import bench, ops, peers

SCHEMA = "swordfish-bench-moe"
SCHEMA_VERSION = 1
BASELINE = "torch"
STATUSES = bench.STATUSES


def impls() -> tuple:
    """Every implementation, in table order: auto, each MoE path (the extension's names), torch, roofline."""
    return ("auto",) + tuple(p for p in ops.moe_paths() if p != "auto") + (BASELINE, "roofline")


@dataclass
class Config:
    models: list                # [presets.MoEPreset]
    tokens: list                # T values
    bits: int = 4
    group: int = 128
    dtype: str = "bf16"
    impls: tuple = field(default_factory=impls)
    zero_points: bool = False
    act_order: bool = False
    deterministic: bool = False
    device_index: int = 0
    seed: int = 0
    commit: str | None = None
    rounds: int = bench.ROUNDS
    peers: tuple = ()           # peer names (peers.MOE), also listed in impls before roofline
    peer_source: object = None  # peers.Source


# ------------------------------------------------------------------ sizes and metrics


def expert_bytes(H: int, I: int, bits: int, group: int, zero_points: bool, act_order: bool) -> int:  # noqa: E741
    """Bytes of one expert's w13 ([2I, H]) and w2 ([H, I]) a kernel reads (bench.quantized_bytes of each)."""
    return (bench.quantized_bytes(H, 2 * I, bits, group, zero_points, act_order)
            + bench.quantized_bytes(I, H, bits, group, zero_points, act_order))


def moe_flops(T: int, k: int, H: int, I: int) -> float:  # noqa: E741
    """2 FLOPs per multiply-add of both GEMMs over the T * k routed rows: 6 T k H I."""
    return 6.0 * T * k * H * I


def roofline_us(T: int, k: int, H: int, I: int, touched_bytes: float, ceilings: dict,  # noqa: E741
                dtype_bytes: int = 2) -> tuple:
    """(roofline, hbm floor, compute floor) in microseconds for one MoE layer call."""
    hbm = (touched_bytes + 2 * T * H * dtype_bytes) / (ceilings["hbm_read_gbps"] * 1e3)
    compute = moe_flops(T, k, H, I) / (ceilings["mma_tflops"] * 1e6)
    return max(hbm, compute), hbm, compute


def make_routing(T: int, E: int, k: int, renormalize: bool, gen, device):
    """(topk_ids int32 [T, k], topk_weights fp32 [T, k]): the top-k of a softmax of random logits."""
    import torch

    logits = torch.randn(T, E, generator=gen, device=device)
    weights, ids = torch.topk(torch.softmax(logits, dim=-1), k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return ids.to(torch.int32).contiguous(), weights.to(torch.float32).contiguous()


def derive(rows: list) -> list:
    """Fill tflops, vs_torch and pct_roofline from us, in place; returns rows."""
    ref = {(r["model"], r["T"], r["impl"]): r["us"] for r in rows
           if r["impl"] in (BASELINE, "roofline") and r["status"] == "ok" and r["us"]}
    for r in rows:
        if not r["us"] or r["status"] != "ok":
            r.update(tflops=None, vs_torch=None, pct_roofline=None)
            continue
        key = (r["model"], r["T"])
        base, roof = ref.get(key + (BASELINE,)), ref.get(key + ("roofline",))
        r["tflops"] = moe_flops(r["T"], r["top_k"], r["H"], r["I"]) / r["us"] / 1e6
        r["vs_torch"] = None if base is None or r["impl"] == "roofline" else base / r["us"]
        r["pct_roofline"] = None if roof is None else 100.0 * roof / r["us"]
    return rows


def make_row(preset, T: int, impl: str, *, status: str = "ok", us=None, path=None, note=None, touched=0.0,
             touched_bytes=0, err=None, copies: int = 0, calls: int = 0, replays: int = 0, **extra) -> dict:
    row = {"model": preset.name, "E": preset.E, "top_k": preset.top_k, "H": preset.H, "I": preset.I, "T": T,
           "impl": impl, "status": status, "note": note, "path": path, "us": us, "pct_roofline": None,
           "vs_torch": None, "tflops": None, "touched_experts": float(touched), "touched_bytes": int(touched_bytes),
           "err": err, "copies": copies, "calls": calls, "replays": replays}
    row.update(extra)
    return row


# ------------------------------------------------------------------ result document

_NUM = (int, float, type(None))
_CONFIG = {"models": list, "tokens": list, "bits": int, "group": int, "dtype": str, "impls": list,
           "zero_points": bool, "act_order": bool, "deterministic": bool, "torch_moe": (str, type(None))}
_ROW = {"model": str, "E": int, "top_k": int, "H": int, "I": int, "T": int, "impl": str, "status": str,
        "note": (str, type(None)), "path": (str, type(None)), "us": _NUM, "pct_roofline": _NUM, "vs_torch": _NUM,
        "tflops": _NUM, "touched_experts": (int, float), "touched_bytes": int, "err": _NUM, "copies": int,
        "calls": int, "replays": int}


def validate_result(doc: dict) -> None:
    """Raise ValueError naming the first thing in `doc` that breaks schema version 1."""
    bench._validate(doc, SCHEMA, SCHEMA_VERSION, _CONFIG, _ROW,
                    lambda cfg: (cfg["impls"], f"config.impls {cfg['impls']}"))


def make_result(rows: list, *, device: dict, config: dict, ceilings: dict, commit, torch_version: str,
                cuda_version, created: str | None = None, rounds: int = bench.ROUNDS) -> dict:
    return bench._document(SCHEMA, SCHEMA_VERSION, derive(rows), validate_result, device=device, config=config,
                           ceilings=ceilings, commit=commit, torch_version=torch_version, cuda_version=cuda_version,
                           created=created, rounds=rounds,
                           rotation=("each call its own routing set and input, calls rotate over weight copies "
                                     f"totalling >= {bench.L2_MULTIPLE}x L2 in the experts touched at T = 1"))


def write_json(doc: dict, path) -> None:
    bench.write_json(doc, path, validate_result)


def load_json(path) -> dict:
    return bench.load_json(path, validate_result)


# ------------------------------------------------------------------ printing and plotting


def format_table(doc: dict) -> str:
    """One block per model, one line per T: the auto path's numbers, then every implementation's us."""
    cfg, ceil, dev = doc["config"], doc["ceilings"], doc["device"]
    group = "channelwise" if cfg["group"] == -1 else f"g{cfg['group']}"
    extras = (" zero-points" if cfg["zero_points"] else "") + (" act-order" if cfg["act_order"] else "")
    extras += " deterministic" if cfg["deterministic"] else ""
    lines = [
        (f"swordfish bench --moe  {dev['name']} (sm {dev['capability']}, {dev['sm_count']} SMs)  "
         f"int{cfg['bits']} {group} {cfg['dtype']}{extras}  commit {doc['commit'] or 'unknown'}"),
        (f"ceilings measured in this run: HBM read {ceil['hbm_read_gbps']:.0f} GB/s, "
         f"dense {cfg['dtype']} matmul {ceil['mma_tflops']:.0f} TFLOP/s"),
        (f"us = microseconds per MoE layer ({bench._how_timed(doc)} and routings); %roof = roofline / time; "
         f"xtorch > 1 is faster than the torch {cfg['dtype']} MoE ({cfg.get('torch_moe') or '?'})"),
    ] + bench.peer_header(cfg)
    others = [i for i in cfg["impls"] if i != "auto"]
    peer_names = bench.peer_impls(cfg)
    by_key = {(r["model"], r["T"], r["impl"]): r for r in doc["rows"]}
    notes: dict = {}
    for model in dict.fromkeys(r["model"] for r in doc["rows"]):
        mine = [r for r in doc["rows"] if r["model"] == model]
        r0 = mine[0]
        lines += ["", f"{model}  (E={r0['E']}, top-{r0['top_k']}, H={r0['H']}, I={r0['I']})"]
        lines.append(f"{'T':>6} {'experts':>7}  {'path':<7}{'us':>9}{'%roof':>6}{'xtorch':>7} |"
                     + bench.impl_head(others) + bench.peer_head(peer_names))
        for T in sorted({r["T"] for r in mine}):
            auto = by_key.get((model, T, "auto"))
            touched = next((r["touched_experts"] for r in mine if r["T"] == T), 0.0)
            if auto is not None and auto["status"] == "ok":
                line = (f"{T:>6} {touched:>7.1f}  {auto['path'] or '?':<7}{bench._fmt(auto['us'], '.1f', 9)}"
                        f"{bench._fmt(auto['pct_roofline'], '.0f', 6)}{bench._fmt(auto['vs_torch'], '.2f', 7)} |")
            else:
                line = f"{T:>6} {touched:>7.1f}  {'-':<7}{'-':>9}{'-':>6}{'-':>7} |"
                if auto is not None:
                    notes.setdefault(auto["note"] or auto["status"], len(notes) + 1)
            lines.append(line + bench._impl_cells(by_key, (model, T), others, notes)
                         + bench.peer_cell(by_key, (model, T), peer_names))
    return "\n".join(lines + bench._note_lines(notes))


def plot(doc: dict, path) -> str | None:
    """The PNG (time per layer vs T, one subplot per model) through bench.plot; None or why none was written."""
    cfg = doc["config"]
    rows = [{"model": r["model"], "layer": f"E={r['E']} top-{r['top_k']}", "K": r["H"], "N": r["I"], "M": r["T"],
             "impl": r["impl"], "status": r["status"], "us": r["us"], "us_min": r.get("us_min"),
             "us_max": r.get("us_max")} for r in doc["rows"]]
    shim = dict(doc, rows=rows, config=dict(cfg, m=cfg["tokens"]))
    return bench.plot(shim, path, title="swordfish bench --moe",
                      note=f"time per MoE layer, {bench._how_timed(doc)} and routings; lower is better",
                      panel_title=lambda model, layer, K, N: f"{model}  ({layer}, H={K}, I={N})",
                      xlabel="T (tokens, log)")


# ------------------------------------------------------------------ the torch baseline


def torch_moe(x, w13d, w2d, topk_weights, topk_ids, grouped: bool, counts=None):
    """The MoE layer in x.dtype with dense experts w13d [E, 2I, H], w2d [E, H, I] (SiLU on the gate half).

    ``grouped``: torch._grouped_mm over the experts (offsets computed on the
    device: graph-safe). Otherwise a torch.mm loop over the experts, which
    needs ``counts`` (rows per expert, a host list made before capture).
    """
    import torch
    import torch.nn.functional as F

    T, H = x.shape
    k = topk_ids.shape[1]
    E, I2, _ = w13d.shape
    flat = topk_ids.reshape(-1)
    expert_sorted, order = torch.sort(flat, stable=True)
    token = torch.div(order, k, rounding_mode="floor")
    xs = x.index_select(0, token)
    if grouped:
        bounds = torch.arange(1, E + 1, device=x.device, dtype=expert_sorted.dtype)
        offs = torch.searchsorted(expert_sorted, bounds, out_int32=True)
        h = torch._grouped_mm(xs, w13d.transpose(1, 2), offs=offs)
        a = F.silu(h[:, :I2 // 2]) * h[:, I2 // 2:]
        y = torch._grouped_mm(a, w2d.transpose(1, 2), offs=offs)
    else:
        y = torch.empty(xs.shape[0], H, dtype=x.dtype, device=x.device)
        start = 0
        for e, n in enumerate(counts):
            if n:
                h = xs[start:start + n] @ w13d[e].t()
                y[start:start + n] = (F.silu(h[:, :I2 // 2]) * h[:, I2 // 2:]) @ w2d[e].t()
                start += n
    y = y.float() * topk_weights.reshape(-1)[order].float().unsqueeze(1)
    return torch.zeros(T, H, dtype=torch.float32, device=x.device).index_add_(0, token, y).to(x.dtype)


def _grouped_mm_works(device, dtype) -> bool:
    import torch

    if not hasattr(torch, "_grouped_mm"):
        return False
    try:
        x = torch.zeros(4, 64, dtype=dtype, device=device)
        w = torch.zeros(2, 64, 64, dtype=dtype, device=device)
        torch._grouped_mm(x, w.transpose(1, 2), offs=torch.tensor([2, 4], dtype=torch.int32, device=device))
        return True
    except Exception:  # noqa: BLE001 - not on this device / dtype: the loop
        return False


# ------------------------------------------------------------------ running (CUDA)


def random_experts(E: int, K: int, N: int, cfg: Config, device, gen, sources: list | None = None):
    """QuantizedExperts of random codes on `device`, built through the checkpoint converters; scales make
    each output O(1) for O(1) inputs (1 / sqrt(K E[(q - zero)^2])). `sources`, when given, receives the
    checkpoint tensors they were built from: GPTQ (qweight [E, K * bits / 32, N], scales [E, rows, N]), or AWQ
    (qweight [E, K, N / 8], scales, qzeros [E, rows, N / 8])."""
    import torch

    from .moe import QuantizedExperts

    torch_dtype = getattr(torch, bench.DTYPES[cfg.dtype])
    groups = 1 if cfg.group == -1 else K // cfg.group
    spread = ((1 << (2 * cfg.bits)) - 1) / 12.0 + 0.25  # E[(q - bias)^2] for uniform codes
    if cfg.zero_points:
        spread *= 2

    def words(*shape):
        return torch.randint(-2**31, 2**31, shape, generator=gen, dtype=torch.int64, device=device).to(torch.int32)

    scales = ((torch.rand(E, groups, N, generator=gen, device=device) * 0.5 + 0.75)
              / math.sqrt(spread * K)).to(torch_dtype)
    if cfg.zero_points:
        qweight, qzeros = words(E, K, N // 8), words(E, groups, N // 8)
        if sources is not None:
            sources.append((qweight, scales, qzeros))
        return QuantizedExperts.from_awq(qweight, qzeros, scales, group_size=cfg.group, dtype=torch_dtype)
    g_idx = None
    if cfg.act_order:
        base = torch.arange(K, device=device) // cfg.group
        g_idx = torch.stack([base[torch.randperm(K, generator=gen, device=device)] for _ in range(E)]).to(torch.int32)
    qweight = words(E, K * cfg.bits // 32, N)
    if sources is not None:
        sources.append((qweight, scales))
    return QuantizedExperts.from_gptq(qweight, scales, g_idx, bits=cfg.bits, group_size=cfg.group, dtype=torch_dtype)


def prepare_peers(cfg: Config, state: dict, preset, w13s: list, w2s: list) -> dict:
    """{peer: [f(x, topk_weights, topk_ids) per weight copy]} for the peers that run this model, {peer: (status,
    note)} for the others; w13s / w2s: each copy's checkpoint tensors (random_experts' sources)."""
    import torch

    torch_dtype = getattr(torch, bench.DTYPES[cfg.dtype])
    out = {}
    for name in cfg.peers:
        a = peers.ADAPTERS[name]
        why = state[name] or a.supports(preset.E, preset.H, preset.I, bits=cfg.bits, group=cfg.group,
                                        dtype=torch_dtype, zero_points=cfg.zero_points, act_order=cfg.act_order)
        if why:
            out[name] = ("unavailable", f"{name}: {why}")
            continue
        try:
            out[name] = [a.prepare(w13, w2, bits=cfg.bits, group=cfg.group, dtype=torch_dtype)
                         for w13, w2 in zip(w13s, w2s)]
        except Exception as e:  # noqa: BLE001 - recorded, the rest runs
            out[name] = ("error", f"{name}: preparing the experts failed: {peers.first_line(e)}")
    return out


def _copies(touched_bytes: int, full_bytes: int, l2: int, free: int) -> int:
    """Weight copies: enough that the experts touched at T = 1 exceed L2_MULTIPLE x L2, as many as fit."""
    want = bench._copies(touched_bytes, l2, 1 << 62)
    return int(max(1, min(want, (free // 4) // max(full_bytes, 1))))


def total_steps(cfg: Config) -> int:
    return len(cfg.models) * len(cfg.tokens) * len([i for i in cfg.impls if i != "roofline"])


def run(cfg: Config, progress=None) -> dict:
    """Check, then time, every (model, T, implementation) of `cfg` on the GPU; returns the result document."""
    import torch

    from . import moe

    device, info = bench._setup(cfg.device_index)
    torch_dtype = getattr(torch, bench.DTYPES[cfg.dtype])
    gen = torch.Generator(device=device)
    gen.manual_seed(cfg.seed)
    ceilings = bench.measure_ceilings(device, torch_dtype)
    det = 1 if cfg.deterministic else 0
    l2 = info["l2_bytes"] or bench.L2_UNKNOWN
    stream = torch.cuda.Stream(device) if device.type == "cuda" else None
    paths = ops.moe_paths()
    grouped = _grouped_mm_works(device, torch_dtype)
    kernel_impls = [i for i in cfg.impls if i in paths]
    state = {name: peers.reason(name, cfg.peer_source, device) for name in cfg.peers}
    rows = []
    for p in cfg.models:
        E, k, H, I = p.E, p.top_k, p.H, p.I  # noqa: E741
        per_expert = expert_bytes(H, I, cfg.bits, cfg.group, cfg.zero_points, cfg.act_order)
        dense_per_expert = 3 * H * I * 2
        free = bench._free_bytes(device)
        nq = _copies(k * per_expert, E * per_expert, l2, free)
        nd = _copies(k * dense_per_expert, E * dense_per_expert, l2, free) if BASELINE in cfg.impls else 0
        sources: list = []  # checkpoint tensors of each copy, w13 then w2 (for the peers)
        qcopies = [(random_experts(E, H, 2 * I, cfg, device, gen, sources),
                    random_experts(E, I, H, cfg, device, gen, sources)) for _ in range(nq)]
        peer_fns = prepare_peers(cfg, state, p, sources[0::2], sources[1::2])
        del sources
        dcopies = [(w13.dequantize(), w2.dequantize()) for w13, w2 in (qcopies[c % nq] for c in range(nd))]
        sets = max(nq, nd)
        for T in cfg.tokens:
            routing = [make_routing(T, E, k, p.renormalize, gen, device) for _ in range(sets)]
            xs = [torch.randn(T, H, generator=gen, device=device, dtype=torch.float32).to(torch_dtype)
                  for _ in range(sets)]
            touched = [int(torch.unique(ids).numel()) for ids, _ in routing]
            mean_touched = sum(touched) / sets
            tbytes = int(round(mean_touched * per_expert))
            w13, w2 = qcopies[0]
            ref = moe.reference_moe(xs[0], w13, w2, routing[0][1], routing[0][0], dtype=torch.float32)
            calls, checked, fns = {}, {}, []
            for impl in cfg.impls:
                if impl == "roofline":
                    continue
                if impl in cfg.peers:
                    if isinstance(peer_fns[impl], tuple):
                        checked[impl] = {"status": peer_fns[impl][0], "note": peer_fns[impl][1]}
                        continue
                    fns = [functools.partial(peer_fns[impl][c % nq], xs[c], routing[c][1], routing[c][0])
                           for c in range(sets)]
                elif impl == BASELINE:
                    counts = [None] * sets if grouped else [
                        torch.bincount(ids.reshape(-1).long(), minlength=E).tolist() for ids, _ in routing]
                    fns = [functools.partial(torch_moe, xs[c], *dcopies[c % nd], routing[c][1], routing[c][0],
                                             grouped, counts[c]) for c in range(sets)]
                else:
                    fns = [functools.partial(ops.fused_moe, *moe.op_args(
                        xs[c], *qcopies[c % nq], routing[c][1], routing[c][0], path=paths[impl],
                        deterministic=bool(det))) for c in range(sets)]
                try:  # the check, on routing set 0
                    err = moe.output_error(fns[0](), ref, H=H, I=I, top_k=k, dtype=torch_dtype)
                except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                    status, note = bench.failure(impl, e)
                    checked[impl] = {"status": status, "note": note}
                    continue
                checked[impl] = {"err": err}
                if err > 1:
                    checked[impl].update(status="error", note=f"{impl}: wrong result, error {err:.3g}x the tolerance "
                                                              "against reference_moe")
                    continue
                calls[impl] = fns

            def path_of(impl):
                if impl == "auto":
                    return ops.moe_path_name(ops.last_moe_path(cfg.device_index))
                return impl if impl in kernel_impls else None

            timed = bench.time_point(calls, stream, cfg.rounds, cfg.device_index, path_of=path_of) if calls else {}
            for impl in cfg.impls:
                base = dict(touched=mean_touched, touched_bytes=tbytes)
                if impl == "roofline":
                    roof, hbm, compute = roofline_us(T, k, H, I, tbytes, ceilings)
                    rows.append(make_row(p, T, impl, us=roof, hbm_floor_us=hbm, compute_floor_us=compute, **base))
                    continue
                c = checked[impl]
                if "status" in c:
                    rows.append(make_row(p, T, impl, status=c["status"], note=c["note"], err=c.get("err"), **base))
                else:
                    rows.append(make_row(p, T, impl, err=c["err"], **bench.timed_fields(timed[impl]), **base))
                if progress is not None:
                    progress.step(f"{p.name} T={T} {impl}")
            del routing, xs, calls, ref, fns
            if device.type == "cuda":
                torch.cuda.empty_cache()
        del qcopies, dcopies, peer_fns
        if device.type == "cuda":
            torch.cuda.empty_cache()
    config = {"models": [p.name for p in cfg.models], "tokens": list(cfg.tokens), "bits": cfg.bits,
              "group": cfg.group, "dtype": cfg.dtype, "impls": list(cfg.impls), "zero_points": cfg.zero_points,
              "act_order": cfg.act_order, "deterministic": cfg.deterministic,
              "torch_moe": ("grouped_mm" if grouped else "loop") if BASELINE in cfg.impls else None}
    if cfg.peers:
        config["peers"] = peers.describe(cfg.peers, cfg.peer_source)
    return make_result(rows, device=info, config=config, ceilings=ceilings, commit=cfg.commit, rounds=cfg.rounds,
                       torch_version=torch.__version__, cuda_version=torch.version.cuda)
