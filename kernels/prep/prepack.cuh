// Prepack kernel: GPTQ K-packed int32 words -> packed format v1 (format.h).
//
// One CTA of 128 threads owns kBlocksPerCta consecutive k-blocks of one
// 64-column strip (grid: x = k-block pairs, y = n-blocks, so the CTAs in
// flight cover all of K for a few strips: act-order gathers hit L2).
// Per block (prepack_index.h has the index math and its proof):
//   load     each thread reads the source words of (column, k16 slice)
//            units: a warp reads 32 consecutive columns of one source row,
//            128 contiguous bytes per instruction; with act-order, row k
//            gathers source row perm[k].
//   stage    the unit's 16 values go to shared memory as one 16-byte store
//            (columns 80 / 48 bytes apart: conflict-free per quarter warp).
//   assemble each thread reads 8 (int4) or 4 (int8) staged 32-bit words
//            (conflict-free), builds its 4 output words and writes them as
//            one 16-byte store: the CTA writes the 2,048-byte block as one
//            coalesced run.
// Requirements (checked by the launcher): K % block_k == 0, N % 64 == 0,
// N / 64 <= 65535, 4-byte aligned qweight, 16-byte aligned out.
#pragma once

#include <cuda_runtime.h>  // uint4, make_uint4 (host emulation too)

#include <cstdint>

#include "kernels/common/format.h"
#include "kernels/prep/prepack_index.h"

namespace swordfish {
namespace prep {

struct PrepackParams {
  const int32_t* __restrict__ qweight;  // (K * bits / 32, N) K-packed, row-major
  const int32_t* __restrict__ perm;     // (K) or nullptr: packed row k = source row perm[k]
  int32_t* __restrict__ out;            // (N / 64, K / block_k, 512)
  int K, N;
};

template <int kBits>
struct PrepackTraits {
  static constexpr int kBlockK = format::block_k(kBits);     // rows per block: 64 | 32
  static constexpr int kVpw = format::values_per_word(kBits);  // values per word: 8 | 4
  static constexpr int kStride = stage_stride(kBits);        // bytes per staged column: 80 | 48
  static constexpr int kSlices = kBlockK / 16;               // k16 slices per block: 4 | 2
  static constexpr int kWordsPerUnit = 16 / kVpw;            // source words per slice: 2 | 4
  static constexpr int kUnits = kSlices * format::kBlockN / kThreads;  // (column, slice) units per thread: 2 | 1
  static_assert(kSlices * format::kBlockN % kThreads == 0, "units split evenly over the CTA");
  static_assert(kThreads * 16 == format::kBlockBytes, "one 16-byte store per thread writes a block");
  static_assert(kStride % 16 == 0, "staged slices are 16-byte aligned");
};

// Staging tile of one CTA: (kBlocksPerCta, BLOCK_N columns, kStride bytes).
template <int kBits>
struct PrepackSharedStorage {
  alignas(16) uint8_t stage[kBlocksPerCta][format::kBlockN][PrepackTraits<kBits>::kStride];
};

// Read-only global load: __ldg on the GPU; a plain load in the host
// emulation (tests/test_prepack_host.py runs the two steps below on the CPU).
SF_HOST_DEVICE int32_t load_nc(const int32_t* ptr) {
#if defined(__CUDA_ARCH__)
  return __ldg(ptr);
#else
  return *ptr;
#endif
}

SF_HOST_DEVICE void store16(void* dst, const uint32_t (&w)[4]) {
  *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
}

// Value of source row `row` in column `col` (0 for an out-of-range perm entry,
// so a bad permutation cannot read out of bounds).
template <int kBits>
SF_HOST_DEVICE uint32_t gather_value(const int32_t* __restrict__ qweight, int K, int N, int row, int col) {
  using T = PrepackTraits<kBits>;
  if (static_cast<unsigned>(row) >= static_cast<unsigned>(K)) return 0u;
  const unsigned r = static_cast<unsigned>(row);
  const uint32_t word = static_cast<uint32_t>(load_nc(qweight + static_cast<long long>(r / T::kVpw) * N + col));
  return (word >> (kBits * (r % T::kVpw))) & ((1u << kBits) - 1u);
}

// Step 1 for thread `tid` of the CTA owning k-blocks kb0 .. kb0 + kBlocksPerCta - 1
// of n-block nb: load its (column, slice) units and write them to the staging tile.
// Unit u = tid + kThreads * i is (column u % 64, k16 slice u / 64): a warp
// covers 32 consecutive columns of one slice.
template <int kBits, bool kPerm>
SF_HOST_DEVICE void prepack_stage(const PrepackParams& p, int tid, int nb, int kb0,
                                  PrepackSharedStorage<kBits>& smem) {
  using T = PrepackTraits<kBits>;
  const int num_kb = p.K / T::kBlockK;
  const int col0 = nb * format::kBlockN;
  if constexpr (!kPerm) {
    // The CTA's source rows start at word row kb0 * block_k / vpw; offsets from
    // there fit in 32 bits (at most 16 rows of N words).
    const int32_t* cta_src = p.qweight + static_cast<long long>(kb0) * (T::kBlockK / T::kVpw) * p.N + col0;
    const int last = num_kb - 1 - kb0;  // last valid block of this CTA
    uint32_t src[kBlocksPerCta][T::kUnits][T::kWordsPerUnit];  // all loads issued before any store
#pragma unroll
    for (int b = 0; b < kBlocksPerCta; ++b) {
      const int bb = b <= last ? b : last;  // clamp: a valid read, result unused
#pragma unroll
      for (int i = 0; i < T::kUnits; ++i) {
        const int u = tid + kThreads * i;
        const int col = u % format::kBlockN, slice = u / format::kBlockN;
        const int row0 = (bb * T::kBlockK + 16 * slice) / T::kVpw;
#pragma unroll
        for (int r = 0; r < T::kWordsPerUnit; ++r)
          src[b][i][r] = static_cast<uint32_t>(load_nc(cta_src + (row0 + r) * p.N + col));
      }
    }
#pragma unroll
    for (int b = 0; b < kBlocksPerCta; ++b) {
#pragma unroll
      for (int i = 0; i < T::kUnits; ++i) {
        const int u = tid + kThreads * i;
        const int col = u % format::kBlockN, slice = u / format::kBlockN;
        Bytes16 v{};
        if constexpr (kBits == 4) {
          v = interleave4(src[b][i][0], src[b][i][1]);
        } else {
          v = interleave8(src[b][i][0], src[b][i][1], src[b][i][2], src[b][i][3]);
        }
        store16(&smem.stage[b][col][16 * slice], v.w);
      }
    }
  } else {
#pragma unroll 1
    for (int b = 0; b < kBlocksPerCta; ++b) {
      const int kb = kb0 + b;
      if (kb >= num_kb) break;  // uniform over the CTA
#pragma unroll
      for (int i = 0; i < T::kUnits; ++i) {
        const int u = tid + kThreads * i;
        const int col = u % format::kBlockN, slice = u / format::kBlockN;
        const int k0 = kb * T::kBlockK + 16 * slice;  // packed rows k0 .. k0 + 15
        int rows[16];
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) rows[kk] = load_nc(p.perm + k0 + kk);  // one address across the warp
        uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
          const int pos = stage_pos(kk);  // compile-time after unrolling
          w[pos / 4] |= gather_value<kBits>(p.qweight, p.K, p.N, rows[kk], col0 + col) << (8 * (pos % 4));
        }
        store16(&smem.stage[b][col][16 * slice], w);
      }
    }
  }
}

