"""`swordfish bench --checkpoint DIR`: the model's distinct GEMMs, timed once each, and the whole-model sum.

A model repeats a handful of layer shapes (every decoder layer has the same
q, k, v, o, gate, up, down). ``distinct_shapes`` reduces the checkpoint's
servable dense layers to its distinct GEMMs, keyed by (K, N, bits, group,
zero points, act-order), each with its multiplicity in the model. Sibling
projections that vLLM runs as one GEMM (``FUSED``: q/k/v -> qkv,
gate/up -> gate_up, BERT's query/key/value) are merged first, N added up, when
they share K and format, so the shapes are the GEMMs vLLM runs at tensor
parallelism 1.

Each format's shapes are timed by ``bench.run`` (its interleaved CUDA-graph
rounds over rotating random weights of that format, cuBLAS on a dense weight
of the same shape, the roofline from ceilings measured in the same run): no
second timing loop. ``totals`` then adds multiplicity x time over the shapes
at each M, per implementation (auto, cuBLAS, roofline), for the whole-model
GEMM time of one forward step of M tokens and per token (/ M). Layers
Swordfish does not serve, unquantized layers (lm_head, say), MoE experts
(``swordfish bench --moe``), attention and norms are not in the sum: the
report lists what is left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path


FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"), ("query", "key", "value"))
TOTAL_IMPLS = ("auto", "cublas", "roofline")


@dataclass
class Gemm:
    """One GEMM vLLM runs: a layer, or sibling layers fused along N."""

    name: str                 # e.g. model.layers.3.self_attn.q_proj+k_proj+v_proj
    K: int
    N: int
    bits: int
    group: int
    zero_points: bool
    act_order: bool
    members: list             # layer names


@dataclass
class Shape:
    label: str
    K: int
    N: int
    bits: int
    group: int
    zero_points: bool
    act_order: bool
    count: int = 0
    layers: list = field(default_factory=list)   # Gemm names

    @property
    def fmt(self) -> tuple:
        return (self.bits, self.group, self.zero_points, self.act_order)

    @property
    def fmt_label(self) -> str:
        g = "cw" if self.group == -1 else f"g{self.group}"
        return f"int{self.bits} {g}" + (" zp" if self.zero_points else "") + (" act" if self.act_order else "")


def _fmt(layer) -> tuple:
    return (layer.bits, layer.group, layer.zero_points, layer.act_order)


def gemms(layers: list) -> list[Gemm]:
    """Servable dense layers -> the GEMMs vLLM runs (FUSED siblings merged when K and format agree)."""
    by_parent: dict = {}
    for layer in layers:
        parent, _, leaf = layer.name.rpartition(".")
        by_parent.setdefault(parent, {})[leaf] = layer
    out, used = [], set()
    for layer in layers:
        if layer.name in used:
            continue
        parent, _, leaf = layer.name.rpartition(".")
        siblings = by_parent[parent]
        group = next((g for g in FUSED if leaf in g), None)
        if group and all(s in siblings for s in group) and \
                len({(siblings[s].K, _fmt(siblings[s])) for s in group}) == 1:
            members = [siblings[s] for s in group]
            name = f"{parent}.{'+'.join(group)}" if parent else "+".join(group)
        else:
            members = [layer]
            name = layer.name
        used.update(m.name for m in members)
        out.append(Gemm(name=name, K=layer.K, N=sum(m.N for m in members), bits=layer.bits, group=layer.group,
                        zero_points=layer.zero_points, act_order=layer.act_order, members=[m.name for m in members]))
    return out


def normalize(name: str) -> str:
    """model.layers.12.mlp.down_proj -> model.layers.*.mlp.down_proj"""
    return re.sub(r"\.\d+(?=\.|$)", ".*", name)


def distinct_shapes(ck) -> tuple[list[Shape], list[tuple[str, str]]]:
    """(the distinct GEMM shapes with their multiplicity, [(what, why)] left out of the timing)."""
    served = [layer for layer in ck.layers if layer.served]
    shapes: dict = {}
    for g in gemms(served):
        key = (g.K, g.N, g.bits, g.group, g.zero_points, g.act_order)
        s = shapes.setdefault(key, Shape(label="", K=g.K, N=g.N, bits=g.bits, group=g.group,
                                         zero_points=g.zero_points, act_order=g.act_order))
        s.count += 1
        s.layers.append(g.name)
    out = list(shapes.values())
    for s in out:
        names = list(dict.fromkeys(normalize(n) for n in s.layers))
        s.label = names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1} more)"
    seen: dict = {}
    for s in out:  # two shapes whose layers read alike (a model whose layers differ in size): tell them apart
        seen.setdefault(s.label, []).append(s)
    for label, same in seen.items():
        if len(same) > 1:
            for s in same:
                s.label = f"{label} [{s.K}x{s.N}]"
    left_out = [(layer.name, layer.reason) for layer in ck.layers if not layer.served]
    left_out += [(f"{g.name} (x{g.num_experts})", "MoE experts: timed by swordfish bench --moe, not here")
                 for g in ck.expert_groups]
    if ck.unquantized:
        left_out.append((f"{len(ck.unquantized)} unquantized linear layer(s), e.g. {ck.unquantized[0]}",
                         "not quantized in this checkpoint"))
    return out, left_out


def format_shapes(ck, shapes: list[Shape], left_out: list) -> str:
    total = sum(s.count for s in shapes)
    lines = [f"checkpoint {ck.path}: {ck.description}",
             f"  {total} GEMMs per forward step in {len(shapes)} distinct shapes (q/k/v and gate/up fused as vLLM "
             f"runs them), activations {ck.act_dtype}", "",
             f"{'count':>5}  {'K':>6} {'N':>6}  {'format':<16} layers"]
    for s in shapes:
        lines.append(f"{s.count:>5}  {s.K:>6} {s.N:>6}  {s.fmt_label:<16} {s.label}")
    if left_out:
        lines.append("")
        lines.append("not timed:")
        for what, why in left_out:
            lines.append(f"  {what}: {why}")
    return "\n".join(lines)


def configs(ck, shapes: list[Shape], *, m, impls, dtype: str, deterministic: bool, device_index: int, seed: int,
            rounds: int, commit) -> list:
    """One bench.Config per weight format, each layer a presets.Layer named by its shape's label."""
    from . import bench, presets

    model = ck.path.name or str(ck.path)
    by_fmt: dict = {}
    for s in shapes:
        by_fmt.setdefault(s.fmt, []).append(s)
    out = []
    for (bits, group, zp, act), mine in by_fmt.items():
        out.append(bench.Config(layers=[(model, presets.Layer(s.label, s.K, s.N)) for s in mine], m=list(m),
                                bits=bits, group=group, dtype=dtype, impls=tuple(impls), zero_points=zp,
                                act_order=act, deterministic=deterministic, device_index=device_index, seed=seed,
                                models=[model], commit=commit, rounds=rounds))
    return out


