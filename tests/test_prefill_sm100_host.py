"""The Blackwell (sm100a / sm110a) tcgen05 prefill on the CPU: everything that can be checked without a
Blackwell GPU. COMPILED, NOT RUN: nothing here executes the kernel.

1. The plan and index math of kernels/prefill/sm100/prefill_sm100_plan.h through its C++ driver
   (kernels/prefill/sm100/tests/plan_main.cpp, built with the host compiler), each answer checked against
   a formula written here from the design (docs/PREFILL.md "The sm100 kernel"): tile choice by bits and the
   K-heavy rule, shared-memory layout, TMEM column plan, 2-SM pairing, the persistent tile scheduler,
   Thor's L2 chunking, the byte-domain swizzle of the UMMA buffer and the Transform's store addresses.
2. An emulation of the Transform's writes into the swizzled UMMA buffer (kernels/prefill/sm100/tests/
   transform_emu_main.cu, built with nvcc as host code): the kernel's own role / source / scale-address /
   store-offset code on random int4 / int8 tiles of every group, channelwise, zero points, fp16 and bf16,
   read back through CuTe's UMMA layout in the byte domain and compared with the reference weight.
3. The machine code: the sm100 prefill translation units compiled for sm_100a and sm_110a (cached under
   build/sm100-sass/, keyed by the sources' hash; a few minutes on two cores the first time), their SASS read
   with cuobjdump (the triton wheel's, GPU.md): tcgen05 MMAs on a CTA pair (UTCHMMA.2CTA), the activations'
   2-SM TMA (UTMALDG.2D.2CTA), TMEM loads (LDTM), the pair's commits (UTCBAR.2CTA.MULTICAST), and
   registers / shared memory / spills from ptxas, printed. Skips, saying why, without nvcc, the CUTLASS
   headers or cuobjdump.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import os
import pathlib
import re
import shutil
import subprocess

import host_cxx
import pytest

ROOT = host_cxx.ROOT
SM100 = ROOT / "kernels" / "prefill" / "sm100"
DRIVER = SM100 / "tests" / "plan_main.cpp"
EMULATOR = SM100 / "tests" / "transform_emu_main.cu"

SMEM_LIMIT = 232448  # sm100 / sm110 opt-in shared memory per block
PLAN_FIELDS = ("bt", "x_stages", "tmem_cols", "smem", "chunk_rows", "chunks", "m_tiles", "n_tiles", "k_stages",
               "tiles", "clusters", "group_m", "scale_rows", "ws_x")
LAYOUT_FIELDS = ("x_stages", "a_bytes", "x_bytes", "w_bytes", "s_bytes", "off_a", "off_x", "off_w", "off_s", "off_z",
                 "off_bar", "off_tmem", "smem", "threads")


class Driver:
    def __init__(self, exe):
        self.exe = exe

    def ask(self, lines):
        return host_cxx.ask(self.exe, lines)

    def ints(self, lines):
        return [[int(v) for v in o.split()] for o in self.ask(lines)]

    def plans(self, queries):
        out = self.ints([f"plan {M} {K} {N} {bits} {sms} {cc[0]} {cc[1]} {int(act)} {g} {int(cw)}"
                         for M, K, N, bits, sms, cc, act, g, cw in queries])
        return [dict(zip(PLAN_FIELDS, o)) for o in out]

    def plan(self, M, K, N, bits=4, sms=148, cc=(10, 0), act=False, group=128, channelwise=False):
        return self.plans([(M, K, N, bits, sms, cc, act, group, channelwise)])[0]

    def layout(self, bits, bt):
        return dict(zip(LAYOUT_FIELDS, self.ints([f"layout {bits} {bt}"])[0]))


@pytest.fixture(scope="module")
def drv(tmp_path_factory) -> Driver:
    return Driver(host_cxx.build(tmp_path_factory.mktemp("sm100plan"), DRIVER, str(DRIVER.relative_to(ROOT)),
                                 flags=("-O1", "-Wall", "-Werror")))


def _ceil(a, b):
    return -(-a // b)


B200, THOR = (10, 0), (11, 0)

# ----------------------------------------------------------------------------- tile choice


@pytest.mark.parametrize("M, K, N, bits, want", [
    (4096, 4096, 14336, 4, 256),   # int4: the 256 x 256 instruction
    (4096, 4096, 4096, 4, 256),
    (4096, 14336, 4096, 4, 128),   # K-heavy int4: K >= max(2N, 8192) (the write-up's K = 14336 case)
    (4096, 8192, 4096, 4, 128),    # K = 8192 = max(2N, 8192)
    (4096, 8192, 8192, 4, 256),    # K < 2N
    (4096, 8191 // 128 * 128, 2048, 4, 256),  # K < 8192
    (128, 4096, 4096, 4, 128),     # M <= 128: a 256-token tile would be more than half empty
    (129, 4096, 4096, 4, 256),
    (4096, 4096, 14336, 8, 128),   # int8: 256 x 128 only
    (64, 14336, 4096, 8, 128),
])
def test_token_tile(drv, M, K, N, bits, want):
    t = drv.plan(M, K, N, bits)
    assert t["bt"] == want
    assert t["tmem_cols"] == 2 * want and t["tmem_cols"] <= 512 and t["tmem_cols"] & (t["tmem_cols"] - 1) == 0


# ----------------------------------------------------------------------------- shared memory


# (bits, BT) -> activation stages; docs/PREFILL.md's sm100 table.
LAYOUTS = {(4, 256): 7, (4, 128): 8, (8, 128): 8}


@pytest.mark.parametrize("bits, bt", sorted(LAYOUTS))
def test_layout(drv, bits, bt):
    L = drv.layout(bits, bt)
    assert L["x_stages"] == LAYOUTS[(bits, bt)]
    assert L["threads"] == 448
    assert L["a_bytes"] == 128 * 64 * 2                     # 128 weight rows x k64, 16-bit
    assert L["x_bytes"] == bt // 2 * 64 * 2                 # the CTA's half of the token tile
    assert L["w_bytes"] == 2 * (2048 if bits == 4 else 4096)  # two n64 blocks, one k64 slice
    assert L["s_bytes"] == 2 * 128 * 2                      # two scale rows (group 32) of 128 columns
    # Stages back to back; the swizzled operands 1024-aligned (the UMMA descriptors' base_offset is 0).
    assert L["off_a"] == 0 and L["off_x"] == 4 * L["a_bytes"]
    assert L["off_w"] == L["off_x"] + L["x_stages"] * L["x_bytes"]
    assert L["off_s"] == L["off_w"] + 8 * L["w_bytes"] and L["off_z"] == L["off_s"] + 8 * L["s_bytes"]
    assert L["off_bar"] == L["off_z"] + 8 * L["s_bytes"]
    assert L["off_a"] % 1024 == 0 and L["off_x"] % 1024 == 0 and L["x_bytes"] % 1024 == 0
    assert L["off_w"] % 128 == 0 and L["off_s"] % 16 == 0 and L["off_bar"] % 8 == 0
    bars = 2 * 8 + 2 * 4 + 2 * L["x_stages"] + 2 * 2
    assert L["off_tmem"] == L["off_bar"] + 8 * bars
    assert L["smem"] == 1024 + L["off_tmem"] + 16 <= SMEM_LIMIT
    # One more activation stage would not fit (or the depth is at its cap of 8).
    assert L["x_stages"] == 8 or L["smem"] + L["x_bytes"] + 16 > SMEM_LIMIT


def test_documented_table_is_the_layout(drv):
    """docs/PREFILL.md's sm100 table (x stages, shared memory, TMEM columns) is what the header computes."""
    doc = (ROOT / "docs" / "PREFILL.md").read_text()
    rows = re.findall(r"^\| int(\d) 256 x (\d+) \| (\d+) \| ([\d,]+) \| (\d+) \|$", doc, re.M)
    assert {(int(b), int(bt)) for b, bt, *_ in rows} == set(LAYOUTS)
    for bits, bt, stages, smem, cols in rows:
        L = drv.layout(int(bits), int(bt))
        assert (L["x_stages"], L["smem"], 2 * int(bt)) == (int(stages), int(smem.replace(",", "")), int(cols))


