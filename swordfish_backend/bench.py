"""`swordfish bench`: every Swordfish path against cuBLAS and the roofline, in one run.

How it times (the method of shared/GPU.md and the device METHOD.md):

* Each implementation at each (layer, M) is a CUDA graph of back-to-back
  calls, each call reading the next of several weight copies. There are
  enough copies that together they exceed twice the device's L2 (queried
  from the device properties), so small-M calls stream their weights from HBM
  as in a real model, not from the cache. Single calls timed between host
  syncs read 2-5x high at small M: never time that way.
* The graphs of one (layer, M) are replayed in interleaved rounds: each round
  replays every implementation's graph once, in an order that rotates from
  round to round, all enqueued back to back. An implementation's time is the
  median over the rounds of (replay time / calls in the graph). A clock or
  power-state change during the point (the H200 runs large M at its power cap,
  and the next layer's M = 1 follows) then touches every implementation's
  rounds alike; timing each implementation in its own block of replays let the
  first one timed after a large-M point read up to 1.2x high.
* Implementations: ``auto`` (the dispatcher chooses; the path it chose is
  read back with ``ops.last_path``), each Swordfish path forced
  (``decode``, ``dense``, ``prefill``; one that cannot run the problem is
  recorded with the dispatcher's reason), ``cublas`` (``F.linear`` with a
  dense weight of the activation dtype and the same shape) and ``roofline``.
* The roofline is the larger of two floors, each from a ceiling measured in
  the same run: bytes (packed weight + scales + zero points + act-order
  permutation + activations + output) over the HBM read bandwidth of a large
  bf16 sum, and 2*M*N*K over the tensor-core rate of a large dense matmul.
  Compare ratios from one run, never absolute times from different runs.
* With ``--peers``: vLLM's kernels for the same weights (``marlin``, and
  ``machete`` on sm90; swordfish_backend/peers.py), built from the GPTQ
  tensors Swordfish's weight is built from, each checked against the fp32
  reference (``reference.dequantize``; ``check.output_error`` on up to 64 rows
  of x) before it joins the same interleaved rounds. ``auto`` is checked too.
  A peer that cannot run (vLLM absent, op missing, GPU, format or shape) is an
  ``unavailable`` row saying why; one that fails the check is an ``error`` row.

JSON result, schema ``swordfish-bench`` version 1 (``validate_result``
checks it)::

    {"schema": "swordfish-bench", "version": 1,
     "created": "2026-12-02T10:00:00Z",        # UTC
     "swordfish": "0.1.0", "commit": "abc123..." | null,
     "torch": "2.11.0+cu130", "cuda": "13.0" | null,
     "device": {"index": 0, "name": "NVIDIA H200", "capability": "9.0",
                "sm_count": 132, "l2_bytes": 62914560, "memory_bytes": ...},
     "config": {"models": ["llama-3-8b"], "bits": 4, "group": 128, "dtype": "bf16",
                "m": [1, 16, ...], "impls": ["auto", "decode", ...],
                "zero_points": false, "act_order": false, "deterministic": false},
     "ceilings": {"hbm_read_gbps": 4180.0, "hbm_read_bytes": 2147483648,
                  "mma_tflops": 700.0, "mma_shape": [8192, 8192, 8192]},
     "timing": {"method": "...", "rounds": 7, "l2_multiple": 2},
     "rows": [ROW, ...]}

    ROW = {"model": "llama-3-8b", "layer": "qkv", "K": 4096, "N": 6144, "M": 1,
           "impl": "auto" | "decode" | "dense" | "prefill" | "cublas" | "roofline",
           "status": "ok" | "unavailable" | "error",
           "note": null | "why unavailable / the error",
           "path": "decode" | null,        # the path that ran (auto: the dispatcher's choice)
           "us": 5.1 | null,               # microseconds per call (roofline: the floor)
           "tflops": ..., "weight_gbps": ..., "vs_cublas": ..., "pct_roofline": ... | null,
           "weight_bytes": 12976128,       # bytes of weight one call reads
           "copies": 10, "calls": 120, "replays": 7,   # 0 for roofline rows; replays = rounds
           "us_min": 5.0, "us_max": 5.3, "spread": 0.06,  # over the rounds (spread = max / min - 1)
           "rounds_us": [5.1, ...]}                       # timed rows only
    # roofline rows carry "hbm_floor_us" and "compute_floor_us" instead.
    # with --peers: impl may also be "marlin" | "machete"; checked rows (peers, auto) carry
    # "err" (error / tolerance, <= 1 passes); config gains "peers": {"names", "source", "error"}.

``vs_cublas`` is cuBLAS time / this time (above 1: faster than cuBLAS);
``pct_roofline`` is 100 * roofline time / this time.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import ops, peers

SCHEMA = "swordfish-bench"
SCHEMA_VERSION = 1
# Every path the op accepts besides auto (ops.PATH_NAMES mirrors swordfish::Path): a new path shows up here.
KERNEL_PATHS = tuple(name for value, name in sorted(ops.PATH_NAMES.items()) if value != ops.PATH_AUTO)
SWORDFISH_IMPLS = ("auto",) + KERNEL_PATHS
IMPLS = SWORDFISH_IMPLS + ("cublas", "roofline")
PEER_IMPLS = peers.DENSE  # with --peers: vLLM's kernels, timed in the same rounds (swordfish_backend/peers.py)
STATUSES = ("ok", "unavailable", "error")
DTYPES = {"bf16": "bfloat16", "fp16": "float16"}

# The op raises this (ops_gemm.cpp resolve_path) when a forced path cannot run a problem.
UNAVAILABLE_MARK = "cannot run this problem: "

L2_MULTIPLE = 2        # rotating copies exceed this many L2s
ROUNDS = 7             # interleaved rounds per (layer, M) in `run`
MIN_REPLAYS = 5        # time_calls (one implementation on its own: the ceilings, bench_decode)
MAX_REPLAYS = 25
MAX_CALLS = 128        # calls captured in one graph
TARGET_GRAPH_US = 2000.0   # aim for graphs at least this long (host launch noise amortised)
BUDGET_US = 60000.0        # replays per measurement: about this much GPU time
L2_UNKNOWN = 256 << 20    # assumed when the device properties do not report the L2 (larger than any L2 so far)
HBM_PROBE_BYTES = 2 << 30
MMA_PROBE = 8192


@dataclass
class Config:
    layers: list            # [(model, presets.Layer)]
    m: list                 # M values
    bits: int = 4
    group: int = 128
    dtype: str = "bf16"
    impls: tuple = IMPLS
    zero_points: bool = False
    act_order: bool = False
    deterministic: bool = False
    device_index: int = 0
    seed: int = 0
    models: list = field(default_factory=list)
    commit: str | None = None
    rounds: int = ROUNDS
    peers: tuple = ()           # peer names (peers.DENSE), also listed in impls before roofline
    peer_source: object = None  # peers.Source: where their ops came from, or why not


# ------------------------------------------------------------------ sizes and metrics


def quantized_bytes(K: int, N: int, bits: int, group: int, zero_points: bool, act_order: bool,
                    dtype_bytes: int = 2) -> int:
    """Bytes of weight a Swordfish call reads: packed codes, scales, folded zero points, permutation.

    Channelwise weights (group -1) are counted with their one scale row (the
    decode path reads row 0 only).
    """
    rows = 1 if group == -1 else K // group
    total = K * N * bits // 8 + rows * N * dtype_bytes
    if zero_points:
        total += rows * N * dtype_bytes
    if act_order:
        total += K * 4
    return total


def io_bytes(M: int, K: int, N: int, dtype_bytes: int = 2) -> int:
    """Activations read plus output written."""
    return (M * K + M * N) * dtype_bytes


def roofline_us(M: int, K: int, N: int, weight_bytes: int, ceilings: dict, dtype_bytes: int = 2) -> tuple:
    """(roofline, hbm floor, compute floor) in microseconds."""
    hbm = (weight_bytes + io_bytes(M, K, N, dtype_bytes)) / (ceilings["hbm_read_gbps"] * 1e3)
    compute = 2.0 * M * N * K / (ceilings["mma_tflops"] * 1e6)
    return max(hbm, compute), hbm, compute


def derive(rows: list) -> list:
    """Fill tflops, weight_gbps, vs_cublas and pct_roofline from us, in place; returns rows."""
    ref = {}
    for r in rows:
        if r["impl"] in ("cublas", "roofline") and r["us"]:
            ref[(r["model"], r["layer"], r["M"], r["impl"])] = r["us"]
    for r in rows:
        us = r["us"]
        key = (r["model"], r["layer"], r["M"])
        if not us or r["status"] != "ok":
            r.update(tflops=None, weight_gbps=None, vs_cublas=None, pct_roofline=None)
            continue
        r["tflops"] = 2.0 * r["M"] * r["N"] * r["K"] / us / 1e6
        r["weight_gbps"] = r["weight_bytes"] / us / 1e3
        cublas = ref.get(key + ("cublas",))
        roof = ref.get(key + ("roofline",))
        r["vs_cublas"] = None if cublas is None or r["impl"] == "roofline" else cublas / us
        r["pct_roofline"] = None if roof is None else 100.0 * roof / us
    return rows


def make_row(model: str, layer, M: int, impl: str, *, status: str = "ok", us=None, path=None, note=None,
             weight_bytes: int = 0, copies: int = 0, calls: int = 0, replays: int = 0, **extra) -> dict:
    row = {"model": model, "layer": layer.name, "K": layer.K, "N": layer.N, "M": M, "impl": impl,
           "status": status, "note": note, "path": path, "us": us, "tflops": None, "weight_gbps": None,
           "vs_cublas": None, "pct_roofline": None, "weight_bytes": weight_bytes, "copies": copies,
           "calls": calls, "replays": replays}
    row.update(extra)
    return row


# ------------------------------------------------------------------ result document

_TOP = {"schema": str, "version": int, "created": str, "swordfish": str, "commit": (str, type(None)),
        "torch": str, "cuda": (str, type(None)), "device": dict, "config": dict, "ceilings": dict,
        "timing": dict, "rows": list}
_DEVICE = {"index": int, "name": str, "capability": str, "sm_count": int, "l2_bytes": int, "memory_bytes": int}
_CONFIG = {"models": list, "bits": int, "group": int, "dtype": str, "m": list, "impls": list,
           "zero_points": bool, "act_order": bool, "deterministic": bool}
_CEILINGS = {"hbm_read_gbps": (int, float), "hbm_read_bytes": int, "mma_tflops": (int, float), "mma_shape": list}
_NUM = (int, float, type(None))
_ROW = {"model": str, "layer": str, "K": int, "N": int, "M": int, "impl": str, "status": str,
        "note": (str, type(None)), "path": (str, type(None)), "us": _NUM, "tflops": _NUM, "weight_gbps": _NUM,
        "vs_cublas": _NUM, "pct_roofline": _NUM, "weight_bytes": int, "copies": int, "calls": int, "replays": int}


def _check_fields(obj, spec: dict, where: str) -> None:
    if not isinstance(obj, dict):
        raise ValueError(f"{where} must be an object, got {type(obj).__name__}")
    for key, types in spec.items():
        if key not in obj:
            raise ValueError(f"{where} lacks {key!r}")
        value = obj[key]
        allowed = types if isinstance(types, tuple) else (types,)
        # bool is an int to isinstance(); only fields declared bool take one
        if isinstance(value, bool) != (bool in allowed) or not isinstance(value, allowed):
            names = " or ".join(t.__name__ for t in allowed)
            raise ValueError(f"{where}.{key} must be {names}, got {type(value).__name__} {value!r}")


def validate_result(doc: dict) -> None:
    """Raise ValueError naming the first thing in `doc` that breaks schema version 1."""
    _validate(doc, SCHEMA, SCHEMA_VERSION, _CONFIG, _ROW, lambda cfg: (IMPLS + PEER_IMPLS, str(IMPLS + PEER_IMPLS)))


def _validate(doc: dict, schema: str, version: int, config_spec: dict, row_spec: dict, impls_of) -> None:
    """validate_result of one schema: `impls_of(config)` gives (the allowed impls, how an error names them)."""
    _check_fields(doc, _TOP, "result")
    if doc["schema"] != schema:
        raise ValueError(f"result.schema must be {schema!r}, got {doc['schema']!r}")
    if doc["version"] != version:
        raise ValueError(f"result.version must be {version}, got {doc['version']!r}")
    _check_fields(doc["device"], _DEVICE, "result.device")
    _check_fields(doc["config"], config_spec, "result.config")
    _check_fields(doc["ceilings"], _CEILINGS, "result.ceilings")
    impls, impls_text = impls_of(doc["config"])
    for i, row in enumerate(doc["rows"]):
        where = f"result.rows[{i}]"
        _check_fields(row, row_spec, where)
        if row["impl"] not in impls:
            raise ValueError(f"{where}.impl must be one of {impls_text}, got {row['impl']!r}")
        if row["status"] not in STATUSES:
            raise ValueError(f"{where}.status must be one of {STATUSES}, got {row['status']!r}")
        if row["status"] == "ok" and row["us"] is None:
            raise ValueError(f"{where} has status ok but no time")
        if row["impl"] == "roofline":
            for key in ("hbm_floor_us", "compute_floor_us"):
                if not isinstance(row.get(key), (int, float)):
                    raise ValueError(f"{where} (roofline) lacks a number {key!r}")


def make_result(rows: list, *, device: dict, config: dict, ceilings: dict, commit, torch_version: str,
                cuda_version, created: str | None = None, rounds: int = ROUNDS) -> dict:
    return _document(SCHEMA, SCHEMA_VERSION, derive(rows), validate_result, device=device, config=config,
                     ceilings=ceilings, commit=commit, torch_version=torch_version, cuda_version=cuda_version,
                     created=created, rounds=rounds,
                     rotation=f"calls rotate over weight copies totalling >= {L2_MULTIPLE}x L2")


def _document(schema: str, version: int, rows: list, validate, *, device: dict, config: dict, ceilings: dict,
              commit, torch_version: str, cuda_version, created: str | None, rounds: int,
              rotation: str) -> dict:
    """make_result of one schema (rows already derived), checked by `validate`; `rotation` ends timing.method."""
    from . import __version__

    doc = {
        "schema": schema,
        "version": version,
        "created": created or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "swordfish": __version__,
        "commit": commit,
        "torch": torch_version,
        "cuda": cuda_version,
        "device": device,
        "config": config,
        "ceilings": ceilings,
        "timing": {
            "method": "interleaved rounds: each round replays every implementation's CUDA graph once (order "
                      "rotating), us = median over rounds of replay / calls per graph; " + rotation,
            "rounds": rounds,
            "l2_multiple": L2_MULTIPLE,
        },
        "rows": rows,
    }
    validate(doc)
    return doc


def write_json(doc: dict, path, validate=None) -> None:
    """Write a result document (checked by `validate`, default validate_result) as JSON."""
    (validate or validate_result)(doc)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")


def load_json(path, validate=None) -> dict:
    """Read a result document, checked by `validate` (default validate_result)."""
    doc = json.loads(Path(path).read_text())
    (validate or validate_result)(doc)
    return doc


def git_commit() -> str | None:
    """The commit the measured kernels were built from: the extension's build record
    (_C_build.json "git_commit", written by CMake) when it has one, else the source tree's
    commit (suffixed -dirty with local changes), else None. A library built elsewhere and
    carried (the H200 workflow) runs inside a checkout of some other commit."""
    try:
        from . import ops

        built = (ops.build_info() or {}).get("git_commit")
        if built and built != "unknown":
            return built
    except Exception:  # noqa: BLE001 - no extension, no build record: fall back to the tree
        pass
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=False)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=False)
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


# ------------------------------------------------------------------ printing


def _fmt(value, spec: str, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{spec}}"


def _how_timed(doc: dict) -> str:
    """How a document's times were taken, in a few words (documents from before the rounds say replays)."""
    rounds = doc.get("timing", {}).get("rounds")
    what = f"median of {rounds} interleaved rounds of CUDA-graph replays" if rounds else "median of CUDA-graph replays"
    return what + " over rotating weights"