def totals(shapes: list[Shape], docs: list, ms) -> list[dict]:
    """[{M, impl, us, per_token_us, missing}]: sum over shapes of count x us (None when a shape has no time)."""
    us = {}
    for doc in docs:
        for r in doc["rows"]:
            if r["status"] == "ok" and r["us"] is not None:
                us[(r["layer"], r["K"], r["N"], r["M"], r["impl"])] = r["us"]
    out = []
    for M in ms:
        for impl in TOTAL_IMPLS:
            parts = [us.get((s.label, s.K, s.N, M, impl)) for s in shapes]
            missing = [s.label for s, p in zip(shapes, parts) if p is None]
            total = None if missing or not shapes else sum(s.count * p for s, p in zip(shapes, parts))
            out.append({"M": M, "impl": impl, "us": total, "per_token_us": None if total is None else total / M,
                        "missing": missing})
    return out


def format_totals(rows: list[dict], n_gemms: int) -> str:
    by = {(r["M"], r["impl"]): r for r in rows}
    ms = sorted({r["M"] for r in rows})
    lines = [f"whole-model GEMM time of one forward step ({n_gemms} GEMMs; sum of count x time per shape)",
             f"{'M':>6}  {'swordfish us':>13}{'us/token':>10}  {'cuBLAS us':>11}{'us/token':>10}{'xcuBLAS':>9}"
             f"  {'roofline us':>12}{'%roof':>7}"]

    def cell(v, spec, width):
        return f"{'-':>{width}}" if v is None else f"{v:>{width}{spec}}"

    for M in ms:
        a, c, r = (by.get((M, i), {}) for i in TOTAL_IMPLS)
        au, cu, ru = a.get("us"), c.get("us"), r.get("us")
        x = None if not au or cu is None else cu / au
        pct = None if not au or ru is None else 100.0 * ru / au
        lines.append(f"{M:>6}  {cell(au, '.1f', 13)}{cell(a.get('per_token_us'), '.3f', 10)}  {cell(cu, '.1f', 11)}"
                     f"{cell(c.get('per_token_us'), '.3f', 10)}{cell(x, '.2f', 9)}  {cell(ru, '.1f', 12)}"
                     f"{cell(pct, '.0f', 7)}")
    lines.append("xcuBLAS > 1: Swordfish faster than cuBLAS bf16 on dense weights of the same shapes")
    return "\n".join(lines)


def summary(ck, shapes, left_out, total_rows) -> dict:
    """The "checkpoint" section added to each bench result document."""
    return {"path": str(ck.path), "description": ck.description, "method": ck.method,
            "shapes": [{"label": s.label, "K": s.K, "N": s.N, "bits": s.bits, "group": s.group,
                        "zero_points": s.zero_points, "act_order": s.act_order, "count": s.count,
                        "layers": s.layers} for s in shapes],
            "not_timed": [{"what": w, "why": y} for w, y in left_out],
            "totals": total_rows}


