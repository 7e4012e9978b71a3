// GPU probe of the TMA behaviour the sm100 prefill relies on, runnable on any
// TMA GPU (sm_90a H100 / H200 as well as sm_100a / sm_110a): the same tensor
// maps as the kernel (kernels/common/tma_desc.h), loaded with plain
// cp.async.bulk.tensor onto an mbarrier armed with the full box's bytes.
// tests/test_prefill_sm100_tma_gpu.py builds it with nvcc and runs it. Not part
// of the extension (CMake skips tests/ folders).
//
// Checked, case by case:
//   - a box taller than the tensor (x with M < BT / 2 rows, the kernel's small-M launches) encodes;
//   - a box partly or wholly past the tensor (the pair's half past N, the last m tile's rows past M,
//     the peer's activation half past M) completes the barrier with the FULL box's byte count (the
//     kernel's expect_tx assumes it) and lands zeros where the tensor has none;
//   - the 128-byte-swizzled activation box lands at 128 r + 16 ((k / 8) ^ (r % 8)) + 2 (k % 8): the
//     layout prefill_sm100.cuh's b_layout_is_the_tma_box asserts CuTe's UMMA descriptors read.
// A phase that never completes is reported (a spin with a clock limit), not hung on.
// Prints "<cases> cases, <bad> bad".
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/common/format.h"
#include "kernels/common/problem.h"
#include "kernels/common/tma_desc.h"

using namespace swordfish;

namespace {

constexpr int kMaxBytes = 64 * 1024;

// One TMA load (rank 2 or 3) of the box at `crd` onto an mbarrier armed with `tx` bytes; the shared
// bytes out, and whether the phase completed within ~2 s.
__global__ void probe_kernel(const __grid_constant__ CUtensorMap map, int rank, int c0, int c1, int c2, uint32_t tx,
                             uint8_t* out, int bytes, int* completed) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t bar;
  // 1024-aligned, as the kernel's stages are: the 128-byte swizzle works on address bits [4, 10).
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const uint32_t s_bar = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  const uint32_t s_dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  for (int i = threadIdx.x; i < bytes; i += blockDim.x) smem[i] = 0xa5;  // poison
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(s_bar));
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(s_bar), "r"(tx) : "memory");
    const uint64_t desc = reinterpret_cast<uint64_t>(&map);
    if (rank == 2)
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::
              "r"(s_dst), "l"(desc), "r"(s_bar), "r"(c0), "r"(c1)
          : "memory");
    else
      asm volatile(
          "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
          "[%2];\n" ::"r"(s_dst), "l"(desc), "r"(s_bar), "r"(c0), "r"(c1), "r"(c2)
          : "memory");
    const long long t0 = clock64();
    uint32_t done = 0;
    while (!done && clock64() - t0 < (1LL << 32)) {
      asm volatile(
          "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\tselp.u32 %0, 1, 0, p;\n\t}\n"
          : "=r"(done)
          : "r"(s_bar)
          : "memory");
    }
    *completed = static_cast<int>(done);
  }
  __syncthreads();
  if (*completed)
    for (int i = threadIdx.x; i < bytes; i += blockDim.x) out[i] = smem[i];
}

struct Probe {
  uint8_t* d_out = nullptr;
  int* d_done = nullptr;
  Probe() {
    cudaMalloc(&d_out, kMaxBytes);
    cudaMalloc(&d_done, sizeof(int));
    cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxBytes + 1024);
  }
  // Runs one load; false (and a message) when the phase did not complete or CUDA failed.
  bool run(const CUtensorMap& map, int rank, int c0, int c1, int c2, uint32_t tx, std::vector<uint8_t>& out,
           const char* what) {
    cudaMemset(d_done, 0, sizeof(int));
    probe_kernel<<<1, 128, kMaxBytes + 1024>>>(map, rank, c0, c1, c2, tx, d_out, static_cast<int>(out.size()), d_done);
    int done = 0;
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      std::printf("%s: CUDA error %s\n", what, cudaGetErrorString(e));
      return false;
    }
    cudaMemcpy(&done, d_done, sizeof(int), cudaMemcpyDeviceToHost);
    if (!done) {
      std::printf("%s: the barrier armed with %u bytes never completed (the box counts fewer bytes)\n", what, tx);
      return false;
    }
    cudaMemcpy(out.data(), d_out, out.size(), cudaMemcpyDeviceToHost);
    return true;
  }
};

uint16_t val16(int r, int k) { return static_cast<uint16_t>(0x4000 + (r * 131 + k * 7) % 0x3000); }