def format_table(doc: dict) -> str:
    """One block per layer, one line per M: the auto path's numbers, then every implementation's us."""
    cfg = doc["config"]
    rows = doc["rows"]
    ceil = doc["ceilings"]
    dev = doc["device"]
    group = "channelwise" if cfg["group"] == -1 else f"g{cfg['group']}"
    extras = (" zero-points" if cfg["zero_points"] else "") + (" act-order" if cfg["act_order"] else "")
    lines = [
        (f"swordfish bench  {dev['name']} (sm {dev['capability']}, {dev['sm_count']} SMs)  "
         f"int{cfg['bits']} {group} {cfg['dtype']}{extras}  commit {doc['commit'] or 'unknown'}"),
        (f"ceilings measured in this run: HBM read {ceil['hbm_read_gbps']:.0f} GB/s, "
         f"dense {cfg['dtype']} matmul {ceil['mma_tflops']:.0f} TFLOP/s"),
        f"us = microseconds per call ({_how_timed(doc)}); xcuBLAS > 1 is faster than cuBLAS",
    ] + peer_header(cfg)
    others = [i for i in cfg["impls"] if i != "auto"]
    peer_names = peer_impls(cfg)
    by_key = {(r["model"], r["layer"], r["M"], r["impl"]): r for r in rows}
    layers = []
    for r in rows:
        key = (r["model"], r["layer"], r["K"], r["N"])
        if key not in layers:
            layers.append(key)
    notes: dict = {}
    for model, layer, K, N in layers:
        lines.append("")
        lines.append(f"{model} {layer}  (K={K}, N={N})")
        head = f"{'M':>6}  {'path':<8}{'us':>9}{'TFLOP/s':>9}{'wGB/s':>8}{'xcuBLAS':>8}{'%roof':>6} |"
        head += impl_head(others) + peer_head(peer_names)
        lines.append(head)
        ms = sorted({r["M"] for r in rows if (r["model"], r["layer"]) == (model, layer)})
        for M in ms:
            auto = by_key.get((model, layer, M, "auto"))
            if auto is not None and auto["status"] == "ok":
                line = (f"{M:>6}  {auto['path'] or '?':<8}{_fmt(auto['us'], '.1f', 9)}{_fmt(auto['tflops'], '.1f', 9)}"
                        f"{_fmt(auto['weight_gbps'], '.0f', 8)}{_fmt(auto['vs_cublas'], '.2f', 8)}"
                        f"{_fmt(auto['pct_roofline'], '.0f', 6)} |")
            else:
                line = f"{M:>6}  {'-':<8}{'-':>9}{'-':>9}{'-':>8}{'-':>8}{'-':>6} |"
                if auto is not None:
                    notes.setdefault(auto["note"] or auto["status"], len(notes) + 1)
            lines.append(line + _impl_cells(by_key, (model, layer, M), others, notes)
                         + peer_cell(by_key, (model, layer, M), peer_names))
    return "\n".join(lines + _note_lines(notes))


