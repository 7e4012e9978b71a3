"""The dispatcher's tables: every boundary +-1, on the CPU and, where a GPU is present, through
the select_path / last_path ops.

CPU: kernels/dispatch/tests/select_table_main.cpp is compiled with the host C++ compiler against
the heuristics headers and the prefill path's plan door (kernels/prefill/prefill_plan.cpp; no
CUDA) and asked what heuristics::choose picks. The write-up's B200 / Thor rules are checked as
absolute numbers; the measured sm90 and the conservative tables are checked against their own
thresholds (decode below, dense from the threshold on, one switch over the whole M axis), so
re-measuring a value needs no test edit.

GPU: the select_path op on the current device must agree with the same table for that device's
compute capability and SM count, and last_path must report what gemm ran.
"""

from __future__ import annotations

import pathlib
import re

import pytest

import host_cxx
from swordfish_backend import ops

ROOT = pathlib.Path(__file__).resolve().parents[1]
DRIVER = ROOT / "kernels" / "dispatch" / "tests" / "select_table_main.cpp"
# The prefill path's plan questions (prefill::plan_balance), routed by architecture; plain C++.
PREFILL_PLAN = ROOT / "kernels" / "prefill" / "prefill_plan.cpp"

DECODE, DENSE, PREFILL = ops.PATH_DECODE, ops.PATH_DENSE, ops.PATH_PREFILL  # heuristics::choose's answers
NEVER = -1
M_AXIS = sorted({1, 2, 16, 17, 32, 33, 48, 49, 55, 56, 64, 95, 96, 127, 128, 255, 256, 257, 511, 512, 513, 1023,
                 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192, 8193, 16384, 65536})


class Tables:
    """The compiled driver: choose() and table() answered by the C++ headers."""

    def __init__(self, exe: pathlib.Path):
        self.exe = exe

    def ask(self, lines: list[str]) -> list[str]:
        return host_cxx.ask(self.exe, lines)

    def choose_many(self, queries) -> list[int]:
        lines = []
        for q in queries:
            cc, sms, M, K, N, bits, act, dec, den, pre, *k_in = q
            lines.append(f"choose {cc[0]} {cc[1]} {sms} {M} {K} {N} {bits} {int(act)} {int(dec)} {int(den)} {int(pre)}"
                         + "".join(f" {v}" for v in k_in))
        return [int(v) for v in self.ask(lines)]

    def choose(self, cc, sms, M, K, N, bits, act=False, decode=True, dense=True, prefill=False, k_in=0) -> int:
        return self.choose_many([(cc, sms, M, K, N, bits, act, decode, dense, prefill, k_in)])[0]

    def table(self, cc) -> dict:
        name, values = self.ask([f"table {cc[0]} {cc[1]}"])[0].split("|")
        v = [int(x) for x in values.split()]
        keys = ("int4", "int4_k_heavy", "int8", "int8_k_heavy", "act_order", "act_order_large", "int8_small")
        return {"name": name, "decode_max_m": v[0], "decode_underfill_max_m": v[1], "prefill_tile_n": v[2],
                "decode_k_heavy_max_m": v[3], "fused": dict(zip(keys, v[4:11])), "decode": dict(zip(keys, v[11:18])),
                "decode_max_m_int8": v[18], "small_kn": v[19], "small_max_m": v[20], "small_max_m_int8": v[21],
                "small_k_heavy_max_m_int8": v[22], "unbalanced_max_m": v[23], "min_balance": v[24] / 1000}

    def balance(self, cc, sms, M, K, N, bits) -> float:
        """The prefill plan's balance the dispatcher reads (arch_tables.hpp prefill_balance), to 1e-3."""
        return int(self.ask([f"balance {cc[0]} {cc[1]} {sms} {M} {K} {N} {bits}"])[0]) / 1000

    def grouped_tile(self, cc, bits, avg) -> int:
        """The grouped MoE GEMM's token tile for experts of about `avg` rows (prefill::grouped_tile_rows)."""
        return int(self.ask([f"grouped_tile {cc[0]} {cc[1]} {bits} {avg}"])[0])


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> Tables:
    return Tables(host_cxx.build(tmp_path_factory.mktemp("dispatch"), DRIVER, str(DRIVER.relative_to(ROOT)),
                                 flags=("-O1", "-Wall", "-Werror"), extra=(PREFILL_PLAN,)))


