"""The CUDA prepack op against the pure-torch reference packer (GPU).

Bit-exact with ``format.pack_reference`` for int4 and int8, with and without
act-order permutations, over shapes that include the smallest legal ones and
odd numbers of k-blocks and n-blocks (the kernel pairs k-blocks per CTA);
clear errors for every bad argument; a side stream and CUDA-graph capture
(a launch on the wrong stream fails capture at once); and the bandwidth of
the 70B gate_up prepack against a device copy measured in the same run.
"""

from __future__ import annotations

import statistics

import pytest
import torch

from swordfish_backend import format as fmt
from swordfish_backend import ops

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(not ops.has_extension(), reason=f"needs the extension: {ops.extension_error()}"),
]

# (K, N): smallest legal, odd k-block / n-block counts, a 4160 = 65 * 64 remainder, a larger square.
SHAPES = {
    4: [(64, 64), (128, 64), (192, 192), (320, 320), (4160, 192), (1024, 1024)],
    8: [(32, 64), (64, 64), (96, 192), (160, 320), (4160, 128), (1024, 1024)],
}


def _codes(K: int, N: int, bits: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 1 << bits, (K, N), generator=gen, dtype=torch.int64, device="cuda").to(torch.uint8)


def _poison_cache(nbytes: int) -> None:
    """Fill a freed block of the caching allocator with 0x7f so an output reusing it is not zero by luck."""
    junk = torch.full((nbytes // 4 + 1,), 0x7F7F7F7F, dtype=torch.int32, device="cuda")
    del junk


def _act_order_perm(K: int, group: int, gen: torch.Generator) -> torch.Tensor:
    """argsort(g_idx) of a desc_act checkpoint: random group per row, rows sorted by group."""
    g_idx = torch.randint(0, K // group, (K,), generator=gen, device="cuda")
    return torch.argsort(g_idx, stable=True).to(torch.int32)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("order", ["none", "random", "act_order"])
def test_prepack_bit_exact(bits, order):
    gen = torch.Generator(device="cuda").manual_seed(1234 + bits)
    for K, N in SHAPES[bits]:
        q = _codes(K, N, bits, gen)
        perm = None
        if order == "random":
            perm = torch.randperm(K, generator=gen, device="cuda").to(torch.int32)
        elif order == "act_order":
            perm = _act_order_perm(K, 32, gen)
        qweight = fmt.pack_k(q, bits)
        expected = fmt.pack_reference(q if perm is None else q[perm.long()], bits)
        _poison_cache(expected.numel() * 4)
        got = ops.prepack(qweight, perm, bits)
        assert got.dtype == torch.int32 and got.shape == expected.shape == fmt.packed_shape(bits, K, N)
        assert got.device == qweight.device
        mismatch = (got != expected).nonzero()
        assert mismatch.numel() == 0, f"int{bits} K={K} N={N} perm={order}: first mismatches at {mismatch[:4].tolist()}"


@pytest.mark.parametrize("bits", [4, 8])
def test_prepack_extreme_codes(bits):
    """All-max codes set the sign bit of every word; all-zero codes must give zero words."""
    K, N = 2 * fmt.block_k(bits), 128
    for value in (0, (1 << bits) - 1):
        q = torch.full((K, N), value, dtype=torch.uint8, device="cuda")
        got = ops.prepack(fmt.pack_k(q, bits), None, bits)
        assert torch.equal(got, fmt.pack_reference(q, bits))


@pytest.mark.sanitize
@pytest.mark.parametrize("bits", [4, 8])
def test_prepack_small_sanitize(bits):
    """Small case for compute-sanitizer memcheck/racecheck (scripts/gpu_check.sh)."""
    gen = torch.Generator(device="cuda").manual_seed(7)
    K, N = 3 * fmt.block_k(bits), 192
    q = _codes(K, N, bits, gen)
    perm = torch.randperm(K, generator=gen, device="cuda").to(torch.int32)
    assert torch.equal(ops.prepack(fmt.pack_k(q, bits), None, bits), fmt.pack_reference(q, bits))
    assert torch.equal(ops.prepack(fmt.pack_k(q, bits), perm, bits), fmt.pack_reference(q[perm.long()], bits))


def test_prepack_second_device_index_and_side_stream():
    gen = torch.Generator(device="cuda").manual_seed(3)
    q = _codes(256, 256, 4, gen)
    qweight = fmt.pack_k(q, 4)
    expected = fmt.pack_reference(q, 4)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = ops.prepack(qweight, None, 4)
    torch.cuda.current_stream().wait_stream(s)
    assert torch.equal(got, expected)
    if torch.cuda.device_count() > 1:
        q1, e1 = qweight.to("cuda:1"), expected.to("cuda:1")
        assert torch.equal(ops.prepack(q1, None, 4), e1)


@pytest.mark.parametrize("with_perm", [False, True])
def test_prepack_cuda_graph(with_perm):
    gen = torch.Generator(device="cuda").manual_seed(11)
    K, N = 256, 320
    q = _codes(K, N, 4, gen)
    qweight = fmt.pack_k(q, 4)
    perm = torch.randperm(K, generator=gen, device="cuda").to(torch.int32) if with_perm else None
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        ops.prepack(qweight, perm, 4)  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.prepack(qweight, perm, 4)
    q2 = _codes(K, N, 4, gen)  # new data in the captured input buffer
    qweight.copy_(fmt.pack_k(q2, 4))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, fmt.pack_reference(q2 if perm is None else q2[perm.long()], 4))


def test_prepack_opcheck():
    gen = torch.Generator(device="cuda").manual_seed(5)
    for bits in (4, 8):
        K, N = 2 * fmt.block_k(bits), 128
        qweight = fmt.pack_k(_codes(K, N, bits, gen), bits)
        perm = torch.randperm(K, generator=gen, device="cuda").to(torch.int32)
        torch.library.opcheck(torch.ops.swordfish.prepack.default, (qweight, None, bits))
        torch.library.opcheck(torch.ops.swordfish.prepack.default, (qweight, perm, bits))


# ------------------------------------------------------------------ bad input


def _qweight(K=128, N=128, bits=4):
    return torch.zeros((K * bits // 32, N), dtype=torch.int32, device="cuda")


@pytest.mark.parametrize(
    "make_args, match",
    [
        (lambda: (_qweight(), None, 3), "bits must be 4 or 8, got 3"),
        (lambda: (_qweight().to(torch.int64), None, 4), r"qweight must be torch.int32, got torch.int64"),
        (lambda: (_qweight().cpu(), None, 4), "qweight must be a CUDA tensor, got one on cpu"),
        (lambda: (_qweight(N=256)[:, ::2], None, 4), "qweight must be contiguous"),
        (lambda: (_qweight().reshape(-1), None, 4), r"qweight must be 2-D, got shape \(2048,\)"),
        (lambda: (torch.zeros((12, 128), dtype=torch.int32, device="cuda"), None, 4), r"K = 96"),
        (lambda: (torch.zeros((10, 128), dtype=torch.int32, device="cuda"), None, 8), r"K = 40"),
        (lambda: (_qweight(N=96), None, 4), "N = 96"),
        (lambda: (_qweight(), torch.arange(128, device="cuda"), 4), "perm must be torch.int32, got torch.int64"),
        (lambda: (_qweight(), torch.arange(64, dtype=torch.int32, device="cuda"), 4),
         r"perm must have shape \(128,\), got \(64,\)"),
        (lambda: (_qweight(), torch.arange(128, dtype=torch.int32), 4), "perm must be a CUDA tensor, got one on cpu"),
        (lambda: (_qweight(), torch.arange(256, dtype=torch.int32, device="cuda")[::2], 4), "perm must be contiguous"),
    ],
)
def test_prepack_bad_input(make_args, match):
    with pytest.raises(ValueError, match=match):
        ops.prepack(*make_args())


def test_prepack_out_of_range_perm_reads_in_bounds():
    """A perm entry outside [0, K) yields code 0 for that row instead of an out-of-bounds read."""
    K, N = 128, 64
    q = torch.full((K, N), 5, dtype=torch.uint8, device="cuda")
    perm = torch.arange(K, dtype=torch.int32, device="cuda")
    perm[3] = K + 1000
    perm[7] = -1
    got = fmt.unpack_reference(ops.prepack(fmt.pack_k(q, 4), perm, 4), 4, K, N)
    expected = q.clone()
    expected[3] = 0
    expected[7] = 0
    assert torch.equal(got, expected)


# ---------------------------------------------------------------- bandwidth


def _median_ms(fn, iters=20, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


@pytest.mark.perf
@pytest.mark.parametrize("bits", [4, 8])
def test_prepack_bandwidth_70b_gate_up(bits, record_property):
    """70B gate_up (K = 8192, N = 57344): >= 50% of the device copy bandwidth measured in this run."""
    K, N = 8192, 57344
    gen = torch.Generator(device="cuda").manual_seed(99)
    qweight = torch.randint(-(2**31), 2**31 - 1, (K * bits // 32, N), generator=gen, dtype=torch.int32,
                            device="cuda")
    nbytes = qweight.numel() * 4
    # Correctness on one strip of columns (the full reference would need ~4 GB of int64 scratch).
    strip = qweight[:, :256].contiguous()
    q_strip = fmt.unpack_k(strip, bits)
    packed = ops.prepack(qweight, None, bits)
    assert torch.equal(packed[:4], fmt.pack_reference(q_strip, bits))

    ms = _median_ms(lambda: ops.prepack(qweight, None, bits))
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = _median_ms(lambda: dst.copy_(src))
    prepack_tbps = 2 * nbytes / (ms * 1e-3) / 1e12
    copy_tbps = 2 * nbytes / (copy_ms * 1e-3) / 1e12
    ratio = prepack_tbps / copy_tbps
    record_property(f"prepack_int{bits}_70b_gate_up_us", round(ms * 1e3, 1))
    record_property(f"prepack_int{bits}_70b_gate_up_TBps", round(prepack_tbps, 3))
    record_property(f"copy_TBps_int{bits}_run", round(copy_tbps, 3))
    print(f"\nprepack int{bits} K={K} N={N}: {ms * 1e3:.1f} us, {prepack_tbps:.2f} TB/s read+write; "
          f"device copy {copy_tbps:.2f} TB/s; ratio {ratio:.2f}")
    assert ratio >= 0.5, f"prepack int{bits} reached {ratio:.2f} of copy bandwidth ({prepack_tbps:.2f} TB/s)"