def peer_impls(cfg: dict) -> list:
    """The peers (peers.DENSE / peers.MOE names) among a document's implementations."""
    return [i for i in cfg["impls"] if i in peers.DENSE + peers.MOE]


def peer_header(cfg: dict) -> list:
    """The table's line about the peers: where their ops came from (or why none ran), and the xpeer column."""
    if not peer_impls(cfg):
        return []
    p = cfg.get("peers") or {}
    where = p.get("source") or f"none ran: {p.get('error') or 'unknown'}"
    return [f"peers (vLLM's kernels on the same weights, checked against the fp32 reference first): {where}; "
            "xpeer = best peer us / Swordfish auto us (> 1: Swordfish faster)"]


def peer_summary(rows: list, peer_names: list) -> str:
    """A plot panel's second title line: the geometric mean (and range) over M of best peer / Swordfish auto."""
    if not peer_names:
        return ""
    by = {(r["M"], r["impl"]): r["us"] for r in rows if r["status"] == "ok" and r["us"]}
    ratios = []
    for M in sorted({m for m, _ in by}):
        _, us = peers.best({n: by.get((M, n)) for n in peer_names})
        if us and by.get((M, "auto")):
            ratios.append(us / by[(M, "auto")])
    if not ratios:
        return "\nno peer ran"
    gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    return f"\nbest peer / Swordfish: {gm:.2f}x geomean ({min(ratios):.2f}-{max(ratios):.2f})"


