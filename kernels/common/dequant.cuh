// Magic-number dequantization of packed format v1 words straight into
// mma.sync B-fragment registers (format.h, docs/FORMAT.md "Inside a word").
//
// Device-only, header-only, no torch / CUTLASS / cuda_fp16.h: every value is a
// packed 16-bit pair in a uint32_t (low half = lower k row). The dtype is a
// bool template argument: BF16 = true for bf16x2, false for f16x2.
//
// Two steps, both exact where the reference is exact:
//   1. codes -> (q - B) as a packed pair (B = 8 int4, 128 int8): always exact,
//      proofs beside each routine.
//   2. scale(): (q - B) * s, or scale_zero(): (q - B) * s + zs, each with ONE
//      rounding to the dtype (a single fma), i.e. exactly the reference's
//      "exact fp32 value, rounded once" (swordfish_backend/reference.py).
//
// Constants (bit patterns, checked by tests/test_decode_layout.py):
//   bf16: 0x4300 = 128, 0x4380 = 256, 0xC308 = -136, 0x3F80 = 1, 0xBF80 = -1,
//         0x8000 = -0
//   fp16: 0x6400 = 1024, 0xE408 = -1032, 0xE480 = -1152, 0x3C00 = 1,
//         0x2C00 = 1/16, 0xD480 = -72
#pragma once

#include <cstdint>

#include "kernels/common/ptx.cuh"

