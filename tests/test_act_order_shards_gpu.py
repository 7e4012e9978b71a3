"""Act-order row-parallel shards (issue #36) on the GPU: every path on the padded act-order layout.

Each shard of a GPTQ-statistics act-order layer (tests/test_act_order_shards.py builds them) runs
forced through decode, prefill (the padded layout is a group-32 layer: the sm90 prefill takes it for
int4 and int8) and the dense tier, its output poisoned before the launch, against the fp32
reference of the shard's own rows; the sum of the shards' outputs matches the unsharded layer. Sanitizer cases (`-m sanitize`) are small:

    compute-sanitizer --tool memcheck python -m pytest -q -m sanitize tests/test_act_order_shards_gpu.py
"""

from __future__ import annotations

import pytest
import torch
from test_act_order_shards import Layer  # the CPU module's GPTQ-statistics layer and its shards

import swordfish_backend as sf
from swordfish_backend import format as fmt
from swordfish_backend import ops
from swordfish_backend import reference

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(not ops.has_extension(), reason=f"needs the extension: {ops.extension_error()}"),
]

PATHS = {"decode": ops.PATH_DECODE, "prefill": ops.PATH_PREFILL, "dense": ops.PATH_DENSE}
FORMATS = [(4, False), (8, False), (4, True)]
FORMAT_IDS = ["int4", "int8", "int4-zp"]


def poison(numel: int, dtype: torch.dtype) -> None:
    """A NaN block of the output's size on top of the caching allocator: an element a kernel misses stays NaN."""
    torch.full((numel,), float("nan"), dtype=dtype, device="cuda")


def run(x: torch.Tensor, w: sf.QuantizedWeight, path: str, det: int = 1) -> torch.Tensor:
    poison(x.shape[0] * w.out_features, x.dtype)
    return ops.gemm(x, *w.kernel_args()[:4], None, w.bits, w.scale_group, False, PATHS[path], det)


def check(y: torch.Tensor, ref: torch.Tensor, what: str) -> None:
    assert torch.isfinite(y).all(), f"{what}: non-finite outputs (unwritten or poisoned elements)"
    rel = float((y.double() - ref.double()).norm() / ref.double().norm())
    assert rel < 1e-2, f"{what}: relative Frobenius error {rel:.2e}"


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("tp", [2, 4, 8])
@pytest.mark.parametrize("group", [32, 128])
@pytest.mark.parametrize("bits, zp", FORMATS, ids=FORMAT_IDS)
def test_shard_paths_match_reference(bits, zp, group, tp, path):
    layer = Layer(K=4096, N=256, bits=bits, group=group, zp=zp, dtype=torch.bfloat16, seed=tp)
    gen = torch.Generator().manual_seed(group)
    for rank, rows in enumerate(layer.shards(tp)):
        w = layer.weight(rows).to("cuda")
        assert w.padded_k is not None
        for M in (1, 16, 33, 256):
            x = torch.randn(M, w.in_features, generator=gen).to(layer.dtype).cuda()
            y = run(x, w, path)
            assert ops.last_path(0) == PATHS[path]
            check(y, reference.matmul(x, w), f"rank {rank} M={M}")


@pytest.mark.parametrize("bits, zp", FORMATS, ids=FORMAT_IDS)
def test_dense_dequantize_drops_pad_rows(bits, zp):
    """The dequantize op writes the (N, K_in) weight (pad rows skipped), bit-equal to the reference."""
    layer = Layer(K=2048, N=128, bits=bits, group=64, zp=zp, dtype=torch.float16, seed=4)
    for rows in layer.shards(4):
        w = layer.weight(rows).to("cuda")
        poison(w.out_features * w.in_features, w.dtype)
        d = ops.dequantize(*w.kernel_args(), w.in_features)
        assert d.shape == (w.out_features, w.in_features)
        assert torch.equal(d.float().cpu().t(), layer.W[rows])


@pytest.mark.parametrize("tp", [2, 8])
def test_all_reduce_of_shards_is_the_layer(tp):
    """auto dispatch on each shard; the shards' outputs summed equal the unsharded layer (fp64 reference)."""
    layer = Layer(K=8192, N=512, bits=4, group=128, dtype=torch.bfloat16, seed=9)
    full = layer.weight()
    for M in (1, 48, 49, 512, 4096):
        x = torch.randn(M, layer.K).to(layer.dtype)
        ref = reference.matmul(x, full, dtype=torch.float64)
        xc = x.cuda()
        total = sum(sf.matmul(xc[:, rows], layer.weight(rows).to("cuda")).double().cpu()
                    for rows in layer.shards(tp))
        rel = float((total - ref).norm() / ref.norm())
        assert rel < 1e-2, f"M={M}: {rel:.2e}"


