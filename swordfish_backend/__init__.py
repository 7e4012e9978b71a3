"""Swordfish: weight-only quantized GEMM kernels (int4/int8 weights, fp16/bf16 activations).

    import swordfish_backend as sf
    w = sf.QuantizedWeight.from_gptq(qweight, scales, bits=4, group_size=128).to("cuda")
    y = sf.matmul(x, w)

    w13 = sf.QuantizedExperts.from_gptq(qweight13, scales13, bits=4, group_size=128).to("cuda")
    w2 = sf.QuantizedExperts.from_gptq(qweight2, scales2, bits=4, group_size=128).to("cuda")
    y = sf.fused_moe(x, w13, w2, topk_weights, topk_ids)      # a MoE layer (docs/MOE.md)

Importing this package never initialises CUDA and works without the compiled
extension (CPU tensors then take the fp32 reference path).
"""

from . import format
from .moe import QuantizedExperts, fused_moe
from .weight import QuantizedWeight, matmul

__version__ = "0.1.0"

__all__ = ["QuantizedExperts", "QuantizedWeight", "format", "fused_moe", "matmul", "__version__"]
