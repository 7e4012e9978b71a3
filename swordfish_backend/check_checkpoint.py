"""`swordfish check --checkpoint DIR`: every quantized layer of a real checkpoint through our loaders and kernels.

For each quantized linear layer that ``checkpoint_scan`` finds (one at a time:
its tensors are read, checked and dropped before the next layer's):

* ``load``: the layer goes through ``QuantizedWeight.from_gptq / from_awq /
  from_compressed_tensors``; an exception is a failure (vLLM would load it the
  same way and fail the same way);
* ``dequant``: ``w.dequantize()`` (the reference path) against
  ``checkpoint_scan.oracle_weight``, the weight dequantized straight from the
  checkpoint's tensors by separate code: a misread layout shows up here;
* at each M (default 1, 16, 256, 2048): on a GPU with the extension,
  ``sf.matmul`` (the dispatcher's ``auto`` path; the path it took is read back
  with ``ops.last_path``) against the fp32 reference (``reference.dequantize``
  in fp64, the operand the kernels must reproduce); without one, the CPU
  reference path (``sf.matmul`` on CPU) against the oracle's fp64 product, at
  tiny M only, and the report says that no kernel was run.

The error is check.py's: the worst ratio of error to tolerance (<= 1 passes;
the tolerance grows with K and the dtype's rounding unit, see check.py). A
layer Swordfish cannot serve is listed with the reason vLLM would fall back
(``vllm.selection.support_reason``, the plugin's can_implement predicate, or
the format's own limits), and is not a failure. MoE experts are grouped per
projection; a block with gate, up and down experts goes through
``sf.QuantizedExperts`` (each projection's dequantization per expert against
the oracle) and ``sf.fused_moe`` (w13 = [gate | up], random top-k routing,
M tokens) against ``moe.reference_moe`` on a GPU, an fp64 oracle on CPU, with
``moe.output_error``'s tolerance.

Exit codes (cli.py): 0 no failure, 1 a layer failed, 2 not a supported
checkpoint, 3 --require-gpu without a GPU.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

from . import checkpoint_scan as scan

GPU_MS = (1, 16, 256, 2048)
CPU_MS = (1, 16)
MOE_NOTE = "MoE experts: served through sf.QuantizedExperts (not checked here yet)"


@dataclass
class LayerResult:
    name: str
    format: str
    K: int
    N: int
    group: str
    status: str                          # ok | FAIL | n/a | moe
    err: float | None = None             # worst error / tolerance over dequant and every M
    errs: dict = field(default_factory=dict)    # "dequant" / "M=16" -> error / tolerance
    paths: dict = field(default_factory=dict)   # M -> path that ran ("reference" on CPU)
    note: str | None = None              # the failure, or why not served
    experts: int = 0                     # > 0: an MoE expert group


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


def check_layer(ck, layer, ms, *, gpu: bool, device_index: int = 0, seed: int = 0, device=None) -> LayerResult:
    """Load one layer through our loaders and check it (see the module doc).

    gpu=True checks the kernels on CUDA device `device_index`; `device` overrides where the tensors live
    (tests run the kernel-checking logic on CPU with a faked op)."""
    import torch

    from . import check, ops
    from .reference import dequantize as ref_dequantize
    from .weight import matmul

    res = LayerResult(name=layer.name, format=layer.format, K=layer.K, N=layer.N, group=layer.group_label,
                      status="ok")
    if not layer.served:
        res.status, res.note = "n/a", layer.reason
        return res
    dtype = scan.torch_dtype(ck.act_dtype)
    u = check.unit_roundoff(dtype)
    if device is None:
        device = torch.device("cuda", device_index) if gpu else torch.device("cpu")
    try:
        # on a GPU the tensors move first, so the loader prepacks there (what vLLM does)
        w, bias, t = scan.load_weight(ck, layer, dtype, device=device if gpu else None)
    except Exception as e:  # noqa: BLE001 - a layer vLLM would fail to load: reported, the run goes on
        res.status, res.note = "FAIL", f"loader: {_first_line(e)}"
        return res
    try:
        truth, zabs = scan.oracle_weight(layer, t, dtype)
        del t
        # CPU: the reference path's dequantization; GPU: the extension's dequantize kernel
        res.errs["dequant"] = check.dequant_error(w.dequantize(), truth, zabs, u)
        del zabs
        # the operand the kernels must reproduce (fp32 reference, in fp64); on CPU the oracle itself
        target = ref_dequantize(w, torch.float64) if gpu else truth
        del truth
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        b64 = 0.0 if bias is None else bias.to(torch.float64)
        for M in ms:
            x = torch.randn(M, layer.K, generator=gen, device=device, dtype=torch.float32).to(dtype)
            ref = x.to(torch.float64) @ target.t() + b64
            y = matmul(x, w, bias)
            res.paths[M] = ops.PATH_NAMES.get(ops.last_path(device_index), "?") if gpu else "reference"
            res.errs[f"M={M}"] = check.output_error(y, ref, u, layer.K)
            del x, ref, y
    except Exception as e:  # noqa: BLE001
        res.status, res.note = "FAIL", _first_line(e)
        return res
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return _judge(res)


def _judge(res: LayerResult) -> LayerResult:
    """Set res.err to the worst of res.errs and FAIL it, naming the worst M, when that is over the tolerance."""
    res.err = max(res.errs.values())
    if not res.err <= 1:
        worst = max(res.errs, key=lambda k: res.errs[k])
        res.status = "FAIL"
        res.note = (f"{worst}: error {res.err:.3g}x the tolerance" if math.isfinite(res.err)
                    else f"{worst}: NaN/Inf in the output")
    return res


def moe_results(ck) -> list[LayerResult]:
    """One unchecked line per expert group (MOE_NOTE, or the reason it cannot be served)."""
    out = []
    for g in ck.expert_groups:
        e = g.first
        reason = g.reason
        out.append(LayerResult(name=g.name, format=e.format, K=e.K, N=e.N, group=e.group_label,
                               status="n/a" if reason else "moe", note=reason or MOE_NOTE, experts=g.num_experts))
    return out


def _activation(config: dict) -> tuple[str | None, str | None]:
    act = str(config.get("hidden_act", config.get("hidden_activation", "silu"))).lower()
    if act in ("silu", "swish"):
        return "silu", None
    if act == "gelu":
        return "gelu", None
    return None, f"activation {act!r}: sf.fused_moe runs silu and gelu (erf)"


def check_moe_block(ck, prefix: str, groups, ms, *, gpu: bool, device_index: int = 0, seed: int = 0,
                    device=None) -> list[LayerResult]:
    """The experts of one MoE block through sf.QuantizedExperts: each projection's dequantization against the
    checkpoint's own tensors (per expert), then sf.fused_moe (w13 = [gate | up], w2 = down) at each token count M
    with random top-k routing, against reference_moe on a GPU or an fp64 oracle on CPU (moe.output_error)."""
    import torch

    from . import check, moe, ops

    dtype = scan.torch_dtype(ck.act_dtype)
    u = check.unit_roundoff(dtype)
    if device is None:
        device = torch.device("cuda", device_index) if gpu else torch.device("cpu")
    gate, up, down = groups
    E, H, I = gate.num_experts, gate.first.K, gate.first.N  # noqa: E741
    rows = [LayerResult(name=g.name, format=g.first.format, K=g.first.K, N=g.first.N, group=g.first.group_label,
                        status="ok", experts=g.num_experts) for g in groups]
    fused = LayerResult(name=f"{prefix}:fused_moe", format=gate.first.format, K=H, N=I,
                        group=gate.first.group_label, status="ok", experts=E)
    reason = next((g.reason for g in groups if g.reason), None)
    if reason is None and not (up.num_experts == down.num_experts == E and up.first.K == H and down.first.K == I
                               and down.first.N == H and up.first.N == I):
        reason = f"gate / up / down of {prefix} do not form an MoE layer ({E}, {up.num_experts}, " \
                 f"{down.num_experts} experts)"
    if reason:
        for r in rows + [fused]:
            r.status, r.note = "n/a", reason
        return rows + [fused]
    truth: dict = {}  # (group index, expert) -> fp64 weight: CPU only (the oracle of the fused check)
    w2 = None
    for gi, (g, r) in enumerate(zip(groups, rows)):
        try:
            experts, reads = scan.load_experts(ck, [g], dtype, device=device if gpu else None)
            deq = experts.dequantize()
            for e, layer in enumerate(g.experts):
                t = {role: v[e] for role, v in reads[0].items()}
                w, zabs = scan.oracle_weight(layer, t, dtype)
                r.errs[f"dequant e{e}"] = check.dequant_error(deq[e], w, zabs, u)
                if not gpu:
                    truth[(gi, e)] = w
            r.err = max(r.errs.values())
            if not r.err <= 1:
                worst = max(r.errs, key=lambda k: r.errs[k])
                r.status, r.note = "FAIL", f"{worst}: error {r.err:.3g}x the tolerance"
            if gi == 2:
                w2 = experts
            del deq, reads
        except Exception as e:  # noqa: BLE001
            r.status, r.note = "FAIL", f"loader: {_first_line(e)}"
    activation, why = _activation(ck.config)
    if gpu and device.type == "cuda" and not why and not ops.has_moe():
        why = f"the MoE ops are not in this build: {ops.moe_error()}"
    if why or w2 is None:
        fused.status, fused.note = ("n/a", why) if why else ("FAIL", "a projection failed to load")
        return rows + [fused]
    k = max(1, min(int(ck.config.get("num_experts_per_tok", 2) or 2), E))
    try:
        w13, _ = scan.load_experts(ck, [gate, up], dtype, device=device if gpu else None)
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        for T in ms:
            x = torch.randn(T, H, generator=gen, device=device, dtype=torch.float32).to(dtype)
            logits = torch.randn(T, E, generator=gen, device=device, dtype=torch.float32)
            weights, ids = torch.topk(torch.softmax(logits, -1), k, dim=-1)
            weights = weights / weights.sum(-1, keepdim=True)
            ids = ids.to(torch.int32)
            y = moe.fused_moe(x, w13, w2, weights, ids, activation=activation)
            if gpu:
                fused.paths[T] = ops.moe_path_name(ops.last_moe_path(device_index))
                ref = moe.reference_moe(x, w13, w2, weights, ids, activation=activation, dtype=torch.float32)
            else:
                fused.paths[T] = "reference"
                ref = _moe_oracle(x, weights, ids, truth, I, activation)
            fused.errs[f"M={T}"] = moe.output_error(y, ref, H=H, I=I, top_k=k)
    except Exception as e:  # noqa: BLE001
        fused.status, fused.note = "FAIL", _first_line(e)
        return rows + [fused]
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows + [_judge(fused)]


def _moe_oracle(x, weights, ids, truth: dict, I: int, activation: str):  # noqa: E741
    """fp64 MoE layer from the checkpoint's own dequantized experts (truth[(0|1|2, e)] = gate, up, down)."""
    import torch
    import torch.nn.functional as F

    x64 = x.to(torch.float64)
    act = F.silu if activation == "silu" else (lambda g: F.gelu(g, approximate="none"))
    y = torch.zeros(x.shape[0], truth[(2, 0)].shape[0], dtype=torch.float64)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            a = act(x64[t] @ truth[(0, e)].t()) * (x64[t] @ truth[(1, e)].t())
            y[t] += float(weights[t, j]) * (a @ truth[(2, e)].t())
    return y


