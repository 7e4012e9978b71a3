# 2026-12-04-e call 1: nt = benchmarks/experiments/decode_swap_nt2_shared.patch on 43a10d6 (int4
# M = 9-16 on the CTA-shared swap kernel with two n8 token tiles; main runs gemm_kernel MT = 1
# there), s5 = main with kSwapShareMinM = 5 (int4 M = 5-7 CTA-shared too; timing probe, no tests).
# nt's decode / ops GPU tests with the patch's test files, compute-sanitizer on the decode cases
# (int4 M = 12 and 16, N = 192 added), then 4 rounds main / nt / s5, int4, eight layers,
# M = 1 (control, the M16 / M1 ratio), 5, 6, 7, 8, 9, 12, 16.
source scripts/device_call.sh
dc_begin
mkdir -p /tmp/tests_main && cp tests/test_decode_gpu.py tests/test_decode_emulation.py tests/test_sanitize_gpu.py /tmp/tests_main/
cp prebuilt/nt/tests/*.py tests/
dc_use nt && dc_run nt_tests 170 python -m pytest -q -n 16 -p no:cacheprovider tests/test_decode_gpu.py tests/test_ops_gpu.py tests/test_decode_emulation.py -rf
SAN_SECONDS=90 dc_sanitize -k decode
cp /tmp/tests_main/*.py tests/
ROUNDS=4 dc_ab "main nt s5" "--bits 4 --M 1 5 6 7 8 9 12 16 --no-cublas" 300
