"""CPU emulation of the decode kernels' index math (no GPU needed).

``emulate`` walks kernels/decode/decode_gemm.cuh (with decode/mainloop.cuh, epilogue.cuh) statement by statement for
every CTA, warp and lane: the flat unit ranges, the per-lane 16-byte weight,
activation and scale slots, the ldmatrix.x4 row addresses, the ldmatrix
broadcasts of the staged scale rows, the LOP3 dequant bit tricks (kernels/common/dequant.cuh)
and the accumulator flush. The mma.sync / ldmatrix register layouts are
encoded once, from the PTX ISA, in ``_ldmatrix_x4`` and ``_mma``. If the
emulated output equals the fp64 reference, every index the kernel computes
lands where the packed format (format.locate) and the tensor core expect it.

Rows of x the kernel never stages are filled with NaN here (the kernel zeroes
them, or leaves stale rows from an earlier segment): any leak of a padding
row into a stored output shows up as NaN.

Both activation staging modes of gemm_kernel are emulated (decode_config.h
kShareActs): lane-local (every lane copies its own ldmatrix rows) and shared
(the CTA's 128 threads copy the unit's tile once into a 128-byte-swizzled
region, every warp ldmatrix-reads it; the warps walk the whole CTA range and a
warp without a column in a short last quad skips its MMAs and flush).
"""

from __future__ import annotations

import math

import pytest
import torch

from swordfish_backend import format as fmt

LANES = torch.arange(32)


# ----------------------------------------------------------------------------- bit-level dequant


