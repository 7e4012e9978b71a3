#!/bin/bash
# 2026-12-03-f call 4: deterministic decode, third version (call 3's main + the reduce kernel reading pieces
# and bias through __ldg) against base (e874ed2): deterministic decode tests, memcheck / racecheck on the
# decode sanitize cases, and the deterministic A/B (int4 + int8, M = 1 / 16 / 64).
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_det 100 python -m pytest -q -n 16 -p no:cacheprovider tests/test_decode_gpu.py tests/test_sanitize_gpu.py -k "determin" -rf
SAN_SECONDS=40 dc_sanitize -k "decode and deterministic"
VARIANTS="base main" ROUNDS=3 TESTS="" PREFILL_ARGS="" \
  DECODE_ARGS="--bits 4 8 --M 1 16 64 --no-cublas --deterministic" \
  timeout 170 bash scripts/ab_variants.sh > $R/ab_det_stdout.txt 2>&1
mkdir -p $R/ab_det && cp -r /tmp/ab/* $R/ab_det/ 2>/dev/null; dc_pack ab_det