def peer_head(peer_names: list) -> str:
    return f"  {'xpeer (best)':<18}" if peer_names else ""


def peer_cell(by_key: dict, key: tuple, peer_names: list) -> str:
    """Swordfish auto's speed-up over the fastest peer that ran at `key`, and which peer that was."""
    if not peer_names:
        return ""
    auto = by_key.get(key + ("auto",))
    name, us = peers.best({n: (by_key.get(key + (n,)) or {}).get("us") for n in peer_names
                           if (by_key.get(key + (n,)) or {}).get("status") == "ok"})
    if name is None or auto is None or auto["status"] != "ok" or not auto["us"]:
        return f"  {'-':<18}"
    cell = f"{us / auto['us']:.2f} ({name})"
    return f"  {cell:<18}"


def _cell_width(name: str) -> int:
    """A table column's width: 9, or the impl's name and two spaces where it is longer (marlin_moe)."""
    return max(9, len(name) + 2)


def impl_head(impls: list) -> str:
    """The header cells of the impl columns (bench --moe's table too), each _cell_width wide."""
    return "".join(f"{name:>{_cell_width(name)}}" for name in impls)


def _impl_cells(by_key: dict, key: tuple, impls: list, notes: dict) -> str:
    """A table line's cells: each impl's us at `key` (row by_key[key + (impl,)]), "n/a[i]" or "ERR[i]" with
    the note numbered in `notes` ({text: i}) when it did not run."""
    cells = ""
    for name in impls:
        r = by_key.get(key + (name,))
        if r is None:
            cell = "-"
        elif r["status"] == "ok":
            cell = f"{r['us']:.1f}"
        else:
            mark = notes.setdefault(r["note"] or r["status"], len(notes) + 1)
            cell = f"{'n/a' if r['status'] == 'unavailable' else 'ERR'}[{mark}]"
        cells += f"{cell:>{_cell_width(name)}}"
    return cells


def _note_lines(notes: dict) -> list:
    """The table's numbered notes ({text: number}), after a blank line; none without notes."""
    return [""] + [f"[{mark}] {text}" for text, mark in notes.items()] if notes else []


# ------------------------------------------------------------------ plotting

_STYLE = {
    "auto": dict(color="#d62728", linewidth=2.4, marker="o", markersize=4, zorder=5),
    "decode": dict(color="#1f77b4", linewidth=1.2, marker="s", markersize=3),
    "dense": dict(color="#2ca02c", linewidth=1.2, marker="^", markersize=3),
    "prefill": dict(color="#9467bd", linewidth=1.2, marker="v", markersize=3),
    "cublas": dict(color="black", linewidth=1.6, linestyle="--", marker="x", markersize=4),
    "fused": dict(color="#1f77b4", linewidth=1.2, marker="s", markersize=3),
    "torch": dict(color="black", linewidth=1.6, linestyle="--", marker="x", markersize=4),
    "roofline": dict(color="0.45", linewidth=1.4, linestyle=":"),
    "marlin": dict(color="#ff7f0e", linewidth=1.6, linestyle="-.", marker="D", markersize=3),
    "machete": dict(color="#8c564b", linewidth=1.6, linestyle="-.", marker="P", markersize=4),
    "marlin_moe": dict(color="#ff7f0e", linewidth=1.6, linestyle="-.", marker="D", markersize=3),
}
_LABEL = {"auto": "swordfish auto (dispatcher)", "decode": "decode (forced)", "dense": "dense (forced)",
          "prefill": "prefill (forced)", "cublas": "cuBLAS (dense weight)", "roofline": "roofline floor",
          "fused": "fused (forced)", "torch": "torch bf16 MoE (dequantized experts)",
          "marlin": "vLLM Marlin (peer)", "machete": "vLLM Machete (peer)", "marlin_moe": "vLLM Marlin MoE (peer)"}


