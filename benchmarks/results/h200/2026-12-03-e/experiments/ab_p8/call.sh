#!/bin/bash
# 2026-12-03-e call 3: int8's own prefill slice constants (`p8`, built on 943b2cd) against main
# (7f261f8: the 192-column tile, int4 constants for both widths): int8 prefill A/B at the M where the
# plans differ; the prefill GPU tests on p8; the whole suite on main.
source scripts/device_call.sh
dc_begin
VARIANTS="main p8" ROUNDS=3 TESTS="" PREFILL_ARGS="" DECODE_ARGS="" \
  PREFILL8_ARGS="--model llama-3-70b,llama-3-8b --m 128,192,256,384,1024 --paths prefill --bits 8" \
  timeout 150 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
mkdir -p $R/ab && cp -r /tmp/ab/* $R/ab/ 2>/dev/null; dc_pack ab
dc_use p8 && dc_run tests_p8 80 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py -rf
dc_use main && dc_run tests_main 220 python -m pytest -q -n 16 -p no:cacheprovider tests -m "not perf" -rf
