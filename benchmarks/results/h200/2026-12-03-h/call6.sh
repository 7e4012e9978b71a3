# 2026-12-03-h call 6: the final build (the row-staged gather, the act-order table split): the prefill,
# dispatch and ops GPU tests (the device budget left no room for the whole suite after a lost call).
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_final 150 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py tests/test_dispatch.py tests/test_ops_gpu.py -rf
