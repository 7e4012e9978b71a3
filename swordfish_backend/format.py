"""Packed weight format v1: constants and the pure-torch reference packer.

The constants mirror ``kernels/common/format.h`` (the source of truth);
``tests/test_format_header.py`` compiles that header and fails if anything
here disagrees, and ``check_against_extension()`` compares them with the
loaded extension's ``abi_info`` op. ``docs/FORMAT.md`` is the specification.

Two integer layouts appear in this module:

* **K-packed** (GPTQ's): int32 ``(K * bits / 32, N)``; value ``i`` of word
  ``(r, n)`` is row ``(32 / bits) * r + i`` of column ``n``, in bits
  ``[bits * i, bits * (i + 1))``. Every checkpoint format is converted to it.
* **Packed v1**: int32 ``(N / 64, K / block_k, 512)``, what the kernels read.

Both hold unsigned codes with an implicit zero point (8 for int4, 128 for
int8). The functions work on CPU and CUDA tensors alike.
"""

from __future__ import annotations

import functools

import torch

VERSION = 1
BLOCK_N = 64
BLOCK_BYTES = 2048
BLOCK_WORDS = 512
SUBTILES = 4
SUBTILE_BYTES = 512
LANES = 32
LANE_WORDS = 4
FRAGMENT_K = 16
BLOCK_K4 = 64
BLOCK_K8 = 32
BIAS4 = 8
BIAS8 = 128
CHANNELWISE = -1
GROUP_SIZES = (32, 64, 128, CHANNELWISE)
CHANNELWISE_REPLICA_GROUP = 128
NIBBLE_OF_FRAGMENT4 = (0, 4, 1, 5, 2, 6, 3, 7)
BYTE_OF_FRAGMENT8 = (0, 2, 1, 3)

BITS = (4, 8)


def block_k(bits: int) -> int:
    """Rows of K per packed block: 64 for int4, 32 for int8."""
    _check_bits(bits)
    return BLOCK_K4 if bits == 4 else BLOCK_K8


def bias(bits: int) -> int:
    """The implicit zero point of the stored unsigned codes."""
    _check_bits(bits)
    return BIAS4 if bits == 4 else BIAS8


def values_per_word(bits: int) -> int:
    _check_bits(bits)
    return 32 // bits


