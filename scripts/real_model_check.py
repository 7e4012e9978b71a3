"""The real-model check on the GPU: every checkpoint of a pack through `swordfish check --checkpoint` and through
transformers with Swordfish in every quantized linear layer.

    python scripts/real_model_check.py .ckpt-pack-1 [--out $OUT/real_model.md]

The pack comes from scripts/make_real_model_pack.py. Per checkpoint, one table row:
  check      layers passed / checked by check_checkpoint (the kernels' auto path at M = 1, 16, 256, 2048 against
             the fp32 reference, and each layer's dequantization against the checkpoint's own tensors), the worst
             error / tolerance, and the paths the dispatcher took;
  cos(deq)   the lowest cosine similarity over the sentences between the embeddings of the model run through
             Swordfish and of the same model with the dequantized weights in nn.Linear (cuBLAS), with the largest
             absolute difference of an embedding element;
  cos(fp32)  the lowest cosine similarity against the original fp32 model (what quantization costs).
Pass: check has no failure, cos(deq) >= 0.999. Exit 0 when every row passes, 1 otherwise. Without a GPU it runs
the CPU reference path and says so (kernels not run).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402

import real_model as rm  # noqa: E402
from swordfish_backend import check_checkpoint, checkpoint_scan, cli  # noqa: E402

COS_MIN = 0.999


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pack", type=Path)
    p.add_argument("--out", type=Path, help="also write the table (markdown) here, and the rows as JSON beside it")
    p.add_argument("--m", default="1,16,256,2048")
    args = p.parse_args()
    gpu, why = cli.gpu_status(0)
    device = "cuda" if gpu else "cpu"
    ms = [int(m) for m in args.m.split(",")] if gpu else [1]
    ids, mask, original, extra = rm.pack_inputs(args.pack)
    where = f"{torch.cuda.get_device_name(0)}, kernels" if gpu else f"CPU reference path ({why}); KERNELS NOT RUN"
    rows = []
    for ck_dir in rm.pack_checkpoints(args.pack):
        ck = checkpoint_scan.scan(ck_dir)
        results = check_checkpoint.run(ck, ms, gpu=gpu)
        counts = check_checkpoint.summarize(results)
        errs = [r.err for r in results if r.err is not None]
        paths = sorted({p for r in results for p in r.paths.values()})
        emb = rm.compare(ck_dir, ids, mask, device=device, original=original, extra=extra)
        ok = counts["FAIL"] == 0 and counts["ok"] > 0 and emb["cos_min"] >= COS_MIN
        rows.append(dict(emb, check=f"{counts['ok']}/{counts['ok'] + counts['FAIL']}", worst=max(errs, default=None),
                         paths=",".join(paths), verdict="pass" if ok else "FAIL",
                         failed=[r.name for r in results if r.status == "FAIL"]))
        print(f"{ck_dir.name}: {rows[-1]['verdict']}", file=sys.stderr, flush=True)
    lines = [f"real-model check: all-MiniLM-L6-v2, {len(rm.SENTENCES)} sentences, {where}; check at M = "
             f"{', '.join(map(str, ms))}", "",
             "| checkpoint | format | check | worst err/tol | paths | cos(deq) min | max abs | cos(fp32) min | |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        worst = "-" if r["worst"] is None else f"{r['worst']:.3f}"
        lines.append(f"| {r['checkpoint']} | {r['format']} | {r['check']} | {worst} | {r['paths']} | "
                     f"{r['cos_min']:.6f} | {r['max_abs']:.2e} | {r['cos_vs_fp32_min']:.4f} | {r['verdict']} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
        args.out.with_suffix(".json").write_text(json.dumps({"gpu": gpu, "device": where, "m": ms, "rows": rows},
                                                            indent=1) + "\n")
    return 0 if rows and all(r["verdict"] == "pass" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
