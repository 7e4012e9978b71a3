# 2026-12-04-c call 1: (a) prefill_x_tail_zero (tailz = map + zero patches) against main, tail (map
# patch only) and mainb (a byte-identical copy of main: the A/A control), 4 rounds, order reversed
# every round; (b) tailz's prefill GPU tests; (c) main's whole suite, including the crossover tests
# written last session and never run; (d) tailz under compute-sanitizer, prefill cases.
source scripts/device_call.sh
dc_begin
mkdir -p prebuilt/mainb && cp prebuilt/_C.so prebuilt/_C_build.json prebuilt/mainb/
ROUNDS=4 dc_ab_prefill "main tail tailz mainb" \
  "--model llama-3-70b,llama-3-8b --m 100,160,192,300,600,1100 --paths prefill" "" 200
dc_use tailz && dc_run tailz_prefill_tests 90 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py -rf
dc_use main && dc_run tests 240 python -m pytest -q -n 16 -p no:cacheprovider tests -m "not perf" -rf --durations=15
dc_use tailz && SAN_SECONDS=50 dc_sanitize -k prefill
