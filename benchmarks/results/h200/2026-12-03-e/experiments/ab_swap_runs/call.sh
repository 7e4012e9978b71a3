#!/bin/bash
# 2026-12-03-e call 2: swap_kernel 16-byte runs (benchmarks/experiments/decode_swap_runs.patch, built as
# `runs` on 8dc57a8) against main (8dc57a8): decode A/B at M = 1-8, the decode GPU tests and the
# sanitizers on it; the deterministic decode mode timed beside the default one (main).
source scripts/device_call.sh
dc_begin
ROUNDS=3 dc_ab "main runs" "--bits 4 8 --M 1 2 4 8 --no-cublas --settle 0.2" 200
dc_use runs && dc_run tests_runs 150 python -m pytest -q -n 16 -p no:cacheprovider tests/test_decode_gpu.py -rf
SAN_SECONDS=50 dc_sanitize -k decode
dc_use main && dc_run det 90 python benchmarks/bench_decode.py --bits 4 8 --M 1 16 32 64 --deterministic --no-cublas --out $R/det.json
dc_run nondet 90 python benchmarks/bench_decode.py --bits 4 8 --M 1 16 32 64 --no-cublas --out $R/nondet.json