def run(ck, ms, *, gpu: bool, device_index: int = 0, seed: int = 0, progress=None, device=None) -> list[LayerResult]:
    """check_layer for every dense layer, check_moe_block for every MoE block (gate, up and down experts), and
    one unchecked line for expert groups outside such a block."""
    results = []
    for layer in ck.layers:
        results.append(check_layer(ck, layer, ms, gpu=gpu, device_index=device_index, seed=seed, device=device))
        if progress is not None:
            progress.step(layer.name)
    blocks = scan.moe_blocks(ck)
    in_block = {g.name for _, groups in blocks for g in groups}
    for prefix, groups in blocks:
        results += check_moe_block(ck, prefix, groups, ms, gpu=gpu, device_index=device_index, seed=seed,
                                   device=device)
        if progress is not None:
            progress.step(f"{prefix} ({groups[0].num_experts} experts)")
    return results + [r for r in moe_results(ck) if r.name not in in_block]


def total_steps(ck) -> int:
    return len(ck.layers) + len(scan.moe_blocks(ck))


# ------------------------------------------------------------------ report


def summarize(results: list[LayerResult]) -> dict:
    return {s: sum(1 for r in results if r.status == s) for s in ("ok", "FAIL", "n/a", "moe")}


def header(ck, ms, gpu: bool, where: str) -> str:
    shards = len(ck.shards)
    moe = f", {sum(g.num_experts for g in ck.expert_groups)} MoE expert projections in " \
          f"{len(ck.expert_groups)} groups" if ck.expert_groups else ""
    lines = [f"checkpoint {ck.path}: {ck.description}",
             f"  {len(ck.layers)} quantized linear layers{moe}, {shards} shard{'s' if shards != 1 else ''}; "
             f"{len(ck.unquantized)} linear layers left unquantized",
             f"  activations {ck.act_dtype}" + (f" ({ck.act_dtype_note})" if ck.act_dtype_note else "") +
             f"; M = {', '.join(map(str, ms))}; {where}"]
    return "\n".join(lines)


