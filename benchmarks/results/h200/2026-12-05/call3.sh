# 2026-12-05 call 3, on the machine call 2 left warm (its command line, verbatim): the rest of the
# GPU suite at ad5fea4 (call 2 ran tests/test_crossovers_gpu.py and tests/test_dispatch.py).
source scripts/device_call.sh; dc_begin; dc_use main; dc_run tests 230 python -m pytest -q -n 16 -p no:cacheprovider tests -rf --deselect tests/test_crossovers_gpu.py; cat /tmp/res/log.txt