def plot(doc: dict, path, *, title: str = "swordfish bench", note: str | None = None,
         panel_title=None, xlabel: str = "M (rows of x = tokens, log)") -> str | None:
    """Write the PNG (time per call vs M, log-log, one subplot per layer). Rows that carry us_min / us_max
    (interleaved rounds, benchmarks/bench_dispatch.py) get min..max error bars. `title` opens the figure's
    heading, `note` replaces its second line; `panel_title(model, layer, K, N)` names a subplot. Returns None, or
    why no PNG was written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib); no PNG written"
    rows = doc["rows"]
    cfg = doc["config"]
    layers = []
    for r in rows:
        key = (r["model"], r["layer"], r["K"], r["N"])
        if key not in layers:
            layers.append(key)
    if not layers:
        return "no rows to plot"
    ncols = 1 if len(layers) == 1 else 2
    nrows = math.ceil(len(layers) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.4 * ncols, 4.2 * nrows), squeeze=False)
    handles = {}
    for ax, (model, layer, K, N) in zip(axes.flat, layers):
        mine = [r for r in rows if (r["model"], r["layer"]) == (model, layer) and r["status"] == "ok"]
        for impl in cfg["impls"]:
            pts = sorted((r["M"], r["us"], r.get("us_min"), r.get("us_max")) for r in mine if r["impl"] == impl)
            if not pts:
                continue
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            kw = dict(_STYLE.get(impl, {}), label=_LABEL.get(impl, impl))
            if all(p[2] is not None and p[3] is not None for p in pts):
                if impl == "auto":
                    kw["alpha"] = 0.7  # the forced path auto picked shows through
                err = [[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]]
                line = ax.errorbar(xs, ys, yerr=err, capsize=2, elinewidth=0.8, **kw).lines[0]
            else:
                (line,) = ax.plot(xs, ys, **kw)
            handles.setdefault(impl, line)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ms = sorted({r["M"] for r in mine}) or [1]
        ticks = [m for m in (4 ** i for i in range(12)) if ms[0] <= m <= ms[-1]] or ms
        ax.set_xticks(ticks, [str(t) for t in ticks])
        # Forced paths far from their range (decode at M = 8192, say) would squash the rest: clip them.
        anchor = [r["us"] for r in mine if r["impl"] in ("auto", "cublas", "roofline")]
        every = [r["us"] for r in mine]
        if anchor and every:
            ax.set_ylim(min(every) * 0.7, max(anchor) * 4)
        ax.set_title((panel_title(model, layer, K, N) if panel_title else f"{model} {layer}  (K={K}, N={N})")
                     + peer_summary(mine, peer_impls(cfg)), fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("time per call (us, log)")
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.12)
    for ax in list(axes.flat)[len(layers):]:
        ax.set_visible(False)
    group = "channelwise" if cfg["group"] == -1 else f"g{cfg['group']}"
    extras = (", zero points" if cfg["zero_points"] else "") + (", act-order" if cfg["act_order"] else "")
    dev = doc["device"]
    if note is None:
        note = (f"time per call, {_how_timed(doc)}; lower is better; "
                "forced paths clipped above 4x the slowest of auto/cuBLAS")
    fig.suptitle(f"{title}: int{cfg['bits']} {group} {cfg['dtype']}{extras} on {dev['name']} "
                 f"(commit {doc['commit'] or 'unknown'}, {doc['created'][:10]})\n{note}", fontsize=10)
    order = [i for i in cfg["impls"] if i in handles]
    fig.legend([handles[i] for i in order], [_LABEL.get(i, i) for i in order], loc="lower center",
               ncol=min(len(order), 6 if ncols > 1 else 3), fontsize=9, frameon=False)  # one panel: 3 fit its width
    fig.tight_layout(rect=(0, 0.06 if nrows > 1 else 0.1, 1, 0.95))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


# ------------------------------------------------------------------ progress


class Progress:
    """A one-line progress indicator on stderr (a line every few seconds when stderr is not a terminal)."""

    def __init__(self, total: int, enabled: bool = True, stream=None):
        self.total, self.done, self.enabled = max(total, 1), 0, enabled
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = self.last = time.monotonic()

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        now = time.monotonic()
        if not self.tty and now - self.last < 5.0 and self.done < self.total:
            return
        self.last = now
        width = 24
        filled = int(width * self.done / self.total)
        text = (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                f"{now - self.start:5.1f}s  {label}")
        if self.tty:
            self.stream.write("\r" + text[:110].ljust(110))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()


# ------------------------------------------------------------------ timing (CUDA)


def device_info(index: int) -> dict:
    import torch

    props = torch.cuda.get_device_properties(index)
    return {"index": index, "name": props.name, "capability": f"{props.major}.{props.minor}",
            "sm_count": props.multi_processor_count, "l2_bytes": int(getattr(props, "L2_cache_size", 0) or 0),
            "memory_bytes": int(props.total_memory)}


def capture_graph(calls: list, stream, n_calls_for) -> tuple:
    """Warm up eagerly on `stream` (any error surfaces here, before capture), time one eager pass, and
    capture one CUDA graph of back-to-back calls cycling through `calls`; its length is
    n_calls_for(eager us per call). Returns (graph, calls in it), the graph replayed once (uploaded)."""
    import torch

    stream.wait_stream(torch.cuda.current_stream(stream.device))  # inputs made on the current stream
    with torch.cuda.stream(stream):
        for call in calls:
            call()
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record(stream)
        for call in calls:
            call()
        t1.record(stream)
    t1.synchronize()
    eager_us = max(t0.elapsed_time(t1) * 1e3 / len(calls), 1.0)  # an over-estimate at small M (launch bound)
    n_calls = n_calls_for(eager_us)
    graph = torch.cuda.CUDAGraph()
    # capture_begin/end directly: torch.cuda.graph() would also gc.collect() and empty the cache every time
    with torch.cuda.stream(stream):
        graph.capture_begin()
        try:
            for i in range(n_calls):
                calls[i % len(calls)]()
        finally:
            graph.capture_end()
    graph.replay()
    return graph, n_calls


def time_calls(calls: list, device) -> tuple[float, int, int]:
    """Microseconds per call: median CUDA-graph replay of back-to-back calls cycling through `calls`.

    Warms up eagerly on a side stream (any error surfaces here, before
    capture), sizes the graph from one eager pass, captures, replays.
    Returns (us per call, calls per graph, replays).
    """
    import torch

    graph, n_calls = capture_graph(calls, torch.cuda.Stream(device), lambda us: graph_calls(us, len(calls)))
    torch.cuda.synchronize(device)
    w0, w1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    w0.record()
    graph.replay()
    w1.record()
    w1.synchronize()
    replay_us = max(w0.elapsed_time(w1) * 1e3, 1.0)
    replays = int(min(MAX_REPLAYS, max(MIN_REPLAYS, BUDGET_US // replay_us)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    for start, end in events:  # enqueued back to back: no host gap between replays
        start.record()
        graph.replay()
        end.record()
    events[-1][1].synchronize()
    times = [start.elapsed_time(end) * 1e3 for start, end in events]
    del graph
    return statistics.median(times) / n_calls, n_calls, replays


def replay_rounds(graphs: dict, rounds: int) -> dict:
    """Interleaved rounds: each round replays every graph once, the order rotating from round to round,
    all enqueued back to back with one host sync at the end. Returns {key: [ms of each round's replay]}."""
    import torch

    keys = list(graphs)
    events = {k: [] for k in keys}
    for r in range(rounds):
        order = keys[r % len(keys):] + keys[:r % len(keys)]
        for k in order:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graphs[k].replay()
            end.record()
            events[k].append((start, end))
    torch.cuda.synchronize()
    return {k: [s.elapsed_time(e) for s, e in events[k]] for k in keys}


def round_stats(rounds_us: list) -> dict:
    """Median, min, max and spread (max / min - 1) of one implementation's per-round times."""
    lo, hi = min(rounds_us), max(rounds_us)
    return {"us": statistics.median(rounds_us), "us_min": lo, "us_max": hi, "spread": hi / lo - 1.0}


def graph_calls(eager_us: float, n_list: int, graph_us: float = TARGET_GRAPH_US) -> int:
    """Calls captured in one graph: whole passes over the n_list rotating calls, at least graph_us of work."""
    reps = max(1, min(MAX_CALLS // max(n_list, 1), math.ceil(graph_us / max(eager_us * n_list, 1e-3))))
    return n_list * reps


def time_point(calls: dict, stream, rounds: int, device_index: int, graph_us: float = TARGET_GRAPH_US,
               path_of=None) -> dict:
    """Time the implementations of one (layer, M): calls[impl] is its list of rotating calls.

    Captures one graph per implementation (its eager warm-up raises for a path that cannot run the
    problem, recorded with the reason), then replays the graphs in interleaved rounds. Returns
    {impl: {"status": "ok", "path", "copies", "calls", "rounds_us"}} or, for one that did not run,
    {impl: {"status": "unavailable" | "error", "note", "copies"}}. ``path`` is the path that ran:
    the dispatcher's choice for ``auto`` (read back right after its capture), None for ``cublas``;
    ``path_of(impl)``, when given, answers it instead (called right after that implementation's capture).
    """
    out, graphs = {}, {}
    for impl, fns in calls.items():
        try:
            graphs[impl], n_calls = capture_graph(fns, stream, lambda us, n=len(fns): graph_calls(us, n, graph_us))
        except Exception as e:  # noqa: BLE001 - recorded, the run goes on
            status, note = failure(impl, e)
            out[impl] = {"status": status, "note": note, "copies": len(fns)}
            continue
        if path_of is not None:
            path = path_of(impl)
        elif impl == "cublas":
            path = None
        elif impl == "auto":
            path = ops.PATH_NAMES.get(ops.last_path(device_index), "?")
        else:
            path = impl
        out[impl] = {"status": "ok", "path": path, "copies": len(fns), "calls": n_calls}
    if graphs:
        for impl, ms in replay_rounds(graphs, rounds).items():
            out[impl]["rounds_us"] = [t * 1e3 / out[impl]["calls"] for t in ms]
    return out


def failure(impl: str, e: Exception) -> tuple:
    """(status, note) of an implementation that raised `e`: "unavailable" with the reason when the op says
    a forced path cannot run the problem (UNAVAILABLE_MARK), else "error" with the message's first line."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if UNAVAILABLE_MARK in text:
        return "unavailable", f"{impl}: {text.split(UNAVAILABLE_MARK, 1)[1]}"
    return "error", f"{impl}: {text}"


def timed_fields(t: dict) -> dict:
    """make_row's keywords for one entry of `time_point`'s answer (status and note, or the round times)."""
    if t["status"] != "ok":
        return dict(status=t["status"], note=t["note"], copies=t.get("copies", 0))
    st = round_stats(t["rounds_us"])
    return dict(us=st.pop("us"), path=t["path"], copies=t["copies"], calls=t["calls"], replays=len(t["rounds_us"]),
                rounds_us=list(t["rounds_us"]), **st)


def timed_row(model: str, layer, M: int, impl: str, t: dict, weight_bytes: int) -> dict:
    """The result row of one entry of `time_point`'s answer."""
    return make_row(model, layer, M, impl, weight_bytes=weight_bytes, **timed_fields(t))


def measure_ceilings(device, dtype) -> dict:
    """HBM read bandwidth (a large bf16 sum) and the dense matmul rate in `dtype`, measured now."""
    import torch
    import torch.nn.functional as F

    free, _ = torch.cuda.mem_get_info(device)
    nbytes = int(min(HBM_PROBE_BYTES, free // 8)) // 4096 * 4096
    buf = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=device).uniform_(-1, 1)
    us, _, _ = time_calls([buf.sum], device)
    hbm_gbps = nbytes / us / 1e3
    del buf
    n = MMA_PROBE
    a = torch.randn(n, n, device=device, dtype=dtype)
    bs = [torch.randn(n, n, device=device, dtype=dtype) for _ in range(2)]
    us, _, _ = time_calls([functools.partial(F.linear, a, b) for b in bs], device)
    del a, bs
    torch.cuda.empty_cache()
    return {"hbm_read_gbps": hbm_gbps, "hbm_read_bytes": nbytes, "mma_tflops": 2.0 * n ** 3 / us / 1e6,
            "mma_shape": [n, n, n]}


def _copies(bytes_per_copy: int, l2_bytes: int, free_bytes: int) -> int:
    want = math.ceil(L2_MULTIPLE * max(l2_bytes, 1) / max(bytes_per_copy, 1))
    fit = max(1, (free_bytes // 4) // max(bytes_per_copy, 1))
    return int(max(2, min(want, MAX_CALLS, fit)))


def random_checkpoint(K: int, N: int, cfg: Config, device, gen) -> dict:
    """Random codes and scales on `device` as a checkpoint holds them: AWQ {"qweight", "qzeros", "scales"} with
    --zero-points, else GPTQ {"qweight" int32 (K * bits / 32, N), "scales", "g_idx" or None}."""
    import torch

    torch_dtype = getattr(torch, DTYPES[cfg.dtype])
    groups = 1 if cfg.group == -1 else K // cfg.group

    def words(rows, cols):
        return torch.randint(-2**31, 2**31, (rows, cols), generator=gen, dtype=torch.int64,
                             device=device).to(torch.int32)

    scales = (torch.rand(groups, N, generator=gen, device=device) * 0.01 + 0.001).to(torch_dtype)
    if cfg.zero_points:
        return {"qweight": words(K, N // 8), "qzeros": words(groups, N // 8), "scales": scales}
    g_idx = None
    if cfg.act_order:
        g_idx = (torch.arange(K, device=device) // cfg.group)[torch.randperm(K, generator=gen, device=device)]
        g_idx = g_idx.to(torch.int32)
    return {"qweight": words(K * cfg.bits // 32, N), "scales": scales, "g_idx": g_idx}


def weight_of(ckpt: dict, cfg: Config):
    """The QuantizedWeight of a random_checkpoint (built through the checkpoint converters)."""
    import torch

    from .weight import QuantizedWeight

    torch_dtype = getattr(torch, DTYPES[cfg.dtype])
    if "qzeros" in ckpt:
        return QuantizedWeight.from_awq(ckpt["qweight"], ckpt["qzeros"], ckpt["scales"], group_size=cfg.group,
                                        dtype=torch_dtype)
    return QuantizedWeight.from_gptq(ckpt["qweight"], ckpt["scales"], ckpt["g_idx"], bits=cfg.bits,
                                     group_size=cfg.group, dtype=torch_dtype)


def random_weight(K: int, N: int, cfg: Config, device, gen):
    """A QuantizedWeight of random codes and scales on `device` (built through the checkpoint converters)."""
    return weight_of(random_checkpoint(K, N, cfg, device, gen), cfg)


# ------------------------------------------------------------------ peers (--peers)

CHECK_ROWS = 64   # rows of x whose output a checked implementation must match (spread over M: every M tile)


def peer_state(cfg, device) -> dict:
    """{peer: why it cannot run on this GPU, or None} for cfg.peers (vLLM absent, op missing, GPU)."""
    return {name: peers.reason(name, cfg.peer_source, device) for name in cfg.peers}


def check_rows(M: int, device):
    """Indices of up to CHECK_ROWS rows spread over 0..M-1 (first and last included)."""
    import torch

    return torch.linspace(0, M - 1, min(M, CHECK_ROWS), device=device).round().long().unique()


def reference_rows(x, rows, wref):
    """fp64 x[rows] @ wref^T (wref: fp32 (N, K)), over column blocks of the weight (no fp64 copy of it)."""
    import torch

    xr = x[rows].to(torch.float64)
    return torch.cat([xr @ wref[n:n + 8192].to(torch.float64).t() for n in range(0, wref.shape[0], 8192)], dim=1)


def checked_error(fn, rows, ref, dtype, K: int) -> float:
    """check.output_error (<= 1 passes) of fn()'s output rows against their fp64 reference."""
    from . import check

    return check.output_error(fn()[rows], ref, check.unit_roundoff(dtype), K)


def prepare_peers(cfg: Config, state: dict, ckpt: dict, K: int, N: int, copies: int) -> dict:
    """{peer: [f(x) per weight copy]} for the peers that run this layer, {peer: (status, note)} for the others."""
    import torch

    torch_dtype = getattr(torch, DTYPES[cfg.dtype])
    out = {}
    for name in cfg.peers:
        a = peers.ADAPTERS[name]
        why = state[name] or a.supports(K, N, bits=cfg.bits, group=cfg.group, dtype=torch_dtype,
                                        zero_points=cfg.zero_points, act_order=cfg.act_order)
        if why:
            out[name] = ("unavailable", f"{name}: {why}")
            continue
        try:
            out[name] = [a.prepare(ckpt["qweight"], ckpt["scales"], bits=cfg.bits, group=cfg.group, dtype=torch_dtype,
                                   qzeros=ckpt.get("qzeros")) for _ in range(copies)]
        except Exception as e:  # noqa: BLE001 - recorded, the rest runs
            out[name] = ("error", f"{name}: preparing the weight failed: {peers.first_line(e)}")
    return out


def _setup(index: int):
    """(torch.device, device_info) of the CUDA device to time on, made current."""
    import torch

    device = torch.device("cuda", index)
    torch.cuda.set_device(device)
    return device, device_info(index)


def _free_bytes(device) -> int:
    import torch

    return int(torch.cuda.mem_get_info(device)[0])


def total_steps(cfg: Config) -> int:
    timed = [i for i in cfg.impls if i != "roofline"]
    return len(cfg.layers) * len(cfg.m) * len(timed)


def run(cfg: Config, progress: Progress | None = None) -> dict:
    """Time every (layer, M, implementation) of `cfg` on the GPU; returns the result document."""
    import torch
    import torch.nn.functional as F

    from . import reference

    device, info = _setup(cfg.device_index)
    torch_dtype = getattr(torch, DTYPES[cfg.dtype])
    gen = torch.Generator(device=device)
    gen.manual_seed(cfg.seed)
    ceilings = measure_ceilings(device, torch_dtype)
    det = 1 if cfg.deterministic else 0
    l2 = info["l2_bytes"] or L2_UNKNOWN
    stream = torch.cuda.Stream(device) if device.type == "cuda" else None  # captures run on a side stream
    state = peer_state(cfg, device)
    rows = []
    for model, layer in cfg.layers:
        K, N = layer.K, layer.N
        ckpt = random_checkpoint(K, N, cfg, device, gen)
        w = weight_of(ckpt, cfg)
        packed, scales, zeros, perm, bits, group, channelwise = w.kernel_args()
        wbytes = quantized_bytes(K, N, cfg.bits, cfg.group, zeros is not None, perm is not None)
        free = _free_bytes(device)
        nq = _copies(wbytes, l2, free)
        qcopies = [(packed, scales, zeros)] + [
            (packed.clone(), scales.clone(), None if zeros is None else zeros.clone()) for _ in range(nq - 1)]
        dense_bytes = K * N * 2
        dcopies = []
        if "cublas" in cfg.impls:
            nd = _copies(dense_bytes, l2, free)
            dcopies = [torch.randn(N, K, generator=gen, device=device, dtype=torch.float32).mul_(0.02)
                       .to(torch_dtype) for _ in range(nd)]
        peer_fns = prepare_peers(cfg, state, ckpt, K, N, nq) if cfg.peers else {}
        wref = reference.dequantize(w) if cfg.peers else None  # fp32 (N, K), pure torch: the checked impls' reference
        del ckpt
        for M in cfg.m:
            x = torch.randn(M, K, generator=gen, device=device, dtype=torch.float32).to(torch_dtype)
            calls, checked = {}, {}
            for impl in cfg.impls:
                if impl == "cublas":
                    calls[impl] = [functools.partial(F.linear, x, d) for d in dcopies]
                elif impl in cfg.peers:
                    fns = peer_fns[impl]
                    if isinstance(fns, tuple):
                        checked[impl] = {"status": fns[0], "note": fns[1]}
                    else:
                        calls[impl] = [functools.partial(f, x) for f in fns]
                elif impl != "roofline":
                    calls[impl] = [functools.partial(ops.gemm, x, p, s, z, perm, None, bits, group, channelwise,
                                                     ops.PATHS[impl], det) for p, s, z in qcopies]
            if cfg.peers:  # every peer (and auto) against the fp32 reference before it is timed
                idx = check_rows(M, device)
                ref = reference_rows(x, idx, wref)
                for impl in [i for i in cfg.impls if (i in cfg.peers or i == "auto") and i in calls]:
                    try:
                        err = checked_error(calls[impl][0], idx, ref, torch_dtype, K)
                    except Exception as e:  # noqa: BLE001 - recorded, the rest runs
                        status, note = failure(impl, e)
                        checked[impl] = {"status": status, "note": note}
                        del calls[impl]
                        continue
                    checked[impl] = {"err": err}
                    if err > 1 and impl != "auto":  # a wrong peer is not timed; auto keeps its row and shows err
                        checked[impl].update(status="error", note=f"{impl}: wrong result, error {err:.3g}x the "
                                                                  "tolerance against the fp32 reference")
                        del calls[impl]
                del ref
            timed = time_point(calls, stream, cfg.rounds, cfg.device_index)
            for impl in cfg.impls:
                if impl == "roofline":
                    roof, hbm, compute = roofline_us(M, K, N, wbytes, ceilings)
                    rows.append(make_row(model, layer, M, impl, us=roof, weight_bytes=wbytes,
                                         hbm_floor_us=hbm, compute_floor_us=compute))
                    continue
                c = checked.get(impl, {})
                extra = {"err": c["err"]} if "err" in c else {}
                bytes_read = dense_bytes if impl == "cublas" else wbytes
                if "status" in c:
                    rows.append(make_row(model, layer, M, impl, status=c["status"], note=c["note"],
                                         weight_bytes=bytes_read, **extra))
                else:
                    rows.append(make_row(model, layer, M, impl, weight_bytes=bytes_read, **timed_fields(timed[impl]),
                                         **extra))
                if progress is not None:
                    progress.step(f"{model} {layer.name} M={M} {impl}")
            del x, calls
            if device.type == "cuda":
                torch.cuda.empty_cache()  # the graphs' private pools (GBs at large M)
        del w, qcopies, dcopies, packed, scales, zeros, perm, peer_fns, wref
        if device.type == "cuda":
            torch.cuda.empty_cache()
    config = {"models": list(cfg.models), "bits": cfg.bits, "group": cfg.group, "dtype": cfg.dtype,
              "m": list(cfg.m), "impls": list(cfg.impls), "zero_points": cfg.zero_points,
              "act_order": cfg.act_order, "deterministic": cfg.deterministic}
    if cfg.peers:
        config["peers"] = peers.describe(cfg.peers, cfg.peer_source)
    return make_result(rows, device=info, config=config, ceilings=ceilings, commit=cfg.commit, rounds=cfg.rounds,
                       torch_version=torch.__version__, cuda_version=torch.version.cuda)
