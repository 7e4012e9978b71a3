"""Run a real model from a quantized checkpoint through Swordfish (transformers, no vLLM).

    ck = checkpoint_scan.scan(DIR)
    model, _ = build_model(ck, device="cuda", mode="swordfish")   # every quantized nn.Linear -> SwordfishLinear
    ref, _ = build_model(ck, device="cuda", mode="dequantized")   # the same weights, dequantized, in nn.Linear

``SwordfishLinear`` runs ``sf.matmul`` on the layer's ``QuantizedWeight``
(built by ``QuantizedWeight.from_*`` from the checkpoint's own tensors): the
kernels on CUDA, the fp32 reference path on CPU. ``mode="dequantized"`` puts
``w.dequantize()`` (the activation dtype, one rounding) in a plain
``nn.Linear``: the model a user would get from the dequantized bf16 weights,
the comparison the real-model check makes. Every other tensor of the
checkpoint (embeddings, norms, biases, layers left in float) is loaded as is.
transformers is imported only by ``build_model``.
"""

from __future__ import annotations

import torch

from . import checkpoint_scan as scan
from .weight import QuantizedWeight, matmul


class SwordfishLinear(torch.nn.Module):
    """nn.Linear's forward through sf.matmul on a QuantizedWeight."""

    def __init__(self, weight: QuantizedWeight, bias: torch.Tensor | None = None):
        super().__init__()
        self.qweight = weight
        self.in_features, self.out_features = weight.in_features, weight.out_features
        self.register_buffer("bias", bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = matmul(x.to(self.qweight.dtype), self.qweight, self.bias)
        return y.to(x.dtype)

    def extra_repr(self) -> str:
        return repr(self.qweight)


def load_weights(ck, *, device, dtype) -> dict:
    """{layer name: (QuantizedWeight, bias or None)} for every quantized dense layer of `ck`, through our loaders.

    A layer Swordfish cannot serve, or MoE experts, raise ValueError naming them (this runs dense models only).
    """
    if ck.expert_groups:
        raise ValueError(f"{ck.path}: MoE experts ({ck.expert_groups[0].name}, ...) are not run by this module")
    refused = [f"{layer.name}: {layer.reason}" for layer in ck.layers if not layer.served]
    if refused:
        raise ValueError(f"{ck.path}: {len(refused)} layer(s) Swordfish cannot serve: {refused[0]}")
    out = {}
    for layer in ck.layers:
        w, bias, _ = scan.load_weight(ck, layer, dtype, device=device)
        out[layer.name] = (w, bias)
    return out


def replace_linears(model: torch.nn.Module, weights: dict, *, mode: str = "swordfish") -> list[str]:
    """Put each layer of `weights` (load_weights) into `model` (modules found by name); returns their names.

    mode "swordfish": SwordfishLinear; "dequantized": nn.Linear holding w.dequantize().
    """
    if mode not in ("swordfish", "dequantized"):
        raise ValueError(f"mode must be 'swordfish' or 'dequantized', got {mode!r}")
    done = []
    for name, (w, bias) in weights.items():
        K, N = w.in_features, w.out_features
        if mode == "swordfish":
            module = SwordfishLinear(w, bias)
        else:
            module = torch.nn.Linear(K, N, bias=bias is not None, device=w.device, dtype=w.dtype)
            with torch.no_grad():
                module.weight.copy_(w.dequantize())
                if bias is not None:
                    module.bias.copy_(bias)
        parent_name, _, leaf = name.rpartition(".")
        try:
            parent = model.get_submodule(parent_name)
        except AttributeError:
            raise ValueError(f"the model has no module {parent_name!r} for checkpoint layer {name}") from None
        old = getattr(parent, leaf, None)
        if not isinstance(old, torch.nn.Linear) or (old.in_features, old.out_features) != (K, N):
            raise ValueError(f"{name}: the model's module is {old!r}, expected nn.Linear({K}, {N})")
        setattr(parent, leaf, module)
        done.append(name)
    return done


def float_tensors(ck) -> list[str]:
    """Names of the checkpoint's tensors that are not part of a quantized layer (embeddings, norms, ...)."""
    taken = set()
    for layer in ck.layers:
        taken.update(layer.tensors.values())
    for g in ck.expert_groups:
        for e in g.experts:
            taken.update(e.tensors.values())
    return sorted(n for n in ck.headers if n not in taken)


def load_float_tensors(model: torch.nn.Module, ck, *, device, dtype, extra: dict | None = None) -> list[str]:
    """Copy the checkpoint's float tensors (and `extra`, name -> tensor) into the model's parameters and buffers.
    Returns the model's float entries that got nothing (the caller decides whether that matters)."""
    state = model.state_dict()
    given = {}
    for name in float_tensors(ck):
        if name in state:
            given[name] = ck.read(name)
    given.update(extra or {})
    with torch.no_grad():
        for name, t in given.items():
            if name not in state:
                continue
            target = state[name]
            if tuple(target.shape) != tuple(t.shape):
                raise ValueError(f"{name}: checkpoint shape {tuple(t.shape)} != model shape {tuple(target.shape)}")
            target.copy_(t.to(device=target.device, dtype=target.dtype))
    quantized = {t for layer in ck.layers for t in layer.tensors.values()}  # loaded by replace_linears
    return sorted(n for n, v in state.items() if n not in given and n not in quantized and v.is_floating_point())


def build_model(ck, *, device="cpu", mode: str = "swordfish", dtype=None, extra: dict | None = None,
                weights: dict | None = None):
    """The transformers model of ck.config (AutoModel.from_config), its quantized layers through Swordfish (or
    dequantized), its float tensors from the checkpoint, in eval mode. `weights` (load_weights) saves loading
    the layers again. Returns (model, [the model's float tensors the checkpoint left unset])."""
    from transformers import AutoConfig, AutoModel

    dtype = dtype or scan.torch_dtype(ck.act_dtype)
    cfg = {k: v for k, v in ck.config.items() if k not in ("quantization_config", "compression_config")}
    config = AutoConfig.for_model(**cfg)
    model = AutoModel.from_config(config, dtype=dtype).to(device).eval()
    if weights is None:
        weights = load_weights(ck, device=device, dtype=dtype)
    replace_linears(model, weights, mode=mode)
    unset = load_float_tensors(model, ck, device=device, dtype=dtype, extra=extra)
    return model, unset


def mean_pooled(model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Sentence embeddings the sentence-transformers way: mean of the last hidden states over real tokens,
    L2-normalised; fp32."""
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state.float()
    mask = attention_mask.unsqueeze(-1).float()
    emb = (out * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
    return torch.nn.functional.normalize(emb, dim=-1)
