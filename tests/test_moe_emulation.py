"""CPU emulation of the fused-MoE 8-row expert GEMM (kernels/moe/moe_swap.cuh) on decode_swap.cuh's loop.

``emulate_moe_swap`` walks swap_gemm_kernel for every CTA and warp: cta_units' split of the flat
(quad, block, k-block) units (atomic and split modes), the per-warp cut to the quads where its column
exists, MoeSwapSource's seek (the block's expert slab, lane l's token slot sorted_ids[8 b + l % 8],
x row slot / row_div), the loop's MMAs and FOLD through test_decode_emulation's SwapRegisters (the
PTX fragment layouts encoded there once), and MoeSwapFlush (token pairs, router weight, row slot /
out_div or plane `split`). Activation slots a lane does not copy hold NaN here (the kernel leaves
zeros or an earlier block's token there), so a padding token or another block's token leaking into
a stored output shows up as NaN. If the result equals the fp64 reference per slot, every index the
kernel computes lands where the expert slabs, the sort and the output rows put it.
"""

from __future__ import annotations

import math

import pytest
import test_decode_emulation as de
import torch
from test_moe import align_reference

from swordfish_backend import format as fmt

BM = 8  # moe_kernels.h kSwapBlockM
KMIN = 4  # decode_config.h kMinUnitsPerCta


def test_mirrored_constants_match_the_headers(tmp_path):
    import host_cxx

    program = r"""
#include <cstdio>
#include "kernels/decode/decode_config.h"
#include "kernels/moe/moe_kernels.h"
int main() { std::printf("%d %d\n", swordfish::moe::kSwapBlockM, swordfish::decode::kMinUnitsPerCta); }
"""
    assert host_cxx.run(tmp_path, program, "moe_kernels.h").split() == [str(BM), str(KMIN)]


