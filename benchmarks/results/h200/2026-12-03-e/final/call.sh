#!/bin/bash
# 2026-12-03-e call 4: the final build (27b2d1d: the 192-column tile, int8's own prefill constants):
# the dispatcher sweep (int4 + int8, every path, 5 interleaved rounds), `swordfish bench`, the decode
# bench (by-m), and the sanitizers over the prefill cases.
source scripts/device_call.sh
dc_begin
STAGES="prebuilt probe" OUT=$R bash scripts/gpu_check.sh > /dev/null 2>&1; dc_pack install
M_SWEEP="1,16,24,32,40,48,56,64,72,80,96,128,192,256,384,512,768,1024,2048,4096,8192"
dc_run dispatch 170 python benchmarks/bench_dispatch.py --bits 4 8 --m "$M_SWEEP" --rounds 5 --out $R/dispatch
(mkdir -p $R/bench && cd $R/bench && timeout 60 python -m swordfish_backend bench --commit 27b2d1d > bench.txt 2>&1); dc_pack bench
dc_run decode 100 python benchmarks/bench_decode.py --bits 4 8 --M 1 16 32 64 128 --out $R/decode.json
SAN_SECONDS=40 dc_sanitize -k prefill
