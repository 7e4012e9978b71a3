# 2026-12-03-h call 5. main = call 4's gather with gather_kernel only from M = the SM count (prep_kernel
# below: at M = 64 it was 0.95-1.02x gather_kernel's time); tests and sanitizers over the act-order cases,
# then the act-order dispatch sweep that sets the sm90 table's act-order dense crossover (2048, measured
# with the per-element gather).
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_main 200 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py tests/test_dispatch.py tests/test_decode_gpu.py -k "act or perm or dispatch or plan" -rf
SAN_SECONDS=60 dc_sanitize -k "perm"
dc_run dispatch_act 300 python benchmarks/bench_dispatch.py --bits 4 --act-order --m 256,512,1024,2048,3072,4096,8192 --paths auto,prefill,dense,cublas --rounds 3 --out $R/dispatch_act