SM90, SM100, THOR, ADA = (9, 0), (10, 0), (11, 0), (8, 9)
B200_SMS, H200_SMS, THOR_SMS = 148, 132, 20

# Llama-3 shapes: (K, N)
O_8B, QKV_8B, GATE_UP_8B, DOWN_8B = (4096, 4096), (4096, 6144), (4096, 28672), (14336, 4096)
QKV_70B, DOWN_70B = (8192, 10240), (28672, 8192)


# ------------------------------------------------------- the write-up's rules (sm100, future prefill)


@pytest.mark.parametrize("M, want", [(1, DECODE), (55, DECODE), (56, PREFILL), (128, PREFILL)])
def test_b200_decode_always_through_55(tables, M, want):
    K, N = GATE_UP_8B  # N / 128 = 224 CTAs: no underfill; K < 2N
    assert tables.choose(SM100, B200_SMS, M, K, N, 4, prefill=True) == want


@pytest.mark.parametrize("M, want", [(56, DECODE), (95, DECODE), (96, PREFILL)])
def test_b200_decode_below_96_when_prefill_underfills(tables, M, want):
    K, N = O_8B  # N / 128 = 32 CTAs < 148 SMs
    assert tables.choose(SM100, B200_SMS, M, K, N, 4, prefill=True) == want


def test_b200_underfill_rule_follows_the_sm_count(tables):
    K, N = 4096, 128 * 40  # 40 prefill CTAs
    assert tables.choose(SM100, 41, 80, K, N, 4, prefill=True) == DECODE
    assert tables.choose(SM100, 40, 80, K, N, 4, prefill=True) == PREFILL


@pytest.mark.parametrize("M, want", [(127, DECODE), (128, PREFILL)])
def test_b200_k_heavy_decode_through_127(tables, M, want):
    K, N = DOWN_8B  # K >= 2N
    assert tables.choose(SM100, B200_SMS, M, K, N, 4, prefill=True) == want


@pytest.mark.parametrize("bits, M, want", [(8, 1023, PREFILL), (8, 1024, DENSE), (4, 4095, PREFILL),
                                           (4, 4096, DENSE)])
def test_b200_dense_thresholds(tables, bits, M, want):
    K, N = QKV_8B
    assert tables.choose(SM100, B200_SMS, M, K, N, bits, prefill=True) == want


def test_b200_act_order_goes_dense_from_512_when_n_le_2k(tables):
    K, N = QKV_8B  # N <= 2K
    assert tables.choose(SM100, B200_SMS, 511, K, N, 4, act=True, prefill=True) == PREFILL
    assert tables.choose(SM100, B200_SMS, 512, K, N, 4, act=True, prefill=True) == DENSE
    K, N = GATE_UP_8B  # N > 2K: the int4 threshold applies
    assert tables.choose(SM100, B200_SMS, 512, K, N, 4, act=True, prefill=True) == PREFILL
    assert tables.choose(SM100, B200_SMS, 4096, K, N, 4, act=True, prefill=True) == DENSE


def test_b200_without_prefill_goes_dense_no_later_than_the_h200(tables):
    """Unmeasured on Blackwell: the no-prefill thresholds are the H200's measured ones at most. The
    dense tier speeds up more than decode there (cuBLAS ~2x, HBM ~1.7x; mma.sync about the SM count)."""
    b200, h200 = tables.table(SM100)["decode"], tables.table(SM90)["decode"]
    for key in ("int4", "int4_k_heavy", "int8", "int8_k_heavy", "act_order"):
        assert 0 < b200[key] <= h200[key], key
    K, N = QKV_8B
    assert tables.choose(SM100, B200_SMS, b200["int4"] - 1, K, N, 4) == DECODE
    assert tables.choose(SM100, B200_SMS, b200["int4"], K, N, 4) == DENSE


def test_thor_dense_serves_int8_only(tables):
    K, N = QKV_8B
    assert tables.choose(THOR, THOR_SMS, 1 << 20, K, N, 4, prefill=True) != DENSE
    assert tables.choose(THOR, THOR_SMS, 2047, K, N, 8, prefill=True) == PREFILL
    assert tables.choose(THOR, THOR_SMS, 2048, K, N, 8, prefill=True) == DENSE
    K, N = DOWN_8B  # K-heavy
    assert tables.choose(THOR, THOR_SMS, 8191, K, N, 8, prefill=True) == PREFILL
    assert tables.choose(THOR, THOR_SMS, 8192, K, N, 8, prefill=True) == DENSE


