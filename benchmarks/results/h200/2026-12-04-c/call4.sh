# 2026-12-04-c call 4: the tree's final build (BT 192 with its refit constants, on 5b1b963) measured
# whole: the GPU suite, compute-sanitizer on the prefill cases, the dispatcher sweep (int4 + int8, every
# path, 3 interleaved rounds).
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests 240 python -m pytest -q -n 16 -p no:cacheprovider tests -rf
SAN_SECONDS=110 dc_sanitize -k prefill
M_SWEEP="1,16,24,32,40,48,56,64,72,80,96,128,192,256,384,512,768,1024,2048,4096,8192"
dc_run dispatch 200 python benchmarks/bench_dispatch.py --bits 4 8 --m "$M_SWEEP" --rounds 3 --out $R/dispatch
