"""Quantize a tiny Qwen2-MoE-shaped MoE block with GPTQModel's GPTQ and packers, on the CPU: MoE checkpoints made
by a real quantizer for `swordfish check --checkpoint` (and the vLLM MoE method's loaders) to read.

    HF_HUB_OFFLINE=1 /work/envs/gptqm/bin/python scripts/quantize_tiny_moe.py [--out /work/envs/ckpts]

One decoder layer's sparse MoE block (E = 8 experts, top-2, H = 256, I = 128, SiLU; random weights and a random
router), its experts as the per-expert nn.Linear modules Qwen2-MoE checkpoints name
(`model.layers.0.mlp.experts.<e>.{gate,up,down}_proj`). Calibration: 512 random tokens routed through the router;
every expert sees the tokens routed to it (gate / up their hidden states, down its SiLU(gate) * up), so the
GPTQ Hessians, act-order permutations and scales are the quantizer's own. Variants (scripts/
quantize_minilm_gptqmodel.py's, written to OUT/tiny-moe-<variant>/ with fp16 tensors and a config.json carrying
the MoE fields and quantization_config as GPTQModel writes it). Generated checkpoints stay out of git.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

E, TOP_K, H, I, TOKENS = 8, 2, 256, 128, 512  # noqa: E741


def tiny_moe(seed: int):
    """The MoE block as a torch module whose forward routes x [T, H] through the experts."""
    import torch
    import torch.nn.functional as F

    class Expert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = torch.nn.Linear(H, I, bias=False)
            self.up_proj = torch.nn.Linear(H, I, bias=False)
            self.down_proj = torch.nn.Linear(I, H, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = torch.nn.Linear(H, E, bias=False)
            self.experts = torch.nn.ModuleList(Expert() for _ in range(E))

        def forward(self, x):
            w, ids = torch.topk(torch.softmax(self.gate(x), dim=-1), TOP_K, dim=-1)
            y = torch.zeros_like(x)
            for e, expert in enumerate(self.experts):
                rows, slot = (ids == e).nonzero(as_tuple=True)
                if rows.numel():
                    y.index_add_(0, rows, expert(x[rows]) * w[rows, slot, None])
            return y

    torch.manual_seed(seed)
    block = Block().eval()
    for m in block.modules():
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.normal_(m.weight, std=m.in_features ** -0.5)
    return block


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="/work/envs/ckpts")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from safetensors.torch import save_file

    from quantize_minilm_gptqmodel import VARIANTS, packed_tensors, quantization_config, quantize

    torch.set_num_threads(2)
    for name, v in VARIANTS.items():
        out = Path(args.out) / f"tiny-moe-{name.removeprefix('gptqmodel-')}"
        if (out / "config.json").exists():
            print(f"{out}: exists, skipped")
            continue
        block = tiny_moe(args.seed)
        x = torch.randn(TOKENS, H, generator=torch.Generator().manual_seed(args.seed + 1))
        experts = torch.nn.ModuleDict({"experts": block.experts})  # quantize the experts, not the router
        packed = quantize(experts, lambda: block(x), v)
        prefix = "model.layers.0.mlp."
        tensors = {prefix + "gate.weight": block.gate.weight.detach().to(torch.float16)}
        tensors.update(packed_tensors(packed, prefix))
        q = quantization_config(v)
        config = {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": H,
                  "moe_intermediate_size": I, "num_experts": E, "num_experts_per_tok": TOP_K,
                  "num_hidden_layers": 1, "hidden_act": "silu", "norm_topk_prob": False,
                  "torch_dtype": "float16", "quantization_config": q}
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(config, indent=2))
        save_file({k: t.contiguous() for k, t in tensors.items()}, str(out / "model.safetensors"),
                  metadata={"format": "pt"})
        print(f"wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
