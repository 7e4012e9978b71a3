# 2026-12-04 call 4: the wgmma rate micro-benchmark (benchmarks/experiments/wgmma_rate.cu, built on
# the CPU machine for sm_90a), then the whole suite and the three sanitizers on the tree's build
# (6953716: the kernels and the dispatcher; the session's later commits change documents only).
source scripts/device_call.sh
dc_begin
dc_run wgmma_rate 60 ./benchmarks/experiments/wgmma_rate_sm90a.bin
dc_use main
dc_run tests 260 python -m pytest -q -n 16 -p no:cacheprovider tests -rf
SAN_SECONDS=90 dc_sanitize
