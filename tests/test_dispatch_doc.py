"""docs/DISPATCH.md's H200 table against the compiled sm90 table: every path range the page states
(first and last M of each, on the page's representative shape for the row) is what
heuristics::choose picks on a 132-SM sm90 device, so the page cannot drift from the table. README.md's
one-line summary of the int4 ranges is checked the same way."""

from __future__ import annotations

import pathlib
import re

import pytest
from test_dispatch import H200_SMS, SM90, tables  # noqa: F401 (fixture)

from swordfish_backend.ops import PATHS

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "DISPATCH.md"

# Row label -> (K, N, act-order, prefill can run): the shapes the page names for its rows.
ROWS = {
    "8B-class": (4096, 4096, False, True),
    "8B-class, K-heavy": (14336, 4096, False, True),
    "larger": (8192, 57344, False, True),
    "larger, prefill plan unbalanced": (8192, 10240, False, True),
    "act-order (N <= 2K), 8B-class": (4096, 4096, True, True),
    "act-order (N <= 2K), larger": (28672, 8192, True, True),
    "prefill cannot run it": (4096, 4160, False, False),
    "prefill cannot run it, K-heavy": (14336, 4160, False, False),
}


def _doc_rows() -> dict[str, dict[int, list[tuple[str, int, int | None]]]]:
    """{row label: {bits: [(path, first M, last M or None)]}} from the page's H200 table."""
    text = DOC.read_text()
    section = text[text.index("## The H200 table"):text.index("## Other GPUs")]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] not in ROWS:
            continue
        rows[cells[0]] = {}
        for bits, cell in zip((4, 8), cells[1:]):
            segs = []
            for part in cell.split(","):
                m = re.fullmatch(r"(decode|prefill|dense) (\d+)-(\d*)", part.strip())
                assert m, f"cannot read {part!r} in row {cells[0]!r}"
                segs.append((m.group(1), int(m.group(2)), int(m.group(3)) if m.group(3) else None))
            rows[cells[0]][bits] = segs
    return rows


def test_the_page_has_every_row():
    assert set(_doc_rows()) == set(ROWS)


@pytest.mark.parametrize("label", list(ROWS))
@pytest.mark.parametrize("bits", [4, 8])
def test_every_stated_range(tables, label, bits):  # noqa: F811 (the fixture)
    K, N, act, prefill = ROWS[label]
    segs = _doc_rows()[label][bits]
    assert segs[0][1] == 1 and segs[-1][2] is None, f"{label} int{bits}: the ranges must cover M = 1 and up"
    for (_, _, last), (_, first, _) in zip(segs, segs[1:]):
        assert first == last + 1, f"{label} int{bits}: a gap or overlap at M = {last}"
    for path, first, last in segs:
        for M in (first, last if last is not None else 2 * first):
            got = tables.choose(SM90, H200_SMS, M, K, N, bits, act=act, prefill=prefill)
            assert got == PATHS[path], f"{label} int{bits} M = {M}: the page says {path}, the table picks {got}"


def test_readme_ranges(tables):  # noqa: F811 (the fixture)
    """README's results paragraph: the int4 prefill range over its eight Llama-3 layers, as the table picks."""
    text = " ".join((ROOT / "README.md").read_text().split())
    m = re.search(r"decode serves M up to (\d+) or (\d+) by layer and the prefill path from M = (\d+)-(\d+) "
                  r"up to (\d+); the dense tier takes M = (\d+) and above \(int4", text)
    assert m, "README.md's dispatch sentence is missing or reworded: keep it checkable"
    dec_lo, dec_hi, pre_lo, pre_hi, pre_last, dense = (int(v) for v in m.groups())
    firsts, lasts, dense_from = set(), set(), set()
    llama = [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096),  # the README table's layers
             (8192, 10240), (8192, 8192), (8192, 57344), (28672, 8192)]
    for K, N in llama:
        paths = tables.choose_many([(SM90, H200_SMS, M, K, N, 4, False, True, True, True) for M in range(1, 20000)])
        firsts.add(paths.index(PATHS["prefill"]) + 1)
        lasts.add(len(paths) - paths[::-1].index(PATHS["prefill"]))
        dense_from.add(paths.index(PATHS["dense"]) + 1)
    assert (min(firsts), max(firsts)) == (pre_lo, pre_hi) == (dec_lo + 1, dec_hi + 1)
    assert lasts == {pre_last} and dense_from == {dense} == {pre_last + 1}
