"""Layer shapes of the models `swordfish bench` knows by name, and the parsers for
``--shapes`` and ``--m``.

A layer is one GEMM ``y[M, N] = x[M, K] @ W^T``: K = in_features, N =
out_features, as vLLM runs it without tensor parallelism (q, k and v fused
into one qkv projection; gate and up fused into one gate_up projection).

The dimensions come from each model's published ``config.json``:

    model          hidden  intermediate  heads  kv heads  head dim  notes
    llama-3-8b       4096         14336     32         8       128
    llama-3-70b      8192         28672     64         8       128
    qwen-2.5-7b      3584         18944     28         4       128  qkv has a bias (not timed)
    qwen-2.5-72b     8192         29568     64         8       128  qkv has a bias (not timed)
    mixtral-8x7b     4096         14336     32         8       128  8 experts, top-2

    qkv:     K = hidden,        N = (heads + 2 * kv heads) * head dim
    o:       K = heads * head dim, N = hidden
    gate_up: K = hidden,        N = 2 * intermediate
    down:    K = intermediate,  N = hidden

mixtral-8x7b lists only its experts' two GEMMs (one expert's weight; M is the
number of tokens routed to that expert, about 2 * tokens / 8).

MoE layers (``swordfish bench --moe``, ``MOE_PRESETS``): routed experts only
(the shared experts of Qwen1.5-MoE and DeepSeek-V2-Lite are dense MLPs),
from each model's ``config.json``:

    model               experts  top-k  hidden  expert intermediate  top-k weights renormalised
    mixtral-8x7b              8      2    4096                14336  yes
    qwen1.5-moe-a2.7b        60      4    2048                 1408  no (norm_topk_prob false)
    qwen3-30b-a3b           128      8    2048                  768  yes
    deepseek-v2-lite         64      6    2048                 1408  no (norm_topk_prob false)

    w13 (gate_up): K = hidden, N = 2 * intermediate;  w2 (down): K = intermediate, N = hidden
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PRESET = "llama-3-8b"
DEFAULT_M = (1, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
MAX_M = 1 << 20


@dataclass(frozen=True)
class Layer:
    """One GEMM of a model: K = in_features, N = out_features."""

    name: str
    K: int
    N: int


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    layers: tuple[Layer, ...]


def _decoder(hidden: int, intermediate: int, heads: int, kv_heads: int, head_dim: int = 128) -> tuple[Layer, ...]:
    return (
        Layer("qkv", hidden, (heads + 2 * kv_heads) * head_dim),
        Layer("o", heads * head_dim, hidden),
        Layer("gate_up", hidden, 2 * intermediate),
        Layer("down", intermediate, hidden),
    )


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("llama-3-8b", "Llama 3 8B (hidden 4096, intermediate 14336, 32 heads, 8 kv heads)",
               _decoder(4096, 14336, 32, 8)),
        Preset("llama-3-70b", "Llama 3 70B (hidden 8192, intermediate 28672, 64 heads, 8 kv heads)",
               _decoder(8192, 28672, 64, 8)),
        Preset("qwen-2.5-7b", "Qwen2.5 7B (hidden 3584, intermediate 18944, 28 heads, 4 kv heads)",
               _decoder(3584, 18944, 28, 4)),
        Preset("qwen-2.5-72b", "Qwen2.5 72B (hidden 8192, intermediate 29568, 64 heads, 8 kv heads)",
               _decoder(8192, 29568, 64, 8)),
        Preset("mixtral-8x7b", "Mixtral 8x7B experts (hidden 4096, expert intermediate 14336; M = tokens per expert)",
               (Layer("expert_gate_up", 4096, 2 * 14336), Layer("expert_down", 14336, 4096))),
    )
}


@dataclass(frozen=True)
class MoEPreset:
    """One MoE layer: E routed experts, top-k routing, H = hidden, I = expert intermediate size."""

    name: str
    description: str
    E: int
    top_k: int
    H: int
    I: int  # noqa: E741
    renormalize: bool  # top-k weights divided by their sum (the model's norm_topk_prob)

    @property
    def layers(self) -> tuple[Layer, ...]:
        """The two GEMMs of one expert."""
        return (Layer("w13", self.H, 2 * self.I), Layer("w2", self.I, self.H))


MOE_PRESETS: dict[str, MoEPreset] = {
    p.name: p
    for p in (
        MoEPreset("mixtral-8x7b", "Mixtral 8x7B MoE layer (8 experts, top-2, hidden 4096, intermediate 14336)",
                  8, 2, 4096, 14336, True),
        MoEPreset("qwen1.5-moe-a2.7b", "Qwen1.5-MoE-A2.7B routed experts (60, top-4, hidden 2048, intermediate 1408)",
                  60, 4, 2048, 1408, False),
        MoEPreset("qwen3-30b-a3b", "Qwen3-30B-A3B MoE layer (128 experts, top-8, hidden 2048, intermediate 768)",
                  128, 8, 2048, 768, True),
        MoEPreset("deepseek-v2-lite", "DeepSeek-V2-Lite routed experts (64, top-6, hidden 2048, intermediate 1408)",
                  64, 6, 2048, 1408, False),
    )
}
DEFAULT_TOKENS = (1, 4, 16, 64, 256, 1024, 4096)


def moe_presets(names: str | None) -> list[MoEPreset]:
    """``"qwen3-30b-a3b"`` or ``"mixtral-8x7b,qwen3-30b-a3b"`` -> presets; None -> all of them."""
    if names is None:
        return list(MOE_PRESETS.values())
    out = []
    for name in (n.strip() for n in names.split(",")):
        if not name:
            continue
        if name not in MOE_PRESETS:
            raise ValueError(f"unknown MoE preset {name!r}; choose from {', '.join(MOE_PRESETS)}")
        if MOE_PRESETS[name] not in out:
            out.append(MOE_PRESETS[name])
    if not out:
        raise ValueError(f"no MoE preset named in {names!r}; choose from {', '.join(MOE_PRESETS)}")
    return out


def preset_layers(names: str) -> list[tuple[str, Layer]]:
    """``"llama-3-8b"`` or ``"llama-3-8b,qwen-2.5-7b"`` -> [(model, layer), ...]."""
    out = []
    for name in (n.strip() for n in names.split(",")):
        if not name:
            continue
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
        out.extend((name, layer) for layer in PRESETS[name].layers)
    if not out:
        raise ValueError(f"no preset named in {names!r}; choose from {', '.join(PRESETS)}")
    return out


def parse_shapes(text: str) -> list[Layer]:
    """``"4096,6144;14336,4096"`` -> layers named ``KxN``; each item is ``K,N`` (K = in_features)."""
    layers = []
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        parts = [p.strip() for p in item.split(",")]
        if len(parts) != 2:
            raise ValueError(f"--shapes item {item!r} must be K,N (two integers: in_features,out_features)")
        try:
            K, N = (int(p) for p in parts)
        except ValueError:
            raise ValueError(f"--shapes item {item!r} must be K,N with integer K and N") from None
        if K <= 0 or N <= 0:
            raise ValueError(f"--shapes item {item!r}: K and N must be positive")
        layers.append(Layer(f"{K}x{N}", K, N))
    if not layers:
        raise ValueError(f"--shapes {text!r} names no shape; write K,N;K,N")
    return layers


def parse_m(text: str, flag: str = "--m", what: str = "M") -> list[int]:
    """``"1,16,256"`` -> sorted, de-duplicated positive ints (errors name `flag` and `what` it lists)."""
    values = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            m = int(item)
        except ValueError:
            raise ValueError(f"{flag} value {item!r} is not an integer") from None
        if not 1 <= m <= MAX_M:
            raise ValueError(f"{flag} value {m} must lie in [1, {MAX_M}]")
        values.add(m)
    if not values:
        raise ValueError(f"{flag} {text!r} names no {what}; write e.g. 1,16,256")
    return sorted(values)


def check_layer(layer: Layer, bits: int, group: int) -> None:
    """ValueError unless the packed format can hold this layer at these bits and group."""
    from . import format as fmt

    try:
        fmt.check_shape(bits, layer.K, layer.N)
    except ValueError as e:
        raise ValueError(f"layer {layer.name} (K={layer.K}, N={layer.N}): {e}") from None
    if group != fmt.CHANNELWISE and layer.K % group:
        raise ValueError(f"layer {layer.name}: group {group} does not divide K = {layer.K}")
