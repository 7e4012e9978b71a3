// How fast can the sm90 prefill producer move a stage? A standalone
// experiment (no torch): the prefill kernel's producer (same CTA shape, same
// mbarrier ring, same TMA boxes) with consumers that release a stage the
// moment it lands, over a 70B gate_up-sized packed tensor (K 8192, N 57344,
// int4: 235 MB, far above L2). Variants change only how a stage's bytes are
// requested, so the time per stage isolates the load path from the
// Transform + wgmma side.
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -I<cutlass>/include -o tma_stream tma_stream.cu
//   ./tma_stream            (prints one line per variant)
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cutlass/arch/barrier.h>

namespace {

constexpr int kThreads = 384;
constexpr int kStages = 8;
constexpr int kBlockBytes = 2048;

enum Flags : int {
  kX = 1,        // x: (rows, 64) 16-bit box, 128-byte swizzle (L2 resident)
  kW = 2,        // packed: one 3-D box, 2 n64 blocks x k64 (2 x 2 KB)
  kS = 4,        // one scale row: (128 columns) 16-bit box
  kWBulk = 8,    // packed: two 1-D bulk copies of 2 KB (one per n64 block)
  kWAsync = 16,  // packed: cp.async 16 B per lane by producer warp 3, mbarrier arrive.noinc
  kWide = 32,    // with kW: k128 per stage (2 k blocks per n64 block: 2 x 4 KB)
};

struct Params {
  const uint8_t* packed;
  int K, N, flags, x_rows;
  int kblocks;  // K / 64
};

__global__ void __launch_bounds__(kThreads, 1)
    stream_kernel(const __grid_constant__ Params p, const __grid_constant__ CUtensorMap tmap_x,
                  const __grid_constant__ CUtensorMap tmap_w, const __grid_constant__ CUtensorMap tmap_w2,
                  const __grid_constant__ CUtensorMap tmap_s, unsigned long long* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using cutlass::arch::ClusterBarrier;
  using cutlass::arch::ClusterTransactionBarrier;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  constexpr int kXBytes = 128 * 128;  // up to 128 rows of 128 B
  constexpr int kWBytes = 4 * kBlockBytes;
  constexpr int kSBytes = 256;
  uint8_t* sx = smem;
  uint8_t* sw = sx + kStages * kXBytes;
  uint8_t* ss = sw + kStages * kWBytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(ss + kStages * kSBytes);
  uint64_t* empty = full + kStages;
  const bool wide = (p.flags & kWide) != 0;
  const bool async_w = (p.flags & kWAsync) != 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ClusterBarrier::init(&full[s], 1 + (async_w ? 32 : 0));
      ClusterBarrier::init(&empty[s], 2);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  const int n_tiles = p.N / 128;
  const int step = wide ? 2 : 1;  // k blocks per stage
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const bool issuer = (warp < 3 && lane == 0) || (warp == 3 && async_w);
    if (!issuer) return;
    uint32_t tx = 0;
    if (p.flags & kX) tx += p.x_rows * 128;
    if (p.flags & (kW | kWBulk)) tx += 2 * kBlockBytes * step;
    if (p.flags & kS) tx += 256;
    const uint64_t hint = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL);
    int stage = 0;
    uint32_t phase = 0;
    for (int tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
      const int nb = 2 * tile;
      for (int kb = 0; kb < p.kblocks; kb += step) {
        ClusterBarrier::wait(&empty[stage], phase ^ 1);
        if (warp == 0) {
          ClusterTransactionBarrier::arrive_and_expect_tx(&full[stage], tx);
          if (p.flags & kX) cute::SM90_TMA_LOAD_2D::copy(&tmap_x, &full[stage], hint, sx + stage * kXBytes, kb * 64, 0);
        } else if (warp == 1) {
          if (p.flags & kW) {
            cute::SM90_TMA_LOAD_3D::copy(wide ? &tmap_w2 : &tmap_w, &full[stage], hint, sw + stage * kWBytes, 0, kb, nb);
          } else if (p.flags & kWBulk) {
            for (int j = 0; j < 2; ++j)
              cute::SM90_BULK_COPY_G2S::copy(p.packed + (static_cast<long long>(nb + j) * p.kblocks + kb) * kBlockBytes,
                                             &full[stage], sw + stage * kWBytes + j * kBlockBytes, kBlockBytes);
          }
        } else if (warp == 2) {
          if (p.flags & kS) cute::SM90_TMA_LOAD_2D::copy(&tmap_s, &full[stage], hint, ss + stage * kSBytes, tile * 128, kb / 2);
        } else {
          // 2 blocks x 2 KB = 256 chunks of 16 B: 8 per lane, then arrive when they land.
          for (int i = 0; i < 8; ++i) {
            const int chunk = i * 32 + lane;
            const int j = chunk / 128;
            const uint8_t* src = p.packed + (static_cast<long long>(nb + j) * p.kblocks + kb) * kBlockBytes + (chunk % 128) * 16;
            const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(sw + stage * kWBytes + chunk * 16));
            asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
          }
          const uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(&full[stage]));
          asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
        }
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
    return;
  }
  // Consumers: release each stage as soon as it lands (touch one word so the wait is real).
  const int tid = threadIdx.x % 128;
  unsigned long long acc = 0;
  int stage = 0;
  uint32_t phase = 0;
  for (int tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
    for (int kb = 0; kb < p.kblocks; kb += step) {
      ClusterBarrier::wait(&full[stage], phase);
      acc += reinterpret_cast<const uint32_t*>(sw + stage * kWBytes)[tid];
      __syncwarp();
      if (tid == 0) ClusterBarrier::arrive(&empty[stage]);
      if (++stage == kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
  if (acc == 0x123456789ull) *sink = acc;
#endif
}

// Plain streaming read of the same bytes (16 B per thread per load): the ceiling.
__global__ void read_kernel(const uint4* __restrict__ src, long long n, unsigned long long* sink) {
  uint32_t acc = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

void encode(CUtensorMap* m, CUtensorMapDataType t, int rank, const void* base, const cuuint64_t* dims,
            const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle sw) {
  static EncodeTiled fn = nullptr;
  if (fn == nullptr) {
    cudaDriverEntryPointQueryResult q;
    cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&fn), 12000, cudaEnableDefault, &q);
  }
  const cuuint32_t elem[3] = {1, 1, 1};
  const CUresult r = fn(m, t, rank, const_cast<void*>(base), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::printf("encode failed %d\n", static_cast<int>(r));
    std::exit(1);
  }
}

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));    \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

}  // namespace