def _cta_range(cta, mode, grid, splits, segments, KB):
    """moe_gemm.cuh cta_units: (u0, u1, split), empty when the CTA has no units."""
    if mode == "split":
        seg, split = cta // splits, cta % splits
        if seg >= segments:
            return 0, 0, split
        return seg * KB + split * KB // splits, seg * KB + (split + 1) * KB // splits, split
    units = segments * KB
    used = min(-(-units // KMIN), grid)
    if cta >= used:
        return 0, 0, 0
    return cta * units // used, (cta + 1) * units // used, 0


def emulate_moe_swap(x, packed, scales, zeros, sorted_ids, expert_ids, npp, *, num_slots, row_div, out_div, weights,
                     bits, group, channelwise, dtype, grid, mode="atomic", splits=1, rows_out):
    """out (atomic: (rows_out, N) sums; split: (splits, num_slots, N) planes, NaN where unwritten) as
    swap_gemm_kernel computes it. packed / scales / zeros: per-expert lists; weights: (num_slots,) or None."""
    E, K, N = len(packed), x.shape[1], scales[0].shape[1]
    BK = fmt.block_k(bits)
    NS = BK // 16
    KB, ncols = K // BK, N // 64
    quads = -(-ncols // 4)
    blocks = int(npp) // BM
    segments = quads * blocks
    gshift = 31 if channelwise else int(math.log2(group))
    fold = de.use_fold(bits, group, channelwise, 1, K, N)
    fold_mask = ((128 if channelwise else group) // BK - 1) if fold else 0
    offset = de.RAW_OFFSET[(bits, dtype == torch.bfloat16)]
    row_sums = fold and (offset != 0.0 or zeros is not None)
    words = [p.reshape(-1).to(torch.int64) & 0xFFFFFFFF for p in packed]
    xs = x.to(torch.float64)
    sflat = [s.to(torch.float64).reshape(-1) for s in scales]
    zflat = None if zeros is None else [z.to(torch.float64).reshape(-1) for z in zeros]
    if mode == "atomic":
        out = torch.zeros(rows_out, N, dtype=torch.float64)
    else:
        out = torch.full((splits, num_slots, N), float("nan"), dtype=torch.float64)
    x_tok, x_col = de.LANES & 7, (de.LANES >> 3) * 8
    g = de.LANES // 4

    def expert_of(b):
        e = int(expert_ids[b])
        return e if 0 <= e < E else None

    for cta in range(grid):
        u0, u1, split = _cta_range(cta, mode, grid, splits, segments, KB)
        for warp in range(4):
            w1 = min(u1, ((ncols - warp + 3) >> 2) * blocks * KB)
            n = w1 - u0
            if n <= 0:
                continue
            seg0 = u0 // KB
            q0, b0, kb0 = seg0 // blocks, seg0 % blocks, u0 - seg0 * KB

            stages = []
            p_q, p_b, p_kb = q0, b0, kb0
            for _ in range(n):
                e = expert_of(p_b)
                es = 0 if e is None else e  # a dead block streams expert 0 and stores nothing
                col = 4 * p_q + warp
                wbase = ((col * KB + p_kb) * 2048 + de.LANES * 16) // 4
                wv = torch.stack([words[es][(wbase + s * 128)[:, None] + torch.arange(4)] for s in range(4)])
                act = torch.full((NS // 2, 32, 8), float("nan"), dtype=torch.float64)
                for lane in range(32):
                    slot = int(sorted_ids[BM * p_b + int(x_tok[lane])])
                    if e is None or not 0 <= slot < num_slots:
                        continue
                    for h in range(NS // 2):
                        k = p_kb * BK + int(x_col[lane]) + 32 * h
                        act[h, lane] = xs[slot // row_div, k: k + 8]
                k0 = p_kb * BK
                srows = []
                for r in range(2 if bits == 4 else 1):
                    off = ((k0 + r * 32) >> gshift) * N + col * 64 + 2 * de.LANES
                    z = None if zflat is None else (zflat[es][off], zflat[es][off + 1])
                    srows.append((sflat[es][off], sflat[es][off + 1], z))
                stages.append((wv, act, srows))
                p_kb += 1
                if p_kb == KB:
                    p_kb, p_b = 0, p_b + 1
                    if p_b == blocks:
                        p_b, p_q = 0, p_q + 1

            regs = de.SwapRegisters(bits, dtype, fold, row_sums, offset, gshift)
            seg_left, c_q, c_b, c_kb = min(KB - kb0, n), q0, b0, kb0
            for it in range(n):
                c_kb = regs.unit(stages[it], c_kb, seg_left == 1, KB, fold_mask)
                seg_left -= 1
                if seg_left:
                    continue
                tok, v = regs.token_pairs()
                if expert_of(c_b) is not None:
                    colv = (4 * c_q + warp) * 64 + (g & ~1)
                    for lane in range(32):
                        slot = int(sorted_ids[BM * c_b + int(tok[lane])])
                        if not 0 <= slot < num_slots:
                            continue
                        w = 1.0 if weights is None else float(weights[slot])
                        for m in range(4):
                            for h in range(2):
                                cc = int(colv[lane]) + 16 * m + 8 * h
                                v0, v1 = w * v[m][h][0][lane].item(), w * v[m][h][1][lane].item()
                                if mode == "atomic":
                                    out[slot // out_div, cc] += v0
                                    out[slot // out_div, cc + 1] += v1
                                else:
                                    out[split, slot, cc], out[split, slot, cc + 1] = v0, v1
                c_b += 1
                if c_b == blocks:
                    c_b, c_q = 0, c_q + 1
                seg_left = min(KB, n - it - 1)
    return out


CASES = [
    # bits, K, N, group, channelwise, zeros, dtype, T, top_k, E, grid, mode, splits, w2 (router weights, out_div)
    (4, 256, 320, 128, False, False, torch.bfloat16, 3, 2, 4, 7, "atomic", 1, False),   # FOLD, a short last quad
    (4, 256, 256, 32, False, True, torch.float16, 9, 2, 3, 5, "atomic", 1, True),      # g32: two scale rows
    (8, 128, 256, 64, False, True, torch.bfloat16, 6, 3, 4, 3, "atomic", 1, True),     # int8 FOLD + zero points
    (4, 384, 192, 128, True, False, torch.float16, 5, 2, 3, 4, "atomic", 1, False),    # channelwise
    (4, 256, 128, 64, False, False, torch.bfloat16, 7, 2, 2, 0, "split", 3, True),     # deterministic pieces
    (8, 128, 320, 128, False, False, torch.float16, 4, 2, 5, 0, "split", 2, False),    # split, short last quad
]


def _experts(gen, E, bits, K, N, group, channelwise, with_zeros, dtype):
    parts = [de._random_problem(gen, bits, 1, K, N, group, channelwise, with_zeros, False, dtype) for _ in range(E)]
    return ([p[0] for p in parts], [p[1] for p in parts], None if not with_zeros else [p[2] for p in parts],
            [p[5] for p in parts])


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"int{c[0]}-K{c[1]}-N{c[2]}-g{c[3]}-T{c[7]}-{c[11]}")
def test_emulated_moe_swap_kernel_matches_reference(case):
    bits, K, N, group, channelwise, with_zeros, dtype, T, k, E, grid, mode, splits, w2 = case
    if channelwise:
        group = 128 if K % 128 == 0 else 64
    gen = torch.Generator().manual_seed(77 + T + K + N)
    q, scales, zeros, packed = _experts(gen, E, bits, K, N, group, channelwise, with_zeros, dtype)
    # routing: uniform with replacement (duplicate ids in a row), one slot past E (dropped by the sort)
    ids = torch.randint(0, E, (T, k), generator=gen, dtype=torch.int32)
    ids[0, 0] = E
    sorted_ids, expert_ids, npp = align_reference(ids, E, BM, None)
    slots = T * k
    # w13: row = the slot's token (row_div = top_k), out row = the slot; w2: x rows are slots, out rows tokens
    row_div, out_div = (1, k) if w2 else (k, 1)
    x = torch.randn(slots if w2 else T, K, generator=gen).to(dtype)
    weights = torch.rand(slots, generator=gen, dtype=torch.float64) if w2 else None
    rows_out = T if w2 else slots
    segments = -(-(N // 64) // 4) * (int(npp) // BM)
    if mode == "split":
        grid = segments * splits
    out = emulate_moe_swap(x, packed, scales, zeros, sorted_ids, expert_ids, npp, num_slots=slots, row_div=row_div,
                           out_div=out_div, weights=weights, bits=bits, group=group, channelwise=channelwise,
                           dtype=dtype, grid=grid, mode=mode, splits=splits, rows_out=rows_out)
    fold = de.use_fold(bits, group, channelwise, 1, K, N)
    flat = ids.reshape(-1).long()
    ref = torch.zeros(slots, N, dtype=torch.float64)
    for s in range(slots):
        e = int(flat[s])
        if e < E:
            ref[s] = de.reference(x[s // row_div][None], q[e], scales[e], None if zeros is None else zeros[e], None,
                                  bits=bits, group=group, channelwise=channelwise, dtype=dtype,
                                  round_weights=not fold)[0]
    if weights is not None:
        ref *= weights[:, None]
    if mode == "split":
        real = flat < E
        assert not torch.isnan(out[:, real]).any(), "a piece of a real slot was never written"
        got = out[:, real].sum(0)
        torch.testing.assert_close(got, ref[real], rtol=1e-9, atol=1e-9)
        return
    want = torch.zeros(rows_out, N, dtype=torch.float64).index_add_(0, torch.arange(slots) // out_div, ref)
    assert not torch.isnan(out).any(), "a padding slot or another block's token leaked into the output"
    torch.testing.assert_close(out, want, rtol=1e-9, atol=1e-9)


def emulate_align_sort_warp(e_of_slot, num_experts, bm):
    """kernels/moe/moe_align.cuh align_sort_warp, lane by lane: slot s on lane s (<= 32 slots), e_of_slot the
    local expert of each slot (-1: left out). Returns (sorted_ids, expert_ids, num_post_pad) as the kernel
    writes them into buffers of moe_align's sizes."""
    slots = len(e_of_slot)
    e = [e_of_slot[lane] if lane < slots else -1 for lane in range(32)]
    peers = [sum(1 << j for j in range(32) if e[j] == e[lane]) for lane in range(32)]  # __match_any_sync
    cnt = [bin(m).count("1") for m in peers]
    padded = [(c + bm - 1) // bm * bm for c in cnt]
    leader = [e[lane] >= 0 and lane == (peers[lane] & -peers[lane]).bit_length() - 1 for lane in range(32)]
    length = slots + num_experts * (bm - 1)
    blocks = -(-length // bm)
    sorted_ids, expert_ids = [None] * length, [None] * blocks  # None: never written
    offs, total = [0] * 32, 0
    for j in range(32):
        if leader[j]:
            total += padded[j]
    for lane in range(32):
        offs[lane] = sum(padded[j] for j in range(32) if leader[j] and e[j] < e[lane])
    for lane in range(32):
        if e[lane] >= 0:
            sorted_ids[offs[lane] + bin(peers[lane] & ((1 << lane) - 1)).count("1")] = lane
        if leader[lane]:
            for i in range(offs[lane] + cnt[lane], offs[lane] + padded[lane]):
                sorted_ids[i] = slots
            for b in range(offs[lane] // bm, (offs[lane] + padded[lane]) // bm):
                expert_ids[b] = e[lane]
    for b in range(total // bm, blocks):
        expert_ids[b] = -1
    for i in range(total, length):
        sorted_ids[i] = slots
    return sorted_ids, expert_ids, total


@pytest.mark.parametrize("bm", [8, 16, 32, 64, 128, 256])
@pytest.mark.parametrize("T,k,E", [(1, 1, 8), (1, 8, 128), (4, 8, 128), (3, 6, 64), (16, 2, 8), (5, 4, 60), (0, 4, 8)])
def test_align_sort_warp_matches_the_contract(T, k, E, bm):
    """The one-warp sort (<= 32 slots) writes every entry of moe_align's outputs, equal to the contract's, with
    duplicates and left-out slots in the routing."""
    gen = torch.Generator().manual_seed(T * 131 + k * 7 + E + bm)
    ids = torch.randint(-1, E + 2, (T, k), generator=gen)  # -1 and E, E + 1: left out
    if T * k > 2:
        ids.view(-1)[1] = ids.view(-1)[0]  # a duplicate expert
    flat = ids.reshape(-1).tolist()
    local = [v if 0 <= v < E else -1 for v in flat]
    sorted_ids, expert_ids, npp = emulate_align_sort_warp(local, E, bm)
    ref_sorted, ref_experts, ref_npp = align_reference(ids.clamp(-1, E + 1), E, bm, None)
    assert None not in sorted_ids and None not in expert_ids
    assert npp == int(ref_npp)
    assert sorted_ids == ref_sorted.tolist() and expert_ids == ref_experts.tolist()
