"""`swordfish check`: the correctness self-test.

For every supported weight format (GPTQ int4/int8 at group 32/64/128 and
channelwise, AWQ int4 with zero points, act-order int4/int8, compressed-tensors
asymmetric int4) x activation dtype, it builds a random weight through the
public checkpoint converters and checks, against an exact oracle:

* ``reference``: the reference path (``sf.matmul`` on CPU, the fp32
  reference on GPU) against an fp64 product of the weight written from the
  generated integer codes, scales and zero points (independent of the packer);
* ``dequant``: ``w.dequantize()`` against the same fp64 weight (CPU) or
  against the reference's dequantization (GPU: the dense tier's kernel);
* on a GPU with the extension, ``auto`` and each forced path (``decode``,
  ``dense``, ``prefill``) against the reference, in both deterministic modes
  (deterministic runs must also be bit-identical twice), at the M values where
  the dispatcher changes path (found by asking ``ops.select_path``; each
  boundary and the M either side) plus the decode family's tile boundaries;
  ``auto`` must run the path ``select_path`` predicts.

Odd M values are run with a bias, even ones without.

Without a GPU (or without the compiled extension) only the CPU reference path
is checked, and the report says plainly that no GPU kernel was.

Tolerance (u = unit roundoff of the activation dtype: 2^-8 bf16, 2^-11 fp16):
an output element passes when |y - ref| <= 2u|ref| + (16u + K 2^-24) rms(ref)
(output rounding, rounding of split-K partial sums, fp32 accumulation over
K), and the whole output when ||y - ref|| <= 4u ||ref||. NaN or Inf never
passes. A dequantized weight element passes when it is within 2u of the
oracle's |w| + |folded zero point| (one rounding either side).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import ops

# Every path the op accepts besides auto (ops.PATH_NAMES mirrors swordfish::Path): a new path is checked too.
KERNEL_PATHS = tuple(name for value, name in sorted(ops.PATH_NAMES.items()) if value != ops.PATH_AUTO)
COLUMNS = ("reference", "dequant", "auto") + KERNEL_PATHS

# The decode family's internal tile boundaries (DESIGN.md), always tested on a GPU.
DECODE_MS = (1, 16, 17, 32, 33, 48, 49, 55, 56, 64, 65, 96, 127, 128)
CPU_MS = (1, 3, 16, 17, 33, 64)
CPU_SHAPES = ((256, 128),)
GPU_SHAPES = ((2048, 512), (1024, 4096))
SCAN_LINEAR = 1024   # select_path is scanned at every M up to here, then in strides with bisection
SCAN_STRIDE = 32
SCAN_MAX = 16384
UNAVAILABLE_MARK = "cannot run this problem: "
DTYPES = ("bf16", "fp16")


@dataclass(frozen=True)
class Format:
    kind: str       # gptq | awq | act-order | ct-asym
    bits: int
    group: int      # 32, 64, 128 or -1 (channelwise)

    @property
    def name(self) -> str:
        g = "cw" if self.group == -1 else f"g{self.group}"
        return f"{self.kind}-int{self.bits} {g}"

    @property
    def zero_points(self) -> bool:
        return self.kind in ("awq", "ct-asym")


FORMATS: tuple[Format, ...] = (
    *(Format("gptq", 4, g) for g in (32, 64, 128, -1)),
    *(Format("gptq", 8, g) for g in (32, 64, 128, -1)),
    *(Format("awq", 4, g) for g in (32, 64, 128)),
    Format("act-order", 4, 128), Format("act-order", 4, 32), Format("act-order", 8, 128),
    Format("ct-asym", 4, 128),
)
KINDS = ("gptq", "awq", "act-order", "ct-asym")


def select_formats(kinds=None, bits=None, groups=None) -> list[Format]:
    return [f for f in FORMATS if (kinds is None or f.kind in kinds) and (bits is None or f.bits in bits)
            and (groups is None or f.group in groups)]


def unit_roundoff(dtype) -> float:
    import torch

    return 2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -11


# ------------------------------------------------------------------ weights and oracle


def _awq_pack(q):
    """(R, C) codes -> AWQ's (R, C / 8) int32 words: column 8c + order[i] in nibble i of word c."""
    import torch

    order = (0, 2, 4, 6, 1, 3, 5, 7)
    out = torch.zeros(q.shape[0], q.shape[1] // 8, dtype=torch.int64, device=q.device)
    for i, col in enumerate(order):
        out |= q[:, col::8].to(torch.int64) << (4 * i)
    return torch.where(out >= 2**31, out - 2**32, out).to(torch.int32)


def make_case(fmt: Format, K: int, N: int, dtype, device, gen):
    """(QuantizedWeight, fp64 oracle weight (N, K) rounded to dtype, fp64 |folded zero point| (N, K))."""
    import torch

    from . import format as sffmt
    from .weight import QuantizedWeight

    groups = 1 if fmt.group == -1 else K // fmt.group
    q = torch.randint(0, 1 << fmt.bits, (K, N), generator=gen, device=device)
    scales = (torch.rand(groups, N, generator=gen, device=device) * 0.02 + 0.002).to(dtype)
    row_group = torch.zeros(K, dtype=torch.int64, device=device) if fmt.group == -1 else \
        torch.arange(K, device=device) // fmt.group
    zero = torch.full((groups, N), sffmt.bias(fmt.bits), dtype=torch.int64, device=device)
    if fmt.kind == "gptq":
        w = QuantizedWeight.from_gptq(sffmt.pack_k(q, fmt.bits), scales, bits=fmt.bits, group_size=fmt.group,
                                      dtype=dtype)
    elif fmt.kind == "act-order":
        row_group = row_group[torch.randperm(K, generator=gen, device=device)]
        w = QuantizedWeight.from_gptq(sffmt.pack_k(q, fmt.bits), scales, row_group.to(torch.int32),
                                      bits=fmt.bits, group_size=fmt.group, dtype=dtype)
    elif fmt.kind == "awq":
        zero = torch.randint(0, 16, (groups, N), generator=gen, device=device)
        w = QuantizedWeight.from_awq(_awq_pack(q), _awq_pack(zero), scales, group_size=fmt.group, dtype=dtype)
    elif fmt.kind == "ct-asym":
        zero = torch.randint(0, 16, (groups, N), generator=gen, device=device)
        w = QuantizedWeight.from_compressed_tensors(
            sffmt.pack_k(q, 4).t().contiguous(), scales.t().contiguous(), weight_shape=(N, K), num_bits=4,
            group_size=fmt.group, weight_zero_point=(zero - 8).t().contiguous(), dtype=dtype)
    else:
        raise ValueError(f"unknown format kind {fmt.kind!r}")
    s64 = scales.to(torch.float64)[row_group]                       # (K, N)
    exact = (q.to(torch.float64) - zero.to(torch.float64)[row_group]) * s64
    truth = exact.to(dtype).to(torch.float64).t().contiguous()      # one rounding, like the kernels' operand
    zabs = ((sffmt.bias(fmt.bits) - zero.to(torch.float64)[row_group]) * s64).abs().t().contiguous()
    return w, truth, zabs


def output_error(y, ref, u: float, K: int) -> float:
    """Worst ratio of error to tolerance (elementwise and normwise, see the module doc); <= 1 passes.

    NaN or Inf in `y` gives inf.
    """
    import torch

    y64 = y.to(torch.float64)
    if not bool(torch.isfinite(y64).all()):
        return math.inf
    diff = (y64 - ref).abs()
    rms = float(ref.pow(2).mean().sqrt()) or 1e-30
    elem = diff / (2 * u * ref.abs() + (16 * u + K * 2.0 ** -24) * rms)
    norm = diff.norm() / (ref.norm().clamp_min(1e-30) * 4 * u)
    return max(float(elem.max()), float(norm))


def dequant_error(a, truth, zabs, u: float) -> float:
    import torch

    a64 = a.to(torch.float64)
    if not bool(torch.isfinite(a64).all()):
        return math.inf
    bound = 2 * u * (truth.abs() + zabs) + 1e-30
    return float(((a64 - truth).abs() / bound).max())


# ------------------------------------------------------------------ dispatch boundaries


def dispatch_segments(select, m_max: int = SCAN_MAX) -> list[tuple[int, int | None, int]]:
    """[(first M, last M or None for 'and above', path)] of select(M) for M in 1..m_max.

    Every M is asked up to SCAN_LINEAR, then every SCAN_STRIDE with bisection
    where the answer changes (a path used for fewer than SCAN_STRIDE
    consecutive M above SCAN_LINEAR could be missed).
    """
    segments = []
    start, prev = 1, select(1)
    for M in range(2, min(SCAN_LINEAR, m_max) + 1):
        p = select(M)
        if p != prev:
            segments.append((start, M - 1, prev))
            start, prev = M, p
    last = min(SCAN_LINEAR, m_max)
    while last < m_max:
        nxt = min(last + SCAN_STRIDE, m_max)
        if select(nxt) == prev:
            last = nxt
            continue
        lo, hi = last, nxt  # select(lo) == prev != select(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if select(mid) == prev:
                lo = mid
            else:
                hi = mid
        segments.append((start, hi - 1, prev))
        start, prev = hi, select(hi)
        last = hi
    segments.append((start, None, prev))
    return segments


def weight_selector(w, device_index: int):
    """select(M) for weight `w` on that device, through ops.select_path (the packed K the tables read, and the
    input width: under the padded act-order layout it moves the dense crossover)."""
    from . import format as sffmt

    args = (w.packed_k, w.out_features, w.bits, w.scale_group, w.group_size == sffmt.CHANNELWISE,
            w.zeros is not None, w.perm is not None, ops.DTYPE_CODES[w.dtype], device_index)
    K_in = w.in_features if w.padded_k is not None else 0  # noqa: N806
    return lambda M: ops.select_path(M, *args, K_in)


def boundary_ms(segments) -> list[int]:
    """M values to test around every change of path: the last M before, the first M of, and the one after."""
    out = set()
    for start, _, _ in segments[1:]:
        out.update((start - 1, start, start + 1))
    return sorted(m for m in out if m >= 1)


# ------------------------------------------------------------------ running


@dataclass
class Case:
    format: str
    dtype: str
    K: int
    N: int
    M: int
    column: str
    det: int | None
    status: str          # pass | FAIL | n/a
    err: float | None = None
    note: str | None = None
    ran: str | None = None


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def run(*, gpu: bool, formats, dtypes=DTYPES, shapes=None, ms=None, paths=KERNEL_PATHS, deterministic="both",
        device_index: int = 0, seed: int = 0, progress=None, device=None) -> list[Case]:
    """Run the self-test; returns one Case per check.

    gpu=False checks the CPU reference path; gpu=True checks the kernels on
    CUDA device `device_index` (`device` overrides where tensors live: tests
    run the kernel-checking logic on CPU with a faked op).
    """
    import torch

    from .reference import dequantize as ref_dequantize
    from .reference import matmul as ref_matmul
    from . import weight

    sf_matmul = weight.matmul
    if device is None:
        device = torch.device("cuda", device_index) if gpu else torch.device("cpu")
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    shapes = shapes or (GPU_SHAPES if gpu else CPU_SHAPES)
    dets = {"both": (0, 1), "on": (1,), "off": (0,)}[deterministic]
    cases: list[Case] = []
    for fmt in formats:
        for dname in dtypes:
            dtype = torch.bfloat16 if dname == "bf16" else torch.float16
            u = unit_roundoff(dtype)
            for K, N in shapes:
                w, truth, zabs = make_case(fmt, K, N, dtype, device, gen)
                bias = torch.randn(N, generator=gen, device=device).to(dtype)
                base = dict(format=fmt.name, dtype=dname, K=K, N=N)
                # dequantize: CPU reference vs fp64 oracle; GPU kernel vs the reference's dequantization
                try:
                    deq = w.dequantize()
                    target = truth if not gpu else ref_dequantize(w, torch.float64)
                    err = dequant_error(deq, target, zabs, u)
                    cases.append(Case(**base, M=0, column="dequant", det=None, err=err,
                                      status="pass" if err <= 1 else "FAIL"))
                except Exception as e:  # noqa: BLE001
                    cases.append(Case(**base, M=0, column="dequant", det=None, status="FAIL", note=_first_line(e)))
                w_ref = ref_dequantize(w, torch.float64)  # (N, K) the kernels must reproduce
                select = weight_selector(w, device_index) if gpu else None
                if ms is not None:
                    m_list = sorted(set(ms))
                elif gpu:
                    m_list = sorted(set(DECODE_MS) | set(boundary_ms(dispatch_segments(select))))
                else:
                    m_list = list(CPU_MS)
                for M in m_list:
                    x = torch.randn(M, K, generator=gen, device=device, dtype=torch.float32).to(dtype)
                    x64 = x.to(torch.float64)
                    b = bias if M % 2 else None  # odd M: with a bias, even M: without
                    b64 = 0.0 if b is None else b.to(torch.float64)
                    oracle = x64 @ truth.t() + b64
                    ref = x64 @ w_ref.t() + b64
                    # the reference path itself against the fp64 oracle
                    y = sf_matmul(x, w, b) if not gpu else ref_matmul(x, w, b)
                    err = output_error(y, oracle, u, K)
                    cases.append(Case(**base, M=M, column="reference", det=None, err=err,
                                      status="pass" if err <= 1 else "FAIL"))
                    if gpu:
                        for column in ("auto",) + tuple(paths):
                            for det in dets:
                                cases.append(_run_kernel(w, x, b, ref, u, K, column, det, base, M, select,
                                                         device_index, ops, sf_matmul, torch))
                if progress is not None:
                    progress.step(f"{fmt.name} {dname} K={K} N={N} ({len(m_list)} M values)")
    return cases


def _run_kernel(w, x, b, ref, u, K, column, det, base, M, select, device_index, ops, sf_matmul, torch) -> Case:
    case = Case(**base, M=M, column=column, det=det, status="pass")
    try:
        # Poison: the output is likely to land in this just-freed block; NaN survives any unwritten element.
        poison = torch.full((M, w.out_features), float("nan"), dtype=w.dtype, device=x.device)
        del poison
        y = sf_matmul(x, w, b, path=column, deterministic=bool(det))
        ran = ops.PATH_NAMES.get(ops.last_path(device_index), "?")
        case.ran = ran
        case.err = output_error(y, ref, u, K)
        if case.err > 1:
            case.status = "FAIL"
            case.note = f"error {case.err:.2f}x the tolerance" if math.isfinite(case.err) else "NaN/Inf in output"
        if column == "auto":
            predicted = ops.PATH_NAMES.get(select(M), "?")
            if ran != predicted:
                case.status, case.note = "FAIL", f"auto ran {ran} but select_path predicts {predicted}"
        elif ran != column:
            case.status, case.note = "FAIL", f"forced {column} but last_path says {ran} ran"
        if det == 1 and case.status == "pass":
            again = sf_matmul(x, w, b, path=column, deterministic=True)
            if not torch.equal(y.view(torch.int16), again.view(torch.int16)):
                case.status, case.note = "FAIL", "deterministic mode gave different bits on a second run"
    except Exception as e:  # noqa: BLE001
        text = _first_line(e)
        if UNAVAILABLE_MARK in text:
            case.status, case.note = "n/a", f"{column}: {text.split(UNAVAILABLE_MARK, 1)[1]}"
        else:
            case.status, case.note = "FAIL", text
    return case


# ------------------------------------------------------------------ reporting


def summarize(cases: list[Case]) -> dict:
    return {s: sum(1 for c in cases if c.status == s) for s in ("pass", "FAIL", "n/a")}


def format_table(cases: list[Case], max_failures: int = 40) -> str:
    """Rows: format x dtype; columns: reference, dequant, auto, decode, dense, prefill; cells pass counts."""
    columns = [c for c in COLUMNS if any(case.column == c for case in cases)]
    keys = []
    for case in cases:
        if (case.format, case.dtype) not in keys:
            keys.append((case.format, case.dtype))
    width = max([len(f"{f} {d}") for f, d in keys] + [6]) + 2
    lines = [f"{'format':<{width}}" + "".join(f"{c:>12}" for c in columns)]
    reasons: dict = {}
    for fmt, dt in keys:
        line = f"{fmt + ' ' + dt:<{width}}"
        for col in columns:
            mine = [c for c in cases if (c.format, c.dtype, c.column) == (fmt, dt, col)]
            failed = sum(c.status == "FAIL" for c in mine)
            passed = sum(c.status == "pass" for c in mine)
            na = [c for c in mine if c.status == "n/a"]
            if not mine:
                cell = "-"
            elif failed:
                cell = f"FAIL {failed}/{failed + passed}"
            elif passed:
                cell = f"ok {passed}" + ("*" if na else "")
            else:
                mark = reasons.setdefault(na[0].note, len(reasons) + 1)
                cell = f"n/a[{mark}]"
            for c in na:
                reasons.setdefault(c.note, len(reasons) + 1)
            line += f"{cell:>12}"
        lines.append(line)
    if reasons:
        lines.append("")
        lines.append("not applicable (the dispatcher's reason; * = some M values were n/a):")
        for text, mark in reasons.items():
            lines.append(f"  [{mark}] {text}")
    failures = [c for c in cases if c.status == "FAIL"]
    if failures:
        lines.append("")
        lines.append(f"failures ({len(failures)}):")
        for c in failures[:max_failures]:
            det = "" if c.det is None else f" det={c.det}"
            ran = "" if c.ran is None or c.ran == c.column else f" (ran {c.ran})"
            err = "" if c.err is None else f" err={c.err:.3g}x tol"
            lines.append(f"  {c.format} {c.dtype} K={c.K} N={c.N} M={c.M} {c.column}{ran}{det}:{err} {c.note or ''}")
        if len(failures) > max_failures:
            lines.append(f"  ... and {len(failures) - max_failures} more (--json has them all)")
    return "\n".join(lines)