// The activation map (tile_map_16, 128-byte swizzle) with M rows of K = 128, box of `box_rows`,
// loaded at row `row0`, k 64: rows inside M carry data at the swizzled offset, the others zeros.
int check_x(Probe& pr, int M, int box_rows, int row0) {
  const int K = 128;
  std::vector<uint16_t> h(size_t(M) * K);
  for (int r = 0; r < M; ++r)
    for (int k = 0; k < K; ++k) h[size_t(r) * K + k] = val16(r, k);
  void* d = nullptr;
  cudaMalloc(&d, h.size() * 2);
  cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice);
  CUtensorMap map;
  const std::string why = tma::tile_map_16(&map, d, M, K, box_rows, "x");
  char what[128];
  std::snprintf(what, sizeof(what), "x M=%d box=%d row0=%d", M, box_rows, row0);
  if (!why.empty()) {
    std::printf("%s: %s\n", what, why.c_str());
    cudaFree(d);
    return 1;
  }
  std::vector<uint8_t> out(size_t(box_rows) * 128);
  int bad = 0;
  if (!pr.run(map, 2, 64, row0, 0, static_cast<uint32_t>(out.size()), out, what)) {
    bad = 1;
  } else {
    for (int r = 0; r < box_rows && bad < 5; ++r)
      for (int k = 0; k < 64; ++k) {
        const int gr = row0 + r;
        const uint16_t want = gr < M ? val16(gr, 64 + k) : 0;
        uint16_t got;
        std::memcpy(&got, &out[128 * r + 16 * ((k / 8) ^ (r % 8)) + 2 * (k % 8)], 2);
        if (got != want) {
          if (bad < 5) std::printf("%s: (r %d, k %d) got %04x want %04x\n", what, r, k, got, want);
          ++bad;
        }
      }
  }
  cudaFree(d);
  return bad;
}

// The packed map (packed_map: blocks of 2,048 bytes) of an N = 64 x K = 128 int4 weight, box of one
// k64 block x two n64 blocks at n block `nb`: blocks past N land as zeros, the box counts 4,096 bytes.
int check_packed(Probe& pr, int nb) {
  GemmProblem p;
  p.bits = 4;
  p.K = 128;
  p.N = 64;
  std::vector<uint8_t> h(size_t(p.N / 64) * (p.K / 64) * format::kBlockBytes);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint8_t>(i * 29 + 3);
  void* d = nullptr;
  cudaMalloc(&d, h.size());
  cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice);
  p.packed = static_cast<const int32_t*>(d);
  CUtensorMap map;
  const std::string why = tma::packed_map(&map, p, 1, 2);
  char what[96];
  std::snprintf(what, sizeof(what), "packed nb=%d", nb);
  int bad = 0;
  std::vector<uint8_t> out(2 * format::kBlockBytes);
  if (!why.empty()) {
    std::printf("%s: %s\n", what, why.c_str());
    bad = 1;
  } else if (!pr.run(map, 3, 0, 1, nb, static_cast<uint32_t>(out.size()), out, what)) {
    bad = 1;
  } else {
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < format::kBlockBytes; ++i) {
        const int block = nb + c;
        const uint8_t want = block < p.N / 64 ? h[size_t(block) * 2 * format::kBlockBytes + format::kBlockBytes + i] : 0;
        if (out[size_t(c) * format::kBlockBytes + i] != want) {
          if (bad < 5) std::printf("%s: block %d byte %d got %d want %d\n", what, c, i, out[c * 2048 + i], want);
          ++bad;
        }
      }
  }
  cudaFree(d);
  return bad;
}

// The scale map (scale_map) of N = 128, K / group = 2 rows, box (128 columns, `rows` rows) at
// (column `col`, row 1): rows and columns past the tensor land zeros, the box counts rows x 256 bytes.
int check_scales(Probe& pr, int col, int rows) {
  GemmProblem p;
  p.K = 256;
  p.N = 128;
  p.group = 128;
  std::vector<uint16_t> h(size_t(p.K / p.group) * p.N);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(0x3c00 + i);
  void* d = nullptr;
  cudaMalloc(&d, h.size() * 2);
  cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice);
  CUtensorMap map;
  const std::string why = tma::scale_map(&map, d, p, rows, 128, "scales");
  char what[96];
  std::snprintf(what, sizeof(what), "scales col=%d rows=%d", col, rows);
  int bad = 0;
  std::vector<uint8_t> out(size_t(rows) * 256);
  if (!why.empty()) {
    std::printf("%s: %s\n", what, why.c_str());
    bad = 1;
  } else if (!pr.run(map, 2, col, 1, 0, static_cast<uint32_t>(out.size()), out, what)) {
    bad = 1;
  } else {
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < 128; ++j) {
        const int n = col + j, sr = 1 + r;
        const uint16_t want = (n < p.N && sr < p.K / p.group) ? h[size_t(sr) * p.N + n] : 0;
        uint16_t got;
        std::memcpy(&got, &out[r * 256 + 2 * j], 2);
        if (got != want) {
          if (bad < 5) std::printf("%s: (r %d, j %d) got %04x want %04x\n", what, r, j, got, want);
          ++bad;
        }
      }
  }
  cudaFree(d);
  return bad;
}

}  // namespace

int main() {
  Probe pr;
  int cases = 0, bad = 0;
  bad += check_x(pr, 200, 128, 64), ++cases;  // in bounds
  bad += check_x(pr, 5, 64, 0), ++cases;      // box taller than the tensor (M = 5, BT / 2 = 64)
  bad += check_x(pr, 100, 64, 64), ++cases;   // the last m tile: 36 rows inside, 28 past M
  bad += check_x(pr, 100, 128, 128), ++cases; // the peer's half wholly past M
  bad += check_packed(pr, 0), ++cases;        // the CTA's second n64 block past N
  bad += check_packed(pr, 2), ++cases;        // the peer's two blocks past N
  bad += check_scales(pr, 0, 2), ++cases;     // group 32's two rows, the second past the tensor
  bad += check_scales(pr, 128, 1), ++cases;   // the peer's scale box wholly past N
  std::printf("%d cases, %d bad\n", cases, bad);
  return bad != 0;
}
