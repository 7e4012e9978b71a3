// CPU emulation of the sm100 Transform stage's writes into the UMMA operand
// buffer (tests/test_prefill_sm100_host.py builds it with nvcc as host code
// and runs it; no GPU). Not part of the extension (CMake skips tests/ folders).
//
// For a few tiles of random int4 / int8 weights (every group, channelwise,
// zero points, fp16 and bf16, N % 256 = 128 so a pair's second half lies past
// N), it
//   1. packs the codes with format::locate (format.h, the format's definition);
//   2. stages what the producer's TMA boxes put in shared memory: the CTA's two
//      n64 blocks of one k64 slice as raw bytes (zeros past N), the scale and
//      zero-point rows of the stage (scale_row, scale_rows);
//   3. runs every Transform thread (2 warpgroups x 128) through the kernel's
//      own index code: transform.cuh's make_role / fragment_offset /
//      detail::source (which word and bit field each A register half is
//      dequantized from), the scale and zero-point addresses the kernel forms
//      (scale_col_bytes, scale_row1_bytes, the n_hi + 16 bytes and k16-step
//      row choice of transform_slice), the value rounded once to the dtype as
//      dequant.cuh's single fma does, and the store offset a_store_offset;
//   4. reads the A buffer back through CuTe's UMMA layout in the byte domain
//      (SmemLayoutA's swizzle functor over its element offsets in bytes: what
//      the tcgen05 descriptor addresses), NOT through umma_a_offset, and
//      compares every (row, k) with the reference weight (q - B) s + z rounded
//      once, computed from the unpacked codes: and that every byte was written
//      exactly once.
// It also checks, at run time and over the whole domain (the compile-time
// checks in prefill_sm100.cuh cover 64 rows per assertion), that umma_a_offset
// is CuTe's byte-domain A layout for every stage and that the B stage layout
// is the TMA box. Prints "<cases> cases, <bad> bad".
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/prefill/sm100/prefill_sm100.cuh"

using namespace swordfish;
using namespace swordfish::prefill;
using namespace swordfish::prefill::sm100;

namespace {

uint32_t rng_state = 2024u;
uint32_t next_rand() {
  rng_state = rng_state * 1664525u + 1013904223u;
  return rng_state >> 8;
}

// ---------------------------------------------------------------- 16-bit floats on the host

double from_bits(uint16_t h, bool bf16) {
  if (bf16) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  double v = exp == 0 ? std::ldexp(man, -24) : std::ldexp(1024 + man, exp - 25);
  return sign ? -v : v;
}

// Round a double (exact here: every value is (q - B) s + z, at most ~20 significant bits) to the
// nearest 16-bit float, ties to even: what the kernel's one fma per pair does.
uint16_t to_bits(double v, bool bf16) {
  const int mant_bits = bf16 ? 8 : 11;  // significand bits incl. the implicit one
  const int min_exp = bf16 ? -126 : -14;
  const bool neg = std::signbit(v);
  double a = std::fabs(v);
  if (a == 0) return neg ? 0x8000 : 0;
  int e;
  std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1)
  int exp = e - 1;    // a in [2^exp, 2^(exp+1))
  if (exp < min_exp) exp = min_exp;
  const double ulp = std::ldexp(1.0, exp - (mant_bits - 1));
  double q = a / ulp;
  double r = std::nearbyint(q);  // default rounding mode: to nearest, ties to even
  a = r * ulp;
  // Re-encode through float (exact: a has <= 11 significant bits and is in range).
  const float f = static_cast<float>(neg ? -a : a);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (bf16) return static_cast<uint16_t>(u >> 16);  // exact: a fits bf16
  const int fexp = static_cast<int>((u >> 23) & 255) - 127;
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  if (fexp < -14) {  // subnormal half
    const uint32_t man = static_cast<uint32_t>(std::ldexp(std::fabs(f), 24));
    return static_cast<uint16_t>(sign | man);
  }
  return static_cast<uint16_t>(sign | ((fexp + 15) << 10) | ((u >> 13) & 1023));
}

uint16_t random_scale(bool bf16) { return to_bits((1 + next_rand() % 1000) / 16384.0, bf16); }
uint16_t random_zero(bool bf16) { return to_bits((static_cast<int>(next_rand() % 2001) - 1000) / 8192.0, bf16); }

// ---------------------------------------------------------------- one weight

struct Weight {
  int bits, K, N, group;
  bool channelwise, zeros, bf16;
  std::vector<uint8_t> q;        // (K, N) codes
  std::vector<uint16_t> s, z;    // (K / group, N)
  std::vector<uint32_t> packed;  // format v1 words
  int rows() const { return K / group; }
  int scale_index(int k) const { return channelwise ? 0 : k / group; }
  double reference(int k, int n) const {  // (q - B) s + z, rounded once; 0 past N (TMA zero fill)
    if (n >= N) return 0.0;
    const double w = (static_cast<int>(q[size_t(k) * N + n]) - format::bias(bits)) *
                         from_bits(s[size_t(scale_index(k)) * N + n], bf16) +
                     (zeros ? from_bits(z[size_t(scale_index(k)) * N + n], bf16) : 0.0);
    return from_bits(to_bits(w, bf16), bf16);
  }
};

