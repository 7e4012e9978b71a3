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
projection; they are served by ``sf.QuantizedExperts`` (fused MoE), which
this command does not check yet.

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
    res.err = max(res.errs.values())
    if not res.err <= 1:
        worst = max(res.errs, key=lambda k: res.errs[k])
        res.status = "FAIL"
        res.note = (f"{worst}: error {res.err:.3g}x the tolerance" if math.isfinite(res.err)
                    else f"{worst}: NaN/Inf in the output")
    return res


def moe_results(ck) -> list[LayerResult]:
    out = []
    for g in ck.expert_groups:
        e = g.first
        reason = g.reason
        out.append(LayerResult(name=g.name, format=e.format, K=e.K, N=e.N, group=e.group_label,
                               status="n/a" if reason else "moe", note=reason or MOE_NOTE, experts=g.num_experts))
    return out


def run(ck, ms, *, gpu: bool, device_index: int = 0, seed: int = 0, progress=None, device=None) -> list[LayerResult]:
    """check_layer for every dense layer, then one line per MoE expert group."""
    results = []
    for layer in ck.layers:
        results.append(check_layer(ck, layer, ms, gpu=gpu, device_index=device_index, seed=seed, device=device))
        if progress is not None:
            progress.step(layer.name)
    return results + moe_results(ck)


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
    width = max([len(r.name) for r in results] + [5]) + 2
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
        name = r.name + (f" (x{r.experts})" if r.experts else "")
        lines.append(f"{name:<{width}}{r.format:<{fw}}{shape:>13}{r.group:>7}{err:>9}  {status:<7} {path}")
    if notes:
        lines.append("")
        for text, mark in notes.items():
            lines.append(f"[{mark}] {text}")
    return "\n".join(lines)


def verdict(results: list[LayerResult], ms, gpu: bool) -> str:
    c = summarize(results)
    dense = [r for r in results if not r.experts]
    served = [r for r in dense if r.status in ("ok", "FAIL")]
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
    if c["FAIL"]:
        bad = [r.name for r in results if r.status == "FAIL"]
        names = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        return f"verdict: FAIL: {c['FAIL']} of {len(served)} layers failed ({names}); checked {where}{extra}"
    if not served:
        return f"verdict: NOTHING CHECKED: none of the {len(dense)} quantized dense layers can be served by " \
               f"Swordfish{extra}"
    return (f"verdict: PASS: all {len(served)} servable layers load through Swordfish's loaders and match within "
            f"tolerance; checked {where}{extra}")


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

    try:
        ck = scan.scan(args.checkpoint)
    except scan.CheckpointError as e:
        raise cli.UsageError(f"--checkpoint: {e}") from None
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
    progress = bench.Progress(len(ck.layers), enabled=not args.quiet)
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