def test_blackwell_without_prefill_hands_large_m_to_the_dense_tier(tables):
    """No tcgen05 prefill (the default: it is compiled, not run, and serves only with SWORDFISH_SM100_PREFILL=1):
    decode alone would run large M at ~2.4x cuBLAS's time (H100), so on B200 and Thor every format reaches the
    dense tier (cuBLAS) at the latest where the H200 measured it."""
    h200 = tables.table(SM90)["decode"]
    for cc, sms in ((SM100, B200_SMS), (THOR, THOR_SMS)):
        d = tables.table(cc)["decode"]
        for key in ("int4", "int4_k_heavy", "int8", "int8_k_heavy", "act_order"):
            assert d[key] != NEVER and 0 < d[key] <= h200[key], (cc, key)
        for bits in (4, 8):
            for K, N in (QKV_8B, DOWN_8B):
                assert tables.choose(cc, sms, 8192, K, N, bits) == DENSE, (cc, bits, K, N)


def test_cc_10_1_is_thor_and_10_3_is_b300(tables):
    assert tables.table((10, 1))["name"] == tables.table(THOR)["name"]
    assert tables.table((10, 3))["name"] == tables.table(SM100)["name"]


# ------------------------------------------------------- this build: decode + dense only


def threshold(t: dict, bits: int, K: int, N: int, act: bool, which: str = "decode") -> int:
    d = t[which]
    heavy = K >= 2 * N
    m = d[("int4" if bits == 4 else "int8") + ("_k_heavy" if heavy else "")]
    if bits == 8 and K * N <= t["small_kn"] and d["int8_small"] != -1:
        m = d["int8_small"]
    m = float("inf") if m == NEVER else m
    if act and N <= 2 * K:
        a = d["act_order_large"] if K * N > t["small_kn"] and d["act_order_large"] != -1 else d["act_order"]
        m = min(m, a) if a != NEVER else m
    return m


CASES = [(bits, shape, act) for bits in (4, 8) for shape in (O_8B, GATE_UP_8B, DOWN_8B) for act in (False, True)]


@pytest.mark.parametrize("cc, sms", [(SM90, H200_SMS), (SM100, B200_SMS), (THOR, THOR_SMS), (ADA, 128)],
                         ids=["sm90", "sm100", "thor", "sm89"])
@pytest.mark.parametrize("bits, shape, act", CASES)
def test_no_prefill_boundaries(tables, cc, sms, bits, shape, act):
    """Decode below the dense threshold, dense from it on: at the threshold +-1 and over the M axis."""
    K, N = shape
    t = tables.table(cc)
    m0 = threshold(t, bits, K, N, act)
    axis = sorted(set(M_AXIS) | ({m0 - 1, m0, m0 + 1} if m0 != float("inf") else set()))
    axis = [m for m in axis if m >= 1]
    got = tables.choose_many([(cc, sms, M, K, N, bits, act, True, True, False) for M in axis])
    want = [DENSE if M >= m0 else DECODE for M in axis]
    assert got == want, f"{t['name']}: threshold {m0}"


def decode_limit(t: dict, bits: int, K: int, N: int, balance: float = 1.0) -> int:
    """The largest M decode keeps against prefill (heuristics::decode_max_m, then the unbalanced-plan
    rule: `balance` is the prefill plan's at M = unbalanced_max_m, the same at every M of one BT 64
    tile row)."""
    if K * N <= t["small_kn"]:
        if bits == 8 and K >= 2 * N and t["small_k_heavy_max_m_int8"] != -1:
            m = t["small_k_heavy_max_m_int8"]
        else:
            m = t["small_max_m_int8"] if bits == 8 and t["small_max_m_int8"] != -1 else t["small_max_m"]
    else:
        m = t["decode_max_m_int8"] if bits == 8 and t["decode_max_m_int8"] != -1 else t["decode_max_m"]
    if balance < t["min_balance"]:
        m = max(m, t["unbalanced_max_m"])
    return m