Weight make_weight(int bits, int K, int N, int group, bool channelwise, bool zeros, bool bf16) {
  Weight w{bits, K, N, group, channelwise, zeros, bf16, {}, {}, {}, {}};
  w.q.resize(size_t(K) * N);
  for (auto& v : w.q) v = static_cast<uint8_t>(next_rand() & ((1u << bits) - 1u));
  w.s.resize(size_t(w.rows()) * N);
  w.z.resize(size_t(w.rows()) * N);
  for (int r = 0; r < w.rows(); ++r)
    for (int n = 0; n < N; ++n) {
      // Channelwise checkpoints replicate row 0 (the kernel reads row 0 only; the replicas here are
      // deliberately different garbage to catch a read of another row).
      w.s[size_t(r) * N + n] = (channelwise && r > 0) ? to_bits(1e4, bf16) : random_scale(bf16);
      w.z[size_t(r) * N + n] = (channelwise && r > 0) ? to_bits(-1e4, bf16) : random_zero(bf16);
    }
  const int bk = format::block_k(bits);
  w.packed.assign(size_t(N / 64) * (K / bk) * format::kBlockWords, 0u);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) {
      const format::Slot sl = format::locate(bits, k % bk, n % 64);
      w.packed[format::block_offset_words(bits, K, n / 64, k / bk) + sl.word] |=
          static_cast<uint32_t>(w.q[size_t(k) * N + n]) << sl.shift;
    }
  return w;
}

// ---------------------------------------------------------------- the emulation

template <int BITS>
int emulate_stage(const Weight& w, int n0, int kb, uint8_t* a_buf, uint8_t* written) {
  // What the producer's boxes stage (prefill_sm100.cuh): the packed bytes of blocks n0/64, n0/64 + 1
  // at k64 slice kb (int8: two k32 blocks), and scale_rows() rows of 128 columns from column n0.
  constexpr int kSlice = kSliceBytes<BITS>;
  std::vector<uint8_t> words(kTransformGroups * kSlice, 0);
  for (int c = 0; c < kTransformGroups; ++c) {
    const int nb = n0 / 64 + c;
    if (nb >= w.N / 64) continue;  // zero-filled box
    const long long off = format::block_offset_words(BITS, w.K, nb, kb * (kStageK / format::block_k(BITS)));
    std::memcpy(&words[size_t(c) * kSlice], &w.packed[size_t(off)], kSlice);
  }
  const int rows = scale_rows(w.group, w.channelwise);
  const int row0 = scale_row(kb, w.group, w.channelwise);
  constexpr int kRowBytes = Layout<4, 256>::kSRowBytes;
  std::vector<uint8_t> sc(2 * kRowBytes, 0), zs(2 * kRowBytes, 0);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < kCtaRows; ++j) {
      const int n = n0 + j, sr = row0 + r;
      if (n >= w.N || sr >= w.rows()) continue;
      std::memcpy(&sc[r * kRowBytes + 2 * j], &w.s[size_t(sr) * w.N + n], 2);
      std::memcpy(&zs[r * kRowBytes + 2 * j], &w.z[size_t(sr) * w.N + n], 2);
    }
  const uint32_t row1 = scale_row1_bytes(w.group, w.channelwise, kRowBytes);
  int bad = 0;
  for (int c = 0; c < kTransformGroups; ++c)
    for (int warp = 0; warp < 4; ++warp)
      for (int lane = 0; lane < 32; ++lane) {
        const Role role = make_role<BITS>(warp, lane);
        const uint32_t col = scale_col_bytes(c, role.n_lo);
        for (int kk = 0; kk < 4; ++kk)
          for (int reg = 0; reg < 4; ++reg) {
            // transform_slice: s[kk / 2][reg & 1] = the scale at col (+ 16 for n_hi) of row (kk / 2 ? row1 : 0).
            const uint32_t s_at = (kk / 2 ? row1 : 0u) + col + ((reg & 1) ? 16u : 0u);
            uint16_t s16, z16;
            std::memcpy(&s16, &sc[s_at], 2);
            std::memcpy(&z16, &zs[s_at], 2);
            for (int half = 0; half < 2; ++half) {
              const prefill::detail::Source src = prefill::detail::source<BITS>(role, kk, reg, half);
              uint32_t word;
              std::memcpy(&word, &words[size_t(c) * kSlice + src.byte], 4);
              const int code = static_cast<int>((word >> src.shift) & ((1u << BITS) - 1u));
              const double v = (code - format::bias(BITS)) * from_bits(s16, w.bf16) +
                               (w.zeros ? from_bits(z16, w.bf16) : 0.0);
              const uint16_t out = to_bits(v, w.bf16);
              const uint32_t at = a_store_offset(c, role.n_lo, lane % 4, kk, reg) + 2u * half;
              if (at + 2 > static_cast<uint32_t>(kABytes)) {
                ++bad;
                continue;
              }
              std::memcpy(&a_buf[at], &out, 2);
              ++written[at];
              ++written[at + 1];
            }
          }
      }
  return bad;
}

