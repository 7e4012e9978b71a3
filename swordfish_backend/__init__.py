"""Swordfish: weight-only quantized GEMM kernels (int4/int8 weights, fp16/bf16 activations).

    import swordfish_backend as sf
    w = sf.QuantizedWeight.from_gptq(qweight, scales, bits=4, group_size=128).to("cuda")
    y = sf.matmul(x, w)

Importing this package never initialises CUDA and works without the compiled
extension (CPU tensors then take the fp32 reference path).
"""

from . import format
from .weight import QuantizedWeight, matmul

__version__ = "0.1.0"

__all__ = ["QuantizedWeight", "format", "matmul", "__version__"]
