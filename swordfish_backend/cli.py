"""The ``swordfish`` command (also ``python -m swordfish_backend``).

    swordfish bench   time every Swordfish path against cuBLAS and the roofline on this GPU
                      (--moe: the fused MoE layer against a bf16 torch MoE and the roofline)
    swordfish check   correctness self-test (the CPU reference path when there is no GPU)
    swordfish info    versions, device, build, available paths and the dispatch table

Exit codes (the same for every subcommand):

    0  success (check: every case passed; info: always)
    1  check found a wrong result
    2  usage error: bad arguments, unknown preset, a shape the format cannot hold
    3  needs a CUDA GPU and the compiled extension, and this machine lacks one of them
       (bench always; check only with --require-gpu)

Nothing here touches CUDA at import time; each command probes the GPU when it runs.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3

EXIT_CODES_HELP = """exit codes:
  0  success
  1  check found a wrong result
  2  usage error (bad arguments, unknown preset, shape the format cannot hold)
  3  needs a CUDA GPU and the compiled extension, and one of them is missing
     (bench always; check only with --require-gpu)"""


MOE_JSON = "swordfish-bench-moe.json"  # `bench --moe`'s default --json


class UsageError(ValueError):
    """A bad command line: reported as `swordfish <cmd>: error: ...` with exit code 2."""


def scan_checkpoint(args, flags, why: str):
    """The scanned ``--checkpoint DIR`` of check / bench, after refusing each (flag, given) of `flags` that was
    given (`why`: why it cannot go with --checkpoint). UsageError for either."""
    from . import checkpoint_scan as scan

    for flag, given in flags:
        if given:
            raise UsageError(f"{flag} cannot be combined with --checkpoint ({why})")
    try:
        return scan.scan(args.checkpoint)
    except scan.CheckpointError as e:
        raise UsageError(f"--checkpoint: {e}") from None


# ------------------------------------------------------------------ environment probes


def gpu_status(device_index: int | None = None) -> tuple[bool, str]:
    """(usable, why not): a CUDA device is visible and the compiled extension is loaded."""
    import torch

    if not torch.cuda.is_available():
        built = torch.version.cuda
        why = (f"torch {torch.__version__} is a CPU-only build" if built is None else
               f"torch {torch.__version__} (CUDA {built}) sees no CUDA device")
        return False, f"no CUDA GPU: {why}"
    if device_index is not None and not 0 <= device_index < torch.cuda.device_count():
        return False, f"no CUDA device {device_index}: this machine has {torch.cuda.device_count()}"
    from . import ops

    if not ops.has_extension():
        return False, f"the compiled extension is missing: {ops.extension_error()}"
    return True, ""


def _say(text: str = "") -> None:
    print(text, flush=True)


def _warn(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _csv(text: str, allowed, what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in allowed]
    if bad or not items:
        raise UsageError(f"{what} {text!r}: choose from {', '.join(allowed)}")
    return list(dict.fromkeys(items))


# ------------------------------------------------------------------ bench


def _bench_layers(args) -> list:
    from . import presets

    try:
        if args.shapes:
            layers = [("custom", layer) for layer in presets.parse_shapes(args.shapes)]
        else:
            layers = presets.preset_layers(args.model)
        for _, layer in layers:
            presets.check_layer(layer, args.bits, args.group)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return layers


def _load_result(path):
    """(bench or bench_moe, document) of a saved result, by its schema; ValueError / OSError if unreadable."""
    from pathlib import Path

    from . import bench, bench_moe

    doc = json.loads(Path(path).read_text())
    module = bench_moe if isinstance(doc, dict) and doc.get("schema") == bench_moe.SCHEMA else bench
    module.validate_result(doc)
    return module, doc


def _check_format_flags(args) -> None:
    if args.zero_points and args.bits != 4:
        raise UsageError("--zero-points is AWQ-style int4 only; drop it or use --bits 4")
    if args.act_order and args.group == -1:
        raise UsageError("--act-order needs a group size (32, 64 or 128), not channelwise --group -1")
    if args.act_order and args.zero_points:
        raise UsageError("--act-order and --zero-points together are not a supported checkpoint format")


def _no_gpu(why: str) -> int:
    _warn(f"swordfish bench: {why}.")
    _warn("bench times the CUDA kernels, so it needs a CUDA build of torch, the compiled extension (pip install "
          "--no-build-isolation . on a machine with nvcc) and an NVIDIA GPU it was built for: the default build "
          "covers sm_90a (H100, H200), sm_100a (B200, GB200) and sm_110a (Jetson Thor); other GPUs need "
          "SWORDFISH_CUDA_ARCHS set at build time (`swordfish info` lists the built architectures).")
    _warn("Without them, `swordfish check` still self-tests the CPU reference path, `swordfish info` shows "
          "what is missing, and `swordfish bench --from-json FILE` re-renders a saved result.")
    return EXIT_UNAVAILABLE


def _peers(args, moe: bool) -> tuple:
    """(peer names, peers.Source) of --peers / --peers-from, ((), None) without them. Loads the peer ops (imports
    vLLM, or loads --peers-from's files) and says on stderr why they are missing; the bench then runs without."""
    from . import peers

    if args.peers is None and args.peers_from is None:
        return (), None
    try:
        names = peers.parse(args.peers, moe)
    except ValueError as e:
        raise UsageError(str(e)) from None
    source = peers.load(args.peers_from)
    if source.error:
        _warn(f"swordfish bench --peers: {source.error}. The peer columns say so; the rest runs.")
    return names, source


def _with_peers(impls: list, names: tuple) -> list:
    """The implementation list with the peers before the roofline (the table's and the plot's order)."""
    return [i for i in impls if i != "roofline"] + list(names) + (["roofline"] if "roofline" in impls else [])


def cmd_bench(args) -> int:
    from . import bench, presets

    if (args.peers is not None or args.peers_from) and (args.from_json or args.checkpoint or args.list_presets):
        raise UsageError("--peers times vLLM's kernels beside the preset or --shapes layers (or --moe); it does not "
                         "go with --from-json, --checkpoint or --list-presets")
    if args.checkpoint:
        if args.moe:
            raise UsageError("--moe and --checkpoint time different things: give one of them")
        from . import bench_checkpoint
        return bench_checkpoint.command(args)
    if args.moe:
        return cmd_bench_moe(args)
    if args.list_presets:
        for p in presets.PRESETS.values():
            _say(f"{p.name:<14} {p.description}")
            for layer in p.layers:
                _say(f"{'':<16}{layer.name:<16} K={layer.K:<6} N={layer.N}")
        return EXIT_OK
    if args.from_json:
        try:
            module, doc = _load_result(args.from_json)
        except (OSError, ValueError) as e:
            raise UsageError(f"--from-json {args.from_json}: {e}") from None
        _say(module.format_table(doc))
        if args.png != "":
            png = args.png or str(_with_suffix(args.from_json, ".png"))
            _plot(module, doc, png)
        return EXIT_OK
    if args.tokens:
        raise UsageError("--tokens needs --moe (the dense bench takes --m)")

    layers = _bench_layers(args)
    try:
        ms = presets.parse_m(args.m) if args.m else list(presets.DEFAULT_M)
    except ValueError as e:
        raise UsageError(str(e)) from None
    impls = _csv(args.paths, bench.IMPLS, "--paths") if args.paths else list(bench.IMPLS)
    impls = [i for i in bench.IMPLS if i in impls]  # canonical order
    _check_format_flags(args)
    peer_names, peer_source = _peers(args, moe=False)
    impls = _with_peers(impls, peer_names)

    ok, why = gpu_status(args.device)
    if not ok:
        return _no_gpu(why)

    cfg = bench.Config(layers=layers, m=ms, bits=args.bits, group=args.group, dtype=args.dtype, impls=tuple(impls),
                       peers=peer_names, peer_source=peer_source,
                       zero_points=args.zero_points, act_order=args.act_order, deterministic=args.deterministic,
                       device_index=args.device, seed=args.seed, rounds=args.rounds,
                       models=sorted({m for m, _ in layers}, key=[m for m, _ in layers].index),
                       commit=args.commit or bench.git_commit())
    progress = bench.Progress(bench.total_steps(cfg), enabled=not args.quiet)
    try:
        doc = bench.run(cfg, progress)
    finally:
        progress.close()
    _say(bench.format_table(doc))
    if args.json != "":
        bench.write_json(doc, args.json)
        _say(f"\nwrote {args.json}")
    if args.png != "":
        png = args.png or str(_with_suffix(args.json or "swordfish-bench.json", ".png"))
        _plot(bench, doc, png)
    return EXIT_OK


def _with_suffix(path: str, suffix: str):
    from pathlib import Path

    return Path(path).with_suffix(suffix)


def _plot(bench, doc, png: str) -> None:
    why = bench.plot(doc, png)
    if why is None:
        _say(f"wrote {png}")
    else:
        _warn(f"swordfish bench: {why}")


def cmd_bench_moe(args) -> int:
    """`swordfish bench --moe`: the MoE layer per model preset and token count (bench_moe.py)."""
    from . import bench, bench_moe, ops, presets

    if args.list_presets:
        for p in presets.MOE_PRESETS.values():
            _say(f"{p.name:<18} {p.description}")
            _say(f"{'':<20}E={p.E:<4} top-{p.top_k:<3} H={p.H:<5} I={p.I:<6} "
                 f"renormalised top-k weights: {'yes' if p.renormalize else 'no'}")
        return EXIT_OK
    if args.from_json:
        raise UsageError("--from-json reads the schema from the file; drop --moe")
    if args.shapes:
        raise UsageError("--shapes is for the dense bench; --moe takes --model with MoE presets")
    if args.m:
        raise UsageError("--m is for the dense bench; --moe takes --tokens")
    try:
        models = presets.moe_presets(args.model if "model" in args.given else None)
        tokens = (presets.parse_m(args.tokens, "--tokens", "token count") if args.tokens
                  else list(presets.DEFAULT_TOKENS))
        for p in models:
            for layer in p.layers:
                presets.check_layer(layer, args.bits, args.group)
    except ValueError as e:
        raise UsageError(str(e)) from None
    every = bench_moe.impls()
    impls = _csv(args.paths, every, "--paths") if args.paths else list(every)
    impls = [i for i in every if i in impls]
    _check_format_flags(args)
    peer_names, peer_source = _peers(args, moe=True)
    impls = _with_peers(impls, peer_names)

    ok, why = gpu_status(args.device)
    if ok and not ops.has_moe():
        ok, why = False, f"the compiled extension has no MoE ops: {ops.moe_error()}"
    if not ok:
        return _no_gpu(why)
    cfg = bench_moe.Config(models=models, tokens=tokens, bits=args.bits, group=args.group, dtype=args.dtype,
                           impls=tuple(impls), zero_points=args.zero_points, act_order=args.act_order,
                           deterministic=args.deterministic, device_index=args.device, seed=args.seed,
                           peers=peer_names, peer_source=peer_source,
                           rounds=args.rounds, commit=args.commit or bench.git_commit())
    progress = bench.Progress(bench_moe.total_steps(cfg), enabled=not args.quiet)
    try:
        doc = bench_moe.run(cfg, progress)
    finally:
        progress.close()
    _say(bench_moe.format_table(doc))
    json_path = args.json if "json" in args.given else MOE_JSON
    if json_path != "":
        bench_moe.write_json(doc, json_path)
        _say(f"\nwrote {json_path}")
    if args.png != "":
        png = args.png or str(_with_suffix(json_path or MOE_JSON, ".png"))
        _plot(bench_moe, doc, png)
    return EXIT_OK


# ------------------------------------------------------------------ check


def cmd_check(args) -> int:
    from . import bench, check, presets

    if args.checkpoint:
        from . import check_checkpoint
        return check_checkpoint.command(args)
    kinds = _csv(args.formats, check.KINDS, "--formats") if args.formats else None
    bits = [int(b) for b in _csv(args.bits, ("4", "8"), "--bits")] if args.bits else None
    groups = [int(g) for g in _csv(args.group, ("32", "64", "128", "-1"), "--group")] if args.group else None
    formats = check.select_formats(kinds, bits, groups)
    if not formats:
        raise UsageError("no supported format matches --formats/--bits/--group (act-order and channelwise exclude "
                         "each other; AWQ and ct-asym are int4)")
    dtypes = list(check.DTYPES) if args.dtype == "both" else [args.dtype]
    paths = _csv(args.paths, check.KERNEL_PATHS, "--paths") if args.paths else list(check.KERNEL_PATHS)
    try:
        shapes = [(layer.K, layer.N) for layer in presets.parse_shapes(args.shapes)] if args.shapes else None
        ms = presets.parse_m(args.m) if args.m else None
    except ValueError as e:
        raise UsageError(str(e)) from None
    if shapes:
        for K, N in shapes:
            for f in formats:
                try:
                    presets.check_layer(presets.Layer(f"{K}x{N}", K, N), f.bits, f.group)
                except ValueError as e:
                    raise UsageError(f"{f.name}: {e}") from None

    ok, why = (False, "--cpu was given") if args.cpu else gpu_status(args.device)
    if not ok and args.require_gpu:
        _warn(f"swordfish check: {why}; --require-gpu was given, so nothing was checked.")
        return EXIT_UNAVAILABLE
    if ok:
        import torch

        name = torch.cuda.get_device_name(args.device)
        if args.quick and shapes is None:
            shapes = list(check.GPU_SHAPES[:1])
        _say(f"swordfish check: GPU kernels on device {args.device} ({name}) against the reference path")
    else:
        _say(f"swordfish check: {why}.")
        _say("Checking the CPU reference path against an fp64 computation. NO GPU KERNELS WERE CHECKED.")
    n_shapes = len(shapes or (check.GPU_SHAPES if ok else check.CPU_SHAPES))
    progress = bench.Progress(len(formats) * len(dtypes) * n_shapes, enabled=not args.quiet)
    try:
        cases = check.run(gpu=ok, formats=formats, dtypes=dtypes, shapes=shapes, ms=ms, paths=paths,
                          deterministic=args.deterministic, device_index=args.device, seed=args.seed,
                          progress=progress)
    finally:
        progress.close()
    _say(check.format_table(cases))
    counts = check.summarize(cases)
    where = "GPU kernels and the reference path" if ok else "CPU reference path only; no GPU kernel was checked"
    _say(f"\ncheck: {counts['pass']} passed, {counts['FAIL']} failed, {counts['n/a']} not applicable ({where})")
    if args.json:
        import dataclasses
        from pathlib import Path

        Path(args.json).write_text(json.dumps({"gpu": ok, "why_not_gpu": None if ok else why, "summary": counts,
                                               "cases": [dataclasses.asdict(c) for c in cases]}, indent=1) + "\n")
        _say(f"wrote {args.json}")
    return EXIT_FAILED if counts["FAIL"] else EXIT_OK


# ------------------------------------------------------------------ info

PROBE = dict(M=64, K=256, N=256)  # a problem every path can run if it is built for this device


def probe_paths(device_index: int) -> dict:
    """{path: "available" | "unavailable: why" | "error: ..."} from one small forced call per path (int4 g128 bf16)."""
    import torch

    from . import check, ops
    from . import format as sffmt
    from .weight import QuantizedWeight

    device = torch.device("cuda", device_index)
    gen = torch.Generator(device=device)
    gen.manual_seed(0)
    M, K, N = PROBE["M"], PROBE["K"], PROBE["N"]
    q = torch.randint(0, 16, (K, N), generator=gen, device=device)
    scales = (torch.rand(K // 128, N, generator=gen, device=device) * 0.01 + 0.001).to(torch.bfloat16)
    w = QuantizedWeight.from_gptq(sffmt.pack_k(q, 4), scales, bits=4, group_size=128)
    x = torch.randn(M, K, generator=gen, device=device).to(torch.bfloat16)
    out = {}
    for name in check.KERNEL_PATHS:
        try:
            ops.gemm(x, *w.kernel_args()[:4], None, 4, 128, False, ops.PATHS[name], 0)
            torch.cuda.synchronize(device)
            out[name] = "available"
        except Exception as e:  # noqa: BLE001
            text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            mark = "cannot run this problem: "
            out[name] = f"unavailable: {text.split(mark, 1)[1]}" if mark in text else f"error: {text}"
    return out


INFO_FORMATS = (  # (label, bits, group, channelwise, zero points, act-order)
    ("int4 g128", 4, 128, False, False, False),
    ("int4 g32", 4, 32, False, False, False),
    ("int4 g128 zp", 4, 128, False, True, False),
    ("int4 g128 act", 4, 128, False, False, True),
    ("int4 channelwise", 4, 128, True, False, False),
    ("int8 g128", 8, 128, False, False, False),
)


def dispatch_table(device_index: int, model: str = "llama-3-8b", dtype_code: int = 1) -> list[dict]:
    from . import check, ops, presets

    rows = []
    for label, bits, group, cw, zp, act in INFO_FORMATS:
        for layer in presets.PRESETS[model].layers:
            def select(M, layer=layer, bits=bits, group=group, cw=cw, zp=zp, act=act):
                return ops.select_path(M, layer.K, layer.N, bits, group, cw, zp, act, dtype_code, device_index)

            segs = check.dispatch_segments(select)
            rows.append({"format": label, "layer": layer.name, "K": layer.K, "N": layer.N,
                         "segments": [{"first_m": a, "last_m": b, "path": ops.PATH_NAMES.get(p, str(p))}
                                      for a, b, p in segs]})
    return rows


MOE_PROBE = dict(E=4, top_k=2, H=256, I=128, T=4)  # every MoE path should run this if built for the device
MOE_INFO_FORMATS = (  # (label, bits, group, zero points, act-order)
    ("int4 g128", 4, 128, False, False),
    ("int4 g128 zp", 4, 128, True, False),
    ("int4 g128 act", 4, 128, False, True),
    ("int4 channelwise", 4, -1, False, False),
    ("int8 g128", 8, 128, False, False),
)


def probe_moe(device_index: int) -> dict:
    """{"paths": {format: {path: state}}, "dispatch": [{model, segments}]}: each MoE path forced once per format
    on a small layer and checked against reference_moe; the dispatcher's path per token range (int4 g128 bf16)."""
    import torch

    from . import bench_moe, check, moe, ops, presets

    device = torch.device("cuda", device_index)
    gen = torch.Generator(device=device)
    gen.manual_seed(0)
    E, k, H, I, T = (MOE_PROBE[key] for key in ("E", "top_k", "H", "I", "T"))  # noqa: E741
    ids, weights = bench_moe.make_routing(T, E, k, True, gen, device)
    x = torch.randn(T, H, generator=gen, device=device).to(torch.bfloat16)
    paths: dict = {}
    for label, bits, group, zp, act in MOE_INFO_FORMATS:
        cfg = bench_moe.Config(models=[], tokens=[], bits=bits, group=group, zero_points=zp, act_order=act)
        w13 = bench_moe.random_experts(E, H, 2 * I, cfg, device, gen)
        w2 = bench_moe.random_experts(E, I, H, cfg, device, gen)
        ref = moe.reference_moe(x, w13, w2, weights, ids, dtype=torch.float32)
        paths[label] = {}
        for name in ops.moe_paths():
            if name == "auto":
                continue
            try:
                y = moe.fused_moe(x, w13, w2, weights, ids, path=name)
                err = moe.output_error(y, ref, H=H, I=I, top_k=k)
                state = "available" if err <= 1 else f"WRONG RESULT ({err:.3g}x the tolerance)"
            except Exception as e:  # noqa: BLE001
                text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                mark = "cannot run this problem: "
                state = f"unavailable: {text.split(mark, 1)[1]}" if mark in text else f"error: {text}"
            paths[label][name] = state
    dispatch = []
    for p in presets.MOE_PRESETS.values():
        def select(T, p=p):
            return ops.moe_select_path(T, p.top_k, p.E, p.H, p.I, 4, 128, ops.DTYPE_CODES[torch.bfloat16],
                                       device_index)

        dispatch.append({"model": p.name, "segments": [{"first_m": a, "last_m": b, "path": ops.moe_path_name(c)}
                                                       for a, b, c in check.dispatch_segments(select)]})
    return {"paths": paths, "dispatch": dispatch}


def gather_info(device_index: int | None = None) -> dict:
    import torch

    from . import __version__, bench, envs, ops

    try:
        import matplotlib

        mpl = matplotlib.__version__
    except ImportError:
        mpl = None
    info: dict = {
        "swordfish": __version__, "commit": bench.git_commit(), "python": platform.python_version(),
        "torch": torch.__version__, "torch_cuda": torch.version.cuda, "matplotlib": mpl,
        "extension": {"loaded": ops.has_extension(), "error": ops.extension_error(),
                      "path": str(ops.library_path()) if ops.library_path() else None,
                      "build": ops.build_info()},
        "env": envs.describe(), "devices": [], "paths": None, "dispatch": None, "gpu_error": None,
        "moe": {"ops": ops.has_moe(), "error": ops.moe_error(), "probe": None},
    }
    archs = [v for k, v in info["extension"]["build"].items() if "arch" in k.lower()]
    if archs and isinstance(archs[0], (list, tuple)):
        archs[0] = ", ".join(f"sm_{a}" for a in archs[0])
    elif archs and isinstance(archs[0], str):
        archs[0] = ", ".join(f"sm_{a}" for a in archs[0].replace(",", ";").split(";") if a)
    info["extension"]["archs"] = archs[0] if archs else None
    if info["extension"]["loaded"]:
        info["extension"]["abi_info"] = ops.abi_info_dict()
    if not torch.cuda.is_available():
        info["gpu_error"] = gpu_status()[1]
        return info
    for i in range(torch.cuda.device_count()):
        info["devices"].append(bench.device_info(i))
    index = torch.cuda.current_device() if device_index is None else device_index
    info["device_index"] = index
    if info["extension"]["loaded"]:
        try:
            info["paths"] = probe_paths(index)
            info["dispatch"] = dispatch_table(index)
        except Exception as e:  # noqa: BLE001 - info reports, it does not fail
            info["gpu_error"] = f"probing device {index} failed: {e}"
    if info["moe"]["ops"]:
        try:
            info["moe"]["probe"] = probe_moe(index)
        except Exception as e:  # noqa: BLE001
            info["moe"]["error"] = f"probing the MoE paths on device {index} failed: {e}"
    return info


def format_moe_info(info: dict) -> list[str]:
    """The MoE lines of `swordfish info`: what sf.fused_moe serves on this machine."""
    m = info.get("moe") or {}
    if not info["devices"]:
        return ["MoE: none on this machine (no CUDA GPU); sf.fused_moe runs the CPU reference (reference_moe)"]
    if not m.get("ops"):
        return [f"MoE: no GPU paths ({m.get('error')}); sf.fused_moe runs only the CPU reference"]
    if not m.get("probe"):
        return [f"MoE: {m.get('error') or 'not probed'}"]
    probe = m["probe"]
    lines = [f"MoE paths on device {info['device_index']} (probe: sf.fused_moe forced, E={MOE_PROBE['E']} "
             f"top-{MOE_PROBE['top_k']} H={MOE_PROBE['H']} I={MOE_PROBE['I']} T={MOE_PROBE['T']} bf16, checked "
             "against reference_moe):"]
    for label, states in probe["paths"].items():
        lines.append(f"  {label:<17} " + "   ".join(f"{name} {state}" for name, state in states.items()))
    lines.append("MoE dispatch (int4 g128 bf16; path per token range from moe_select_path):")
    for row in probe["dispatch"]:
        lines.append(f"  {row['model']:<18} {_ranges(row['segments'])}")
    return lines


def format_vllm_auto(info: dict) -> list[str]:
    """What vLLM's `auto` backends pick on this machine's device (swordfish_backend.vllm.selection)."""
    from .vllm import selection

    if not info["devices"]:
        return []
    idx = info["device_index"]
    cap = major, minor = tuple(int(v) for v in info["devices"][idx]["capability"].split("."))
    lines = [f"vLLM auto-selection on device {idx} (sm{major}{minor}):"]
    why = selection.auto_select_reason(cap)
    lines.append(f"  --linear-backend auto  {'Swordfish' if why is None else 'vLLM: ' + why}")
    why, named = selection.moe_auto_select_reason(cap), selection.moe_auto_formats(major)
    if why is None:
        lines.append("  --moe-backend auto     Swordfish")
    elif named:
        lines.append(f"  --moe-backend auto     Swordfish for {named} experts; other formats vLLM's choice "
                     "(--moe-backend swordfish to opt in)")
    else:
        lines.append(f"  --moe-backend auto     vLLM: {why}")
    return lines


def _ranges(segments: list) -> str:
    parts = []
    for s in segments:
        if s["last_m"] is None:
            span = f"{s['first_m']}+"
        elif s["first_m"] == s["last_m"]:
            span = f"{s['first_m']}"
        else:
            span = f"{s['first_m']}-{s['last_m']}"
        parts.append(f"{s['path']} {span}")
    return " | ".join(parts)


def format_info(info: dict) -> str:
    ext = info["extension"]
    lines = [
        f"swordfish  {info['swordfish']} (commit {info['commit'] or 'unknown'})",
        f"python     {info['python']}",
        f"torch      {info['torch']} (CUDA {info['torch_cuda'] or 'none: CPU-only build'})",
        f"matplotlib {info['matplotlib'] or 'not installed (bench writes no PNG)'}",
    ]
    if ext["loaded"]:
        lines.append(f"extension  loaded from {ext['path']}")
        lines.append(f"           built for: {ext['archs'] or 'unknown (no build record)'}")
        for k, v in ext["build"].items():
            if "arch" not in k.lower():
                lines.append(f"           {k}: {v}")
        lines.append(f"           packed format v{ext['abi_info']['version']} (matches this package)")
    else:
        lines.append(f"extension  NOT LOADED: {ext['error']}")
        lines.append("           built for: unknown")
    if info["devices"]:
        for d in info["devices"]:
            lines.append(f"device {d['index']}   {d['name']}: compute capability {d['capability']}, "
                         f"{d['sm_count']} SMs, {d['l2_bytes'] / 2**20:.0f} MiB L2, "
                         f"{d['memory_bytes'] / 2**30:.0f} GiB")
    else:
        lines.append(f"device     none: {info['gpu_error']}")
    lines.append("")
    if info["paths"]:
        idx = info["device_index"]
        lines.append(f"paths on device {idx} (probe: forced int4 g128 bf16, M={PROBE['M']} K={PROBE['K']} "
                     f"N={PROBE['N']}):")
        for name, state in info["paths"].items():
            lines.append(f"  {name:<8} {state}")
    elif info["devices"] and not ext["loaded"]:
        lines.append("paths: none (the compiled extension is not loaded); sf.matmul runs only the CPU reference path")
    elif not info["devices"]:
        lines.append("paths: none on this machine (no CUDA GPU); sf.matmul runs the CPU reference path")
    if info["gpu_error"] and info["devices"]:
        lines.append(f"  {info['gpu_error']}")
    lines += format_moe_info(info)
    lines += format_vllm_auto(info)
    lines.append("")
    lines.append("environment knobs (read at call time):")
    for knob in info["env"]:
        raw = "unset" if knob["raw"] is None else repr(knob["raw"])
        lines.append(f"  {knob['name']:<24} {raw:<8} -> {knob['value']}  ({knob['meaning']})")
    if info["dispatch"]:
        lines.append("")
        lines.append(f"dispatch table on device {info['device_index']} (bf16, llama-3-8b layers; "
                     "path per M range from select_path):")
        for row in info["dispatch"]:
            lines.append(f"  {row['format']:<17} {row['layer']:<8} K={row['K']:<6} N={row['N']:<6} "
                         f"{_ranges(row['segments'])}")
    return "\n".join(lines)


def cmd_info(args) -> int:
    if args.device is not None:
        ok, why = gpu_status(args.device)
        if not ok and "no CUDA device" in why:
            raise UsageError(why)
    info = gather_info(args.device)
    if args.json:
        _say(json.dumps(info, indent=1, default=str))
    else:
        _say(format_info(info))
    return EXIT_OK


# ------------------------------------------------------------------ parser


def _group(text: str) -> int:
    try:
        g = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"group must be 32, 64, 128 or -1, got {text!r}") from None
    if g not in (32, 64, 128, -1):
        raise argparse.ArgumentTypeError(f"group must be 32, 64, 128 or -1 (channelwise), got {g}")
    return g


def _nonneg(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {v}")
    return v


def _positive(text: str) -> int:
    v = _nonneg(text)
    if v == 0:
        raise argparse.ArgumentTypeError("expected a positive integer, got 0")
    return v


class _Given(argparse.Action):
    """Store the value and record the option in `given` (for defaults that depend on other options)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given = frozenset(getattr(namespace, "given", frozenset())) | {self.dest}


def build_parser() -> argparse.ArgumentParser:
    from . import __version__, bench, bench_moe, check, presets

    parser = argparse.ArgumentParser(
        prog="swordfish", description="Swordfish: weight-only quantized GEMM kernels (int4/int8 weights, fp16/bf16 "
                                      "activations). Time them, check them, describe this machine.",
        epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"swordfish {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{bench,check,info}")
    sub.required = True
    raw = argparse.RawDescriptionHelpFormatter

    b = sub.add_parser("bench", help="time every path against cuBLAS and the HBM roofline on this GPU",
                       description="Time Swordfish (auto and each forced path), cuBLAS on a dense weight of the same "
                                   "shape, and the roofline floor, per layer and M. Prints a table, writes JSON and a "
                                   "PNG. Default: llama-3-8b, int4 g128 bf16, M 1..8192.",
                       epilog=EXIT_CODES_HELP, formatter_class=raw)
    b.add_argument("--moe", action="store_true",
                   help="time the fused MoE layer (sf.fused_moe) per MoE model preset and token count against a "
                        "bf16 torch MoE and the roofline, instead of the dense GEMMs")
    b.add_argument("--model", "--preset", dest="model", default=presets.DEFAULT_PRESET, metavar="PRESET[,PRESET]",
                   action=_Given,
                   help=f"model preset(s): {', '.join(presets.PRESETS)} (default {presets.DEFAULT_PRESET}); "
                        f"with --moe: {', '.join(presets.MOE_PRESETS)} (default all)")
    b.add_argument("--shapes", metavar="'K,N;K,N'", help="explicit layer shapes instead of a preset "
                                                        "(K = in_features, N = out_features)")
    b.add_argument("--m", metavar="M,M,...", help="M values (default " + ",".join(map(str, presets.DEFAULT_M)) + ")")
    b.add_argument("--tokens", metavar="T,T,...", help="with --moe: token counts (default "
                                                      + ",".join(map(str, presets.DEFAULT_TOKENS)) + ")")
    b.add_argument("--bits", type=int, choices=(4, 8), default=4)
    b.add_argument("--group", type=_group, default=128, help="32, 64, 128 or -1 (channelwise); default 128")
    b.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16", help="activation dtype (default bf16)")
    b.add_argument("--paths", metavar="LIST", help="implementations to time, comma-separated from "
                                                   f"{','.join(bench.IMPLS)} (default all; with --moe from "
                                                   f"{','.join(bench_moe.impls())})")
    b.add_argument("--zero-points", action="store_true", help="AWQ-style asymmetric int4 weights")
    b.add_argument("--act-order", action="store_true", help="GPTQ act-order (desc_act) weights")
    b.add_argument("--deterministic", action="store_true", help="time the deterministic mode (no atomics)")
    b.add_argument("--rounds", type=_positive, default=bench.ROUNDS,
                   help="interleaved rounds per (layer, M): each replays every implementation's CUDA graph once; "
                        f"the time is the median over them (default {bench.ROUNDS})")
    b.add_argument("--device", type=_nonneg, default=0, help="CUDA device index (default 0)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--json", default="swordfish-bench.json", metavar="PATH", action=_Given,
                   help=f"where to write the JSON result (default swordfish-bench.json, with --moe {MOE_JSON}; "
                        "'' to skip)")
    b.add_argument("--png", default=None, metavar="PATH",
                   help="where to write the plot (default: the JSON path with .png; '' to skip; needs matplotlib)")
    b.add_argument("--commit", help="commit to record in the result (default: git rev-parse of the source tree)")
    b.add_argument("--from-json", metavar="PATH", help="no timing: print the table and redraw the PNG of a saved "
                                                       "result (works without a GPU)")
    b.add_argument("--list-presets", action="store_true", help="print the presets' layer shapes and exit")
    b.add_argument("--checkpoint", metavar="DIR", help="time the distinct layer shapes of a local GPTQ / AWQ / "
                                                       "compressed-tensors checkpoint and the whole-model GEMM time "
                                                       "per token (docs/CHECKPOINTS.md)")
    b.add_argument("--peers", nargs="?", const="all", default=None, metavar="LIST",
                   help="also time the kernels vLLM would use instead (marlin, machete on sm90; with --moe "
                        "marlin_moe) in the same rounds, on the same weights, each checked against the fp32 reference "
                        "first: 'all' (the default) or a comma list. Needs vLLM 0.33 installed in this environment, "
                        "or --peers-from")
    b.add_argument("--peers-from", metavar="DIR",
                   help="with or instead of --peers: load the peers' ops from vLLM 0.33's extension files in DIR "
                        "(_C_stable_libtorch.abi3.so, _moe_C_stable_libtorch.abi3.so, or get_peers.sh's .so.xz) "
                        "instead of an installed vLLM")
    b.add_argument("--quiet", "-q", action="store_true", help="no progress indicator")
    b.set_defaults(func=cmd_bench, given=frozenset())

    c = sub.add_parser("check", help="correctness self-test (CPU reference path when there is no GPU)",
                       description="Check every supported format x dtype x group x path at the dispatcher's "
                                   "boundary M values against the reference. Without a GPU or the extension, checks "
                                   "the CPU reference path against fp64 and says that no GPU kernel was checked.",
                       epilog=EXIT_CODES_HELP, formatter_class=raw)
    c.add_argument("--formats", metavar="LIST", help="comma-separated from gptq,awq,act-order,ct-asym (default all)")
    c.add_argument("--bits", metavar="LIST", help="4, 8 or 4,8 (default both)")
    c.add_argument("--group", metavar="LIST", help="comma-separated from 32,64,128,-1 (default all)")
    c.add_argument("--dtype", choices=("bf16", "fp16", "both"), default="both")
    c.add_argument("--paths", metavar="LIST",
                   help=f"forced paths to check besides auto: {','.join(check.KERNEL_PATHS)} (default all)")
    c.add_argument("--shapes", metavar="'K,N;K,N'", help="weight shapes (default: two small shapes on GPU, 256x128 on CPU)")
    c.add_argument("--m", metavar="M,M,...", help="M values instead of the dispatcher's boundaries")
    c.add_argument("--deterministic", choices=("both", "on", "off"), default="both",
                   help="deterministic modes to check on the GPU (default both)")
    c.add_argument("--quick", action="store_true", help="one shape instead of two on the GPU")
    c.add_argument("--cpu", action="store_true", help="check the CPU reference path even when a GPU is present")
    c.add_argument("--require-gpu", action="store_true", help="exit 3 instead of checking the CPU path when there "
                                                              "is no GPU or extension")
    c.add_argument("--device", type=_nonneg, default=0, help="CUDA device index (default 0)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--json", metavar="PATH", help="also write every case as JSON")
    c.add_argument("--checkpoint", metavar="DIR", help="check every quantized layer of a local GPTQ / AWQ / "
                                                       "compressed-tensors checkpoint (default M 1,16,256,2048; "
                                                       "docs/CHECKPOINTS.md)")
    c.add_argument("--quiet", "-q", action="store_true", help="no progress indicator")
    c.set_defaults(func=cmd_check)

    i = sub.add_parser("info", help="versions, device, build architectures, available paths, dispatch table",
                       epilog=EXIT_CODES_HELP, formatter_class=raw)
    i.add_argument("--device", type=_nonneg, default=None, help="CUDA device index (default: the current device)")
    i.add_argument("--json", action="store_true", help="print JSON instead of text")
    i.set_defaults(func=cmd_info)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``swordfish`` console script; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: --help / --version (0) or a usage error (2)
        return int(e.code or 0)
    try:
        return args.func(args)
    except UsageError as e:
        print(f"swordfish {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"swordfish {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