@pytest.mark.parametrize("bits, shape, act", CASES + [(4, QKV_8B, False), (8, QKV_8B, False), (4, QKV_70B, True),
                                                     (8, DOWN_70B, True)])
def test_sm90_with_prefill_boundaries(tables, bits, shape, act):
    """H200 with prefill: decode through its limit (by bits, lower on small layers), prefill up to the
    fused dense threshold, dense from it; the underfill and K-heavy rules are measured away (0)."""
    K, N = shape
    t = tables.table(SM90)
    assert t["decode_underfill_max_m"] == 0 and t["decode_k_heavy_max_m"] == 0
    d = decode_limit(t, bits, K, N, tables.balance(SM90, H200_SMS, t["unbalanced_max_m"], K, N, bits))
    m0 = threshold(t, bits, K, N, act, which="fused")
    axis = sorted(set(M_AXIS) | {d - 1, d, d + 1, m0 - 1, m0, m0 + 1})
    axis = [m for m in axis if m >= 1]
    got = tables.choose_many([(SM90, H200_SMS, M, K, N, bits, act, True, True, True) for M in axis])
    want = [DENSE if M >= m0 else DECODE if M <= d else PREFILL for M in axis]
    assert got == want, f"{t['name']}: decode <= {d}, dense from {m0}"


def test_sm90_small_layer_rule(tables):
    """The 8B-class layers (at most 4096 x 14336 weights) keep decode longer than the large ones: the
    sm90 prefill grid of such a layer is a third of the SMs or less, so prefill's BT 64 tile costs
    there what it costs on a 70B layer. The bound is on K * N, so 8B down (exactly 4096 x 14336) is
    small and 70B o (8192 x 8192) is not."""
    t = tables.table(SM90)
    assert t["small_kn"] == 4096 * 14336
    assert t["small_max_m"] > t["decode_max_m"] and t["small_max_m_int8"] >= t["small_max_m"]
    # int8 on a small K-heavy layer (8B down) crosses where int4 does, the other small layers later
    assert t["small_k_heavy_max_m_int8"] == t["small_max_m"] < t["small_max_m_int8"]
    assert decode_limit(t, 8, 14336, 4096) == t["small_max_m"] and decode_limit(t, 8, 4096, 14336) == t["small_max_m_int8"]
    # one weight row either side of the bound, both bit widths, at the limit and one past it
    for K, N, small in ((4096, 14336, True), (4096, 14336 + 128, False), (14336, 4096, True),
                        (8192, 7168, True), (8192, 7168 + 128, False), (8192, 8192, False)):
        assert decode_limit(t, 4, K, N) == (t["small_max_m"] if small else t["decode_max_m"])
        for bits in (4, 8):
            want = decode_limit(t, bits, K, N, tables.balance(SM90, H200_SMS, t["unbalanced_max_m"], K, N, bits))
            assert tables.choose(SM90, H200_SMS, want, K, N, bits, prefill=True) == DECODE
            assert tables.choose(SM90, H200_SMS, want + 1, K, N, bits, prefill=True) == PREFILL


def test_sm90_unbalanced_prefill_plan_keeps_decode(tables):
    """At M = 33-48 prefill runs one BT 64 tile row, and decode keeps the large layers whose prefill
    tiles divide poorly over the SMs (plan balance below min_balance): 70B qkv (80 tiles of 128
    columns: split items in two rounds), 70B o; not 70B gate_up, 70B down, 8B gate_up, nor a layer
    whose 128 tiles fill one wave (5120 x 16384)."""
    t = tables.table(SM90)
    assert t["unbalanced_max_m"] == 48 and t["min_balance"] == 0.8
    for K, N, unbalanced in (((8192, 10240, True), (8192, 8192, True), (8192, 7680, True), (8192, 57344, False),
                              (28672, 8192, False), (4096, 28672, False), (5120, 16384, False))):
        for bits in (4, 8):
            b = tables.balance(SM90, H200_SMS, 40, K, N, bits)
            assert (b < t["min_balance"]) == unbalanced, (K, N, bits, b)
            assert b == tables.balance(SM90, H200_SMS, 33, K, N, bits) == tables.balance(SM90, H200_SMS, 48, K, N, bits)
            want = t["unbalanced_max_m"] if unbalanced else decode_limit(t, bits, K, N)
            assert tables.choose(SM90, H200_SMS, want, K, N, bits, prefill=True) == DECODE
            assert tables.choose(SM90, H200_SMS, want + 1, K, N, bits, prefill=True) == PREFILL
    # The balance is the plan's: another SM count plans (and balances) differently, and an
    # architecture without a prefill plan model reads 1.
    assert tables.balance(SM90, 114, 40, 8192, 10240, 4) != tables.balance(SM90, H200_SMS, 40, 8192, 10240, 4)
    assert tables.balance(SM100, B200_SMS, 40, 8192, 10240, 4) == 1.0


