#!/usr/bin/env python3
"""Summarise where a kernel's warps stall, per SASS instruction, from an ncu
source-page export (no GPU needed):

    ncu --set full --import-source no -k regex:gemm_kernel -c 1 -o prof <command>
    ncu -i prof.ncu-rep --page source --csv --print-source sass > prof_sass.csv
    python benchmarks/ncu_stalls.py prof_sass.csv [--top 30]

Prints the stall reasons over all samples, then the instructions holding the
most samples with their top reasons, and the mbarrier waits (a TRYWAIT and
the branch that spins on it) with the share of samples spent in each, which
is what tells a load-bound pipeline (consumers at the "full" waits) from a
compute-bound one (producers at the "empty" waits, consumers at wgmma waits).
With the source counters in the export, it also lists the instructions whose
shared-memory accesses took more wavefronts than ideal (bank conflicts).
"""
import argparse
import csv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="ncu --page source --csv --print-source sass output")
    ap.add_argument("--top", type=int, default=30, help="instructions to list (default 30)")
    a = ap.parse_args()
    rows = list(csv.reader(open(a.csv, newline="")))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    hdr, data = rows[head], [r for r in rows[head + 1:] if len(r) == len(rows[head])]
    ix = {h: i for i, h in enumerate(hdr)}
    samples = lambda r: int(r[ix["Warp Stall Sampling (All Samples)"]] or 0)
    src = lambda r: r[ix["Source"]].strip()
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(samples(r) for r in data) or 1
    print(f"{rows[0][1] if len(rows[0]) > 1 else ''}\n{total} stall samples over {len(data)} instructions\n")
    by_reason = {h: sum(int(r[ix[h]] or 0) for r in data) for h in reasons}
    for h, v in sorted(by_reason.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {h[6:]:20s} {100 * v / total:5.1f}%")
    print(f"\ntop {a.top} instructions (index, share of samples, SASS, top reasons):")
    top = sorted(range(len(data)), key=lambda i: -samples(data[i]))[: a.top]
    for i in sorted(top):
        r = data[i]
        why = sorted(((int(r[ix[h]] or 0), h[6:]) for h in reasons), reverse=True)[:3]
        print(f"  {i:5d} {100 * samples(r) / total:5.1f}%  {src(r)[:64]:64s} " + " ".join(f"{h}:{v}" for v, h in why if v))
    excess_col = "L1 Wavefronts Shared Excessive"
    if excess_col in ix:
        ideal_col = "L1 Wavefronts Shared Ideal"
        hot = [(int(r[ix[excess_col]] or 0), i) for i, r in enumerate(data)]
        hot = sorted((e, i) for e, i in hot if e > 0)[::-1]
        total_excess = sum(e for e, _ in hot)
        print(f"\nshared-memory wavefronts beyond the ideal (bank conflicts): {total_excess} in {len(hot)} instructions")
        for e, i in hot[: a.top]:
            r = data[i]
            ideal = r[ix[ideal_col]] if ideal_col in ix else "?"
            print(f"  {i:5d} excess {e:10d} ideal {ideal:>10s}  {src(r)[:70]}")
    print("\nmbarrier waits (TRYWAIT + its spin branch):")
    for i in range(1, len(data)):
        if "TRYWAIT" in src(data[i - 1]) and "BRA" in src(data[i]):
            s = samples(data[i - 1]) + samples(data[i])
            if s:
                print(f"  {i - 1:5d} {100 * s / total:5.1f}%  {src(data[i - 1])[:70]}  (executed {data[i][ix['Instructions Executed']]})")


if __name__ == "__main__":
    main()
