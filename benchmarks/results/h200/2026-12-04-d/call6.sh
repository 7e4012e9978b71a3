# 2026-12-04-d call 6: fin = the working tree to be committed: the int4 swap kernel with CTA-shared
# activations at M = 8 (kSwapShareMinM = 8, int4 only; call 5 measured M = 2-8) and the sm90 table's
# int8 dense crossover at 12288. Its decode / ops / crossover / op-error / dense GPU tests (the
# crossover tests check every boundary of the new table at M - 1 / M / M + 1), compute-sanitizer on
# the decode cases (one is int4 M = 8, N = 192: the shared path with a warp past the last column),
# then 4 rounds against main (6edc08d), int4, eight layers, M = 6, 7, 8.
source scripts/device_call.sh
dc_begin
dc_use fin && dc_run fin_tests 220 python -m pytest -q -n 16 -p no:cacheprovider tests/test_decode_gpu.py tests/test_ops_gpu.py tests/test_crossovers_gpu.py tests/test_op_errors_gpu.py tests/test_dense_gpu.py -rf
SAN_SECONDS=60 dc_sanitize -k decode
ROUNDS=4 dc_ab "main fin" "--bits 4 --M 6 7 8 --no-cublas" 120