int main() {
  const int K = 8192, N = 57344;
  const long long w_bytes = static_cast<long long>(K) * N / 2;
  const int kblocks = K / 64;
  uint8_t *w, *x, *s;
  unsigned long long* sink;
  CK(cudaMalloc(&w, w_bytes));
  CK(cudaMalloc(&x, 128LL * K * 2));
  CK(cudaMalloc(&s, static_cast<long long>(K / 128) * N * 2));
  CK(cudaMalloc(&sink, 8));
  CK(cudaMemset(w, 0x5a, w_bytes));
  CK(cudaMemset(x, 0x11, 128LL * K * 2));
  CK(cudaMemset(s, 0x22, static_cast<long long>(K / 128) * N * 2));
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));

  CUtensorMap tw, tw2, ts;
  {
    const cuuint64_t dims[3] = {kBlockBytes / 8, static_cast<cuuint64_t>(kblocks), static_cast<cuuint64_t>(N / 64)};
    const cuuint64_t strides[2] = {kBlockBytes, static_cast<cuuint64_t>(kblocks) * kBlockBytes};
    const cuuint32_t box[3] = {kBlockBytes / 8, 1, 2};
    encode(&tw, CU_TENSOR_MAP_DATA_TYPE_UINT64, 3, w, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE);
    const cuuint32_t box2[3] = {kBlockBytes / 8, 2, 2};
    encode(&tw2, CU_TENSOR_MAP_DATA_TYPE_UINT64, 3, w, dims, strides, box2, CU_TENSOR_MAP_SWIZZLE_NONE);
  }
  {
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(N), static_cast<cuuint64_t>(K / 128)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(N) * 2};
    const cuuint32_t box[2] = {128, 1};
    encode(&ts, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, s, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE);
  }
  const int smem = 1024 + kStages * (128 * 128 + 4 * kBlockBytes + 256) + 2 * kStages * 8;
  CK(cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  auto time = [&](auto&& launch) {
    for (int i = 0; i < 3; ++i) launch();
    CK(cudaEventRecord(a));
    const int reps = 20;
    for (int i = 0; i < reps; ++i) launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    CK(cudaGetLastError());
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    return 1000.0 * ms / reps;
  };
  const double read_us = time([&] { read_kernel<<<sms * 4, 512>>>(reinterpret_cast<const uint4*>(w), w_bytes / 16, sink); });
  std::printf("%-34s %9.1f us  %6.0f GB/s packed\n", "plain read (ldcs, 16 B/thread)", read_us, w_bytes / read_us / 1e3);
  struct V {
    const char* name;
    int flags, x_rows;
  } variants[] = {
      {"W box", kW, 8},
      {"W bulk (2 x 1-D)", kWBulk, 8},
      {"W cp.async (warp 3)", kWAsync, 8},
      {"W box k128 (2 x 4 KB)", kW | kWide, 8},
      {"W box + S", kW | kS, 8},
      {"W box + X8 + S (M<=8 producer)", kW | kX | kS, 8},
      {"W box + X64 + S (BT 64)", kW | kX | kS, 64},
      {"W box + X128 + S (BT 128)", kW | kX | kS, 128},
      {"W bulk + X64 + S", kWBulk | kX | kS, 64},
      {"W cp.async + X64 + S", kWAsync | kX | kS, 64},
      {"W cp.async + X128 + S", kWAsync | kX | kS, 128},
  };
  for (const V& v : variants) {
    CUtensorMap tx;
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(K), 128};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(K) * 2};
    const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(v.x_rows)};
    encode(&tx, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, x, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
    Params p{w, K, N, v.flags, v.x_rows, kblocks};
    const double us = time([&] { stream_kernel<<<sms, kThreads, smem>>>(p, tx, tw, tw2, ts, sink); });
    const double stages = static_cast<double>(N / 128) * kblocks / sms;
    std::printf("%-34s %9.1f us  %6.0f GB/s packed  %5.3f us per k64 stage\n", v.name, us, w_bytes / us / 1e3,
                us / stages);
  }
  return 0;
}
