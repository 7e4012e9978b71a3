// PTX wrappers shared by the hand-written kernels: one instruction each, with
// the reason it is written by hand. Device-only; no torch, no CUTLASS.
//
// Register conventions: packed 16-bit pairs (f16x2 / bf16x2) travel as
// uint32_t, low half = the lower index; shared-memory addresses are 32-bit
// (cvta to the shared window), global addresses are generic 64-bit pointers.
#pragma once

#include <cstdint>

#if !defined(__CUDACC__)
#error "ptx.cuh is a CUDA device header"
#endif

#ifndef SF_DEVICE
#define SF_DEVICE __device__ __forceinline__
#endif

namespace swordfish {
namespace ptx {

// ---------------------------------------------------------------- addresses

// 32-bit shared-window address: cp.async / ldmatrix / ld.shared take it, and a
// 32-bit cursor avoids 64-bit address arithmetic in the hot loop.
SF_DEVICE uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// ---------------------------------------------------------------- cache policy

// L2 policy for data read exactly once (the weight stream): leaves L2 to the
// activations and scales that every column re-reads.
SF_DEVICE uint64_t policy_evict_first() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  return pol;
}

// L2 policy for data some other warp reads again soon (weights of a layer
// streamed once per m-group when M needs several).
SF_DEVICE uint64_t policy_evict_normal() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(pol));
  return pol;
}

// ---------------------------------------------------------------- cp.async

// 16-byte async copy, L2 only (.cg), with an L2 eviction policy: the weight
// stream is staged without registers and without polluting L1.
SF_DEVICE void cp_async_16_cg(uint32_t dst, const void* src, uint64_t pol) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "l"(pol)
               : "memory");
}

// 16-byte async copy through L1 (.ca): the four warps of a CTA copy the same
// activation bytes, so three of the four copies hit L1.
SF_DEVICE void cp_async_16_ca(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

// 4-byte async copy (.ca): one scale (or zero-point) pair per lane rides the
// same commit group as the weights it scales.
SF_DEVICE void cp_async_4_ca(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
}

// Pull one 128-byte line into L2 (no register, no shared memory, no ordering):
// what a kernel may do with constant inputs (the packed weights) before its
// grid-dependency wait, so their first HBM round trip overlaps the tail of
// the kernel before it.
SF_DEVICE void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

// Loads through L2 only (ld.global.cg): read before this grid's dependency wait
// (what an earlier kernel of the chain wrote), no L1 line of an older launch answers.
SF_DEVICE int ld_cg_s32(const int32_t* p) {
  int v;
  asm volatile("ld.global.cg.s32 %0, [%1];\n" : "=r"(v) : "l"(p));
  return v;
}

// Close the current group of async copies (one pipeline stage).
SF_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Wait until at most N of this thread's groups are in flight: per-thread, so
// lane-local staging needs no warp or CTA barrier.
template <int N>
SF_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// ---------------------------------------------------------------- shared memory

// 16-byte shared load of a lane's own staged weight slot (LDS.128, conflict
// free: a warp reads 512 contiguous bytes). volatile: must stay after the wait.
SF_DEVICE uint4 lds_128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}

// 4-byte shared load (the prefill Transform's packed words).
SF_DEVICE uint32_t lds_32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

// 8-byte shared load: an int8 prefill fragment is two adjacent words of a
// lane's slot (LDS.64; the row assignment in prefill/transform.cuh keeps it
// conflict free).
SF_DEVICE uint2 lds_64(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}

// 2-byte shared load: one output column's scale (or folded zero point) from a
// staged scale row; the prefill Transform needs one column per fragment row.
SF_DEVICE uint32_t lds_u16(uint32_t addr) {
  uint16_t v;
  asm volatile("ld.shared.u16 %0, [%1];\n" : "=h"(v) : "r"(addr));
  return v;
}

// 2-byte shared store: the prefill epilogue writes one output value into the
// 128-byte-swizzled staging tile of a TMA store (conflict free by layout).
SF_DEVICE void sts_u16(uint32_t addr, uint16_t v) {
  asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(addr), "h"(v) : "memory");
}

// 16-byte shared store (one-time zero fill of activation slots no lane copies).
SF_DEVICE void sts_128(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// Four 8x8 b16 matrices into mma.sync A-fragment order in one instruction
// (replaces eight scalar shared loads).
SF_DEVICE void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// Transposed: thread i receives (row 2 (i % 4), row 2 (i % 4) + 1) of column
// i / 4 of each matrix. The decode kernels use it to broadcast a staged scale
// row to the lanes whose fragment columns need it (decode_gemm.cuh, scale_columns).
SF_DEVICE void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// ---------------------------------------------------------------- tensor core

// D += A * B, m16n8k16, fp16 inputs, fp32 accumulate (HMMA.16816.F32).
SF_DEVICE void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// D += A * B, m16n8k16, bf16 inputs, fp32 accumulate (HMMA.16816.F32.BF16).
SF_DEVICE void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---------------------------------------------------------------- integer / bit ops

// Three-input logic op with an immediate truth table: mask-and-insert of a
// magic exponent in one instruction (the compiler does not always fuse it).
template <int LUT>
SF_DEVICE uint32_t lop3(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(LUT));
  return d;
}

