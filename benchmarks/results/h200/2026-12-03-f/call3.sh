#!/bin/bash
# 2026-12-03-f call 3: deterministic decode, second version (main: per-segment grid when it keeps 90% of
# the flat grid, first piece computed before the mainloop, 32-bit first_cta) against base (e874ed2):
# decode GPU tests + decode sanitizers on main, then decode A/B in the deterministic and the default mode.
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_decode 150 python -m pytest -q -n 16 -p no:cacheprovider tests/test_decode_gpu.py tests/test_sanitize_gpu.py tests/test_dispatch.py -m "not perf" -rf
SAN_SECONDS=50 dc_sanitize -k "decode"
for mode in det default; do
  extra=""; [ $mode = det ] && extra="--deterministic"
  VARIANTS="base main" ROUNDS=3 TESTS="" PREFILL_ARGS="" \
    DECODE_ARGS="--bits 4 8 --M 1 16 64 --no-cublas $extra" \
    timeout 170 bash scripts/ab_variants.sh > $R/ab_${mode}_stdout.txt 2>&1
  mkdir -p $R/ab_$mode && cp -r /tmp/ab/* $R/ab_$mode/ 2>/dev/null; dc_pack ab_$mode
done
