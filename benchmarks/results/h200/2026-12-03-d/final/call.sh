#!/bin/bash
# 2026-12-03-d call 5: the final commit's build (b9a8811): the whole GPU suite, the sanitizers over every
# kernel family, and the decode bench (by-m) for the results folder
source scripts/device_call.sh
dc_begin
STAGES="prebuilt probe" OUT=$R bash scripts/gpu_check.sh > /dev/null 2>&1; dc_pack install
dc_run tests 175 python -m pytest -q -n 16 -p no:cacheprovider tests -m "not perf" -rf
SAN_SECONDS=60 dc_sanitize
dc_run decode 80 python benchmarks/bench_decode.py --bits 4 8 --M 1 16 32 64 128 --out $R/decode.json
