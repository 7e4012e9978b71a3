# 2026-12-03-i call 6: the final build (e6e1e84's code; later commits change documents and scripts
# only): the whole GPU suite.
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_all 250 python -m pytest -q -n 16 -p no:cacheprovider tests -rf
