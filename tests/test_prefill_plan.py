"""The sm90 prefill launch plan and shared-memory layout on the CPU (kernels/prefill/prefill_sm90_plan.h
and prefill_sm90_layout.h through kernels/prefill/sm90/tests/plan_main.cpp): the invariants the kernel's
work-item walk relies on, for every shape, M, bit width and SM count, and the choices the H200
measurements fixed."""

from __future__ import annotations

import itertools

import host_cxx
import pytest

ROOT = host_cxx.ROOT
DRIVER = ROOT / "kernels" / "prefill" / "sm90" / "tests" / "plan_main.cpp"
FIELDS = ("bt", "m_tiles", "n_tiles", "k_stages", "dp_tiles", "splits", "split_tiles", "items", "grid", "group_m",
          "ws_x", "ws_partials", "est_ns", "cg", "tile_n")


class Planner:
    def __init__(self, exe):
        self.exe = exe

    def ask(self, lines: list[str]) -> list[str]:
        return host_cxx.ask(self.exe, lines)

    def plans(self, queries) -> list[dict]:
        out = self.ask([f"plan {M} {K} {N} {bits} {sms} {int(act)}" for M, K, N, bits, sms, act in queries])
        return [dict(zip(FIELDS, (float(v) if k == "est_ns" else int(v) for k, v in zip(FIELDS, o.split()))))
                for o in out]

    def plan(self, M, K, N, bits=4, sms=132, act=False) -> dict:
        return self.plans([(M, K, N, bits, sms, act)])[0]

    def layout(self, bits, bt, cg=2) -> dict:
        ks, stages, stage_bytes, smem, threads, epi_rows = (
            int(v) for v in self.ask([f"layout {bits} {bt} {cg}"])[0].split())
        return {"ks": ks, "stages": stages, "stage_bytes": stage_bytes, "smem": smem, "threads": threads,
                "epi_rows": epi_rows}


@pytest.fixture(scope="module")
def planner(tmp_path_factory) -> Planner:
    return Planner(host_cxx.build(tmp_path_factory.mktemp("plan"), DRIVER, str(DRIVER.relative_to(ROOT)),
                                  flags=("-O1", "-Wall", "-Werror")))


# (bits, BT, consumer warpgroups) -> (k64 slices per stage, stages, stage bytes, dynamic shared
# memory, epilogue staging rows): docs/PREFILL.md's table. CG = 3 is the 192-column tile (BT <= 128,
# k64 stages). int8 stages half its BT = 128 and 256 epilogues at a time, for a fourth stage.
LAYOUTS = {
    (4, 64, 2): (2, 8, 26624, 230528, 64), (4, 128, 2): (2, 4, 43008, 205952, 128),
    (4, 256, 2): (1, 4, 37888, 218240, 256),
    (8, 64, 2): (2, 6, 34816, 226432, 64), (8, 128, 2): (2, 4, 51200, 222336, 64),
    (8, 256, 2): (1, 4, 41984, 201856, 128),
    (4, 192, 2): (1, 6, 29696, 228480, 192), (8, 192, 2): (1, 5, 33792, 219264, 192),
    (4, 64, 3): (1, 8, 15872, 152704, 64), (4, 128, 3): (1, 7, 24064, 218752, 128),
    (8, 64, 3): (1, 8, 22016, 201856, 64), (8, 128, 3): (1, 6, 30208, 231552, 128),
}


@pytest.mark.parametrize("bits, bt, cg", sorted(LAYOUTS))
def test_layout_matches_the_documented_table(planner, bits, bt, cg):
    got = planner.layout(bits, bt, cg)
    assert (got["ks"], got["stages"], got["stage_bytes"], got["smem"], got["epi_rows"]) == LAYOUTS[(bits, bt, cg)]
    assert got["smem"] <= 232448  # sm90's opt-in limit per block
    assert got["threads"] == 128 * (1 + cg)
    # k128 stages for BT <= 128 and 128 columns (the 192-column tile's consumers have 128 registers at
    # compile time: k64); at least four stages everywhere, the epilogue staging giving way where needed.
    assert (got["ks"] == 2) == (bt <= 128 and cg == 2)
    assert got["stages"] >= 4 and bt % got["epi_rows"] == 0 and got["epi_rows"] >= 64
    # The staging tile is cut only as far as the fourth stage needs: beside one twice as tall, three fit.
    reserve = got["smem"] - got["stages"] * got["stage_bytes"] - cg * got["epi_rows"] * 128
    if got["epi_rows"] < bt:
        assert (232448 - reserve - cg * 2 * got["epi_rows"] * 128) // got["stage_bytes"] < 4


LLAMA = [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096), (8192, 10240), (8192, 8192), (8192, 57344),
         (28672, 8192)]
ODD = [(128, 128), (640, 384), (1152, 896), (8192, 256), (4096, 128), (384, 17 * 128)]
MS = [1, 7, 63, 64, 65, 127, 128, 129, 255, 256, 333, 512, 1000, 1024, 2048, 4096, 8192, 16383]


