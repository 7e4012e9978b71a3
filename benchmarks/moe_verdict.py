"""Judge a `swordfish bench --moe` run: the MoE table's choice and issue #39's targets, without a GPU.

Reads a swordfish-bench-moe JSON (`swordfish bench --moe [--peers] --json F`), which times `auto`,
each MoE path forced, the bf16 torch MoE, the roofline and (with --peers) vLLM's Marlin MoE at
each (model, T). Prints, per model and T: the average routed tokens per expert (T k / E), each
implementation's time, what auto chose and its time over the fastest path's; then

* the dispatcher: auto within 3% of the fastest Swordfish path, points met;
* the crossovers per model: the smallest measured average from which the dense (and the grouped)
  path is at least as fast as the fused one at every larger T, beside the table's
  dense_min_avg_tokens and grouped_min_avg_tokens (read from kernels/dispatch/moe_sm90.hpp, or
  --table);
* issue #39's targets at each T: auto >= 1.2x Marlin MoE or >= 90% of the roofline (the lower
  bar), never slower than Marlin MoE; >= 2x Marlin MoE at T = 1 on fine-grained models (E >= 60);
  from T = 1024, within 10% of the bf16 grouped GEMM (torch) or faster.

    python benchmarks/moe_verdict.py bench_moe.json
    python benchmarks/moe_verdict.py --table kernels/dispatch/moe_sm100.hpp bench_moe.json
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swordfish_backend import bench_moe  # noqa: E402

TABLE = ROOT / "kernels" / "dispatch" / "moe_sm90.hpp"
NON_PATHS = ("auto", "torch", "roofline", "marlin_moe")
AUTO_SLACK = 1.03     # auto within 3% of the fastest path
PEER_GAIN = 1.2       # >= 1.2x Marlin MoE ...
ROOF_PCT = 90.0       # ... or >= 90% of the roofline, whichever is the lower bar
BATCH1_GAIN = 2.0     # fine-grained models at T = 1
FINE_GRAINED_E = 60
LARGE_T = 1024        # from here: within 10% of the bf16 grouped GEMM
LARGE_SLACK = 1.10


def table_value(path: pathlib.Path, name: str = "dense_min_avg_tokens") -> int | None:
    """The table's `/*name=*/value` (None for kNever or when absent)."""
    m = re.search(rf"/\*{name}=\*/\s*([A-Za-z0-9_]+)", path.read_text())
    if m is None or not m.group(1).isdigit():
        return None
    return int(m.group(1))


def points(doc: dict) -> dict:
    """{(model, T): {impl: row}} of the ok rows, and the model's (E, top_k) beside each key."""
    out: dict = {}
    for r in doc["rows"]:
        if r["status"] == "ok" and r["us"] is not None:
            out.setdefault((r["model"], r["T"]), {})[r["impl"]] = r
    return out


def crossover(avgs_fused_dense: list) -> float | None:
    """The smallest average from which dense <= fused at that and every larger measured average."""
    best = None
    for avg, fused, dense in sorted(avgs_fused_dense, reverse=True):
        if dense > fused:
            break
        best = avg
    return best


