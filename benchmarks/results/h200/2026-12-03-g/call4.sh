#!/bin/bash
# 2026-12-03-g call 4 (build 0e4617a, this session's committed kernels): the whole suite, then the
# dispatcher sweep at M = 64-4096 for int4 and int8 (every path and cuBLAS bf16, interleaved rounds):
# the cuBLAS ratios after int8 prefill's fourth stage.
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_main 240 python -m pytest -q -n 16 -p no:cacheprovider tests -m "not perf" -rf
dc_run dispatch 150 python benchmarks/bench_dispatch.py --bits 4 8 --m 64,128,256,512,1024,2048,4096 --rounds 3 \
  --no-dequant --prune-decode 3 --out $R/dispatch
