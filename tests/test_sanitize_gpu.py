"""Small cases of every kernel, for compute-sanitizer (memcheck, racecheck).

scripts/gpu_check.sh runs `pytest -m sanitize` under each sanitizer tool; the
cases are also ordinary correctness tests (fp32 reference, fresh random data).
Shapes are odd on purpose: partial n256 quads, K not a multiple of 128,
row counts that leave partial m16 tiles.
"""

import pytest
import torch

import swordfish_backend as sf
import swordfish_backend.ops as ops
from swordfish_backend import format as fmt
from swordfish_backend import reference

pytestmark = [
    pytest.mark.sanitize,
    pytest.mark.skipif(not (torch.cuda.is_available() and ops.has_extension()),
                       reason="needs a CUDA device and the compiled extension"),
]


def make(bits, K, N, group, zeros, act_order, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 1 << bits, (K, N), generator=gen)
    G = 1 if group == -1 else K // group
    s = (torch.rand(G, N, generator=gen) * 0.02 + 0.001).to(dtype)
    if zeros:
        z = torch.randint(0, 16, (G, N), generator=gen) - 8
        packed_z = torch.zeros(N // 8, G, dtype=torch.int64)
        for i in range(8):
            packed_z |= (z[:, i::8].t() + 8) << (4 * i)
        packed_z = torch.where(packed_z >= 2**31, packed_z - 2**32, packed_z).to(torch.int32)
        w = sf.QuantizedWeight.from_compressed_tensors(
            fmt.pack_k(q, 4).t().contiguous(), s.t().contiguous(), weight_shape=(N, K), num_bits=4,
            group_size=group, weight_zero_point=packed_z)
    else:
        g_idx = None
        if act_order:
            g_idx = (torch.arange(K) // group)[torch.randperm(K, generator=gen)].to(torch.int32)
        w = sf.QuantizedWeight.from_gptq(fmt.pack_k(q, bits), s, g_idx, bits=bits, group_size=group)
    return w.to("cuda")


def check(y, w, x):
    ref = reference.matmul(x, w)
    rel = torch.linalg.norm(y.float() - ref) / torch.linalg.norm(ref)
    assert torch.isfinite(y).all() and rel < 1e-2, float(rel)


# swap kernel (pairs, 16-byte runs; int4 M = 8 with CTA-shared activations), gemm MT = 2, two m-groups
@pytest.mark.parametrize("M", [1, 6, 8, 20, 67])
@pytest.mark.parametrize("det", [False, True], ids=["atomic", "deterministic"])
@pytest.mark.parametrize("bits,zeros,act_order", [(4, False, False), (4, True, False), (8, False, True)])
def test_decode_small(bits, zeros, act_order, det, M):
    w = make(bits, 320, 192, 64, zeros, act_order, torch.bfloat16, M)
    x = torch.randn(M, 320, device="cuda").to(torch.bfloat16)
    check(sf.matmul(x, w, path="decode", deterministic=det), w, x)


@pytest.mark.parametrize("bits,act_order", [(4, False), (8, True)])
def test_dense_small(bits, act_order):
    w = make(bits, 320, 192, 64, False, act_order, torch.float16, 7)
    x = torch.randn(33, 320, device="cuda").to(torch.float16)
    check(sf.matmul(x, w, path="dense"), w, x)
    assert torch.equal(w.dequantize(), reference.dequantize(w).to(w.dtype))