def packed_shape(bits: int, K: int, N: int) -> tuple[int, int, int]:
    """Shape of the packed v1 tensor for a K x N weight."""
    check_shape(bits, K, N)
    return (N // BLOCK_N, K // block_k(bits), BLOCK_WORDS)


def check_shape(bits: int, K: int, N: int) -> None:
    """Raise ValueError unless (K, N) tiles into whole packed blocks."""
    bk = block_k(bits)
    if K <= 0 or K % bk:
        raise ValueError(f"int{bits} weights need in_features K to be a positive multiple of {bk}, got K = {K}")
    if N <= 0 or N % BLOCK_N:
        raise ValueError(f"out_features N must be a positive multiple of {BLOCK_N}, got N = {N}")


def locate(bits: int, k: int, n: int) -> tuple[int, int]:
    """(word, shift) of tile-local value (k, n) inside its block.

    Mirrors ``format::locate`` in format.h line for line; docs/FORMAT.md
    explains the layout.
    """
    c, g = divmod(n, 8)
    kk = k % 16
    t = (kk % 8) // 2
    f_in_pair = (kk % 2) + 2 * (kk // 8)
    lane = 4 * g + t
    if bits == 4:
        s = k // 16
        j = c // 2
        f = f_in_pair + 4 * (c % 2)
        return s * LANES * LANE_WORDS + lane * LANE_WORDS + j, 4 * NIBBLE_OF_FRAGMENT4[f]
    s = 2 * (k // 16) + c // 4
    j = c % 4
    return s * LANES * LANE_WORDS + lane * LANE_WORDS + j, 8 * BYTE_OF_FRAGMENT8[f_in_pair]


@functools.lru_cache(maxsize=None)
def _block_destinations(bits: int) -> torch.Tensor:
    """For value e = k * 64 + n of a block: its field index word * vpw + shift / bits."""
    bk = block_k(bits)
    dest = []
    for k in range(bk):
        for n in range(BLOCK_N):
            word, shift = locate(bits, k, n)
            dest.append(word * values_per_word(bits) + shift // bits)
    table = torch.tensor(dest, dtype=torch.int64)
    assert torch.equal(table.sort().values, torch.arange(bk * BLOCK_N)), "locate() must be a bijection"
    return table


def _to_int32_words(words64: torch.Tensor) -> torch.Tensor:
    """Reinterpret unsigned 32-bit values held in int64 as int32 bit patterns."""
    return torch.where(words64 >= 2**31, words64 - 2**32, words64).to(torch.int32)


def _check_codes(q: torch.Tensor, bits: int, what: str) -> None:
    if q.dim() != 2:
        raise ValueError(f"{what} must be 2-D (K, N), got shape {tuple(q.shape)}")
    if q.dtype.is_floating_point or q.dtype == torch.bool or q.dtype.is_complex:
        raise TypeError(f"{what} must hold integer codes, got dtype {q.dtype}")


def pack_reference(q: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack unsigned codes q (K, N) in [0, 2**bits) into the v1 layout."""
    _check_codes(q, bits, "q")
    K, N = q.shape
    nb, kb, _ = packed_shape(bits, K, N)
    bk, vpw = block_k(bits), values_per_word(bits)
    q64 = q.to(torch.int64)
    if q64.numel() and (int(q64.min()) < 0 or int(q64.max()) >= 1 << bits):
        raise ValueError(f"int{bits} codes must lie in [0, {(1 << bits) - 1}], got [{int(q64.min())}, {int(q64.max())}]")
    tiles = q64.reshape(kb, bk, nb, BLOCK_N).permute(2, 0, 1, 3).reshape(nb, kb, bk * BLOCK_N)
    fields = torch.empty_like(tiles)
    fields[..., _block_destinations(bits).to(q.device)] = tiles
    fields = fields.reshape(nb, kb, BLOCK_WORDS, vpw)
    shifts = torch.arange(vpw, device=q.device, dtype=torch.int64) * bits
    words = (fields << shifts).sum(dim=-1)
    return _to_int32_words(words)


def unpack_reference(packed: torch.Tensor, bits: int, K: int, N: int) -> torch.Tensor:
    """Inverse of pack_reference: unsigned codes (K, N) as uint8."""
    expected = packed_shape(bits, K, N)
    if tuple(packed.shape) != expected or packed.dtype != torch.int32:
        raise ValueError(
            f"packed int{bits} tensor for K = {K}, N = {N} must be int32 {expected}, "
            f"got {packed.dtype} {tuple(packed.shape)}"
        )
    nb, kb, _ = expected
    bk, vpw = block_k(bits), values_per_word(bits)
    words = packed.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(vpw, device=packed.device, dtype=torch.int64) * bits
    fields = ((words.unsqueeze(-1) >> shifts) & ((1 << bits) - 1)).reshape(nb, kb, BLOCK_WORDS * vpw)
    tiles = fields[..., _block_destinations(bits).to(packed.device)]
    q = tiles.reshape(nb, kb, bk, BLOCK_N).permute(1, 2, 0, 3).reshape(K, N)
    return q.to(torch.uint8)


def pack_k(q: torch.Tensor, bits: int) -> torch.Tensor:
    """Unsigned codes (K, N) -> GPTQ K-packed int32 (K * bits / 32, N)."""
    _check_codes(q, bits, "q")
    K, N = q.shape
    vpw = values_per_word(bits)
    if K % vpw:
        raise ValueError(f"K-packing int{bits} needs K % {vpw} == 0, got K = {K}")
    shifts = (torch.arange(vpw, device=q.device, dtype=torch.int64) * bits).view(1, vpw, 1)
    words = (q.to(torch.int64).reshape(K // vpw, vpw, N) << shifts).sum(dim=1)
    return _to_int32_words(words)


def unpack_k(qweight: torch.Tensor, bits: int) -> torch.Tensor:
    """GPTQ K-packed int32 (K * bits / 32, N) -> unsigned codes (K, N) as uint8."""
    if qweight.dim() != 2 or qweight.dtype != torch.int32:
        raise ValueError(f"K-packed qweight must be 2-D int32, got {qweight.dtype} {tuple(qweight.shape)}")
    vpw = values_per_word(bits)
    rows, N = qweight.shape
    shifts = (torch.arange(vpw, device=qweight.device, dtype=torch.int64) * bits).view(1, vpw, 1)
    q = ((qweight.to(torch.int64).unsqueeze(1) & 0xFFFFFFFF) >> shifts) & ((1 << bits) - 1)
    return q.reshape(rows * vpw, N).to(torch.uint8)


# The padded act-order layout (docs/FORMAT.md "Act-order shards"): a weight whose g_idx gives groups
# uneven row counts (a row-parallel shard) is packed with each group's rows padded to a multiple of
# ACT_ORDER_CHUNK zero rows, the total to a multiple of ACT_ORDER_K_ALIGN, and read as a group-32 layer.
ACT_ORDER_CHUNK = 32  # rows per scale row of the padded layout: each chunk belongs to one group
ACT_ORDER_K_ALIGN = 128  # the padded K: a whole number of int4 / int8 blocks, and the prefill's K % 128 rule
PAD_GROUP = -1  # chunk_groups entry of a chunk that holds pad rows only (its scales and zeros are 0)


def act_order_padded_layout(g_idx: torch.Tensor, groups: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(perm int32 (K_pad), chunk_groups int64 (K_pad / 32)) of the padded act-order layout.

    ``g_idx`` (K_in) is a validated group index per input row, values in ``[0, groups)``. Rows are
    sorted by group (stable); group g's run starts on a 32-row boundary and is padded up to one.
    ``perm[k]`` is the input feature of packed row k, or -1 for a pad row; ``chunk_groups[c]`` is
    the group of rows ``32 c .. 32 c + 31`` (PAD_GROUP for the all-pad chunks of the K tail).
    """
    g = g_idx.to(torch.int64)
    K = g.numel()
    counts = torch.bincount(g, minlength=groups)
    chunks = (counts + ACT_ORDER_CHUNK - 1) // ACT_ORDER_CHUNK  # per group
    total = int(chunks.sum()) * ACT_ORDER_CHUNK
    K_pad = max(ACT_ORDER_K_ALIGN, -(-total // ACT_ORDER_K_ALIGN) * ACT_ORDER_K_ALIGN)
    order = torch.argsort(g, stable=True)
    sorted_g = g[order]
    first_row = torch.cumsum(chunks, 0) * ACT_ORDER_CHUNK - chunks * ACT_ORDER_CHUNK  # of each group's run
    first_sorted = torch.cumsum(counts, 0) - counts  # of each group among the sorted rows
    rank = torch.arange(K, device=g.device) - first_sorted[sorted_g]
    perm = torch.full((K_pad,), -1, dtype=torch.int32, device=g.device)
    perm[first_row[sorted_g] + rank] = order.to(torch.int32)
    chunk_groups = torch.full((K_pad // ACT_ORDER_CHUNK,), PAD_GROUP, dtype=torch.int64, device=g.device)
    chunk_groups[: total // ACT_ORDER_CHUNK] = torch.repeat_interleave(torch.arange(groups, device=g.device), chunks)
    return perm, chunk_groups


def act_order_padding(K: int, group_size: int, tp: int, seed: int = 0) -> float:
    """Mean K_pad / K_s over the tp row-parallel shards of a GPTQ act-order layer (issue #36's memory note).

    GPTQ's desc_act order: perm = argsort of a random Hessian diagonal (descending), g_idx[perm[i]] =
    i // group_size, so every group's rows scatter over K; rank r holds rows [r K / tp, (r + 1) K / tp).
    """
    gen = torch.Generator().manual_seed(seed)
    hess_perm = torch.argsort(torch.rand(K, generator=gen), descending=True)
    g_idx = torch.empty(K, dtype=torch.int64)
    g_idx[hess_perm] = torch.arange(K) // group_size
    K_s = K // tp
    padded = [act_order_padded_layout(g_idx[r * K_s:(r + 1) * K_s], K // group_size)[0].numel() for r in range(tp)]
    return sum(padded) / (tp * K_s)


# The order of the extension's abi_info() tensor (kernels/torch/ops_format.cpp).
ABI_INFO = (
    VERSION, BLOCK_N, BLOCK_BYTES, BLOCK_WORDS, SUBTILES, SUBTILE_BYTES, LANES, LANE_WORDS,
    BLOCK_K4, BLOCK_K8, BIAS4, BIAS8, *NIBBLE_OF_FRAGMENT4, *BYTE_OF_FRAGMENT8,
)


def check_against_extension(abi_info: list[int]) -> None:
    """Raise RuntimeError if the compiled extension packs another format."""
    if tuple(abi_info) != ABI_INFO:
        raise RuntimeError(
            f"swordfish_backend._C was built for another packed format: abi_info {tuple(abi_info)} != {ABI_INFO}; "
            "rebuild the extension from this source tree"
        )


def _check_bits(bits: int) -> None:
    if bits not in BITS:
        raise ValueError(f"bits must be 4 or 8, got {bits!r}")