namespace swordfish {
namespace dequant {

// lop3 truth tables (a = 0xF0, b = 0xCC, c = 0xAA).
inline constexpr int kAndOr = 0xEA;     // (a & b) | c
inline constexpr int kNotAndOr = 0xAE;  // (~a & b) | c

// ---------------------------------------------------------------- int4

// One int4 word -> its four fragment pairs as exact (q - 8) values:
//   w[0] = b0 of n8 tile 2j, w[1] = b1 of tile 2j,
//   w[2] = b0 of tile 2j+1, w[3] = b1 of tile 2j+1,
// because nibble i and i+4 of the word hold pair i (format.h).
//
// bf16: (x & 0x000f000f) | 0x43004300 puts a nibble n into the 7-bit mantissa
//   of 128.0 (bf16 128 has ulp 1, 128 + 15 < 256): value 128 + n, exact. One
//   fma with 1 and -136 gives n - 8, an integer of magnitude <= 8, exactly
//   representable, so the single rounding is exact.
// fp16: pairs 0 and 2 as above with 1024.0 (ulp 1): 1024 + n, minus 1032.
//   Pairs 1 and 3 skip a shift: (x & 0x00f000f0) | 0x64006400 is
//   1024 + 16 n (< 2048, exact); fma with 1/16 and -72 gives 64 + n - 72 =
//   n - 8: the product is exact (power of two), the sum exact, one rounding of
//   an exact small integer.
template <bool BF16>
SF_DEVICE void int4_pairs(uint32_t q, uint32_t (&w)[4]) {
  if constexpr (BF16) {
    constexpr uint32_t kMask = 0x000f000fu, kMagic = 0x43004300u, kOne = 0x3f803f80u, kNeg136 = 0xc308c308u;
    w[0] = ptx::fma_bf16x2(ptx::lop3<kAndOr>(q, kMask, kMagic), kOne, kNeg136);
    w[1] = ptx::fma_bf16x2(ptx::lop3<kAndOr>(q >> 4, kMask, kMagic), kOne, kNeg136);
    w[2] = ptx::fma_bf16x2(ptx::lop3<kAndOr>(q >> 8, kMask, kMagic), kOne, kNeg136);
    w[3] = ptx::fma_bf16x2(ptx::lop3<kAndOr>(q >> 12, kMask, kMagic), kOne, kNeg136);
  } else {
    constexpr uint32_t kLo = 0x000f000fu, kHi = 0x00f000f0u, kMagic = 0x64006400u;
    constexpr uint32_t kOne = 0x3c003c00u, kNeg1032 = 0xe408e408u, kSixteenth = 0x2c002c00u, kNeg72 = 0xd480d480u;
    const uint32_t q8 = q >> 8;
    w[0] = ptx::fma_f16x2(ptx::lop3<kAndOr>(q, kLo, kMagic), kOne, kNeg1032);
    w[1] = ptx::fma_f16x2(ptx::lop3<kAndOr>(q, kHi, kMagic), kSixteenth, kNeg72);
    w[2] = ptx::fma_f16x2(ptx::lop3<kAndOr>(q8, kLo, kMagic), kOne, kNeg1032);
    w[3] = ptx::fma_f16x2(ptx::lop3<kAndOr>(q8, kHi, kMagic), kSixteenth, kNeg72);
  }
}

// ---------------------------------------------------------------- int8

// One int8 word (one n8 tile of a k16 slice) -> its two fragment pairs as
// exact (q - 128) values: w[0] = b0 (bytes 0 and 2), w[1] = b1 (bytes 1, 3).
//
// fp16: prmt places byte b under 0x64 (1024.0, ulp 1): 1024 + b <= 1279,
//   exact; the fma with 1 and -1152 gives b - 128 in [-128, 127], exact.
// bf16: 128 + 255 does not fit bf16's 8-bit significand, so split bit 7 off:
//   v = 0x4300 | (b & 0x7f)   = 128 + (b & 0x7f)        (exact, < 256, ulp 1)
//   c = 0x4300 | (~b & 0x80)  = 256 if b < 128 else 128 (bit 7 of a bf16 is
//                                                       the exponent's lsb)
//   v - c = (b & 0x7f) - 128 + 128 * (b >> 7) = b - 128, an integer in
//   [-128, 127] (at most 8 significant bits), so the one rounding of the fma
//   v + (-1) * c is exact.
template <bool BF16>
SF_DEVICE void int8_pairs(uint32_t q, uint32_t (&w)[2]) {
  if constexpr (BF16) {
    constexpr uint32_t kLow7 = 0x007f007fu, kBit7 = 0x00800080u, kMagic = 0x43004300u, kNegOne = 0xbf80bf80u;
    const uint32_t q8 = q >> 8;
    w[0] = ptx::fma_bf16x2(ptx::lop3<kNotAndOr>(q, kBit7, kMagic), kNegOne, ptx::lop3<kAndOr>(q, kLow7, kMagic));
    w[1] = ptx::fma_bf16x2(ptx::lop3<kNotAndOr>(q8, kBit7, kMagic), kNegOne, ptx::lop3<kAndOr>(q8, kLow7, kMagic));
  } else {
    constexpr uint32_t kMagic = 0x64646464u, kOne = 0x3c003c00u, kNeg1152 = 0xe480e480u;
    // prmt selectors (lsb byte first): {q.b0, 0x64, q.b2, 0x64} and {q.b1, 0x64, q.b3, 0x64}
    w[0] = ptx::fma_f16x2(ptx::prmt(q, kMagic, 0x4240u), kOne, kNeg1152);
    w[1] = ptx::fma_f16x2(ptx::prmt(q, kMagic, 0x4341u), kOne, kNeg1152);
  }
}

// ---------------------------------------------------------------- raw values (scale applied after the MMA)

// Kernels that accumulate x . q per scale group in fp32 and apply the scale
// (and zero point) once per group feed the tensor core "raw" values: v =
// (q - B) + kRawOffset, whatever is cheapest to produce exactly, and subtract
// kRawOffset * sum(x) afterwards. Every raw value is an integer of at most 11
// significant bits, so its product with an fp16 / bf16 activation is exact in
// fp32.
//   int4 bf16: v = 128 + q (the LOP3 result itself, no fma): offset 136
//   int4 fp16: v = q - 8 (int4_pairs): offset 0
//   int8 bf16: v = q - 128 (int8_pairs): offset 0
//   int8 fp16: v = 1024 + q (the PRMT result itself, no fma): offset 1152
template <int BITS, bool BF16>
inline constexpr float kRawOffset = BITS == 4 ? (BF16 ? 136.f : 0.f) : (BF16 ? 0.f : 1152.f);

template <bool BF16>
SF_DEVICE void int4_raw(uint32_t q, uint32_t (&w)[4]) {
  if constexpr (BF16) {
    constexpr uint32_t kMask = 0x000f000fu, kMagic = 0x43004300u;
    w[0] = ptx::lop3<kAndOr>(q, kMask, kMagic);
    w[1] = ptx::lop3<kAndOr>(q >> 4, kMask, kMagic);
    w[2] = ptx::lop3<kAndOr>(q >> 8, kMask, kMagic);
    w[3] = ptx::lop3<kAndOr>(q >> 12, kMask, kMagic);
  } else {
    int4_pairs<false>(q, w);
  }
}

template <bool BF16>
SF_DEVICE void int8_raw(uint32_t q, uint32_t (&w)[2]) {
  if constexpr (BF16) {
    int8_pairs<true>(q, w);
  } else {
    w[0] = ptx::prmt(q, 0x64646464u, 0x4240u);
    w[1] = ptx::prmt(q, 0x64646464u, 0x4341u);
  }
}

// Packed (1, 1): the B operand whose MMA yields the row sums of x.
template <bool BF16>
inline constexpr uint32_t kOnes = BF16 ? 0x3f803f80u : 0x3c003c00u;

// ---------------------------------------------------------------- scale, zero point

// (q - B) * s with one rounding. bf16 uses fma with -0 (sm80 has no
// mul.bf16x2): x * s + (-0) equals x * s for every x * s, including signed
// zeros, so the result is the correctly rounded product.
template <bool BF16>
SF_DEVICE uint32_t scale(uint32_t w, uint32_t s) {
  if constexpr (BF16) {
    return ptx::fma_bf16x2(w, s, 0x80008000u);
  } else {
    return ptx::mul_f16x2(w, s);
  }
}

// (q - B) * s + zs with one rounding: the folded zero point costs nothing.
template <bool BF16>
SF_DEVICE uint32_t scale_zero(uint32_t w, uint32_t s, uint32_t z) {
  if constexpr (BF16) {
    return ptx::fma_bf16x2(w, s, z);
  } else {
    return ptx::fma_f16x2(w, s, z);
  }
}

// A packed pair holding one 16-bit value twice: lo half (odd = false) or hi
// half (odd = true) of v. Scale rows are loaded as pairs of columns; a
// fragment pair needs one column's scale in both halves.
SF_DEVICE uint32_t dup_half(uint32_t v, bool odd) { return ptx::prmt(v, 0u, odd ? 0x3232u : 0x1010u); }

}  // namespace dequant
}  // namespace swordfish
