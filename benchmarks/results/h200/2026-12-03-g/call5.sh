#!/bin/bash
# 2026-12-03-g call 5: the sm90 table's K-heavy int8 refinement (small_k_heavy_max_m_int8 = 48): the
# dispatcher and op tests on the GPU, and which path int8 8B down takes at M = 48 / 49 / 64.
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_dispatch 150 python -m pytest -q -n 16 -p no:cacheprovider tests/test_dispatch.py tests/test_ops_gpu.py tests/test_decode_gpu.py -k "dispatch or route or compile or graph or path" -rf
dc_run which_path 60 python - <<'PY'
import torch, swordfish_backend as sf, swordfish_backend.ops as ops
from swordfish_backend import format as fmt
K, N = 14336, 4096
q = torch.randint(0, 256, (K, N)); s = (torch.rand(K // 128, N) * 0.01 + 0.001).to(torch.bfloat16)
w = sf.QuantizedWeight.from_gptq(fmt.pack_k(q, 8), s, None, bits=8, group_size=128).to("cuda")
names = {ops.PATH_DECODE: "decode", ops.PATH_DENSE: "dense", ops.PATH_PREFILL: "prefill"}
for M in (48, 49, 64):
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    y = sf.matmul(x, w)
    torch.cuda.synchronize()
    print(f"int8 8B down M = {M}: {names[ops.last_path(x.device.index)]}")
PY
