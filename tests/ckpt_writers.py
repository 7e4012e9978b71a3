"""Write small quantized Hugging Face checkpoints (GPTQ, AWQ, compressed-tensors) for the tests.

Round-to-nearest quantization of float weights, packed the way each
quantizer's own code lays its tensors out (written here from the formats'
definitions, not with swordfish_backend's packers, so the loaders are tested
against an outside writer):

* GPTQ (AutoGPTQ / GPTQModel, checkpoint_format gptq): qweight int32
  (K * bits / 32, N), value i of a word in bits [i * bits, (i + 1) * bits)
  packed along K; qzeros int32 (G, N * bits / 32) holding zero - 1 packed along
  N; scales (G, N) fp16; g_idx int32 (K).
* AWQ GEMM: qweight int32 (K, N / 8), column 8c + (0, 2, 4, 6, 1, 3, 5, 7)[i]
  in nibble i of word c; qzeros (G, N / 8) the same way; scales (G, N) fp16.
* compressed-tensors pack-quantized: weight_packed int32 (N, K * bits / 32)
  holding q + 2^(bits-1) (q signed) packed along K; weight_scale (N, G);
  weight_shape int64 [N, K]; weight_zero_point int32 (N * bits / 32, G) packed
  along N (asymmetric); weight_g_idx int32 (K).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def _words(codes: torch.Tensor, bits: int, dim: int) -> torch.Tensor:
    """Unsigned codes packed LSB-first along `dim` into int32 words."""
    vpw = 32 // bits
    c = codes.to(torch.int64)
    if dim == 0:
        c = c.reshape(c.shape[0] // vpw, vpw, c.shape[1])
        w = sum(c[:, i, :] << (i * bits) for i in range(vpw))
    else:
        c = c.reshape(c.shape[0], c.shape[1] // vpw, vpw)
        w = sum(c[:, :, i] << (i * bits) for i in range(vpw))
    return torch.where(w >= 2**31, w - 2**32, w).to(torch.int32)


def _awq_words(codes: torch.Tensor) -> torch.Tensor:
    c = codes.to(torch.int64).reshape(codes.shape[0], codes.shape[1] // 8, 8)
    w = sum(c[:, :, col] << (4 * i) for i, col in enumerate(AWQ_ORDER))
    return torch.where(w >= 2**31, w - 2**32, w).to(torch.int32)


def rtn(weight: torch.Tensor, bits: int, group: int, sym: bool = True, g_idx: torch.Tensor | None = None):
    """Round to nearest. weight (N, K) float -> (codes (K, N) unsigned, scales (G, N) fp32, zeros (G, N) unsigned,
    g_idx (K) int64): W[n, k] ~ (codes[k, n] - zeros[g, n]) * scales[g, n], g = g_idx[k]."""
    N, K = weight.shape
    w = weight.t().to(torch.float32)                                   # (K, N)
    if g_idx is None:
        g_idx = torch.zeros(K, dtype=torch.int64) if group == -1 else torch.arange(K) // group
    G = int(g_idx.max()) + 1
    scales = torch.empty(G, N)
    zeros = torch.empty(G, N, dtype=torch.int64)
    qmax = (1 << bits) - 1
    for g in range(G):
        rows = w[g_idx == g]
        if sym:
            s = rows.abs().amax(0).clamp_min(1e-8) / ((1 << (bits - 1)) - 0.5)
            z = torch.full((N,), 1 << (bits - 1), dtype=torch.int64)
        else:
            lo, hi = rows.amin(0).clamp(max=0), rows.amax(0).clamp(min=0)
            s = ((hi - lo) / qmax).clamp_min(1e-8)
            z = torch.round(-lo / s).clamp(0, qmax).to(torch.int64)
        scales[g], zeros[g] = s, z
    sk = scales.to(torch.float16).to(torch.float32)[g_idx]
    codes = torch.round(w / sk + zeros[g_idx]).clamp(0, qmax).to(torch.int64)
    return codes, scales.to(torch.float16), zeros, g_idx


def _act_order_g_idx(K: int, group: int, seed: int) -> torch.Tensor:
    """A seeded act-order g_idx: the rows of each group scattered over K."""
    perm = torch.randperm(K, generator=torch.Generator().manual_seed(seed))
    g_idx = torch.empty(K, dtype=torch.int64)
    g_idx[perm] = torch.arange(K) // group
    return g_idx


def gptq_tensors(prefix: str, weight, bits=4, group=128, act_order=False, sym=True, seed=0) -> dict:
    N, K = weight.shape
    g_idx = _act_order_g_idx(K, group, seed) if act_order else None
    codes, scales, zeros, g_idx = rtn(weight, bits, group, sym, g_idx)
    return {f"{prefix}.qweight": _words(codes, bits, 0),
            f"{prefix}.qzeros": _words((zeros - 1) & ((1 << bits) - 1), bits, 1),
            f"{prefix}.scales": scales, f"{prefix}.g_idx": g_idx.to(torch.int32)}


def awq_tensors(prefix: str, weight, group=128) -> dict:
    codes, scales, zeros, _ = rtn(weight, 4, group, sym=False)
    return {f"{prefix}.qweight": _awq_words(codes), f"{prefix}.qzeros": _awq_words(zeros),
            f"{prefix}.scales": scales}


def ct_tensors(prefix: str, weight, bits=4, group=128, sym=True, act_order=False, dtype=torch.bfloat16,
               seed=0) -> dict:
    N, K = weight.shape
    g_idx = _act_order_g_idx(K, group, seed) if act_order else None
    codes, scales, zeros, g_idx = rtn(weight, bits, group, sym, g_idx)
    out = {f"{prefix}.weight_packed": _words(codes.t().contiguous(), bits, 1),   # codes already q + 2^(b-1)
           f"{prefix}.weight_scale": scales.to(dtype).t().contiguous(),
           f"{prefix}.weight_shape": torch.tensor([N, K], dtype=torch.int64)}
    if not sym:
        out[f"{prefix}.weight_zero_point"] = _words(zeros.t().contiguous(), bits, 0)  # (N * bits / 32, G)
    if act_order:
        out[f"{prefix}.weight_g_idx"] = g_idx.to(torch.int32)
    return out


# ------------------------------------------------------------------ configs


def gptq_config(bits=4, group=128, desc_act=False, sym=True) -> dict:
    return {"quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": desc_act, "sym": sym,
            "checkpoint_format": "gptq"}


def awq_config(group=128) -> dict:
    return {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True, "version": "gemm"}


def ct_config(bits=4, group=128, sym=True, strategy="group", actorder=None, ignore=("lm_head",)) -> dict:
    weights = {"num_bits": bits, "type": "int", "symmetric": sym, "strategy": strategy,
               "group_size": group if strategy == "group" else None, "actorder": actorder, "dynamic": False}
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": None,
                                          "format": "pack-quantized"}},
            "ignore": list(ignore)}


def quantize(method: str, prefix: str, weight, **kw) -> dict:
    if method == "gptq":
        return gptq_tensors(prefix, weight, **kw)
    if method == "awq":
        return awq_tensors(prefix, weight, **{k: v for k, v in kw.items() if k == "group"})
    return ct_tensors(prefix, weight, **kw)


# ------------------------------------------------------------------ writing


def write(root, config: dict, tensors: dict, shards: int = 1) -> Path:
    """config.json + safetensors shards (+ model.safetensors.index.json when shards > 1)."""
    from safetensors.torch import save_file

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(config, indent=1))
    names = sorted(tensors)
    if shards == 1:
        save_file({k: tensors[k].contiguous() for k in names}, str(root / "model.safetensors"))
        return root
    weight_map = {}
    per = -(-len(names) // shards)
    for i in range(shards):
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = names[i * per:(i + 1) * per]
        save_file({k: tensors[k].contiguous() for k in part}, str(root / fname))
        weight_map.update({k: fname for k in part})
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return root


HIDDEN, INTER, KV = 128, 256, 64
DENSE = {"self_attn.q_proj": (HIDDEN, HIDDEN), "self_attn.k_proj": (HIDDEN, KV), "self_attn.v_proj": (HIDDEN, KV),
         "self_attn.o_proj": (HIDDEN, HIDDEN), "mlp.gate_proj": (HIDDEN, INTER), "mlp.up_proj": (HIDDEN, INTER),
         "mlp.down_proj": (INTER, HIDDEN)}
EXPERT = {"gate_proj": (HIDDEN, INTER), "up_proj": (HIDDEN, INTER), "down_proj": (INTER, HIDDEN)}


def tiny_model(root, method: str, *, layers=2, experts=0, shards=1, odd_layer=False, dtype="bfloat16",
               quant_config: dict | None = None, seed=0, **kw) -> Path:
    """A Llama-like checkpoint: `layers` decoder layers (q/k/v/o and gate/up/down, hidden 128), embed_tokens and
    lm_head left in float; with `experts`, layer 0's MLP is replaced by that many experts
    (model.layers.0.mlp.experts.E.{gate,up,down}_proj); `odd_layer` adds model.extra_proj with N = 96 (not a
    multiple of 64: Swordfish cannot serve it)."""
    gen = torch.Generator().manual_seed(seed)
    tensors = {"model.embed_tokens.weight": torch.randn(256, HIDDEN, generator=gen).to(torch.bfloat16),
               "lm_head.weight": torch.randn(256, HIDDEN, generator=gen).to(torch.bfloat16)}

    def add(prefix, K, N):
        w = torch.randn(N, K, generator=gen) * 0.05
        tensors.update(quantize(method, prefix, w, **kw))

    for i in range(layers):
        for name, (K, N) in DENSE.items():
            if experts and i == 0 and name.startswith("mlp."):
                continue
            add(f"model.layers.{i}.{name}", K, N)
        tensors[f"model.layers.{i}.input_layernorm.weight"] = torch.ones(HIDDEN, dtype=torch.bfloat16)
    for e in range(experts):
        for name, (K, N) in EXPERT.items():
            add(f"model.layers.0.mlp.experts.{e}.{name}", K, N)
    if odd_layer:
        add("model.extra_proj", HIDDEN, 96)
    if quant_config is None:
        bits, group = kw.get("bits", 4), kw.get("group", 128)
        if method == "gptq":
            quant_config = gptq_config(bits, group, desc_act=kw.get("act_order", False), sym=kw.get("sym", True))
        elif method == "awq":
            quant_config = awq_config(group)
        else:
            quant_config = ct_config(bits, group if group != -1 else None, sym=kw.get("sym", True),
                                     strategy="channel" if group == -1 else "group",
                                     actorder="group" if kw.get("act_order") else None)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
              "intermediate_size": INTER, "num_hidden_layers": layers, "torch_dtype": dtype,
              "quantization_config": quant_config}
    return write(root, config, tensors, shards=shards)
