"""The peers of ``swordfish bench --peers``: the kernels vLLM 0.33 would run instead of Swordfish.

One small adapter per peer, each written here over vLLM's compiled ops (no vLLM code is copied):

* ``marlin``: Marlin (``gptq_marlin_repack`` once, ``marlin_gemm`` per call), vLLM's kernel for
  symmetric GPTQ int4 / int8 on every CUDA GPU it supports; AWQ int4 with zero points through
  ``awq_marlin_repack`` and Marlin's packed zero points, as vLLM's AWQ Marlin path prepares them.
* ``machete``: Machete (``machete_prepack_B`` once, ``machete_mm`` per call), vLLM's choice on sm90.
* ``marlin_moe``: Marlin MoE as vLLM's fused_marlin_moe runs it: ``moe_align_block_size``,
  ``moe_wna16_marlin_gemm`` (w13), ``silu_and_mul``, ``moe_wna16_marlin_gemm`` (w2, router weights
  applied in the GEMM), ``moe_sum``; experts repacked one by one with ``gptq_marlin_repack`` (AWQ:
  ``awq_marlin_repack``, zero points as for ``marlin``).

An adapter answers ``available(device)`` (its ops loaded, this GPU) and ``supports(...)`` (this format and
shape) with a reason or None, and ``prepare(...)`` turns GPTQ tensors (or AWQ's, with ``qzeros``) into a
callable. The ops come from ``load()``: the vLLM installed in this environment (``import vllm._custom_ops``
loads its extensions), or ``load(peers_from=DIR)``: vLLM's stable-ABI extension files themselves
(``_C_stable_libtorch.abi3.so``, ``_moe_C_stable_libtorch.abi3.so``, or the ``.so.xz`` of
``shared/peers/get_peers.sh``), which load on torch >= 2.11 without vLLM installed. Nothing here imports
vLLM or touches CUDA at import time.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

DENSE = ("marlin", "machete")
MOE = ("marlin_moe",)

# Every op an adapter calls: (torch.ops namespace, argument names in schema order). The names and their order
# are those of vLLM 0.33's vllm._custom_ops wrappers, which forward them positionally (tests/test_peers_vllm.py
# checks both against the installed vLLM); silu_and_mul has no wrapper: vLLM's SiluAndMul calls (out, input).
OPS = {
    "gptq_marlin_repack": ("_C", ("b_q_weight", "size_k", "size_n", "num_bits", "is_a_8bit")),
    "awq_marlin_repack": ("_C", ("b_q_weight", "size_k", "size_n", "num_bits", "is_a_8bit")),
    "marlin_gemm": ("_C", ("a", "c", "b_q_weight", "b_bias", "b_scales", "a_scales", "global_scale", "b_zeros",
                           "workspace", "b_q_type", "size_m", "size_n", "size_k", "use_atomic_add",
                           "use_fp32_reduce", "is_zp_float")),
    "machete_prepack_B": ("_C", ("b_q_weight", "a_type", "b_type", "group_scales_type")),
    "machete_mm": ("_C", ("a", "b_q", "b_type", "out_type", "b_group_scales", "b_group_zeros", "b_group_size",
                          "b_channel_scales", "a_token_scales", "schedule")),
    "silu_and_mul": ("_C", ("out", "input")),
    "moe_align_block_size": ("_moe_C", ("topk_ids", "num_experts", "block_size", "sorted_token_ids", "experts_ids",
                                        "num_tokens_post_pad", "expert_map", "scatter_idx")),
    "moe_wna16_marlin_gemm": ("_moe_C", ("input", "output", "b_qweight", "b_bias", "b_scales", "a_scales",
                                         "global_scale", "b_qzeros", "workspace", "sorted_token_ids", "expert_ids",
                                         "num_tokens_past_padded", "topk_weights", "moe_block_size", "top_k",
                                         "mul_topk_weights", "b_q_type", "size_m", "size_n", "size_k",
                                         "use_atomic_add", "use_fp32_reduce", "is_zp_float", "thread_k", "thread_n",
                                         "blocks_per_sm")),
    "moe_sum": ("_moe_C", ("input", "output", "topk_ids", "expert_map")),
}

# vLLM's ScalarType ids of symmetric GPTQ codes (vllm.scalar_type.scalar_types.uint4b8 / uint8b128 .id in 0.33)
SCALAR_TYPE_IDS = {4: 1125899907892224, 8: 1125899923621888}
# ... and of codes with explicit zero points (scalar_types.uint4.id: AWQ's type)
ZP_SCALAR_TYPE_IDS = {4: 1125899906843648}
# Marlin's dequantizer reads the eight 4-bit zero points of a word in this column order
MARLIN_ZP_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)

# --peers-from DIR: the file names each namespace's library may have there (vLLM's wheel, then get_peers.sh's)
LIBRARY_FILES = {
    "_C": ("_C_stable_libtorch.abi3.so", "c_stable.so", "c_stable.so.xz"),
    "_moe_C": ("_moe_C_stable_libtorch.abi3.so", "moe_c_stable.so", "moe_c_stable.so.xz"),
}

MARLIN_LOCKS_PER_SM = 4   # Marlin's workspace: one lock per thread block, up to 4 blocks per SM (vLLM's maximum)
NOT_INSTALLED = "vLLM is not installed in this environment"


@dataclass(frozen=True)
class Source:
    """Where the peer ops came from (``label``), or why they could not be loaded (``error``)."""

    label: str | None
    error: str | None = None
    missing: tuple = ()     # namespaces --peers-from found no library for, with the names looked for


_LOADED: dict = {}


def load(peers_from: str | None = None) -> Source:
    """Load the peer ops once per process: from the installed vLLM, or from the extension files in `peers_from`."""
    key = peers_from or ""
    if key not in _LOADED:
        _LOADED[key] = _load_from_dir(Path(peers_from)) if peers_from else _load_vllm()
    return _LOADED[key]


def _load_vllm() -> Source:
    try:
        import vllm
    except ImportError:
        return Source(None, f"{NOT_INSTALLED} ({sys.executable}): install vLLM 0.33 beside swordfish_backend "
                            "(pip install 'vllm==0.33.*'), or pass --peers-from DIR with vLLM 0.33's "
                            "extension files")
    version = getattr(vllm, "__version__", "?")
    try:
        import vllm._custom_ops  # noqa: F401 - loads vLLM's extensions, which register torch.ops._C / _moe_C
    except Exception as e:  # noqa: BLE001 - a broken install is a reason, not a crash
        return Source(None, f"vLLM {version} is installed but its ops did not load: {first_line(e)}")
    note = "" if version.startswith("0.33") else "; the adapters were written for vLLM 0.33"
    return Source(f"vLLM {version} ({Path(vllm.__file__).parent}){note}")


def _load_from_dir(folder: Path) -> Source:
    import torch

    if not folder.is_dir():
        return Source(None, f"--peers-from {folder}: no such folder")
    missing, loaded = [], []
    for ns, names in LIBRARY_FILES.items():
        found = next((folder / n for n in names if (folder / n).is_file()), None)
        if found is None:
            missing.append(f"{ns} ({' / '.join(names)})")
            continue
        try:
            torch.ops.load_library(str(_unpacked(found)))
        except Exception as e:  # noqa: BLE001
            return Source(None, f"--peers-from {found} did not load: {first_line(e)}")
        loaded.append(found.name)
    if not loaded:
        return Source(None, f"--peers-from {folder} holds none of {', '.join(missing)}")
    return Source(f"vLLM extension files in {folder} ({', '.join(loaded)})", missing=tuple(missing))


def _unpacked(path: Path) -> Path:
    """`path`, or for a .xz its decompressed copy in the temp folder (named by the source's size and mtime)."""
    if path.suffix != ".xz":
        return path
    st = path.stat()
    tag = hashlib.sha1(f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    out = Path(tempfile.gettempdir()) / f"swordfish-peer-{tag}-{path.stem}"
    if not out.is_file():
        tmp = out.with_suffix(f".{os.getpid()}.part")
        with lzma.open(path) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
        tmp.replace(out)
    return out


def first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


# ------------------------------------------------------------------ calling the ops


def op_missing(name: str) -> str | None:
    """Why op `name` cannot be called as OPS describes it (not registered, or another arity), or None."""
    import torch

    ns, args = OPS[name]
    space = getattr(torch.ops, ns)
    if not hasattr(space, name):
        return f"torch.ops.{ns}.{name} is not registered"
    try:
        n = len(getattr(space, name).default._schema.arguments)
    except Exception:  # noqa: BLE001 - no schema to read: let the call say
        return None
    if n != len(args):
        return f"torch.ops.{ns}.{name} takes {n} arguments; this adapter passes vLLM 0.33's {len(args)}"
    return None


def call(name: str, **kwargs):
    """torch.ops.<ns>.<name> with every argument given by name, passed in OPS's order."""
    import torch

    ns, args = OPS[name]
    if set(kwargs) != set(args):
        raise TypeError(f"{name}: missing {sorted(set(args) - set(kwargs))}, unexpected "
                        f"{sorted(set(kwargs) - set(args))}")
    return getattr(getattr(torch.ops, ns), name)(*[kwargs[a] for a in args])


def marlin_scales(s, K: int, group: int):
    """Scales [..., rows, N] in Marlin's column order (the layout marlin_permute_scales makes): grouped
    scales transpose each run of 64 columns as an 8x8 block; channelwise (or one group over K) scales
    take each run of 32 columns as (4, 4, 2) and swap the two 4s."""
    shape = s.shape
    if group != -1 and group < K:
        return s.reshape(*shape[:-2], -1, 8, 8).transpose(-1, -2).reshape(shape).contiguous()
    return s.reshape(*shape[:-2], -1, 4, 4, 2).transpose(-2, -3).reshape(shape).contiguous()


def marlin_zero_points(zeros):
    """Integer zero points [..., rows, N] in [0, 16) -> Marlin's int32 [..., rows, N / 8] (the layout vLLM's
    marlin_zero_points makes): each run of 64 columns transposed as an 8x8 block, as the grouped scales,
    each run of 8 put in MARLIN_ZP_ORDER, then packed eight to a word, the run's value i in bits 4i."""
    import torch

    shape = zeros.shape
    z = zeros.to(torch.int64).reshape(*shape[:-2], -1, 8, 8).transpose(-1, -2).reshape(shape)
    z = z.reshape(*shape[:-1], -1, 8)[..., list(MARLIN_ZP_ORDER)]
    words = ((z & 0xF) << (torch.arange(8, device=z.device, dtype=torch.int64) * 4)).sum(-1)
    return (words - (words >= 1 << 31).to(torch.int64) * (1 << 32)).to(torch.int32)


class MarlinWeight(NamedTuple):
    """One weight in Marlin's layouts."""

    q: object            # repacked codes
    s: object            # scales in Marlin's column order
    zp: object           # packed zero points, or None (GPTQ)
    type_id: int         # vLLM ScalarType id (b_q_type)
    K: int
    N: int


def _marlin_weight(qweight, scales, qzeros, *, bits: int, group: int, dtype) -> MarlinWeight:
    """GPTQ qweight [K * bits / 32, N] (K-packed), or with qzeros AWQ's qweight [K, N / 8] and qzeros
    [rows, N / 8] (N-packed in AWQ's order), in Marlin's layouts."""
    from .checkpoints import unpack_awq

    if qzeros is None:
        K, N = qweight.shape[0] * 32 // bits, qweight.shape[1]
        q = call("gptq_marlin_repack", b_q_weight=qweight.contiguous(), size_k=K, size_n=N, num_bits=bits,
                 is_a_8bit=False)
        return MarlinWeight(q, marlin_scales(scales.to(dtype), K, group), None, SCALAR_TYPE_IDS[bits], K, N)
    K, N = qweight.shape[0], qweight.shape[1] * 8
    q = call("awq_marlin_repack", b_q_weight=qweight.contiguous(), size_k=K, size_n=N, num_bits=4, is_a_8bit=False)
    zp = marlin_zero_points(unpack_awq(qzeros))
    return MarlinWeight(q, marlin_scales(scales.to(dtype), K, group), zp, ZP_SCALAR_TYPE_IDS[4], K, N)


def _workspace(device):
    import torch

    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return torch.zeros(sms * MARLIN_LOCKS_PER_SM, dtype=torch.int32, device=device)


def _ops_reason(names) -> str | None:
    why = [r for r in (op_missing(n) for n in names) if r]
    return "; ".join(why) if why else None


def _format_reason(adapter, bits: int, zero_points: bool, act_order: bool) -> str | None:
    """Why `adapter` cannot take this weight format (None if it can); adapter.zero_points says whether it
    takes AWQ zero points."""
    if zero_points and not adapter.zero_points:
        return f"{adapter.name} takes symmetric GPTQ only (its zero-point path is not wired)"
    if zero_points and bits not in ZP_SCALAR_TYPE_IDS:
        return f"zero points: int4 only (AWQ's uint4), not int{bits}"
    if act_order:
        return "the peer adapters take GPTQ without act-order (vLLM's act-order path is not wired)"
    if bits not in SCALAR_TYPE_IDS:
        return f"int{bits} is not a GPTQ type of vLLM's (int4, int8)"
    return None


# ------------------------------------------------------------------ the dense peers


class Marlin:
    """vLLM's Marlin GEMM: uint4b8 / uint8b128 codes (GPTQ) or uint4 with zero points (AWQ), group -1 / 32 /
    64 / 128, fp16 or bf16."""

    name = "marlin"
    zero_points = True  # takes AWQ zero points (uint4)
    ops = ("gptq_marlin_repack", "awq_marlin_repack", "marlin_gemm")

    def available(self, device) -> str | None:
        return _ops_reason(self.ops)

    def supports(self, K: int, N: int, *, bits: int, group: int, dtype, zero_points=False, act_order=False):
        why = _format_reason(self, bits, zero_points, act_order)
        if why:
            return why
        if group not in (-1, 32, 64, 128):
            return f"Marlin takes group -1, 32, 64 or 128, not {group}"
        if N % 64 or K % 128:
            return f"Marlin needs N % 64 == 0 and K % 128 == 0 (vLLM pads other shapes); K={K}, N={N}"
        return None

    def prepare(self, qweight, scales, *, bits: int, group: int, dtype, qzeros=None):
        """GPTQ qweight int32 [K * bits / 32, N] and scales [K / group or 1, N] (AWQ: qweight [K, N / 8] and
        qzeros [K / group, N / 8]) -> f(x [M, K]) -> [M, N]."""
        q, s, zp, tid, K, N = _marlin_weight(qweight, scales, qzeros, bits=bits, group=group, dtype=dtype)
        ws = _workspace(qweight.device)

        def marlin(x):
            # vLLM's defaults: fp32 reduction of split-K partials, no atomics (VLLM_MARLIN_USE_ATOMIC_ADD unset)
            return call("marlin_gemm", a=x, c=None, b_q_weight=q, b_bias=None, b_scales=s, a_scales=None,
                        global_scale=None, b_zeros=zp, workspace=ws, b_q_type=tid, size_m=x.shape[0], size_n=N,
                        size_k=K, use_atomic_add=False, use_fp32_reduce=True, is_zp_float=False)
        return marlin


class Machete:
    """vLLM's Machete (CUTLASS, sm90 only): uint4b8 / uint8b128 codes, group -1 / 64 / 128, fp16 or bf16."""

    name = "machete"
    zero_points = False  # no AWQ zero points (Machete's zero-point path is not wired here)
    ops = ("machete_prepack_B", "machete_mm")

    def available(self, device) -> str | None:
        import torch

        cap = torch.cuda.get_device_capability(device)
        if cap != (9, 0):
            return f"Machete runs on compute capability 9.0 only (vLLM picks it on Hopper); this GPU is {cap[0]}.{cap[1]}"
        return _ops_reason(self.ops)

    def supports(self, K: int, N: int, *, bits: int, group: int, dtype, zero_points=False, act_order=False):
        why = _format_reason(self, bits, zero_points, act_order)
        if why:
            return why
        if group not in (-1, 64, 128):
            return f"Machete takes group -1, 64 or 128 with fp16 / bf16 activations, not {group}"
        if K % 64 or N % 128:
            return f"Machete needs K % 64 == 0 and N % 128 == 0; K={K}, N={N}"
        return None

    def prepare(self, qweight, scales, *, bits: int, group: int, dtype, qzeros=None):
        if qzeros is not None:
            raise ValueError("machete: zero points are not wired (supports() says so)")
        tid = SCALAR_TYPE_IDS[bits]
        # prepack reads the codes column-major, as vLLM hands them over ([K/pack, N] with K-stride 1)
        q = call("machete_prepack_B", b_q_weight=qweight.t().contiguous().t(), a_type=dtype, b_type=tid,
                 group_scales_type=dtype)
        s = scales.to(dtype).contiguous()

        def machete(x):
            return call("machete_mm", a=x, b_q=q, b_type=tid, out_type=None, b_group_scales=s, b_group_zeros=None,
                        b_group_size=group, b_channel_scales=None, a_token_scales=None, schedule=None)
        return machete


# ------------------------------------------------------------------ Marlin MoE


def marlin_moe_block_m(tokens: int, top_k: int, experts: int) -> int:
    """fused_marlin_moe's block_size_m in vLLM 0.33: the first of 8, 16, 32, 48 with fewer than 0.9 blocks of
    routed rows per expert, else 64."""
    for block in (8, 16, 32, 48):
        if tokens * top_k / experts / block < 0.9:
            return block
    return 64


def align_sizes(slots: int, block: int, experts: int) -> tuple[int, int]:
    """(sorted_token_ids length, expert_ids length) for moe_align_block_size: every expert padded to a whole
    block, and never more than one block per routed slot."""
    padded = slots + experts * (block - 1)
    if slots < experts:
        padded = min(slots * block, padded)
    return padded, -(-padded // block)


class MarlinMoE:
    """vLLM's Marlin MoE sequence over GPTQ (or AWQ) experts: silu gate | up in w13, router weights in the second
    GEMM."""

    name = "marlin_moe"
    zero_points = True  # takes AWQ zero points (uint4)
    ops = ("gptq_marlin_repack", "awq_marlin_repack", "silu_and_mul", "moe_align_block_size",
           "moe_wna16_marlin_gemm", "moe_sum")

    def available(self, device) -> str | None:
        return _ops_reason(self.ops)

    def supports(self, E: int, H: int, I: int, *, bits: int, group: int, dtype, zero_points=False,  # noqa: E741
                 act_order=False):
        why = _format_reason(self, bits, zero_points, act_order)
        if why:
            return why
        if group not in (-1, 32, 64, 128):
            return f"Marlin MoE takes group -1, 32, 64 or 128, not {group}"
        for what, K, N in (("w13", H, 2 * I), ("w2", I, H)):
            if N % 64 or K % 128:
                return f"Marlin MoE needs N % 64 == 0 and K % 128 == 0 for {what}; K={K}, N={N}"
        return None

    def prepare(self, w13, w2, *, bits: int, group: int, dtype):
        """w13 = (qweight [E, H * bits / 32, 2I], scales [E, rows, 2I]) with N = [gate | up], w2 = (qweight
        [E, I * bits / 32, H], scales [E, rows, H]), GPTQ packed along K; AWQ: (qweight [E, K, N / 8], scales,
        qzeros [E, rows, N / 8]) -> f(x, topk_weights, topk_ids)."""
        import torch

        def repack(qweight, scales, qzeros=None):
            parts = [_marlin_weight(qweight[e], scales[e], None if qzeros is None else qzeros[e], bits=bits,
                                    group=group, dtype=dtype) for e in range(qweight.shape[0])]
            zp = None if qzeros is None else torch.stack([p.zp for p in parts])
            q, s = torch.stack([p.q for p in parts]), torch.stack([p.s for p in parts])
            return q, s, zp, parts[0].type_id, parts[0].K

        (q13, s13, z13, tid, H), (q2, s2, z2, _, I) = repack(*w13), repack(*w2)  # noqa: E741
        E = w13[0].shape[0]
        ws = _workspace(w13[0].device)

        def gemm(a, out, q, s, zp, ids, topk_weights, block, top_k, weighted, m, n, k):
            sorted_ids, expert_ids, n_padded = ids
            return call("moe_wna16_marlin_gemm", input=a, output=out, b_qweight=q, b_bias=None, b_scales=s,
                        a_scales=None, global_scale=None, b_qzeros=zp, workspace=ws, sorted_token_ids=sorted_ids,
                        expert_ids=expert_ids, num_tokens_past_padded=n_padded, topk_weights=topk_weights,
                        moe_block_size=block, top_k=top_k, mul_topk_weights=weighted, b_q_type=tid, size_m=m,
                        size_n=n, size_k=k, use_atomic_add=False, use_fp32_reduce=True, is_zp_float=False,
                        thread_k=-1, thread_n=-1, blocks_per_sm=-1)

        def marlin_moe(x, topk_weights, topk_ids):
            T, k = topk_ids.shape
            dev = x.device
            block = marlin_moe_block_m(T, k, E)
            n_sorted, n_blocks = align_sizes(T * k, block, E)
            ids = (torch.empty(n_sorted, dtype=torch.int32, device=dev),
                   torch.empty(n_blocks, dtype=torch.int32, device=dev), torch.empty(1, dtype=torch.int32, device=dev))
            call("moe_align_block_size", topk_ids=topk_ids, num_experts=E, block_size=block, sorted_token_ids=ids[0],
                 experts_ids=ids[1], num_tokens_post_pad=ids[2], expert_map=None, scatter_idx=None)
            h = gemm(x, torch.empty(T * k, 2 * I, dtype=x.dtype, device=dev), q13, s13, z13, ids, topk_weights, block,
                     k, False, T, 2 * I, H)
            act = torch.empty(T * k, I, dtype=x.dtype, device=dev)
            call("silu_and_mul", out=act, input=h)
            y = gemm(act, torch.empty(T * k, H, dtype=x.dtype, device=dev), q2, s2, z2, ids, topk_weights, block, 1,
                     True, T * k, H, I)
            out = torch.empty(T, H, dtype=x.dtype, device=dev)
            call("moe_sum", input=y.view(T, k, H), output=out, topk_ids=None, expert_map=None)
            return out
        return marlin_moe


ADAPTERS = {a.name: a for a in (Marlin(), Machete(), MarlinMoE())}


def reason(name: str, source: Source | None, device) -> str | None:
    """Why peer `name` cannot run on `device` with the ops of `source` (load()'s answer), or None."""
    if source is None or source.error:
        return source.error if source else "no peer ops were loaded"
    why = ADAPTERS[name].available(device)
    if why and source.missing:
        why += f" ({source.label} has no library for {', '.join(source.missing)})"
    return why


def describe(names, source: Source | None) -> dict:
    """The result document's config.peers: which peers, where their ops came from, or why none ran."""
    return {"names": list(names), "source": source.label if source else None,
            "error": source.error if source else "no peer ops were loaded"}


def parse(text: str | None, moe: bool) -> tuple:
    """The peers a --peers value names ('all', or a comma-separated subset of DENSE or MOE); ValueError if bad."""
    allowed = MOE if moe else DENSE
    if text is None or text.strip() in ("", "all"):
        return allowed
    names = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        other = DENSE if moe else MOE
        hint = f" ({', '.join(bad)} {'is' if len(bad) == 1 else 'are'} for {'the dense bench' if moe else '--moe'})" \
            if bad and all(n in other for n in bad) else ""
        raise ValueError(f"--peers {text!r}: choose 'all' or from {', '.join(allowed)}{hint}")
    return tuple(n for n in allowed if n in names)


def best(row_us: dict) -> tuple:
    """(name, us) of the fastest peer among {peer: us or None}; (None, None) when none ran."""
    ran = [(us, name) for name, us in row_us.items() if us]
    if not ran:
        return None, None
    us, name = min(ran)
    return name, us
