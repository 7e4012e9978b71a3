#!/bin/bash
# 2026-12-03-f call 1: validate 5739156 (derived tile width) on main = e874ed2; the same-method read
# floor per decode shape; the cluster split-K prefill patch (clu) A/B against main, its tests and sanitizers.
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_prefill_main 120 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py tests/test_prefill_plan.py -rf
dc_run read_floor 100 python benchmarks/experiments/read_floor.py --rounds 2 --out $R/read_floor.json
dc_run decode_floor 150 python benchmarks/bench_decode.py --bits 4 8 --M 1 --no-cublas --read-floor --out $R/decode_floor.json
M="33,64,96,128,192,256,384"
VARIANTS="main clu" ROUNDS=3 TESTS="" DECODE_ARGS="" \
  PREFILL_ARGS="--model llama-3-70b,llama-3-8b --m $M --paths prefill" \
  PREFILL8_ARGS="--model llama-3-70b,llama-3-8b --m $M --paths prefill --bits 8" \
  timeout 220 bash scripts/ab_variants.sh > $R/abp_stdout.txt 2>&1
mkdir -p $R/abp && cp -r /tmp/ab/* $R/abp/ 2>/dev/null; dc_pack abp
dc_use clu && dc_run tests_clu 120 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py tests/test_prefill_plan.py -rf
dc_use clu && SAN_SECONDS=45 dc_sanitize -k prefill