def test_sm90_act_order_goes_dense_later_on_large_layers(tables):
    """With the row-staged gather, act-order prefill holds on to the 70B-class layers (K * N above the
    small-layer bound) until M = 4096, the 8B-class ones until 2048 (N <= 2K in both)."""
    t = tables.table(SM90)
    assert t["fused"]["act_order"] == 2048 and t["fused"]["act_order_large"] == 4096
    for (K, N), m0 in ((O_8B, 2048), (DOWN_8B, 2048), (QKV_70B, 4096), ((8192, 8192), 4096), (DOWN_70B, 4096)):
        assert tables.choose(SM90, H200_SMS, m0 - 1, K, N, 4, act=True, prefill=True) == PREFILL, (K, N)
        assert tables.choose(SM90, H200_SMS, m0, K, N, 4, act=True, prefill=True) == DENSE, (K, N)
    # the bound is the small-layer one: 128 output columns past 14336 x 4096 (8B down) is large
    assert tables.choose(SM90, H200_SMS, 2048, 14336, 4096, 4, act=True, prefill=True) == DENSE
    assert tables.choose(SM90, H200_SMS, 2048, 14336, 4096 + 128, 4, act=True, prefill=True) == PREFILL


def test_sm90_int8_goes_dense_earlier_on_small_layers(tables):
    """int8 prefill gives way to the dense tier at M = 8192 on the 8B-class layers (K * N <= small_kn,
    K-heavy 8B down included) and at 12288 on the rest; int4 keeps 16384 everywhere."""
    t = tables.table(SM90)
    assert t["fused"]["int8_small"] == 8192 and t["fused"]["int8"] == 12288 and t["decode"]["int8_small"] == -1
    for (K, N), m0 in ((O_8B, 8192), (QKV_8B, 8192), (DOWN_8B, 8192), (GATE_UP_8B, 12288), (QKV_70B, 12288),
                       (DOWN_70B, 12288)):
        assert tables.choose(SM90, H200_SMS, m0 - 1, K, N, 8, prefill=True) == PREFILL, (K, N)
        assert tables.choose(SM90, H200_SMS, m0, K, N, 8, prefill=True) == DENSE, (K, N)
        assert tables.choose(SM90, H200_SMS, m0, K, N, 4, prefill=True) == PREFILL, (K, N)
    # the bound is the small-layer one: 128 output columns past 14336 x 4096 (8B down) is large
    assert tables.choose(SM90, H200_SMS, 8192, 14336, 4096 + 128, 8, prefill=True) == PREFILL
    # the dense-vs-decode set (no prefill) is not refined: int8 8B o goes dense where int8 does
    assert tables.choose(SM90, H200_SMS, t["decode"]["int8"], *O_8B, 8) == DENSE


def test_other_tables_have_no_refinements(tables):
    for cc in (SM100, THOR, ADA):
        t = tables.table(cc)
        assert t["decode_max_m_int8"] == -1 and t["small_kn"] == 0 and t["small_k_heavy_max_m_int8"] == -1
        assert t["fused"]["act_order_large"] == -1 and t["decode"]["act_order_large"] == -1
        assert t["fused"]["int8_small"] == -1 and t["decode"]["int8_small"] == -1


@pytest.mark.parametrize("header, least", [("heuristics_sm90.hpp", 7), ("heuristics_sm100.hpp", 1)])
def test_table_comments_point_at_results_entries(header, least):
    """Each value's comment names the benchmarks/RESULTS.md entry that holds its evidence ([tag]); every
    tag a header names must be an entry there, so a header cannot point at evidence that is gone."""
    text = (ROOT / "kernels" / "dispatch" / header).read_text()
    comments = [line.split("//", 1)[1] for line in text.splitlines() if "//" in line]
    tags = {tag for c in comments for tag in re.findall(r"\[([a-z][a-z0-9-]*)\]", c)}
    assert len(tags) >= least, tags
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    missing = sorted(t for t in tags if f"| [{t}] |" not in results)
    assert not missing, f"{header} names RESULTS.md entries that do not exist: {missing}"