@pytest.mark.parametrize("bits, bt, rows, zeros", [(b, t, r, z) for (b, t) in sorted(LAYOUTS) for r in (1, 2)
                                                    for z in (False, True)])
def test_transaction_bytes(drv, bits, bt, rows, zeros):
    w_tx, x_tx = (int(v) for v in drv.ask([f"wtx {bits} {bt} {rows} {int(zeros)}"])[0].split())
    assert w_tx == 2 * (2048 if bits == 4 else 4096) + rows * 256 * (2 if zeros else 1)
    assert x_tx == 2 * (bt // 2) * 128  # both CTAs' halves complete on the leader's barrier


# ----------------------------------------------------------------------------- TMEM columns


def test_tmem_addresses(drv):
    queries, want = [], []
    for base, stage, bt, lane, col in itertools.product((0, 0x40, 0x1000000), (0, 1), (128, 256), (0, 31, 96),
                                                        (0, 31, 127)):
        queries.append(f"tmem {base} {stage} {bt} {lane} {col}")
        want.append(base + (lane << 16) + stage * bt + col)
    assert [int(o) for o in drv.ask(queries)] == want
    # The two accumulator stages of a 256-token tile fill TMEM's 512 columns exactly.
    assert drv.plan(4096, 4096, 4096)["tmem_cols"] == 512


# ----------------------------------------------------------------------------- the swizzle and the stores


def _swizzle_bytes(row, k):
    """Byte-domain SWIZZLE_128B of a (rows, 64) 16-bit K-major tile: bits [4, 7) ^= bits [7, 10)."""
    b = 128 * row + 2 * k
    return b ^ (((b >> 7) & 7) << 4)


def test_umma_offset_is_the_byte_domain_swizzle(drv):
    rows = range(128)
    out = drv.ints([f"umma {r} {k}" for r in rows for k in range(64)])
    seen = set()
    for (r, k), (byte, elem_bytes) in zip(((r, k) for r in rows for k in range(64)), out):
        assert byte == _swizzle_bytes(r, k) == elem_bytes, (r, k)
        assert byte == 2 * ((64 * r + k) ^ ((r % 8) << 3))  # the write-up's element-domain closed form
        seen.add(byte)
    assert seen == set(range(0, 128 * 128, 2))


def test_store_positions(drv):
    """a_store: A register `reg` of k16 step kk sits at rows n_lo (+ 8 for a1, a3) of block c and k = 16 kk +
    2 t (+ 8 for a2, a3): the mma.sync / wgmma A-fragment layout; one 32-bit store at the swizzled offset."""
    queries, want = [], []
    for c, n_lo, t, kk, reg in itertools.product((0, 1), (0, 7, 16, 39, 55), range(4), range(4), range(4)):
        queries.append(f"store {c} {n_lo} {t} {kk} {reg}")
        row, k = 64 * c + n_lo + 8 * (reg & 1), 16 * kk + 2 * t + 8 * (reg >> 1)
        want.append([row, k, _swizzle_bytes(row, k)])
    assert drv.ints(queries) == want


# ----------------------------------------------------------------------------- scale rows


@pytest.mark.parametrize("group, cw", [(32, False), (64, False), (128, False), (128, True)])
def test_scale_rows(drv, group, cw):
    for kb in range(6):
        row, rows, col, row1 = (int(v) for v in drv.ask([f"scale {kb} {group} {int(cw)} 1 19"])[0].split())
        assert rows == (1 if cw else max(1, 64 // group))
        assert row == (0 if cw else kb * 64 // group)
        assert col == 2 * (64 + 19)
        assert row1 == (256 if group == 32 and not cw else 0)


# ----------------------------------------------------------------------------- 2-SM pairing and the scheduler


@pytest.mark.parametrize("bt", [128, 256])
def test_pairing(drv, bt):
    for mt, nt in [(0, 0), (3, 5), (17, 2)]:
        (n0a, xa, m0a), (n0b, xb, m0b) = drv.ints([f"part {mt} {nt} 0 {bt}", f"part {mt} {nt} 1 {bt}"])
        assert m0a == m0b == mt * bt  # both CTAs' accumulators cover all BT tokens of the tile
        assert (n0a, n0b) == (256 * nt, 256 * nt + 128)  # A halves: 128 weight rows each
        assert (xa, xb) == (mt * bt, mt * bt + bt // 2)  # B halves: BT / 2 activation rows each


@pytest.mark.parametrize("m_tiles, n_tiles, group_m", [(1, 1, 1), (5, 7, 2), (16, 56, 8), (3, 16, 3), (13, 4, 5),
                                                       (33, 1, 4)])
def test_tile_walk_is_a_permutation_in_bands(drv, m_tiles, n_tiles, group_m):
    tiles = m_tiles * n_tiles
    coords = [tuple(c) for c in drv.ints([f"tile {t} {m_tiles} {n_tiles} {group_m}" for t in range(tiles)])]
    assert sorted(coords) == [(m, n) for m in range(m_tiles) for n in range(n_tiles)]
    # Band b holds m tiles [b g, b g + g): consecutive tiles share an n column across the band's rows.
    for t, (m, n) in enumerate(coords):
        band = t // (group_m * n_tiles)
        assert band * group_m <= m < (band + 1) * group_m


@pytest.mark.parametrize("tiles, clusters", [(1, 74), (74, 74), (75, 74), (896, 74), (64, 10), (7, 3)])
def test_cluster_tile_counts(drv, tiles, clusters):
    counts = [int(o) for o in drv.ask([f"count {tiles} {c} {clusters}" for c in range(clusters)])]
    assert sum(counts) == tiles
    assert max(counts) - min(counts) <= 1
    assert counts == [len(range(c, tiles, clusters)) for c in range(clusters)]


# ----------------------------------------------------------------------------- Thor's L2 chunking


def test_thor_chunks_m_so_the_activation_slab_fits_l2(drv):
    t = drv.plan(2048, 14336, 4096, cc=THOR, sms=20)  # the write-up's two-thirds-loss case
    assert t["bt"] == 128  # K-heavy
    assert t["chunks"] > 1 and t["chunk_rows"] % 128 == 0
    assert t["chunk_rows"] * 14336 * 2 <= 16 << 20  # half of the 32 MB L2
    assert t["chunks"] * t["chunk_rows"] >= 2048 > (t["chunks"] - 1) * t["chunk_rows"]
    # B200 (126 MB L2): no chunking.
    assert drv.plan(2048, 14336, 4096, cc=B200)["chunks"] == 1
    # Thor reported as 10.1 by CUDA 12 chunks too (heuristics' table_for treats it as Thor).
    assert drv.plan(2048, 14336, 4096, cc=(10, 1))["chunks"] > 1


@pytest.mark.parametrize("M, K, bt", [(1, 4096, 128), (512, 4096, 256), (8192, 4096, 256), (16384, 28672, 128),
                                      (3000, 131072, 128)])
def test_chunk_rows(drv, M, K, bt):
    rows = int(drv.ask([f"chunk {M} {K} {bt} {32 << 20}"])[0])
    fit = (16 << 20) // (K * 2) // bt * bt
    assert rows == min(M, max(bt, fit))
    assert int(drv.ask([f"chunk {M} {K} {bt} 0"])[0]) == M  # no L2 budget: one launch


# ----------------------------------------------------------------------------- plan invariants

LLAMA = [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096), (8192, 10240), (8192, 8192), (8192, 57344),
         (28672, 8192)]
ODD = [(128, 128), (640, 384), (1152, 896), (8192, 256), (4096, 128), (384, 17 * 128)]
MS = [1, 63, 128, 129, 255, 256, 333, 1000, 2048, 4096, 8192, 16383]


def test_plan_invariants_everywhere(drv):
    """What the kernel's tile walk and the launcher rely on, for B200 (148 SMs), Thor (20) and odd SM counts."""
    queries = [(M, K, N, bits, sms, cc, act, g, False)
               for (K, N), M, bits, (sms, cc), act, g in itertools.product(
                   LLAMA + ODD, MS, (4, 8), ((148, B200), (20, THOR), (132, B200), (2, B200)), (False, True),
                   (32, 128))]
    for (M, K, N, bits, sms, cc, act, g, _), t in zip(queries, drv.plans(queries)):
        where = f"M={M} K={K} N={N} int{bits} sms={sms} cc={cc} act={act} g={g}: {t}"
        assert (bits, t["bt"]) in LAYOUTS, where
        assert t["k_stages"] == K // 64 and t["n_tiles"] == _ceil(N, 256), where
        assert t["m_tiles"] == _ceil(t["chunk_rows"], t["bt"]) and t["tiles"] == t["m_tiles"] * t["n_tiles"], where
        assert t["chunks"] == _ceil(M, t["chunk_rows"]), where
        assert t["chunk_rows"] == M or (cc == THOR and t["chunk_rows"] % t["bt"] == 0), where
        assert 1 <= t["clusters"] <= max(1, sms // 2) and t["clusters"] <= t["tiles"], where
        assert 1 <= t["group_m"] <= t["m_tiles"], where
        assert t["scale_rows"] == max(1, 64 // g), where
        assert t["ws_x"] == (_ceil(M * K * 2, 256) * 256 if act else 0), where
        assert t["smem"] <= SMEM_LIMIT and t["tmem_cols"] == 2 * t["bt"], where


# ----------------------------------------------------------------------------- the Transform, emulated


def _nvcc():
    return shutil.which("nvcc")


def _cutlass_include():
    env = os.environ.get("SWORDFISH_CUTLASS_INCLUDE")
    if env:
        return pathlib.Path(env)
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.submodule_search_locations:
        return None
    inc = pathlib.Path(list(spec.submodule_search_locations)[0]) / "source" / "include"
    return inc if (inc / "cute" / "tensor.hpp").exists() else None


def _need_nvcc_and_cutlass():
    if _nvcc() is None:
        pytest.skip("nvcc not found: the Transform emulation and the SASS checks build with it")
    inc = _cutlass_include()
    if inc is None:
        pytest.skip("CUTLASS / CuTe headers not found (pip install nvidia-cutlass==4.2.0.0, or set "
                    "SWORDFISH_CUTLASS_INCLUDE)")
    return inc


def test_transform_writes_the_umma_buffer(tmp_path):
    inc = _need_nvcc_and_cutlass()
    exe = tmp_path / "transform_emu"
    build = subprocess.run([_nvcc(), "-std=c++17", "-O1", "--expt-relaxed-constexpr", "-I", str(ROOT), "-I", str(inc),
                            str(EMULATOR), "-o", str(exe)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-4000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert run.stdout.strip().endswith("29 cases, 0 bad"), run.stdout


# ----------------------------------------------------------------------------- the machine code

SASS_UNITS = ["prefill_sm100_int4.cu", "prefill_sm100_int8.cu"]
KERNELS_PER_UNIT = {"prefill_sm100_int4.cu": 4, "prefill_sm100_int8.cu": 2}


def _cuobjdump():
    found = shutil.which("cuobjdump")
    if found:
        return found
    spec = importlib.util.find_spec("triton")
    if spec and spec.submodule_search_locations:
        tool = pathlib.Path(list(spec.submodule_search_locations)[0]) / "backends" / "nvidia" / "bin" / "cuobjdump"
        if tool.exists():
            return str(tool)
    return None


def _sources_hash(inc: pathlib.Path) -> str:
    h = hashlib.sha256()
    for path in sorted(list(SM100.glob("*.cu")) + list(SM100.glob("*.cuh")) + list(SM100.glob("*.h")) +
                       [ROOT / "kernels" / "prefill" / "transform.cuh", ROOT / "kernels" / "prefill" / "slice.h",
                        ROOT / "kernels" / "common" / "dequant.cuh", ROOT / "kernels" / "common" / "ptx.cuh",
                        ROOT / "kernels" / "common" / "format.h"]):
        h.update(path.read_bytes())
    h.update(str(inc).encode())
    return h.hexdigest()[:16]


def _compiled(unit: str, arch: str):
    """(object path, ptxas report) of `unit` built for sm_`arch` (cached under build/sm100-sass/)."""
    inc = _need_nvcc_and_cutlass()
    cache = ROOT / "build" / "sm100-sass" / _sources_hash(inc)
    cache.mkdir(parents=True, exist_ok=True)
    obj, log = cache / f"{unit}.{arch}.o", cache / f"{unit}.{arch}.ptxas.txt"
    if not obj.exists() or not log.exists():
        res = subprocess.run(
            ["nice", _nvcc(), "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-lineinfo",
             f"-gencode=arch=compute_{arch},code=sm_{arch}", "-I", str(ROOT), "-I", str(inc), "-Xptxas", "-v", "-c",
             str(SM100 / unit), "-o", str(obj)], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr[-4000:]
        log.write_text(res.stderr)
    return obj, log.read_text()


def _ptxas_report(text: str):
    """[(kernel, registers, spill stores, spill loads, stack)] from ptxas -v."""
    out, name = [], None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            name = m.group(1)
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and name:
            stack, st, ld = (int(v) for v in m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            out.append((name, int(m.group(1)), st, ld, stack))
            name = None
    return out


@pytest.mark.parametrize("arch", ["100a", "110a"])
@pytest.mark.parametrize("unit", SASS_UNITS)
def test_sass_has_the_tcgen05_pair(unit, arch, capsys):
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found (it ships in the triton wheel: pip install triton; GPU.md)")
    obj, ptxas = _compiled(unit, arch)
    sass = subprocess.run([tool, "-sass", str(obj)], capture_output=True, text=True, check=True).stdout
    report = _ptxas_report(ptxas)
    assert len(report) == KERNELS_PER_UNIT[unit], ptxas
    # The kernels' shared memory is dynamic (prefill_sm100_plan.h Layout::kSmemBytes, checked above).
    with capsys.disabled():
        for name, regs, st, ld, stack in report:
            print(f"\n  sm_{arch} {name}: {regs} registers, spill stores {st} B, spill loads {ld} B, stack {stack} B")
    for name, regs, st, ld, stack in report:
        # The only stack: the watchdog's printf arguments, on its cold path (prefill_sm100.cuh watchdog_trap).
        assert st == 0 and ld == 0 and stack <= 64, f"{name} spills: {ptxas}"
        assert regs <= 144, f"{name}: {regs} registers > 65536 / 448 threads"
    patterns = {"UTCHMMA.2CTA": r"UTCHMMA\.2CTA", "UTMALDG.2D.2CTA": r"UTMALDG\.2D\.2CTA",
                "UTMALDG.3D": r"UTMALDG\.3D\b", "LDTM.x32": r"LDTM\.x32",
                "UTCBAR.2CTA.MULTICAST": r"UTCBAR\.2CTA\.MULTICAST", "UTCATOMSWS.2CTA": r"UTCATOMSWS\.2CTA",
                "FENCE.VIEW.ASYNC.S": r"FENCE\.VIEW\.ASYNC\.S", "UCGABAR_WAIT": r"UCGABAR_WAIT",
                "MEMBAR.ALL.GPU": r"MEMBAR\.ALL\.GPU", "LDL": r"\bLDL\b", "STL": r"\bSTL(\.\d+)?\b",
                "R2UR": r"\bR2UR\b"}
    counts = {name: len(re.findall(rx, sass)) for name, rx in patterns.items()}
    with capsys.disabled():
        print(f"  sm_{arch} {unit} SASS: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    n = KERNELS_PER_UNIT[unit]
    assert counts["UTCHMMA.2CTA"] >= 4 * n, "tcgen05.mma.cta_group::2 (4 k16 MMAs per k64 stage) missing"
    assert counts["UTMALDG.2D.2CTA"] >= n, "the activations' 2-SM TMA load (SM100_TMA_2SM_LOAD) missing"
    assert counts["UTMALDG.3D"] >= n, "the packed blocks' TMA load missing"
    assert counts["LDTM.x32"] >= n, "the epilogue's TMEM loads (tcgen05.ld 32x32b.x32) missing"
    assert counts["UTCBAR.2CTA.MULTICAST"] >= 3 * n, "the leader's commits to both CTAs missing"
    assert counts["UTCATOMSWS.2CTA"] >= n, "the pair's TMEM allocation (tcgen05.alloc.cta_group::2) missing"
    assert counts["LDL"] == 0 and counts["STL"] <= 8 * n, "local-memory traffic beyond the watchdog's printf"
    # Only the two cluster barriers (start, end) may fence GPU-wide; none in the pipelines' hot loops.
    assert counts["MEMBAR.ALL.GPU"] <= 2 * n, "a GPU-wide fence in the pipelines (a .release.cluster arrive?)"