def format_table(results: list[LayerResult], ms, gpu: bool) -> str:
    def shown(r):
        return r.name + (f" (x{r.experts})" if r.experts else "")

    width = max([len(shown(r)) for r in results] + [5]) + 2
    fw = max([len(r.format) for r in results] + [6]) + 2
    path_head = "path (M=" + "/".join(map(str, ms)) + ")" if gpu else "path"
    lines = [f"{'layer':<{width}}{'format':<{fw}}{'K x N':>13}{'group':>7}{'err/tol':>9}  {'status':<7} {path_head}"]
    notes: dict = {}
    for r in results:
        shape = f"{r.K} x {r.N}"
        err = "-" if r.err is None else (f"{r.err:.3f}" if math.isfinite(r.err) else "inf")
        if r.status in ("ok", "FAIL") and r.paths:
            ps = [r.paths.get(m, "-") for m in ms]
            path = ps[0] if len(set(ps)) == 1 else "/".join(ps)
        else:
            path = "-"
        status = r.status
        if r.note:
            status += f"[{notes.setdefault(r.note, len(notes) + 1)}]"
        lines.append(f"{shown(r):<{width}}{r.format:<{fw}}{shape:>13}{r.group:>7}{err:>9}  {status:<7} {path}")
    if notes:
        lines.append("")
        for text, mark in notes.items():
            lines.append(f"[{mark}] {text}")
    return "\n".join(lines)


