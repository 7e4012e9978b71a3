# 2026-12-04-b call 5: the final tree (79fea55: int8 keeps prefill through M = 16383) whole: the GPU
# suite, then the dispatcher at the int8 points the table moved (M = 2048-8192, auto / prefill / dense /
# cuBLAS, 3 rounds).
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests 230 python -m pytest -q -n 16 -p no:cacheprovider tests -rf
dc_run dispatch8 100 python benchmarks/bench_dispatch.py --bits 8 --m 2048,4096,8192 --paths auto,prefill,dense,cublas --rounds 3 --out $R/dispatch8
