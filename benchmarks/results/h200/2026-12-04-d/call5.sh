# 2026-12-04-d call 5: sh = the swap kernel with CTA-shared activations from M = 2
# (kSwapShareMinM = 2; warps 0 .. NX - 1 each copy one 512-byte ldmatrix block of the unit's
# activation slice into the CTA's stage, one CTA barrier per unit, ring one deeper). Its decode
# and ops GPU tests, compute-sanitizer on the decode cases, then 4 rounds against main
# (6edc08d), eight layers, int4 and int8, M = 1, 2, 4, 8, 16 (M = 1 and 16 run unchanged code:
# controls).
source scripts/device_call.sh
dc_begin
dc_use sh && dc_run sh_tests 150 python -m pytest -q -n 16 -p no:cacheprovider tests/test_decode_gpu.py tests/test_ops_gpu.py -rf
SAN_SECONDS=60 dc_sanitize -k decode
ROUNDS=4 dc_ab "main sh" "--bits 4 8 --M 1 2 4 8 16 --no-cublas" 260
