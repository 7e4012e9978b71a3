// Crossover tables for Blackwell: datacenter parts (sm100/sm103: B200, B300)
// and Jetson Thor (sm110; reported as 10.1 by CUDA 12.x drivers).
//
// Source: the Swordfish write-up's measurements on B200 and Thor
// (shared/reference/swordfish-writeup.txt, "Runtime dispatch" and "The dense
// tier"). Nobody here has a Blackwell GPU: these values are the write-up's,
// not re-measured. Re-measure with benchmarks/bench_dispatch.py on the device
// when one is available.
#pragma once

#include "kernels/dispatch/heuristics.hpp"

namespace swordfish {
namespace dispatch {
namespace heuristics {

inline constexpr Table kSm100 = {
    "sm100 (B200 values from the write-up)",
    // Write-up, "Runtime dispatch": decode always handles M <= 55 ...
    /*decode_max_m=*/55,
    // ... keeps M < 96 whenever the prefill grid, one CTA per 128 output
    // columns, would underfill the SMs ...
    /*decode_underfill_max_m=*/95,
    /*prefill_tile_n=*/128,
    // ... and keeps K-heavy narrow-N shapes (K >= 2N) through M = 127.
    /*decode_k_heavy_max_m=*/127,
    // Write-up: on datacenter parts the dense tier engages at M >= 1024 for
    // int8, at M >= 4096 for int4, and at M >= 512 for act-order weights when
    // N <= 2K.
    /*dense_vs_fused=*/DenseFrom{/*int4=*/4096, /*int4_k_heavy=*/4096, /*int8=*/1024, /*int8_k_heavy=*/1024,
                                 /*act_order=*/512},
    // Without the tcgen05 prefill (this build) decode runs up to the dense
    // tier. UNMEASURED: no Blackwell measurement of decode against dense
    // exists, so these are the H200's measured decode-vs-dense crossovers
    // (heuristics_sm90.hpp dense_vs_decode, 2026-12-03-d; they replaced the
    // pre-measurement estimates 512 / 256 this table had copied). The true
    // B200 values are likely lower still: the dense tier's GEMM runs ~2x the
    // H200's rate there (cuBLAS bf16 1,604-1,629 TFLOP/s in the write-up,
    // 725-793 on the H200 here) and its dequant rides ~1.7x the HBM bandwidth,
    // while decode's mma.sync gains little more than the SM count (148 / 132).
    /*dense_vs_decode=*/DenseFrom{/*int4=*/224, /*int4_k_heavy=*/224, /*int8=*/208, /*int8_k_heavy=*/224,
                                  /*act_order=*/208},
};

inline constexpr Table kThor = {
    "sm110 Jetson Thor (values from the write-up)",
    // Decode/prefill boundaries: the write-up gives no Thor-specific ones;
    // the B200 values stand in (the underfill test adapts to Thor's SM count).
    /*decode_max_m=*/55,
    /*decode_underfill_max_m=*/95,
    /*prefill_tile_n=*/128,
    /*decode_k_heavy_max_m=*/127,
    // Write-up: on Thor the dense tier serves int8 only, from M >= 2048 on
    // ordinary shapes and from M >= 8192 on K-heavy ones; int4 stays fused
    // at every M (its cuBLAS rate never overcomes the 4x weight-traffic gap).
    // No act-order figure for Thor: act-order follows its bit width.
    /*dense_vs_fused=*/DenseFrom{/*int4=*/kNever, /*int4_k_heavy=*/kNever, /*int8=*/2048, /*int8_k_heavy=*/8192,
                                 /*act_order=*/kNever},
    // Without prefill the same figures. UNMEASURED as such: they were measured
    // against decode + prefill, and against decode alone dense may win earlier.
    /*dense_vs_decode=*/DenseFrom{/*int4=*/kNever, /*int4_k_heavy=*/kNever, /*int8=*/2048, /*int8_k_heavy=*/8192,
                                  /*act_order=*/kNever},
};

}  // namespace heuristics
}  // namespace dispatch
}  // namespace swordfish
