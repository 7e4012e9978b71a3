#!/bin/bash
# 2026-12-03-e call 1: the 192-column prefill tile (cg3: the planner's 1.5x guess; cg3f: the wide tile
# wherever it exists, for timing) against main (8dc57a8): prefill A/B int4 + int8, the GPU tests of
# both trees, the whole suite at 8dc57a8 (prefill M < 64, decode M = 24 formats, M = 200 / 223 never
# run before), sanitizers on the wide tile. prebuilt/cg3.patch was `git diff` of the cg3 branch.
source scripts/device_call.sh
dc_begin
rm -rf /tmp/t3 && mkdir -p /tmp/t3 && cp -r . /tmp/t3/ && (cd /tmp/t3 && (git apply prebuilt/cg3.patch || patch -p1 < prebuilt/cg3.patch)) > $R/patch.txt 2>&1
dc_pack "patch rc=$?"
M="33,64,128,192,256,384,512,768,1024,2048"
(cd /tmp/t3 && VARIANTS="main cg3f" ROUNDS=2 TESTS="" DECODE_ARGS="" \
  PREFILL_ARGS="--model llama-3-70b,llama-3-8b --m $M --paths prefill" \
  PREFILL8_ARGS="--model llama-3-70b,llama-3-8b --m $M --paths prefill --bits 8" \
  timeout 200 bash scripts/ab_variants.sh > $R/abp_stdout.txt 2>&1)
mkdir -p $R/abp && cp -r /tmp/ab/* $R/abp/ 2>/dev/null; dc_pack abp
cd /tmp/t3
dc_use cg3 && dc_run tests_cg3 90 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py tests/test_dispatch.py tests/test_prefill_plan.py -rf
dc_use cg3f && dc_run tests_cg3f 60 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py -rf
dc_use cg3 && SAN_SECONDS=45 dc_sanitize -k prefill
cd - > /dev/null
dc_use main && dc_run tests_main 170 python -m pytest -q -n 16 -p no:cacheprovider tests -m "not perf" -rf
