"""The prepack kernel's own code, run on the CPU (no GPU needed).

kernels/prep/prepack.cuh splits the kernel into two host/device functions
(stage, then assemble, with __syncthreads between). This test compiles a
driver with nvcc that runs them for every thread of every CTA on the host and
compares the result with a packer written directly from format::locate, for
int4 and int8, with and without a permutation (including out-of-range
entries), over shapes with odd numbers of k-blocks and n-blocks. The
index math itself is also proven at compile time (prepack_index.h).
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

DRIVER = r"""
#include <cstdint>
#include <cstdio>
#include <vector>
#include "kernels/prep/prepack.cuh"
using namespace swordfish;

// format::locate evaluated at compile time (its tables are host/device
// constexpr arrays: a runtime call from a .cu file would need them in device code).
template <int kBits>
struct LocateTable {
  format::Slot slot[64 * 64];
  constexpr LocateTable() : slot{} {
    for (int k = 0; k < format::block_k(kBits); ++k)
      for (int n = 0; n < format::kBlockN; ++n) slot[k * format::kBlockN + n] = format::locate(kBits, k, n);
  }
};
static constexpr LocateTable<4> kLocate4{};
static constexpr LocateTable<8> kLocate8{};

static uint32_t rng_state = 12345u;
static uint32_t next_rand() { rng_state = rng_state * 1664525u + 1013904223u; return rng_state >> 8; }

template <int kBits, bool kPerm>
static std::vector<int32_t> emulate(const prep::PrepackParams& p) {
  const int num_kb = p.K / format::block_k(kBits);
  for (int nb = 0; nb < p.N / format::kBlockN; ++nb)
    for (int cta = 0; cta * prep::kBlocksPerCta < num_kb; ++cta) {
      auto* smem = new prep::PrepackSharedStorage<kBits>();
      for (int tid = 0; tid < prep::kThreads; ++tid)
        prep::prepack_stage<kBits, kPerm>(p, tid, nb, cta * prep::kBlocksPerCta, *smem);
      for (int tid = 0; tid < prep::kThreads; ++tid)
        prep::prepack_assemble<kBits>(p, tid, nb, cta * prep::kBlocksPerCta, *smem);
      delete smem;
    }
  return {};
}

template <int kBits>
static int check(int K, int N, int perm_mode) {
  const int vpw = 32 / kBits, bk = format::block_k(kBits);
  std::vector<uint8_t> q(static_cast<size_t>(K) * N);
  for (auto& v : q) v = static_cast<uint8_t>(next_rand() & ((1u << kBits) - 1u));
  std::vector<int32_t> qweight(static_cast<size_t>(K / vpw) * N, 0);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n)
      qweight[static_cast<size_t>(k / vpw) * N + n] |= static_cast<int32_t>(uint32_t(q[size_t(k) * N + n]) << (kBits * (k % vpw)));
  std::vector<int32_t> perm(K);
  for (int k = 0; k < K; ++k) perm[k] = k;
  if (perm_mode >= 1)
    for (int k = K - 1; k > 0; --k) std::swap(perm[k], perm[next_rand() % (k + 1)]);
  if (perm_mode == 2) { perm[1] = K + 7; perm[K - 1] = -3; }
  std::vector<int32_t> expected(static_cast<size_t>(K) * N / vpw, 0), out(expected.size(), 0x7f7f7f7f);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) {
      const int src = perm_mode ? perm[k] : k;
      const uint32_t v = (src >= 0 && src < K) ? q[size_t(src) * N + n] : 0u;
      const format::Slot* table = kBits == 4 ? kLocate4.slot : kLocate8.slot;
      const format::Slot s = table[(k % bk) * format::kBlockN + n % format::kBlockN];
      expected[format::block_offset_words(kBits, K, n / format::kBlockN, k / bk) + s.word] |= static_cast<int32_t>(v << s.shift);
    }
  prep::PrepackParams p{qweight.data(), perm_mode ? perm.data() : nullptr, out.data(), K, N};
  if (perm_mode) emulate<kBits, true>(p); else emulate<kBits, false>(p);
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] != expected[i]) {
      printf("MISMATCH int%d K=%d N=%d perm=%d word %zu: got %08x expected %08x\n", kBits, K, N, perm_mode, i,
             uint32_t(out[i]), uint32_t(expected[i]));
      return 1;
    }
  return 0;
}

int main() {
  int bad = 0, cases = 0;
  const int shapes4[][2] = {{64, 64}, {128, 64}, {192, 192}, {320, 128}, {448, 320}};
  const int shapes8[][2] = {{32, 64}, {64, 64}, {96, 192}, {160, 128}, {224, 320}};
  for (int mode = 0; mode < 3; ++mode) {
    for (auto& s : shapes4) { bad += check<4>(s[0], s[1], mode); ++cases; }
    for (auto& s : shapes8) { bad += check<8>(s[0], s[1], mode); ++cases; }
  }
  printf("%d cases, %d bad\n", cases, bad);
  return bad != 0;
}
"""


def test_prepack_kernel_code_on_host(tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found: the host emulation of the prepack kernel needs it")
    src, exe = tmp_path / "prepack_host.cu", tmp_path / "prepack_host"
    src.write_text(DRIVER)
    build = subprocess.run([nvcc, "-std=c++17", "-O1", "--expt-relaxed-constexpr", "-I", str(ROOT), str(src), "-o",
                            str(exe)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-4000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert run.stdout.strip().endswith("30 cases, 0 bad"), run.stdout