// Byte permute: duplicates one 16-bit half into both halves (scale pairs) and
// places int8 codes under a magic exponent, one instruction each.
SF_DEVICE uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// Warp shuffle (butterfly): the swapped-operand decode epilogue trades one
// token's value with the lane holding the adjacent output column, so each
// lane owns a column pair of one token for a packed-pair red.global.
// The 32-bit form also moves packed halves (the gemm_kernel epilogue's
// 8-column runs).
SF_DEVICE uint32_t shfl_xor_u32(uint32_t v, int mask) {
  uint32_t d;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;\n" : "=r"(d) : "r"(v), "r"(mask));
  return d;
}

SF_DEVICE float shfl_xor_f32(float v, int mask) { return __uint_as_float(shfl_xor_u32(__float_as_uint(v), mask)); }

// ---------------------------------------------------------------- packed half math

// d = a * b + c on f16x2 with one rounding (HFMA2): removes the magic bias,
// applies scale and folded zero point exactly as the reference rounds.
SF_DEVICE uint32_t fma_f16x2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// d = a * b + c on bf16x2 with one rounding (HFMA2.BF16): the bf16 twin; the
// fma form also exists on sm80 where mul/sub.bf16x2 do not.
SF_DEVICE uint32_t fma_bf16x2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// d = a * b on f16x2 (HMUL2): the scale multiply when there is no zero point.
SF_DEVICE uint32_t mul_f16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// Two fp32 -> packed f16x2, round to nearest: one cvt for an output pair
// (hi goes to the upper half).
SF_DEVICE uint32_t cvt_pack_f16x2(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// Two fp32 -> packed bf16x2, round to nearest.
SF_DEVICE uint32_t cvt_pack_bf16x2(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// One f16 -> fp32 (bias values in the deterministic epilogues).
SF_DEVICE float cvt_f32_f16(uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
  return f;
}

// One 16-bit activation value (bf16 or f16 bit pattern) -> fp32.
template <bool BF16>
SF_DEVICE float to_f32(uint16_t v) {
  if constexpr (BF16) {
    return __uint_as_float(static_cast<uint32_t>(v) << 16);
  } else {
    return cvt_f32_f16(v);
  }
}

// fp32 -> one 16-bit value (bf16 or f16 bit pattern), round to nearest.
template <bool BF16>
SF_DEVICE uint16_t from_f32(float v) {
  const uint32_t pair = BF16 ? cvt_pack_bf16x2(v, 0.f) : cvt_pack_f16x2(v, 0.f);
  return static_cast<uint16_t>(pair & 0xffffu);
}

// ---------------------------------------------------------------- global atomics

// Packed-pair reduction into global memory without a return value (RED): the
// split-K epilogue. atomicAdd(__half2*) would be an atomic with return.
SF_DEVICE void red_add_f16x2(void* addr, uint32_t v) {
  asm volatile("red.global.add.noftz.f16x2 [%0], %1;\n" ::"l"(addr), "r"(v) : "memory");
}

// bf16x2 twin (sm_90+ in PTX); on older targets atomicAdd(__nv_bfloat162*)
// compiles to a compare-and-swap loop, which is why this is hand-written.
SF_DEVICE void red_add_bf16x2(void* addr, uint32_t v) {
  asm volatile("red.global.add.noftz.bf16x2 [%0], %1;\n" ::"l"(addr), "r"(v) : "memory");
}

// Eight consecutive halves (16-byte aligned) in one reduction, sm_90+ only
// (REDG.E.ADD.F16x8 / BF16x8): a quarter of the atomic operations of four
// packed pairs, for the decode epilogue's 8-column runs (detail::red_run picks
// these or the pairs by architecture).
SF_DEVICE void red_add_f16x8(void* addr, uint4 v) {
  asm volatile("red.global.add.noftz.v4.f16x2 [%0], {%1, %2, %3, %4};\n" ::"l"(addr), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}

SF_DEVICE void red_add_bf16x8(void* addr, uint4 v) {
  asm volatile("red.global.add.noftz.v4.bf16x2 [%0], {%1, %2, %3, %4};\n" ::"l"(addr), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}

// Two adjacent fp32 values (8-byte aligned) in one reduction, sm_90+ only
// (RED.E.ADD.F32x2): the fused-MoE epilogues sum split-K pieces and top-k
// experts in fp32; one vector reduction per output pair instead of two scalar
// atomics, without a return value.
SF_DEVICE void red_add_f32x2(float* addr, float v0, float v1) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(addr), "f"(v0), "f"(v1) : "memory");
}

// ---------------------------------------------------------------- programmatic dependent launch

// Wait until the preceding grid in the stream has completed and its writes are
// visible; a no-op when the launch had no programmatic edge. Every kernel we
// launch with programmatic stream serialization calls it before its first
// global access that depends on an earlier kernel (reading x, writing y).
SF_DEVICE void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Let the next grid in the stream start its prologue now (it waits for our
// completion with grid_dependency_wait before touching what we write). The
// launch fires once every CTA of this grid has executed it or exited, so the
// dependents never take SM slots from CTAs of ours not yet resident.
SF_DEVICE void grid_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace ptx
}  // namespace swordfish