def verdict(results: list[LayerResult], ms, gpu: bool) -> str:
    c = summarize(results)
    checked = [r for r in results if r.status in ("ok", "FAIL")]
    n_dense = sum(1 for r in checked if not r.experts)
    n_moe = len(checked) - n_dense
    at = f"at M = {', '.join(map(str, ms))}"
    where = (f"{at}, the GPU kernels (auto path) against the fp32 reference" if gpu else
             f"{at} on the CPU reference path only: NO GPU KERNEL WAS RUN")
    tail = []
    na = [r for r in results if r.status == "n/a"]
    if na:
        tail.append(f"{len(na)} not served by Swordfish (vLLM uses its own kernels for them; reasons above)")
    if c["moe"]:
        tail.append(f"{c['moe']} MoE expert group{'s' if c['moe'] != 1 else ''} not checked here")
    extra = ("; " + "; ".join(tail)) if tail else ""
    parts = ([f"{n_dense} servable layers"] if n_dense or not n_moe else []) + \
        ([f"{n_moe} MoE expert checks"] if n_moe else [])
    what = " and ".join(parts)
    if c["FAIL"]:
        bad = [r.name for r in results if r.status == "FAIL"]
        names = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        return f"verdict: FAIL: {c['FAIL']} of {len(checked)} checks failed ({names}); checked {where}{extra}"
    if not checked:
        return f"verdict: NOTHING CHECKED: none of the quantized layers can be served by Swordfish{extra}"
    return (f"verdict: PASS: all {what} load through Swordfish's loaders and match within tolerance; "
            f"checked {where}{extra}")