def plot_totals(total_rows: list, path, title: str, dtype: str = "bf16") -> str | None:
    """PNG of the whole-model GEMM time per step and per token vs M. None, or why no PNG was written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib); no PNG written"
    fig, axes = plt.subplots(1, 2, figsize=(12.8, 4.8))
    style = {"auto": dict(color="#d62728", marker="o", linewidth=2.2, label="swordfish auto"),
             "cublas": dict(color="black", marker="x", linestyle="--", label=f"cuBLAS {dtype} (dense weights)"),
             "roofline": dict(color="0.45", linestyle=":", label="roofline floor")}
    for impl in TOTAL_IMPLS:
        pts = sorted((r["M"], r["us"], r["per_token_us"]) for r in total_rows if r["impl"] == impl and r["us"])
        if not pts:
            continue
        axes[0].plot([p[0] for p in pts], [p[1] for p in pts], **style[impl])
        axes[1].plot([p[0] for p in pts], [p[2] for p in pts], **style[impl])
    for ax, what in zip(axes, ("GEMM time per forward step (us)", "GEMM time per token (us)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("M (tokens per step, log)")
        ax.set_ylabel(what)
        ax.grid(True, which="major", alpha=0.35)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


# ------------------------------------------------------------------ the command


def command(args) -> int:
    """`swordfish bench --checkpoint DIR` (called by cli.cmd_bench)."""
    from . import bench, cli, presets

    ck = cli.scan_checkpoint(args, (("--shapes", args.shapes), ("--zero-points", args.zero_points),
                                    ("--act-order", args.act_order), ("--from-json", args.from_json),
                                    ("--list-presets", args.list_presets)),
                             "the checkpoint gives the shapes and the format")
    try:
        ms = presets.parse_m(args.m) if args.m else list(presets.DEFAULT_M)
    except ValueError as e:
        raise cli.UsageError(str(e)) from None
    impls = cli._csv(args.paths, bench.IMPLS, "--paths") if args.paths else list(bench.IMPLS)
    impls = [i for i in bench.IMPLS if i in impls]
    shapes, left_out = distinct_shapes(ck)
    cli._say(format_shapes(ck, shapes, left_out))
    cli._say("")
    if not shapes:
        cli._warn("swordfish bench: no layer of this checkpoint is served by Swordfish; nothing to time.")
        return cli.EXIT_OK
    ok, why = cli.gpu_status(args.device)
    if not ok:
        cli._warn(f"swordfish bench: {why}.")
        cli._warn("bench times the CUDA kernels, so it needs an NVIDIA GPU, a CUDA build of torch and the compiled "
                  "extension; `swordfish check --checkpoint DIR` checks this checkpoint on the CPU reference path.")
        return cli.EXIT_UNAVAILABLE
    cfgs = configs(ck, shapes, m=ms, impls=impls, dtype=ck.act_dtype, deterministic=args.deterministic,
                   device_index=args.device, seed=args.seed, rounds=args.rounds,
                   commit=args.commit or bench.git_commit())
    progress = bench.Progress(sum(bench.total_steps(c) for c in cfgs), enabled=not args.quiet)
    docs = []
    try:
        for cfg in cfgs:
            docs.append(bench.run(cfg, progress))
    finally:
        progress.close()
    total_rows = totals(shapes, docs, ms)
    section = summary(ck, shapes, left_out, total_rows)
    for doc in docs:
        doc["checkpoint"] = section
        cli._say(bench.format_table(doc))
        cli._say("")
    cli._say(format_totals(total_rows, sum(s.count for s in shapes)))
    base = Path(args.json or "swordfish-bench.json")
    png_base = Path(args.png) if args.png else base.with_suffix(".png")
    for cfg, doc in zip(cfgs, docs):
        suffix = "" if len(docs) == 1 else f"-{_fmt_slug(cfg)}"
        if args.json != "":
            path = base.with_name(f"{base.stem}{suffix}{base.suffix}")
            bench.write_json(doc, path)
            cli._say(f"wrote {path}")
        if args.png != "":
            cli._plot(bench, doc, str(png_base.with_name(f"{png_base.stem}{suffix}{png_base.suffix}")))
    if args.png != "":
        model_png = png_base.with_name(f"{png_base.stem}-model{png_base.suffix}")
        import textwrap

        title = (f"swordfish bench --checkpoint {ck.path.name}: whole-model GEMM time on {docs[0]['device']['name']} "
                 f"({ck.act_dtype})\n" + "\n".join(textwrap.wrap(ck.description, 140)))
        why_not = plot_totals(total_rows, model_png, title, ck.act_dtype)
        if why_not is None:
            cli._say(f"wrote {model_png}")
        else:
            cli._warn(f"swordfish bench: {why_not}")
    return cli.EXIT_OK


def _fmt_slug(cfg) -> str:
    g = "cw" if cfg.group == -1 else f"g{cfg.group}"
    return f"int{cfg.bits}-{g}" + ("-zp" if cfg.zero_points else "") + ("-act" if cfg.act_order else "")