// The MMA's view of the A stage: CuTe's layout in the byte domain.
template <bool BF16>
uint32_t cute_a_bytes(int row, int k, int stage) {
  constexpr auto L = SmemLayoutA<BF16, 256>{};
  const auto crd = cute::make_coord(cute::make_coord(row, k % kMmaK), 0, k / kMmaK, stage);
  return static_cast<uint32_t>(L.layout_a()(2 * static_cast<int>(L.layout_b()(crd))));
}

template <int BITS, bool BF16>
int run_case(int K, int N, int group, bool channelwise, bool zeros) {
  const Weight w = make_weight(BITS, K, N, group, channelwise, zeros, BF16);
  int bad = 0;
  const int n_tiles = (N + kPairRows - 1) / kPairRows;
  for (int n_tile = 0; n_tile < n_tiles; ++n_tile)
    for (int rank = 0; rank < kClusterSize; ++rank)
      for (int kb = 0; kb < K / kStageK; ++kb) {
        const int n0 = cta_part(TileCoord{0, n_tile}, rank, 128).n0;
        std::vector<uint8_t> a_buf(kABytes, 0xff), written(kABytes, 0);
        bad += emulate_stage<BITS>(w, n0, kb, a_buf.data(), written.data());
        for (int i = 0; i < kABytes; ++i)
          if (written[i] != 1) {
            if (bad < 10) std::printf("int%d byte %d of the A stage written %d times\n", BITS, i, written[i]);
            ++bad;
          }
        for (int row = 0; row < kCtaRows; ++row)
          for (int k = 0; k < kStageK; ++k) {
            uint16_t got;
            std::memcpy(&got, &a_buf[cute_a_bytes<BF16>(row, k, 0)], 2);
            const double want = w.reference(kb * kStageK + k, n0 + row);
            if (from_bits(got, BF16) != want) {
              if (bad < 10)
                std::printf("MISMATCH int%d %s K=%d N=%d g=%d cw=%d z=%d n0=%d kb=%d row=%d k=%d: got %g want %g\n",
                            BITS, BF16 ? "bf16" : "fp16", K, N, group, channelwise, zeros, n0, kb, row, k,
                            from_bits(got, BF16), want);
              ++bad;
            }
          }
      }
  return bad;
}

// umma_a_offset and the B stage over the whole domain, every stage (run time: no constexpr limit).
int check_layouts() {
  int bad = 0;
  for (int s = 0; s < kAStages; ++s)
    for (int row = 0; row < kCtaRows; ++row)
      for (int k = 0; k < kStageK; ++k)
        if (cute_a_bytes<true>(row, k, s) != s * kABytes + umma_a_offset(row, k) ||
            cute_a_bytes<false>(row, k, s) != s * kABytes + umma_a_offset(row, k))
          ++bad;
  auto check_b = [&](auto bits_c, auto bf16_c, auto bt_c) {
    constexpr int BITS = decltype(bits_c)::value;
    constexpr bool BF = decltype(bf16_c)::value;
    constexpr int BT = decltype(bt_c)::value;
    using L = Layout<BITS, BT>;
    constexpr auto B = SmemLayoutB<BITS, BF, BT>{};
    for (int s = 0; s < L::kXStages; ++s)
      for (int row = 0; row < L::kXRows; ++row)
        for (int k = 0; k < kStageK; ++k) {
          const auto crd = cute::make_coord(cute::make_coord(row, k % kMmaK), 0, k / kMmaK, s);
          const uint32_t bytes = static_cast<uint32_t>(B.layout_a()(2 * static_cast<int>(B.layout_b()(crd))));
          const uint32_t tma = s * L::kXBytes + 128u * row + 16u * ((k / 8) ^ (row % 8)) + 2u * (k % 8);
          if (bytes != tma) ++bad;
        }
  };
  check_b(cute::Int<4>{}, cute::true_type{}, cute::Int<256>{});
  check_b(cute::Int<4>{}, cute::false_type{}, cute::Int<128>{});
  check_b(cute::Int<8>{}, cute::true_type{}, cute::Int<128>{});
  return bad;
}

}  // namespace

int main() {
  int cases = 0, bad = 0;
  bad += check_layouts();
  ++cases;
  // N = 384: two pair tiles, the second's rank-1 half past N (zero-filled boxes).
  for (int group : {32, 64, 128})
    for (int zeros = 0; zeros < 2; ++zeros) {
      bad += run_case<4, true>(256, 384, group, false, zeros != 0);
      bad += run_case<4, false>(256, 384, group, false, zeros != 0);
      bad += run_case<8, true>(256, 384, group, false, zeros != 0);
      bad += run_case<8, false>(256, 384, group, false, zeros != 0);
      cases += 4;
    }
  for (int zeros = 0; zeros < 2; ++zeros) {  // channelwise: replicas to group 128, row 0 read
    bad += run_case<4, true>(384, 256, 128, true, zeros != 0);
    bad += run_case<8, false>(384, 256, 128, true, zeros != 0);
    cases += 2;
  }
  std::printf("%d cases, %d bad\n", cases, bad);
  return bad != 0;
}