def judge(doc: dict, table: pathlib.Path) -> list[str]:
    lines = []
    pts = points(doc)
    models = list(dict.fromkeys(m for m, _ in pts))
    auto_ok = auto_n = 0
    target_ok = target_n = 0
    misses = []
    lines.append(f"bench --moe run of {doc.get('commit')} on {doc['device'].get('name', '?')}; "
                 f"table {table.relative_to(ROOT) if table.is_relative_to(ROOT) else table}")
    for model in models:
        Ts = sorted(T for m, T in pts if m == model)
        any_row = next(iter(pts[(model, Ts[0])].values()))
        E, k = any_row["E"], any_row["top_k"]
        paths = sorted({i for T in Ts for i in pts[(model, T)] if i not in NON_PATHS})
        lines.append("")
        lines.append(f"{model}: E {E}, top-{k}, H {any_row['H']}, I {any_row['I']}")
        head = f"{'T':>6} {'avg':>7}  " + "".join(f"{p:>9}" for p in paths)
        head += f"{'auto':>9} {'chose':<6}{'/best':>6}{'torch':>9}{'marlin':>9}{'xmarlin':>8}{'%roof':>6}"
        lines.append(head)
        cross = {"dense": [], "grouped": []}
        for T in Ts:
            row = pts[(model, T)]
            avg = T * k / E
            us = {p: row[p]["us"] for p in paths if p in row}
            auto = row.get("auto")
            best = min(us.values()) if us else None
            line = f"{T:>6} {avg:>7.2f}  " + "".join(f"{us[p]:>9.1f}" if p in us else f"{'-':>9}" for p in paths)
            ratio = None
            if auto is not None and best:
                ratio = auto["us"] / best
                auto_n += 1
                auto_ok += ratio <= AUTO_SLACK
            torch_us = row["torch"]["us"] if "torch" in row else None
            marlin_us = row["marlin_moe"]["us"] if "marlin_moe" in row else None
            xm = None if auto is None or marlin_us is None else marlin_us / auto["us"]
            line += (f"{auto['us']:>9.1f} {auto['path'] or '?':<6}{ratio:>6.2f}" if auto is not None and ratio
                     else f"{'-':>9} {'-':<6}{'-':>6}")
            line += f"{torch_us:>9.1f}" if torch_us is not None else f"{'-':>9}"
            line += f"{marlin_us:>9.1f}" if marlin_us is not None else f"{'-':>9}"
            line += f"{xm:>8.2f}" if xm is not None else f"{'-':>8}"
            pct = auto.get("pct_roofline") if auto is not None else None
            line += f"{pct:>6.0f}" if pct is not None else f"{'-':>6}"
            lines.append(line)
            for other in cross:
                if "fused" in us and other in us:
                    cross[other].append((avg, us["fused"], us[other]))
            if auto is None:
                continue
            # issue #39's targets at this point
            checks = []
            if marlin_us is not None:
                bar = xm >= PEER_GAIN or (pct is not None and pct >= ROOF_PCT)
                checks.append(("1.2x Marlin MoE or 90% roofline", bar))
                checks.append(("never slower than Marlin MoE", xm >= 1.0))
                if T == 1 and E >= FINE_GRAINED_E:
                    checks.append(("2x Marlin MoE at batch 1", xm >= BATCH1_GAIN))
            if T >= LARGE_T and torch_us is not None:
                checks.append(("within 10% of the bf16 grouped GEMM", auto["us"] <= LARGE_SLACK * torch_us))
            for what, ok in checks:
                target_n += 1
                target_ok += ok
                if not ok:
                    misses.append(f"{model} T={T}: {what} (auto {auto['us']:.1f} us"
                                  + (f", Marlin MoE {marlin_us:.1f}" if marlin_us is not None else "")
                                  + (f", torch {torch_us:.1f}" if torch_us is not None else "")
                                  + (f", {pct:.0f}% roofline" if pct is not None else "") + ")")
        for other, pairs in cross.items():
            c = crossover(pairs)
            if c is not None:
                lines.append(f"  {other} at least as fast as fused from avg {c:.2f} tokens per expert")
            elif pairs:
                lines.append(f"  {other} never at least as fast as fused at the largest measured T")
            elif other == "dense":
                lines.append("  dense / fused not both measured")
    lines.append("")
    lines.append(f"table dense_min_avg_tokens = {table_value(table)}, "
                 f"grouped_min_avg_tokens = {table_value(table, 'grouped_min_avg_tokens')}")
    lines.append(f"auto within 3% of the fastest path: {auto_ok}/{auto_n} points")
    if target_n:
        lines.append(f"issue #39 targets met: {target_ok}/{target_n} checks")
        lines.extend(f"  short: {m}" for m in misses)
    else:
        lines.append("issue #39 targets: not judged (no Marlin MoE or torch rows: run with --peers)")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="+", help="swordfish-bench-moe result(s)")
    ap.add_argument("--table", type=pathlib.Path, default=TABLE, help="MoE table header (default: moe_sm90.hpp)")
    args = ap.parse_args(argv)
    for i, path in enumerate(args.json):
        try:
            doc = bench_moe.load_json(path)
        except (OSError, ValueError) as e:
            print(f"moe_verdict: {path}: {e}", file=sys.stderr)
            return 2
        if i:
            print()
        print("\n".join(judge(doc, args.table.resolve())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
