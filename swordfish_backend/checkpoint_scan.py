"""Read a local Hugging Face quantized checkpoint without loading it.

``scan(DIR)`` reads ``config.json`` (its ``quantization_config``), the
safetensors headers of every shard (names, dtypes and shapes only: the
8-byte length and the JSON header at the start of each file) and, for
compressed-tensors, each layer's two-element ``weight_shape``. It returns a
``Checkpoint`` that lists every quantized linear layer with its format,
``K x N`` and the reason Swordfish cannot serve it (None when it can), and
groups per-expert MoE tensors (``...experts.<E>.<proj>``) into expert
groups. Tensors are read one at a time, later, by ``Checkpoint.read`` and
``load_weight`` (safetensors ``safe_open``): never the whole model.

Formats read (the loaders are ``QuantizedWeight.from_gptq / from_awq /
from_compressed_tensors``):

* ``gptq``: ``qweight`` / ``qzeros`` / ``scales`` / ``g_idx``; ``bits``,
  ``group_size``, ``desc_act``, ``sym``, ``checkpoint_format`` (gptq: qzeros
  hold zero - 1; gptq_v2: the zero itself), ``dynamic`` per-module overrides.
* ``awq`` (``version`` gemm): ``qweight`` / ``qzeros`` / ``scales``.
* ``compressed-tensors``, format ``pack-quantized``: ``weight_packed`` /
  ``weight_scale`` / ``weight_shape`` / ``weight_zero_point`` /
  ``weight_g_idx``; per ``config_groups`` entry ``num_bits``, ``group_size``,
  ``strategy`` (group / channel), ``symmetric``, ``actorder``, ``targets``.

A directory that is not a checkpoint of these (no config.json, no
quantization_config, another quant_method or format, a tensor missing)
raises ``CheckpointError`` naming what is wrong.

``oracle_weight`` dequantizes a layer straight from the checkpoint's own
tensors and conventions, in fp64, with code written apart from the loaders
(``checkpoints.py``), so a loader that misreads a layout is caught by
comparing the two.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

METHODS = ("gptq", "awq", "compressed-tensors")
CT_FORMAT = "pack-quantized"
INDEX_FILE = "model.safetensors.index.json"
# Where quantization settings live besides config.json's quantization_config (AutoGPTQ / AutoAWQ files).
SIDE_CONFIGS = ("quantize_config.json", "quant_config.json")
EXPERT_RE = re.compile(r"^(?P<prefix>.*\.experts)\.(?P<index>\d+)\.(?P<proj>[^.]+(?:\.[^.]+)*)$")
# Tensor roles per method: (the suffix that marks a quantized layer, every role's suffix).
ROLES = {
    "gptq": ("qweight", ("qweight", "qzeros", "scales", "g_idx", "bias")),
    "awq": ("qweight", ("qweight", "qzeros", "scales", "bias")),
    "compressed-tensors": ("weight_packed", ("weight_packed", "weight_scale", "weight_shape", "weight_zero_point",
                                             "weight_g_idx", "bias")),
}
ACT_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "bf16": "bf16", "fp16": "fp16"}


class CheckpointError(ValueError):
    """The directory is not a checkpoint Swordfish can read; the message names what is wrong."""


@dataclass
class Layer:
    """One quantized linear layer (or one expert's projection) of the checkpoint."""

    name: str                   # module name, e.g. model.layers.0.self_attn.q_proj
    method: str                 # gptq | awq | compressed-tensors
    bits: int
    group: int                  # 32, 64, 128, ... or -1 (channelwise)
    zero_points: bool           # explicit zero points (AWQ, asymmetric)
    act_order: bool             # g_idx present (desc_act / actorder)
    K: int                      # in_features
    N: int                      # out_features
    tensors: dict               # role -> tensor name in the checkpoint
    reason: str | None = None   # why Swordfish cannot serve it; None: it can
    zero_offset: int = 0        # GPTQ v1 stores zero - 1 in qzeros: 1; otherwise 0
    expert: tuple | None = None  # (group name, expert index) for MoE experts

    @property
    def format(self) -> str:
        """e.g. 'gptq int4 act', 'awq int4 zp', 'ct int8'."""
        short = {"compressed-tensors": "ct"}.get(self.method, self.method)
        extras = (" zp" if self.zero_points else "") + (" act" if self.act_order else "")
        return f"{short} int{self.bits}{extras}"

    @property
    def group_label(self) -> str:
        return "cw" if self.group == -1 else str(self.group)

    @property
    def served(self) -> bool:
        return self.reason is None


@dataclass
class ExpertGroup:
    """The same projection of every expert of one MoE block: ``<prefix>.<E>.<proj>``."""

    name: str                   # e.g. model.layers.0.mlp.experts.*.gate_proj
    prefix: str
    proj: str
    experts: list               # [Layer] by expert index

    @property
    def first(self) -> Layer:
        return self.experts[0]

    @property
    def num_experts(self) -> int:
        return len(self.experts)

    @property
    def reason(self) -> str | None:
        reasons = [e.reason for e in self.experts if e.reason]
        if reasons:
            return reasons[0]
        shapes = {(e.K, e.N, e.bits, e.group, e.zero_points, e.act_order) for e in self.experts}
        if len(shapes) > 1:
            return f"its {len(self.experts)} experts differ in shape or format ({len(shapes)} kinds)"
        return None


@dataclass
class Checkpoint:
    path: Path
    config: dict                # config.json
    quant: dict                 # the quantization config
    method: str
    description: str            # e.g. "gptq int4 g128 desc_act sym"
    act_dtype: str              # bf16 | fp16: what the check and bench run the activations in
    act_dtype_note: str | None  # set when config.json does not say bf16 / fp16
    files: dict                 # tensor name -> shard Path
    headers: dict               # tensor name -> (dtype string, shape tuple)
    layers: list = field(default_factory=list)         # dense [Layer]
    expert_groups: list = field(default_factory=list)  # [ExpertGroup]
    unquantized: list = field(default_factory=list)    # 2-D '.weight' tensors of layers left in float

    @property
    def shards(self) -> list:
        return sorted(set(self.files.values()))

    @property
    def num_quantized(self) -> int:
        return len(self.layers) + sum(g.num_experts for g in self.expert_groups)

    def read(self, name: str):
        """One tensor, read from its shard with safetensors' safe_open (the rest of the file is not read)."""
        from safetensors import safe_open

        if name not in self.files:
            raise CheckpointError(f"{self.path}: tensor {name!r} is not in any shard")
        with safe_open(str(self.files[name]), framework="pt") as f:
            return f.get_tensor(name)


# ------------------------------------------------------------------ files


def read_header(path: Path) -> dict:
    """{tensor name: (dtype, shape)} from a safetensors file's header (the data is not read)."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise CheckpointError(f"{path}: not a safetensors file (shorter than 8 bytes)")
            (n,) = struct.unpack("<Q", head)
            if n > 1 << 30:
                raise CheckpointError(f"{path}: not a safetensors file (header length {n})")
            meta = json.loads(f.read(n))
    except (OSError, ValueError, UnicodeDecodeError) as e:
        if isinstance(e, CheckpointError):
            raise
        raise CheckpointError(f"{path}: unreadable safetensors header: {e}") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: not a safetensors file (header is not a JSON object)")
    return {k: (v["dtype"], tuple(v["shape"])) for k, v in meta.items() if k != "__metadata__"}


def _load_json(path: Path, what: str) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: cannot read {what}: {e}") from None
    if not isinstance(doc, dict):
        raise CheckpointError(f"{path}: {what} is not a JSON object")
    return doc


def _shard_files(root: Path) -> tuple[dict, dict]:
    """(tensor name -> shard, tensor name -> (dtype, shape)) over the shards the index names, or every
    *.safetensors file when there is no index."""
    index = root / INDEX_FILE
    headers, files = {}, {}
    if index.exists():
        weight_map = _load_json(index, INDEX_FILE).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{index}: has no weight_map")
        shards = sorted(set(weight_map.values()))
        missing = [s for s in shards if not (root / s).is_file()]
        if missing:
            raise CheckpointError(f"{root}: {INDEX_FILE} names shard(s) that are missing: {', '.join(missing)}")
        for shard in shards:
            for name, meta in read_header(root / shard).items():
                headers[name] = meta
                files[name] = root / shard
        absent = [k for k, s in weight_map.items() if k not in headers or files[k] != root / s]
        if absent:
            raise CheckpointError(f"{root}: {len(absent)} tensor(s) listed in {INDEX_FILE} are not in the shard it "
                                  f"names, e.g. {absent[0]!r} (expected in {weight_map[absent[0]]})")
        return files, headers
    shards = sorted(root.glob("*.safetensors"))
    if not shards:
        bins = sorted(p.name for p in root.glob("*.bin"))
        extra = f" (found {', '.join(bins[:3])}: PyTorch .bin checkpoints are not read; convert to safetensors)" \
            if bins else ""
        raise CheckpointError(f"{root}: no *.safetensors files{extra}")
    for shard in shards:
        for name, meta in read_header(shard).items():
            if name in headers:
                raise CheckpointError(f"{root}: tensor {name!r} is in both {files[name].name} and {shard.name}")
            headers[name] = meta
            files[name] = shard
    return files, headers


def _quant_config(root: Path, config: dict) -> dict:
    for key in ("quantization_config", "compression_config"):
        q = config.get(key)
        if isinstance(q, dict):
            return q
    for side in SIDE_CONFIGS:
        if (root / side).is_file():
            q = _load_json(root / side, side)
            if "quant_method" not in q:
                q = dict(q, quant_method="awq" if side == "quant_config.json" else "gptq")
            return q
    raise CheckpointError(f"{root}/config.json has no quantization_config: this is not a quantized checkpoint "
                          "(swordfish reads GPTQ, AWQ and compressed-tensors pack-quantized checkpoints)")


def _method(q: dict) -> str:
    raw = str(q.get("quant_method", "")).lower().replace("_", "-")
    if raw in ("gptq", "gptq-marlin"):
        return "gptq"
    if raw in ("awq", "awq-marlin"):
        return "awq"
    if raw == "compressed-tensors" or (not raw and "config_groups" in q):
        return "compressed-tensors"
    got = q.get("quant_method")
    raise CheckpointError(f"quant_method {got!r} is not supported: swordfish reads gptq, awq and compressed-tensors "
                          f"({CT_FORMAT}) checkpoints")


def _act_dtype(config: dict, scale_dtypes: set) -> tuple[str, str | None]:
    raw = config.get("torch_dtype", config.get("dtype"))
    if isinstance(raw, str) and raw.replace("torch.", "") in ACT_DTYPES:
        return ACT_DTYPES[raw.replace("torch.", "")], None
    for st, name in (("BF16", "bf16"), ("F16", "fp16")):
        if st in scale_dtypes:
            return name, f"config.json dtype is {raw!r}; activations run in {name}, the scales' dtype"
    return "bf16", f"config.json dtype is {raw!r}; activations run in bf16 (Swordfish runs fp16 / bf16)"


# ------------------------------------------------------------------ per-method layer settings


def _match(target: str, name: str) -> bool:
    if target.startswith("re:"):
        return re.match(target[3:], name) is not None
    if "." not in target and target[:1].isupper():
        return True  # a module class such as "Linear": every quantized layer here is a linear layer
    return name == target or name.endswith("." + target)


def _gptq_settings(q: dict, name: str) -> dict:
    s = {"bits": q.get("bits", 4), "group": q.get("group_size", 128), "desc_act": bool(q.get("desc_act", False)),
         "sym": bool(q.get("sym", True))}
    dynamic = q.get("dynamic") or {}
    for pattern, override in dynamic.items():
        pat = pattern[2:] if pattern[:2] in ("+:", "-:") else pattern
        if re.match(pat, name) and isinstance(override, dict):
            for key, to in (("bits", "bits"), ("group_size", "group"), ("desc_act", "desc_act"), ("sym", "sym")):
                if key in override:
                    s[to] = override[key]
    return s


def _ct_groups(q: dict) -> list:
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise CheckpointError("compressed-tensors quantization_config has no config_groups")
    top = q.get("format")
    out = []
    for gname, g in groups.items():
        if not isinstance(g, dict):
            raise CheckpointError(f"compressed-tensors config_groups.{gname} is not an object")
        out.append((gname, g, g.get("format") or top))
    if not any(f == CT_FORMAT for _, _, f in out):
        formats = sorted({str(f) for _, _, f in out})
        raise CheckpointError(f"compressed-tensors format {', '.join(formats)} is not supported: swordfish reads "
                              f"the {CT_FORMAT} format (int4 / int8 weights, fp16 / bf16 activations)")
    return out


def _ct_group_for(groups: list, name: str):
    for gname, g, f in groups:
        if any(_match(t, name) for t in g.get("targets") or ["Linear"]):
            return gname, g, f
    return None


def _ct_reason(g: dict, fmt_name: str) -> str | None:
    w = g.get("weights") or {}
    if fmt_name != CT_FORMAT:
        return f"compressed-tensors format {fmt_name} (swordfish reads {CT_FORMAT})"
    if g.get("input_activations"):
        bits = (g["input_activations"] or {}).get("num_bits", "?")
        return (f"activations are quantized too (W{w.get('num_bits', '?')}A{bits}): Swordfish is weight-only with "
                "fp16 / bf16 activations")
    if w.get("type", "int") != "int":
        return f"weights are {w.get('type')} (Swordfish reads int4 / int8)"
    strategy = w.get("strategy", "group")
    if strategy not in ("group", "channel"):
        return f"weight strategy {strategy!r} (Swordfish reads group and channel)"
    return None


# ------------------------------------------------------------------ scanning


def _shape(headers: dict, name: str | None):
    return None if name is None or name not in headers else headers[name][1]


def _layer(method: str, q: dict, name: str, tensors: dict, headers: dict, ct_groups) -> Layer:
    """The Layer of module `name` from its tensors' header shapes (no tensor data is read)."""
    from .vllm import selection

    qw = _shape(headers, tensors[ROLES[method][0]])
    if len(qw) != 2:
        raise CheckpointError(f"layer {name}: {tensors[ROLES[method][0]]} has shape {qw}, expected 2-D packed words")
    reason = None
    zero_offset = 0
    if method == "gptq":
        s = _gptq_settings(q, name)
        bits, group = int(s["bits"]), int(s["group"])
        if "scales" not in tensors:
            raise CheckpointError(f"layer {name}: {tensors['qweight']} has no {name}.scales beside it")
        K, N = (qw[0] * 32 // bits if 32 % bits == 0 else None), qw[1]
        zp, act = not s["sym"], bool(s["desc_act"]) and "g_idx" in tensors
        zero_offset = 0 if str(q.get("checkpoint_format", "gptq")).lower() == "gptq_v2" else 1
        if zp:
            reason = ("asymmetric GPTQ (sym=false): vLLM serves it with its GPTQ method, not through the "
                      "MPLinear kernels Swordfish plugs into (gptq_marlin needs sym=true)")
        if "g_idx" in tensors and K is not None and _shape(headers, tensors["g_idx"]) != (K,):
            raise CheckpointError(f"layer {name}: g_idx has shape {_shape(headers, tensors['g_idx'])}, expected "
                                  f"({K},) for qweight {qw} at {bits} bits")
    elif method == "awq":
        bits = int(q.get("bits", q.get("w_bit", 4)))
        group = int(q.get("group_size", q.get("q_group_size", 128)))
        for role in ("scales", "qzeros"):
            if role not in tensors and (role == "scales" or q.get("zero_point", True)):
                raise CheckpointError(f"layer {name}: {tensors['qweight']} has no {name}.{role} beside it")
        K, N = qw[0], qw[1] * 8
        zp, act = "qzeros" in tensors, False
        if bits != 4:
            reason = f"AWQ int{bits}: the AWQ GEMM layout Swordfish reads is int4"
        elif not zp:
            reason = "AWQ without zero points (zero_point=false) is not a layout Swordfish reads"
    else:
        for role in ("weight_scale", "weight_shape"):
            if role not in tensors:
                raise CheckpointError(f"layer {name}: {tensors['weight_packed']} has no {name}.{role} beside it")
        found = _ct_group_for(ct_groups, name)
        if found is None:
            raise CheckpointError(f"layer {name}: no compressed-tensors config_groups entry targets it")
        _, g, fmt_name = found
        w = g.get("weights") or {}
        bits = int(w.get("num_bits", 4))
        group = -1 if w.get("strategy", "group") == "channel" else int(w.get("group_size") or -1)
        N, K = qw[0], (qw[1] * 32 // bits if 32 % bits == 0 else None)
        zp, act = "weight_zero_point" in tensors, "weight_g_idx" in tensors
        if not w.get("symmetric", True) and not zp:
            raise CheckpointError(f"layer {name}: symmetric=false but there is no {name}.weight_zero_point")
        reason = _ct_reason(g, fmt_name)
    if reason is None and K is None:
        reason = f"int{bits} weights are not supported (int4 and int8 are)"
    if reason is None:
        # the predicate the vLLM plugin's can_implement asks (TP = 1: the whole layer is one partition)
        reason = selection.support_reason(bits=bits, has_zero_points=zp, group_size=group, act_dtype="bfloat16",
                                          out_dtype=None, in_features=K, out_features=N)
    return Layer(name=name, method=method, bits=bits, group=group, zero_points=zp, act_order=act, K=K or 0, N=N,
                 tensors=tensors, reason=reason, zero_offset=zero_offset)


def describe(method: str, q: dict, layers: list) -> str:
    """One line for the report: the method and its settings as the checkpoint states them."""
    if method == "gptq":
        g = q.get("group_size", 128)
        return (f"gptq int{q.get('bits', 4)} group {g} desc_act={bool(q.get('desc_act', False))} "
                f"sym={bool(q.get('sym', True))} ({q.get('checkpoint_format', 'gptq')})")
    if method == "awq":
        return (f"awq int{q.get('bits', q.get('w_bit', 4))} group {q.get('group_size', q.get('q_group_size'))} "
                f"zero_point={q.get('zero_point', True)} version {q.get('version', 'gemm')}")
    parts = []
    for gname, g in (q.get("config_groups") or {}).items():
        w = g.get("weights") or {}
        strat = w.get("strategy", "group")
        what = f"group {w.get('group_size')}" if strat == "group" else strat
        act = f" actorder={w.get('actorder')}" if w.get("actorder") else ""
        a = " +activations" if g.get("input_activations") else ""
        parts.append(f"{gname}: int{w.get('num_bits')} {what} symmetric={w.get('symmetric', True)}{act}{a}")
    return f"compressed-tensors {q.get('format')} ({'; '.join(parts)})"


def scan(path) -> Checkpoint:
    """Read config.json, the quantization config and the shard headers; list every quantized layer."""
    root = Path(path)
    if not root.is_dir():
        raise CheckpointError(f"{root}: not a directory")
    if not (root / "config.json").is_file():
        raise CheckpointError(f"{root}: no config.json (a Hugging Face checkpoint directory has config.json and "
                              "*.safetensors shards)")
    config = _load_json(root / "config.json", "config.json")
    q = _quant_config(root, config)
    method = _method(q)
    if method == "awq":
        version = str(q.get("version", "gemm")).lower()
        if version != "gemm":
            raise CheckpointError(f"AWQ version {q.get('version')!r} is not supported: swordfish reads the AWQ GEMM "
                                  "layout (version gemm)")
    ct_groups = _ct_groups(q) if method == "compressed-tensors" else None
    files, headers = _shard_files(root)

    marker, roles = ROLES[method]
    by_module: dict = {}
    for tname in headers:
        module, _, role = tname.rpartition(".")
        if role in roles:
            by_module.setdefault(module, {})[role] = tname
    quantized = sorted((m for m, t in by_module.items() if marker in t), key=_natural)
    ck = Checkpoint(path=root, config=config, quant=q, method=method, description=describe(method, q, []),
                    act_dtype="bf16", act_dtype_note=None, files=files, headers=headers)
    if not quantized:
        kinds = {"gptq": "*.qweight", "awq": "*.qweight", "compressed-tensors": "*.weight_packed"}[method]
        other = sorted({n.rpartition(".")[2] for n in headers if n.endswith(("weight_scale", "qweight"))})
        hint = f" (found {', '.join(other)} tensors)" if other else ""
        raise CheckpointError(f"{root}: quant_method {method} but no {kinds} tensor in the shards{hint}: tensors are "
                              "missing or this is not a quantized checkpoint of that method")
    groups: dict = {}
    for module in quantized:
        layer = _layer(method, q, module, by_module[module], headers, ct_groups)
        m = EXPERT_RE.match(module)
        if m:
            layer.expert = (f"{m['prefix']}.*.{m['proj']}", int(m["index"]))
            groups.setdefault((m["prefix"], m["proj"]), []).append(layer)
        else:
            ck.layers.append(layer)
    for (prefix, proj), experts in groups.items():
        experts.sort(key=lambda e: e.expert[1])
        ck.expert_groups.append(ExpertGroup(name=f"{prefix}.*.{proj}", prefix=prefix, proj=proj, experts=experts))
    ck.expert_groups.sort(key=lambda g: _natural(g.prefix) + [g.proj])
    if method == "compressed-tensors":
        # float / fp8 / int-quantized layers of other config groups carry weight_scale but no weight_packed
        for module, t in by_module.items():
            if "weight_packed" not in t and "weight_scale" in t and (module + ".weight") in headers:
                found = _ct_group_for(ct_groups, module)
                fmt_name = found[2] if found else "?"
                dt, shape = headers[module + ".weight"]
                if len(shape) == 2:
                    ck.layers.append(Layer(name=module, method=method, bits=0, group=0, zero_points=False,
                                           act_order=False, K=shape[1], N=shape[0], tensors=t,
                                           reason=f"compressed-tensors format {fmt_name} ({dt} weight; swordfish "
                                                  f"reads {CT_FORMAT})"))
        ck.layers.sort(key=lambda layer: _natural(layer.name))
    done = set(quantized)
    # linear layers left in floating point (lm_head, say): 2-D '.weight' tensors that are not embedding tables
    ck.unquantized = sorted((n[:-len(".weight")] for n, (dt, shape) in headers.items()
                             if n.endswith(".weight") and len(shape) == 2 and n[:-len(".weight")] not in done
                             and n[:-len(".weight")] not in by_module and "embed" not in n), key=_natural)
    scale_dtypes = {headers[t.get("scales") or t.get("weight_scale")][0] for t in by_module.values()
                    if (t.get("scales") or t.get("weight_scale")) in headers}
    ck.act_dtype, ck.act_dtype_note = _act_dtype(config, scale_dtypes)
    return ck


def _natural(name: str) -> list:
    """Sort key: layers.2 before layers.10."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


# ------------------------------------------------------------------ loading one layer


def torch_dtype(name: str):
    import torch

    return torch.bfloat16 if name == "bf16" else torch.float16


def load_weight(ck: Checkpoint, layer: Layer, dtype, device=None):
    """(QuantizedWeight through our loaders, bias or None, {role: tensor} as read) for one layer."""
    import torch

    from .weight import QuantizedWeight

    t = {role: ck.read(tname) for role, tname in layer.tensors.items()}
    if device is not None:
        t = {role: v.to(device) for role, v in t.items()}
    if layer.method == "gptq":
        w = QuantizedWeight.from_gptq(t["qweight"], t["scales"], t.get("g_idx"), bits=layer.bits,
                                      group_size=layer.group, dtype=dtype)
    elif layer.method == "awq":
        w = QuantizedWeight.from_awq(t["qweight"], t["qzeros"], t["scales"], group_size=layer.group, dtype=dtype)
    else:
        w = QuantizedWeight.from_compressed_tensors(
            t["weight_packed"], t["weight_scale"], weight_shape=tuple(int(v) for v in t["weight_shape"].tolist()),
            num_bits=layer.bits,
            group_size=layer.group, weight_zero_point=t.get("weight_zero_point"), weight_g_idx=t.get("weight_g_idx"),
            dtype=dtype)
    bias = t.get("bias")
    if bias is not None:
        bias = bias.to(dtype)
    return w, bias, t


# ------------------------------------------------------------------ the independent oracle


def _unpack_lsb(words, bits: int, dim: int):
    """int32 words packed along `dim`, value i of a word in bits [i*bits, (i+1)*bits) -> unsigned int64 codes."""
    import torch

    vpw = 32 // bits
    w = words.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(vpw, device=words.device, dtype=torch.int64) * bits
    if dim == 0:
        codes = (w.unsqueeze(1) >> shifts.view(1, vpw, 1)) & ((1 << bits) - 1)  # (R, vpw, C)
        return codes.reshape(w.shape[0] * vpw, w.shape[1])
    codes = (w.unsqueeze(2) >> shifts.view(1, 1, vpw)) & ((1 << bits) - 1)      # (R, C, vpw)
    return codes.reshape(w.shape[0], w.shape[1] * vpw)


AWQ_COLUMN_OF_NIBBLE = (0, 2, 4, 6, 1, 3, 5, 7)  # AutoAWQ's GEMM pack order: nibble i holds column 8c + this


def oracle_weight(layer: Layer, t: dict, dtype):
    """(W (N, K) fp64, rounded once to `dtype`; |zero point * scale| (N, K) fp64) from the checkpoint tensors.

    W[n, k] = (q[k, n] - z[g(k), n]) * s[g(k), n] with each method's own conventions; scales are first cast
    to `dtype` (what a runtime holding the model in that dtype does).
    """
    import torch

    K, N, bits = layer.K, layer.N, layer.bits
    f64 = torch.float64
    if layer.method == "gptq":
        q = _unpack_lsb(t["qweight"], bits, 0)                                        # (K, N)
        s = t["scales"].to(dtype).to(f64)                                             # (G, N)
        if "qzeros" in t:  # v1 (checkpoint_format gptq) stores zero - 1, modulo 2^bits
            z = (_unpack_lsb(t["qzeros"], bits, 1)[:, :N] + layer.zero_offset) & ((1 << bits) - 1)
        else:
            z = torch.full_like(s, 1 << (bits - 1), dtype=torch.int64)
        g = t["g_idx"].to(torch.int64) if "g_idx" in t else _rows_to_groups(K, layer.group, q.device)
    elif layer.method == "awq":
        def unpack_awq(words):
            raw = _unpack_lsb(words, 4, 1).reshape(words.shape[0], words.shape[1], 8)
            out = torch.empty_like(raw)
            out[:, :, list(AWQ_COLUMN_OF_NIBBLE)] = raw
            return out.reshape(words.shape[0], words.shape[1] * 8)

        q = unpack_awq(t["qweight"])                                                  # (K, N)
        z = unpack_awq(t["qzeros"])                                                   # (G, N)
        s = t["scales"].to(dtype).to(f64)
        g = _rows_to_groups(K, layer.group, q.device)
    else:
        offset = 1 << (bits - 1)
        q = _unpack_lsb(t["weight_packed"], bits, 1)[:, :K].t()                       # (K, N), stored q + offset
        s = t["weight_scale"].to(dtype).to(f64).t()                                   # (G, N)
        if "weight_zero_point" in t:
            zp = t["weight_zero_point"]
            if zp.dtype == torch.int32 and zp.shape[0] * (32 // bits) >= N and zp.shape[0] != N:
                z = _unpack_lsb(zp, bits, 0)[:N].t()                                  # packed along N: stored z + offset
            else:
                z = (zp.to(torch.int64) + offset).t()
        else:
            z = torch.full(s.shape, offset, dtype=torch.int64, device=q.device)
        g = t["weight_g_idx"].to(torch.int64) if "weight_g_idx" in t else _rows_to_groups(K, layer.group, q.device)
    if layer.group == -1:
        g = torch.zeros(K, dtype=torch.int64, device=q.device)
    sk, zk = s[g], z.to(f64)[g]                                                       # (K, N)
    exact = (q.to(f64) - zk) * sk
    w = exact.to(dtype).to(f64).t().contiguous()
    zabs = ((zk - (1 << (bits - 1))) * sk).abs().t().contiguous()
    return w, zabs


def _rows_to_groups(K: int, group: int, device):
    import torch

    if group == -1:
        return torch.zeros(K, dtype=torch.int64, device=device)
    return torch.arange(K, device=device) // group


# ------------------------------------------------------------------ MoE experts

# Which projection of an expert is which, by name: (gate, up, down). Mixtral: w1 gate, w3 up, w2 down.
EXPERT_ROLES = (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2"))
# The dimension along N of each stored tensor (for fusing gate and up into w13 = [gate | up]).
N_DIM = {"gptq": {"qweight": 1, "qzeros": 1, "scales": 1},
         "awq": {"qweight": 1, "qzeros": 1, "scales": 1},
         "compressed-tensors": {"weight_packed": 0, "weight_scale": 0, "weight_zero_point": 0}}


def moe_blocks(ck) -> list[tuple[str, tuple]]:
    """[(prefix, (gate, up, down) ExpertGroups)] for every MoE block whose experts have all three projections."""
    by_prefix: dict = {}
    for g in ck.expert_groups:
        by_prefix.setdefault(g.prefix, {})[g.proj] = g
    out = []
    for prefix, groups in by_prefix.items():
        for names in EXPERT_ROLES:
            if all(n in groups for n in names):
                out.append((prefix, tuple(groups[n] for n in names)))
                break
    return out


def load_experts(ck, groups, dtype, device=None):
    """sf.QuantizedExperts of one projection, or of several fused along N (gate and up -> w13), through
    QuantizedExperts.from_* on the experts' checkpoint tensors stacked along E (what a MoE loader does).

    Returns (experts, {role: [E per-expert tensors as read]} of each group, in order)."""
    import torch

    from .moe import QuantizedExperts

    first = groups[0].first
    reads = []
    for g in groups:
        per_role: dict = {}
        for layer in g.experts:
            for role, tname in layer.tensors.items():
                t = ck.read(tname)
                per_role.setdefault(role, []).append(t if device is None else t.to(device))
        reads.append(per_role)
    ndim = N_DIM[first.method]
    stacked = {}
    for role in reads[0]:
        if role in ("bias", "weight_shape"):
            continue
        per_expert = [r[role] for r in reads]
        if role in ndim:
            stacked[role] = torch.stack([torch.cat(parts, dim=ndim[role]) for parts in zip(*per_expert)])
        else:  # g_idx: one per expert, the same for every fused projection
            for other in per_expert[1:]:
                if any(not torch.equal(a, b) for a, b in zip(per_expert[0], other)):
                    raise ValueError(f"{groups[0].name} and {groups[1].name} have different {role}: they cannot be "
                                     "fused into one w13")
            stacked[role] = torch.stack(per_expert[0])
    N = sum(g.first.N for g in groups)
    if first.method == "gptq":
        w = QuantizedExperts.from_gptq(stacked["qweight"], stacked["scales"], stacked.get("g_idx"), bits=first.bits,
                                       group_size=first.group, dtype=dtype)
    elif first.method == "awq":
        w = QuantizedExperts.from_awq(stacked["qweight"], stacked["qzeros"], stacked["scales"],
                                      group_size=first.group, dtype=dtype)
    else:
        w = QuantizedExperts.from_compressed_tensors(
            stacked["weight_packed"], stacked["weight_scale"], weight_shape=(N, first.K), num_bits=first.bits,
            group_size=first.group, weight_zero_point=stacked.get("weight_zero_point"),
            weight_g_idx=stacked.get("weight_g_idx"), dtype=dtype)
    return w, reads
