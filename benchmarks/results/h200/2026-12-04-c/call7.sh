# 2026-12-04-c call 7: tests/test_prefill_gpu.py after the review refactor (one _check_planned helper,
# the two tile-format tests merged), on the final build (30b5057 kernels).
source scripts/device_call.sh && dc_begin && dc_use main && dc_run prefill_tests 150 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py -rf
