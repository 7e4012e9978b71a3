#!/bin/bash
# 2026-12-03-f call 5: where the deterministic regression at int8 M = 64 / int4 M = 16 sits (kernel timeline
# of base = e874ed2, main = the committed mode, fix1 = main + uniform piece counts in the reduce kernel when the
# grid is segments x P + the first piece computed after the dependency wait); fix1's deterministic tests,
# a short deterministic A/B, memcheck.
source scripts/device_call.sh
dc_begin
dc_use fix1 && dc_run tests_fix1 45 python -m pytest -q -n 16 -p no:cacheprovider tests/test_decode_gpu.py tests/test_sanitize_gpu.py -k "determin" -rf
for v in base main fix1; do
  dc_use $v && dc_run tl_$v 25 python benchmarks/experiments/decode_timeline.py --shapes 8b_qkv --M 16 64 --bits 8 --deterministic --no-cublas --calls 24 --replays 2
done
VARIANTS="base main fix1" ROUNDS=2 TESTS="" PREFILL_ARGS="" \
  DECODE_ARGS="--shapes 8b_qkv 8b_o 70b_gate_up --bits 4 8 --M 1 16 64 --no-cublas --deterministic" \
  timeout 75 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
mkdir -p $R/ab_det && cp -r /tmp/ab/* $R/ab_det/ 2>/dev/null; dc_pack ab_det
dc_use fix1 && timeout 20 compute-sanitizer --tool memcheck --error-exitcode 99 python -m pytest -q -p no:cacheprovider tests -m sanitize -k "decode and deterministic" > $R/san_memcheck.txt 2>&1; dc_pack "memcheck rc=$?"
