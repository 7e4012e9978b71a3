#!/bin/bash
# 2026-12-03-g call 2: int8 prefill with half-height epilogue staging (sm90::epi_rows: four pipeline
# stages at BT 256, four k128 stages at BT 128). main = the change, epi256 = the change with int8 BT 128
# kept on seven k64 stages (slices_for patched), base = 3199b82. Prefill GPU tests and the prefill
# sanitizer cases on main, then an interleaved int8 prefill A/B.
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_prefill 200 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py tests/test_prefill_plan.py tests/test_dispatch.py -rf
SAN_SECONDS=80 dc_sanitize -k "prefill or two_pass"
VARIANTS="base main epi256" ROUNDS=2 TESTS="" DECODE_ARGS="" PREFILL_ARGS="" \
  PREFILL8_ARGS="--model llama-3-70b,llama-3-8b --m 128,256,512,1024,2048 --paths prefill --bits 8" \
  timeout 330 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
mkdir -p $R/ab && cp -r /tmp/ab/* $R/ab/ 2>/dev/null; dc_pack ab