def _round(v: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """One rounding of exact float64 values to dtype (what a single fma does)."""
    return v.to(dtype).to(torch.float64)


def _half_value(bits16: int, dtype: torch.dtype) -> float:
    b = bits16 & 0xFFFF
    return torch.tensor([b - 65536 if b >= 32768 else b], dtype=torch.int16).view(dtype).item()


def _halves(word: int, dtype: torch.dtype) -> tuple[float, float]:
    return _half_value(word & 0xFFFF, dtype), _half_value(word >> 16, dtype)


def _fma2(a: int, b: int, c: int, dtype: torch.dtype) -> tuple[float, float]:
    """fma.rn.{f16,bf16}x2 on packed bit patterns: exact product + sum, one rounding."""
    out = []
    for h in range(2):
        x = _halves(a, dtype)[h] * _halves(b, dtype)[h] + _halves(c, dtype)[h]
        out.append(_round(torch.tensor([x], dtype=torch.float64), dtype).item())
    return out[0], out[1]


def _lop3_and_or(a: int, b: int, c: int) -> int:
    return ((a & b) | c) & 0xFFFFFFFF


def _lop3_notand_or(a: int, b: int, c: int) -> int:
    return ((~a & b) | c) & 0xFFFFFFFF


def _prmt(a: int, b: int, sel: int) -> int:
    src = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    return sum(src[(sel >> (4 * i)) & 7] << (8 * i) for i in range(4))


def dequant_int4_word(q: int, bf16: bool) -> list[tuple[float, float]]:
    """kernels/common/dequant.cuh int4_pairs, instruction by instruction."""
    dt = torch.bfloat16 if bf16 else torch.float16
    if bf16:
        return [_fma2(_lop3_and_or(q >> (4 * i), 0x000F000F, 0x43004300), 0x3F803F80, 0xC308C308, dt) for i in range(4)]
    q8 = q >> 8
    return [
        _fma2(_lop3_and_or(q, 0x000F000F, 0x64006400), 0x3C003C00, 0xE408E408, dt),
        _fma2(_lop3_and_or(q, 0x00F000F0, 0x64006400), 0x2C002C00, 0xD480D480, dt),
        _fma2(_lop3_and_or(q8, 0x000F000F, 0x64006400), 0x3C003C00, 0xE408E408, dt),
        _fma2(_lop3_and_or(q8, 0x00F000F0, 0x64006400), 0x2C002C00, 0xD480D480, dt),
    ]


def dequant_int8_word(q: int, bf16: bool) -> list[tuple[float, float]]:
    """kernels/common/dequant.cuh int8_pairs, instruction by instruction."""
    dt = torch.bfloat16 if bf16 else torch.float16
    if bf16:
        out = []
        for x in (q, q >> 8):
            v = _lop3_and_or(x, 0x007F007F, 0x43004300)
            c = _lop3_notand_or(x, 0x00800080, 0x43004300)
            out.append(_fma2(c, 0xBF80BF80, v, dt))
        return out
    return [_fma2(_prmt(q, 0x64646464, sel), 0x3C003C00, 0xE480E480, dt) for sel in (0x4240, 0x4341)]


@pytest.mark.parametrize("bf16", [False, True], ids=["fp16", "bf16"])
def test_int4_magic_dequant_is_exact_for_every_code(bf16):
    for lo in range(16):
        for hi in range(16):
            # nibble i holds pair i's low half, nibble i + 4 its high half (format.h)
            for i in range(4):
                q = (lo << (4 * i)) | (hi << (4 * (i + 4)))
                assert dequant_int4_word(q, bf16)[i] == (lo - 8, hi - 8), (lo, hi, i)


@pytest.mark.parametrize("bf16", [False, True], ids=["fp16", "bf16"])
def test_int8_magic_dequant_is_exact_for_every_code(bf16):
    for a in range(256):
        for b in (0, 1, 127, 128, 129, 254, 255, a ^ 0x5A):
            # pair 0 = bytes 0, 2; pair 1 = bytes 1, 3 (format.h kByteOfFragment8)
            assert dequant_int8_word(a | (b << 16), bf16)[0] == (a - 128, b - 128)
            assert dequant_int8_word((a << 8) | (b << 24), bf16)[1] == (a - 128, b - 128)


def test_dup_half_selectors():
    v = 0xBEEF1234
    assert _prmt(v, 0, 0x1010) == 0x12341234
    assert _prmt(v, 0, 0x3232) == 0xBEEFBEEF


# ----------------------------------------------------------------------------- PTX fragment layouts


def _ldmatrix_x4(slots: torch.Tensor) -> torch.Tensor:
    """ldmatrix.sync.m8n8.x4.b16: slots (32 lanes, 8) = the 16 B row each lane addresses.

    Matrix i takes its rows r = 0..7 from lanes 8 i + r; register i of lane T
    holds row T / 4, elements 2 (T % 4), 2 (T % 4) + 1 of matrix i.
    Returns (32 lanes, 4 registers, 2 halves).
    """
    out = torch.empty(32, 4, 2, dtype=slots.dtype)
    for i in range(4):
        rows = slots[8 * i: 8 * i + 8]  # (8, 8)
        out[:, i, :] = rows[LANES // 4].reshape(32, 4, 2)[torch.arange(32), LANES % 4]
    return out


def _mma(acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """mma.sync.m16n8k16.row.col, in place: acc (32, 4), a (32, 4, 2), b (32, 2, 2).

    A: a0 = (row g, k 2t..2t+1), a1 = (row g+8, k 2t..), a2 = (row g, k 2t+8..),
    a3 = (row g+8, k 2t+8..); B: b0 = (k 2t, 2t+1; col g), b1 = (k 2t+8, 2t+9; col g);
    C/D: c0, c1 = (row g, cols 2t, 2t+1), c2, c3 = (row g+8, same cols). g = lane/4, t = lane%4.
    """
    g, t = LANES // 4, LANES % 4
    A = torch.empty(16, 16, dtype=torch.float64)
    B = torch.empty(16, 8, dtype=torch.float64)
    for e in range(2):
        A[g, 2 * t + e] = a[:, 0, e]
        A[g + 8, 2 * t + e] = a[:, 1, e]
        A[g, 2 * t + 8 + e] = a[:, 2, e]
        A[g + 8, 2 * t + 8 + e] = a[:, 3, e]
        B[2 * t + e, g] = b[:, 0, e]
        B[2 * t + 8 + e, g] = b[:, 1, e]
    D = A @ B
    acc[:, 0] += D[g, 2 * t]
    acc[:, 1] += D[g, 2 * t + 1]
    acc[:, 2] += D[g + 8, 2 * t]
    acc[:, 3] += D[g + 8, 2 * t + 1]


# ----------------------------------------------------------------------------- the kernel, emulated


def plan_tiles(M: int) -> tuple[int, int]:
    """(MT, mgroups) exactly as decode_launch.cu make_plan."""
    if M <= 64:
        return -(-M // 16), 1
    mg = -(-M // 64)
    return -(-M // (16 * mg)), mg


RAW_OFFSET = {(4, True): 136.0, (4, False): 0.0, (8, True): 0.0, (8, False): 1152.0}  # dequant::kRawOffset


FOLD_MAX_TILES = 2  # decode_config.h kFoldMaxTiles
FOLD_MT2_MAX_WEIGHTS_PER_SM = 1 << 19  # decode_config.h kFoldMt2MaxWeightsPerSm


def use_fold(bits, group, channelwise, MT, K, N, sms=132):
    """decode_launch.cu use_fold (the emulated problems are small: MT = 2 folds on any SM count)."""
    if MT > FOLD_MAX_TILES or not (channelwise or bits == 8 or group >= 64):
        return False
    return MT == 1 or K * N <= FOLD_MT2_MAX_WEIGHTS_PER_SM * sms


def test_mirrored_constants_match_the_header(tmp_path):
    """The launcher constants this emulation mirrors are decode_config.h's (compiled here)."""
    import host_cxx

    program = r"""
#include <cstdio>
#include "kernels/decode/decode_config.h"
using namespace swordfish::decode;
int main() { std::printf("%d %lld %d %d\n", kFoldMaxTiles, kFoldMt2MaxWeightsPerSm, kSwapMaxM, kSwapRunsMinM); }
"""
    got = host_cxx.run(tmp_path, program, "decode_config.h").split()
    assert got == [str(FOLD_MAX_TILES), str(FOLD_MT2_MAX_WEIGHTS_PER_SM), str(SWAP_MAX_M), str(SWAP_RUNS_MIN_M)]


def swizzle_128(o: int) -> int:
    """decode/mainloop.cuh detail::swizzle_128: 16-byte chunk index in a 128-byte line XOR the line index mod 8."""
    return o ^ ((o >> 3) & 0x70)


def shared_tile_geometry(bits: int, MT: int):
    """gemm_kernel<SHARE>: (row bytes RB, chunks per row XC, rows per pass XR, passes NP, tile bytes)."""
    BK = fmt.block_k(bits)
    RB, XC = 2 * BK, BK // 8
    XR = 128 // XC
    return RB, XC, XR, -(-(MT * 16) // XR), MT * 16 * RB


def shared_writes(bits: int, MT: int):
    """(thread, pass, tile row, k offset, byte offset) of every 16-byte copy the CTA issues for one unit."""
    RB, XC, XR, NP, nbytes = shared_tile_geometry(bits, MT)
    out = []
    for tid in range(128):
        x_row, x_col = tid // XC, (tid % XC) * 8
        for i in range(NP):
            R = x_row + XR * i
            if R < MT * 16:
                out.append((tid, i, R, x_col, i * 2048 + swizzle_128(tid * 16)))
    return out


def shared_reads(bits: int, MT: int):
    """{(mt, sl): byte offsets (32 lanes) of the ldmatrix.x4 row addresses} in the shared tile."""
    RB = shared_tile_geometry(bits, MT)[0]
    a_row = (LANES & 7) + ((LANES >> 3) & 1) * 8
    a_col = (LANES >> 4) * 8
    x_lane = [swizzle_128(int(r) * RB) ^ (int(c) * 2) for r, c in zip(a_row, a_col)]
    return {(mt, sl): [mt * 16 * RB + (x ^ (sl * 32)) for x in x_lane]
            for mt in range(MT) for sl in range(fmt.block_k(bits) // 16)}


def stage_shared(xs, M, bits, MT, mg, kb):
    """The activation slots (MT, NS, 32 lanes, 8) as each lane's ldmatrix reads them from the shared tile."""
    BK = fmt.block_k(bits)
    nbytes = shared_tile_geometry(bits, MT)[4]
    smem = torch.full((nbytes // 16, 8), float("nan"), dtype=torch.float64)
    for _tid, _i, R, x_col, off in shared_writes(bits, MT):
        row = mg * MT * 16 + R
        if row < M:
            k = kb * BK + x_col
            smem[off // 16] = xs[row, k: k + 8]
    act = torch.empty(MT, BK // 16, 32, 8, dtype=torch.float64)
    for (mt, sl), offs in shared_reads(bits, MT).items():
        act[mt, sl] = smem[torch.tensor(offs) // 16]
    return act


def first_cta(u, units, grid):
    """decode_config.h first_cta: the CTA of a balanced split whose range holds flat unit u."""
    return ((u + 1) * grid - 1) // units


def max_pieces(kblocks, units, grid):
    """decode_config.h max_pieces: the fp32 planes a kModePartials launch allocates."""
    return min(grid, (kblocks - 1) * grid // units + 2)


def test_first_cta_inverts_the_split_and_max_pieces_bounds_every_segment():
    """first_cta(u) is the CTA whose balanced range holds u, and no segment has more pieces than the
    planes the launcher allocates (max_pieces), over segment lengths and grids around the atomic mode's
    (at least kMinUnitsPerCta = 4 units per CTA) and the degenerate ones below it."""
    for KB in (1, 2, 3, 7, 64, 128, 448):
        for segs in (1, 2, 3, 5, 224):
            units = KB * segs
            for grid in sorted({1, 2, 3, 7, 132, 396, units // 4 or 1, units}):
                if grid > units:
                    continue
                starts = [b * units // grid for b in range(grid + 1)]
                for u in {0, units - 1, units // 2, KB - 1, KB % units}:
                    b = first_cta(u, units, grid)
                    assert starts[b] <= u < starts[b + 1], (u, units, grid)
                most = max(first_cta(s * KB + KB - 1, units, grid) - first_cta(s * KB, units, grid) + 1
                           for s in range(segs))
                assert most <= max_pieces(KB, units, grid), (KB, segs, grid)


def _outputs(M, N, mode, bias, KB, units, grid):
    """The launch's output buffers: y (zeroed, or set to the bias by the prep kernel for atomic
    epilogues), direct-mode store counts, split-K pieces (NaN: what the reduce reads must be written)."""
    y = torch.zeros(M, N, dtype=torch.float64)
    if mode == "atomic" and bias is not None:
        y += bias.to(torch.float64)
    planes = max_pieces(KB, units, grid) if mode == "partials" else 0
    return y, torch.zeros(M, N, dtype=torch.int64), torch.full((planes, M, N), float("nan"), dtype=torch.float64)


def _cta_units(b, mode, grid, units, KB):
    """CTA b's flat unit range: segment b (direct), else an even share of all units (atomic, partials)."""
    if mode == "direct":
        return b * KB, (b + 1) * KB
    return b * units // grid, (b + 1) * units // grid


def _piece(mode, b, seg, KB, units, grid):
    """CTA b's plane for its piece of segment seg (kModePartials; decode_gemm.cuh detail::first_piece, epilogue.cuh piece_plane)."""
    return b - first_cta(seg * KB, units, grid) if mode == "partials" else 0


def _store_pair(mode, y, filled, partial, bias, part, rr, cc, v0, v1):
    """One output pair (row rr, columns cc, cc + 1) through an epilogue: red.add (atomic), a direct
    store with bias (direct, counted so that each output is stored once), or a split-K partial."""
    if mode == "atomic":
        y[rr, cc] += v0
        y[rr, cc + 1] += v1
    elif mode == "direct":
        bb = (0.0, 0.0) if bias is None else (float(bias[cc]), float(bias[cc + 1]))
        y[rr, cc], y[rr, cc + 1] = v0 + bb[0], v1 + bb[1]
        filled[rr, cc] += 1
        filled[rr, cc + 1] += 1
    else:
        partial[part, rr, cc] = v0
        partial[part, rr, cc + 1] = v1


def _red_row_runs(y, rows, col0, w, M):
    """gemm_kernel's atomic flush of one accumulator row half (epilogue.cuh detail::red_row_runs): w[lane][c] is the
    lane's packed pair (columns 8 c + 2 t, + 1 of row rows[lane]); two butterfly rounds (lane ^ 1,
    lane ^ 2) exactly as the kernel does them, then each lane adds two 8-column runs."""
    t = [lane & 3 for lane in range(32)]
    d = [[None] * 4 for _ in range(32)]
    for k in range(4):
        send = [w[lane][2 * k] if t[lane] & 1 else w[lane][2 * k + 1] for lane in range(32)]
        for lane in range(32):
            recv = send[lane ^ 1]
            d[lane][k] = (recv, w[lane][2 * k + 1]) if t[lane] & 1 else (w[lane][2 * k], recv)
    for m in range(2):
        send = [d[lane][2 * m] if t[lane] & 2 else d[lane][2 * m + 1] for lane in range(32)]
        for lane in range(32):
            recv = send[lane ^ 2]
            run = (recv, d[lane][2 * m + 1]) if t[lane] & 2 else (d[lane][2 * m], recv)
            r = int(rows[lane])
            if r >= M:
                continue
            c0 = col0 + 8 * (4 * m + t[lane])
            for i, (v0, v1) in enumerate((*run[0], *run[1])):  # four packed pairs: columns c0 .. c0 + 7
                y[r, c0 + 2 * i] += v0
                y[r, c0 + 2 * i + 1] += v1


def _swap_runs(y, acc, col0, M):
    """swap_kernel's atomic flush from M = kSwapRunsMinM: lane (g, t) packs column 8 r + g (r = 2 m + h:
    acc[m][2h], acc[m][2h + 1], tokens 2t, 2t + 1), detail::transpose_runs exchanges the words in three
    butterfly rounds (lane ^ 4, ^ 8, ^ 16) exactly as the kernel does, and each lane adds run g
    (columns 8 g .. 8 g + 7) of each of its tokens that exist."""
    w = [[(acc[r >> 1, lane, 2 * (r & 1)].item(), acc[r >> 1, lane, 2 * (r & 1) + 1].item()) for r in range(8)]
         for lane in range(32)]
    for b in range(3):
        mask = 1 << b
        upper = [((lane >> 2) >> b) & 1 for lane in range(32)]
        send = [[w[lane][r] if upper[lane] else w[lane][r | mask] for r in range(8)] for lane in range(32)]
        new = [row[:] for row in w]
        for lane in range(32):
            for r in range(8):
                if r & mask:
                    continue
                recv = send[lane ^ (4 << b)][r]
                if upper[lane]:
                    new[lane][r] = recv
                else:
                    new[lane][r | mask] = recv
        w = new
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for k in range(2):
            if 2 * t + k < M:
                for r in range(8):
                    y[2 * t + k, col0 + 8 * g + r] += w[lane][r][k]


def _finish(mode, y, filled, partial, bias, KB, units, grid, rows_per_mgroup):
    """The result of an emulated launch: reduce_kernel's sums for partials (each output's segment's
    pieces, in CTA order, counted with first_cta as the kernel counts them); direct mode checked."""
    if mode == "partials":
        M, N = y.shape
        MG = -(-M // rows_per_mgroup)
        y = torch.zeros(M, N, dtype=torch.float64)
        for q in range(-(-N // 256)):
            for mg in range(MG):
                seg = q * MG + mg
                pieces = first_cta(seg * KB + KB - 1, units, grid) - first_cta(seg * KB, units, grid) + 1
                rows, cols = slice(mg * rows_per_mgroup, (mg + 1) * rows_per_mgroup), slice(256 * q, 256 * (q + 1))
                for piece in range(pieces):
                    y[rows, cols] += partial[piece, rows, cols]
        y += 0 if bias is None else bias.to(torch.float64)
    if mode == "direct":
        assert int(filled.min()) == 1 and int(filled.max()) == 1, "direct mode must store every output exactly once"
    return y


def emulate(x, packed, scales, zeros, bias, *, bits, group, channelwise, dtype, grid, mode="atomic", share=False):
    """y (M, N) float64 as decode_gemm.cuh computes it (fp32 accumulation emulated in fp64).

    share: gemm_kernel<..., SHARE = true> (kShareActs), else the lane-local staging.

    MT <= FOLD_MAX_TILES problems take the FOLD kernel when the launcher would: raw
    values into the MMA, the scale applied per group (decode_gemm.cuh fold()).
    This is gemm_kernel; the launcher runs M <= 8 on swap_kernel instead
    (emulate_swap below), so the M <= 8 cases here keep gemm_kernel's index
    math checked for kSwapEnabled = false.
    """
    M, K = x.shape
    N = scales.shape[1]
    BK = fmt.block_k(bits)
    NS = BK // 16
    KB, ncols = K // BK, N // 64
    quads = -(-ncols // 4)
    MT, MG = plan_tiles(M)
    units = quads * MG * KB
    gshift = 31 if channelwise else int(math.log2(group))
    fold = use_fold(bits, group, channelwise, MT, K, N)
    fold_mask = ((128 if channelwise else group) // BK - 1) if fold else 0
    offset = RAW_OFFSET[(bits, dtype == torch.bfloat16)]
    row_sums = fold and (offset != 0.0 or zeros is not None)
    words = packed.reshape(-1).to(torch.int64) & 0xFFFFFFFF  # uint32 words
    xs = x.to(torch.float64)
    sflat = scales.to(torch.float64).reshape(-1)
    zflat = None if zeros is None else zeros.to(torch.float64).reshape(-1)
    y, filled, partial = _outputs(M, N, mode, bias, KB, units, grid)
    bf16 = dtype == torch.bfloat16
    a_row = (LANES & 7) + ((LANES >> 3) & 1) * 8
    a_col = (LANES >> 4) * 8
    g, t = LANES // 4, LANES % 4

    for b in range(grid):
        cta_u0, cta_u1 = _cta_units(b, mode, grid, units, KB)
        for warp in range(4):
            if share:  # every warp walks the CTA's whole range
                u0, u1 = cta_u0, cta_u1
            else:
                warp_quads = (ncols - warp + 3) >> 2
                u0, u1 = cta_u0, min(cta_u1, warp_quads * MG * KB)
            if u0 >= u1:
                continue
            n = u1 - u0
            seg0 = u0 // KB
            kb0, mg0, q0 = u0 - seg0 * KB, seg0 % MG, seg0 // MG

            # producer: the stages, in issue order
            stages = []
            p_kb, p_mg, p_q = kb0, mg0, q0
            for _ in range(n):
                col = min(4 * p_q + warp, ncols - 1) if share else 4 * p_q + warp  # shared: short quad re-streams
                wbase = ((col * KB + p_kb) * 2048 + LANES * 16) // 4  # word index of this lane's 16 B in sub-tile 0
                wv = torch.stack([words[(wbase + s * 128)[:, None] + torch.arange(4)] for s in range(4)])  # (4, 32, 4)
                if share:
                    act = stage_shared(xs, M, bits, MT, p_mg, p_kb)
                else:
                    row0 = p_mg * MT * 16 + a_row
                    act = torch.full((MT, NS, 32, 8), float("nan"), dtype=torch.float64)
                    for mt in range(MT):
                        r = row0 + 16 * mt
                        for sl in range(NS):
                            k = p_kb * BK + sl * 16 + a_col
                            for lane in range(32):
                                if r[lane] < M:
                                    act[mt, sl, lane] = xs[r[lane], k[lane]: k[lane] + 8]
                k0 = p_kb * BK
                srows = []
                for r in range(2 if bits == 4 else 1):
                    off = ((k0 + r * 32) >> gshift) * N + col * 64 + 2 * LANES
                    srows.append((sflat[off], sflat[off + 1],
                                  None if zflat is None else (zflat[off], zflat[off + 1])))
                stages.append((wv, act, srows))
                p_kb += 1
                if p_kb == KB:
                    p_kb = 0
                    p_mg += 1
                    if p_mg == MG:
                        p_mg, p_q = 0, p_q + 1

            def expand(pair):
                lo, hi = pair
                src = 4 * torch.arange(8)[None, :] + (LANES >> 3)[:, None]  # (lane, tile): source lane
                odd = ((LANES >> 2) & 1).bool()[:, None]
                return torch.where(odd, hi[src], lo[src])  # (32, 8) the column's scale for each tile

            acc = torch.zeros(MT, 8, 32, 4, dtype=torch.float64)
            raw = torch.zeros(MT, 8, 32, 4, dtype=torch.float64)
            xsum = torch.zeros(MT, 32, 4, dtype=torch.float64)  # the kernel's xs[]: row sums of x per group
            ones = torch.ones(32, 2, 2, dtype=torch.float64)
            seg_left, c_q, c_mg = min(KB - kb0, n), q0, mg0
            c_kb = kb0
            for it in range(n):
                wv, act, srows = stages[it]
                c_col = 4 * c_q + warp < ncols  # always true lane-local (the range was cut)
                if not c_col:  # shared: no MMAs, no flush; the k-block and segment cursors still advance
                    if fold:
                        c_kb = 0 if c_kb + 1 == KB else c_kb + 1
                    seg_left -= 1
                    if seg_left == 0:
                        c_mg += 1
                        if c_mg == MG:
                            c_mg, c_q = 0, c_q + 1
                        seg_left = min(KB, n - it - 1)
                    continue
                if fold and (c_kb & fold_mask) == 0:  # FRESH: the group's first MMAs overwrite raw and the sums
                    raw.zero_()
                    xsum.zero_()
                for sl in range(NS):
                    row = 1 if (bits == 4 and sl >= 2 and gshift == 5) else 0
                    sp = expand(srows[row][:2])
                    zp = None if srows[row][2] is None else expand(srows[row][2])
                    a = [_ldmatrix_x4(act[mt, sl]) for mt in range(MT)]

                    def frag(values, tile):  # (32 lanes, 2 halves) -> dequantized pair
                        s = sp[:, tile][:, None]
                        v = values * s + (0 if zp is None else zp[:, tile][:, None])
                        return _round(v, dtype)

                    def rawv(values):  # dequant::int4_raw / int8_raw: (q - B) + offset, exact
                        return values.to(torch.float64) + offset

                    if fold and row_sums:
                        for mt in range(MT):
                            _mma(xsum[mt], a[mt], ones)
                    if bits == 4:
                        for j in range(4):
                            w = wv[sl, :, j]
                            pairs = []
                            for i in range(4):
                                lo = ((w >> (4 * i)) & 0xF) - 8
                                hi = ((w >> (16 + 4 * i)) & 0xF) - 8
                                pairs.append(torch.stack([lo, hi], 1).to(torch.float64))
                            if fold:
                                for mt in range(MT):
                                    _mma(raw[mt, 2 * j], a[mt], torch.stack([rawv(pairs[0]), rawv(pairs[1])], 1))
                                    _mma(raw[mt, 2 * j + 1], a[mt], torch.stack([rawv(pairs[2]), rawv(pairs[3])], 1))
                                continue
                            b0, b1 = frag(pairs[0], 2 * j), frag(pairs[1], 2 * j)
                            b2, b3 = frag(pairs[2], 2 * j + 1), frag(pairs[3], 2 * j + 1)
                            for mt in range(MT):
                                _mma(acc[mt, 2 * j], a[mt], torch.stack([b0, b1], 1))
                                _mma(acc[mt, 2 * j + 1], a[mt], torch.stack([b2, b3], 1))
                    else:
                        for h in range(2):
                            for j in range(4):
                                c = 4 * h + j
                                w = wv[2 * sl + h, :, j]
                                byte = [((w >> (8 * i)) & 0xFF) - 128 for i in range(4)]
                                p0 = torch.stack([byte[0], byte[2]], 1).to(torch.float64)
                                p1 = torch.stack([byte[1], byte[3]], 1).to(torch.float64)
                                if fold:
                                    for mt in range(MT):
                                        _mma(raw[mt, c], a[mt], torch.stack([rawv(p0), rawv(p1)], 1))
                                    continue
                                b0, b1 = frag(p0, c), frag(p1, c)
                                for mt in range(MT):
                                    _mma(acc[mt, c], a[mt], torch.stack([b0, b1], 1))
                if fold:
                    group_end = ((c_kb + 1) & fold_mask) == 0
                    c_kb = 0 if c_kb + 1 == KB else c_kb + 1
                    if group_end or seg_left == 1:
                        # accumulator [c][i] of lane (g, t) is output column 8c + 2t + (i & 1)
                        lo, hi, z = srows[0]
                        sp = _scale_pairs(lo, hi)
                        zp = None if z is None else _scale_pairs(*z)
                        for mt in range(MT):
                            for c in range(8):
                                col_s = torch.stack([sp[:, c, 0], sp[:, c, 1], sp[:, c, 0], sp[:, c, 1]], 1)
                                acc[mt, c] += col_s * (raw[mt, c] - offset * xsum[mt])
                                if zp is not None:
                                    col_z = torch.stack([zp[:, c, 0], zp[:, c, 1], zp[:, c, 0], zp[:, c, 1]], 1)
                                    acc[mt, c] += col_z * xsum[mt]
                        raw.fill_(float("nan"))  # stale until the next group's first MMAs overwrite them (mma_group)
                        xsum.fill_(float("nan"))
                seg_left -= 1
                if seg_left == 0:
                    colv = (4 * c_q + warp) * 64 + 2 * t
                    rowv = c_mg * MT * 16 + g
                    for mt in range(MT):
                        for h in range(2):
                            r = rowv + 16 * mt + 8 * h
                            if mode == "atomic":  # 8-column runs after two shuffle rounds
                                if c_mg * MT * 16 + 16 * mt + 8 * h < M:
                                    w = [[(acc[mt, c, lane, 2 * h], acc[mt, c, lane, 2 * h + 1]) for c in range(8)]
                                         for lane in range(32)]
                                    _red_row_runs(y, r, (4 * c_q + warp) * 64, w, M)
                                continue
                            for c in range(8):
                                for lane in range(32):
                                    if r[lane] >= M:
                                        continue
                                    rr, cc = int(r[lane]), int(colv[lane]) + 8 * c
                                    _store_pair(mode, y, filled, partial, bias,
                                                _piece(mode, b, c_q * MG + c_mg, KB, units, grid), rr, cc,
                                                acc[mt, c, lane, 2 * h], acc[mt, c, lane, 2 * h + 1])
                    acc.zero_()
                    c_mg += 1
                    if c_mg == MG:
                        c_mg, c_q = 0, c_q + 1
                    seg_left = min(KB, n - it - 1)
    return _finish(mode, y, filled, partial, bias, KB, units, grid, 16 * MT)


def reference(x, q, scales, zeros, bias, *, bits, group, channelwise, dtype, round_weights=True):
    """fp64 x @ W (+ bias); W rounded once to dtype (unrounded for the FOLD kernels, which never round W)."""
    K = x.shape[1]
    rows = torch.zeros(K, dtype=torch.int64) if channelwise else torch.arange(K) // group
    w = (q.to(torch.float64) - fmt.bias(bits)) * scales.to(torch.float64)[rows]
    if zeros is not None:
        w = w + zeros.to(torch.float64)[rows]
    if round_weights:
        w = _round(w, dtype)
    y = x.to(torch.float64) @ w
    if bias is not None:
        y = y + bias.to(torch.float64)
    return y


CASES = [
    # bits, M, K, N, group, channelwise, zeros, bias, dtype, grid (direct: one CTA per segment), mode
    (4, 1, 256, 256, 128, False, False, True, torch.bfloat16, 3, "atomic"),
    (4, 5, 192, 320, 64, False, True, False, torch.float16, 7, "atomic"),      # partial quad (5 columns)
    (4, 17, 128, 256, 32, False, True, True, torch.bfloat16, 2, "atomic"),     # MT 2, g32: two scale rows per unit
    (4, 33, 256, 128, 128, True, False, False, torch.float16, 5, "atomic"),    # MT 3, channelwise
    (4, 70, 128, 128, 64, False, False, True, torch.bfloat16, 3, "atomic"),    # 2 m-groups, MT 3
    (8, 1, 128, 256, 32, False, False, False, torch.bfloat16, 6, "atomic"),
    (8, 16, 96, 192, 32, False, True, True, torch.float16, 4, "atomic"),
    (8, 49, 128, 128, 64, True, True, False, torch.bfloat16, 2, "atomic"),     # MT 4
    (4, 3, 256, 320, 64, False, False, True, torch.bfloat16, 3, "partials"),  # a CTA across two segments
    (8, 9, 64, 256, 32, False, True, True, torch.float16, 1, "direct"),
    (4, 20, 128, 512, 128, False, False, True, torch.float16, 2, "direct"),
    # MT = 1 FOLD kernels (fp32 per-group scale): ranges that start and end mid-group
    (4, 2, 256, 256, 32, False, True, True, torch.bfloat16, 5, "atomic"),     # int4 g32: no FOLD
    (4, 4, 512, 256, 128, False, True, False, torch.bfloat16, 5, "atomic"),   # offset 136 + zero points
    (4, 1, 384, 192, 128, True, True, True, torch.bfloat16, 4, "atomic"),     # channelwise: folds every 128 rows
    (4, 6, 256, 320, 64, False, False, False, torch.float16, 3, "atomic"),    # offset 0
    (8, 7, 256, 128, 128, False, True, False, torch.float16, 3, "atomic"),    # offset 1152 + zeros, 4 units/group
    (8, 12, 256, 256, 64, False, True, True, torch.bfloat16, 3, "partials"),
    # MT = 2 FOLD kernels (kFoldMaxTiles): two tiles' raw sums and row sums, folded per group
    (4, 30, 512, 256, 128, False, True, True, torch.bfloat16, 5, "atomic"),   # offset 136 + zero points
    (8, 25, 256, 128, 128, False, True, False, torch.float16, 3, "atomic"),   # offset 1152 + zeros
    (4, 32, 384, 192, 128, True, False, False, torch.float16, 4, "partials"),  # channelwise, offset 0
    # short last quads with shared activations: warps without a column walk the range idle
    (4, 12, 256, 64 * 5, 128, False, False, True, torch.bfloat16, 3, "atomic"),  # 1 column in quad 1
    (8, 40, 128, 64 * 7, 32, False, True, True, torch.float16, 3, "atomic"),     # int8 MT 3: a half pass
    (8, 20, 128, 64 * 6, 128, False, False, False, torch.bfloat16, 0, "direct"),  # int8 MT 2
    (4, 100, 128, 64 * 5, 64, False, True, False, torch.float16, 2, "atomic"),   # 2 m-groups of MT 4
    (4, 100, 128, 64 * 5, 64, False, True, True, torch.float16, 5, "partials"),  # pieces across m-groups and quads
]


def _random_problem(gen, bits, M, K, N, group, channelwise, with_zeros, with_bias, dtype):
    """Codes, scales (channelwise: rows past 0 NaN, decode reads row 0 only), folded zero points, bias,
    activations and the packed weight of one emulation case."""
    q = torch.randint(0, 1 << bits, (K, N), generator=gen)
    ngroups = K // group
    scales = (torch.rand(ngroups, N, generator=gen) * 0.02 + 0.005).to(dtype)
    if channelwise:
        scales[1:] = float("nan")
    zeros = None
    if with_zeros:
        zeros = (torch.randn(ngroups, N, generator=gen) * 0.05).to(dtype)
        if channelwise:
            zeros[1:] = float("nan")
    bias = (torch.randn(N, generator=gen)).to(dtype) if with_bias else None
    x = torch.randn(M, K, generator=gen).to(dtype)
    packed = fmt.pack_reference(q, bits)
    return q, scales, zeros, bias, x, packed


@pytest.mark.parametrize("share", [False, True], ids=["lane_acts", "cta_acts"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"int{c[0]}-M{c[1]}-K{c[2]}-N{c[3]}-g{c[4]}-{c[10]}")
def test_emulated_kernel_matches_reference(case, share):
    bits, M, K, N, group, channelwise, with_zeros, with_bias, dtype, grid, mode = case
    gen = torch.Generator().manual_seed(1234 + M + K + N)
    q, scales, zeros, bias, x, packed = _random_problem(gen, bits, M, K, N, group, channelwise, with_zeros,
                                                        with_bias, dtype)
    if mode == "direct":
        grid = -(-(N // 64) // 4) * plan_tiles(M)[1]
    y = emulate(x, packed, scales, zeros, bias, bits=bits, group=group, channelwise=channelwise, dtype=dtype,
                grid=grid, mode=mode, share=share)
    fold = use_fold(bits, group, channelwise, plan_tiles(M)[0], K, N)
    ref = reference(x, q, scales, zeros, bias, bits=bits, group=group, channelwise=channelwise, dtype=dtype,
                    round_weights=not fold)
    assert not torch.isnan(y).any(), "a padding row or unwritten output leaked into y"
    torch.testing.assert_close(y, ref, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("MT", [1, 2, 3, 4])
@pytest.mark.parametrize("bits", [4, 8])
def test_shared_tile_copies_land_once_and_read_back_conflict_free(bits, MT):
    """The CTA's copies of one unit's activation tile (gemm_kernel<SHARE>) write every (row, 16-byte chunk)
    exactly once, inside the tile; each warp's 16-byte stores and each ldmatrix phase (8 row addresses)
    touch 8 distinct 16-byte bank groups; a warp's global reads are whole row pieces of contiguous threads;
    and every lane's ldmatrix row address holds the row and k chunk the PTX layout wants."""
    RB, XC, XR, NP, nbytes = shared_tile_geometry(bits, MT)
    assert XR * RB == 2048  # one pass = one 2 KB block (static_assert in the kernel)
    writes = shared_writes(bits, MT)
    offs = [w[4] for w in writes]
    assert len(offs) == MT * 16 * XC == len(set(offs))
    assert all(o % 16 == 0 and 0 <= o < nbytes for o in offs)
    where = {(R, c): o for _t, _i, R, c, o in writes}
    assert len(where) == len(writes)
    for i in range(NP):
        for w0 in range(0, 128, 32):
            warp = [w for w in writes if w[1] == i and w0 <= w[0] < w0 + 32]
            for ph in range(0, len(warp), 8):  # 128-bit stores: 4 phases of 8 threads
                banks = [(w[4] // 16) % 8 for w in warp[ph: ph + 8]]
                assert len(set(banks)) == len(banks), (i, w0, ph, banks)
            rows = {}
            for w in warp:  # coalesced: each row's chunks come from contiguous threads, in k order
                rows.setdefault(w[2], []).append((w[0], w[3]))
            for lst in rows.values():
                assert [c for _, c in lst] == list(range(0, 8 * XC, 8))
                assert [t for t, _ in lst] == list(range(lst[0][0], lst[0][0] + XC))
    a_row = (LANES & 7) + ((LANES >> 3) & 1) * 8
    a_col = (LANES >> 4) * 8
    for (mt, sl), lane_offs in shared_reads(bits, MT).items():
        for m in range(4):  # matrix m: rows from lanes 8 m .. 8 m + 7
            banks = [(o // 16) % 8 for o in lane_offs[8 * m: 8 * m + 8]]
            assert len(set(banks)) == 8, (mt, sl, m, banks)
        for lane in range(32):
            assert lane_offs[lane] == where[(16 * mt + int(a_row[lane]), 16 * sl + int(a_col[lane]))]


# ----------------------------------------------------------------------------- swapped operands (M <= 8)
#
# kernels/decode/decode_swap.cuh: y^T = W x^T, the weight as the m16 A operand
# (rows = output columns), up to 8 tokens as the n8 B operand.

SWAP_MAX_M = 8  # decode_config.h kSwapMaxM (the launcher takes swap_kernel for M <= 8)
SWAP_RUNS_MIN_M = 5  # decode_config.h kSwapRunsMinM (its atomic flush adds 16-byte runs from this M)


def _a_matrix(a: torch.Tensor) -> torch.Tensor:
    """The 16 x 16 A tile of mma.sync.m16n8k16 from its registers a (32 lanes, 4, 2), PTX ISA layout."""
    g, t = LANES // 4, LANES % 4
    A = torch.full((16, 16), float("nan"), dtype=torch.float64)
    for e in range(2):
        A[g, 2 * t + e] = a[:, 0, e].to(torch.float64)
        A[g + 8, 2 * t + e] = a[:, 1, e].to(torch.float64)
        A[g, 2 * t + 8 + e] = a[:, 2, e].to(torch.float64)
        A[g + 8, 2 * t + 8 + e] = a[:, 3, e].to(torch.float64)
    return A


def _int4_pairs(w: torch.Tensor) -> list[torch.Tensor]:
    """(q - 8) pairs i = 0..3 of int4 words w (32,): pair i = nibbles i (lo half), i + 4 (hi half)."""
    return [torch.stack([((w >> (4 * i)) & 0xF) - 8, ((w >> (16 + 4 * i)) & 0xF) - 8], 1) for i in range(4)]


def _int8_pairs(w: torch.Tensor) -> list[torch.Tensor]:
    """(q - 128) pairs b0 (bytes 0, 2) and b1 (bytes 1, 3) of int8 words w (32,)."""
    byte = [((w >> (8 * i)) & 0xFF) - 128 for i in range(4)]
    return [torch.stack([byte[0], byte[2]], 1), torch.stack([byte[1], byte[3]], 1)]


def _swap_a_pairs(bits: int, wv: torch.Tensor, sl: int, m: int) -> list[torch.Tensor]:
    """decode_swap.cuh a_tile: registers (a0, a1, a2, a3) of m16 tile m, k16 slice sl, from the words wv (4, 32, 4)."""
    if bits == 4:
        p = _int4_pairs(wv[sl, :, m])
        return [p[0], p[2], p[1], p[3]]
    sub = wv[2 * sl + m // 2]
    c0, c1 = _int8_pairs(sub[:, 2 * (m % 2)]), _int8_pairs(sub[:, 2 * (m % 2) + 1])
    return [c0[0], c1[0], c0[1], c1[1]]


@pytest.mark.parametrize("bits", [4, 8])
def test_swap_a_fragment_is_the_weight_tile(bits):
    """The LOP3 / PRMT pairs of format v1 words, taken as (a0, a1, a2, a3), are W[16m .. 16m + 15, k16 slice]."""
    gen = torch.Generator().manual_seed(99 + bits)
    BK = fmt.block_k(bits)
    q = torch.randint(0, 1 << bits, (BK, 64), generator=gen)
    words = fmt.pack_reference(q, bits).reshape(-1).to(torch.int64) & 0xFFFFFFFF
    wv = torch.stack([words[(LANES * 4 + 128 * s)[:, None] + torch.arange(4)] for s in range(4)])  # (4, 32, 4)
    wt = (q - fmt.bias(bits)).t().to(torch.float64)  # (n, k): A rows are output columns
    for sl in range(BK // 16):
        for m in range(4):
            a = torch.stack(_swap_a_pairs(bits, wv, sl, m), 1)  # (32, 4, 2)
            A = _a_matrix(a)
            assert torch.equal(A, wt[16 * m: 16 * m + 16, 16 * sl: 16 * sl + 16]), (sl, m)


def test_swap_b_fragment_from_ldmatrix():
    """Non-transposed ldmatrix.x4 of the (8 tokens, k32) slice staged lane l = (token l % 8, k 8 (l / 8) ..)
    yields b0 = x[g][2t, 2t+1], b1 = x[g][2t+8, 2t+9] of k16 slice 0 (registers 0, 1) and slice 1 (2, 3)."""
    x = torch.arange(8 * 32, dtype=torch.float64).reshape(8, 32)
    slots = torch.stack([x[l % 8, 8 * (l // 8): 8 * (l // 8) + 8] for l in range(32)])
    regs = _ldmatrix_x4(slots)
    g, t = LANES // 4, LANES % 4
    for h in range(2):
        for e in range(2):
            assert torch.equal(regs[:, 2 * h, e], x[g, 16 * h + 2 * t + e])
            assert torch.equal(regs[:, 2 * h + 1, e], x[g, 16 * h + 2 * t + 8 + e])


def _scale_pairs(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """decode_gemm.cuh scale_pairs: (32 lanes, 8 tiles, 2) the scales of columns 8 c + 2 t, + 1, from
    the staged row (lane l staged columns 2 l, 2 l + 1), read with two ldmatrix.x4 whose lane L
    addresses the 16-byte run of columns 8 (L / 8) .. (+ 32 for the second)."""
    row = torch.stack([lo, hi], dim=1).reshape(64)
    runs = [row[(8 * ((LANES >> 3) + 4 * k))[:, None] + torch.arange(8)] for k in range(2)]
    return torch.cat([_ldmatrix_x4(r) for r in runs], dim=1)


def _ldmatrix_x4_trans(slots: torch.Tensor) -> torch.Tensor:
    """ldmatrix.sync.m8n8.x4.trans.b16: slots (32 lanes, 8) = the 16 B row each lane addresses.

    Matrix i takes its rows r = 0..7 from lanes 8 i + r; transposed, register i of lane T holds
    (row 2 (T % 4), row 2 (T % 4) + 1) of column T / 4 of matrix i. Returns (32 lanes, 4 registers, 2 halves).
    """
    out = torch.empty(32, 4, 2, dtype=slots.dtype)
    for i in range(4):
        rows = slots[8 * i: 8 * i + 8]  # (8 rows, 8 columns)
        for e in range(2):
            out[:, i, e] = rows[2 * (LANES % 4) + e, LANES // 4]
    return out


def _expand(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """decode_gemm.cuh scale_columns / expand_row: (32 lanes, 8) the scale of column 8 c + g for
    c = 0..7, from the staged row (lane l staged columns 2 l, 2 l + 1 = lo[l], hi[l]), read with
    one ldmatrix.x4.trans whose lane L addresses the 16-byte run 32 (L / 8) + 16 (L % 2)."""
    row = torch.stack([lo, hi], dim=1).reshape(64)
    run = 8 * (2 * (LANES >> 3) + (LANES & 1))  # first column of lane L's 16-byte run
    regs = _ldmatrix_x4_trans(row[run[:, None] + torch.arange(8)])
    return regs.reshape(32, 8)  # register j = (tile 2 j, tile 2 j + 1)


def test_scale_pairs_from_ldmatrix():
    """The two broadcast ldmatrix.x4 hand lane (g, t) the scales of columns 8 c + 2 t, + 1, c = 0..7."""
    lo, hi = torch.arange(0, 64, 2).double(), torch.arange(1, 64, 2).double()
    pairs = _scale_pairs(lo, hi)
    first = 8 * torch.arange(8)[None, :] + 2 * (LANES & 3)[:, None]
    assert torch.equal(pairs[:, :, 0], first.double())
    assert torch.equal(pairs[:, :, 1], (first + 1).double())


def test_scale_columns_from_ldmatrix_trans():
    """The transposed ldmatrix hands lane (g, t) the scales of columns 8 c + g, c = 0..7."""
    lo, hi = torch.arange(0, 64, 2).double(), torch.arange(1, 64, 2).double()
    cols = _expand(lo, hi)
    assert torch.equal(cols, (8 * torch.arange(8)[None, :] + (LANES >> 2)[:, None]).double())


class SwapRegisters:
    """One warp's registers in decode_swap.cuh swap_mainloop: acc / raw (4 m16 tiles x 32 lanes x 4) and the
    FOLD row sums, with the loop's consume (MMAs of one staged unit), fold (once per scale group) and the
    flush's exchange (detail::token_pairs)."""

    def __init__(self, bits, dtype, fold, row_sums, offset, gshift):
        self.bits, self.dtype, self.fold_on, self.row_sums, self.offset, self.gshift = (bits, dtype, fold, row_sums,
                                                                                       offset, gshift)
        self.acc = torch.zeros(4, 32, 4, dtype=torch.float64)
        self.raw = torch.zeros(4, 32, 4, dtype=torch.float64)
        self.xsum = torch.zeros(32, 4, dtype=torch.float64)
        self.ones_a = torch.ones(32, 4, 2, dtype=torch.float64)

    def consume(self, wv, act, srows):
        """The unit's MMAs: wv the lanes' weight words (4, 32, 4), act the staged activations (NS / 2, 32, 8),
        srows the scale (+ zero-point) rows of this lane's columns."""
        bits, NS = self.bits, fmt.block_k(self.bits) // 16
        xb = [_ldmatrix_x4(act[h]) for h in range(NS // 2)]
        for sl in range(NS):
            row = 1 if (bits == 4 and sl >= 2 and self.gshift == 5) else 0
            sp = _expand(*srows[row][:2])
            zp = None if srows[row][2] is None else _expand(*srows[row][2])
            bfr = xb[sl // 2][:, 2 * (sl % 2): 2 * (sl % 2) + 2]  # (32, 2 regs, 2 halves)
            if self.fold_on and self.row_sums:
                _mma(self.xsum, self.ones_a, bfr)
            for m in range(4):
                regs = _swap_a_pairs(bits, wv, sl, m)
                if self.fold_on:
                    a = torch.stack([r.to(torch.float64) + self.offset for r in regs], 1)
                    _mma(self.raw[m], a, bfr)
                else:
                    a = []
                    for i, r in enumerate(regs):  # rows g (a0, a2): tile 2m; rows g + 8 (a1, a3): tile 2m + 1
                        c = 2 * m + (i & 1)
                        v = r.to(torch.float64) * sp[:, c][:, None] + (0 if zp is None else zp[:, c][:, None])
                        a.append(_round(v, self.dtype))
                    _mma(self.acc[m], torch.stack(a, 1), bfr)

    def unit(self, stage, kb, seg_last, KB, fold_mask):
        """The loop's step for one unit: consume stage = (wv, act, srows) at k-block kb, and under FOLD fold
        at a group's end or the segment's last unit (seg_last). Returns the next unit's k-block."""
        wv, act, srows = stage
        if self.fold_on and (kb & fold_mask) == 0:  # FRESH: the group's first MMAs overwrite raw and the sums
            self.raw.zero_()
            self.xsum.zero_()
        self.consume(wv, act, srows)
        if not self.fold_on:
            return kb
        if ((kb + 1) & fold_mask) == 0 or seg_last:
            self.fold(srows)
        return 0 if kb + 1 == KB else kb + 1

    def fold(self, srows):
        """FOLD: acc += s * (raw - offset * xsum) (+ z * xsum) with the group's scale row."""
        sp = _expand(*srows[0][:2])
        zp = None if srows[0][2] is None else _expand(*srows[0][2])
        for m in range(4):
            for i in range(4):
                c = 2 * m + i // 2
                self.acc[m, :, i] += sp[:, c] * (self.raw[m, :, i] - self.offset * self.xsum[:, i])
                if zp is not None:
                    self.acc[m, :, i] += zp[:, c] * self.xsum[:, i]
        self.raw.fill_(float("nan"))  # stale until the next group's first MMAs overwrite them (mma_group)
        self.xsum.fill_(float("nan"))

    def token_pairs(self):
        """detail::token_pairs: (token of each lane, v[m][h] = (columns 16 m + 8 h + (g & ~1), + 1) per lane);
        acc cleared."""
        g, t = LANES // 4, LANES % 4
        odd = (g & 1).bool()
        v = [[None, None] for _ in range(4)]
        for m in range(4):
            for h in range(2):
                lo, hi = self.acc[m, :, 2 * h], self.acc[m, :, 2 * h + 1]
                other = torch.where(odd, lo, hi)[LANES ^ 4]  # shfl.bfly 4
                v[m][h] = (torch.where(odd, other, lo).clone(), torch.where(odd, hi, other).clone())
        self.acc.zero_()
        return 2 * t + odd.long(), v


def emulate_swap(x, packed, scales, zeros, bias, *, bits, group, channelwise, dtype, grid, mode="atomic"):
    """y (M, N) float64 as decode_swap.cuh computes it (M <= 8). Tokens >= M are NaN in the staged
    activations (the kernel leaves them zero): a leak into a stored output shows up as NaN."""
    M, K = x.shape
    assert 1 <= M <= SWAP_MAX_M
    N = scales.shape[1]
    BK = fmt.block_k(bits)
    NS = BK // 16
    KB, ncols = K // BK, N // 64
    quads = -(-ncols // 4)
    units = quads * KB
    gshift = 31 if channelwise else int(math.log2(group))
    fold = use_fold(bits, group, channelwise, 1, K, N)
    fold_mask = ((128 if channelwise else group) // BK - 1) if fold else 0
    offset = RAW_OFFSET[(bits, dtype == torch.bfloat16)]
    row_sums = fold and (offset != 0.0 or zeros is not None)
    words = packed.reshape(-1).to(torch.int64) & 0xFFFFFFFF
    xs = x.to(torch.float64)
    sflat = scales.to(torch.float64).reshape(-1)
    zflat = None if zeros is None else zeros.to(torch.float64).reshape(-1)
    y, filled, partial = _outputs(M, N, mode, bias, KB, units, grid)
    x_tok, x_col = LANES & 7, (LANES >> 3) * 8
    g = LANES // 4

    for b in range(grid):
        cta_u0, cta_u1 = _cta_units(b, mode, grid, units, KB)
        for warp in range(4):
            warp_quads = (ncols - warp + 3) >> 2
            u0, u1 = cta_u0, min(cta_u1, warp_quads * KB)
            if u0 >= u1:
                continue
            n = u1 - u0
            q0 = u0 // KB
            kb0 = u0 - q0 * KB

            stages = []
            p_kb, p_q = kb0, q0
            for _ in range(n):
                col = 4 * p_q + warp
                wbase = ((col * KB + p_kb) * 2048 + LANES * 16) // 4
                wv = torch.stack([words[(wbase + s * 128)[:, None] + torch.arange(4)] for s in range(4)])
                act = torch.full((NS // 2, 32, 8), float("nan"), dtype=torch.float64)
                for h in range(NS // 2):
                    for lane in range(32):
                        if x_tok[lane] < M:
                            k = p_kb * BK + int(x_col[lane]) + 32 * h
                            act[h, lane] = xs[x_tok[lane], k: k + 8]
                k0 = p_kb * BK
                srows = []
                for r in range(2 if bits == 4 else 1):
                    off = ((k0 + r * 32) >> gshift) * N + col * 64 + 2 * LANES
                    srows.append((sflat[off], sflat[off + 1], None if zflat is None else (zflat[off], zflat[off + 1])))
                stages.append((wv, act, srows))
                p_kb += 1
                if p_kb == KB:
                    p_kb, p_q = 0, p_q + 1

            regs = SwapRegisters(bits, dtype, fold, row_sums, offset, gshift)
            seg_left, c_q, c_kb = min(KB - kb0, n), q0, kb0
            for it in range(n):
                c_kb = regs.unit(stages[it], c_kb, seg_left == 1, KB, fold_mask)
                seg_left -= 1
                if seg_left == 0 and mode == "atomic" and M >= SWAP_RUNS_MIN_M:
                    _swap_runs(y, regs.acc, (4 * c_q + warp) * 64, M)
                    regs.acc.zero_()
                    c_q += 1
                    seg_left = min(KB, n - it - 1)
                elif seg_left == 0:
                    tok, v = regs.token_pairs()
                    colv = (4 * c_q + warp) * 64 + (g & ~1)
                    for m in range(4):
                        for h in range(2):
                            for lane in range(32):
                                if tok[lane] >= M:
                                    continue
                                rr, cc = int(tok[lane]), int(colv[lane]) + 16 * m + 8 * h
                                _store_pair(mode, y, filled, partial, bias, _piece(mode, b, c_q, KB, units, grid),
                                            rr, cc, v[m][h][0][lane].item(), v[m][h][1][lane].item())
                    c_q += 1
                    seg_left = min(KB, n - it - 1)
    return _finish(mode, y, filled, partial, bias, KB, units, grid, SWAP_MAX_M)


SWAP_CASES = [c for c in CASES if c[1] <= SWAP_MAX_M] + [
    # bits, M, K, N, group, channelwise, zeros, bias, dtype, grid (direct: one CTA per segment), mode
    (4, 8, 256, 320, 32, False, True, True, torch.float16, 5, "atomic"),       # g32 (no FOLD), two rows, full n8
    (8, 8, 128, 576, 64, False, False, True, torch.bfloat16, 4, "atomic"),     # 9 columns: partial quad
    (4, 7, 128, 256, -1, True, False, False, torch.float16, 0, "direct"),
    (8, 2, 256, 128, 32, False, True, True, torch.float16, 3, "partials"),
    (4, 1, 512, 128, 64, False, False, True, torch.bfloat16, 5, "partials"),   # pieces that split groups
    (4, 4, 256, 64 * 9, 128, False, True, False, torch.bfloat16, 7, "partials"),  # short last quad, 3 segments
]


@pytest.mark.parametrize("case", SWAP_CASES, ids=lambda c: f"int{c[0]}-M{c[1]}-K{c[2]}-N{c[3]}-g{c[4]}-{c[10]}")
def test_emulated_swap_kernel_matches_reference(case):
    bits, M, K, N, group, channelwise, with_zeros, with_bias, dtype, grid, mode = case
    if channelwise:
        group = 128 if K % 128 == 0 else 64
    gen = torch.Generator().manual_seed(4321 + M + K + N)
    q, scales, zeros, bias, x, packed = _random_problem(gen, bits, M, K, N, group, channelwise, with_zeros,
                                                        with_bias, dtype)
    if mode == "direct":
        grid = -(-(N // 64) // 4)
    y = emulate_swap(x, packed, scales, zeros, bias, bits=bits, group=group, channelwise=channelwise, dtype=dtype,
                     grid=grid, mode=mode)
    fold = use_fold(bits, group, channelwise, 1, K, N)
    ref = reference(x, q, scales, zeros, bias, bits=bits, group=group, channelwise=channelwise, dtype=dtype,
                    round_weights=not fold)
    assert not torch.isnan(y).any(), "a padding token or unwritten output leaked into y"
    torch.testing.assert_close(y, ref, rtol=1e-9, atol=1e-9)
