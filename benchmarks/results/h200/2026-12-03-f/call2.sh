#!/bin/bash
# 2026-12-03-f call 2: deterministic decode on the atomic mode's balanced split (main, uncommitted on
# e874ed2) against base (e874ed2): the whole suite and decode sanitizers on main, a deterministic decode
# A/B (int4 + int8, M = 1 / 16 / 64), main's default mode for the ratio, and the streaming-read floor.
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_main 230 python -m pytest -q -n 16 -p no:cacheprovider tests -m "not perf" -rf
SAN_SECONDS=60 dc_sanitize -k "decode"
VARIANTS="base main" ROUNDS=3 TESTS="" PREFILL_ARGS="" \
  DECODE_ARGS="--bits 4 8 --M 1 16 64 --no-cublas --deterministic" \
  timeout 200 bash scripts/ab_variants.sh > $R/abd_stdout.txt 2>&1
mkdir -p $R/abd && cp -r /tmp/ab/* $R/abd/ 2>/dev/null; dc_pack abd
dc_use main
dc_run default_main 60 python benchmarks/bench_decode.py --bits 4 8 --M 1 16 64 --no-cublas --rounds 2 --out $R/default_main.json
dc_run read_floor 60 python benchmarks/experiments/read_floor.py --rounds 2 --out $R/read_floor.json