def test_auto_follows_select_path_with_the_input_width():
    """The dense crossover of a padded shard is the unpadded act-order layer's times K_in / K (heuristics.hpp
    padded_dense_from); auto runs what select_path(..., K_in) predicts on both sides of it."""
    layer = Layer(K=4096, N=256, bits=4, group=128, dtype=torch.bfloat16, seed=5)
    w = layer.weight(list(layer.shards(8))[0]).to("cuda")
    dev = torch.cuda.current_device()
    args = (w.packed_k, w.out_features, 4, w.scale_group, False, False, True, ops.DTYPE_CODES[torch.bfloat16], dev)

    def dense_from(k_in):
        return next(M for M in range(1, 20000) if ops.select_path(M, *args, k_in) == ops.PATH_DENSE)

    m1 = dense_from(w.in_features)
    assert m1 == -(-dense_from(0) * w.in_features // w.packed_k) and w.in_features < w.packed_k
    gen = torch.Generator().manual_seed(5)
    for M in (m1 - 1, m1):
        x = torch.randn(M, w.in_features, generator=gen).to(layer.dtype).cuda()
        poison(M * w.out_features, x.dtype)
        y = sf.matmul(x, w)
        assert ops.last_path(dev) == ops.select_path(M, *args, w.in_features), f"M={M}"
        check(y, reference.matmul(x, w), f"auto M={M}")
    assert ops.last_path(dev) == ops.PATH_DENSE


def test_opcheck_padded_layout():
    """gemm and dequantize with x / the output narrower than the packed K: schema, fake and real agree."""
    layer = Layer(K=1024, N=128, bits=4, group=64, zp=True, dtype=torch.bfloat16, seed=6)
    w = layer.weight(slice(256, 512)).to("cuda")
    x = torch.randn(5, w.in_features, device="cuda").to(torch.bfloat16)
    torch.library.opcheck(torch.ops.swordfish.gemm.default,
                          (x, *w.kernel_args()[:4], None, 4, w.scale_group, False, 0, 1))
    torch.library.opcheck(torch.ops.swordfish.dequantize.default, (*w.kernel_args(), w.in_features))


def test_op_checks_input_width():
    layer = Layer(K=1024, N=128, seed=1)
    w = layer.weight(slice(0, 256)).to("cuda")
    x = torch.randn(2, w.packed_k + 8, device="cuda").half()
    with pytest.raises(ValueError, match=rf"x.size\(1\) .* must lie in \[1, {w.packed_k}\].*got {w.packed_k + 8}"):
        ops.gemm(x, *w.kernel_args()[:4], None, 4, w.scale_group, False, 0, -1)
    with pytest.raises(ValueError, match=rf"x.size\(1\) must equal the packed weight's K = {w.packed_k}"):
        ops.gemm(x[:, :256].contiguous(), w.packed, w.scales, None, None, None, 4, w.scale_group, False, 0, -1)


@pytest.mark.sanitize
@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("bits, zp", FORMATS, ids=FORMAT_IDS)
def test_sanitize_small_shard(bits, zp, path):
    """A small shard (K_s = 160, odd rows per group) with a bad perm entry on top: pad rows (-1) and the bad
    entry gather zeros and are never written; memcheck watches every access."""
    layer = Layer(K=640, N=256, bits=bits, group=32, zp=zp, dtype=torch.float16, seed=2)
    w = layer.weight(slice(160, 320)).to("cuda")
    for M in (3, 67):
        x = torch.randn(M, w.in_features, device="cuda").half()
        check(run(x, w, path), reference.matmul(x, w), f"M={M}")
    bad = w.perm.clone()
    bad[0] = w.in_features + 1000  # outside [0, K_in): a zero activation, no stray read
    y = ops.gemm(x, w.packed, w.scales, w.zeros, bad, None, w.bits, w.scale_group, False, PATHS[path], 1)
    if path != "dense":  # the dense tier leaves the scratch row of the feature bad[0] replaced unwritten
        assert torch.isfinite(y).all()
