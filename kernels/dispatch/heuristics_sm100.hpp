// Crossover tables for Blackwell: datacenter parts (sm100/sm103: B200, B300)
// and Jetson Thor (sm110; reported as 10.1 by CUDA 12.x drivers).
//
// Not measured here: nobody here has a Blackwell GPU. The fused-path values are
// the Swordfish write-up's B200 / Thor figures (shared/reference/
// swordfish-writeup.txt, "Runtime dispatch" and "The dense tier"); re-measure
// with benchmarks/bench_dispatch.py when a device is available
// (benchmarks/RESULTS.md [blackwell]).
//
// The prefill ranges (decode limits against prefill, dense_vs_fused) apply only
// where prefill::can_implement is "": the tcgen05 prefill (kernels/prefill/sm100/)
// is compiled, not run, and serves a problem only with SWORDFISH_SM100_PREFILL=1.
// Without it (the default) dense_vs_decode decides, as before the path existed.
#pragma once

#include "kernels/dispatch/heuristics.hpp"

namespace swordfish {
namespace dispatch {
namespace heuristics {

inline constexpr Table kSm100 = {
    "sm100 (B200 values from the write-up)",
    // 55: the write-up's B200 decode limit
    /*decode_max_m=*/55,
    // 95: decode keeps M < 96 while the prefill grid (one CTA per 128 columns) underfills the SMs
    /*decode_underfill_max_m=*/95,
    /*prefill_tile_n=*/128,
    // 127: K-heavy narrow layers (K >= 2N) keep decode through M = 127
    /*decode_k_heavy_max_m=*/127,
    // 4096 int4 / 1024 int8 / 512 act-order (N <= 2K): the write-up's B200 dense-tier starts
    /*dense_vs_fused=*/DenseFrom{/*int4=*/4096, /*int4_k_heavy=*/4096, /*int8=*/1024, /*int8_k_heavy=*/1024,
                                 /*act_order=*/512},
    // Without SWORDFISH_SM100_PREFILL this set decides. UNMEASURED: the H200's decode-vs-dense
    // crossovers (heuristics_sm90.hpp, [dense-decode]); B200's are likely lower, since its dense tier
    // gains ~2x cuBLAS rate and ~1.7x HBM while decode gains little beyond 148 / 132 SMs.
    /*dense_vs_decode=*/DenseFrom{/*int4=*/224, /*int4_k_heavy=*/224, /*int8=*/208, /*int8_k_heavy=*/224,
                                  /*act_order=*/208},
};

inline constexpr Table kThor = {
    "sm110 Jetson Thor (values from the write-up)",
    // 55 / 95 / 127: no Thor-specific decode limits in the write-up; B200's stand in (the underfill
    // rule adapts to Thor's SM count)
    /*decode_max_m=*/55,
    /*decode_underfill_max_m=*/95,
    /*prefill_tile_n=*/128,
    /*decode_k_heavy_max_m=*/127,
    // int8 2048 (8192 K-heavy); int4 and act-order never: on Thor cuBLAS never repays int4's 4x
    // weight traffic (write-up)
    /*dense_vs_fused=*/DenseFrom{/*int4=*/kNever, /*int4_k_heavy=*/kNever, /*int8=*/2048, /*int8_k_heavy=*/8192,
                                 /*act_order=*/kNever},
    // Without SWORDFISH_SM100_PREFILL this set decides. UNMEASURED: the H200's decode-vs-dense
    // crossovers, as on B200. The write-up's "int4 never dense" was against decode + tcgen05 prefill;
    // decode alone runs ~2.4x cuBLAS's time at M = 8192 (H100), so large M must reach cuBLAS.
    /*dense_vs_decode=*/DenseFrom{/*int4=*/224, /*int4_k_heavy=*/224, /*int8=*/208, /*int8_k_heavy=*/224,
                                  /*act_order=*/208},
};

}  // namespace heuristics
}  // namespace dispatch
}  // namespace swordfish