def _ceil(a, b):
    return -(-a // b)


def test_plan_invariants_everywhere(planner):
    """What the kernel's item walk (sm90::item_of) and the launcher rely on, over 2 x 14 shapes x 18 M x 4 SM
    counts (the H200's 132, B200's 148, a 20-SM part and a single SM): no device-0 or SM-count assumption."""
    queries = [(M, K, N, bits, sms, act) for (K, N), M, bits, sms, act in
               itertools.product(LLAMA + ODD, MS, (4, 8), (132, 148, 20, 1), (False,))]
    queries += [(M, K, N, 4, 132, True) for (K, N), M in itertools.product(LLAMA[:2], MS)]
    for (M, K, N, bits, sms, act), t in zip(queries, planner.plans(queries)):
        where = f"M={M} K={K} N={N} int{bits} sms={sms}: {t}"
        assert (bits, t["bt"], t["cg"]) in LAYOUTS and t["tile_n"] == 64 * t["cg"], where
        assert t["cg"] == 2 or N >= 192, where  # no 192-column tile on fewer columns
        ks = LAYOUTS[(bits, t["bt"], t["cg"])][0]
        n_tiles = _ceil(N, t["tile_n"])
        tiles = _ceil(M, t["bt"]) * n_tiles
        assert (t["m_tiles"], t["n_tiles"], t["k_stages"]) == (_ceil(M, t["bt"]), n_tiles, K // (64 * ks)), where
        assert t["split_tiles"] == tiles - t["dp_tiles"], where
        assert t["items"] == t["dp_tiles"] + t["split_tiles"] * t["splits"], where
        assert t["grid"] == min(t["items"], sms) >= 1, where
        assert 1 <= t["group_m"] <= t["m_tiles"], where
        if t["splits"] == 1:
            assert t["split_tiles"] == 0 and t["ws_partials"] == 0, where
        else:
            # the whole tiles are full waves; the split ones are what is left (fewer than the SMs)
            assert t["dp_tiles"] % sms == 0 and 0 < t["split_tiles"] < sms or t["dp_tiles"] == 0, where
            assert 2 <= t["splits"] <= 8 and t["k_stages"] // t["splits"] >= 4, where
            assert t["ws_partials"] == t["split_tiles"] * t["splits"] * t["bt"] * t["tile_n"] * 4, where
        assert t["ws_x"] == (_ceil(M * K * 2, 256) * 256 if act else 0), where
        assert t["items"] < 2 ** 31 and t["est_ns"] > 0, where


@pytest.mark.parametrize("M, K, N, want", [
    # 80 tiles on 132 SMs: split 3+ ways, more split items than SMs (two rounds)
    (64, 8192, 10240, {"bt": 64, "splits": (3, 8)}),
    (64, 8192, 256, {"splits": (2, 8)}),          # 2 tiles: split-K fills the SMs
    (4096, 1024, 2048, {"splits": (1, 1)}),       # 256 tiles: no split
    (3250, 1024, 1024, {"bt": 256}),
    # the refit's choices, measured faster than the previous model's (benchmarks/RESULTS.md, prefill plan):
    (384, 4096, 6144, {"bt": 128, "splits": (8, 8)}),    # 8B qkv: 0.81x the time of BT 256 whole
    (256, 8192, 10240, {"bt": 128, "splits": (4, 4)}),   # 70B qkv: 0.87x
    (192, 4096, 4096, {"bt": 64, "splits": (1, 1)}),     # 8B o: 0.88x
    # BT 192, against the plans before it (benchmarks/RESULTS.md, prefill plan; int4):
    (768, 14336, 4096, {"bt": 192, "splits": (1, 1)}),   # 8B down: 4 x 32 tiles, 0.88x of BT 256 split 4
    (576, 8192, 8192, {"bt": 192, "splits": (2, 2)}),    # 70B o: 0.92x of BT 128 split 2
    (192, 8192, 57344, {"bt": 192}),                     # 70B gate_up: 0.85x of BT 256
])
def test_plan_choices(planner, M, K, N, want):
    t = planner.plan(M, K, N)
    if "bt" in want:
        assert t["bt"] == want["bt"], t
    if "splits" in want:
        lo, hi = want["splits"]
        assert lo <= t["splits"] <= hi, t
    if t["splits"] > 1 and N == 10240 and M == 64:
        assert t["items"] > 132, t


def test_plan_follows_the_sm_count(planner):
    """The same problem on a device with more SMs plans at least as many CTAs, never more than it has."""
    for sms in (20, 66, 132, 148):
        t = planner.plan(64, 8192, 8192, sms=sms)
        assert t["grid"] <= sms
    assert planner.plan(64, 8192, 8192, sms=148)["grid"] >= planner.plan(64, 8192, 8192, sms=132)["grid"]


def test_the_refit_script_replays_this_planner(planner):
    """benchmarks/fit_prefill_plan.py replays the planner in Python to know which plan each
    timing ran; under the committed constants its replay must be this header's plan (int4 and int8, 132
    SMs)."""
    pytest.importorskip("numpy")
    import repo_scripts

    fit = repo_scripts.load("benchmarks/fit_prefill_plan.py")
    for bits, model in ((4, "fit"), (8, "fit8")):
        queries = [(M, K, N, bits, 132, False) for K, N in LLAMA
                   for M in (1, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048)]
        for (M, K, N, *_), t in zip(queries, planner.plans(queries)):
            assert fit.plan(K, N, M, fit.MODELS[model], bits) == (t["bt"], t["splits"], t["cg"]), (bits, M, K, N, t)


def test_the_refit_script_reads_only_prefill_rows(tmp_path):
    """A `swordfish bench --paths prefill,cublas` file holds cuBLAS rows beside the prefill ones: the refit
    must time plans from the prefill rows alone."""
    pytest.importorskip("numpy")
    import json

    import repo_scripts

    fit = repo_scripts.load("benchmarks/fit_prefill_plan.py")
    row = {"model": "llama-3-8b", "layer": "qkv", "M": 512, "status": "ok"}
    data = {"config": {"bits": 4}, "rows": [dict(row, impl="prefill", path="prefill", us=40.0),
                                            dict(row, impl="cublas", path=None, us=30.0),
                                            dict(row, impl="prefill", path="prefill", us=None, status="error")]}
    (tmp_path / "t.json").write_text(json.dumps(data))
    times = fit.timings([("fit", str(tmp_path / "t.json"))])
    assert list(times.values()) == [40000.0]