// Step 2 for thread `tid`: words 4 tid .. 4 tid + 3 of each of the CTA's blocks,
// one 16-byte store each (the CTA writes every block as one 2 KB run).
template <int kBits>
SF_HOST_DEVICE void prepack_assemble(const PrepackParams& p, int tid, int nb, int kb0,
                                     const PrepackSharedStorage<kBits>& smem) {
  using T = PrepackTraits<kBits>;
  const int num_kb = p.K / T::kBlockK;
#pragma unroll
  for (int b = 0; b < kBlocksPerCta; ++b) {
    const int kb = kb0 + b;
    if (kb >= num_kb) break;  // uniform over the CTA
    uint32_t out[format::kLaneWords];
#pragma unroll
    for (int j = 0; j < format::kLaneWords; ++j) {
      const WordOperands op = word_operands(kBits, format::kLaneWords * tid + j);
      const uint32_t a = *reinterpret_cast<const uint32_t*>(&smem.stage[b][op.col_a][op.pos]);
      if constexpr (kBits == 4) {
        const uint32_t bw = *reinterpret_cast<const uint32_t*>(&smem.stage[b][op.col_b][op.pos]);
        out[j] = assemble4(a, bw);
      } else {
        out[j] = a;
      }
    }
    store16(p.out + format::block_offset_words(kBits, p.K, nb, kb) + format::kLaneWords * tid, out);
  }
}

#if defined(__CUDACC__)
template <int kBits, bool kPerm>
__global__ void __launch_bounds__(kThreads, kMinCtasPerSm) prepack_kernel(const PrepackParams p) {
  __shared__ PrepackSharedStorage<kBits> smem;
  const int nb = blockIdx.y, kb0 = blockIdx.x * kBlocksPerCta;
  prepack_stage<kBits, kPerm>(p, threadIdx.x, nb, kb0, smem);
  __syncthreads();
  prepack_assemble<kBits>(p, threadIdx.x, nb, kb0, smem);
}
#endif

}  // namespace prep
}  // namespace swordfish