@pytest.mark.parametrize("cc, sms", [(SM90, H200_SMS), (SM100, B200_SMS)])
@pytest.mark.parametrize("prefill", [True, False])
def test_padded_act_order_shards_go_dense_earlier_by_their_padding(tables, cc, sms, prefill):
    """The padded act-order layout (K_in input features in K >= K_in packed rows): decode and prefill work on K
    rows, the dense tier's GEMM on K_in, so the dense crossover is the unpadded one times K_in / K, rounded up."""
    def first_dense(K, N, k_in):
        Ms = range(1, 16400)
        paths = tables.choose_many([(cc, sms, M, K, N, 4, True, True, True, prefill, k_in) for M in Ms])
        return next(M for M, path in zip(Ms, paths) if path == DENSE)

    for K_in, K, N in ((4096, 5120, 8192), (1024, 2048, 8192), (3584, 4608, 4096)):
        m0 = first_dense(K, N, 0)
        m1 = -(-m0 * K_in // K)
        assert first_dense(K, N, K_in) == m1, (K_in, K, N)
        assert tables.choose(cc, sms, m1, K, N, 4, act=True, prefill=prefill, k_in=K_in) == DENSE, (K_in, K, N)
        assert tables.choose(cc, sms, m1 - 1, K, N, 4, act=True, prefill=prefill, k_in=K_in) != DENSE, (K_in, K, N)
        # K_in == K (an unpadded act-order weight) and a weight without act-order keep the table's value
        assert tables.choose(cc, sms, m0 - 1, K, N, 4, act=True, prefill=prefill, k_in=K) != DENSE
        assert tables.choose(cc, sms, m0, K, N, 4, act=True, prefill=prefill, k_in=K) == DENSE


def test_sm90_without_prefill_int8_and_act_order_go_dense_no_later_than_int4(tables):
    d = tables.table(SM90)["decode"]
    assert d["int8"] <= d["int4"] and d["act_order"] <= d["int4"]


def test_availability_fallbacks(tables):
    K, N = O_8B
    # decode cannot run: dense at every M (and never prefill when it cannot run either)
    assert tables.choose(SM90, H200_SMS, 1, K, N, 4, decode=False) == DENSE
    # dense cannot run: decode at any M
    assert tables.choose(SM90, H200_SMS, 1 << 16, K, N, 4, dense=False) == DECODE
    # nothing can run: decode, whose reason run() then reports
    assert tables.choose(SM90, H200_SMS, 64, K, N, 4, decode=False, dense=False) == DECODE
    # prefill available but decode not: prefill below the dense threshold, even at M = 1
    assert tables.choose(SM100, B200_SMS, 1, K, N, 4, decode=False, prefill=True) == PREFILL


# ------------------------------------------------------- the ops on a GPU


def _gpu_ops():
    import torch

    from swordfish_backend import ops

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    if not ops.has_extension():
        pytest.skip(f"needs the compiled extension: {ops.extension_error()}")
    return torch, ops


@pytest.mark.gpu
@pytest.mark.parametrize("bits, shape, act", CASES)
def test_select_path_op_matches_table(tables, bits, shape, act):
    torch, ops = _gpu_ops()
    dev = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(dev)
    cc, sms = (props.major, props.minor), props.multi_processor_count
    K, N = shape
    t = tables.table(cc)
    # Whether the prefill path can run these shapes here: the C++ predicate, not a restatement of it.
    prefill = ops.can_implement(1, K, N, bits, 128, False, False, act, 1, ops.PATH_PREFILL, dev) == ""
    m0 = threshold(t, bits, K, N, act, which="fused" if prefill else "decode")
    d = decode_limit(t, bits, K, N)
    axis = sorted(set(M_AXIS) | ({m0 - 1, m0, m0 + 1} if m0 != float("inf") else set()) | {d - 1, d, d + 1})
    axis = [m for m in axis if m >= 1]
    want = tables.choose_many([(cc, sms, M, K, N, bits, act, True, True, prefill) for M in axis])
    for has_zeros in (False, True):  # zero points must not change the answer (alignment of the stand-in)
        got = [ops.select_path(M, K, N, bits, 128, False, has_zeros, act, 1, dev) for M in axis]
        assert got == want, f"has_zeros={has_zeros}"


@pytest.mark.gpu
def test_last_path_reports_what_ran(capfd, monkeypatch):
    torch, ops = _gpu_ops()
    from swordfish_backend import format as fmt

    dev = torch.cuda.current_device()
    K, N = 256, 128
    q = torch.randint(0, 16, (K, N))
    packed = fmt.pack_reference(q, 4).cuda()
    scales = (torch.rand(K // 128, N) * 0.01 + 0.001).to(torch.bfloat16).cuda()
    x = torch.randn(3, K, device="cuda").to(torch.bfloat16)
    assert ops.last_path(255) == ops.PATH_AUTO  # no such device: nothing ran
    ops.gemm(x, packed, scales, None, None, None, 4, 128, False, ops.PATH_DENSE, 0)
    assert ops.last_path(dev) == ops.PATH_DENSE
    ops.gemm(x, packed, scales, None, None, None, 4, 128, False, ops.PATH_AUTO, 0)
    assert ops.last_path(dev) == ops.select_path(3, K, N, 4, 128, False, False, False, 1, dev)

    # SWORDFISH_DEBUG is read per call: one line per (shape, path), none when unset.
    capfd.readouterr()
    M = 37  # a shape no other test logs
    x = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    monkeypatch.delenv("SWORDFISH_DEBUG", raising=False)
    ops.gemm(x, packed, scales, None, None, None, 4, 128, False, ops.PATH_DENSE, 0)
    torch.cuda.synchronize()
    assert "swordfish:" not in capfd.readouterr().err
    monkeypatch.setenv("SWORDFISH_DEBUG", "1")
    for _ in range(3):
        ops.gemm(x, packed, scales, None, None, None, 4, 128, False, ops.PATH_DENSE, 0)
    torch.cuda.synchronize()
    err = capfd.readouterr().err
    assert err.count(f"swordfish: M={M} K={K} N={N} bits=4 group=128 -> dense") == 1, err


# ------------------------------------------------------- the sweep's crossover arithmetic (CPU)


def _bench_dispatch():
    import repo_scripts

    return repo_scripts.load("benchmarks/bench_dispatch.py")


def test_sweep_crossover_is_where_dense_stays_faster():
    b = _bench_dispatch()
    decode = {64: 10.0, 128: 20.0, 256: 40.0, 384: 60.0, 512: 80.0, 1024: 160.0}
    dense = {64: 50.0, 128: 18.0, 256: 45.0, 384: 50.0, 512: 60.0, 1024: 100.0}  # a lone win at 128 does not count
    c = b.crossover(decode, dense)
    assert (c["m"], c["below"]) == (384, 256)
    assert 256 < c["interpolated"] <= 384
    assert b.crossover(decode, {m: 2 * t for m, t in decode.items()})["m"] is None
    suggested = b.suggest([dict(c, shape="a", bits=4, k_heavy=False),
                           dict(m=512, below=384, interpolated=450, note=None, shape="b", bits=4, k_heavy=False)],
                          4, False)
    assert suggested["int4"]["value"] == 384 and suggested["int4_k_heavy"]["value"] is None


@pytest.mark.parametrize("bits", [4, 8])
def test_grouped_tile_grows_with_the_rows_per_expert(tables, bits):
    """sm90: one tile from {64, 128, 256}, never smaller for more rows, 64 for a few rows per expert and
    256 for thousands (the padding of a run costs less than a small tile's rate there); none elsewhere."""
    avgs = [0.1, 1, 4, 16, 40, 56, 60, 64, 100, 200, 256, 400, 450, 512, 1024, 4096, 65536]
    tiles = [tables.grouped_tile((9, 0), bits, a) for a in avgs]
    assert set(tiles) <= {64, 128, 256} and tiles == sorted(tiles), tiles
    assert tiles[0] == 64 and tiles[-1] == 256
    for cc in ((10, 0), (11, 0), (8, 0), (12, 0)):
        assert tables.grouped_tile(cc, bits, 1024) == 0