def _finite(v):
    return v if not isinstance(v, float) or math.isfinite(v) else str(v)


def to_json(ck, results, ms, gpu: bool, why_not_gpu) -> dict:
    layers = []
    for r in results:
        d = asdict(r)
        d["err"] = _finite(r.err)
        d["errs"] = {k: _finite(v) for k, v in r.errs.items()}
        d["paths"] = {str(k): v for k, v in r.paths.items()}
        layers.append(d)
    return {"checkpoint": str(ck.path), "description": ck.description, "method": ck.method,
            "act_dtype": ck.act_dtype, "gpu": gpu, "why_not_gpu": why_not_gpu, "m": list(ms),
            "summary": summarize(results), "verdict": verdict(results, ms, gpu),
            "layers": layers}


# ------------------------------------------------------------------ the command


def command(args) -> int:
    """`swordfish check --checkpoint DIR` (called by cli.cmd_check)."""
    from . import bench, cli, presets

    ck = cli.scan_checkpoint(args, (("--formats", args.formats), ("--bits", args.bits), ("--group", args.group),
                                    ("--shapes", args.shapes), ("--paths", args.paths), ("--quick", args.quick)),
                             "the checkpoint gives the layers and their format; check runs the dispatcher's auto path")
    ok, why = (False, "--cpu was given") if args.cpu else cli.gpu_status(args.device)
    if not ok and args.require_gpu:
        cli._warn(f"swordfish check: {why}; --require-gpu was given, so nothing was checked.")
        return cli.EXIT_UNAVAILABLE
    try:
        ms = presets.parse_m(args.m) if args.m else list(GPU_MS if ok else CPU_MS)
    except ValueError as e:
        raise cli.UsageError(str(e)) from None
    if ok:
        import torch

        where = f"GPU kernels on device {args.device} ({torch.cuda.get_device_name(args.device)})"
    else:
        where = f"{why}: CPU reference path only, NO GPU KERNELS WERE RUN"
    cli._say(header(ck, ms, ok, where))
    cli._say("")
    progress = bench.Progress(total_steps(ck), enabled=not args.quiet)
    try:
        results = run(ck, ms, gpu=ok, device_index=args.device, seed=args.seed, progress=progress)
    finally:
        progress.close()
    cli._say(format_table(results, ms, ok))
    cli._say("")
    cli._say(verdict(results, ms, ok))
    if args.json:
        from pathlib import Path

        Path(args.json).write_text(json.dumps(to_json(ck, results, ms, ok, None if ok else why), indent=1,
                                              allow_nan=False) + "\n")
        cli._say(f"wrote {args.json}")
    return cli.EXIT_FAILED if summarize(results)["FAIL"] else cli.EXIT_OK
